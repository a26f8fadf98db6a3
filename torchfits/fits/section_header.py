"""The header of an image section: NAXISn follow the cutout and the WCS keeps pointing at the sky.

A cutout that starts at pixel ``s`` (0-based) with step ``k`` maps its pixel ``p'`` (1-based) to
the parent's pixel ``s + 1 + (p' - 1) k``. Every pixel-offset convention astropy's WCS reads is
rewritten so every world coordinate stays the parent's: CRPIXia of every WCS version, the linear
matrix (CD, or PC/CDELT), SIP polynomials, the corner of a DSS plate solution (CNPIX1/2, and
X/YPIXELSZ for strided sections), IRAF's LTV/LTM, and, through `section_lookup_table`, the
WCSDVARR/D2IMARR tables of lookup-table distortions (their CRVAL counts parent pixels).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from .header import Card, Header, with_values

__all__ = ["section_header", "section_lookup_table", "SectionHeaders"]

_CRPIX = re.compile(r"^CRPIX([1-9][0-9]?)([A-Z]?)$")
_MATRIX = re.compile(r"^(CD|PC)([1-9][0-9]?)_([1-9][0-9]?)([A-Z]?)$")
_CDELT = re.compile(r"^CDELT([1-9][0-9]?)([A-Z]?)$")
_SIP = re.compile(r"^(A|B|AP|BP)_([0-9])_([0-9])$")
_LTV = re.compile(r"^LTV([1-9])$")
_LTM = re.compile(r"^LTM([1-9])_([1-9])$")
_CNPIX = re.compile(r"^CNPIX([12])$")
_PIXELSZ = {"XPIXELSZ": 1, "YPIXELSZ": 2}


def _alternates(header: Header) -> set[str]:
    """WCS versions present (``""`` primary, ``"A"``..``"Z"``), seen from any CRPIX card."""
    return {m.group(2) for m in (_CRPIX.match(k) for k in header) if m}


def section_header(header: Header, starts: Sequence[int], steps: Sequence[int],
                   counts: Sequence[int]) -> Header:
    """Return a copy of ``header`` describing the section ``(starts, steps, counts)``.

    Parameters
    ----------
    header : Header
        The parent image header.
    starts, steps, counts : sequence of int
        The section in NumPy (C) axis order: 0-based first pixel, positive step and length per
        axis; every axis is kept (a length-1 axis stays an axis).

    Returns
    -------
    Header
        NAXISn set to the counts; CRPIXn, CDi_j / PCi_j / CDELTn (strided sections), SIP
        ``A``/``B``/``AP``/``BP`` coefficients and LTVn/LTMi_j rewritten for every WCS version.
        DATASUM/CHECKSUM are dropped (the data changed).
    """
    ndim = len(counts)
    # FITS axis n (1-based) is NumPy axis ndim - n.
    start = {n: int(starts[ndim - n]) for n in range(1, ndim + 1)}
    step = {n: int(steps[ndim - n]) for n in range(1, ndim + 1)}
    if any(s <= 0 for s in step.values()):
        raise ValueError("an image section header needs positive steps")
    strided = any(s != 1 for s in step.values())
    # One step on every axis scales CDELT (works with CROTA too); unequal steps stretch the
    # columns of the matrix (CD, else PC with its defaults written out).
    uniform = len(set(step.values())) == 1
    out = Header()
    alts = _alternates(header)
    has_cd = {m.group(4) for m in (_MATRIX.match(k) for k in header) if m and m.group(1) == "CD"}
    for card in header.cards:
        key, value = card.key, card.value
        if key in ("DATASUM", "CHECKSUM"):
            continue
        if key.startswith("NAXIS") and key[5:].isdigit() and 1 <= int(key[5:]) <= ndim:
            value = int(counts[ndim - int(key[5:])])
        elif _CRPIX.match(key) and isinstance(value, (int, float)):
            n = int(_CRPIX.match(key).group(1))  # type: ignore[union-attr]
            if n in start:
                value = (value - start[n] - 1) / step[n] + 1
        elif strided and _MATRIX.match(key) and isinstance(value, (int, float)):
            kind, _i, j, alt = _MATRIX.match(key).groups()  # type: ignore[union-attr]
            # The matrix column j multiplies pixel axis j: a step there stretches that column.
            if kind == "CD" or (alt not in has_cd and not uniform):
                value = value * step.get(int(j), 1)
        elif strided and uniform and _CDELT.match(key) and isinstance(value, (int, float)):
            if _CDELT.match(key).group(2) not in has_cd:  # type: ignore[union-attr]
                value = value * step[1]
        elif strided and _SIP.match(key) and isinstance(value, (int, float)):
            kind, p, q = _SIP.match(key).groups()  # type: ignore[union-attr]
            sx, sy = step.get(1, 1), step.get(2, 1)
            value = value * sx ** int(p) * sy ** int(q) / (sx if kind in ("A", "AP") else sy)
        elif _LTV.match(key) and isinstance(value, (int, float)):
            n = int(_LTV.match(key).group(1))  # type: ignore[union-attr]
            if n in start:
                value = (value - start[n]) / step[n] if strided else value - start[n]
                if strided:
                    value = value - 1 / step[n] + 1
        elif strided and _LTM.match(key) and isinstance(value, (int, float)):
            i = int(_LTM.match(key).group(1))  # type: ignore[union-attr]
            value = value / step.get(i, 1)
        elif _CNPIX.match(key) and isinstance(value, (int, float)):
            # DSS plate solutions (read by WCSLIB through astropy) place image pixel p at plate
            # pixel p + CNPIX - 0.5, in pixels of XPIXELSZ/YPIXELSZ microns.
            n = int(key[5:])
            if n in start:
                value = value + start[n] if step[n] == 1 \
                    else (value + start[n] + 0.5 - step[n]) / step[n] + 0.5
        elif strided and key in _PIXELSZ and isinstance(value, (int, float)):
            value = value * step.get(_PIXELSZ[key], 1)
        out.append(Card(key, value, card.comment))
    if strided and not uniform:
        _add_strided_matrix(out, header, alts, has_cd, step, ndim)
    _add_iraf_defaults(out, header, start, step)
    return out


class SectionHeaders(Sequence[Header]):
    """The headers of many unstrided sections of one image (the stamps of a batch of cutouts),
    each built when it is asked for and equal to `section_header` of its section.

    Parameters
    ----------
    header : Header
        The parent image header.
    starts, counts : array_like of int, shape (N, ndim)
        Each section's first pixel (0-based, may be negative: a padded stamp) and length per
        axis, in NumPy (C) axis order.

    Notes
    -----
    Only CRPIXia, LTVn and CNPIXn move with an unstrided section's start, so each distinct
    shape's header is planned once and a stamp's header is a copy of it with those cards set
    (computed by `section_header`'s arithmetic, so the values are equal bit for bit). Parents
    whose cards these rules do not cover once (repeated keywords, IRAF defaults that appear
    with the start) take `section_header` itself.
    """

    def __init__(self, header: Header, starts: Any, counts: Any) -> None:
        self._parent = header
        self._starts = np.array(starts, dtype=np.int64, ndmin=2)
        self._counts = np.array(counts, dtype=np.int64, ndmin=2)
        if self._starts.shape != self._counts.shape:
            raise ValueError(f"starts {self._starts.shape} and counts {self._counts.shape} differ "
                             "in shape")
        self._templates: dict[tuple[int, ...], Header] = {}
        self._slots: dict[tuple[int, ...], dict[str, int]] = {}  # moving card → its position
        self._rows: tuple[list[list[int]], list[list[int]]] | None = None
        ndim = self._starts.shape[1]
        keys = [c.key for c in header.cards]
        moving: list[tuple[str, float, int, str]] = []
        for card in header.cards:
            key, value = card.key, card.value
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            m = _CRPIX.match(key)
            kind = "CRPIX" if m else "LTV" if _LTV.match(key) else "CNPIX" if _CNPIX.match(key) \
                else None
            if kind is None:
                continue
            n = int(m.group(1)) if m else int(key[5:] if kind == "CNPIX" else key[3:])
            if 1 <= n <= ndim:
                moving.append((key, value, n, kind))
        self._moving = moving
        iraf = any(_LTV.match(k) or _LTM.match(k) for k in keys)
        moved = {key for key, _, _, _ in moving}
        self._general = iraf or len(moved) != len(moving) or sum(k in moved for k in keys) != len(moving)

    def __len__(self) -> int:
        return int(self._starts.shape[0])

    @overload
    def __getitem__(self, i: int) -> Header: ...

    @overload
    def __getitem__(self, i: slice) -> list[Header]: ...

    def __getitem__(self, i: int | slice) -> Header | list[Header]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        k = int(i)
        if not -n <= k < n:
            raise IndexError(f"stamp {i} out of range for {n} stamps")
        if self._rows is None:
            self._rows = (self._starts.tolist(), self._counts.tolist())
        starts, counts = self._rows[0][k], self._rows[1][k]
        ndim = len(counts)
        if self._general:
            return section_header(self._parent, starts, (1,) * ndim, counts)
        template = self._templates.get(tuple(counts))
        if template is None:
            template = self._templates[tuple(counts)] = section_header(
                self._parent, (0,) * ndim, (1,) * ndim, counts)
            moved = {key for key, _, _, _ in self._moving}
            self._slots[tuple(counts)] = {c.key: i for i, c in enumerate(template.cards)
                                          if c.key in moved}
        slots = self._slots[tuple(counts)]
        changes = []
        for key, value, axis, kind in self._moving:
            start = starts[ndim - axis]
            if start:
                changes.append((slots[key],
                                (value - start - 1) / 1 + 1 if kind == "CRPIX"
                                else value - start if kind == "LTV" else value + start))
        return with_values(template, changes)

    def __iter__(self) -> Iterator[Header]:
        for k in range(len(self)):
            yield self[k]

    def __repr__(self) -> str:
        return f"SectionHeaders(n={len(self)})"


def _moved(value: float, step: int) -> float:
    """``value / step``, kept an int where it is one (CNPIX of an unstrided cutout)."""
    if step == 1:
        return value
    return value / step


def _add_iraf_defaults(out: Header, parent: Header, start: dict[int, int],
                       step: dict[int, int]) -> None:
    """Write the LTVn/LTMi_i a cutout needs where the parent has an IRAF physical system
    (any LTV/LTM card) and relied on the defaults (LTV 0, LTM identity)."""
    if not any(_LTV.match(k) or _LTM.match(k) for k in parent):
        return
    for n in sorted(start):
        if n > 9:
            break
        if f"LTV{n}" not in parent and (start[n] != 0 or step[n] != 1):
            out[f"LTV{n}"] = (-start[n] - 1 + step[n]) / step[n] if step[n] != 1 \
                else float(-start[n])
        if step[n] != 1 and f"LTM{n}_{n}" not in parent:
            out[f"LTM{n}_{n}"] = 1.0 / step[n]


def section_lookup_table(header: Header, data: Any, starts: Sequence[int],
                         steps: Sequence[int], axis: int = 1) -> tuple[Header, np.ndarray]:
    """The header and values of a distortion lookup table (a WCSDVARR or D2IMARR HDU) for a
    cutout of the image it corrects.

    The table maps parent image pixels to its own through ``CRVALj`` (a parent pixel, 1-based)
    and ``CDELTj`` (parent pixels per table pixel); its values are corrections in parent pixels
    along ``axis``. A cutout moves CRVAL, divides CDELT by the step and, for a strided cutout,
    the values by the step along ``axis``; the table's pixels are kept.

    Parameters
    ----------
    header : Header
        The lookup table's header; its axis j samples image axis j (``DPj.AXIS.j = j``).
    data : array_like
        The table values.
    starts, steps : sequence of int
        The cutout, in NumPy (C) axis order, as given to `section_header`.
    axis : int
        The FITS image axis the table corrects (``j`` of ``CPDISj``/``D2IMDISj``).

    Returns
    -------
    (Header, numpy.ndarray)
    """
    ndim = len(starts)
    start = {n: int(starts[ndim - n]) for n in range(1, ndim + 1)}
    step = {n: int(steps[ndim - n]) for n in range(1, ndim + 1)}
    if any(s <= 0 for s in step.values()):
        raise ValueError("a lookup table for an image section needs positive steps")
    if axis not in step:
        raise ValueError(f"axis {axis} is not an axis of the {ndim}-d section")
    out = Header()
    for card in header.cards:
        key, value = card.key, card.value
        if key in ("DATASUM", "CHECKSUM"):
            continue
        m = re.match(r"^(CRVAL|CDELT)([1-9])$", key)
        if m and isinstance(value, (int, float)) and int(m.group(2)) in start:
            n = int(m.group(2))
            if m.group(1) == "CRVAL":
                value = _moved(value - start[n] - 1 + step[n], step[n])
            else:
                value = value / step[n]
        out.append(Card(key, value, card.comment))
    for n in sorted(start):
        # Absent cards default to CRVAL 0 and CDELT 1 (astropy's reading).
        if f"CRVAL{n}" not in header and (start[n] or step[n] != 1):
            out[f"CRVAL{n}"] = _moved(float(-start[n] - 1 + step[n]), step[n])
        if f"CDELT{n}" not in header and step[n] != 1:
            out[f"CDELT{n}"] = 1.0 / step[n]
    values = np.asarray(data)
    if step[axis] != 1:
        values = values / step[axis]
    return out, values


def _add_strided_matrix(out: Header, parent: Header, alts: set[str], has_cd: set[str],
                        step: dict[int, int], ndim: int) -> None:
    """Write the PC terms a strided section needs where the parent relied on the defaults."""
    naxes = max(int(parent.get("WCSAXES", ndim) or ndim), ndim)
    for alt in sorted(alts):
        if alt in has_cd:
            continue
        if ndim >= 2 and _crota_to_pc(out, parent, alt, step):
            continue
        for j in range(1, ndim + 1):
            if step[j] == 1:
                continue
            for i in range(1, naxes + 1):
                key = f"PC{i}_{j}{alt}"
                if key not in parent and i == j:
                    # PCi_i defaults to 1; the stretched column needs it written out.
                    out[key] = float(step[j])


def _crota_to_pc(out: Header, parent: Header, alt: str, step: dict[int, int]) -> bool:
    """Unequal steps under a CROTA rotation (no PC, no CD): CROTA cannot stretch one pixel
    axis, so the rotation is written as the PC matrix it stands for (as WCSLIB reads it), with
    the stretched columns, and the CROTA cards go."""
    if any(m and m.group(1) == "PC" and m.group(4) == alt
           for m in (_MATRIX.match(k) for k in parent)):
        return False
    rho = next((parent[k] for k in (f"CROTA2{alt}", f"CROTA1{alt}") if k in parent), None)
    if not isinstance(rho, (int, float)):
        return False
    c, s = math.cos(math.radians(rho)), math.sin(math.radians(rho))
    d1 = float(parent.get(f"CDELT1{alt}", 1.0))
    d2 = float(parent.get(f"CDELT2{alt}", 1.0))
    pc = {(1, 1): c, (1, 2): -s * d2 / d1, (2, 1): s * d1 / d2, (2, 2): c}
    for (i, j), v in pc.items():
        out[f"PC{i}_{j}{alt}"] = v * step.get(j, 1)
    for n in (1, 2):
        out.remove(f"CROTA{n}{alt}", ignore_missing=True)
    return True

"""The header of an image section: NAXISn follow the cutout and the WCS keeps pointing at the sky.

A cutout that starts at pixel ``s`` (0-based) with step ``k`` maps its pixel ``p'`` (1-based) to
the parent's pixel ``s + 1 + (p' - 1) k``; CRPIX, the linear matrix (CD, or PC/CDELT), SIP
polynomials and IRAF's LTV/LTM are rewritten so every world coordinate stays the parent's.
"""
from __future__ import annotations

import re
from typing import Sequence

from .header import Card, Header

__all__ = ["section_header"]

_CRPIX = re.compile(r"^CRPIX([1-9][0-9]?)([A-Z]?)$")
_MATRIX = re.compile(r"^(CD|PC)([1-9][0-9]?)_([1-9][0-9]?)([A-Z]?)$")
_CDELT = re.compile(r"^CDELT([1-9][0-9]?)([A-Z]?)$")
_SIP = re.compile(r"^(A|B|AP|BP)_([0-9])_([0-9])$")
_LTV = re.compile(r"^LTV([1-9])$")
_LTM = re.compile(r"^LTM([1-9])_([1-9])$")


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
        out.append(Card(key, value, card.comment))
    if strided and not uniform:
        _add_strided_matrix(out, header, alts, has_cd, step, ndim)
    return out


def _add_strided_matrix(out: Header, parent: Header, alts: set[str], has_cd: set[str],
                        step: dict[int, int], ndim: int) -> None:
    """Write the PC terms a strided section needs where the parent relied on the defaults."""
    naxes = max(int(parent.get("WCSAXES", ndim) or ndim), ndim)
    for alt in sorted(alts):
        if alt in has_cd:
            continue
        for j in range(1, ndim + 1):
            if step[j] == 1:
                continue
            for i in range(1, naxes + 1):
                key = f"PC{i}_{j}{alt}"
                if key not in parent and i == j:
                    # PCi_i defaults to 1; the stretched column needs it written out.
                    out[key] = float(step[j])

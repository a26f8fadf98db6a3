"""HEALPix coverage in the statistics sidecar: which sky cells each row range of a file holds, and
which row ranges a top-level ``cone(...)`` term can match (so the others are never read).

A file's sky entry (the ``"sky"`` key of its sidecar entry, `torchfits.tables.stats_index`)::

    {"ra": "RA", "dec": "DEC", "order": 10, "sorted": true,
     "rows": [0, 1100, 2300, ..., nrows],
     "counts": [1, 3, ...],
     "cells": [lo, hi, lo, hi, lo, hi, lo, hi, ...]}

Row range ``i`` is ``rows[i]:rows[i+1]``; its coverage is the next ``counts[i]`` ``(lo, hi)``
pairs of ``cells`` (one flat list, which loads several times faster than a list per range): a
MOC written as half-open ranges of nested HEALPix indices at ``order`` (a coarser cell ``c`` at
order ``d`` is the range ``[c * 4**(order-d), (c+1) * 4**(order-d))``). Rows whose position is null, NaN or
infinite are in no cell: a cone never matches them. In a file ordered by HEALPix cell
(``torchfits sort --healpix``, or any file whose cells never decrease) the ranges follow cell
boundaries, about `RANGE_ROWS` rows each, so a small cone reads only the few ranges around it;
in any other file the ranges are the statistics chunks. Each range's coverage holds at most
`RANGE_CELL_RANGES` (ordered file) or `MAX_CELL_RANGES` (chunk) cell ranges: a wider spread is
described at a coarser order.

Cell indices and cone coverages come from cdshealpix (the ``sky`` extra), imported when used.
"""
from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..query import tree as _tree

__all__ = ["DEFAULT_ORDER", "MAX_ORDER", "RANGE_ROWS", "MAX_CELL_RANGES", "RANGE_CELL_RANGES",
           "healpix_cells", "sky_entry", "SkyRanges", "cone_rows", "cone_terms", "check_order",
           "sky_columns", "coverage", "intersect", "overlaps", "npix", "coordinates"]

DEFAULT_ORDER = 10  # cells of 3.4 arcmin: a chunk of clustered rows is a few hundred of them
MAX_ORDER = 29  # cdshealpix's deepest order
RANGE_ROWS = 1024  # rows per row range of a HEALPix-ordered file (at least; a cell is never split)
MAX_CELL_RANGES = 64  # cell ranges kept per chunk of an unordered file
RANGE_CELL_RANGES = 4  # cell ranges kept per row range of an ordered file (sparse rows stay tight)
# the cone is widened by this much before its cells are looked up: cell assignment and cone
# coverage are separate float computations, and a row on a cell edge must never be lost
_MARGIN_DEG = 1e-6
_BIG = 1 << 62
_CELL_DEG = 58.63  # the side of an order-0 cell, about (4 pi / 12) ** 0.5 radians


def _cdshealpix() -> Any:
    try:
        import cdshealpix.nested as nested
    except ImportError:
        raise ImportError("HEALPix sky indexes need cdshealpix: pip install 'torchfits[sky]'") from None
    return nested


def check_order(order: Any) -> int:
    """A HEALPix order (0 ... 29) as an int; ValueError otherwise."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) \
            or not 0 <= int(order) <= MAX_ORDER:
        raise ValueError(f"HEALPix order must be an integer in 0..{MAX_ORDER}, got {order!r}")
    return int(order)


def sky_columns(sky: Sequence[str], names: Sequence[str], label: str) -> tuple[str, str]:
    """The table's own spelling of the RA and Dec columns ``sky`` names (case-insensitive)."""
    from ..errors import ColumnNotFoundError
    from ..query.names import did_you_mean

    found = []
    for wanted in sky:
        match = [n for n in names if n.lower() == str(wanted).lower()]
        if not match:
            raise ColumnNotFoundError(f"{label}: no column {wanted!r} for the sky index"
                                      f"{did_you_mean(str(wanted), list(names))}")
        found.append(match[0])
    return found[0], found[1]


def coordinates(column: Any, name: str) -> np.ndarray:
    """A decoded coordinate column (Arrow) as float64 degrees, nulls as NaN (in no cell)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise TypeError(f"sky index: column {name!r} is {column.type}, not a number of degrees")
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def npix(order: int) -> int:
    """Cells of the whole sky at ``order``."""
    return 12 << (2 * order)


def healpix_cells(ra: Any, dec: Any, order: int) -> np.ndarray:
    """Nested HEALPix index at ``order`` of every position (degrees), as uint64.

    A position with a null, NaN or infinite coordinate gets ``12 * 4**order`` (past every
    cell, so it sorts last). A finite declination beyond ±90° is the point the cone test's
    trigonometry puts there (through the pole, RA turned by 180°).
    """
    order = check_order(order)
    ra = np.asarray(ra, dtype=np.float64)
    dec = np.asarray(dec, dtype=np.float64)
    out = np.full(ra.shape, npix(order), dtype=np.uint64)
    valid = np.isfinite(ra) & np.isfinite(dec)
    if not valid.any():
        return out
    lon = np.radians(ra[valid])
    lat = np.radians(dec[valid])
    beyond = np.abs(lat) > math.pi / 2
    if beyond.any():
        # what separation_deg sees: the unit vector of (lon, lat), whatever lat is
        x = np.cos(lat[beyond]) * np.cos(lon[beyond])
        y = np.cos(lat[beyond]) * np.sin(lon[beyond])
        z = np.sin(lat[beyond])
        lon[beyond] = np.arctan2(y, x)
        lat[beyond] = np.arcsin(np.clip(z, -1.0, 1.0))
    import astropy.units as u
    from astropy.coordinates import Latitude, Longitude

    cells = _cdshealpix().lonlat_to_healpix(Longitude(lon, u.rad), Latitude(lat, u.rad), order)
    out[valid] = cells
    return out


def _runs(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique cells → the half-open ranges of consecutive ones."""
    if not cells.size:
        return cells, cells
    breaks = np.flatnonzero(np.diff(cells) != 1)
    starts = cells[np.r_[0, breaks + 1]]
    stops = cells[np.r_[breaks, cells.size - 1]] + np.uint64(1)
    return starts, stops


def coverage(cells: np.ndarray, order: int, max_ranges: int = MAX_CELL_RANGES) -> list[int]:
    """The MOC of some rows' cells (uint64 at ``order``; the invalid marker is left out) as a
    flat ``[lo, hi, lo, hi, ...]`` list at ``order``, coarsened one order at a time until at
    most ``max_ranges`` ranges remain."""
    cells = np.unique(cells[cells < np.uint64(npix(order))])
    depth = order
    while True:
        starts, stops = _runs(cells)
        if len(starts) <= max_ranges or depth == 0:
            break
        cells = np.unique(cells >> np.uint64(2))
        depth -= 1
    shift = np.uint64(2 * (order - depth))
    flat = np.empty(2 * len(starts), dtype=np.uint64)
    flat[0::2] = starts << shift
    flat[1::2] = stops << shift
    return [int(v) for v in flat]


def _sorted_depth(cells: np.ndarray, order: int) -> int | None:
    """The finest order at which ``cells`` (at ``order``, invalid marker last) never decrease,
    or None when not even the 12 base cells are in order."""
    if cells.size < 2:
        return order
    a, b = cells[:-1], cells[1:]
    down = b < a
    if not down.any():
        return order
    # a descent disappears at the first order where both cells share a parent
    bits = int(np.max(a[down] ^ b[down])).bit_length()
    depth = order - (bits + 1) // 2
    return depth if depth >= 0 else None


def sky_entry(cells: np.ndarray, order: int, chunk_rows: int, ra: str, dec: str) -> dict[str, Any]:
    """The sidecar's sky entry for a whole file, from every row's cell at ``order``."""
    n = int(cells.size)
    if n == 0:
        return _entry(ra, dec, order, True, [0], [])
    depth = _sorted_depth(cells, order)
    if depth is None:
        rows = list(range(0, n, chunk_rows)) + [n]
        ranges = [coverage(cells[a:b], order) for a, b in zip(rows[:-1], rows[1:])]
        return _entry(ra, dec, order, False, rows, ranges)
    shift = np.uint64(2 * (order - depth))
    parent = cells >> shift
    changes = np.flatnonzero(parent[1:] != parent[:-1]) + 1  # where a new cell starts
    # cut at the first cell start past every multiple of RANGE_ROWS: ranges of about RANGE_ROWS
    # rows, never splitting a cell
    targets = np.arange(RANGE_ROWS, n, RANGE_ROWS)
    pos = np.searchsorted(changes, targets)
    cuts = np.unique(changes[pos[pos < changes.size]])
    bounds = np.concatenate(([0], cuts, [n])).astype(np.int64)
    ranges = [coverage(cells[a:b], order, RANGE_CELL_RANGES) for a, b in zip(bounds[:-1], bounds[1:])]
    return _entry(ra, dec, order, True, [int(v) for v in bounds], ranges)


def _entry(ra: str, dec: str, order: int, ordered: bool, rows: list[int],
           ranges: list[list[int]]) -> dict[str, Any]:
    return {"ra": ra, "dec": dec, "order": order, "sorted": ordered, "rows": rows,
            "counts": [len(r) // 2 for r in ranges], "cells": [v for r in ranges for v in r]}


class SkyRanges:
    """A file's loaded sky entry: row ranges and their cell ranges as arrays."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.ra = str(entry["ra"])
        self.dec = str(entry["dec"])
        self.order = check_order(entry["order"])
        self.sorted = bool(entry.get("sorted", False))
        self.rows = np.asarray(entry["rows"], dtype=np.int64)
        counts = np.asarray(entry["counts"], dtype=np.int64)
        flat = np.asarray(entry["cells"], dtype=np.uint64)
        if counts.size != self.rows.size - 1 or flat.size != 2 * int(counts.sum()) or (counts < 0).any():
            raise ValueError("sky entry: row ranges, counts and cell ranges disagree")
        self.lo = flat[0::2]
        self.hi = flat[1::2]
        self.owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)

    @property
    def nrows(self) -> int:
        return int(self.rows[-1])

    def matches(self, ra: str, dec: str) -> bool:
        """Whether ``ra``/``dec`` name this entry's columns (case-insensitive)."""
        return ra.lower() == self.ra.lower() and dec.lower() == self.dec.lower()

    def cone_rows(self, ra0: float, dec0: float, radius: float) -> list[tuple[int, int]]:
        """The row ranges whose cells a cone may touch, in order, adjacent ones merged."""
        q_lo, q_hi = _cone_cells(float(ra0), float(dec0), float(radius), self.order)
        if not self.lo.size or not q_lo.size:
            return []
        # a stored range [lo, hi) meets the query where the first query range ending after lo
        # starts before hi (query ranges are sorted and disjoint)
        k = np.searchsorted(q_hi, self.lo, side="right")
        hit = k < q_lo.size
        hit[hit] &= q_lo[k[hit]] < self.hi[hit]
        owners = np.unique(self.owner[hit])
        out: list[tuple[int, int]] = []
        for i in owners:
            a, b = int(self.rows[i]), int(self.rows[i + 1])
            if a >= b:
                continue
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out


@functools.lru_cache(maxsize=256)
def _cone_cells(ra0: float, dec0: float, radius: float, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, merged half-open ranges of cells at ``order`` that a cone may touch.

    The cone's cells come from cdshealpix's ``cone_search`` at a depth where a cell is about an
    eighth of the radius (a few hundred cells, whatever the radius), and are then grown by
    their neighbours: cone coverages near the poles can miss a cell the circle crosses (healpy's
    ``query_disc`` has the same defect), and a cone search must never lose a row. The one-cell
    margin costs a few more cells around the edge.
    """
    r = radius + _MARGIN_DEG
    if r >= 90.0:
        return (np.array([0], dtype=np.uint64), np.array([npix(order)], dtype=np.uint64))
    import astropy.units as u
    from astropy.coordinates import Latitude, Longitude

    nested = _cdshealpix()
    depth = min(order, max(0, int(math.floor(math.log2(_CELL_DEG / r))) + 3))
    ipix, _, _ = nested.cone_search(Longitude(ra0 % 360.0, u.deg), Latitude(dec0, u.deg), r * u.deg,
                                    depth, flat=True)
    ipix = np.asarray(ipix, dtype=np.uint64)
    around = np.asarray(nested.neighbours(ipix, depth), dtype=np.int64)
    cells = np.unique(np.concatenate([ipix, around[around >= 0].astype(np.uint64)]))
    starts, stops = _runs(cells)
    shift = np.uint64(2 * (order - depth))
    return starts << shift, stops << shift


def cone_terms(expr: Any) -> list[Any]:
    """The top-level ``cone(...)`` conjuncts of a predicate tree whose coordinates are columns."""
    if expr is None:
        return []
    return [t for t in _tree.conjuncts(expr) if isinstance(t, _tree.Cone)
            and isinstance(t.ra, _tree.Column) and isinstance(t.dec, _tree.Column)]


def cone_rows(expr: Any, sky: SkyRanges | None) -> list[tuple[int, int]] | None:
    """The row ranges a predicate may select in a file with sky entry ``sky``: the intersection
    of what each top-level cone on the entry's columns allows; None when no such cone
    restricts the rows (read them all)."""
    if sky is None:
        return None
    allowed: list[tuple[int, int]] | None = None
    for term in cone_terms(expr):
        if not sky.matches(term.ra.name, term.dec.name):
            continue
        try:
            ra0, dec0, radius = float(term.ra0), float(term.dec0), float(term.radius)
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(ra0) and math.isfinite(dec0) and math.isfinite(radius)) \
                or not -90.0 <= dec0 <= 90.0 or radius < 0:
            continue  # the cone's own check reports it
        ranges = sky.cone_rows(ra0, dec0, radius)
        allowed = ranges if allowed is None else intersect(allowed, ranges)
    return allowed


def overlaps(ranges: Sequence[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether ``[lo, hi)`` meets any of the sorted, disjoint half-open ``ranges``."""
    k = bisect.bisect_right(ranges, (lo, _BIG))  # the first range starting after lo
    return (k > 0 and ranges[k - 1][1] > lo) or (k < len(ranges) and ranges[k][0] < hi)


def intersect(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The intersection of two sorted lists of disjoint half-open ranges."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out

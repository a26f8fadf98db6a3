"""Cross-matching two catalogs on the sky: pairs of rows within a radius, nearest or all.

``crossmatch`` reads both sides (files, datasets, Arrow tables) through the scanner with a
projection, finds the pairs on a 3-D grid of unit vectors (the ``_skymatch`` kernel) and
decides each one by its separation, 2 asin(c/2) of the chord c (equal to the Vincenty
separation of :mod:`torchfits.query.sky` to 1e-12 deg); ``torchfits.dask.crossmatch`` runs the
same pair finder per HEALPix partition (docs/sky.md).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import ColumnNotFoundError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["crossmatch"]

# the largest radius: beyond it a partition's neighbour margin stops being the 8 HEALPix
# neighbours at the coarsest order, and an "all" match is a join of most rows with most rows
MAX_RADIUS_DEG = 10.0
SEPARATION = "separation_deg"
# left rows a pass of the pair finder takes at once: bounds the candidate arrays
_CHUNK_ROWS = 1 << 20
# a cell's side in bits per axis: three of them make an int64 key
_AXIS_BITS = 21


class MatchPlan(NamedTuple):
    """A cross-match's checked arguments (what the Dask partitions receive too)."""

    radius: float
    how: str
    ra: tuple[str, str]
    dec: tuple[str, str]
    columns: tuple[list[str] | None, list[str] | None]
    suffixes: tuple[str, str]


def _pair_of(value: Any, what: str) -> tuple[Any, Any]:
    if isinstance(value, str):
        return value, value
    if isinstance(value, Sequence) and len(value) == 2:
        return value[0], value[1]
    raise TypeError(f"{what} must be a column name or a (left, right) pair, got {value!r}")


def _column_list(value: Any, side: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or \
            not all(isinstance(c, str) for c in value):
        raise TypeError(f"columns of the {side} side must be a list of names or None, got {value!r}")
    return list(value)


def check_radius(radius_deg: Any) -> float:
    """The radius as a float in degrees, in (0, 10]."""
    try:
        r = float(radius_deg)
    except (TypeError, ValueError):
        raise TypeError(f"radius_deg must be a number of degrees, got {radius_deg!r}") from None
    if not (math.isfinite(r) and 0.0 < r <= MAX_RADIUS_DEG):
        raise ValueError(f"radius_deg must be finite, positive and at most {MAX_RADIUS_DEG:g} degrees, "
                         f"got {r}")
    return r


def plan_match(radius_deg: Any, *, ra: Any, dec: Any, columns: Any, how: str, suffixes: Any) -> MatchPlan:
    """Check a cross-match's arguments (both entry points share these rules)."""
    r = check_radius(radius_deg)
    if how not in ("nearest", "all"):
        raise ValueError(f'how must be "nearest" or "all", got {how!r}')
    ra_pair = _pair_of(ra, "ra")
    dec_pair = _pair_of(dec, "dec")
    for name in (*ra_pair, *dec_pair):
        if not isinstance(name, str):
            raise TypeError(f"coordinate column names must be strings, got {name!r}")
    if columns is None:
        cols: tuple[list[str] | None, list[str] | None] = (None, None)
    elif isinstance(columns, tuple | list) and len(columns) == 2 and \
            not all(isinstance(c, str) for c in columns):
        cols = (_column_list(columns[0], "left"), _column_list(columns[1], "right"))
    else:
        raise TypeError("columns must be None (every column of both sides) or a pair "
                        f"(left_columns, right_columns), each a list of names or None; got {columns!r}")
    sfx = _pair_of(suffixes, "suffixes")
    if not all(isinstance(s, str) for s in sfx) or sfx[0] == sfx[1]:
        raise ValueError(f"suffixes must be two different strings, got {suffixes!r}")
    return MatchPlan(r, how, ra_pair, dec_pair, cols, sfx)


# ---------------------------------------------------------------------------------------------
# reading each side


def find_column(names: Sequence[str], name: str, side: str) -> str:
    """``name`` as the catalog spells it (an exact match first, else the one case-insensitive one)."""
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ColumnNotFoundError(f"column {name!r} is not in the {side} catalog (columns: {', '.join(names)})")


def is_path_list(source: Any) -> bool:
    """Whether ``source`` is a non-empty list or tuple of paths."""
    return isinstance(source, list | tuple) and len(source) > 0 and all(
        isinstance(s, str | os.PathLike) for s in source)


def read_side(source: Any, ra: str, dec: str, columns: list[str] | None,
              side: str) -> tuple[pa.Table, str, str, list[str]]:
    """One side as an Arrow table holding its output columns and coordinates.

    Returns the table, the spelling of its RA and Dec columns, and its output columns.
    """
    import pyarrow as pa

    from ..tables.dataset import FitsDataset
    from ..tables.scan import scan

    if isinstance(source, pa.RecordBatch):
        source = pa.Table.from_batches([source])
    if isinstance(source, pa.Table | FitsDataset):
        names = list(source.schema.names)
    elif isinstance(source, str | os.PathLike) or is_path_list(source):
        names = list(scan(source).schema.names)
    else:
        raise TypeError(f"the {side} catalog must be a path, URL, glob, list of paths, FitsDataset or "
                        f"pyarrow Table/RecordBatch, got {type(source).__name__}")
    ra_name, dec_name = find_column(names, ra, side), find_column(names, dec, side)
    out = names if columns is None else [find_column(names, c, side) for c in columns]
    wanted = list(dict.fromkeys([*out, ra_name, dec_name]))
    if isinstance(source, pa.Table):
        table = source.select(wanted)
    elif isinstance(source, FitsDataset):
        table = source.to_table(columns=wanted)
    else:
        table = scan(source, columns=wanted).to_arrow()
    return table, ra_name, dec_name, out


def coordinates(table: pa.Table, name: str) -> np.ndarray:
    """A coordinate column as float64 NumPy (nulls → NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(name)
    if col.null_count:
        col = pc.fill_null(col.cast(pa.float64()), float("nan"))
    out = col.to_numpy()
    if out.dtype != np.float64:
        out = out.astype(np.float64)
    return np.asarray(out)


# ---------------------------------------------------------------------------------------------
# the pair finder


def _unit_vectors(ra: np.ndarray, dec: np.ndarray) -> np.ndarray:
    """(n, 3) unit vectors: a row gather then reads one cache line a point."""
    from .._kernels import _skymatch

    out = np.empty((ra.size, 3), np.float64)
    _skymatch.unit_vectors(np.ascontiguousarray(ra, np.float64), np.ascontiguousarray(dec, np.float64), out)
    return out


def _cell_keys(xyz: np.ndarray, h: float, n: int) -> np.ndarray:
    # cell indices from 1 (room for a -1 neighbour) and below n = _axis_cells(h)
    from .._kernels import _skymatch

    out = np.empty(xyz.shape[0], np.int64)
    _skymatch.cell_keys(xyz, h, n, out)
    return out


def _axis_cells(h: float) -> int:
    return int(2.0 / h) + 3


def _argsort(keys: np.ndarray, n: int) -> np.ndarray:
    """The stable sorting permutation of cell keys (radix passes: linear time)."""
    from .._kernels import _skymatch

    out = np.empty(keys.size, np.int64)
    _skymatch.argsort_keys(keys, max(1, 3 * n.bit_length()), out, np.empty((2, 2 * keys.size), np.int64),
                           np.empty(65537, np.int64))
    return out


def _valid_rows(ra: np.ndarray, dec: np.ndarray, side: str) -> np.ndarray:
    ok = np.isfinite(ra) & np.isfinite(dec)
    if np.any(np.abs(dec[ok]) > 90.0):
        raise ValueError(f"the {side} catalog has declinations outside [-90, 90]")
    return np.flatnonzero(ok)


class _Grid:
    """The right side's unit vectors in cubic cells of side ``h``, sorted by cell.

    ``h`` is at least twice the chord of the radius, so a point's sphere of that chord reaches
    at most one neighbour cell along each axis, and only when the point lies within a chord of
    that face; it is grown past that so that an all-sky catalog has about one point a cell.
    """

    def __init__(self, xyz: np.ndarray, rows: np.ndarray, chord: float) -> None:
        count = xyz.shape[0]
        # three axis indices of at most 21 bits make a key below 2**63
        h_min = max(2.05 * chord, 2.0 / ((1 << _AXIS_BITS) - 4))
        h = max(h_min, math.sqrt(4 * math.pi / max(count, 1)))
        for _ in range(3):
            n = _axis_cells(h)
            keys = _cell_keys(xyz, h, n)
            order = _argsort(keys, n)
            sorted_keys = keys[order]
            starts = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
            per_cell = count / max(starts.size, 1)
            if per_cell <= 4.0 or h <= h_min:
                break
            # a dense catalog (a small field): smaller cells, fewer candidates a point
            h = max(h_min, h / math.sqrt(per_cell / 2.0))
        self.h, self.n, self.chord = h, n, chord
        self.xyz = np.ascontiguousarray(xyz[order])
        self.rows = np.ascontiguousarray(rows[order])
        # one entry per occupied cell: its key, first sorted position and count
        self.cell_keys = np.ascontiguousarray(sorted_keys[starts])
        self.cell_start = starts.astype(np.int64)
        self.cell_count = np.diff(np.append(starts, count)).astype(np.int64)

    def pairs(self, xyz: np.ndarray, rows: np.ndarray, chord2: float,
              how: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(left row, right row, squared chord) of the pairs within ``chord2``: the nearest
        right point of each left point, or all."""
        from .._kernels import _skymatch

        # left points in cell order: consecutive lookups touch neighbouring cells
        by_cell = _argsort(_cell_keys(xyz, self.h, self.n), self.n)
        lxyz, rows = np.ascontiguousarray(xyz[by_cell]), rows[by_cell]
        reach = (self.chord * (1 + 1e-9) + 1e-15) / self.h
        grid = (self.xyz, self.rows, self.cell_keys, self.cell_start, self.cell_count, self.n, self.h,
                reach, chord2)
        out = np.empty(rows.size, np.int64)
        if how == "nearest":
            d2 = np.empty(rows.size, np.float64)
            _skymatch.nearest(lxyz, *grid, out, d2)
            hit = np.flatnonzero(out >= 0)
            return rows[hit], self.rows[out[hit]], d2[hit]
        total = _skymatch.count_pairs(lxyz, *grid, out)
        offsets = np.cumsum(out) - out
        pos = np.empty(total, np.int64)
        d2 = np.empty(total, np.float64)
        _skymatch.fill_pairs(lxyz, *grid, offsets, pos, d2)
        return np.repeat(rows, out), self.rows[pos], d2


def _chord_to_deg(d2: np.ndarray) -> np.ndarray:
    # the angle of a chord: 2 asin(c / 2), well conditioned for every radius allowed (<= 10 deg);
    # it equals Vincenty's formula (separation_deg) to 1e-12 deg there
    return np.asarray(np.degrees(2.0 * np.arcsin(np.sqrt(d2) * 0.5)))


def match_pairs(ra1: np.ndarray, dec1: np.ndarray, ra2: np.ndarray, dec2: np.ndarray, radius: float,
                how: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pairs within ``radius`` degrees: (left rows, right rows, separations in degrees).

    Pairs are ordered by left row, then separation, then right row; ``how="nearest"`` keeps the
    first pair of each left row. Rows with a NaN coordinate never match.
    """
    left, right = _valid_rows(ra1, dec1, "left"), _valid_rows(ra2, dec2, "right")
    if left.size == 0 or right.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
    chord = 2.0 * math.sin(math.radians(radius) / 2.0)
    grid = _Grid(_unit_vectors(ra2[right], dec2[right]), right, chord)
    # the chord test in the kernel keeps a little more; the separation decides
    chord2 = (chord * (1 + 1e-6)) ** 2 + 1e-24
    parts_l, parts_r, parts_s = [], [], []
    for start in range(0, left.size, _CHUNK_ROWS):
        rows = left[start:start + _CHUNK_ROWS]
        li, ri, d2 = grid.pairs(_unit_vectors(ra1[rows], dec1[rows]), rows, chord2, how)
        sep = _chord_to_deg(d2)
        keep = np.flatnonzero(sep <= radius)
        parts_l.append(li[keep])
        parts_r.append(ri[keep])
        parts_s.append(sep[keep])
    li, ri, sep = np.concatenate(parts_l), np.concatenate(parts_r), np.concatenate(parts_s)
    if how == "nearest":
        # one pair a left row: place them by row (no sort)
        slot = np.full(ra1.size, -1, np.int64)
        slot[li] = np.arange(li.size)
        order = slot[slot >= 0]
    else:
        order = np.lexsort((ri, sep, li))
    return li[order], ri[order], sep[order]


# ---------------------------------------------------------------------------------------------
# the result


def output_names(left: list[str], right: list[str], suffixes: tuple[str, str]) -> tuple[list[str], list[str]]:
    """The result's column names: a suffix only on names both sides have (as ``pandas.merge``)."""
    both = set(left) & set(right)
    lnames = [n + suffixes[0] if n in both else n for n in left]
    rnames = [n + suffixes[1] if n in both else n for n in right]
    names = [*lnames, *rnames, SEPARATION]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"the cross-match result would repeat the column names {dup}; "
                         "choose other suffixes or columns")
    return lnames, rnames


def join_rows(left: pa.Table, lcols: list[str], right: pa.Table, rcols: list[str], li: np.ndarray,
              ri: np.ndarray, sep: np.ndarray, suffixes: tuple[str, str]) -> pa.Table:
    """Both sides' rows of each pair side by side, and the separation."""
    import pyarrow as pa

    lnames, rnames = output_names(lcols, rcols, suffixes)
    lt = left.select(lcols).take(pa.array(li))
    rt = right.select(rcols).take(pa.array(ri))
    arrays = [*lt.columns, *rt.columns, pa.chunked_array([pa.array(sep, pa.float64())])]
    fields = [f.with_name(n) for f, n in zip([*lt.schema, *rt.schema], [*lnames, *rnames], strict=True)]
    return pa.Table.from_arrays(arrays, schema=pa.schema([*fields, pa.field(SEPARATION, pa.float64())]))


def crossmatch(left: Any, right: Any, radius_deg: float, *, ra: str | tuple[str, str] = ("ra", "ra"),
               dec: str | tuple[str, str] = ("dec", "dec"),
               columns: tuple[Sequence[str] | None, Sequence[str] | None] | None = None,
               how: str = "nearest", suffixes: tuple[str, str] = ("_left", "_right")) -> pa.Table:
    """Match two catalogs on the sky: each left row with the nearest right row within a radius, or all.

    Parameters
    ----------
    left, right : path, URL, glob, list of paths, FitsDataset, pyarrow.Table or pyarrow.RecordBatch
        The catalogs (files are read from HDU 1, or the HDU a path suffix names, through the
        scanner with only the columns the result needs).
    radius_deg : float
        The match radius in degrees, in (0, 10]; a pair matches when its separation is at most
        the radius (boundary included).
    ra, dec : str or (str, str)
        The coordinate columns (degrees), one name for both sides or a (left, right) pair.
    columns : (list or None, list or None), optional
        The columns of each side in the result; None (the default, or for one side): all of them.
    how : {"nearest", "all"}
        ``"nearest"``: for each left row, the right row at the smallest separation (ties: the
        lowest right row); ``"all"``: every pair within the radius.
    suffixes : (str, str)
        Appended to the names both sides' columns share (as ``pandas.merge``).

    Returns
    -------
    pyarrow.Table
        The left columns, the right columns and ``separation_deg`` (float64, degrees); one row
        per pair, in left row order, then by separation, then by right row. Left rows with no
        match are left out; rows with a null or NaN coordinate never match.

    Raises
    ------
    ValueError
        On a radius outside (0, 10] degrees, an unknown ``how``, declinations outside
        [-90, 90], or result columns that would share a name.
    ColumnNotFoundError
        On a column a side does not have (a ``KeyError``).
    """
    plan = plan_match(radius_deg, ra=ra, dec=dec, columns=columns, how=how, suffixes=suffixes)
    lt, lra, ldec, lcols = read_side(left, plan.ra[0], plan.dec[0], plan.columns[0], "left")
    rt, rra, rdec, rcols = read_side(right, plan.ra[1], plan.dec[1], plan.columns[1], "right")
    output_names(lcols, rcols, plan.suffixes)
    li, ri, sep = match_pairs(coordinates(lt, lra), coordinates(lt, ldec), coordinates(rt, rra),
                              coordinates(rt, rdec), plan.radius, plan.how)
    return join_rows(lt, lcols, rt, rcols, li, ri, sep, plan.suffixes)

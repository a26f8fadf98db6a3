"""What a table decode reads: the projection (`select_columns`), the rows (`RowSelection`,
`check_row_indices`) and the check that the row bytes hold every selected row.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

import numpy as np

from ..errors import ColumnNotFoundError, CorruptHeaderError, TruncatedFileError
from ..fits.columns import ColumnSpec
from ..fits.record import Record
from ..query.names import case_ambiguity, did_you_mean

__all__ = [
    "Buffer",
    "RowSelection",
    "bytes_view",
    "check_extent",
    "check_row_indices",
    "plan_rows",
    "select_columns",
]


Buffer = Any  # anything exposing the buffer protocol: bytes, memoryview, mmap, np.ndarray


ColumnSelector = Union[str, int]


def bytes_view(buf: Buffer, what: str) -> np.ndarray:
    if buf is None:
        return np.zeros(0, dtype=np.uint8)
    try:
        arr = np.frombuffer(buf, dtype=np.uint8)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must expose a contiguous byte buffer: {exc}") from None
    return arr


def select_columns(specs: Sequence[ColumnSpec],
                   columns: ColumnSelector | Iterable[ColumnSelector] | None) -> list[ColumnSpec]:
    """Resolve a projection to specs, in the requested order with duplicates collapsed.

    Parameters
    ----------
    specs : sequence of ColumnSpec
        Every column of the table.
    columns : str, int, iterable of them, or None
        Column names (exact match first, then the one case-insensitive match) or 0-based
        positions;
        a bare string names one column; None selects every column, ``[]`` none.

    Raises
    ------
    ColumnNotFoundError
        For a name or position the table does not have (``"Column 'X' not found"``), or a name
        that is no column's exact spelling and matches several columns only by case.
    """
    if columns is None:
        return list(specs)
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    chosen: list[ColumnSpec] = []
    seen: set[int] = set()
    by_name: dict[str, ColumnSpec] = {}
    by_folded: dict[str, ColumnSpec] = {}
    for s in specs:
        by_name.setdefault(s.name, s)
        by_folded.setdefault(s.name.casefold(), s)
    for col in columns:
        if isinstance(col, (int, np.integer)) and not isinstance(col, bool):
            if not 0 <= int(col) < len(specs):
                raise ColumnNotFoundError(f"Column {int(col)} not found (the table has {len(specs)} columns)")
            spec = specs[int(col)]
        elif isinstance(col, str):
            spec = by_name.get(col) or by_folded.get(col.casefold())  # type: ignore[assignment]
            if spec is None:
                raise ColumnNotFoundError(f"Column {col!r} not found"
                                          f"{did_you_mean(col, [s.name for s in specs])}")
            # As in where-expressions: a case-insensitive match must be the only one.
            ambiguity = "" if col in by_name else case_ambiguity(col, [s.name for s in specs])
            if ambiguity:
                raise ColumnNotFoundError(f"Column {col!r} {ambiguity}; write the one you mean exactly")
        else:
            raise TypeError(f"a column is selected by name or position, not {type(col).__name__}")
        if spec.index not in seen:
            seen.add(spec.index)
            chosen.append(spec)
    return chosen


class RowSelection(Record):
    """The output rows: table rows ``first + k``, or ``index[k]`` when an index is given."""

    __slots__ = ("count", "first", "index")
    count: int
    first: int
    index: np.ndarray | None

    def __init__(self, count: int, first: int = 0, index: np.ndarray | None = None) -> None:
        self.count = count
        self.first = first
        self.index = index

    def source(self, k: int) -> int:
        return int(self.index[k]) if self.index is not None else self.first + k


def check_row_indices(rows: Any, nrows: int) -> np.ndarray:
    """Validate 0-based row indices of an ``nrows``-row table; returns them as int64.

    Raises
    ------
    ValueError
        Not a 1-D sequence of integers, or a negative index.
    IndexError
        An index at or beyond ``nrows``.
    """
    index = np.asarray(rows)
    if index.ndim != 1:
        raise ValueError("rows must be a 1-D sequence of integer row indices")
    if index.size == 0:
        return np.empty(0, np.int64)
    if index.dtype.kind not in "iu":
        raise ValueError(f"rows must be a 1-D sequence of integer row indices, not {index.dtype}")
    index = np.ascontiguousarray(index, dtype=np.int64)
    lo, hi = int(index.min()), int(index.max())
    if lo < 0:
        raise ValueError(f"row {lo} is negative; rows are 0-based indices")
    if hi >= nrows:
        raise IndexError(f"row {hi} out of range for a {nrows}-row table")
    return index


def plan_rows(nrows: int, rows: Any, row_range: tuple[int, int] | None) -> RowSelection:
    if rows is not None and row_range is not None:
        raise ValueError("Only one of rows or row_range may be provided")
    if rows is not None:
        index = check_row_indices(rows, nrows)
        return RowSelection(len(index), index=index) if len(index) else RowSelection(0)
    if row_range is None:
        return RowSelection(nrows)
    start, stop = row_range
    start = int(start)
    stop = nrows if stop is None else int(stop)
    if start < 0:
        raise ValueError("row_range start must be >= 0")
    if stop < 0:
        raise ValueError("row_range has a negative stop")
    stop = min(stop, nrows)
    return RowSelection(max(0, stop - start), first=min(start, nrows))


def check_extent(data: np.ndarray, row_bytes: int, nrows: int, sel: RowSelection,
                 specs: Sequence[ColumnSpec]) -> None:
    if row_bytes < 0 or nrows < 0:
        raise ValueError("row_bytes and nrows must be >= 0")
    for s in specs:
        if s.offset + s.width > row_bytes:
            raise CorruptHeaderError(f"{s.describe()} ends past the {row_bytes}-byte row")
    if sel.count == 0 or row_bytes == 0:
        return
    last = int(sel.index.max()) if sel.index is not None else sel.first + sel.count - 1
    if (last + 1) * row_bytes > data.size:
        raise TruncatedFileError(
            f"table data truncated: row {last} needs {(last + 1) * row_bytes} bytes, "
            f"only {data.size} are present"
        )

"""Row windows: the ``row_slice`` argument of table reads, scans and edits.

One parser for every route: a ``slice`` with step 1 or a ``(start, stop)`` tuple, 0-based and
half-open, with the messages of torchfits 1.x (docs/compatibility.md). Readers clamp the window
to the table; edits check it against the table themselves.
"""
from __future__ import annotations

from typing import Any

__all__ = ["validate_row_slice", "row_window"]


def validate_row_slice(row_slice: Any) -> tuple[int, int | None] | None:
    """Check a ``row_slice`` argument.

    Parameters
    ----------
    row_slice : slice, (start, stop) or None
        0-based, half-open; ``start`` None means 0 and ``stop`` None the end of the table.

    Returns
    -------
    (int, int or None) or None
        ``(start, stop)``, or None when ``row_slice`` is None.

    Raises
    ------
    ValueError
        A step other than 1, a tuple without two items, a negative bound, or anything else
        (lists and integers included).
    """
    if row_slice is None:
        return None
    if isinstance(row_slice, slice):
        if row_slice.step not in (None, 1):
            raise ValueError("row_slice step must be 1 (contiguous rows only)")
        start, stop = row_slice.start, row_slice.stop
    elif isinstance(row_slice, tuple):
        if len(row_slice) != 2:
            raise ValueError("row_slice tuple must have 2 items: (start, stop)")
        start, stop = row_slice
    else:
        raise ValueError("row_slice must be a slice, (start, stop), or None")
    start = 0 if start is None else int(start)
    if start < 0:
        raise ValueError("row_slice start must be >= 0")
    if stop is not None and int(stop) < 0:
        raise ValueError("row_slice has a negative stop; use an explicit row count")
    return start, None if stop is None else int(stop)


def row_window(row_slice: Any, nrows: int) -> tuple[int, int]:
    """`validate_row_slice`, clamped to a table of ``nrows`` rows: ``(start, stop)`` with
    ``start <= stop <= nrows`` (None is the whole table; a window past the end is empty)."""
    checked = validate_row_slice(row_slice)
    if checked is None:
        return 0, nrows
    start, stop = checked
    stop = nrows if stop is None else min(stop, nrows)
    start = min(start, nrows)
    return start, max(start, stop)

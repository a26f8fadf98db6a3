"""TNULLs of a streamed table that stay off every value, including the batches not yet seen.

A table written from a `RecordBatchReader` reserves each nullable integer column's TNULL
before its first row is on disk. A later batch may hold that very value as data; written as
is, it would read back as a null. `StreamNulls` watches every batch: on a collision it moves
the TNULL to a stored value that no batch so far has taken, remembers where the null cells
went, and rewrites them with the final TNULL once the rows are written (the header card is
patched with the others).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .table_plan import STORAGE, ColumnPlan, ColumnValues, avoid_valid_values, tnull_sentinel

__all__ = ["StreamNulls"]

#: How many stored values next to the usual sentinel are remembered per column: the TNULL
#: can move that far inward before the writer gives up with an error.
_WINDOW = 4096


class _Watched:
    """One nullable integer column: values seen near its sentinel, null cells written."""

    def __init__(self, index: int, plan: ColumnPlan, field_offset: int) -> None:
        self.index = index
        self.plan = plan
        self.field_offset = field_offset
        self.offset = int(plan.header_tzero or 0) if plan.flip else 0
        self.start = plan.tnull  # the TNULL the nulls written so far hold
        itemsize = np.dtype(STORAGE[plan.code]).itemsize
        bits = itemsize * 8
        lo = 0 if plan.code == "B" else -(1 << (bits - 1))
        self.edge = tnull_sentinel(plan.code, plan.flip)  # where a moved TNULL starts
        self.step = 1 if self.edge == lo else -1
        # the logical values of the window next to the sentinel, as [low, high] bounds
        ends = (self.edge + self.offset, self.edge + self.offset + self.step * (_WINDOW - 1))
        self.near_low, self.near_high = min(ends), max(ends)
        self.seen: set[int] = set()
        self.nulls: list[np.ndarray] = []  # flat element numbers of the null cells

    def watch(self, col: ColumnValues, first_row: int) -> None:
        data = np.asarray(col.data)
        per_row = self.plan.repeat
        valid = data
        if col.mask is not None and col.mask.any():
            mask = col.mask.reshape(col.mask.shape + (1,) * (data.ndim - col.mask.ndim))
            cells = np.broadcast_to(mask, data.shape)
            self.nulls.append(np.flatnonzero(cells) + first_row * per_row)
            valid = data[~cells]
        valid = np.ravel(valid)
        if not valid.size or valid.dtype.kind not in "iu":
            return
        near = valid[(valid >= self.near_low) & (valid <= self.near_high)]
        if near.size:
            self.seen.update(int(v) for v in np.unique(near))
        current = int(self.plan.tnull) + self.offset  # type: ignore[arg-type]
        if not (valid == current).any():
            return
        self.seen.add(current)  # a hinted TNULL may lie outside the window
        avoid_valid_values(self.plan, np.array(sorted(self.seen), dtype=object))
        if abs(int(self.plan.tnull) - self.edge) >= _WINDOW:  # type: ignore[arg-type]
            raise ValueError(f"column {self.plan.name!r}: the {_WINDOW} stored values next to "
                             "its TNULL all hold data; give it a TNULL with 'fits_tnull' metadata")

    def cells(self, row_bytes: int) -> tuple[np.ndarray, bytes]:
        """File offsets (from the data start) of the null cells and their new bytes."""
        itemsize = np.dtype(STORAGE[self.plan.code]).itemsize
        per_row = self.plan.repeat
        flat = np.concatenate(self.nulls) if self.nulls else np.empty(0, np.int64)
        offsets = (flat // per_row) * row_bytes + self.field_offset + (flat % per_row) * itemsize
        tnull = int(self.plan.tnull)  # type: ignore[arg-type]
        return offsets, tnull.to_bytes(itemsize, "big", signed=self.plan.code != "B")


class StreamNulls:
    """Keeps the TNULLs of a streamed table's integer columns off the data of every batch."""

    def __init__(self, plans: list[ColumnPlan]) -> None:
        self.row_bytes = sum(p.field_dtype.itemsize for p in plans)
        self.columns: list[_Watched] = []
        offset = 0
        for i, p in enumerate(plans):
            if p.tnull is not None and p.scale is None and p.code in "BIJK" and not p.vla:
                self.columns.append(_Watched(i, p, offset))
            offset += p.field_dtype.itemsize

    def watch(self, columns: list[ColumnValues], first_row: int) -> None:
        """Look at one batch before it is encoded (its nulls then get the current TNULL)."""
        for watched in self.columns:
            watched.watch(columns[watched.index], first_row)

    def rewrite(self, sink: Any, data_offset: int) -> None:
        """Give every null cell written under an earlier TNULL the final one."""
        for watched in self.columns:
            if watched.plan.tnull == watched.start:
                continue
            offsets, cell = watched.cells(self.row_bytes)
            sink.patch_many((offsets + data_offset).tolist(), cell)

"""Table sources: one table HDU of one file version (`TableSource`), and the files a source
argument names (`resolve_sources`: paths, globs, directories, URLs, lists of them).
"""
from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from functools import cached_property
from typing import Any, cast

import numpy as np

from ..errors import CorruptHeaderError, FitsError, HDUTypeError, TruncatedFileError
from ..fits.columns import ColumnSpec
from ..fits.hdu_index import HduEntry, HduIndex, get_index
from ..fits.paths import SourcePath, fspath, is_glob, is_url, with_storage_options
from ..fits.record import Record
from ..fits.sources import residency
from ..fits.sources.base import faults_seen
from .decode import decode_table, decode_table_where
from .decode_options import DecodeOptions
from .selection import select_columns

__all__ = ["TableSource", "resolve_sources"]

# Whether a logical variable-length column holds old astropy's 0x00/0x01 bytes, decided once
# per file version (its HDU index), HDU and column: {index: {(hdu, column): bool}}.
_LEGACY_LOGICAL: weakref.WeakKeyDictionary[HduIndex, dict[tuple[int, int], bool]] = \
    weakref.WeakKeyDictionary()
# Bytes per heap element of a variable-length column, by TFORM code (X counts bits).
_HEAP_ITEMSIZE = {"L": 1, "B": 1, "A": 1, "I": 2, "J": 4, "E": 4, "K": 8, "D": 8, "C": 8, "M": 16}

class TableSource(Record):
    """One table HDU of one file version: its layout, column specs and byte views (a `Record`:
    repr, equality and ``replace`` over the four fields)."""

    __slots__ = ("path", "index", "entry", "specs", "__dict__")  # __dict__: the cached properties
    path: str
    index: HduIndex
    entry: HduEntry
    specs: list[ColumnSpec]

    def __init__(self, path: str, index: HduIndex, entry: HduEntry, specs: list[ColumnSpec]) -> None:
        self.path, self.index, self.entry, self.specs = path, index, entry, specs

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return ("path", "index", "entry", "specs")

    @classmethod
    def open(cls, path: Any, hdu: Any = 1) -> TableSource:
        index = get_index(path)
        if hdu is None or (isinstance(hdu, str) and hdu.lower() == "auto"):
            raise ValueError("an explicit table HDU (index or EXTNAME) is required")
        entry = index.resolve(hdu)
        if not entry.is_table:
            raise HDUTypeError(
                f"{index.path}: HDU {entry.index} is not a table (type={entry.kind}): "
                "Failed to get table dimensions"
            )
        try:
            specs = list(index.column_specs(entry))
        except CorruptHeaderError as exc:
            raise type(exc)(f"{index.path}: HDU {entry.index}: {exc}") from None
        return cls(index.path, index, entry, specs)

    @property
    def label(self) -> str:
        """``path: HDU n``, how messages name this table."""
        return f"{self.path}: HDU {self.entry.index}"

    def located(self, exc: FitsError) -> FitsError:
        """``exc`` from a decode of this table, with the file and HDU in its message; a bad heap
        descriptor in a heap the file cuts short is a truncation, not corruption."""
        e = self.entry
        msg = str(exc)
        heap_present = max(0, min(self.index.size - e.heap_offset, e.heap_size))
        if isinstance(exc, CorruptHeaderError) and "heap descriptor" in msg and heap_present < e.heap_size:
            return TruncatedFileError(
                f"{self.path}: HDU {e.index}: file is truncated: only {heap_present} of the "
                f"{e.heap_size} heap bytes are present ({msg})")
        if msg.startswith(self.path):
            return exc
        return type(exc)(f"{self.path}: HDU {e.index}: {msg}")

    @property
    def nrows(self) -> int:
        return self.entry.nrows

    @property
    def header(self) -> Any:
        return self.index.header_view(self.entry)

    @cached_property
    def header_text(self) -> bytes:
        """The header's cards (no END padding) as ASCII bytes, for the ``fits_header`` schema
        metadata: formatted once per source, not once per batch and schema."""
        return cast(bytes, self.header.tostring(padding=False).encode("ascii", "replace"))

    def fetch(self, *, rows: np.ndarray | None = None, row_range: tuple[int, int] | None = None,
              columns: Any = None, heap: bool = True) -> None:
        """For a lazily fetched source: fetch the rows asked for and the heap ranges their
        variable-length cells point at (nothing to do for a local map)."""
        if not self.index.lazy:
            return
        e = self.entry
        rb = e.row_bytes
        src = self.index.source
        if rows is not None and len(rows) and len(rows) <= 65536:
            rows = np.unique(np.asarray(rows, np.int64))
            rows = rows[(rows >= 0) & (rows < e.nrows)]
            src.ensure([(e.data_offset + int(r) * rb, rb) for r in rows])
            lo, hi = (int(rows[0]), int(rows[-1]) + 1) if rows.size else (0, 0)
        else:
            if rows is not None and len(rows):
                lo, hi = int(np.min(rows)), int(np.max(rows)) + 1
            elif row_range is not None:
                lo, hi = int(row_range[0]), int(row_range[1])
            else:
                lo, hi = 0, e.nrows
            hi = min(hi, e.nrows)
            if hi > lo:
                src.ensure([(e.data_offset + lo * rb, (hi - lo) * rb)])
            rows = None
        if not heap or hi <= lo or e.heap_size == 0:
            return
        try:
            chosen = [c for c in select_columns(self.specs, columns) if c.descriptor]
        except Exception:  # noqa: BLE001 - the decoder reports bad projections itself
            chosen = []
        if not chosen:
            return
        view = src.view()
        table = np.frombuffer(view, np.uint8, (hi - lo) * rb, e.data_offset + lo * rb).reshape(hi - lo, rb)
        if rows is not None:
            table = table[rows - lo]
        ranges: list[tuple[int, int]] = []
        for offset, nbytes in self._heap_cells(table, chosen):
            ranges += [(e.heap_offset + int(o), int(n)) for o, n in zip(offset, nbytes)]
        src.ensure(ranges)

    def _descriptor_cells(self, table: np.ndarray, spec: ColumnSpec) -> tuple[np.ndarray, np.ndarray]:
        """The one reader of heap descriptors: for the variable-length column ``spec`` of
        ``table``'s rows (row bytes, one row a line), each cell's heap offset and size in bytes
        (X columns count bits). Counts are clipped first, so that absurd ones cannot overflow:
        a cell larger than the heap keeps a size larger than the heap."""
        heap_size = self.entry.heap_size
        dt = np.dtype(">i4" if spec.descriptor == "P" else ">i8")
        desc = table[:, spec.offset:spec.offset + 2 * dt.itemsize].copy().view(dt).astype(np.int64)
        count, offset = desc[:, 0], desc[:, 1]
        if spec.code == "X":
            np.minimum(count, min(heap_size * 8 + 8, 1 << 62), out=count)
            count += 7
            count >>= 3
        else:
            itemsize = _HEAP_ITEMSIZE.get(spec.code, 1)
            np.minimum(count, heap_size // itemsize + 1, out=count)
            if itemsize > 1:
                count *= itemsize
        return offset, count

    def _heap_cells(self, table: np.ndarray,
                    chosen: list[ColumnSpec]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(heap offsets, byte counts) of the non-empty cells inside the heap of the
        variable-length columns ``chosen``, for ``table``'s rows (`_descriptor_cells`; the
        decoder names the cells outside)."""
        heap_size = self.entry.heap_size
        for spec in chosen:
            offset, nbytes = self._descriptor_cells(table, spec)
            ok = nbytes > 0
            ok &= offset >= 0
            ok &= nbytes <= heap_size - offset
            yield offset[ok], nbytes[ok]

    def _heap_span(self, table: np.ndarray, chosen: list[ColumnSpec]) -> tuple[int, int]:
        """``(lo, hi)``: the span of the heap the non-empty cells of ``chosen`` in ``table``'s
        rows lie in, clipped to the heap (`_descriptor_cells`, fewer passes than `_heap_cells`;
        ``lo >= hi`` when there is none)."""
        heap_size = self.entry.heap_size
        lo, hi = heap_size, 0
        for spec in chosen:
            offset, nbytes = self._descriptor_cells(table, spec)
            used = nbytes > 0
            if not used.any():
                continue
            nbytes += offset  # the cells' ends
            lo = min(lo, max(0, int(offset.min(where=used, initial=heap_size))))
            hi = max(hi, int(nbytes.max(where=used, initial=0)))
        return lo, min(hi, heap_size)

    def legacy_logical(self, spec: ColumnSpec) -> bool:
        """Whether the logical variable-length column ``spec`` holds old astropy's 0x00/0x01
        bytes, judged over the whole column once per file version (not once per batch); on a
        lazily fetched source from rows and heap cells fetched first."""
        known = _LEGACY_LOGICAL.setdefault(self.index, {})
        key = (self.entry.index, spec.index)
        found = known.get(key)
        if found is None:
            rows, heap = self.buffers(fetched=True)
            position = next(k for k, s in enumerate(self.specs) if s.index == spec.index)

            def fetch(first: int, n: int) -> None:
                self.fetch(row_range=(first, first + n), columns=[position])

            from .variable_length import legacy_logical_vla

            found = legacy_logical_vla(spec, np.frombuffer(rows, np.uint8), np.frombuffer(heap, np.uint8),
                                       self.entry.row_bytes, self.nrows,
                                       fetch=fetch if self.index.lazy else None)
            known[key] = found
        return found

    def done(self, row_range: tuple[int, int], rows: np.ndarray | None = None, *,
             behind: bool = False) -> None:
        """Rows ``row_range`` are decoded (batches are copies): their map pages, and the span of
        the heap their variable-length cells point at, may leave RSS once the process holds
        more finished ranges than its budget (`residency`). ``rows``: only these rows of the
        range were read (their cells give the heap span; the others are not touched).
        ``behind``: release the rows' pages now (a pass over more rows than the budget, whose
        least-recently-read order would keep only its tail, the part a next pass reads last)."""
        a, b = row_range
        e = self.entry
        source = self.index.source
        b = min(b, e.nrows)
        if b <= a or not source.maps_file:
            return
        rb = e.row_bytes
        if behind:
            residency.release(source, e.data_offset + a * rb, (b - a) * rb)
        else:
            residency.done(source, e.data_offset + a * rb, (b - a) * rb)
        if not e.heap_size or not self._descriptors or rb == 0:
            return
        heap = min(e.heap_size, max(0, self.index.size - e.heap_offset))  # a truncated file's heap
        if e.data_size <= residency.budget():  # (the data unit holds the heap)
            # The whole table fits the budget: the rows' span cannot release more than the whole
            # heap would, so the heap is one finished range, recorded without reading descriptors.
            residency.done(source, e.heap_offset, heap)
            return
        present = min(b, max(0, self.index.size - e.data_offset) // rb)  # a truncated file's rows
        if present <= a:
            return
        table = np.frombuffer(source.view(), np.uint8, (present - a) * rb,
                              e.data_offset + a * rb).reshape(present - a, rb)
        if rows is not None:
            table = table[rows[rows < present] - a]
        lo, hi = self._heap_span(table, self._descriptors)
        hi = min(hi, heap)
        if hi > lo:  # cells are written in row order: the rows' cells are one span of the heap
            residency.done(source, e.heap_offset + lo, hi - lo)

    def done_rows(self, rows: np.ndarray) -> None:
        """Rows taken by index (a row-index or sorted-index route) are decoded: the span of
        rows they lie in goes to `done` (ascending rows, as indexes give them, make the spans
        of successive chunks disjoint; other orders may release pages a later chunk maps again)."""
        if rows.size:
            self.done((int(rows.min()), int(rows.max()) + 1), rows)

    @cached_property
    def _descriptors(self) -> list[ColumnSpec]:
        """The variable-length (``P``/``Q``) columns, whose cells live in the heap."""
        return [c for c in self.specs if c.descriptor]

    def buffers(self, *, fetched: bool = False) -> tuple[memoryview, memoryview]:
        """Row bytes and heap, clipped to what the file holds (rows past a truncation raise).

        A lazily fetched source fetches the whole table unless ``fetched`` says ``fetch`` ran.
        """
        e = self.entry
        if self.index.lazy and not fetched:
            self.index.source.ensure([(e.data_offset, e.data_size)])
        buf = self.index.source.view()
        size = self.index.size
        rows_end = min(e.data_offset + e.nrows * e.row_bytes, size)
        heap_end = min(e.heap_offset + e.heap_size, size)
        rows = buf[e.data_offset:rows_end]
        heap = buf[e.heap_offset:heap_end] if e.heap_offset < heap_end else buf[0:0]
        return rows, heap

    def decode(self, *, columns: Any, rows: np.ndarray | None = None,
               row_range: tuple[int, int] | None = None, options: DecodeOptions,
               where: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
        """Decode ``columns`` of the rows asked for; with ``where`` (a planned conjunction of
        kernel tests), only the rows of ``row_range`` that pass, selected in the same pass."""
        self.fetch(rows=rows, row_range=row_range, columns=columns)
        data, heap = self.buffers(fetched=True)
        try:
            if where is not None:
                batch = decode_table_where(data, self.specs, self.entry.row_bytes, self.nrows, where,
                                           columns=columns, row_range=row_range, options=options)
            else:
                batch = decode_table(data, heap, self.specs, self.entry.row_bytes, self.nrows,
                                     columns=columns, rows=rows, row_range=row_range, options=options,
                                     legacy_logical=self.legacy_logical)
        except (CorruptHeaderError, TruncatedFileError) as exc:
            raise self.located(exc) from None
        # Bytes past a truncation under the map read as zeros: refuse them.
        if faults_seen():
            self.index.source.check()
        return batch


def resolve_sources(source: Any) -> list[str]:
    """A path, an ``os.PathLike``, a glob, a directory (its ``*.fits*``) or a list of them."""
    if isinstance(source, (list, tuple)):
        out: list[str] = []
        for item in source:
            out += resolve_sources(item)
        return out
    if isinstance(source, SourcePath) or (isinstance(source, str) and is_url(source)):
        return _remote_sources(source)
    if not isinstance(source, (str, os.PathLike)):
        if source is None or isinstance(source, (int, float, dict)):
            raise TypeError(f"source must be a path, URL, bytes or a file object, not {source!r}")
        return [source]  # bytes-like contents or a binary file object
    path = fspath(source)
    if os.path.isdir(path):
        import glob as _glob

        found = sorted(p for p in _glob.glob(os.path.join(path, "*.fit*")) if os.path.isfile(p))
        if not found:
            raise FileNotFoundError(f"no FITS files (*.fit*) in directory {path}")
        return found
    if not os.path.exists(path) and is_glob(path):
        import glob as _glob

        found = sorted(_glob.glob(path))
        if not found:
            raise FileNotFoundError(f"no files match {path!r}")
        return found
    return [path]


def _remote_sources(source: Any) -> list[Any]:
    """A URL (or SourcePath) as itself, or the files a remote glob or directory names."""
    sp = source if isinstance(source, SourcePath) else SourcePath(source, None)
    url = sp.url
    if url.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        local = resolve_sources(unquote(urlsplit(url).path))
        return [with_storage_options(p, sp.storage_options) for p in local]
    head, sep, rest = url.partition("://")
    if not is_glob(rest) and not rest.endswith("/"):
        return [source]
    from ..fits.sources.remote import list_remote

    urls = list_remote(url, sp.storage_options, glob=is_glob(rest))
    return [SourcePath(u, sp.storage_options) if sp.storage_options else u for u in urls]

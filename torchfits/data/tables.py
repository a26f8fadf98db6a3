"""Catalog rows for training: a map-style table dataset (filtered rows loaded once) and an
iterable one streaming each (rank, worker) slot's contiguous row range through the scanner
(where-pushdown runs inside the range, so every matching row is delivered once)."""
from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any, Callable

import numpy as np
import torch

from .._torch_adapter import NullValue, apply_null_rule, check_null_options, mask_name, validate_device
from ..fits.paths import fspath
from ..fits.sources import residency
from ..fits.sources.base import faults_seen
from ..fits.threads import iter_ahead
from ..tables.arrow_numpy import numpy_to_torch, table_to_numpy
from ..tables.decode import decode_table_numpy
from ..tables.scan import scan, tensor_null_columns
from ..tables.source import TableSource, resolve_sources
from .hdus import dataset_repr, show_files
from .loader import finish_batch, item_position
from .readahead import will_need_range
from .resume import EpochMixin
from .sharding import check_even, epoch_rng, reservoir, resolve_rank, row_shard
from .sources import storage_options_arg, suffix_file, table_source

__all__ = ["FitsTableDataset", "FitsTableIterableDataset"]

_PLAIN_CODES = frozenset("BIJKED")
_CHUNK_BYTES = 8 << 20  # bytes of rows (mapped or decoded, the larger) per kernel call on the batch path


def _plain_numeric(specs: list) -> bool:
    """Columns whose tensor is the stored number itself: scalar integers and floats without
    TSCAL/TZERO/TNULL (the batch fast path decodes them straight to NumPy, no Arrow)."""
    return all(not s.is_ascii and not s.is_vla and s.code in _PLAIN_CODES and s.repeat == 1
               and s.tdim is None and s.tnull is None and s.tscal == 1 and s.tzero == 0
               for s in specs)


def _cell_dtypes(schema: Any) -> dict[str, np.dtype]:
    """The element dtype of each variable-length numeric or logical column of an Arrow schema
    (its cells keep it even when empty)."""
    import pyarrow as pa

    out = {}
    for field in schema:
        leaf = field.type
        if not (pa.types.is_list(leaf) or pa.types.is_large_list(leaf)):
            continue
        while pa.types.is_list(leaf) or pa.types.is_large_list(leaf) or \
                pa.types.is_fixed_size_list(leaf):
            leaf = leaf.value_type
        if pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf):
            out[field.name] = np.dtype(leaf.to_pandas_dtype())
    return out


def _string_widths(specs: list) -> dict[str, int]:
    """The field width of each fixed-width string column: a stream's uint8 rows are that wide in
    every chunk, so rows and batches of one column always stack (a map-style dataset, loaded at
    once, makes them as wide as its longest string)."""
    return {s.name: s.repeat for s in specs if s.code == "A" and not s.is_vla}


def _row_arrays(columns: dict[str, np.ndarray], cells: dict[str, np.dtype],
                widths: dict[str, int], *, rows: bool = True) -> dict[str, np.ndarray]:
    """Scanner columns after the null rule (`apply_null_rule`) → arrays indexable per row:
    strings as uint8 rows of the field's width (``widths``; NUL-padded), variable-length cells
    as arrays of the column's element dtype (``cells``; an empty cell too). On the row routes
    (``rows``) unsigned 64-bit values, scalar, vector or variable-length, are float64, as torch
    rows have always carried them."""
    out = {}
    for name, arr in columns.items():
        if arr.dtype.kind in "US":
            raw = np.char.encode(arr, "utf-8") if arr.dtype.kind == "U" else arr
            width = max(raw.dtype.itemsize, widths.get(name, 1), 1)
            raw = raw.astype(f"S{width}")
            arr = np.frombuffer(raw.tobytes(), np.uint8).reshape(len(raw), width)
        elif arr.dtype == object:
            dtype = cells.get(name)
            typed = np.empty(len(arr), dtype=object)
            for i, cell in enumerate(arr):
                cell = np.asarray(cell if cell is not None else [], dtype=dtype)
                typed[i] = cell.astype(np.float64) if rows and cell.dtype == np.uint64 else cell
            arr = typed
        elif rows and arr.dtype == np.uint64:
            arr = arr.astype(np.float64)
        out[name] = arr
    return out


def _row_dict(arrays: dict[str, np.ndarray], i: int, device: str) -> dict[str, torch.Tensor]:
    row = {}
    for name, arr in arrays.items():
        t = torch.tensor(arr[i])
        row[name] = t if device == "cpu" else t.to(device)
    return row


def _batch_dict(arrays: dict[str, np.ndarray], device: str) -> dict[str, Any]:
    """One batch's columns as tensors, in column order: a variable-length column as a list of
    1-D tensors (one per row), every other column as one tensor."""
    flat = numpy_to_torch({n: a for n, a in arrays.items() if a.dtype != object}, device=device,
                          exclusive=True)
    out: dict[str, Any] = {}
    for name, arr in arrays.items():
        if arr.dtype != object:
            out[name] = flat[name]
            continue
        cells = [torch.from_numpy(np.ascontiguousarray(c)) for c in arr]
        out[name] = cells if device == "cpu" else [c.to(device) for c in cells]
    return out


_NO_SECTION = ("an image section cannot select table rows; name the HDU alone "
               "('cat.fits[CAT,2]') and filter rows with where=")


def _files_and_hdus(items: list, hdu: Any,
                    storage_options: dict | None = None) -> list[tuple[Any, Any]]:
    """(file, table HDU) for each file the paths name: ``cat.fits[CAT,2]`` (a path that does
    not exist whose part before the brackets does) is that file and HDU, winning over the
    default ``hdu`` (an ``hdu`` naming another HDU is refused); other paths are files, globs or
    URLs read at ``hdu``."""
    out: list[tuple[Any, Any]] = []
    for item in items:
        target = suffix_file(item, hdu, 1, _NO_SECTION)
        if target is not None:
            out.append(target)
            continue
        found = resolve_sources(table_source(item, storage_options)
                                if isinstance(item, str) else item)
        out += [(p, hdu) for p in found]
    return out


class FitsTableDataset(torch.utils.data.Dataset):
    """The rows of a FITS table matching ``where``, loaded at construction: item ``i`` is
    ``(row_dict, label)``, row values 0-d tensors (strings: uint8 vectors; vector columns and
    variable-length cells: 1-D tensors of the column's dtype; unsigned 64-bit values: float64),
    label a 0-d int64 (``labels[i]`` or 0).

    Parameters
    ----------
    path : str or os.PathLike
    hdu : int or str
    columns : list of str, optional
    where : str, optional
        A where-expression (docs/tables.md), evaluated by the scanner on raw rows.
    labels : sequence of int, optional
        One per matching row.
    transform : callable, optional
        Called with the row dict.
    device : str
    mmap : bool or "auto"
        Accepted for compatibility.
    storage_options : dict, optional
        For an fsspec URL: passed to the remote byte sources.
    null_value : number, bool or dict, optional
        What integer and logical nulls become (one value, or ``{column: value}``). Without it
        (and without ``masks``) a null raises `NullValueError` at construction, naming the
        file, HDU and column. Float nulls are NaN.
    masks : bool
        Add ``<column>_mask`` (bool, True where a value is present) to every row for each
        integer column with a TNULL and each logical column; nulls are filled with
        ``null_value``, or 0/False.
    """

    def __init__(self, path: Any, hdu: Any = 1, columns: Any = None, where: str | None = None,
                 labels: Any = None, transform: Callable | None = None, device: Any = "cpu",
                 mmap: Any = "auto", *, storage_options: dict | None = None,
                 null_value: NullValue = None, masks: bool = False) -> None:
        self.path = fspath(path)
        self.storage_options = storage_options_arg(storage_options)
        self.hdu, self.columns, self.where = hdu, columns, where
        file, file_hdu = suffix_file(self.path, hdu, 1, _NO_SECTION) or (self.path, hdu)
        self.device = validate_device(device)
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.transform, self.mmap = transform, mmap
        self.null_value, self.masks = null_value, bool(masks)
        scanner = scan(table_source(file, self.storage_options), file_hdu, columns=columns,
                       where=where)
        self._arrays = _row_arrays(scanner._tensor_columns(null_value=null_value, masks=self.masks),
                                   _cell_dtypes(scanner.schema), {})  # one width: the longest
        self._n = len(next(iter(self._arrays.values()))) if self._arrays else 0
        if labels is not None:
            labels = list(labels)
            if len(labels) != self._n:
                raise ValueError(f"labels length {len(labels)} != rows length {self._n}")
            self.labels: torch.Tensor | None = torch.as_tensor([int(v) for v in labels],
                                                                  dtype=torch.int64)
        else:
            self.labels = None

    @property
    def files(self) -> list[str]:
        return [self.path]

    def __len__(self) -> int:
        return self._n

    def _position(self, i: Any) -> int:
        return item_position(i, self._n, "row {i} out of range for a dataset of {n} rows")

    def __getitems__(self, indices: list) -> list:
        """A DataLoader batch as one gather per column (a `FitsBatch` of ``(columns, labels)``
        that `fits_collate_fn` passes through) instead of a tensor per row and column. Columns
        of Python objects take the per-row path. Equal to ``[self[i] for i in indices]``."""
        positions = np.array([self._position(i) for i in indices], dtype=np.int64)
        if not len(positions) or any(a.dtype == object for a in self._arrays.values()):
            return [self[int(p)] for p in positions]
        cols = {}
        for name, arr in self._arrays.items():
            part = arr[positions]  # fancy indexing: a fresh array the batch owns
            t = torch.from_numpy(part if part.dtype != np.uint64 else part.astype(np.float64))
            cols[name] = t if self.device == "cpu" else t.to(self.device)
        labels = self.labels[torch.from_numpy(positions)] if self.labels is not None else \
            torch.zeros(len(positions), dtype=torch.int64)
        return finish_batch(cols, self.transform, labels)

    def __getitem__(self, i: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        i = self._position(i)
        row = _row_dict(self._arrays, i, self.device)
        if self.transform is not None:
            row = self.transform(row)
        label = self.labels[i].clone() if self.labels is not None else torch.tensor(0, dtype=torch.int64)
        return row, label

    def __repr__(self) -> str:
        return dataset_repr(self, f"n_rows={self._n}", path=self.path, hdu=self.hdu,
                            columns=self.columns, where=self.where, transform=self.transform,
                            device=self.device)


class FitsTableIterableDataset(EpochMixin, torch.utils.data.IterableDataset):
    """Rows of a FITS table streamed in ``batch_size`` chunks (memory bounded by the chunk).

    Each (rank, DataLoader worker) slot reads a contiguous row range (near-equal split over
    ``world_size × num_workers`` slots) and ``where`` filters inside it. Yields one dict of 0-d
    tensors per row (strings as uint8 vectors, vectors and variable-length cells as 1-D
    tensors, unsigned 64-bit values as float64), or with ``as_batches=True`` one dict per chunk
    holding every column of ``columns``: a tensor per column (strings as ``(n, width)`` uint8,
    bits as ``(n, r)`` bool), a list of 1-D tensors for a variable-length column (without
    ``columns``, as in torchfits 1.x, string, bit and variable-length columns are left out).
    ``shuffle_buffer_size > 1`` reservoir-shuffles the rows (or chunks) with an order fixed by
    ``(seed, epoch, rank, worker)``. fsspec URLs read through the remote byte sources with
    ``storage_options``; each worker fetches only its row range.

    Integer and logical nulls raise `NullValueError` (naming the file, HDU and column) when
    they are reached, unless ``null_value=`` fills them or ``masks=True`` adds
    ``<column>_mask`` tensors (as in `FitsTableDataset`); float nulls are NaN.

    ``even="pad"`` or ``"drop"`` gives every slot the same number of rows of each file (a
    short block starts one row early, repeating its neighbour's last row; or a long block ends
    one row early); a ``where`` then keeps what matches in each block.
    ``state_dict()``/``load_state_dict()`` resume an interrupted pass (torchdata's
    ``StatefulDataLoader``) at the chunk it stopped in, without reading the chunks before it;
    with a shuffle buffer the pass is replayed and its first items dropped.
    """

    def __init__(self, path: Any, hdu: Any = 1, columns: Any = None, where: str | None = None,
                 batch_size: int = 65536, transform: Callable | None = None, device: Any = "cpu",
                 mmap: Any = "auto", shuffle_buffer_size: int | None = None, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None, *,
                 as_batches: bool = False, storage_options: dict | None = None,
                 null_value: NullValue = None, masks: bool = False,
                 even: str | None = None) -> None:
        self.storage_options = storage_options_arg(storage_options)
        self.even = check_even(even)
        items = list(path) if isinstance(path, (list, tuple)) else [path]
        pairs = _files_and_hdus(items, hdu, self.storage_options)
        self.paths = [str(p) for p, _ in pairs]
        self._hdus = [h for _, h in pairs]  # each file's table HDU (a path suffix names its own)
        self.hdu, self.columns, self.where = hdu, columns, where
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError("batch_size must be > 0")
        self.batch_size = batch_size
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.transform, self.mmap = transform, mmap
        self.device = validate_device(device)
        self.shuffle_buffer_size, self.seed = shuffle_buffer_size, int(seed)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.as_batches = bool(as_batches)
        self._init_passes()
        # Plan once here so a bad column, HDU or where fails now, not in a worker; the scanner
        # itself is not kept (each worker plans its own over its row range).
        first = scan(self._source(self.paths[0]), self._hdus[0], columns=columns, where=where)
        # Batches hold every column asked for; without columns= they keep 1.2.3's choice of
        # the columns one tensor per batch can hold (no strings, bits or variable lengths).
        specs = {s.name: s for s in first.sources[0].specs}
        self._batch_columns = [n for n in first._projection
                               if columns is not None or (specs[n].code not in "AXPQ"
                                                          and not specs[n].is_vla)]
        sources = [first.sources[0]] + [TableSource.open(self._source(p), h)
                                         for p, h in zip(self.paths[1:], self._hdus[1:])]
        self.nrows = [src.nrows for src in sources]
        # Which columns can hold an integer or logical null, over every file: each batch (and
        # row) then carries the same mask keys, nulls or not.
        self.null_value, self.masks = null_value, bool(masks)
        self._nullable = tensor_null_columns(sources, first.schema, first._projection)
        check_null_options(null_value, self.masks, first._projection, self._nullable,
                           first.sources[0].label)

    def _source(self, path: str) -> Any:
        return table_source(path, self.storage_options)

    @property
    def files(self) -> list[str]:
        return list(self.paths)

    def _direct_batches(self, path: str, a: int, b: int,
                        hdu: Any = None) -> Iterator[Any] | None:
        """``batch_size`` batches of rows ``[a, b)`` decoded in big chunks (one kernel call per
        ~8 MiB, no Arrow) and sliced, or None unless every column is a plain number and there
        is no ``where``, nor a mask column to add (another file of the stream may have a TNULL
        where this one has none). The batches equal the scanner's."""
        if not self.as_batches or self.where is not None or \
                (self.masks and any(n in self._nullable for n in self._batch_columns)):
            return None
        if hdu is None:
            hdu = self._hdus[self.paths.index(path)] if path in self.paths else self.hdu
        src = TableSource.open(self._source(path), hdu)
        specs = {s.name: s for s in src.specs}
        if not all(n in specs for n in self._batch_columns) or \
                not _plain_numeric([specs[n] for n in self._batch_columns]):
            return None
        names = list(self._batch_columns)
        # A chunk's mapped rows and its decoded arrays are both resident while it is sliced into
        # batches: bound the larger of the two, so an epoch's peak is the residency budget plus
        # two chunks, the one sliced and the one decoding ahead (not chunks sized by their 4
        # decoded columns over 12 mapped ones).
        row = max(1, sum(specs[n].width for n in names), src.entry.row_bytes)
        bs = self.batch_size
        step = bs * max(1, _CHUNK_BYTES // (bs * row))

        # A pass over more rows than the residency budget releases each chunk behind it: the
        # budget would keep only the pass's tail, which the next epoch reads last.
        behind = (b - a) * src.entry.row_bytes >= residency.budget()

        # Local maps: the kernel reads each chunk's bytes ahead, while the chunk before decodes
        # (a cold page cache otherwise waits on one map fault's read-ahead at a time).
        local = getattr(src.index.source, "path", None) if src.index.source.maps_file else None
        rb, data0 = src.entry.row_bytes, src.entry.data_offset

        def ahead(c0: int) -> None:
            if local is not None and c0 < b:
                will_need_range(local, data0 + c0 * rb, (min(c0 + step, b) - c0) * rb)

        def decode(c0: int) -> tuple[int, dict[str, torch.Tensor]]:
            """Chunk ``[c0, c0 + step)``: its first row and its columns as tensors."""
            c1 = min(c0 + step, b)
            ahead(c1)
            src.fetch(row_range=(c0, c1), columns=names)
            data, heap = src.buffers(fetched=True)
            # Pooled: a chunk's pages come back to a later chunk once its batches are dropped
            # (fresh NumPy memory faulted 2,048 pages in each 8 MiB chunk).
            cols = decode_table_numpy(data, heap, src.specs, src.entry.row_bytes, src.nrows,
                                      columns=names, row_range=(c0, c1),
                                      legacy_logical=src.legacy_logical, pooled=True)
            if faults_seen():
                src.index.source.check()
            src.done((c0, c1), behind=behind)  # decoded into fresh arrays: the pages may leave RSS
            return c0, {n: torch.from_numpy(cols[n]) for n in names}

        def batches() -> Iterator[Any]:
            ahead(a)
            # The next chunk decodes on a background thread while the caller works on this
            # one's batches (the first decodes here, on every thread of the pool).
            for c0, chunk in iter_ahead(decode, range(a, b, step)):
                for k in range(0, min(c0 + step, b) - c0, bs):
                    part = {n: t[k:k + bs] for n, t in chunk.items()}
                    yield part if self.device == "cpu" else \
                        {n: t.to(self.device) for n, t in part.items()}
                # This chunk's memory may serve a later one once the caller drops its batches.
                del chunk, part

        return batches()

    def _items(self) -> int:
        return sum(self.nrows)

    def _chunks(self, cursor: list[int] | None = None) -> Iterator[Any]:
        """The pass's items, from ``cursor`` ``[file, window start, items of that window]``
        on (the windows before it are not read); the pass's state keeps the cursor of the
        last item yielded."""
        state = self._pass
        assert state is not None
        first, start, done = cursor if cursor is not None else (0, None, 0)
        for fi, (path, hdu, nrows) in enumerate(zip(self.paths, self._hdus, self.nrows)):
            if fi < first:
                continue
            a, b = row_shard(nrows, self.rank, self.world_size, self.even)
            if fi == first and start is not None:
                a = max(a, int(start))
            if a >= b:
                continue
            window, count = None, 0
            for c, item in self._windows(path, hdu, a, b):
                if c != window:
                    window, count = c, 0
                count += 1
                if fi == first and c == start and count <= done:
                    continue  # yielded before the pass was interrupted
                state["cursor"] = [fi, c, count]
                yield item
            state["cursor"] = [fi + 1, None, 0]

    def _windows(self, path: str, hdu: Any, a: int, b: int) -> Iterator[tuple[int, Any]]:
        """(window start, item) of rows ``[a, b)``: windows of ``batch_size`` rows from ``a``."""
        direct = self._direct_batches(path, a, b, hdu)
        if direct is not None:
            for m, part in enumerate(direct):
                yield a + m * self.batch_size, part
            return
        scanner = scan(self._source(path), hdu, columns=self.columns, where=self.where,
                       batch_size=self.batch_size, row_slice=(a, b))
        import pyarrow as pa

        src = scanner.sources[0]
        where = src.label
        cells = _cell_dtypes(scanner.schema)
        widths = _string_widths(src.specs)
        masks = {mask_name(n) for n in self._batch_columns}
        starts = [rng[0] for _, rng in scanner._chunks(0, src)]
        seen = [-1]

        def mine() -> bool:
            seen[0] += 1  # the scanner asks once per window, in order, before decoding it
            return True

        for batch in scanner._batches_of(0, src, mine):
            c = starts[seen[0]]
            cols = apply_null_rule(table_to_numpy(pa.Table.from_batches([batch])), self._nullable,
                                   null_value=self.null_value, masks=self.masks, where=where)
            if self.as_batches:
                cols = {n: v for n, v in cols.items() if n in self._batch_columns or n in masks}
                yield c, _batch_dict(_row_arrays(cols, cells, widths, rows=False), self.device)
            else:
                arrays = _row_arrays(cols, cells, widths)
                for i in range(batch.num_rows):
                    yield c, _row_dict(arrays, i, self.device)

    def __iter__(self) -> Iterator[Any]:
        epoch, skip = self._begin_pass()
        assert self._pass is not None
        cursor, self._resume_cursor = self._resume_cursor, None
        rng = epoch_rng(self.seed, epoch, self.rank)
        size = self.shuffle_buffer_size
        if size and size > 1:
            # The shuffle buffer holds decoded rows: a resumed pass replays and drops its first
            # items.
            stream: Iterator[Any] = islice(reservoir(self._chunks(), size, rng), skip, None)
        else:
            stream = self._chunks(cursor) if cursor is not None or not skip else \
                islice(self._chunks(), skip, None)
        if self.transform is not None:
            stream = (self.transform(item) for item in stream)
        return self._counted(stream)

    _resume_cursor: list[int] | None = None

    def state_dict(self) -> dict[str, Any]:
        """`EpochMixin.state_dict` with the cursor of the last item: ``[file, window start, items
        of that window]``."""
        state = super().state_dict()
        if self._resume_cursor is not None:
            state["cursor"] = list(self._resume_cursor)
        elif self._pass is not None and self._pass.get("cursor") is not None:
            state["cursor"] = list(self._pass["cursor"])
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        cursor = state_dict.get("cursor")
        self._resume_cursor = None if cursor is None else list(cursor)

    def __repr__(self) -> str:
        world = {"rank": self.rank, "world_size": self.world_size} if self.world_size > 1 else {}
        return dataset_repr(self, f"n_rows={sum(self.nrows)}", show_files(self.paths), hdu=self.hdu,
                            columns=self.columns, where=self.where, batch_size=self.batch_size,
                            as_batches=self.as_batches, transform=self.transform, **world,
                            even=self.even, device=self.device)

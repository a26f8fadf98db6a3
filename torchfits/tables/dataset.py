"""`torchfits.dataset`: a ``pyarrow.dataset.Dataset`` over many FITS tables that DuckDB and Polars
scan through, with projection, predicates and sidecar statistics pushed into the decoder.

The dataset is a pure-Python subclass: every public method of ``pyarrow.dataset.Dataset`` is
overridden, and the ones that make no sense here raise ``NotImplementedError`` rather than reach
the (never initialised) native object. Work is split into fragments, one per (file, HDU, row
range); a scan runs row chunks of the fragments on the shared thread pool.
"""
from __future__ import annotations

import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds

from ..errors import ColumnNotFoundError
from ..fits.aliases import HduArg, SourceArg
from ..fits.hdu_index import suffix_hdu
from ..fits.paths import SourcePath, hdu_suffix, with_storage_options
from ..fits.threads import default_threads, iter_parallel, run_parallel
from ..query import expr as _expr
from ..query.names import did_you_mean, resolve_columns
from .arrow_assembly import arrow_schema
from .decode_options import DecodeOptions
from .scan import Scanner, filter_error
from .sky_index import cone_rows, intersect, overlaps
from .source import TableSource, resolve_sources
from .stats_index import FileStats, StatsIndex, find_index, load_index, may_match

__all__ = ["dataset", "FitsDataset", "FitsFragment", "FitsScanner", "TaggedRecordBatch"]

DEFAULT_BATCH_SIZE = 131_072  # pyarrow.dataset's default
_RAMP_FIRST = 1_024  # rows of a stream's first task (then 4×, 16×, ... up to the task size)
_TASK_BYTES = 32 << 20  # table bytes a streamed task decodes at least
PATH_COLUMNS = ("filename", "hdu")
_WHOLE = 1 << 62


class TaggedRecordBatch(NamedTuple):
    """A batch and the fragment it came from (what ``Scanner.scan_batches`` yields)."""

    record_batch: Any
    fragment: FitsFragment


# -- filters ----------------------------------------------------------------------------------------
@dataclass
class _Plan:
    """One scan's request, translated once: output schema, the predicate as a tree (or an
    expression the tree cannot hold), and the columns the predicate reads."""

    schema: Any  # the dataset schema (every column, path columns included)
    projection: list[str]
    tree: Any  # _expr tree or None
    opaque: Any  # pyarrow Expression the tree cannot express, or None
    path_columns: tuple[str, ...]

    @property
    def out_schema(self) -> Any:
        return pa.schema([self.schema.field(n) for n in self.projection])


def _combine(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, str) and isinstance(b, str):
        return f"({a}) AND ({b})"
    return (a, b)


def _make_plan(schema: Any, columns: Any, filter: Any, path_columns: tuple[str, ...]) -> _Plan:
    names = schema.names
    if columns is None:
        projection = list(names)
    elif isinstance(columns, dict):
        raise NotImplementedError("projections given as {name: expression} are not supported; "
                                  "pass a list of column names")
    else:
        projection = [str(c) for c in columns]
        for c in projection:
            if c not in names:
                raise ColumnNotFoundError(f"unknown column '{c}' (dataset columns: {', '.join(names)})"
                                          f"{did_you_mean(c, names)}")
    types = {f.name: f.type for f in schema}
    trees: list[Any] = []
    opaque = None

    def add(item: Any) -> None:
        nonlocal opaque
        tree: Any
        if item is None:
            return
        if isinstance(item, tuple):
            for part in item:
                add(part)
        elif isinstance(item, str):
            if not item.strip():
                raise ValueError("where must be a non-empty string expression")
            booleans = [n for n, t in types.items() if str(t) == "bool"]
            tree = resolve_columns(_expr.parse(item, columns=set(names), booleans=booleans), names)
            _expr.validate(tree, types)
            trees.append(tree)
        elif isinstance(item, _expr.Expr):
            _expr.validate(item, types)
            trees.append(item)
        elif isinstance(item, pc.Expression):
            tree = _expr.from_pyarrow(item, schema)
            if tree is None:
                opaque = item if opaque is None else (opaque & item)
            else:
                trees.append(tree)
        else:
            raise TypeError("filter must be a pyarrow.compute.Expression or a where-string, "
                            f"not {type(item).__name__}")

    add(filter)
    return _Plan(schema, projection, _expr.and_all(trees), opaque, path_columns)


# -- fragments --------------------------------------------------------------------------------------
class FitsFragment:
    """Rows ``row_range`` of one table HDU of one file: the unit of parallel work.

    Picklable (path, HDU, row range, schema and statistics; no open handles). Its row count comes
    from the header alone. Build fragments with `FitsDataset.get_fragments`; split one with
    `split`.
    """

    def __init__(self, path: str, hdu: Any = 1, row_range: tuple[int, int] | None = None, *,
                 schema: Any = None, add_path_column: bool = False,
                 stats: FileStats | None = None, _source: TableSource | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        if isinstance(path, SourcePath):
            storage_options = dict(path.storage_options or {}, **(storage_options or {}))
            path = path.url
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"dataset fragments need a path or URL, not {type(path).__name__} "
                            "(read bytes and file objects with torchfits.scan)")
        self.path = os.fspath(path) if not isinstance(path, str) else path
        self.storage_options = storage_options or None
        self.hdu = hdu
        self._source = _source
        src = self.open()
        start, stop = (0, src.nrows) if row_range is None else (int(row_range[0]), int(row_range[1]))
        if not 0 <= start <= stop <= src.nrows:
            raise IndexError(f"{self.path}: row range {start}:{stop} outside a {src.nrows}-row table")
        self.row_range = (start, stop)
        self.hdu_index = src.entry.index
        self.add_path_column = bool(add_path_column)
        self._schema = schema
        self.stats = stats

    def open(self) -> TableSource:
        """The table HDU this fragment reads: its header-derived row count (``nrows``), column
        specs (``specs``), HDU index entry (``entry``) and byte source.

        Opened on the first call, through the same byte sources as ``torchfits.scan(path,
        storage_options=...)`` (the HDU index is cached per file version, so a reopen costs a
        ``stat``), and kept: later calls return the same source. A fragment that was unpickled
        opens nothing until then.

        Returns
        -------
        TableSource
        """
        src = self._source
        if src is None:
            # the HDU index is cached per file version
            src = TableSource.open(with_storage_options(self.path, self.storage_options), self.hdu)
            self._source = src
        return src

    def __reduce__(self) -> Any:
        # Small and handle-free: the receiving process (a Dask worker) reopens the file, through
        # the same byte sources as a local read, on first use rather than while unpickling.
        return (_rebuild_fragment, (self.path, self.hdu, self.row_range, self._schema,
                                    self.add_path_column, self.stats, self.storage_options,
                                    self.hdu_index))

    def __dask_tokenize__(self) -> Any:
        # What names this fragment's rows: the file version (stat key, or the remote validator),
        # HDU and row range. Without it Dask tokenizes a fragment by pickling it, schema and
        # statistics included: a third of building a 50-file graph.
        index = self.open().index
        version = index.key if index.key is not None else getattr(index.source, "validator", None)
        return ("torchfits.FitsFragment", self.path, repr(version), self.hdu_index, self.row_range,
                self.add_path_column, None if self._schema is None else self._schema.to_string(),
                repr(sorted((self.storage_options or {}).items())))

    def __repr__(self) -> str:
        a, b = self.row_range
        return f"<FitsFragment {self.path!r} hdu={self.hdu_index} rows={a}:{b}>"

    @property
    def physical_schema(self) -> Any:
        """The file's own columns and types (no path columns, no unification)."""
        return arrow_schema(self.open().specs)

    @property
    def schema(self) -> Any:
        """The schema scans of this fragment produce (the dataset's, when it has one)."""
        if self._schema is not None:
            return self._schema
        return _with_path_columns(arrow_schema(self.open().specs), self.add_path_column)

    @property
    def partition_expression(self) -> Any:
        """Always true: FITS datasets are not partitioned by directory keys."""
        return pc.scalar(True)

    @property
    def num_rows(self) -> int:
        a, b = self.row_range
        return b - a

    def split(self, max_rows: int) -> list[FitsFragment]:
        """Fragments of at most ``max_rows`` rows covering this one, in order."""
        if isinstance(max_rows, bool) or int(max_rows) <= 0:
            raise ValueError("max_rows must be > 0")
        a, b = self.row_range
        return [_sub_fragment(self, (s, min(s + int(max_rows), b))) for s in (range(a, b, int(max_rows))
                                                                           if b > a else [a])]

    # -- scanning ---------------------------------------------------------------------------------
    def scanner(self, schema: Any = None, columns: Any = None, filter: Any = None,
                batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> FitsScanner:
        """A `FitsScanner` over this fragment (same arguments as `FitsDataset.scanner`)."""
        target = schema if schema is not None else self.schema
        return FitsScanner([self], target, columns=columns, filter=filter, batch_size=batch_size,
                           path_columns=PATH_COLUMNS if self.add_path_column else (), **kwargs)

    def to_batches(self, schema: Any = None, columns: Any = None, filter: Any = None,
                   batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Iterator[Any]:
        """Stream the fragment's (filtered, projected) rows as record batches."""
        return self.scanner(schema, columns, filter, batch_size, **kwargs).to_batches()

    def to_table(self, schema: Any = None, columns: Any = None, filter: Any = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Any:
        """The fragment's (filtered, projected) rows as a ``pyarrow.Table``."""
        return self.scanner(schema, columns, filter, batch_size, **kwargs).to_table()

    def count_rows(self, filter: Any = None, **kwargs: Any) -> int:
        """Rows of the fragment (from the header alone when there is no filter)."""
        if filter is None:
            return self.num_rows
        return self.scanner(filter=filter, **kwargs).count_rows()

    def head(self, num_rows: int, columns: Any = None, filter: Any = None, **kwargs: Any) -> Any:
        """The first ``num_rows`` (filtered) rows."""
        return self.scanner(columns=columns, filter=filter, **kwargs).head(num_rows)

    def take(self, indices: Any, columns: Any = None, filter: Any = None, **kwargs: Any) -> Any:
        """Rows at ``indices`` (0-based within the fragment, after ``filter``)."""
        return self.scanner(columns=columns, filter=filter, **kwargs).take(indices)


def _rebuild_fragment(path: str, hdu: Any, row_range: tuple[int, int], schema: Any,
                      add_path_column: bool, stats: FileStats | None,
                      storage_options: dict[str, Any] | None = None,
                      hdu_index: int | None = None) -> FitsFragment:
    if hdu_index is None:  # pickled by an older version: validate against the file now
        return FitsFragment(path, hdu, row_range, schema=schema, add_path_column=add_path_column, stats=stats,
                            storage_options=storage_options)
    # Checked when it was built; the file is opened by the first scan (`open`).
    frag = FitsFragment.__new__(FitsFragment)
    frag.path = path
    frag.storage_options = storage_options or None
    frag.hdu = hdu
    frag._source = None
    frag.row_range = (int(row_range[0]), int(row_range[1]))
    frag.hdu_index = int(hdu_index)
    frag.add_path_column = bool(add_path_column)
    frag._schema = schema
    frag.stats = stats
    return frag


def _sub_fragment(f: FitsFragment, row_range: tuple[int, int]) -> FitsFragment:
    """Rows ``row_range`` of ``f``: the same file, source options and open source, carrying
    only the statistics chunks that cover those rows (what travels to a worker stays small)."""
    a, b = row_range
    stats = f.stats
    if stats is not None:
        stats = FileStats(stats.nrows, [ch for ch in stats.chunks if ch.start < b and ch.stop > a],
                          stats.summary, stats.sky)
    return FitsFragment(f.path, f.hdu, row_range, schema=f._schema, add_path_column=f.add_path_column,
                        stats=stats, storage_options=f.storage_options, _source=f._source)


def _with_path_columns(schema: Any, add: bool) -> Any:
    if not add:
        return schema
    for name in PATH_COLUMNS:
        if name in schema.names:
            raise ValueError(f"add_path_column: the table already has a column named {name!r}")
    return schema.append(pa.field("filename", pa.string())).append(pa.field("hdu", pa.int32()))


# -- one fragment under one plan -------------------------------------------------------------------
class _FragmentScan:
    """A fragment under a plan: which conjuncts run in the decoder (predicate kernel, or pyarrow on
    just-decoded filter columns), which after unification, and which row ranges stats exclude."""

    def __init__(self, fragment: FitsFragment, plan: _Plan, threads: int | None = None) -> None:
        self.fragment = fragment
        self.plan = plan
        self.threads = threads  # decode threads of the kernels (None: the shared default)
        src = fragment.open()
        self.src = src
        file_names = {s.name for s in src.specs}
        self.skip = False
        pushed, late = [], []
        path_values = {"filename": fragment.path, "hdu": fragment.hdu_index}
        if plan.tree is not None:
            for term in _expr.conjuncts(plan.tree):
                cols = set(_expr.columns(term))
                if cols and cols <= set(plan.path_columns):
                    if not _constant_true(term, plan.schema, path_values):
                        self.skip = True  # e.g. filename = 'other.fits': this file cannot match
                elif cols <= file_names:
                    pushed.append(term)
                else:
                    late.append(term)
        pushed_tree = _expr.and_all(pushed)
        late_tree = _expr.and_all(late)
        late_expr = None if late_tree is None else _expr.to_pyarrow(late_tree, plan.schema)
        late_cols = [] if late_tree is None else _expr.columns(late_tree)
        if plan.opaque is not None:
            late_expr = plan.opaque if late_expr is None else (late_expr & plan.opaque)
            late_cols = list(dict.fromkeys(late_cols + _fields_of(plan.opaque, plan.schema.names)))
        self.late = late_expr
        wanted = list(dict.fromkeys(plan.projection + late_cols))
        self.gather = wanted  # columns conformed before the late filter
        self.decode = [n for n in wanted if n in file_names]
        self._pushed = pushed_tree
        self._file_names = file_names
        self._scanner: Scanner | None = None

    @property
    def scanner(self) -> Scanner:
        """The file's planned scanner, built on first use (fragments statistics rule out never
        pay for predicate planning); its where-kernel is planned here too, on the file's first
        rows, before the tasks copy it."""
        if self._scanner is None:
            try:
                self._scanner = Scanner([self.src], columns=self.decode, filter=self._pushed,
                                        batch_size=_WHOLE, schema_metadata=False,
                                        options=DecodeOptions(threads=self.threads))
            except ValueError:
                if self._pushed is None:
                    raise
                # the file's own types refuse a term the unified types accept: filter late instead
                extra = _expr.to_pyarrow(self._pushed, self.plan.schema)
                self.late = extra if self.late is None else (self.late & extra)
                self.gather = list(dict.fromkeys(self.gather + _expr.columns(self._pushed)))
                self.decode = [n for n in self.gather if n in self._file_names]
                self._scanner = Scanner([self.src], columns=self.decode, batch_size=_WHOLE,
                                        schema_metadata=False, options=DecodeOptions(threads=self.threads))
            self._scanner.prepare_kernel()  # once, shared by every task's row-slice copy
        return self._scanner

    def ranges(self, batch_size: int) -> list[tuple[int, int]]:
        """Row ranges to read, in order: the fragment's rows minus chunks statistics exclude and
        row ranges a cone's HEALPix cells do not touch."""
        return list(self.iter_ranges(batch_size))

    def iter_ranges(self, batch_size: int) -> Iterator[tuple[int, int]]:
        """`ranges`, lazily: a scan that stops early (``head``, ``LIMIT``) plans only what it
        reads, whatever ``batch_size``."""
        if self.skip:
            return
        a, b = self.fragment.row_range
        kept = [(a, b)]
        stats = self.fragment.stats
        tree = self.plan.tree
        if stats is not None and tree is not None and stats.nrows == self.src.nrows:
            if not may_match(tree, stats.summary, stats.nrows):
                return
            # a cone on the sidecar's sky columns: only the row ranges whose cells it touches
            allowed = cone_rows(tree, stats.sky)
            window = [(a, b)] if allowed is None else intersect([(a, b)], allowed)
            kept = []
            for ch in stats.chunks:
                lo, hi = max(ch.start, a), min(ch.stop, b)
                if lo >= hi or not overlaps(window, lo, hi):
                    continue
                if not may_match(tree, ch.stats, ch.stop - ch.start):
                    continue
                if kept and kept[-1][1] == lo:
                    kept[-1] = (kept[-1][0], hi)
                else:
                    kept.append((lo, hi))
            kept = intersect(kept, window)
        for lo, hi in kept:
            for s in range(lo, hi, batch_size):
                yield s, min(s + batch_size, hi)

    def run(self, rng: tuple[int, int]) -> Any | None:
        """Decode one row range → a batch in the plan's output schema, or None when empty."""
        batches = list(self.scanner.with_row_slice(rng).to_batches())
        if not batches:
            return None
        if len(batches) == 1:
            batch = batches[0]
        else:
            batch = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
        batch = self._conform(batch, self.gather)
        if self.late is not None:
            try:
                batch = pa.Table.from_batches([batch]).filter(self.late).combine_chunks()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise filter_error(exc, self.src.path, self.src.entry.index) from None
            batch = batch.select(self.plan.projection)
            batch = batch.to_batches()[0] if batch.num_rows else None
            if batch is None:
                return None
        return batch if batch.num_rows else None

    def _conform(self, batch: Any, names: Sequence[str]) -> Any:
        """Reorder, cast, null-fill and add path columns to match the dataset schema."""
        schema = self.plan.schema
        n = batch.num_rows
        if not names:
            return batch.select([])  # no columns, but the row count stays
        arrays, fields = [], []
        have = set(batch.schema.names)
        for name in names:
            target = schema.field(name)
            if name in self.plan.path_columns and name not in have:
                value = self.fragment.path if name == "filename" else self.fragment.hdu_index
                arr = pa.repeat(pa.scalar(value, target.type), n)
            elif name in have:
                arr = batch.column(name)
                if not arr.type.equals(target.type):
                    arr = arr.cast(target.type)
            else:
                arr = pa.nulls(n, target.type)
            arrays.append(arr)
            fields.append(target)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _fields_of(expression: Any, names: Sequence[str]) -> list[str]:
    """The columns a pyarrow expression reads (every column when that cannot be told)."""
    try:
        from ..query.arrow import decode_arrow_expression

        raw = decode_arrow_expression(expression)
    except Exception:  # an undocumented encoding: decode everything rather than guess
        return list(names)
    found: list[str] = []
    stack = [raw]
    while stack:
        node = stack.pop()
        if node[0] == "field":
            found.append(node[1])
        elif node[0] == "call":
            stack.extend(node[2])
    if any(f not in names for f in found):
        return list(names)
    return [n for n in names if n in found]


def _constant_true(term: Any, schema: Any, values: dict[str, Any]) -> bool:
    """Evaluate a term over the path columns alone (one row)."""
    table = pa.table({k: pa.array([v], schema.field(k).type) for k, v in values.items()})
    return bool(table.filter(_expr.to_pyarrow(term, schema)).num_rows)


# -- scanner ----------------------------------------------------------------------------------------
class FitsScanner:
    """A planned scan of fragments (what `FitsDataset.scanner` returns).

    Mirrors ``pyarrow.dataset.Scanner``: `to_reader` (what DuckDB calls), `to_batches`,
    `to_table`, `scan_batches`, `count_rows`, `head`, `take`, `projected_schema`,
    `dataset_schema`, and ``__arrow_c_stream__``. Every call reads the files again.
    """

    def __init__(self, fragments: Sequence[FitsFragment], schema: Any, *, columns: Any = None,
                 filter: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 path_columns: tuple[str, ...] = (), use_threads: bool = True,
                 threads: int | None = None, batch_readahead: Any = None, fragment_readahead: Any = None,
                 fragment_scan_options: Any = None, cache_metadata: Any = None,
                 memory_pool: Any = None) -> None:
        try:
            size = -1 if isinstance(batch_size, bool) else operator.index(batch_size)
        except TypeError:
            size = -1
        if size <= 0:
            raise ValueError("batch_size must be a positive integer")
        if fragment_scan_options is not None:
            raise NotImplementedError("fragment_scan_options are not supported by FITS datasets")
        self._fragments = list(fragments)
        self._plan = _make_plan(schema, columns, filter, path_columns)
        self._batch_size = size
        self._threads = bool(use_threads)
        if threads is not None and (isinstance(threads, bool) or operator.index(threads) <= 0):
            raise ValueError("threads must be a positive integer")
        self._decode_threads = None if threads is None else operator.index(threads)
        self._scans: list[_FragmentScan] | None = None

    @property
    def dataset_schema(self) -> Any:
        """The schema of the dataset (every column)."""
        return self._plan.schema

    @property
    def projected_schema(self) -> Any:
        """The schema of the results."""
        return self._plan.out_schema

    schema = projected_schema

    def _planned(self) -> list[_FragmentScan]:
        if self._scans is None:
            self._scans = [_FragmentScan(f, self._plan, self._decode_threads) for f in self._fragments]
        return self._scans

    def _iter_tasks(self, stream: bool = False) -> Iterator[tuple[_FragmentScan, tuple[int, int]]]:
        for fs in self._planned():
            planned = False
            size = self._batch_size
            if stream:
                # A streamed task decodes at least _TASK_BYTES of table rows (cut into
                # batch_size batches afterwards): fewer, larger tasks cost less Python per row.
                size = max(size, _TASK_BYTES // max(1, fs.src.entry.row_bytes))
            for r in fs.iter_ranges(size):
                if not planned:
                    fs.scanner  # noqa: B018 - plan here, once, not racing in the workers
                    planned = True
                yield fs, r

    def _tasks(self) -> list[tuple[_FragmentScan, tuple[int, int]]]:
        return list(self._iter_tasks())

    def _ramped(self, stream: bool = False) -> Iterator[tuple[_FragmentScan, tuple[int, int]]]:
        """The tasks, the first ones cut small and growing 4× up to their full size: a consumer
        that stops after a few rows (DuckDB's ``LIMIT n``) pays for O(n) rows, not a wave of
        full batches."""
        size = _RAMP_FIRST
        for fs, (lo, hi) in self._iter_tasks(stream):
            while hi - lo > size:
                yield fs, (lo, lo + size)
                lo += size
                size *= 4
            yield fs, (lo, hi)

    def _stream(self) -> Iterator[tuple[Any, FitsFragment]]:
        # Tasks run ahead on the pool (a window that starts at one task and doubles up to two
        # per thread) while the consumer — DuckDB, Polars — works on the batches already
        # yielded: decoding overlaps consumption, memory stays bounded, and the first rows
        # come back after the least work.
        width = max(2, 2 * default_threads()) if self._threads else 1
        step = self._batch_size

        def run(task: tuple[_FragmentScan, tuple[int, int]]) -> tuple[Any, FitsFragment]:
            return task[0].run(task[1]), task[0].fragment

        for batch, fragment in iter_parallel(run, self._ramped(stream=True), width):
            if batch is None:
                continue
            if batch.num_rows <= step:
                yield batch, fragment
                continue
            for start in range(0, batch.num_rows, step):  # zero-copy slices
                yield batch.slice(start, step), fragment

    def to_batches(self) -> Iterator[Any]:
        """Stream record batches (at most ``batch_size`` rows each; empty ones skipped)."""
        for batch, _ in self._stream():
            yield batch

    def scan_batches(self) -> Iterator[TaggedRecordBatch]:
        """Stream ``(record_batch, fragment)`` pairs."""
        for batch, frag in self._stream():
            yield TaggedRecordBatch(batch, frag)

    def to_reader(self) -> Any:
        """A ``pyarrow.RecordBatchReader`` (DuckDB reads datasets through this)."""
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_table(self) -> Any:
        """Every selected row as a ``pyarrow.Table``."""
        tasks = self._tasks()
        def run(t: Any) -> Any:
            return t[0].run(t[1])

        results = run_parallel(run, tasks) if self._threads else [run(t) for t in tasks]
        return pa.Table.from_batches([b for b in results if b is not None], schema=self.projected_schema)

    def count_rows(self) -> int:
        """Selected rows: from the headers (and statistics) alone when there is no filter."""
        plan = self._plan
        if plan.tree is None and plan.opaque is None:
            return sum(f.num_rows for f in self._fragments)

        def count(t: tuple[_FragmentScan, tuple[int, int]]) -> int:
            fs, rng = t
            scanner = fs.scanner  # planning may move terms to the late filter
            if fs.late is None:
                return scanner.with_row_slice(rng).count_rows()
            batch = fs.run(rng)
            return 0 if batch is None else batch.num_rows

        # only the filter's columns are needed to count
        counting = FitsScanner(self._fragments, plan.schema, columns=[], batch_size=self._batch_size,
                               path_columns=plan.path_columns, threads=self._decode_threads)
        counting._plan = _Plan(plan.schema, [], plan.tree, plan.opaque, plan.path_columns)
        tasks = counting._tasks()
        return sum(run_parallel(count, tasks) if self._threads else [count(t) for t in tasks])

    def head(self, num_rows: int) -> Any:
        """The first ``num_rows`` selected rows as a ``pyarrow.Table``."""
        if num_rows < 0:
            raise ValueError("num_rows must be >= 0")
        got, have = [], 0
        if num_rows:
            for fs, rng in self._ramped():
                batch = fs.run(rng)
                if batch is None:
                    continue
                got.append(batch.slice(0, num_rows - have))
                have += got[-1].num_rows
                if have >= num_rows:
                    break
        return pa.Table.from_batches(got, schema=self.projected_schema)

    def take(self, indices: Any) -> Any:
        """Rows at ``indices`` (0-based positions in the scan's result)."""
        idx = indices
        if not isinstance(indices, (pa.Array, pa.ChunkedArray)):
            idx = pa.array(indices, pa.int64())
        if self._plan.tree is not None or self._plan.opaque is not None:
            return self.to_table().take(idx)
        import numpy as np

        positions = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
        total = sum(f.num_rows for f in self._fragments)
        if positions.size and (positions.min() < -total or positions.max() >= total):
            raise IndexError(f"take: index out of range for {total} rows")
        positions = np.where(positions < 0, positions + total, positions)
        starts = np.cumsum([0] + [f.num_rows for f in self._fragments])
        which = np.searchsorted(starts, positions, side="right") - 1
        pieces, order = [], []
        for k in np.unique(which):
            frag = self._fragments[int(k)]
            mask = which == k
            local = positions[mask] - starts[k] + frag.row_range[0]
            fs = _FragmentScan(frag, self._plan)
            fs.scanner  # noqa: B018 - settles which columns the file decodes
            sc = Scanner([fs.src], columns=fs.decode, rows=local, batch_size=_WHOLE, schema_metadata=False)
            for batch in sc.to_batches():
                pieces.append(fs._conform(batch, self._plan.projection))
            order.append(np.nonzero(mask)[0])
        table = pa.Table.from_batches(pieces, schema=self.projected_schema)
        if not order:
            return table
        inverse = np.empty(positions.size, np.int64)
        inverse[np.concatenate(order)] = np.arange(positions.size)
        return table.take(pa.array(inverse))


# -- dataset ----------------------------------------------------------------------------------------
def _unify(schemas: Sequence[Any], paths: Sequence[str]) -> Any:
    """One schema from many files: columns by name in first-seen order; numeric columns widen;
    any other type difference is an error naming both files."""
    fields: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for schema, path in zip(schemas, paths):
        for f in schema:
            if f.name not in fields:
                fields[f.name], origin[f.name] = f, path
                continue
            have = fields[f.name]
            if have.type.equals(f.type):
                continue
            wider = _widen(have.type, f.type)
            if wider is None:
                raise TypeError(f"column {f.name!r} is {have.type} in {origin[f.name]} but {f.type} "
                                f"in {path}; pass schema= to choose one")
            fields[f.name] = have.with_type(wider)
    return pa.schema(list(fields.values()))


def _widen(a: Any, b: Any) -> Any:
    t = pa.types
    if t.is_floating(a) and t.is_floating(b):
        return a if a.bit_width >= b.bit_width else b
    if t.is_integer(a) and t.is_integer(b):
        if t.is_signed_integer(a) == t.is_signed_integer(b):
            return a if a.bit_width >= b.bit_width else b
        signed, unsigned = (a, b) if t.is_signed_integer(a) else (b, a)
        if signed.bit_width > unsigned.bit_width:
            return signed
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}.get(unsigned.bit_width)
    if (t.is_integer(a) and t.is_floating(b)) or (t.is_floating(a) and t.is_integer(b)):
        return pa.float64()
    return None


class FitsDataset(pds.Dataset):  # type: ignore[misc]  # pyarrow ships no type stubs
    """A ``pyarrow.dataset.Dataset`` over table HDUs of FITS files (build it with `dataset`).

    Projection and filters (``pyarrow.compute.Expression`` or where-strings) reach the decoder:
    predicate terms the kernel supports run on the raw bytes, other terms run in pyarrow on the
    filter columns first, and only the selected rows of the other columns are then decoded.
    Sidecar statistics (``torchfits index build``) skip files and row chunks that cannot match.

    Functions of pyarrow that need a native dataset (``pyarrow.dataset.Scanner.from_dataset``,
    ``pyarrow.dataset.dataset([...])`` of datasets, Acero plans) cannot take this one: call
    `scanner`, `to_table` or `to_batches` instead.
    """

    def __init__(self, fragments: Sequence[FitsFragment], schema: Any, *, add_path_column: bool = False,
                 filter: Any = None, index_path: str | None = None) -> None:
        # The native base is deliberately left uninitialised; every public method is overridden.
        self._fragments = list(fragments)
        self._schema = schema
        self._add_path_column = bool(add_path_column)
        self._filter = filter
        self._index_path = index_path

    def __reduce__(self) -> Any:
        return (FitsDataset._restore, (self._fragments, self._schema, self._add_path_column,
                                       self._filter, self._index_path))

    @classmethod
    def _restore(cls, fragments: list[FitsFragment], schema: Any, add_path_column: bool, filter: Any,
                 index_path: str | None) -> FitsDataset:
        return cls(fragments, schema, add_path_column=add_path_column, filter=filter, index_path=index_path)

    def __repr__(self) -> str:
        paths = self.files
        more = f" +{len(paths) - 1} files" if len(paths) > 1 else ""
        names = list(self._schema.names)
        shown = ", ".join(names[:8]) + (f", ... ({len(names)} columns)" if len(names) > 8 else "")
        extra = f", filter={str(self._filter)!r}" if self._filter is not None else ""
        hdu = self._fragments[0].hdu if self._fragments else None
        return (f"<FitsDataset {paths[0] if paths else ''!r}{more}, hdu={hdu!r}, "
                f"{len(self._fragments)} fragment{'s' if len(self._fragments) != 1 else ''}, "
                f"columns=[{shown}]{extra}>")

    def _repr_html_(self) -> str:
        from ..fits.notebook_html import html_summary

        paths = self.files
        first = paths[0] if paths else ""
        fields: list[tuple[str, Any]] = [
            ("files", first if len(paths) == 1 else f"{len(paths)} files, first {first}"),
            ("HDU", self._fragments[0].hdu if self._fragments else None),
            ("fragments", len(self._fragments)),
            ("columns", ", ".join(f"{f.name}: {f.type}" for f in self._schema))]
        if self._filter is not None:
            fields.append(("filter", str(self._filter)))
        return html_summary("FitsDataset", fields)

    # -- properties -------------------------------------------------------------------------------
    @property
    def schema(self) -> Any:
        """The unified Arrow schema (plus ``filename``/``hdu`` with ``add_path_column``)."""
        return self._schema

    @property
    def files(self) -> list[str]:
        """The files, in scan order."""
        return list(dict.fromkeys(f.path for f in self._fragments))

    @property
    def index_path(self) -> str | None:
        """The statistics sidecar in use, if any."""
        return self._index_path

    @property
    def partition_expression(self) -> Any:
        """Always true: there is no directory partitioning."""
        return pc.scalar(True)

    # -- scanning ---------------------------------------------------------------------------------
    def scanner(self, columns: Any = None, filter: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
                **kwargs: Any) -> FitsScanner:
        """Plan a scan.

        Parameters
        ----------
        columns : list of str, optional
            Projection (default: every column); the decoder only decodes these and the filter's.
        filter : pyarrow.compute.Expression or str, optional
            A predicate (a where-string is parsed with the native dialect); ANDed with the
            dataset's own filter (see `filter`).
        batch_size : int
            Most rows per batch.
        **kwargs
            ``use_threads`` (default True: row ranges run on the shared pool), ``threads``
            (decode threads of each range's kernels; default: the shared default); pyarrow's
            ``batch_readahead``, ``fragment_readahead``, ``cache_metadata`` and ``memory_pool``
            are accepted and ignored.

        Returns
        -------
        FitsScanner
        """
        return FitsScanner(self._fragments, self._schema, columns=columns,
                           filter=_combine(self._filter, filter), batch_size=batch_size,
                           path_columns=PATH_COLUMNS if self._add_path_column else (), **kwargs)

    def to_batches(self, columns: Any = None, filter: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
                   **kwargs: Any) -> Iterator[Any]:
        """Stream record batches (what Polars' ``scan_pyarrow_dataset`` calls)."""
        return self.scanner(columns, filter, batch_size, **kwargs).to_batches()

    def to_table(self, columns: Any = None, filter: Any = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 **kwargs: Any) -> Any:
        """Read the selected rows and columns into a ``pyarrow.Table``."""
        return self.scanner(columns, filter, batch_size, **kwargs).to_table()

    def count_rows(self, filter: Any = None, batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> int:
        """Rows matching ``filter``: from the headers alone without one."""
        return self.scanner(None, filter, batch_size, **kwargs).count_rows()

    def head(self, num_rows: int, columns: Any = None, filter: Any = None,
             batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Any:
        """The first ``num_rows`` selected rows."""
        return self.scanner(columns, filter, batch_size, **kwargs).head(num_rows)

    def take(self, indices: Any, columns: Any = None, filter: Any = None,
             batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Any:
        """Rows at ``indices`` (0-based, across files in order; after ``filter`` if given)."""
        return self.scanner(columns, filter, batch_size, **kwargs).take(indices)

    def get_fragments(self, filter: Any = None) -> Iterator[FitsFragment]:
        """The fragments (one per file by default), skipping those statistics rule out."""
        if filter is None and self._filter is None:
            yield from self._fragments
            return
        plan = _make_plan(self._schema, [], _combine(self._filter, filter),
                          PATH_COLUMNS if self._add_path_column else ())
        for frag in self._fragments:
            if _FragmentScan(frag, plan).ranges(_WHOLE):
                yield frag

    # -- derived datasets -------------------------------------------------------------------------
    def filter(self, expression: Any) -> FitsDataset:
        """A dataset whose scans apply ``expression`` (ANDed with any filter given later)."""
        _make_plan(self._schema, [], expression, PATH_COLUMNS if self._add_path_column else ())
        return FitsDataset(self._fragments, self._schema, add_path_column=self._add_path_column,
                           filter=_combine(self._filter, expression), index_path=self._index_path)

    def replace_schema(self, schema: Any) -> FitsDataset:
        """The same files read into ``schema`` (missing columns null, others cast)."""
        frags = [FitsFragment(f.path, f.hdu, f.row_range, schema=schema, add_path_column=f.add_path_column,
                              storage_options=f.storage_options,
                              stats=f.stats) for f in self._fragments]
        return FitsDataset(frags, schema, add_path_column=self._add_path_column, filter=self._filter,
                           index_path=self._index_path)

    def split(self, max_rows: int) -> FitsDataset:
        """The same dataset with fragments of at most ``max_rows`` rows (finer parallel units)."""
        frags = [g for f in self._fragments for g in f.split(max_rows)]
        return FitsDataset(frags, self._schema, add_path_column=self._add_path_column, filter=self._filter,
                           index_path=self._index_path)

    def to_dask_dataframe(self, columns: Sequence[str] | None = None, where: Any = None, *,
                          index: str | None = None, split_row_groups: Any = "auto",
                          use_threads: bool = False, threads: int | None = None) -> Any:
        """A ``dask.dataframe.DataFrame`` over this dataset (needs the ``dask`` extra).

        Parameters
        ----------
        columns : list of str, optional
            Columns to read; Dask's optimizer narrows this further to what the graph uses.
        where : str or pyarrow.compute.Expression, optional
            A filter run inside every partition's scan (ANDed with the dataset's filter);
            partitions the sidecar statistics rule out are not in the graph at all.
        index : str, optional
            A column to use as the index; with statistics proving each partition's range is
            disjoint from the others, the divisions are known (and partitions sorted by it).
        split_row_groups : "auto", bool or int
            "auto"/True: about 128 MB of decoded rows per partition (large files cut at
            statistics chunk boundaries, small consecutive files gathered into one partition);
            False: one partition per file; an int: at most that many rows (one file each).
        use_threads : bool
            Scan a partition's row ranges on the shared thread pool (default: one after the
            other, since Dask already runs tasks in parallel).
        threads : int, optional
            Decode threads of one partition's kernels. Default: 1 inside a Dask worker (its
            task slots are the parallelism; see docs/dask.md), the shared default elsewhere.

        Returns
        -------
        dask.dataframe.DataFrame
        """
        # The engine's one import from an adapter above it (docs/architecture.md, "Dask"): the
        # partition helpers know fragments by their public attributes and import no dataset code.
        from ..dask.partitions import (
            FragmentReader,
            from_fragments,
            group_fragments,
            nullable_columns,
            sorted_divisions,
            split_ranges,
        )

        filter = _combine(self._filter, where)
        path_columns = PATH_COLUMNS if self._add_path_column else ()
        plan = _make_plan(self._schema, columns, filter, path_columns)  # checks columns and filter
        if index is not None and index not in self._schema.names:
            raise ColumnNotFoundError(f"index column {index!r} is not in the dataset "
                                      f"(columns: {', '.join(self._schema.names)})")
        if threads is not None and (isinstance(threads, bool) or operator.index(threads) <= 0):
            raise ValueError("threads must be a positive integer")
        parts = []
        for f in self._fragments:
            ranges = split_ranges(f, split_row_groups)
            parts += [f] if ranges == [f.row_range] else [_sub_fragment(f, r) for r in ranges]
        nullable = nullable_columns(parts, self._schema)
        if plan.tree is not None:
            # partitions the statistics (or path columns) rule out never become tasks
            probe = _make_plan(self._schema, [], filter, path_columns)
            parts = [f for f in parts if _FragmentScan(f, probe).ranges(_WHOLE)]
        divisions = None
        if index is not None and parts:
            parts, divisions = sorted_divisions(parts, index)
        groups, divisions = group_fragments(parts, split_row_groups, divisions)
        reader = FragmentReader(self._schema, filter, index, nullable, divisions is not None, use_threads,
                                threads=None if threads is None else operator.index(threads))
        projection = None if columns is None else [c for c in plan.projection if c != index]
        return from_fragments(reader, groups, projection, divisions)

    def sort_by(self, sorting: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("FitsDataset.sort_by is not supported: use "
                                  "ds.to_table(...).sort_by(...) or SQL ORDER BY")

    def join(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("FitsDataset.join is not supported: join ds.to_table(...) or use "
                                  "torchfits.sql / DuckDB")

    def join_asof(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("FitsDataset.join_asof is not supported: use ds.to_table(...) first")


def _not_supported(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"FitsDataset.{name} is not supported (it needs a native pyarrow "
                                  "dataset); use scanner(), to_table() or to_batches()")

    method.__name__ = name
    return method


# Whatever pyarrow adds to Dataset in future must not reach the uninitialised native object.
for _name in dir(pds.Dataset):
    if not _name.startswith("_") and _name not in FitsDataset.__dict__:
        setattr(FitsDataset, _name, _not_supported(_name))
del _name


_SCHEMAS: OrderedDict[tuple[str, Any, int], pa.Schema] = OrderedDict()
_SCHEMAS_LOCK = threading.Lock()


def _file_schema(src: TableSource) -> pa.Schema:
    """The Arrow schema of one table HDU, remembered per local file version (a dataset over
    thousands of files is reopened often; the header is what the schema comes from)."""
    key = src.index.key
    if key is None:  # remote or in-memory: no cheap version key
        return arrow_schema(src.specs)
    memo = (src.path, key, src.entry.index)
    with _SCHEMAS_LOCK:
        schema = _SCHEMAS.get(memo)
    if schema is None:
        schema = arrow_schema(src.specs)
        with _SCHEMAS_LOCK:
            _SCHEMAS[memo] = schema
            while len(_SCHEMAS) > 8192:
                _SCHEMAS.popitem(last=False)
    return schema


def _paths_and_hdus(source: Any, hdu: Any, storage_options: dict[str, Any] | None
                    ) -> tuple[list[Any], list[Any]]:
    """The files of a ``dataset`` source and the table HDU of each. A local path that exists is
    a file; else one ending in ``[...]`` whose part before exists is that file with an HDU
    suffix (``cat.fits[CAT,2]``, ``cat.fits[2]``), which wins over the default ``hdu`` (another
    ``hdu`` is refused); else a glob (or a directory, a URL)."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    paths: list[Any] = []
    hdus: list[Any] = []
    for item in items:
        fp = hdu_suffix(item)
        if fp is None:
            found = resolve_sources(with_storage_options(item, storage_options))
            paths += found
            hdus += [hdu] * len(found)
            continue
        if fp.section is not None or fp.hdu is None:
            raise ValueError(f"{item!r}: an image section cannot select table rows; name the "
                             "HDU alone ('cat.fits[CAT,2]') and filter rows with where=")
        paths.append(with_storage_options(fp.path, storage_options))
        hdus.append(suffix_hdu(fp.path, fp.hdu, hdu, 1))
    return paths, hdus


def dataset(source: SourceArg, hdu: HduArg = 1, *, schema: Any = None, add_path_column: bool = False,
            index: Any = None, storage_options: dict[str, Any] | None = None) -> FitsDataset:
    """Open FITS tables as one ``pyarrow.dataset.Dataset`` that DuckDB and Polars push into.

    Parameters
    ----------
    source : str, os.PathLike, glob, directory, or a list of them
        The files (a directory means its ``*.fit*`` files). ``cat.fits[CAT,2]`` /
        ``cat.fits[2]`` names that file's HDU (when ``cat.fits[CAT,2]`` itself does not exist
        and ``cat.fits`` does; other brackets are glob characters).
    hdu : int, str or (EXTNAME, EXTVER)
        The table HDU, by index or EXTNAME, in every file without an HDU suffix (a suffix wins
        over the default; another ``hdu`` is refused).
    schema : pyarrow.Schema, optional
        The dataset schema; default: the files' schemas unified by column name (missing columns
        read as nulls, integer and float columns widened; other differences raise TypeError).
    add_path_column : bool
        Add ``filename`` (string) and ``hdu`` (int32) columns; filters on them skip files.
    index : None, False, str, os.PathLike or URL
        Statistics sidecar (``_torchfits_index.json``, written by ``torchfits index build``,
        `build_index` or ``torchfits.dask.to_fits``); None looks for one beside the files (for
        URLs too: one small request), False uses none.
    storage_options : dict, optional
        fsspec options for URLs (credentials, endpoint, ...) plus torchfits's remote options;
        see ``docs/remote.md``.

    Returns
    -------
    FitsDataset
    """
    paths, hdus = _paths_and_hdus(source, hdu, storage_options)
    if not paths:
        raise FileNotFoundError(f"no files in {source!r}")
    sources = run_parallel(lambda k: TableSource.open(paths[k], hdus[k]), range(len(paths)))
    names = [p.url if isinstance(p, SourcePath) else p for p in paths]
    if schema is None:
        schema = _unify([_file_schema(s) for s in sources], names)
    elif not isinstance(schema, pa.Schema):
        raise TypeError("schema must be a pyarrow.Schema")
    schema = _with_path_columns(schema, add_path_column)
    stats_index: StatsIndex | None
    if index is False:
        stats_index = None
    elif index is None:
        # beside the files, local or remote (a URL costs one small request; index=False saves it)
        stats_index = find_index(names, source, storage_options)
    else:
        stats_index = load_index(index, storage_options)
    fragments = []
    for path, file_hdu, name, src in zip(paths, hdus, names, sources):
        stats = (stats_index.lookup(name, src.entry.index, src.index.source)
                 if stats_index is not None else None)
        fragments.append(FitsFragment(path, file_hdu, (0, src.nrows), schema=schema,
                                      storage_options=storage_options,
                                      add_path_column=add_path_column, stats=stats, _source=src))
    return FitsDataset(fragments, schema, add_path_column=add_path_column,
                       index_path=None if stats_index is None else stats_index.path)

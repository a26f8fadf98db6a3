"""FITS datasets as Dask DataFrames: one ``dask.dataframe.from_map`` partition per fragment.

`FitsDataset.to_dask_dataframe` plans (fragments, filter, statistics) and calls the helpers
here, which know fragments only by their public attributes (this module imports no dataset
code, so the engine's one call up into this package cannot close a cycle). Each partition is a
`FitsFragment` (file, HDU, row range) read by a small picklable callable, `FragmentReader`,
whose ``columns=`` keyword lets Dask's optimizer push column selections into the decoder. The
where-filter runs inside every fragment's scan (predicate kernel first), the sidecar statistics
drop partitions that cannot match before the graph is built, and a sorted index column gets
known divisions from the same statistics. `task_threads` chooses the decode threads of a task
for tables and images alike. Dask is imported only when called.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..tables.stats_index import ColumnStats

__all__ = ["FragmentReader", "task_threads", "in_dask_worker", "split_ranges", "group_fragments",
           "sorted_divisions", "nullable_columns", "from_fragments", "TARGET_PARTITION_BYTES"]

#: decoded bytes aimed at per partition when ``split_row_groups="auto"`` (the issue asks 64–256 MB)
TARGET_PARTITION_BYTES = 128 << 20


def _decoded_row_bytes(fragment: Any) -> int:
    """Bytes a row takes once decoded: its FITS row width is a close, cheap estimate (strings
    and bits grow a little, the validity bitmaps are small)."""
    return max(1, int(fragment.open().entry.row_bytes))


def _split_points(fragment: Any, rows: int) -> list[int]:
    """Row numbers where ``fragment`` is cut into parts of about ``rows`` rows; on the sidecar's
    chunk boundaries when the file has statistics, so every part's statistics are exact."""
    a, b = fragment.row_range
    stats = fragment.stats
    if stats is not None and stats.nrows == fragment.open().nrows and stats.chunks:
        cuts = [a]
        for ch in stats.chunks:
            lo, hi = max(ch.start, a), min(ch.stop, b)
            if lo >= hi:
                continue
            if hi - lo > rows:  # a chunk larger than a partition: cut inside it too
                cuts += [c for c in range(lo + rows, hi, rows) if c - cuts[-1] >= rows]
            if hi < b and hi - cuts[-1] >= rows:
                cuts.append(hi)
        return cuts + [b]
    return list(range(a, b, rows)) + [b] if b > a else [a, b]


def split_ranges(fragment: Any, split_row_groups: Any = "auto") -> list[tuple[int, int]]:
    """The row ranges ``fragment`` is cut into, one Dask partition each.

    ``"auto"`` (or True) aims at `TARGET_PARTITION_BYTES` of decoded data per partition, False
    keeps the fragment whole, an int is the most rows a partition holds.
    """
    if split_row_groups is False:
        return [fragment.row_range]
    if split_row_groups is True or split_row_groups == "auto":
        rows = max(1, TARGET_PARTITION_BYTES // _decoded_row_bytes(fragment))
    elif isinstance(split_row_groups, int) and split_row_groups > 0:
        rows = int(split_row_groups)
    else:
        raise ValueError("split_row_groups must be 'auto', True, False or a positive int, "
                         f"not {split_row_groups!r}")
    cuts = _split_points(fragment, rows)
    return list(zip(cuts[:-1], cuts[1:]))


def group_fragments(fragments: Sequence[Any], split_row_groups: Any = "auto",
                    divisions: tuple | None = None) -> tuple[list[tuple], tuple | None]:
    """Consecutive small fragments gathered into partitions of about `TARGET_PARTITION_BYTES`
    decoded (``"auto"``/True only: False and an int keep one partition per fragment).

    Many small files as many small partitions cost Dask more than they save: each task has a
    fixed price, and a group-by over more than ~15 partitions is planned as a shuffle instead
    of a tree reduction. Order is kept, so known ``divisions`` (one per fragment, plus the end)
    stay true: a group's division is its first fragment's.
    """
    if not (split_row_groups is True or split_row_groups == "auto"):
        return [(f,) for f in fragments], divisions
    groups: list[tuple] = []
    starts: list[int] = []
    current: list[Any] = []
    size = 0
    for k, f in enumerate(fragments):
        nbytes = f.num_rows * _decoded_row_bytes(f)
        if current and size + nbytes > TARGET_PARTITION_BYTES:
            groups.append(tuple(current))
            current, size = [], 0
        if not current:
            starts.append(k)
        current.append(f)
        size += nbytes
    if current:
        groups.append(tuple(current))
    if divisions is not None:
        divisions = tuple(divisions[k] for k in starts) + (divisions[-1],)
    return groups, divisions


def _range_stats(fragment: Any, column: str) -> ColumnStats | None:
    """min/max/nulls of ``column`` over the fragment's rows, from the chunks covering them."""
    stats = fragment.stats
    if stats is None or stats.nrows != fragment.open().nrows:
        return None
    a, b = fragment.row_range
    parts = [ch.stats.get(column) for ch in stats.chunks if ch.start < b and ch.stop > a]
    if not parts or any(p is None or p.min is None or p.max is None for p in parts):
        return None
    try:
        return ColumnStats(min(p.min for p in parts), max(p.max for p in parts),  # type: ignore[union-attr]
                           sum(p.nulls for p in parts))  # type: ignore[union-attr]
    except TypeError:
        return None


def sorted_divisions(fragments: list[Any], column: str) -> tuple[list[Any], tuple | None]:
    """Fragments ordered by ``column`` and their divisions, when statistics prove the ranges are
    disjoint and null-free; otherwise the fragments unchanged and None."""
    ranges = [_range_stats(f, column) for f in fragments]
    if not ranges or any(r is None or r.nulls for r in ranges):
        return fragments, None
    order = sorted(range(len(fragments)), key=lambda i: (ranges[i].min, ranges[i].max))  # type: ignore[union-attr]
    lo = [ranges[i].min for i in order]  # type: ignore[union-attr]
    hi = [ranges[i].max for i in order]  # type: ignore[union-attr]
    if any(hi[k] >= lo[k + 1] for k in range(len(order) - 1)):
        return fragments, None  # overlapping ranges: a value could sit in two partitions
    return [fragments[i] for i in order], tuple(lo) + (hi[-1],)


def nullable_columns(fragments: Sequence[Any], schema: Any) -> frozenset:
    """Integer columns that can hold nulls (a TNULL in some file, or missing from some file)
    and every logical column (FITS ``L`` has a null byte): these become pandas' nullable
    dtypes, so every partition has the dtypes of the meta, nulls or not."""
    out = set()
    names = set(schema.names)
    for f in schema:
        if pa.types.is_boolean(f.type):
            out.add(f.name)
    seen = set()
    for frag in fragments:
        if frag.path in seen:
            continue
        seen.add(frag.path)
        specs = {s.name: s for s in frag.open().specs}
        for name in names:
            spec = specs.get(name)
            if spec is None or spec.tnull is not None:
                out.add(name)
    ints = {f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_boolean(f.type)}
    return frozenset((out & ints) - {"filename", "hdu"})


def _nullable_mapper(arrow_type: Any) -> Any:
    import pandas as pd

    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_integer(arrow_type):
        return pd.api.types.pandas_dtype(str(arrow_type).replace("int", "Int").replace("uInt", "UInt"))
    return None


def _string_mapper(arrow_type: Any) -> Any:
    import pandas as pd

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pd.StringDtype("pyarrow")
    return None


def arrow_to_pandas(table: Any, nullable: frozenset, arrow_strings: bool = False) -> Any:
    """``table`` as a pandas DataFrame: pandas' nullable dtypes for the ``nullable`` columns, and
    pyarrow-backed strings when ``arrow_strings`` (what Dask would convert them to anyway)."""
    names = table.column_names
    plain = [n for n in names if n not in nullable]
    df = table.select(plain).to_pandas(types_mapper=_string_mapper if arrow_strings else None)
    if len(plain) == len(names):
        return df
    for n in names:
        if n in nullable:
            df[n] = table.column(n).to_pandas(types_mapper=_nullable_mapper)
    return df[names]


def in_dask_worker() -> bool:
    """Whether this code runs as a task of a ``distributed`` worker (never imports Dask: a
    process that has not imported ``distributed`` is not a worker)."""
    import sys

    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except (ValueError, AttributeError):
        return False
    return True


def task_threads(threads: int | None) -> int | None:
    """Decode threads for one Dask task: ``threads`` when given; 1 inside a ``distributed``
    worker, whose task slots already are the parallelism (Dask sets ``OMP_NUM_THREADS=1`` in
    its workers for the same reason: a one-thread worker must not use every core, and two
    workers on one machine must not each start a pool of every core); otherwise None (the
    shared default: ``$TORCHFITS_THREADS`` or every core)."""
    if threads is not None:
        return int(threads)
    return 1 if in_dask_worker() else None


class FragmentReader:
    """What every Dask task calls: decode one fragment's filtered rows and projected columns.

    Small and picklable (schema, filter, index column, dtype choices); the fragment reopens its
    file in the worker. ``columns=`` is the hook Dask's optimizer fills with the columns the
    graph needs, so only those (and the filter's) are decoded.
    """

    def __init__(self, schema: Any, filter: Any, index: str | None, nullable: frozenset,
                 sort_index: bool, use_threads: bool, arrow_strings: bool = False,
                 threads: int | None = None) -> None:
        self.schema = schema
        self.filter = filter
        self.index = index
        self.nullable = nullable
        self.sort_index = sort_index
        self.use_threads = use_threads
        self.arrow_strings = arrow_strings
        self.threads = threads  # decode threads per task; None: `task_threads` decides

    def __call__(self, fragments: Any, columns: Sequence[str] | None = None) -> Any:
        """One partition: a fragment, or a tuple of fragments read one after the other."""
        names = [n for n in self.schema.names if n != self.index] if columns is None else list(columns)
        wanted = names + [self.index] if self.index is not None and self.index not in names else names
        threads = task_threads(self.threads)
        group = fragments if isinstance(fragments, (tuple, list)) else (fragments,)
        tables = [f.to_table(schema=self.schema, columns=wanted, filter=self.filter,
                             batch_size=max(1, f.num_rows), use_threads=self.use_threads, threads=threads)
                  for f in group]
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        df = arrow_to_pandas(table, self.nullable, self.arrow_strings)
        if self.index is not None:
            df = df.set_index(self.index)
            if self.sort_index:
                df = df.sort_index(kind="stable")
        return df

    def meta(self) -> Any:
        """The empty DataFrame every partition looks like (no data is read)."""
        df = arrow_to_pandas(self.schema.empty_table(), self.nullable, self.arrow_strings)
        return df.set_index(self.index) if self.index is not None else df

    def __dask_tokenize__(self) -> Any:
        return ("torchfits.FragmentReader", self.schema.to_string(show_schema_metadata=False),
                repr(self.filter), self.index, sorted(self.nullable), self.sort_index, self.use_threads,
                self.arrow_strings, self.threads)

    def __repr__(self) -> str:
        return f"<FragmentReader filter={self.filter!r} index={self.index!r}>"


def from_fragments(reader: FragmentReader, fragments: Sequence[Any], projection: Sequence[str] | None,
                   divisions: tuple | None) -> Any:
    """The ``dask.dataframe.from_map`` collection: one partition per element of ``fragments`` (a
    fragment or a tuple of them), ``columns=`` projectable, meta from the schema."""
    try:
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Dask DataFrames need Dask: pip install 'torchfits[dask]'") from exc
    from dask.dataframe.utils import pyarrow_strings_enabled

    import dask

    # Strings leave the workers in the dtype Dask would convert them to, so Dask's own
    # conversion pass is switched off while the collection is built: it converts every object
    # column, and array and variable-length cells (NumPy arrays) would become their repr.
    reader.arrow_strings = pyarrow_strings_enabled()
    meta = reader.meta()
    with dask.config.set({"dataframe.convert-string": False}):
        if not fragments:  # nothing can match: an empty frame with the right columns
            return dd.from_pandas(meta if projection is None else meta[list(projection)], npartitions=1)
        kwargs: dict[str, Any] = {}
        if projection is not None:
            kwargs["columns"] = list(projection)
        return dd.from_map(reader, list(fragments), meta=meta, divisions=divisions, label="read-fits",
                           enforce_metadata=False, **kwargs)

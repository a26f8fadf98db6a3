"""The table scanner: projection, row selection and where-pushdown over FITS tables → Arrow.

Rows are filtered on the predicate's columns first; only the selected rows of the projected
columns are then decoded (late materialisation). Batches stream, so memory is bounded by
``batch_size`` rows.
"""
from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import ColumnNotFoundError, FitsError, UnsupportedColumnError, WhereEvaluationError
from ..fits.aliases import HduArg, SourceArg
from ..fits.paths import fspath, parse_path, with_storage_options
from ..fits.rows import validate_row_slice
from ..fits.sources.base import faults_seen
from ..query import expr as _expr
from ..query.names import resolve_columns
from ..query.pushdown import fuse, plan_pushdown
from .arrow_assembly import arrow_schema
from .column_plan import string_batch_rows
from .decode_options import DEFAULT_OPTIONS, DecodeOptions
from .selection import check_row_indices, select_columns
from .source import TableSource, resolve_sources

if TYPE_CHECKING:  # pragma: no cover - typing only; these are imported lazily or optional
    import pandas
    import polars
    import pyarrow as pa
    import torch

    from .._torch_adapter import NullValue

__all__ = ["scan", "Scanner", "TorchBatches", "filter_error", "tensor_null_columns"]

_WHOLE = 1 << 62  # a batch size meaning "everything in one batch"
# Kernel terms are ordered on the first chunk when it has this many rows: each term is tried
# alone on its first quarter and the terms sorted by how many rows they keep.
_ORDER_SAMPLE_ROWS = 16_384


def _storage(src: TableSource, names: Sequence[str]) -> tuple[Any, ...]:
    """How the columns ``names`` are stored in ``src`` (table kind, TFORM, scaling, nulls), byte
    offsets aside: sources that agree here share the where-kernel's tests and its residual."""
    specs = {s.name: s for s in src.specs}
    return ((src.specs[0].is_ascii if src.specs else None,),) + tuple(
        None if n not in specs else
        (specs[n].code, specs[n].repeat, specs[n].width, specs[n].tscal, specs[n].tzero,
         specs[n].tnull, specs[n].descriptor) for n in names)


def _offsets(src: TableSource, names: Sequence[str]) -> tuple[int | None, ...]:
    """Where the columns ``names`` sit in a row of ``src``: the key of a kernel plan."""
    specs = {s.name: s for s in src.specs}
    return tuple(specs[n].offset if n in specs else None for n in names)


class _KernelPlan:
    """The where-kernel for one byte layout of the tested columns: its tests, whether they were
    ordered on a sample yet, and their fused form. Shared by the scanner's copies."""

    __slots__ = ("tests", "ordered", "fused")

    def __init__(self, tests: list[Any]) -> None:
        self.tests = tests
        self.ordered = False
        self.fused: Any = None


def filter_error(exc: Exception, path: str, hdu: int) -> WhereEvaluationError:
    """A pyarrow error raised while filtering rows of ``path``'s HDU ``hdu``, as the
    `WhereEvaluationError` it is (Arrow's own message kept)."""
    if "overflow" in str(exc).lower():
        return WhereEvaluationError(
            f"{path}: HDU {hdu}: the where-expression overflows 64-bit integer arithmetic "
            f"({exc}); compare with a smaller constant or use a float literal (e.g. 2.0 * col) "
            "to compute in floating point")
    return WhereEvaluationError(f"{path}: HDU {hdu}: the filter cannot be applied to this "
                                f"table: {exc}")


def _refuse_complex(tree: Any, complex_cols: set[str]) -> None:
    refused = [c for c in _expr.columns(tree) if c in complex_cols]
    if refused:
        raise UnsupportedColumnError(
            f"complex columns {refused} cannot be filtered on Arrow paths; read them with read_torch")


class Scanner:
    """A lazy scan of one or more FITS tables; every ``to_*`` call reads the file(s) again.

    Build it with `scan`. Results stream as Arrow record batches of at most ``batch_size`` rows.
    """

    def __init__(self, sources: Sequence[TableSource], *, columns: Any = None, where: Any = None,
                 filter: Any = None, rows: Any = None, row_slice: Any = None,
                 batch_size: int = 65_536, options: DecodeOptions = DEFAULT_OPTIONS,
                 schema_metadata: bool = True, pushdown: bool = True) -> None:
        """Plan a scan of ``sources`` (see `scan` for the arguments); ``options`` says how values
        decode, ``schema_metadata`` whether the schema carries the ``fits_*`` keys, and
        ``pushdown`` whether where-terms run in the row kernel (False: pyarrow filters all)."""
        if not sources:
            raise ValueError("nothing to scan")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError("batch_size must be > 0")
        if rows is not None and row_slice is not None:
            raise ValueError("Only one of rows or row_slice may be provided")
        if not isinstance(options, DecodeOptions):
            raise TypeError(f"options must be a DecodeOptions, not {type(options).__name__}")
        self._sources = list(sources)
        first = self._sources[0]
        # Whether the caller chose the columns (a later narrower projection names them).
        self._columns_chosen = columns is not None
        self._projection = [s.name for s in select_columns(first.specs, columns)]
        for src in self._sources[1:]:
            names = [s.name for s in select_columns(src.specs, self._projection)]
            if names != self._projection:
                raise ValueError(f"{src.path}: columns differ from {first.path}")
        self._batch_size = int(batch_size)
        self._row_slice = validate_row_slice(row_slice)
        self._rows = None if rows is None else [check_row_indices(rows, s.nrows) for s in self._sources]
        self._options = options
        self._schema_metadata = bool(schema_metadata)
        # the residual predicate always sees strings as text, stripped
        self._predicate_options = self._options.replace(decode_bytes=True, strip=True)
        self._pushdown = bool(pushdown)
        self._where = where
        self._filter = filter
        self._plan_predicate(where, filter)

    # -- planning ---------------------------------------------------------------------------------
    def _plan_predicate(self, where: Any, filter: Any) -> None:
        """Split the predicate: top-level AND terms the row kernel can run on raw bytes, and a
        residual pyarrow Expression (with the columns it needs decoded)."""
        # One kernel plan per byte layout of the tested columns (files of one scan may place
        # them differently), and each source's layout (by id).
        self._plans: dict[Any, _KernelPlan] = {}
        self._layout: dict[int, Any] = {}
        self._one_pass_ok: dict[tuple[int, tuple[str, ...]], bool] = {}  # per source (by id) and projection
        # the residual: a tree evaluated on each chunk's decoded arrays, and a pyarrow filter the
        # tree cannot represent (filtered through Acero); `_residual` builds their Expression
        self._residual_tree: Any = None
        self._residual_types: dict[str, Any] = {}
        self._residual_schema: Any = None
        self._opaque: Any = None
        self._residual_expr: Any = None
        self._residual_columns: list[str] = []
        self._cones: list[Any] = []  # top-level cone() terms, tested with NumPy after the kernel
        if where is None and filter is None:
            return
        if isinstance(filter, str):
            where = filter if where is None else f"({where}) AND ({filter})"
            filter = None
        first = self._sources[0]
        # Predicates see strings decoded and stripped whatever the output options (docs/compatibility.md);
        # complex columns have no compat Arrow type and can only be refused if referenced.
        complex_cols = {s.name for s in first.specs if s.code in "CM"} \
            if self._options.mapping == "compat" else set()
        typed = [s for s in first.specs if s.name not in complex_cols]
        names = [s.name for s in first.specs]
        schema = arrow_schema(typed, mapping=self._options.mapping, decode_bytes=True)
        types = {s.name: f.type for s, f in zip(typed, schema)}  # zip: names may repeat
        tree: Any = None
        if where is not None:
            if not isinstance(where, str) or not where.strip():
                raise ValueError("where must be a non-empty string expression")
            booleans = [n for n, t in types.items() if str(t) == "bool"]
            tree = resolve_columns(_expr.parse(where, columns=set(names), booleans=booleans), names,
                                   context=f"{first.path} HDU {first.entry.index}")
            _refuse_complex(tree, complex_cols)
            try:
                _expr.validate(tree, types)
            except ValueError as exc:
                if isinstance(exc, FitsError):
                    raise
                # The expression parses but does not fit this table (a VLA column, an operand
                # of the wrong type): say which file.
                raise WhereEvaluationError(
                    f"{first.path}: HDU {first.entry.index}: {exc}") from None
        opaque = None  # a pyarrow filter our tree cannot represent
        if filter is not None:
            # An already-translated tree (datasets translate once per scan) or a pyarrow
            # Expression, decoded with the column types so NaN guards go on float columns only.
            parsed = filter if isinstance(filter, _expr.Expr) else _expr.from_pyarrow(filter, types)
            if parsed is not None:
                parsed = resolve_columns(parsed, names, context=f"{first.path} HDU {first.entry.index}")
            if parsed is None:
                opaque = filter
            else:
                _refuse_complex(parsed, complex_cols)
                _expr.validate(parsed, types)
                tree = _expr.and_all([t for t in (tree, parsed) if t is not None])
        residual_tree = tree
        if tree is not None and self._pushdown:
            residual_tree = self._plan_kernels(tree, types)
        needed = [] if residual_tree is None else _expr.columns(residual_tree)
        if residual_tree is not None:
            # A cone's exact test runs in NumPy on the decoded survivors: one pyarrow filter
            # call costs milliseconds whatever the rows (docs/benchmarks.md).
            terms = _expr.conjuncts(residual_tree)
            self._cones = [t for t in terms if isinstance(t, _expr.Cone)]
            residual_tree = _expr.and_all(t for t in terms if not isinstance(t, _expr.Cone))
        self._residual_tree, self._residual_types, self._residual_schema = residual_tree, types, schema
        if opaque is not None:
            self._opaque = opaque
            needed = names
        if self._has_residual or self._cones:
            self._residual_columns = list(dict.fromkeys(needed))

    @property
    def _has_residual(self) -> bool:
        return self._residual_tree is not None or self._opaque is not None

    @property
    def _residual(self) -> Any:
        """The residual as one ``pyarrow.compute.Expression`` (None when the kernel and the
        cone tests take the whole predicate); built on first use, only the opaque path filters
        with it."""
        if self._residual_expr is None and self._has_residual:
            parts = [] if self._residual_tree is None \
                else [_expr.to_pyarrow(self._residual_tree, self._residual_schema)]
            if self._opaque is not None:
                parts.append(self._opaque)
            residual = parts[0]
            for p in parts[1:]:
                residual = residual & p
            self._residual_expr = residual
        return self._residual_expr

    def _plan_kernels(self, tree: Any, types: dict[str, Any]) -> Any:
        """Plan the kernel once per byte layout of the tested columns and return the residual
        tree. Sources that store those columns differently (another TFORM or scaling, not just
        another offset) leave the whole predicate to pyarrow."""
        names = _expr.columns(tree)
        first = self._sources[0]
        if any(_storage(src, names) != _storage(first, names) for src in self._sources[1:]):
            return tree
        residual: Any = tree
        for src in self._sources:
            key = _offsets(src, names)
            if key not in self._plans:
                tests, residual = plan_pushdown(tree, src.specs, types, mapping=self._options.mapping,
                                                apply_nulls=self._options.apply_nulls)
                self._plans[key] = _KernelPlan(tests)
            self._layout[id(src)] = key
        return residual

    def _plan_of(self, src: TableSource) -> _KernelPlan | None:
        """The kernel plan of ``src``'s layout, or None when the kernel tests nothing there."""
        plan = self._plans.get(self._layout.get(id(src)))
        return plan if plan is not None and plan.tests else None

    @property
    def _kernel(self) -> list[Any]:
        """The kernel tests of the first source (empty when pyarrow filters everything)."""
        plan = self._plan_of(self._sources[0])
        return plan.tests if plan is not None else []

    @property
    def _has_predicate(self) -> bool:
        return any(p.tests for p in self._plans.values()) or self._has_residual or bool(self._cones)

    @property
    def sources(self) -> list[TableSource]:
        """The tables this scan reads, in order."""
        return self._sources

    @property
    def projection(self) -> list[str]:
        """The projected columns, spelled as the first table spells them."""
        return self._projection

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the results (projected columns, FITS metadata attached)."""
        first = self._sources[0]
        schema = arrow_schema(first.specs, columns=self._projection, **self._schema_options())
        return schema.with_metadata(self._table_metadata(first)) if self._schema_metadata else schema

    def _schema_options(self) -> dict[str, Any]:
        o = self._options
        return dict(mapping=o.mapping, decode_bytes=o.decode_bytes, metadata=o.metadata)

    def _table_metadata(self, src: TableSource) -> dict[bytes, bytes]:
        meta = {b"fits_hdu": str(src.entry.index).encode(), b"fits_path": src.path.encode()}
        if src.entry.extname:
            meta[b"fits_extname"] = src.entry.extname.encode()
        meta[b"fits_header"] = src.header_text
        return meta

    # -- execution --------------------------------------------------------------------------------
    def _chunks(self, k: int, src: TableSource) -> Iterator[tuple[Any, Any]]:
        bs = self._batch_size
        # A batch's fixed-width strings must fit one Arrow string array (2 GiB): a whole-file
        # read of a wide string column comes back in several batches, never with wrapped offsets.
        cap = string_batch_rows(src.specs, [*self._projection, *self._residual_columns])
        if cap is not None:
            bs = min(bs, cap)
        if self._rows is not None:
            rows = self._rows[k]
            for a in range(0, len(rows), bs):
                yield rows[a:a + bs], None
            return
        start, stop = (0, src.nrows) if self._row_slice is None else self._row_slice
        stop = src.nrows if stop is None else min(stop, src.nrows)
        for a in range(start, stop, bs):
            yield None, (a, min(a + bs, stop))

    @staticmethod
    def _order_kernel(plan: _KernelPlan, data: Any, row_bytes: int, rows: Any, rng: Any) -> None:
        """Run the most selective kernel term first: each term is tried alone on a sample of the
        first chunk and the terms are sorted by how many rows they keep. Terms are ANDed, so
        the order changes the work, never the result."""
        sample = _ORDER_SAMPLE_ROWS // 4
        plan.ordered = True
        n = len(rows) if rows is not None else rng[1] - rng[0]
        if n < 4 * sample:
            return  # a small first chunk: sampling would cost more than any reordering saves
        kept = []
        for test in plan.tests:
            if rows is not None:
                kept.append(test.select(data, row_bytes, rows=rows[:sample]).size)
            else:
                kept.append(test.select(data, row_bytes, first=rng[0],
                                        count=min(sample, rng[1] - rng[0])).size)
        order = sorted(range(len(plan.tests)), key=kept.__getitem__)
        plan.tests = [plan.tests[i] for i in order]

    def _kernel_data(self, src: TableSource, rows: np.ndarray | None,
                     rng: Any) -> tuple[Any, _KernelPlan]:
        """Fetch and check the rows the kernel tests, and plan ``src``'s kernel on first use;
        returns the table's row bytes and the plan (``src`` must have one)."""
        plan = self._plan_of(src)
        assert plan is not None
        src.fetch(rows=rows, row_range=rng, heap=False)
        data, _ = src.buffers(fetched=True)
        last = int(rows.max()) if rows is not None and rows.size else (rng[1] - 1 if rng else -1)
        if (last + 1) * src.entry.row_bytes > len(data):
            src.index.check_data(src.entry, (last + 1) * src.entry.row_bytes)
        if len(plan.tests) > 1 and not plan.ordered:
            self._order_kernel(plan, data, src.entry.row_bytes, rows, rng)
        if plan.fused is None:
            # Every term in one pass over blocks of rows, most selective first.
            plan.fused = fuse(plan.tests)
        return data, plan

    def prepare_kernel(self) -> None:
        """Order and fuse the where-kernel now, on a sample of the first file's first rows, so
        that the row-slice copies made afterwards (`with_row_slice`, one per dataset task)
        share one plan instead of each sampling and fusing again. Lazily fetched (remote)
        sources keep planning on their first chunk, which they fetch anyway."""
        if not self._sources:
            return
        src = self._sources[0]
        plan = self._plan_of(src)
        if plan is None or plan.fused is not None:
            return
        if src.index.lazy or src.entry.row_bytes == 0:
            return
        # Only rows the file holds: a truncated file still scans its rows up to the cut.
        present = len(src.buffers()[0]) // src.entry.row_bytes
        if present == 0:
            return
        self._kernel_data(src, None, (0, min(src.nrows, present, _ORDER_SAMPLE_ROWS)))

    def _one_pass(self, src: TableSource, rows: np.ndarray | None) -> bool:
        """Whether a chunk can be selected and decoded in one pass (`decode_table_where`): a
        contiguous range of a binary table, a conjunction of kernel tests and nothing left for
        pyarrow, fixed-width projected columns."""
        plan = self._plan_of(src)
        if rows is not None or plan is None or self._has_residual or self._cones:
            return False
        key = (id(src), tuple(self._projection))  # copies may project other columns
        ok = self._one_pass_ok.get(key)
        if ok is None:
            specs = {s.name: s for s in src.specs}
            ok = (not (src.specs and src.specs[0].is_ascii)
                  and not any(specs[c].is_vla for c in self._projection if c in specs)
                  and (plan.fused or fuse(plan.tests)).conjunction is not None)
            self._one_pass_ok[key] = ok  # shared with this scanner's row-slice copies
        return ok

    def _select_decode(self, src: TableSource, rng: tuple[int, int]) -> Any:
        """The batch of a chunk's selected rows, selected and decoded in one pass."""
        _, plan = self._kernel_data(src, None, rng)
        assert plan.fused is not None and plan.fused.conjunction is not None
        return src.decode(columns=self._projection, row_range=rng, options=self._options,
                          where=plan.fused.conjunction)

    def _select(self, src: TableSource, rows: np.ndarray | None,
                rng: Any) -> tuple[Any, Any]:
        """Evaluate the predicate on one chunk → (selected absolute rows, a decoded batch of
        exactly those rows holding the residual's columns, or None)."""
        import pyarrow as pa

        from ..query.arrow import evaluate_tree
        from ..query.arrow_values import int64_array

        candidates = rows
        if self._plan_of(src) is not None:
            data, plan = self._kernel_data(src, rows, rng)
            threads = self._options.threads
            if candidates is not None:
                candidates = plan.fused.select(data, src.entry.row_bytes, rows=candidates,
                                               threads=threads)
            else:
                candidates = plan.fused.select(data, src.entry.row_bytes, first=rng[0],
                                               count=rng[1] - rng[0], threads=threads)
            if faults_seen():
                src.index.source.check()
            rng = None
            if not self._has_residual and not self._cones:
                return candidates, None
        if candidates is not None and candidates.size == 0:
            return candidates, None
        batch = src.decode(columns=self._residual_columns, rows=candidates, row_range=rng,
                           options=self._predicate_options)
        kept = np.arange(batch.num_rows, dtype=np.int64)
        if self._cones:
            kept = kept[_inside_cones(batch, self._cones)]
        if self._has_residual:
            table = batch.take(int64_array(kept)) if self._cones else batch
            try:
                if self._opaque is None:
                    # evaluated on the arrays: a filter on a table plans through Acero, which
                    # imports pyarrow.dataset and pandas (docs/architecture.md, "Start-up")
                    kept = kept[_true_rows(evaluate_tree(self._residual_tree, table, self._residual_types))]
                else:
                    table = pa.Table.from_batches([table]).append_column("__torchfits_row__",
                                                                         int64_array(kept))
                    kept = table.filter(self._residual).column("__torchfits_row__").to_numpy()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise filter_error(exc, src.path, src.entry.index) from None
        selected = candidates[kept] if candidates is not None else kept + rng[0]
        return selected, batch.take(int64_array(kept))

    def _batches_of(self, k: int, src: TableSource, mine: Any = None) -> Iterator[Any]:
        meta = self._table_metadata(src) if self._schema_metadata else None
        for rows, rng in self._chunks(k, src):
            if mine is not None and not mine():
                continue  # another DataLoader worker's chunk: not even decoded here
            batch = self._chunk_batch(src, rows, rng)
            # The batch is a copy: the map pages of its rows may leave RSS (bounded memory
            # on files larger than RAM; docs/architecture.md, "Bounded memory").
            if rng is not None:
                src.done(rng)
            else:
                src.done_rows(rows)
            if batch is not None:
                yield batch.replace_schema_metadata(meta) if meta is not None else batch

    def _chunk_batch(self, src: TableSource, rows: np.ndarray | None, rng: Any) -> Any:
        """One chunk's batch of projected, selected rows; None when no row is selected."""
        if not self._has_predicate:
            return src.decode(columns=self._projection, rows=rows, row_range=rng, options=self._options)
        if self._one_pass(src, rows):
            batch = self._select_decode(src, rng)
            return batch if batch.num_rows else None
        selected, decoded = self._select(src, rows, rng)
        if selected.size == 0:
            return None
        if (decoded is not None and set(self._projection) <= set(self._residual_columns)
                and self._predicate_options == self._options):
            # Everything projected is already decoded: gather, don't decode again.
            return decoded.select(self._projection)
        return src.decode(columns=self._projection, rows=selected, options=self._options)

    def selected_rows(self) -> list[np.ndarray]:
        """For each file, the 0-based row numbers the scan yields, in order (no column is
        decoded beyond what the predicate needs)."""
        out = []
        for k, src in enumerate(self._sources):
            parts = []
            for rows, rng in self._chunks(k, src):
                if self._has_predicate:
                    parts.append(self._select(src, rows, rng)[0])
                    if rng is not None:
                        src.done(rng)
                    else:
                        src.done_rows(rows)
                else:
                    parts.append(rows if rows is not None else np.arange(rng[0], rng[1], dtype=np.int64))
            out.append(np.concatenate(parts) if parts else np.empty(0, np.int64))
        return out

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream ``pyarrow.RecordBatch`` objects (empty batches are skipped)."""
        for k, src in enumerate(self._sources):
            yield from self._batches_of(k, src)

    def to_reader(self) -> pa.RecordBatchReader:
        """A ``pyarrow.RecordBatchReader`` over the scan."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_arrow(self, *, progress: bool | None = False) -> pa.Table:
        """The whole result as a ``pyarrow.Table`` (one chunk per file).

        ``progress=True`` shows a bar over the files (needs tqdm; None: only when stderr is a
        terminal)."""
        import pyarrow as pa

        from .._progress import progress_bar

        # Materialising anyway: decode each file in one call (the decoder threads over row
        # chunks itself) instead of streaming many small batches and concatenating them.
        whole = self._with_batch_size(_WHOLE)
        batches: list[Any] = []
        with progress_bar(total=len(whole._sources), desc="scan", enabled=progress, unit="file") as bar:
            for k, src in enumerate(whole._sources):
                batches += whole._batches_of(k, src)
                bar.update(1)
        return pa.Table.from_batches(batches, schema=self.schema)

    to_table = to_arrow

    def to_pandas(self, **kwargs: Any) -> pandas.DataFrame:
        """The result as a ``pandas.DataFrame`` (needs pandas); an integer column with nulls
        becomes pandas' nullable integer dtype (``Int64`` with ``<NA>``), exact."""
        from .arrow_numpy import arrow_to_pandas

        return arrow_to_pandas(self.to_arrow(), **kwargs)

    def to_polars(self) -> polars.DataFrame:
        """The result as a ``polars.DataFrame`` (needs polars)."""
        try:
            import polars as pl
        except ImportError as exc:
            raise ImportError("polars is required for to_polars(): pip install polars") from exc
        return cast("polars.DataFrame", pl.from_arrow(self.to_arrow()))  # a table gives a frame

    def to_numpy(self) -> dict[str, np.ndarray]:
        """``{column: ndarray}``: fixed-size lists become (N, ...) arrays, floats with nulls NaN,
        other columns with nulls masked arrays, strings ``str`` arrays, lists object arrays."""
        from .arrow_numpy import table_to_numpy

        return table_to_numpy(self.to_arrow())

    def to_torch(self, device: Any = "cpu", dtype: Any = None, *, null_value: NullValue = None,
                 masks: bool = False) -> dict[str, torch.Tensor]:
        """``{column: torch.Tensor}`` for numeric and boolean columns (needs torch).

        Parameters
        ----------
        device : str
            Where the tensors go.
        dtype : torch or NumPy dtype, optional
            The type floating-point columns are cast to.
        null_value : number, bool or dict, optional
            What integer and logical nulls (TNULL values, a logical zero byte) become: one value
            for every such column or ``{column: value}``. Without it (and without ``masks``) a
            null raises `NullValueError` naming the file, HDU and column. Float nulls are NaN.
        masks : bool
            Add a bool tensor ``<column>_mask`` (True where a value is present) for every
            integer column with a TNULL and every logical column; nulls are filled with
            ``null_value``, or 0/False.
        """
        from .arrow_numpy import numpy_to_torch

        return numpy_to_torch(self._tensor_columns(null_value=null_value, masks=masks), device=device,
                              dtype=dtype, exclusive=True)

    def _null_columns(self, names: Sequence[str] | None = None) -> dict[str, tuple[np.dtype, str]]:
        """The columns of ``names`` (default: the projection) whose values can be null without
        being NaN: integer columns with a TNULL and logical columns, in any of the files, as
        ``{name: (element NumPy dtype, what makes a value null)}``."""
        return tensor_null_columns(self._sources, self.schema,
                                   self._projection if names is None else list(names))

    def _tensor_columns(self, *, null_value: NullValue = None, masks: bool = False,
                       names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """``to_numpy`` with the null rule of the torch routes applied (see `to_torch`): plain
        arrays, plus ``<column>_mask`` arrays when ``masks``. ``names`` limits the columns."""
        import pyarrow as pa

        from .._torch_adapter import apply_null_rule, check_null_options
        from .arrow_numpy import table_to_numpy

        names = self._projection if names is None else list(names)
        nullable = self._null_columns(names)
        check_null_options(null_value, masks, self._projection, nullable, self._sources[0].label)
        whole = self._with_batch_size(_WHOLE)
        parts = []
        for k, src in enumerate(whole._sources):
            batches = list(whole._batches_of(k, src))
            if batches:
                table = pa.Table.from_batches(batches, schema=self.schema).select(names)
                parts.append(apply_null_rule(table_to_numpy(table), nullable, null_value=null_value,
                                             masks=masks, where=src.label))
        if not parts:
            empty = table_to_numpy(self.schema.empty_table().select(names))
            parts.append(apply_null_rule(empty, nullable, null_value=null_value, masks=masks,
                                         where=self._sources[0].label))
        if len(parts) == 1:
            return parts[0]
        return {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}

    def to_torch_batches(self, batch_size: int | None = None, columns: Any = None,
                         dtype: Any = None, stack: bool = True, device: Any = "cpu", *,
                         null_value: NullValue = None, masks: bool = False) -> Any:
        """Stream the rows as tensors, ``batch_size`` rows at a time (bounded memory).

        Parameters
        ----------
        batch_size : int, optional
            Rows per batch (default: the scanner's ``batch_size``).
        columns : list of str, optional
            Feature columns, in order (default: the scan's projection). With ``stack=True``
            they must be numeric scalars.
        dtype : torch or NumPy dtype, optional
            The feature type (``stack=True``: default float32) or, with ``stack=False``, the
            type floating-point columns are cast to.
        stack : bool
            True: one ``(N, F)`` tensor per batch, column ``j`` in ``[:, j]``. False: a
            ``{column: tensor}`` dict per batch.
        device : str
            Where the tensors go.
        null_value, masks
            The null rule, as in `to_torch`; ``masks=True`` needs ``stack=False``.

        Returns
        -------
        torch.utils.data.IterableDataset
            Re-iterable and picklable: hand it to a DataLoader (``batch_size=None``) directly;
            with several workers each worker decodes a disjoint share of the batches.
        """
        from .._torch_adapter import iterable_dataset, validate_device

        scanner = self if batch_size is None else self._with_batch_size(batch_size)
        if columns is not None:
            if isinstance(columns, str):
                columns = [columns]
            missing = [c for c in columns if c not in self._projection]
            if missing and self._columns_chosen:
                raise ColumnNotFoundError(f"Column {missing[0]!r} not found in the scan's columns "
                                          f"{self._projection}")
            scanner = copy.copy(scanner)
            scanner._projection = [s.name for s in select_columns(self._sources[0].specs, columns)]
            scanner._columns_chosen = True
        return iterable_dataset(TorchBatches(scanner, dtype=dtype, stack=bool(stack),
                                             device=validate_device(device), null_value=null_value,
                                             masks=bool(masks)))

    def __copy__(self) -> Scanner:
        # A copy in this process shares the open sources (remote ones keep their options);
        # only pickling reopens them.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def __reduce__(self) -> Any:
        # No maps cross processes: the other side reopens each (path, HDU) and plans the same
        # scan again from these fields.
        state = dict(columns=self._projection, where=self._where, filter=self._filter,
                     row_slice=self._row_slice, batch_size=self._batch_size, options=self._options,
                     schema_metadata=self._schema_metadata, pushdown=self._pushdown)
        return (_rebuild_scanner, ([(s.path, s.entry.index) for s in self._sources], state,
                                   self._rows, self._columns_chosen))

    def _with_batch_size(self, batch_size: int) -> Scanner:
        if isinstance(batch_size, bool) or int(batch_size) <= 0:
            raise ValueError("batch_size must be > 0")
        clone = copy.copy(self)
        clone._batch_size = int(batch_size)
        return clone

    def with_row_slice(self, row_slice: Any) -> Scanner:
        """A copy limited to a 0-based half-open row range of every source, sharing this
        scanner's plan (dataset fragments scan row chunks without planning again)."""
        clone = copy.copy(self)
        clone._row_slice = validate_row_slice(row_slice)
        clone._rows = None
        return clone

    def count_rows(self) -> int:
        """Rows the scan yields: from the headers alone when there is no predicate."""
        if not self._has_predicate:
            total = 0
            for k, src in enumerate(self._sources):
                for rows, rng in self._chunks(k, src):
                    total += len(rows) if rows is not None else rng[1] - rng[0]
            return total
        return sum(len(self._select(src, rows, rng)[0])
                   for k, src in enumerate(self._sources) for rows, rng in self._chunks(k, src))

    def head(self, n: int = 5) -> pa.Table:
        """The first ``n`` result rows as a ``pyarrow.Table``."""
        import pyarrow as pa

        got: list[Any] = []
        have = 0
        for batch in self._with_batch_size(min(self._batch_size, max(n, 1))).to_batches():
            got.append(batch.slice(0, n - have))
            have += got[-1].num_rows
            if have >= n:
                break
        return pa.Table.from_batches(got, schema=self.schema)

    def __repr__(self) -> str:
        files = len(self._sources)
        first = self._sources[0]
        parts = [f"{first.path!r}{f' +{files - 1} files' if files > 1 else ''}",
                 f"hdu={first.entry.index}", f"columns={self._projection}"]
        if self._where is not None:
            parts.append(f"where={self._where!r}")
        if self._filter is not None:
            parts.append(f"filter={str(self._filter)!r}")
        if self._rows is not None:
            parts.append(f"rows=<{len(self._rows[0])} selected>")
        if self._row_slice is not None:
            parts.append(f"row_slice={self._row_slice}")
        return f"Scanner({', '.join(parts)})"

    def _repr_html_(self) -> str:
        from ..fits.notebook_html import html_summary

        first = self._sources[0]
        files = len(self._sources)
        fields: list[tuple[str, Any]] = [
            ("files", first.path if files == 1 else f"{files} files, first {first.path}"),
            ("HDU", first.entry.index), ("columns", ", ".join(self._projection))]
        if self._where is not None:
            fields.append(("where", self._where))
        if self._filter is not None:
            fields.append(("filter", str(self._filter)))
        if self._rows is not None:
            fields.append(("rows", f"{len(self._rows[0])} selected"))
        if self._row_slice is not None:
            fields.append(("row_slice", self._row_slice))
        return html_summary("Scanner", fields)


def _rebuild_scanner(sources: list[Any], state: dict[str, Any], rows: list[np.ndarray] | None,
                     columns_chosen: bool) -> Scanner:
    """Unpickle a `Scanner`: reopen each (path, HDU) here and plan the scan again."""
    scanner = Scanner([TableSource.open(path, hdu) for path, hdu in sources], **state)
    scanner._rows = rows  # already checked against each file's rows
    scanner._columns_chosen = columns_chosen
    return scanner


class TorchBatches:
    """The rows of a `Scanner` as tensor batches (see `Scanner.to_torch_batches`).

    In a DataLoader worker, batch ``i`` belongs to worker ``i % num_workers``: every batch is
    delivered once, and a worker skips the others' chunks before decoding them.
    """

    def __init__(self, scanner: Scanner, *, dtype: Any, stack: bool, device: str,
                 null_value: NullValue = None, masks: bool = False) -> None:
        from .._torch_adapter import check_null_options

        self.scanner, self.dtype, self.stack, self.device = scanner, dtype, stack, device
        self.null_value, self.masks = null_value, masks
        if stack:
            specs = select_columns(scanner.sources[0].specs, scanner.projection)
            bad = [s.name for s in specs if s.code not in "BIJKEDFL" or s.repeat != 1 or s.is_vla]
            if bad:
                raise TypeError(f"columns {bad} are not numeric scalars and cannot be stacked into "
                                "(N, F) features: leave them out of columns= or use stack=False")
            if masks:
                raise ValueError("masks=True needs stack=False: the masks come as <column>_mask "
                                 "entries of each batch's dict")
        self.nullable = scanner._null_columns()
        check_null_options(null_value, masks, scanner.projection, self.nullable,
                           scanner.sources[0].label)

    def __iter__(self) -> Iterator[Any]:
        import pyarrow as pa

        from .._torch_adapter import apply_null_rule, require_torch, torch_dtype, worker_slot
        from .arrow_numpy import numpy_to_torch, table_to_numpy

        torch = require_torch()
        worker, workers = worker_slot()
        counter = iter(range(1 << 62))
        mine = None if workers == 1 else (lambda: next(counter) % workers == worker)
        tdt = torch_dtype(self.dtype)
        names = self.scanner.projection
        for k, src in enumerate(self.scanner.sources):
            for batch in self.scanner._batches_of(k, src, mine):
                cols = apply_null_rule(table_to_numpy(pa.Table.from_batches([batch])), self.nullable,
                                       null_value=self.null_value, masks=self.masks,
                                       where=src.label)
                if not self.stack:
                    yield numpy_to_torch(cols, device=self.device, dtype=tdt, exclusive=True)
                    continue
                feats = np.empty((batch.num_rows, len(names)), np.dtype("float32") if tdt is None
                                 else np.dtype(str(tdt).rpartition(".")[2].replace("bfloat16", "float32")))
                for j, name in enumerate(names):
                    feats[:, j] = cols[name]
                t = torch.from_numpy(feats)
                if tdt is not None and t.dtype != tdt:
                    t = t.to(tdt)
                yield t if self.device == "cpu" else t.to(self.device)

    def __repr__(self) -> str:
        form = "stacked (N, F)" if self.stack else "dict"
        return f"TorchBatches({self.scanner!r}, {form})"


def tensor_null_columns(sources: Sequence[TableSource], schema: pa.Schema,
                        names: Sequence[str]) -> dict[str, tuple[np.dtype, str]]:
    """Which of ``names`` can hold a null that a tensor cannot show (an integer column with a
    TNULL, a logical column) in any of ``sources``: ``{name: (element dtype, why)}``. Decided
    from the headers, so every batch of a stream carries the same ``<column>_mask`` keys."""
    import pyarrow as pa

    out: dict[str, tuple[np.dtype, str]] = {}
    for name in names:
        leaf = schema.field(name).type
        while pa.types.is_list(leaf) or pa.types.is_large_list(leaf) or pa.types.is_fixed_size_list(leaf):
            leaf = leaf.value_type
        if not (pa.types.is_integer(leaf) or pa.types.is_boolean(leaf)):
            continue
        for src in sources:
            spec = next((s for s in src.specs if s.name == name), None)
            if spec is None:
                continue
            if spec.code == "L":
                out[name] = (np.dtype(bool), "a zero byte is a logical null")
            elif spec.tnull is not None:
                out[name] = (np.dtype(leaf.to_pandas_dtype()), f"TNULL = {spec.tnull!r}")
            else:
                continue
            break
    return out


def _true_rows(mask: Any) -> np.ndarray:
    """The positions where a boolean Arrow array is true (null counts as false)."""
    if hasattr(mask, "combine_chunks"):  # a ChunkedArray
        mask = mask.combine_chunks()
    n, offset = len(mask), mask.offset
    validity, data = mask.buffers()
    if data is None or mask.null_count == n:
        return np.empty(0, np.int64)

    def bits(buffer: Any) -> np.ndarray:
        return np.unpackbits(np.frombuffer(buffer, np.uint8), count=offset + n,
                             bitorder="little")[offset:].astype(bool)

    values = bits(data)
    if mask.null_count and validity is not None:
        values &= bits(validity)
    return np.flatnonzero(values)


def _inside_cones(batch: Any, cones: Sequence[Any]) -> np.ndarray:
    """Which rows of ``batch`` lie in every cone (`query.sky.in_cone`: NaN and null never)."""
    from ..query.sky import in_cone

    mask = np.ones(batch.num_rows, dtype=bool)
    for cone in cones:
        ra, dec = (np.asarray(batch.column(c.name).to_numpy(zero_copy_only=False), np.float64)
                   for c in (cone.ra, cone.dec))
        mask &= in_cone(ra, dec, cone.ra0, cone.dec0, cone.radius)
    return mask


def scan(source: SourceArg, hdu: HduArg = 1, *, columns: Sequence[str] | None = None,
         where: str | None = None, filter: Any = None, rows: Any = None, row_slice: Any = None,
         batch_size: int = 65_536,
         threads: int | None = None, storage_options: dict[str, Any] | None = None) -> Scanner:
    """Scan a FITS table (or several with the same columns) into Arrow.

    Parameters
    ----------
    source : str, os.PathLike, glob, directory, or a list of them
        The file(s); a CFITSIO suffix selects the HDU (``cat.fits[1]``, ``cat.fits[CATALOG]``).
    hdu : int or str
        Table HDU index or EXTNAME (case-insensitive).
    columns : list of str, optional
        Projection, in output order; None reads every column.
    where : str, optional
        A where-expression (see ``docs/where.md``): comparisons, IN, BETWEEN, IS NULL, AND/OR/NOT,
        column-to-column comparisons, arithmetic, ``abs()``, bit tests.
    filter : pyarrow.compute.Expression, optional
        An Arrow predicate; combined with ``where`` by AND.
    rows : sequence of int, optional
        0-based row indices (any order, duplicates kept); the predicate applies within them.
    row_slice : slice or (start, stop), optional
        A 0-based half-open row range.
    batch_size : int
        Rows per batch (bounds memory).
    threads : int, optional
        Decode threads (default: every core).
    storage_options : dict, optional
        fsspec options for URLs plus torchfits's remote options (see ``docs/remote.md``).

    Returns
    -------
    Scanner
    """
    if isinstance(source, (str, os.PathLike)) and fspath(source):
        fp = parse_path(source)
        if fp.section is not None:
            raise ValueError(f"{fp.path}: an image section cannot select table rows; use rows= or where=")
        if fp.hdu is not None:
            if hdu != 1 and hdu != fp.hdu:
                raise ValueError(f"{fp.path}: the path selects HDU {fp.hdu!r} and hdu={hdu!r} another")
            source, hdu = fp.path, fp.hdu
    paths = resolve_sources(with_storage_options(source, storage_options))
    sources = [TableSource.open(p, hdu) for p in paths]
    return Scanner(sources, columns=columns, where=where, filter=filter, rows=rows,
                   row_slice=row_slice, batch_size=batch_size, options=DecodeOptions(threads=threads))

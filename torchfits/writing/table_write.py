"""Write one table HDU: plan the columns, stream row batches to the sink, then the heap, then
patch NAXIS2 / PCOUNT / variable-length TFORMs in the header already written.

Inputs are dicts of arrays (one batch) or Arrow tables and readers (batch by batch, so a
RecordBatchReader is never materialised).
"""
from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UInt64WriteError
from ..fits.header import Card, Header, format_card
from ..fits.layout import CARD, finish_header
from .atomic import Sink
from .stream_nulls import StreamNulls
from .table_inputs import (
    TIME_CARDS,
    arrow_column,
    arrow_field_meta,
    is_time_dtype,
    numpy_column,
    time_column_keywords,
    to_arrow_stream,
)
from .table_plan import (
    BATCH_ROWS,
    ColumnPlan,
    ColumnValues,
    apply_header_tnulls,
    avoid_valid_values,
    column_cards,
    encode_rows,
    parse_tform,
    plan_column,
    slices,
)

__all__ = ["TablePlan", "plan_table", "write_table_hdu", "table_cards", "apply_schema"]



@dataclass
class TablePlan:
    """Column plans plus the batches that fill them."""

    plans: list[ColumnPlan]
    batches: Iterator[list[ColumnValues]]
    extname: str | None = None
    columns: list[ColumnValues] | None = None  # whole columns, for dict inputs
    #: Header cards the data bring (astropy ``meta``, the time convention); the caller's win.
    cards: list = field(default_factory=list)
    #: Batches come from a stream: TNULLs were chosen before the data were seen.
    streamed: bool = False


def _numpy_plan(columns: Mapping[str, Any], schema: Mapping[str, Any] | None) -> TablePlan:
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError("data must be a non-empty dictionary of columns")
    values = {str(k): numpy_column(str(k), v) for k, v in columns.items()}
    lengths = {k: len(v) for k, v in values.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise ValueError(f"Column row count mismatch: {detail}")
    plans = []
    timed = False
    for name, col in values.items():
        if col.data.dtype == np.uint64 and col.offsets is None:
            raise UInt64WriteError(f"column {name!r}: uint64 cannot be stored losslessly in FITS; "
                                   "convert to int64 or float64")
        plans.append(plan_column(name, col))
        if is_time_dtype(getattr(columns[name], "dtype", None)):
            _time_plan(plans[-1])
            timed = True
    apply_schema(plans, schema, values)
    whole = list(values.values())
    return TablePlan(plans, slices(whole), columns=whole, cards=list(TIME_CARDS) if timed else [])


def _time_plan(plan: ColumnPlan) -> None:
    """A column of datetimes written as JD pairs: the FITS time-column keywords (UTC)."""
    spec = time_column_keywords("UTC")
    plan.meta["TUNIT"] = spec["unit"]
    plan.meta.update(spec["keywords"])


def _valid_integers(column: Any) -> np.ndarray:
    """The non-null integers of an Arrow column (fixed-size list cells flattened), as NumPy."""
    import pyarrow as pa

    values = column
    while pa.types.is_fixed_size_list(values.type):
        values = pa.chunked_array([c.flatten() for c in values.chunks], values.type.value_type)
    if not pa.types.is_integer(values.type):
        return np.empty(0, np.int64)
    return values.drop_null().to_numpy()


def _arrow_plan(stream: Any, schema: Mapping[str, Any] | None) -> TablePlan:
    import pyarrow as pa
    import pyarrow.compute as pc

    arrow_schema = stream.schema
    extname = None
    if arrow_schema.metadata:
        raw = arrow_schema.metadata.get(b"fits_extname")
        extname = raw.decode("utf-8", "replace") if raw else None
    if isinstance(stream, pa.Table):
        table = stream
        sample = table.slice(0, min(table.num_rows, 1)).combine_chunks()
        plans = []
        for i, f in enumerate(arrow_schema):
            column = table.column(i)
            meta = arrow_field_meta(f)
            t = f.type
            max_string = max_elements = None
            if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
                    or pa.types.is_large_binary(t):
                longest = pc.max(pc.binary_length(column)).as_py() if table.num_rows else 0
                max_string = int(longest or 0)
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                longest = pc.max(pc.list_value_length(column)).as_py() if table.num_rows else 0
                max_elements = int(longest or 0)
            if pa.types.is_large_list(t):
                meta["large"] = "1"
            col = arrow_column(f.name, sample.column(i))
            plans.append(plan_column(f.name, col, nullable=column.null_count > 0,
                                     max_string=max_string, max_elements=max_elements or 0,
                                     meta=meta))
            if plans[-1].tnull is not None:
                # planned from the first row: the TNULL must miss every value of the column
                avoid_valid_values(plans[-1], _valid_integers(column))
            if is_time_dtype(t):
                _time_plan(plans[-1])
        batches: Iterator[Any] = iter(table.to_batches(max_chunksize=BATCH_ROWS))
    else:
        reader = stream
        try:
            first = reader.read_next_batch()
        except StopIteration:
            first = pa.RecordBatch.from_pylist([], schema=arrow_schema)
        plans = []
        for i, f in enumerate(arrow_schema):
            meta = arrow_field_meta(f)
            if pa.types.is_large_list(f.type):
                meta["large"] = "1"
            col = arrow_column(f.name, first.column(i))
            # Later batches may hold nulls: a nullable integer field reserves a TNULL now.
            plans.append(plan_column(f.name, col, nullable=f.nullable, meta=meta))
            if is_time_dtype(f.type):
                _time_plan(plans[-1])
        batches = itertools.chain([first], reader)
    apply_schema(plans, schema, None)
    timed = any(is_time_dtype(f.type) for f in arrow_schema)
    carried = _carried_from_source(arrow_schema, plans)

    def convert() -> Iterator[list[ColumnValues]]:
        for batch in batches:
            yield [arrow_column(f.name, batch.column(i)) for i, f in enumerate(arrow_schema)]

    # The source's own time keywords win over the defaults of the datetime columns (which
    # name their scale in TCTYPn anyway).
    cards = {c[0]: c for c in (list(TIME_CARDS) if timed else []) + carried}
    return TablePlan(plans, convert(), extname, cards=list(cards.values()),
                     streamed=not isinstance(stream, pa.Table))


#: Column keywords a table read by torchfits carries back to a write (by column name): the
#: time and coordinate meaning of a column and its legal range, none of which depends on how
#: the writer lays the column out.
_CARRIED_COLUMN_KEYWORDS = re.compile(
    r"^(TCTYP|TCUNI|TCRVL|TCDLT|TCRPX|TCROT|TCNA|TCRD|TCSY|TRPOS|TLMIN|TLMAX|TDMIN|TDMAX)(\d+)$")
#: Header keywords that give time columns their meaning (the FITS time paper's global keys).
_TIME_KEYWORDS = ("DATE", "DATE-AVG", "DATE-BEG", "DATE-END", "DATE-OBS", "DATEREF", "JDREF",
                  "MJD-AVG", "MJD-BEG", "MJD-END", "MJD-OBS", "MJDREF", "MJDREFI", "MJDREFF",
                  "TIMEOFFS", "TIMESYS", "TIMEUNIT", "TIMEZERO", "TREFDIR", "TREFPOS",
                  "OBSGEO-L", "OBSGEO-B", "OBSGEO-H", "OBSGEO-X", "OBSGEO-Y", "OBSGEO-Z")


def _carried_from_source(arrow_schema: Any, plans: list[ColumnPlan]) -> list:
    """Column keywords and time header cards of the FITS table an Arrow table was read from
    (its ``fits_header`` schema metadata), for the columns still there by name."""
    raw = (arrow_schema.metadata or {}).get(b"fits_header")
    if not raw:
        return []
    from .._kernels import _header
    from ..fits.header import header_from_parsed

    try:
        source = header_from_parsed(_header.parse_cards(bytes(raw), 0, len(raw)))
    except (ValueError, TypeError):
        return []  # metadata that is not a header: nothing to carry
    names = {}
    for key in source:
        if key.startswith("TTYPE") and key[5:].isdigit() and isinstance(source[key], str):
            names[key[5:]] = source[key].strip()
    by_name = {p.name: p for p in plans}
    for key in source:
        m = _CARRIED_COLUMN_KEYWORDS.match(key)
        plan = by_name.get(names.get(m.group(2), "")) if m else None
        if plan is not None and m is not None and m.group(1) not in plan.meta:
            plan.meta[m.group(1)] = source[key]
    return [(key, source[key]) for key in _TIME_KEYWORDS if key in source]


def apply_schema(plans: list[ColumnPlan], schema: Mapping[str, Any] | None,
                  values: Mapping[str, ColumnValues] | None) -> None:
    """Per-column overrides from ``schema={col: {format, unit, tnull, tscal, tzero, dim,
    keywords}}``; ``keywords`` are column keywords without their number (``{"TCTYP": "TT"}``)."""
    if not schema:
        return
    by_name = {p.name: p for p in plans}
    for name, spec in schema.items():
        if name not in by_name:
            raise KeyError(f"Column '{name}' not found (schema names a column the data lacks)")
        if isinstance(spec, str):
            spec = {"format": spec}
        plan = by_name[name]
        fmt = spec.get("format")
        if fmt:
            repeat, code, elem = parse_tform(str(fmt))
            if code in ("P", "Q"):
                plan.vla, plan.code = code, elem or plan.code
            else:
                plan.code, plan.repeat = code, repeat
                if code == "A":
                    plan.string_width = repeat
                plan.flip = False
                plan.header_tscal = plan.header_tzero = None
        if spec.get("unit") is not None:
            plan.meta["TUNIT"] = str(spec["unit"])
        if spec.get("dim") is not None:
            plan.tdim = str(spec["dim"])
        if spec.get("tnull") is not None:
            plan.tnull = int(spec["tnull"])
        for key, value in (spec.get("keywords") or {}).items():
            plan.meta[str(key).upper()] = value  # e.g. TCTYP/TCUNI: written as TCTYPn
        tscal, tzero = spec.get("tscal"), spec.get("tzero")
        if tscal is not None or tzero is not None:
            plan.header_tscal = 1.0 if tscal is None else float(tscal)
            plan.header_tzero = 0.0 if tzero is None else float(tzero)
            col = values.get(name) if values else None
            if col is not None and col.data.dtype.kind == "f" and plan.code in "BIJK":
                # Physical float values into an integer field: store the scaled codes.
                plan.scale = (plan.header_tscal, plan.header_tzero)


def plan_table(data: Any, schema: Mapping[str, Any] | None = None) -> TablePlan:
    """Plans and batches for a dict of arrays or any Arrow-like table / stream."""
    if isinstance(data, Mapping):
        return _numpy_plan(data, schema)
    module = type(data).__module__.split(".")[0]
    if module == "astropy" and hasattr(data, "colnames"):
        from .table_inputs import astropy_table_parts

        columns, own, cards = astropy_table_parts(data)
        merged = dict(own)
        for name, spec in (schema or {}).items():
            merged[name] = {**merged.get(name, {}), **({"format": spec} if isinstance(spec, str) else spec)}
        plan = _numpy_plan(columns, merged or None)
        plan.cards = cards
        return plan
    stream = to_arrow_stream(data)
    if stream is None:
        raise TypeError(f"Unsupported table data type: {type(data).__name__}")
    return _arrow_plan(stream, schema)


def table_cards(plans: list[ColumnPlan], nrows: int, pcount: int) -> list[Card]:
    """The structural cards of a BINTABLE header for ``plans``."""
    row_bytes = sum(p.field_dtype.itemsize for p in plans)
    cards = [Card("XTENSION", "BINTABLE", "binary table extension"),
             Card("BITPIX", 8, "8-bit bytes"),
             Card("NAXIS", 2, "2-dimensional binary table"),
             Card("NAXIS1", row_bytes, "width of table in bytes"),
             Card("NAXIS2", nrows, "number of rows in table"),
             Card("PCOUNT", pcount, "size of special data area"),
             Card("GCOUNT", 1, "one data group"),
             Card("TFIELDS", len(plans), "number of fields in each row")]
    return cards + column_cards(plans)


def write_table_hdu(sink: Sink, item: Any, *, checksum: bool = False) -> tuple[int, int, int]:
    """Write the table HDU described by a `TableData`; returns its byte span."""
    if getattr(item, "table_type", "binary") == "ascii":
        from .ascii_write import write_ascii_hdu

        return write_ascii_hdu(sink, item, checksum=checksum)
    from .cards import header_lines

    plan = plan_table(item.columns, getattr(item, "schema", None))
    if getattr(item, "quantize", None):
        from .quantize_linear import quantize_table_plans

        plan = quantize_table_plans(plan, item.quantize)
    plans = plan.plans
    user = item.header
    apply_header_tnulls(plans, user)
    if plan.extname and (user is None or "EXTNAME" not in user):
        user = Header(user) if user is not None else Header()
        user["EXTNAME"] = plan.extname
    if plan.cards:
        own = Header(plan.cards)
        if user is not None:
            own.update(user)
        user = own
    header_offset = sink.offset
    lines, where = header_lines(table_cards(plans, 0, 0), user, table=True, checksum=checksum)
    sink.write(finish_header(lines))
    data_offset = sink.offset
    nrows = 0
    heap_size = 0
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as heap:
        nulls = StreamNulls(plans) if plan.streamed else None
        for columns in plan.batches:
            if nulls is not None:
                nulls.watch(columns, nrows)
            rows, heap_size = encode_rows(plans, columns, heap, heap_size)
            sink.write(rows.view(np.uint8) if rows.size else b"")
            nrows += len(rows)
        heap.seek(0)
        if heap_size:
            shutil.copyfileobj(heap, _SinkWriter(sink), 1 << 20)
    data_size = sink.offset - data_offset
    sink.pad()
    if nulls is not None:
        nulls.rewrite(sink, data_offset)

    def patch(key: str, value: Any, comment: str) -> None:
        sink.patch(header_offset + where[key] * CARD, format_card(key, value, comment)[0].encode("ascii"))

    patch("NAXIS2", nrows, "number of rows in table")
    patch("PCOUNT", heap_size, "size of special data area")
    for n, p in enumerate(plans, start=1):
        if p.vla:
            patch(f"TFORM{n}", p.tform, "")
        if p.tnull is not None and f"TNULL{n}" in where:
            patch(f"TNULL{n}", int(p.tnull), "")
    return header_offset, data_offset, data_size


class _SinkWriter:
    """File-like adapter so shutil can copy the spooled heap through the sink."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def write(self, data: bytes) -> int:
        self._sink.write(data)
        return len(data)

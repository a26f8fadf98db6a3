"""Turn table inputs into `ColumnValues` batches: dicts of NumPy arrays / tensors / lists, and
Arrow arrays (from pyarrow Tables, RecordBatches, readers, pandas and Polars frames).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._torch_adapter import is_tensor, tensor_to_numpy
from .table_plan import ColumnValues

__all__ = ["numpy_column", "arrow_column", "arrow_field_meta", "to_arrow_stream",
           "structured_columns", "astropy_table_parts", "epoch_to_jd", "is_time_dtype",
           "time_column_keywords", "TIME_CARDS"]


def _ascii_bytes(name: str, items: list) -> np.ndarray:
    encoded = []
    for v in items:
        if v is None:
            encoded.append(b"")
        elif isinstance(v, bytes):
            encoded.append(v)
        else:
            text = str(v)
            if not (text.isascii() and text.isprintable()):
                raise ValueError(f"column {name!r}: strings must be printable ASCII, got {text!r}")
            encoded.append(text.encode("ascii"))
    width = max([len(b) for b in encoded] + [1])
    return np.array(encoded, dtype=f"S{width}")


def _refuse_objects(name: str, items: list) -> None:
    """Object arrays may hold strings (and None for null); anything else would be written as
    its ``str()``, which nobody can read back: refuse it."""
    for v in items:
        if v is not None and not isinstance(v, (str, bytes, np.str_, np.bytes_)):
            raise TypeError(f"column {name!r}: object values of type {type(v).__name__} have no "
                            "FITS column type; convert the column to numbers or strings first")


def numpy_column(name: str, values: Any) -> ColumnValues:
    """One column of a dict-of-arrays table, normalised."""
    if is_tensor(values):
        values = tensor_to_numpy(values)
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        inner = numpy_column(name, values.filled(_fill_value(values.dtype)))
        if not mask.any():
            return inner
        if inner.offsets is not None:
            raise TypeError(f"column {name!r}: masked variable-length columns are not supported")
        return ColumnValues(inner.data, mask)
    if isinstance(values, (list, tuple)) and values and all(
            v is None or isinstance(v, np.ndarray) or is_tensor(v) for v in values) and any(
            v is not None for v in values):
        return _ragged(name, list(values))
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype == object and arr.ndim == 1 and any(isinstance(v, (np.ndarray, list)) for v in arr):
        return _ragged(name, list(arr))
    if arr.dtype.kind in "OU":
        items = list(arr.reshape(-1))
        if arr.dtype.kind == "O":
            _refuse_objects(name, items)
        out = _ascii_bytes(name, items)
        return ColumnValues(out.reshape(arr.shape))
    if arr.dtype.kind == "S":
        return ColumnValues(arr)
    if arr.dtype.kind == "M":
        return _datetime64_jd(name, arr)
    if arr.dtype == np.float16:
        raise TypeError(f"column {name!r}: float16 is not a FITS column type "
                        "(Dictionary table writes currently require CFITSIO-native column types)")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return ColumnValues(arr)


def _ragged(name: str, items: list) -> ColumnValues:
    arrays = [None if v is None else (tensor_to_numpy(v) if is_tensor(v) else np.asanyarray(v))
              for v in items]
    kinds = {a.dtype for a in arrays if a is not None}
    if len(kinds) > 1:
        raise TypeError(f"column {name!r}: variable-length cells must share one dtype, got "
                        f"{sorted(str(k) for k in kinds)}")
    dtype = kinds.pop() if kinds else np.dtype(np.float64)
    if dtype.kind in "OUS" or any(a is not None and a.ndim != 1 for a in arrays):
        raise TypeError(f"column {name!r}: variable-length cells must be 1-D numeric arrays")
    counts = np.array([0 if a is None else len(a) for a in arrays], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    parts = [a for a in arrays if a is not None]
    data = np.concatenate([np.ma.getdata(a) for a in parts]).astype(dtype, copy=False) if parts \
        else np.empty(0, dtype)
    mask = np.array([a is None for a in arrays]) if any(a is None for a in arrays) else None
    element_mask = None
    if any(isinstance(a, np.ma.MaskedArray) for a in parts):  # masked elements are nulls
        element_mask = np.concatenate([np.ma.getmaskarray(a) for a in parts])
        if dtype.kind == "f":
            data = np.where(element_mask, np.nan, data)
            element_mask = None
    return ColumnValues(data, mask, offsets, element_mask)


# ------------------------------------------------------------------------------ Arrow


def arrow_field_meta(field: Any) -> dict:
    """Field metadata as a str → str dict (keys lower-cased)."""
    meta = field.metadata or {}
    out = {}
    for k, v in meta.items():
        key = k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)
        out[key.lower()] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    if out.get("tunit") and not out.get("fits_tunit"):
        out["fits_tunit"] = out["tunit"]
    return out


def _null_mask(arr: Any) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return arr.is_null().to_numpy(zero_copy_only=False)


def _arrow_strings(name: str, arr: Any, binary: bool) -> np.ndarray:
    import pyarrow as pa

    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        buf = arr.buffers()[1]
        raw = np.frombuffer(buf, np.uint8)[arr.offset * width:(arr.offset + len(arr)) * width]
        return raw.copy().view(f"S{max(width, 1)}") if width else np.zeros(len(arr), "S1")
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], np.int64 if large else np.int32)[arr.offset:arr.offset + len(arr) + 1]
    values = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    from .._kernels import _rowpack

    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    mask = _null_mask(arr)
    n = len(arr)
    if mask is not None:
        lengths[mask] = 0
    width = int(lengths.max(initial=0))
    lo, hi = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
    if not binary and hi > lo:
        chars = values[lo:hi]
        if int(chars.max()) >= 127 or int(chars.min()) < 32:
            if mask is None or any(not s.isascii() or not s.isprintable()
                                   for s in arr.drop_null().to_pylist()):
                raise ValueError(f"column {name!r}: strings must be printable ASCII")
    out = np.empty((n, max(width, 1)), np.uint8)
    _rowpack.pack_strings(starts, lengths, np.ascontiguousarray(values), out)
    return out.view(f"S{max(width, 1)}").reshape(n)


def arrow_column(name: str, arr: Any) -> ColumnValues:
    """One Arrow array (a batch's column) as `ColumnValues`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        mask = _null_mask(arr)
        if mask is not None:
            fill = False if pa.types.is_boolean(t) else 0
            arr = pc.fill_null(arr, pa.scalar(fill, t))
        data = arr.to_numpy(zero_copy_only=False)
        if data.dtype == np.float16:
            data = data.astype(np.float32)
        return ColumnValues(data, mask)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        # JD pairs of the FITS time convention (`time_column_keywords`); a zone only names
        # how to show the instant, which Arrow keeps in UTC.
        unit = "D" if pa.types.is_date32(t) else "ms" if pa.types.is_date64(t) else t.unit
        mask = _null_mask(arr)
        ticks = pc.fill_null(arr.cast(pa.int32() if pa.types.is_date32(t) else pa.int64()), 0)
        return ColumnValues(epoch_to_jd(ticks.to_numpy(zero_copy_only=False), TICKS_PER_DAY[unit],
                                        mask))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ColumnValues(_arrow_strings(name, arr, False), _null_mask(arr))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return ColumnValues(_arrow_strings(name, arr, True), _null_mask(arr))
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        mask = _null_mask(arr)
        child = arr.flatten() if mask is None else pc.list_flatten(
            pc.if_else(arr.is_null(), pa.scalar([None] * size, t), arr))
        inner = arrow_column(name, child)
        if inner.offsets is not None:
            raise TypeError(f"column {name!r}: fixed-size lists of variable-length lists are not supported")
        data = inner.data.reshape((len(arr), size) + inner.data.shape[1:])
        imask = None
        if inner.mask is not None:
            imask = inner.mask.reshape((len(arr), size) + inner.mask.shape[1:])
        if mask is not None:
            row = mask.reshape((len(arr),) + (1,) * (data.ndim - 1))
            imask = (np.zeros(data.shape, bool) if imask is None else imask) | row
        return ColumnValues(data, imask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        values = arr.values
        inner = arrow_column(name, values)
        if inner.offsets is not None or inner.data.ndim != 1 or inner.data.dtype.kind == "S":
            raise TypeError(f"column {name!r}: only lists of numbers or booleans can be written "
                            "as variable-length columns")
        data = inner.data
        element_mask = None
        if inner.mask is not None and data.dtype.kind == "f":
            data = np.where(inner.mask, np.nan, data)
        elif inner.mask is not None:
            element_mask = inner.mask  # null logicals are stored as 0; null integers refused
        return ColumnValues(data, _null_mask(arr), offsets, element_mask)
    raise TypeError(f"column {name!r}: Arrow type {t} has no FITS column type")


def to_arrow_stream(data: Any) -> Any:
    """A pyarrow RecordBatchReader (or Table) for any Arrow-like table input, else None."""
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatchReader)):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars":
        return data.to_arrow()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    return None


def _fill_value(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "SU":
        return ""
    if dtype.kind == "b":
        return False
    return 0


def structured_columns(array: np.ndarray) -> tuple[dict, dict]:
    """A structured array or recarray (``fitsio.read``, astropy ``.data``) → (columns, schema).

    Fields become columns in order; astropy ``FITS_rec`` fields give physical values and their
    units go into the schema (TUNITn).
    """
    names = array.dtype.names or ()
    columns = {name: np.asarray(array[name]) for name in names}
    schema: dict = {}
    for col in getattr(getattr(array, "columns", None), "columns", None) or ():
        unit = getattr(col, "unit", None)
        if unit and col.name in columns:
            schema[col.name] = {"unit": str(unit)}
    return columns, schema


#: Header cards of the FITS time convention for columns holding JD = jd1 + jd2 (as astropy
#: writes them): the time scale of each column is its TCTYPn.
TIME_CARDS = [("TIMESYS", "UTC", "Default time scale"),
              ("JDREF", 0.0, "Time columns are jd = jd1 + jd2"),
              ("TREFPOS", "TOPOCENTER", "Time reference position")]
#: Days from JD 0 to the Unix epoch (1970-01-01T00:00:00 UTC).
_UNIX_EPOCH_JD = 2440587.5
_NS_PER_DAY = 86_400 * 10**9


def time_column_keywords(scale: str) -> dict:
    """Per-column keywords of a JD time column (jd1, jd2 pairs in days) in ``scale``."""
    return {"unit": "d", "keywords": {"TCTYP": scale.upper(), "TCUNI": "d"}}


#: Ticks a day of each NumPy / Arrow time unit.
TICKS_PER_DAY = {"D": 1, "h": 24, "m": 1440, "s": 86_400, "ms": 86_400 * 10**3,
                 "us": 86_400 * 10**6, "ns": _NS_PER_DAY}


def epoch_to_jd(ticks: np.ndarray, per_day: int, mask: np.ndarray | None) -> np.ndarray:
    """Ticks since the Unix epoch (UTC without leap seconds, as NumPy, pandas and Arrow count;
    ``per_day`` ticks a day) → ``(n, 2)`` float64 (jd1, jd2): whole days and the fraction of a
    day, so the fraction keeps about 1e-16 day (10 ps) and no nanosecond is lost. Nulls (NaT)
    become NaN, the null of a float column."""
    ticks = np.asarray(ticks, dtype=np.int64)
    days, rest = np.divmod(ticks, per_day)
    out = np.empty(ticks.shape + (2,), np.float64)
    out[..., 0] = days.astype(np.float64) + _UNIX_EPOCH_JD
    out[..., 1] = rest.astype(np.float64) / per_day
    if mask is not None:
        out[np.asarray(mask, bool)] = np.nan
    return out


def is_time_dtype(dtype: Any) -> bool:
    """NumPy datetime64, or an Arrow timestamp / date type."""
    if isinstance(dtype, np.dtype):
        return dtype.kind == "M"
    if type(dtype).__module__.split(".")[0] != "pyarrow":
        return False
    import pyarrow as pa

    return bool(pa.types.is_timestamp(dtype) or pa.types.is_date(dtype))


def _datetime64_jd(name: str, arr: np.ndarray) -> ColumnValues:
    unit, count = np.datetime_data(arr.dtype)
    if unit not in TICKS_PER_DAY or TICKS_PER_DAY[unit] % count:
        raise TypeError(f"column {name!r}: datetime64[{unit}] has no exact day fraction; "
                        "convert it to datetime64[ns]")
    ticks = arr.view(np.int64)
    mask = np.isnat(arr)
    return ColumnValues(epoch_to_jd(ticks, TICKS_PER_DAY[unit] // count,
                                    mask if mask.any() else None))


def _astropy_time(name: str, col: Any) -> tuple[np.ndarray, dict, list]:
    """An astropy ``Time`` column → (jd1/jd2 pairs, schema entry, header cards)."""
    jd = np.empty(np.shape(col.jd1) + (2,), np.float64)
    jd[..., 0] = np.asarray(getattr(col.jd1, "unmasked", col.jd1), np.float64)
    jd[..., 1] = np.asarray(getattr(col.jd2, "unmasked", col.jd2), np.float64)
    mask = np.asarray(getattr(col, "mask", False), bool)
    if mask.any():
        jd[mask] = np.nan
    spec = time_column_keywords(col.scale)
    cards: list = []
    if col.location is not None:
        location = col.location
        if location.size != 1:
            raise TypeError(f"column {name!r}: a Time column with one location per row cannot be "
                            "written; FITS time columns take one OBSGEO position")
        spec["keywords"]["TRPOS"] = "TOPOCENTER"
        cards = [(f"OBSGEO-{axis.upper()}", float(getattr(location, axis).to_value("m")))
                 for axis in ("x", "y", "z")]
    return jd, spec, cards


def astropy_table_parts(table: Any) -> tuple[dict, dict, list]:
    """An astropy ``Table`` / ``QTable`` → (columns, schema, header cards).

    Units become TUNITn, masked columns keep their mask (nulls: NaN, TNULL, empty string),
    ``Quantity`` columns are written as their values (a ``MaskedQuantity`` keeps its mask),
    ``Time`` columns follow the FITS time convention astropy reads back as ``Time`` (jd1, jd2
    pairs in days, TCTYPn the scale, TIMESYS/JDREF/TREFPOS), ``TimeDelta`` columns are float
    seconds (TUNITn ``s``), and ``meta`` becomes header cards
    (scalar values; ``comments``/``history`` lists become COMMENT/HISTORY lines).
    """
    from astropy.time import Time, TimeDelta

    columns: dict = {}
    schema: dict = {}
    has_time = False
    location: list = []
    for name in table.colnames:
        col = table[name]
        if isinstance(col, Time):
            columns[name], schema[name], here = _astropy_time(name, col)
            if here and location and here != location:
                raise TypeError(f"column {name!r}: Time columns with different locations cannot "
                                "share one table (FITS has one OBSGEO position per HDU)")
            has_time, location = True, here or location
            continue
        if isinstance(col, TimeDelta):  # a duration: float seconds (TUNITn = 's')
            seconds = np.asarray(col.to_value("sec"), np.float64)
            nulls = np.asarray(getattr(col, "mask", False), bool)
            columns[name] = np.where(nulls, np.nan, seconds) if nulls.any() else seconds
            schema[name] = {"unit": "s"}
            continue
        unit = getattr(col, "unit", None)
        mask = getattr(col, "mask", None)
        if hasattr(col, "to_value"):  # Quantity (QTable); a MaskedQuantity keeps its mask
            raw = np.asarray(getattr(col, "unmasked", col).value)
            values: Any = np.ma.MaskedArray(raw, mask=np.asarray(mask)) if mask is not None \
                else raw
        elif mask is not None:
            values = np.ma.MaskedArray(np.asarray(col.data if hasattr(col, "data") else col),
                                       mask=np.asarray(mask))
        else:
            values = np.asarray(col)
        if values.dtype.kind == "U":
            values = np.char.encode(values, "ascii") if not isinstance(values, np.ma.MaskedArray) \
                else values
        columns[name] = values
        if unit is not None and str(unit):
            try:
                text = unit.to_string(format="fits")
            except (ValueError, AttributeError):  # not a FITS-standard unit: keep its own spelling
                text = str(unit)
            schema[name] = {"unit": text}
    cards: list = (list(TIME_CARDS) + location) if has_time else []
    for key, value in table.meta.items():
        k = str(key)
        if k.upper() in ("COMMENTS", "COMMENT", "HISTORY") and isinstance(value, (list, tuple)):
            word = "HISTORY" if k.upper() == "HISTORY" else "COMMENT"
            cards += [(word, str(v)) for v in value]
        elif isinstance(value, (str, bool, int, float, np.generic)):
            cards.append((k.upper() if len(k) <= 8 else k, value))
    return columns, schema, cards

"""Column dicts (``torchfits.read`` / ``read_torch`` output) → Arrow, pandas, Polars, astropy.

The root helpers of the 1.x API (docs/compatibility.md). Numeric columns reach Arrow without a copy (a later
change to the source tensor is visible); pyarrow, pandas, polars and astropy are imported only
by the function that needs them.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from .._torch_adapter import is_tensor, tensor_to_numpy
from .common import require_module

__all__ = ["to_arrow", "to_pandas", "to_polars", "to_astropy"]

_ARROW_VLA = ("list", "drop")
_PANDAS_VLA = ("object", "drop")


def _check_policy(vla_policy: Any, allowed: tuple) -> None:
    if vla_policy not in allowed:
        raise ValueError(f"vla_policy must be one of {', '.join(map(repr, allowed))}, "
                         f"not {vla_policy!r}")


def _check_mapping(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a dict of columns, not {type(data).__name__}")


def _numpy(value: Any) -> np.ndarray:
    """A NumPy view of a tensor (no copy on the CPU) or an array-like."""
    if is_tensor(value):
        return tensor_to_numpy(value)
    return np.asarray(value)


def _is_vla(value: Any) -> bool:
    """A list of per-row 1-D arrays/tensors (or None), or a ``(flat_values, offsets)`` pair."""
    if isinstance(value, tuple) and len(value) == 2 and all(
            is_tensor(v) or isinstance(v, np.ndarray) for v in value) and _numpy(value[1]).ndim == 1 \
            and _numpy(value[0]).ndim == 1 and _numpy(value[1]).dtype.kind in "iu":
        return True
    return isinstance(value, list) and any(is_tensor(v) or isinstance(v, np.ndarray) for v in value) \
        and all(v is None or is_tensor(v) or isinstance(v, np.ndarray) for v in value)


def _vla_parts(value: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat values, int64 offsets, row validity) of a variable-length column."""
    if isinstance(value, tuple):
        flat, offsets = (_numpy(v) for v in value)
        return flat, np.asarray(offsets, dtype=np.int64), np.ones(len(offsets) - 1, bool)
    rows = [None if v is None else _numpy(v).reshape(-1) for v in value]
    valid = np.array([r is not None for r in rows], dtype=bool)
    dtype = next((r.dtype for r in rows if r is not None), np.dtype(np.float64))
    lengths = np.array([0 if r is None else len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    present = [r for r in rows if r is not None and len(r)]
    flat = np.concatenate(present).astype(dtype, copy=False) if present else np.empty(0, dtype)
    return flat, offsets, valid


def _decode_byte_matrix(matrix: np.ndarray, encoding: str, strip: bool) -> list[str]:
    """``uint8 (N, w)`` rows → text; trailing NULs always go, trailing blanks with ``strip``."""
    out = []
    for row in np.ascontiguousarray(matrix):
        raw = row.tobytes().rstrip(b"\x00")
        if strip:
            raw = raw.rstrip(b" \x00")
        out.append(raw.decode(encoding, "replace"))
    return out


def _fixed_size_list(pa: Any, arr: np.ndarray) -> Any:
    """``(N, a, b, ...)`` → nested ``fixed_size_list`` (the leaf buffer is shared)."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = pa.array(flat)
    if 0 in arr.shape[1:]:
        # Cells without elements: every row an empty list, as the table decoder gives them.
        return pa.ListArray.from_arrays(pa.array(np.zeros(len(arr) + 1, np.int32)), out)
    for dim in reversed(arr.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, int(dim))
    return out


def _arrow_column(pa: Any, name: str, value: Any, decode_bytes: bool, encoding: str,
                  strip: bool) -> Any:
    if _is_vla(value):
        flat, offsets, valid = _vla_parts(value)
        if flat.dtype.kind == "c":
            raise ValueError(f"column {name!r}: complex values have no Arrow type; "
                             "split them into real and imaginary columns")
        # 1.2.3 widened float32 variable-length columns to double; keep that for compatibility.
        if flat.dtype == np.float32:
            flat = flat.astype(np.float64)
        mask = None if valid.all() else pa.array(~valid)
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat), mask=mask) \
            if offsets[-1] > np.iinfo(np.int32).max else \
            pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat), mask=mask)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                          for v in value):
        return pa.array([v.decode(encoding, "replace") if isinstance(v, bytes) else v
                         for v in value], type=pa.string())
    arr = _numpy(value)
    if arr.dtype.kind == "c":
        raise ValueError(f"column {name!r}: complex values have no Arrow type; "
                         "split them into real and imaginary columns")
    if arr.dtype.kind in "US":
        return pa.array(arr.astype(str).reshape(-1).tolist() if arr.ndim != 1 else arr.astype(str))
    if arr.dtype.kind == "O":
        return pa.array(arr.tolist())
    if arr.ndim == 0:
        raise ValueError(f"column {name!r}: a scalar is not a column")
    if arr.ndim == 1:
        # Contiguous numeric buffers are wrapped, not copied.
        return pa.array(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))
    if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes:
        return pa.array(_decode_byte_matrix(arr, encoding, strip), type=pa.string())
    return _fixed_size_list(pa, arr)


def to_arrow(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
             strip: bool = True, vla_policy: str = "list") -> Any:
    """A column dict → ``pyarrow.Table``.

    Parameters
    ----------
    data : dict
        Column name → tensor, NumPy array, list, or list of per-row tensors (variable length).
    decode_bytes : bool
        Turn ``uint8 (N, w)`` byte matrices into strings (else ``fixed_size_list<uint8>[w]``).
    encoding : str
        Text encoding for ``decode_bytes``; undecodable bytes become U+FFFD.
    strip : bool
        With ``decode_bytes``, also drop trailing blanks (trailing NULs always go).
    vla_policy : {"list", "drop"}
        Variable-length columns as ``list<...>`` or left out.

    Returns
    -------
    pyarrow.Table
        Numeric columns share memory with the source.

    Raises
    ------
    ValueError
        Complex columns; an unknown ``vla_policy``.
    """
    _check_policy(vla_policy, _ARROW_VLA)
    _check_mapping(data)
    pa = require_module("pyarrow", "pyarrow", "to_arrow conversion")
    names, arrays = [], []
    for name, value in data.items():
        if vla_policy == "drop" and _is_vla(value):
            continue
        names.append(str(name))
        arrays.append(_arrow_column(pa, str(name), value, decode_bytes, encoding, strip))
    return pa.Table.from_arrays(arrays, names=names)


def _pandas_column(name: str, value: Any, decode_bytes: bool, encoding: str, strip: bool) -> Any:
    if _is_vla(value):
        if isinstance(value, tuple):
            flat, offsets, _valid = _vla_parts(value)
            rows: list[Any] = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        else:
            rows = [None if v is None else _numpy(v) for v in value]
        out = np.empty(len(rows), dtype=object)
        out[:] = rows
        return out
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                          for v in value):
        return [v.decode(encoding, "replace") if isinstance(v, bytes) else v for v in value]
    arr = _numpy(value)
    if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes:
        return _decode_byte_matrix(arr, encoding, strip)
    if arr.ndim >= 2:
        out = np.empty(arr.shape[0], dtype=object)
        out[:] = list(arr)
        return out
    return arr


def to_pandas(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
              strip: bool = True, vla_policy: str = "object") -> Any:
    """A column dict → ``pandas.DataFrame``.

    Vector, byte-matrix (unless ``decode_bytes``) and variable-length cells become NumPy arrays
    in object columns; ``vla_policy="drop"`` leaves variable-length columns out.
    """
    _check_policy(vla_policy, _PANDAS_VLA)
    _check_mapping(data)
    pd = require_module("pandas", "pandas", "to_pandas conversion")
    columns = {}
    for name, value in data.items():
        if vla_policy == "drop" and _is_vla(value):
            continue
        columns[str(name)] = _pandas_column(str(name), value, decode_bytes, encoding, strip)
    return pd.DataFrame(columns)


def to_polars(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
              strip: bool = True, vla_policy: str = "list", *, rechunk: bool = False) -> Any:
    """A column dict → ``polars.DataFrame`` (vectors as ``Array``, variable-length as ``List``)."""
    _check_policy(vla_policy, _ARROW_VLA)
    pl = require_module("polars", "polars", "to_polars conversion")
    table = to_arrow(data, decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                     vla_policy=vla_policy)
    return pl.from_arrow(table, rechunk=rechunk)


def to_astropy(data: Any, decode_bytes: bool = False, encoding: str = "ascii", strip: bool = True,
               vla_policy: str = "list") -> Any:
    """A column dict (or a path) → ``astropy.table.Table``.

    A path is read with `torchfits.table.to_astropy` (TNULL masks, units). For a dict, vectors
    keep their ``(N, r)`` shape, byte matrices become strings with ``decode_bytes``, and
    variable-length columns become object columns (``vla_policy="drop"`` leaves them out).
    """
    _check_policy(vla_policy, _ARROW_VLA)
    require_module("astropy", "astropy", "to_astropy conversion")
    if isinstance(data, (str, os.PathLike)):
        from .table import to_astropy as _table_to_astropy

        return _table_to_astropy(data)
    _check_mapping(data)
    from astropy.table import Column, Table

    out = Table()
    for name, value in data.items():
        if _is_vla(value):
            if vla_policy == "drop":
                continue
            cells = _pandas_column(str(name), value, False, encoding, strip)
            out.add_column(Column(cells, name=str(name), dtype=object))
            continue
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                              for v in value):
            values: Any = np.array(["" if v is None else (v.decode(encoding, "replace")
                                                          if isinstance(v, bytes) else v)
                                    for v in value], dtype=str)
        else:
            arr = _numpy(value)
            values = np.array(_decode_byte_matrix(arr, encoding, strip), dtype=str) \
                if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes else arr
        out.add_column(Column(values, name=str(name)))
    return out

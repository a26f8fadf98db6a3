"""pyarrow scalars and arrays built from buffers, so that building them never imports pandas.

``pyarrow.scalar`` and ``pyarrow.array`` ask pyarrow's pandas shim whether a value is a pandas
object, and the shim imports pandas (some 300 ms) the first time it is asked, whatever the
value. Building from buffers (``pyarrow.Array.from_buffers``) asks nothing. Types other than
bool, integers, floats, strings and binaries fall back to ``pyarrow.array``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["arrow_array", "arrow_scalar", "int64_array"]


def _numpy_dtype(pa_type: Any) -> np.dtype | None:
    types = pa.types
    if types.is_integer(pa_type):
        return np.dtype(f"{'i' if types.is_signed_integer(pa_type) else 'u'}{pa_type.bit_width // 8}")
    if types.is_floating(pa_type):
        return np.dtype(f"f{pa_type.bit_width // 8}")
    return None


def int64_array(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over ``values`` (converted to a contiguous int64 array first)."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def arrow_array(values: Sequence[Any], pa_type: Any) -> pa.Array:
    """``pyarrow.array(values, type=pa_type)`` for plain Python or NumPy values."""
    n = len(values)
    if any(v is None for v in values):
        if all(v is None for v in values):
            return pa.nulls(n, pa_type)
        return pa.array(list(values), type=pa_type)  # mixed nulls: not needed by the engine
    dtype = _numpy_dtype(pa_type)
    if dtype is not None:
        data = np.array(values, dtype=dtype)
        return pa.Array.from_buffers(pa_type, n, [None, pa.py_buffer(data)])
    if pa.types.is_boolean(pa_type):
        bits = np.packbits(np.array(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(pa_type, n, [None, pa.py_buffer(bits)])
    text = pa.types.is_string(pa_type) or pa.types.is_large_string(pa_type)
    if text or pa.types.is_binary(pa_type) or pa.types.is_large_binary(pa_type):
        raw = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
        large = pa.types.is_large_string(pa_type) or pa.types.is_large_binary(pa_type)
        offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
        np.cumsum([len(b) for b in raw], out=offsets[1:])
        return pa.Array.from_buffers(pa_type, n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(b"".join(raw))])
    return pa.array(list(values), type=pa_type)


def arrow_scalar(value: Any, pa_type: Any) -> pa.Scalar:
    """``pyarrow.scalar(value, pa_type)`` for a plain Python or NumPy value (None: null)."""
    return arrow_array([value], pa_type)[0]

"""Column values of the 1.x tensor mapping (what ``read_torch`` returns and ``TableHDU`` holds).

A column is a tensor or array (``(N,)``, ``(N, r)``), a ``uint8 (N, w)`` byte matrix for a
character column, or a variable-length column: a list of per-row 1-D arrays or tensors (None
for a missing row) or a ``(flat_values, offsets)`` pair. The interop helpers and the HDU objects
read them through these functions, so both routes agree.

Text follows the Arrow reads' rule (docs/compatibility.md): trailing NULs are padding and always
go; ``strip`` also drops trailing blanks, in any mix with NULs; leading and embedded bytes stay
(astropy's ``Table.read`` and fitsio keep embedded NULs too, although the FITS standard leaves
the bytes after a NUL undefined).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._torch_adapter import is_tensor, tensor_to_numpy

__all__ = ["as_numpy", "is_vla", "vla_parts", "vla_lengths", "is_byte_matrix",
           "decode_byte_rows", "column_length"]


def as_numpy(value: Any) -> np.ndarray:
    """A NumPy view of a tensor (no copy on the CPU) or an array-like."""
    if is_tensor(value):
        return tensor_to_numpy(value)
    return np.asarray(value)


def _is_array(value: Any) -> bool:
    return is_tensor(value) or isinstance(value, np.ndarray)


def is_vla(value: Any) -> bool:
    """A variable-length column: a list of per-row 1-D arrays or tensors (None for a missing
    row, at least one present), or a ``(flat_values, offsets)`` pair with integer offsets."""
    if isinstance(value, tuple):
        return len(value) == 2 and all(_is_array(v) for v in value) \
            and as_numpy(value[0]).ndim == 1 and as_numpy(value[1]).ndim == 1 \
            and as_numpy(value[1]).dtype.kind in "iu"
    return isinstance(value, list) and any(_is_array(v) for v in value) \
        and all(v is None or _is_array(v) for v in value)


def vla_parts(value: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat values, int64 offsets, row validity) of a variable-length column."""
    if isinstance(value, tuple):
        flat, offsets = (as_numpy(v) for v in value)
        return flat, np.asarray(offsets, dtype=np.int64), np.ones(len(offsets) - 1, bool)
    rows = [None if v is None else as_numpy(v).reshape(-1) for v in value]
    valid = np.array([r is not None for r in rows], dtype=bool)
    dtype = next((r.dtype for r in rows if r is not None), np.dtype(np.float64))
    lengths = np.array([0 if r is None else len(r) for r in rows], dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    present = [r for r in rows if r is not None and len(r)]
    flat = np.concatenate(present).astype(dtype, copy=False) if present else np.empty(0, dtype)
    return flat, offsets, valid


def vla_lengths(value: Any) -> list[int]:
    """Elements per row of a variable-length column (0 for a missing row)."""
    if isinstance(value, tuple):
        return np.diff(vla_parts(value)[1]).tolist()
    return [0 if v is None else column_length(v) for v in value]


def is_byte_matrix(value: Any) -> bool:
    """A ``uint8 (N, w)`` column: how the tensor mapping carries character columns."""
    if is_tensor(value):
        return str(value.dtype) == "torch.uint8" and value.dim() == 2
    return isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 2


def decode_byte_rows(matrix: Any, encoding: str = "ascii", strip: bool = True, *,
                     keep_padding: bool = False) -> list[str]:
    """Rows of a ``uint8 (N, w)`` byte matrix as text (undecodable bytes become U+FFFD).

    Trailing NULs always go; ``strip`` also drops trailing blanks (in any mix with NULs).
    ``keep_padding`` (only without ``strip``) keeps every byte, the raw field.
    """
    out = []
    for row in np.ascontiguousarray(as_numpy(matrix), dtype=np.uint8):
        raw = row.tobytes()
        if strip:
            raw = raw.rstrip(b" \x00")
        elif not keep_padding:
            raw = raw.rstrip(b"\x00")
        out.append(raw.decode(encoding, "replace"))
    return out


def column_length(value: Any) -> int:
    """Rows in one column (a 0-d value counts as one)."""
    if _is_array(value):
        return int(value.shape[0]) if len(value.shape) else 1
    if is_vla(value) and isinstance(value, tuple):
        return len(as_numpy(value[1])) - 1
    return len(value)

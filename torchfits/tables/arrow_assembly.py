"""Decoded column outputs → Arrow arrays and record batches, and the Arrow schema a decode
produces (`arrow_schema`) without decoding anything.
"""
from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import UnsupportedColumnError
from ..fits.columns import ColumnSpec, arrow_type, element_arrow_type
from ..fits.columns import field_metadata as _field_metadata
from .column_plan import ColumnOutput
from .decode_options import ascii_compatible
from .selection import select_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa

__all__ = [
    "arrow_schema",
    "column_array",
    "empty_batch",
    "leaf_array",
    "refuse_complex",
]


def _pa() -> Any:
    import pyarrow

    return pyarrow


def _decode_non_ascii(arr: pa.Array, encoding: str) -> pa.Array:
    """Decode stripped string bytes that are not plain ASCII; undecodable bytes become U+FFFD."""
    pa = _pa()
    binary = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()) \
        if not pa.types.is_binary(arr.type) and not pa.types.is_large_binary(arr.type) else arr
    target = pa.large_string() if pa.types.is_large_binary(binary.type) else pa.string()
    if codecs.lookup(encoding).name == "utf-8":
        try:
            return binary.cast(target)
        except pa.ArrowInvalid:
            pass
    values = [None if v is None else v.decode(encoding, "replace") for v in binary.to_pylist()]
    return pa.array(values, type=target)


def leaf_array(out: ColumnOutput, leaf_type: pa.DataType, encoding: str, decode_text: bool) -> pa.Array:
    pa = _pa()
    kind = out.conv.kind
    items = out.items
    valid = None
    if out.valid is not None and out.nulls:
        valid = pa.py_buffer(out.valid)
    if kind == "string":
        if pa.types.is_fixed_size_binary(leaf_type):
            return pa.Array.from_buffers(leaf_type, items, [None, pa.py_buffer(out.values)])
        text = decode_text and (pa.types.is_string(leaf_type) or pa.types.is_large_string(leaf_type))
        # Built with int32 offsets; large types (QA columns) are cast afterwards.
        base_type = pa.string() if text else pa.binary()
        assert out.offsets is not None
        if text and (out.high or not ascii_compatible(encoding)):
            raw = pa.Array.from_buffers(pa.binary(), items,
                                        [None, pa.py_buffer(out.offsets), pa.py_buffer(out.values)])
            arr = _decode_non_ascii(raw, encoding)
        else:
            arr = pa.Array.from_buffers(base_type, items,
                                        [None, pa.py_buffer(out.offsets), pa.py_buffer(out.values)])
        if arr.type != leaf_type:
            arr = arr.cast(leaf_type)
        return arr
    if kind in ("logical", "bits"):
        return pa.Array.from_buffers(pa.bool_(), items, [valid, pa.py_buffer(out.values)],
                                     null_count=out.nulls if valid is not None else 0)
    if kind == "complex":
        half = pa.from_numpy_dtype(out.conv.dtype)
        child = pa.Array.from_buffers(half, 2 * items, [None, pa.py_buffer(out.values)], null_count=0)
        return pa.Array.from_buffers(pa.list_(half, 2), items, [None], null_count=0, children=[child])
    return pa.Array.from_buffers(leaf_type, items, [valid, pa.py_buffer(out.values)],
                                 null_count=out.nulls if valid is not None else 0)


def column_array(out: ColumnOutput, nrows: int, mapping: str, decode_bytes: bool, binary_strings: bool,
                 encoding: str) -> pa.Array:
    pa = _pa()
    spec = out.spec
    target = arrow_type(spec, mapping, decode_bytes, binary_strings=binary_strings)  # type: ignore[arg-type]
    leaf_type = element_arrow_type(spec, out.conv, decode_bytes, binary_strings, mapping)
    if spec.is_vla:
        if out.conv.kind == "string":
            return leaf_array(out, target, encoding, decode_bytes and not binary_strings)
        leaf = leaf_array(out, leaf_type, encoding, False)
        assert out.list_offsets is not None
        if pa.types.is_large_list(target):
            offs = out.list_offsets
        else:
            offs = out.list_offsets.astype(np.int32)
        return pa.Array.from_buffers(target, nrows, [None, pa.py_buffer(offs)], null_count=0,
                                     children=[leaf])
    leaf = leaf_array(out, leaf_type, encoding, decode_bytes and not binary_strings)
    if pa.types.is_list(target):
        # A cell with no elements: every row an empty list (`arrow_type` says why not a
        # fixed_size_list of size 0); the leaf holds no values.
        return pa.Array.from_buffers(target, nrows, [None, pa.py_buffer(np.zeros(nrows + 1, np.int32))],
                                     null_count=0, children=[leaf.slice(0, 0)])
    # Fixed-size lists of size 0 cannot tell their length from the child: carry it explicitly.
    chain = []
    t = target
    while t != leaf_type:
        chain.append(t)
        t = t.value_type
    arr = leaf
    lengths = []
    length = nrows
    for t in chain:
        lengths.append(length)
        length *= t.list_size
    for t, n in zip(reversed(chain), reversed(lengths)):
        arr = pa.Array.from_buffers(t, n, [None], null_count=0, children=[arr])
    return arr


def empty_batch(nrows: int) -> pa.RecordBatch:
    pa = _pa()
    return pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), nrows, [None], null_count=0))


def arrow_schema(specs: Sequence[ColumnSpec], *, columns: Any = None,
                 mapping: Literal["native", "compat"] = "native", decode_bytes: bool = True,
                 binary_strings: bool = False, metadata: bool = True) -> pa.Schema:
    """The schema `decode_table` produces for the same arguments, without decoding anything.

    Raises
    ------
    ColumnNotFoundError
        For an unknown projected column.
    UnsupportedColumnError
        For projected complex columns under ``mapping="compat"``.
    """
    pa = _pa()
    chosen = select_columns(specs, columns)
    refuse_complex(chosen, mapping)
    fields = [pa.field(s.name, arrow_type(s, mapping, decode_bytes, binary_strings=binary_strings),
                       metadata=_field_metadata(s) if metadata else None) for s in chosen]
    return pa.schema(fields)


def refuse_complex(chosen: Sequence[ColumnSpec], mapping: str) -> None:
    if mapping == "compat":
        bad = [s.name for s in chosen if not s.is_ascii and s.code in "CM"]
        if bad:
            raise UnsupportedColumnError(
                f"complex columns {bad} cannot be read as Arrow tables; use read_torch for them"
            )

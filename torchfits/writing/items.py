"""What `write` accepts, normalised: `ImageData` and `TableData` items, one per HDU.

An object that holds several HDUs (the 1.x ``HDUList``) can be written by giving it a
``__fits_hdus__()`` method that returns these items.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._torch_adapter import is_tensor, tensor_to_numpy
from ..fits.header import Header
from .cards import as_header

__all__ = ["ImageData", "TableData", "as_numpy", "is_table_like", "to_items"]


@dataclass
class ImageData:
    """An image HDU to write: an array and the user's extra header cards."""

    array: np.ndarray
    header: Header | None = None


@dataclass
class TableData:
    """A table HDU to write: columns (a dict of arrays, or any Arrow-like table or stream) and
    the user's extra header cards.

    ``schema`` holds per-column overrides (``format``, ``unit``, ``tnull``, ``tscal``,
    ``tzero``, ``dim``); ``table_type`` is ``"binary"`` or ``"ascii"``; ``quantize`` turns
    float columns into scaled 16-bit integers.
    """

    columns: Any
    header: Header | None = None
    schema: Mapping[str, Any] | None = None
    table_type: str = "binary"
    quantize: Any = None


def as_numpy(data: Any) -> np.ndarray:
    if is_tensor(data):
        return tensor_to_numpy(data)
    return np.asarray(data)


def is_table_like(data: Any) -> bool:
    module = type(data).__module__.split(".")[0]
    return module in ("pyarrow", "pandas", "polars", "astropy") or hasattr(data, "__arrow_c_stream__")


def _is_astropy_table(data: Any) -> bool:
    return type(data).__module__.startswith("astropy.table") and hasattr(data, "colnames")


def _merged(cards: list, header: Header | None) -> Header | None:
    """Header cards a table brings (astropy ``meta``), then the caller's (which win)."""
    if not cards:
        return header
    merged = Header(cards)
    if header is not None:
        merged.update(header)
    return merged


def _table_item(data: Any, header: Header | None) -> TableData | None:
    """A structured array / recarray or an astropy table as a table item, else None."""
    from .table_inputs import astropy_table_parts, structured_columns

    if isinstance(data, np.ndarray) and data.dtype.names:
        columns, schema = structured_columns(data)
        return TableData(columns, header, schema or None)
    if _is_astropy_table(data):
        columns, schema, cards = astropy_table_parts(data)
        return TableData(columns, _merged(cards, header), schema or None)
    return None


def to_items(data: Any, header: Header | None) -> list[Any]:
    hdus = getattr(data, "__fits_hdus__", None)
    if callable(hdus):  # an object that knows its HDUs (the 1.x HDUList)
        return list(hdus())
    table = _table_item(data, header)
    if table is not None:
        return [table]
    if isinstance(data, np.ndarray) or is_tensor(data):
        return [ImageData(as_numpy(data), header)]
    if isinstance(data, (ImageData, TableData)):
        return [data]
    if isinstance(data, Mapping):
        if "data" in data:
            extra = set(data) - {"data", "header"}
            if extra:
                raise ValueError("HDU dictionary may contain only 'data' and 'header' keys")
            inner = data["data"]
            if not (isinstance(inner, np.ndarray) or is_tensor(inner)):
                raise TypeError("the 'data' of an HDU dictionary must be a tensor or ndarray")
            own = data.get("header")
            return [ImageData(as_numpy(inner), as_header(own) if own is not None else header)]
        return [TableData(data, header)]
    if is_table_like(data) and not isinstance(data, (list, tuple)):
        if type(data).__name__ == "HDUList":  # astropy HDUList: not supported here
            raise TypeError("Unsupported data type for FITS writing")
        return [TableData(data, header)]
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError("At least one writable HDU is required")
        items = []
        for k, item in enumerate(data):
            h = header if k == 0 else None
            if isinstance(item, (Mapping, ImageData, TableData)) or is_table_like(item) \
                    or (isinstance(item, np.ndarray) and item.dtype.names):
                items += to_items(item, h)
            elif isinstance(item, np.ndarray) or is_tensor(item):
                items.append(ImageData(as_numpy(item), h))
            elif is_tensor(inner := getattr(item, "data", None)) or isinstance(inner, np.ndarray):
                items.append(ImageData(as_numpy(inner), as_header(getattr(item, "header", None))))
            else:
                raise TypeError(f"Unsupported HDU item type: {type(item).__name__}")
        return items
    raise TypeError("Unsupported data type for FITS writing")

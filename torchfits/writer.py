"""Writing FITS: images and binary tables from NumPy arrays (and tensors), atomically.

Every write goes to a temporary file in the target's directory, is fsync'd, then renamed over
the target, so a failure at any point leaves what the user had untouched.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from ._hdu_index import invalidate
from ._paths import fspath
from ._torch_adapter import is_tensor, tensor_to_numpy
from .errors import FitsFileExistsError, UInt64WriteError
from .header import Card, Header, format_card

__all__ = ["write", "ImageData", "TableData", "encode_image", "encode_table", "write_hdus"]

BLOCK = 2880
# dtype → (BITPIX, BZERO or None, flip sign bit when storing)
_IMAGE_TYPES = {
    np.dtype(np.uint8): (8, None), np.dtype(np.int8): (8, -128),
    np.dtype(np.int16): (16, None), np.dtype(np.uint16): (16, 32768),
    np.dtype(np.int32): (32, None), np.dtype(np.uint32): (32, 2147483648),
    np.dtype(np.int64): (64, None),
    np.dtype(np.float32): (-32, None), np.dtype(np.float64): (-64, None),
}
_STORED = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
# Keywords the writer owns: user values for these are ignored.
STRUCTURAL = frozenset({"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
                        "TFIELDS", "THEAP", "BSCALE", "BZERO", "END"})


def _is_structural(key: str, table: bool) -> bool:
    k = key.upper()
    if k in STRUCTURAL or (k.startswith("NAXIS") and k[5:].isdigit()):
        return True
    if table:
        for prefix in ("TTYPE", "TFORM", "TZERO", "TSCAL", "TBCOL", "TDIM", "TNULL"):
            if k.startswith(prefix) and k[len(prefix):].isdigit():
                return True
    return False


@dataclass
class ImageData:
    """An image HDU to write: an array and the user's extra header cards."""

    array: np.ndarray
    header: Optional[Header] = None


@dataclass
class TableData:
    """A binary-table HDU to write: named columns and the user's extra header cards."""

    columns: Mapping[str, Any]
    header: Optional[Header] = None


def _as_numpy(data: Any) -> np.ndarray:
    if is_tensor(data):
        return tensor_to_numpy(data)
    return np.asarray(data)


def flip_sign_bit(native: np.ndarray) -> np.ndarray:
    """Offset-binary storage (unsigned via BZERO, int8 via BZERO=-128): stored = value - BZERO,
    which is the value's bits with the top bit flipped; returned big-endian."""
    size = native.dtype.itemsize
    bits = native.view(np.dtype(f"u{size}"))
    flipped = bits ^ np.array(1 << (8 * size - 1), dtype=bits.dtype)
    return flipped.astype(np.dtype(f">u{size}"))


def encode_image(array: Any, *, primary: bool) -> tuple[list[Card], np.ndarray]:
    """Structural cards and big-endian data for one image HDU."""
    arr = _as_numpy(array)
    if arr.dtype == np.uint64:
        raise UInt64WriteError("uint64 images cannot be stored losslessly in FITS; convert to int64 or float64")
    if arr.dtype.kind == "V" or arr.dtype.newbyteorder("=") not in _IMAGE_TYPES:
        raise TypeError(f"Unsupported tensor dtype for a FITS image: {arr.dtype}")
    dtype = arr.dtype.newbyteorder("=")
    bitpix, bzero = _IMAGE_TYPES[dtype]
    cards = [Card("SIMPLE", True, "conforms to FITS standard") if primary
             else Card("XTENSION", "IMAGE", "image extension")]
    cards.append(Card("BITPIX", bitpix, "array data type"))
    cards.append(Card("NAXIS", arr.ndim, "number of array dimensions"))
    for k, n in enumerate(reversed(arr.shape), start=1):
        cards.append(Card(f"NAXIS{k}", int(n)))
    if primary:
        cards.append(Card("EXTEND", True))
    else:
        cards += [Card("PCOUNT", 0), Card("GCOUNT", 1)]
    native = np.ascontiguousarray(arr, dtype=dtype)
    if bzero is not None:
        cards += [Card("BSCALE", 1), Card("BZERO", bzero)]
        return cards, flip_sign_bit(native)
    return cards, native.astype(_STORED[bitpix])


# Binary table columns: numpy kind/size → (TFORM code, TZERO, big-endian storage dtype)
_TABLE_TYPES = {
    np.dtype(np.bool_): ("L", None, "u1"),
    np.dtype(np.uint8): ("B", None, "u1"), np.dtype(np.int8): ("B", -128, "u1"),
    np.dtype(np.int16): ("I", None, ">i2"), np.dtype(np.uint16): ("I", 32768, ">i2"),
    np.dtype(np.int32): ("J", None, ">i4"), np.dtype(np.uint32): ("J", 2147483648, ">i4"),
    np.dtype(np.int64): ("K", None, ">i8"),
    np.dtype(np.float32): ("E", None, ">f4"), np.dtype(np.float64): ("D", None, ">f8"),
    np.dtype(np.complex64): ("C", None, ">c8"), np.dtype(np.complex128): ("M", None, ">c16"),
}


def _column_array(name: str, values: Any) -> np.ndarray:
    arr = _as_numpy(values)
    if arr.dtype.kind in "OU":
        items = ["" if v is None else (v.decode("ascii") if isinstance(v, bytes) else str(v))
                 for v in arr.reshape(-1)]
        for v in items:
            if not v.isascii():
                raise ValueError(f"column {name!r}: strings must be printable ASCII")
        width = max([len(v) for v in items] + [1])
        return np.array([v.encode("ascii") for v in items], dtype=f"S{width}").reshape(arr.shape)
    return arr


def encode_table(columns: Mapping[str, Any]) -> tuple[list[Card], np.ndarray]:
    """Structural cards and row bytes for a binary table of fixed-width columns."""
    if not columns:
        raise ValueError("data must be a non-empty dictionary of columns")
    arrays = {str(k): _column_array(str(k), v) for k, v in columns.items()}
    nrows = {k: (a.shape[0] if a.ndim else 1) for k, a in arrays.items()}
    if len(set(nrows.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in nrows.items())
        raise ValueError(f"Column row count mismatch: {detail}")
    n = next(iter(nrows.values()))
    cards = [Card("XTENSION", "BINTABLE", "binary table extension"), Card("BITPIX", 8),
             Card("NAXIS", 2), Card("NAXIS1", 0), Card("NAXIS2", n), Card("PCOUNT", 0),
             Card("GCOUNT", 1), Card("TFIELDS", len(arrays))]
    names, formats, offsets, fills = [], [], [], []
    col_cards: list[Card] = []
    offset = 0
    for i, (name, arr) in enumerate(arrays.items(), start=1):
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim > 2:
            raise ValueError(f"column {name!r}: arrays of more than 2 dimensions are not supported")
        repeat = arr.shape[1] if arr.ndim == 2 else 1
        if arr.dtype.kind == "S":
            code, tzero, storage = "A", None, f"S{arr.dtype.itemsize}"
            width = arr.dtype.itemsize * repeat
            tform = f"{width}A"
            field = np.dtype((f"S{arr.dtype.itemsize}", (repeat,))) if repeat > 1 else np.dtype(storage)
        else:
            dtype = arr.dtype.newbyteorder("=")
            if dtype == np.uint64:
                raise UInt64WriteError(f"column {name!r}: uint64 cannot be stored losslessly; use int64 or float64")
            if dtype not in _TABLE_TYPES:
                raise TypeError(f"column {name!r}: unsupported dtype {arr.dtype}")
            code, tzero, storage = _TABLE_TYPES[dtype]
            tform = f"{repeat}{code}" if repeat != 1 else code
            field = np.dtype((storage, (repeat,))) if repeat > 1 else np.dtype(storage)
        col_cards.append(Card(f"TTYPE{i}", name))
        col_cards.append(Card(f"TFORM{i}", tform))
        if tzero is not None:
            col_cards += [Card(f"TSCAL{i}", 1), Card(f"TZERO{i}", tzero)]
        names.append(f"c{i}")
        formats.append(field)
        offsets.append(offset)
        fills.append((arr, tzero))
        offset += field.itemsize
    cards[3] = Card("NAXIS1", offset, "width of table in bytes")
    row = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": offset})
    rows = np.zeros(n, dtype=row)
    for fname, (arr, tzero), fmt in zip(names, fills, formats):
        if arr.dtype == np.bool_:
            rows[fname] = np.where(arr, ord("T"), ord("F")).astype(np.uint8)
        elif tzero is not None:
            rows[fname] = flip_sign_bit(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))).view(
                np.dtype(fmt.base).newbyteorder(">") if fmt.base.itemsize > 1 else np.uint8)
        else:
            rows[fname] = arr
    return cards + col_cards, rows


def _header_block(cards: Iterable[Card], user: Optional[Header], *, table: bool) -> bytes:
    lines: list[str] = []
    for c in cards:
        lines += format_card(c.key, c.value, c.comment)
    if user is not None:
        for c in user.cards:
            if c.key and _is_structural(c.key, table):
                continue
            lines += format_card(c.key, c.value, c.comment)
    lines.append("END".ljust(80))
    text = "".join(lines)
    text += " " * (-len(text) % BLOCK)
    return text.encode("ascii")


def _pad(nbytes: int, fill: bytes = b"\0") -> bytes:
    return fill * (-nbytes % BLOCK)


def write_hdus(path: Any, hdus: Sequence[Any], *, overwrite: bool = False) -> None:
    """Write `ImageData` / `TableData` items as one file; a table first gets an empty primary."""
    target = fspath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(f"{target} is a directory")
    if os.path.exists(target) and not overwrite:
        raise FitsFileExistsError(f"File '{target}' already exists. Use overwrite=True to overwrite.")
    items = list(hdus)
    if not items:
        raise ValueError("At least one writable HDU is required")
    if isinstance(items[0], TableData):
        items.insert(0, ImageData(np.empty((0,), np.uint8)))
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".torchfits-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            for i, item in enumerate(items):
                if isinstance(item, ImageData):
                    if item.array.size == 0 and item.array.ndim <= 1:
                        cards, data = encode_image(np.empty((0,), np.uint8), primary=i == 0)
                        cards = [c for c in cards if not c.key.startswith("NAXIS")]
                        cards.insert(2, Card("NAXIS", 0, "number of array dimensions"))
                        data = np.empty(0, np.uint8)
                    else:
                        cards, data = encode_image(item.array, primary=i == 0)
                    fh.write(_header_block(cards, item.header, table=False))
                else:
                    if i == 0:
                        raise ValueError("a table cannot be the primary HDU")
                    cards, data = encode_table(item.columns)
                    fh.write(_header_block(cards, item.header, table=True))
                raw = data.tobytes()
                fh.write(raw)
                fh.write(_pad(len(raw)))
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    invalidate(target)


def _to_items(data: Any, header: Optional[Header]) -> list[Any]:
    from .hdu import HDUList, TensorHDU

    if isinstance(data, HDUList):
        items: list[Any] = []
        for hdu in data:
            if isinstance(hdu, TensorHDU):
                items.append(ImageData(_as_numpy(hdu.to_tensor()), Header(hdu.header)))
            else:
                items.append(TableData(hdu.read(), Header(hdu.header)))
        return items
    if isinstance(data, np.ndarray) or is_tensor(data):
        return [ImageData(_as_numpy(data), header)]
    if isinstance(data, Mapping):
        if "data" in data:
            extra = set(data) - {"data", "header"}
            if extra:
                raise ValueError("HDU dictionary may contain only 'data' and 'header' keys")
            return [ImageData(_as_numpy(data["data"]), Header(data.get("header")) if data.get("header") is not None else header)]
        return [TableData(data, header)]
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError("At least one writable HDU is required")
        items = []
        for k, item in enumerate(data):
            h = header if k == 0 else None
            if isinstance(item, Mapping):
                items += _to_items(item, h)
            elif isinstance(item, np.ndarray) or is_tensor(item):
                items.append(ImageData(_as_numpy(item), h))
            elif is_tensor(getattr(item, "data", None)) or isinstance(getattr(item, "data", None), np.ndarray):
                items.append(ImageData(_as_numpy(item.data), Header(getattr(item, "header", None))))
            else:
                raise TypeError(f"Unsupported HDU item type: {type(item).__name__}")
        return items
    raise TypeError("Unsupported data type for FITS writing")


def write(path: Any, data: Any, header: Any = None, overwrite: bool = False,
          checksum: bool = False) -> None:
    """Write an image (array or tensor), a table (dict of columns) or a list of them.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; written atomically (temp file, fsync, rename).
    data : array, tensor, dict of columns, ``{"data", "header"}`` dict, list, or HDUList
        What to write. A table first gets an empty primary HDU.
    header : dict or Header, optional
        Extra cards for the first HDU written (structural keywords are ignored).
    overwrite : bool
        Replace an existing file.
    checksum : bool
        Not yet supported by this writer (raises NotImplementedError when true).
    """
    if checksum:
        raise NotImplementedError("checksum=True is not supported by this version of the writer")
    hdr = header if isinstance(header, Header) or header is None else Header(header)
    write_hdus(path, _to_items(data, hdr), overwrite=overwrite)

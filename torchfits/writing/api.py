"""Writing FITS: `write` dispatches images (arrays, tensors) and tables (dicts of arrays, Arrow,
pandas, Polars) to the HDU writers and writes them atomically (`torchfits._atomic`).

Table layout lives in `_table_plan` / `_table_write`, checksums in `checksum`, in-file edits in
`edit` and `_table_edit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from .atomic import Sink, atomic_output, check_target
from .._torch_adapter import is_tensor, tensor_to_numpy
from ..errors import FitsError, QuantizeError, UInt64WriteError
from ..fits.header import Card, Header, format_card

__all__ = ["write", "write_tensor", "write_hdus", "ImageData", "TableData", "encode_image", "encode_table",
           "flip_sign_bit", "FitsWriteError"]

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
                        "TFIELDS", "THEAP", "BSCALE", "BZERO", "BLANK", "END"})


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
    """A table HDU to write: columns (a dict of arrays, or any Arrow-like table or stream) and
    the user's extra header cards.

    ``schema`` holds per-column overrides (``format``, ``unit``, ``tnull``, ``tscal``,
    ``tzero``, ``dim``); ``table_type`` is ``"binary"`` or ``"ascii"``; ``quantize`` turns
    float columns into scaled 16-bit integers.
    """

    columns: Any
    header: Optional[Header] = None
    schema: Optional[Mapping[str, Any]] = None
    table_type: str = "binary"
    quantize: Any = None


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


def _image_cards(arr: np.ndarray, primary: bool) -> tuple[list[Card], Optional[int], int]:
    """Structural cards of an image HDU, its BZERO (None unless offset-binary) and BITPIX."""
    if arr.dtype == np.uint64:
        raise UInt64WriteError("uint64 images cannot be stored losslessly in FITS; convert to int64 or float64")
    if arr.dtype.kind == "V" or arr.dtype.newbyteorder("=") not in _IMAGE_TYPES:
        raise TypeError(f"Unsupported tensor dtype for a FITS image: {arr.dtype}")
    bitpix, bzero = _IMAGE_TYPES[arr.dtype.newbyteorder("=")]
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
    if bzero is not None:
        cards += [Card("BSCALE", 1), Card("BZERO", bzero)]
    return cards, bzero, bitpix


def _stored_image(native: np.ndarray, bzero: Optional[int], bitpix: int) -> np.ndarray:
    if bzero is not None:
        return flip_sign_bit(native)
    return native.astype(_STORED[bitpix])


def encode_image(array: Any, *, primary: bool) -> tuple[list[Card], np.ndarray]:
    """Structural cards and big-endian data for one image HDU."""
    arr = _as_numpy(array)
    cards, bzero, bitpix = _image_cards(arr, primary)
    native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    return cards, _stored_image(native, bzero, bitpix)


# Images are converted and written in slices this large: the swapped copy stays in cache and
# the peak extra memory is one slice, not a second copy of the image.
_IMAGE_CHUNK_BYTES = 1 << 22


def encode_table(columns: Mapping[str, Any]) -> tuple[list[Card], np.ndarray]:
    """Structural cards and row bytes of a binary table of fixed-width columns (no heap)."""
    import io

    from .table_plan import encode_rows
    from .table_write import plan_table, table_cards

    plan = plan_table(columns)
    batch = plan.columns or []
    heap = io.BytesIO()
    rows, heap_size = encode_rows(plan.plans, batch, heap, 0)
    if heap_size:
        raise ValueError("encode_table handles fixed-width columns only")
    fields = [p.field_dtype for p in plan.plans]
    offsets = np.concatenate([[0], np.cumsum([f.itemsize for f in fields])[:-1]]).astype(int)
    row = np.dtype({"names": [p.name for p in plan.plans], "formats": fields,
                    "offsets": [int(o) for o in offsets], "itemsize": rows.shape[1]})
    return table_cards(plan.plans, len(rows), 0), rows.reshape(-1).view(row)


def header_lines(cards: Iterable[Card], user: Optional[Header], *, table: bool,
                 checksum: bool = False) -> tuple[list[str], dict[str, int]]:
    """80-character lines of a header (END and padding excluded) and the line number of each
    writer-owned keyword, so streamed writes can patch NAXIS2/PCOUNT/TFORMn afterwards."""
    lines: list[str] = []
    where: dict[str, int] = {}
    for c in cards:
        where.setdefault(c.key, len(lines))
        lines += format_card(c.key, c.value, c.comment)
    if user is not None:
        long_strings = False
        for c in user.cards:
            if c.key and (_is_structural(c.key, table) or c.key in ("CHECKSUM", "DATASUM")):
                continue
            # The writer's own cards (column keywords from the data, EXTNAME from Arrow
            # metadata) win over the same keyword in the user's header; CONTINUE and LONGSTRN
            # are regenerated.
            if c.key in ("CONTINUE", "LONGSTRN") or c.key in where:
                continue
            formatted = format_card(c.key, c.value, c.comment)
            long_strings = long_strings or (len(formatted) > 1 and c.key not in ("HISTORY", "COMMENT", ""))
            lines += formatted
        if long_strings:
            # Announce the CONTINUE long-string convention (as CFITSIO does).
            lines += format_card("LONGSTRN", "OGIP 1.0", "The OGIP Long String Convention may be used.")
    if checksum:
        lines += format_card("CHECKSUM", "0000000000000000", "HDU checksum")
        lines += format_card("DATASUM", "0", "data unit checksum")
    return lines, where


def _header_block(cards: Iterable[Card], user: Optional[Header], *, table: bool,
                  checksum: bool = False) -> bytes:
    lines, _ = header_lines(cards, user, table=table, checksum=checksum)
    return _finish_header(lines)


def _finish_header(lines: list[str]) -> bytes:
    text = "".join(lines) + "END".ljust(80)
    text += " " * (-len(text) % BLOCK)
    return text.encode("ascii")


def _pad(nbytes: int, fill: bytes = b"\0") -> bytes:
    return fill * (-nbytes % BLOCK)


HduSpan = tuple  # (header_offset, data_offset, data_size)


def write_image_hdu(sink: Sink, array: np.ndarray, header: Optional[Header], *, primary: bool,
                    checksum: bool = False) -> HduSpan:
    """Write one image HDU (an empty one for a 0-size 1-D array) at the sink's position."""
    header_offset = sink.offset
    arr = _as_numpy(array)
    if arr.size == 0 and arr.ndim <= 1:
        cards, _, _ = _image_cards(np.empty((0,), np.uint8), primary)
        cards = [c for c in cards if not c.key.startswith("NAXIS")]
        cards.insert(2, Card("NAXIS", 0, "number of array dimensions"))
        sink.write(_header_block(cards, header, table=False, checksum=checksum))
        return header_offset, sink.offset, 0
    cards, bzero, bitpix = _image_cards(arr, primary)
    sink.write(_header_block(cards, header, table=False, checksum=checksum))
    data_offset = sink.offset
    flat = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("=")).reshape(-1)
    step = max(1, _IMAGE_CHUNK_BYTES // flat.itemsize)
    for start in range(0, flat.size, step):
        sink.write(_stored_image(flat[start:start + step], bzero, bitpix))
    sink.pad()
    return header_offset, data_offset, flat.nbytes


def _write_quantized(sink: Sink, item: Any, *, primary: bool, checksum: bool) -> HduSpan:
    header_offset = sink.offset
    cards, data = encode_image(item.codes, primary=primary)
    cards += [Card("BSCALE", float(item.scale)), Card("BZERO", float(item.zero))]
    if item.has_blank:
        cards.append(Card("BLANK", -32767))
    sink.write(_header_block(cards, item.header, table=False, checksum=checksum))
    data_offset = sink.offset
    sink.write(data.reshape(-1).view(np.uint8))
    sink.pad()
    return header_offset, data_offset, data.nbytes


def write_hdus(path: Any, hdus: Sequence[Any], *, overwrite: bool = False,
               checksum: bool = False) -> None:
    """Write `ImageData` / `TableData` items as one file; a table first gets an empty primary."""
    target = check_target(path, overwrite=overwrite)
    items = list(hdus)
    if not items:
        raise ValueError("At least one writable HDU is required")
    if isinstance(items[0], TableData):
        items.insert(0, ImageData(np.empty((0,), np.uint8)))
    with atomic_output(target) as sink:
        spans = []
        for i, item in enumerate(items):
            if type(item).__name__ == "QuantizedImage":
                spans.append(_write_quantized(sink, item, primary=i == 0, checksum=checksum))
            elif isinstance(item, ImageData):
                spans.append(write_image_hdu(sink, _as_numpy(item.array), item.header, primary=i == 0,
                                             checksum=checksum))
            else:
                if i == 0:
                    raise ValueError("a table cannot be the primary HDU")
                from .table_write import write_table_hdu

                spans.append(write_table_hdu(sink, item, checksum=checksum))
        if checksum:
            from .checksum import patch_file_checksums

            patch_file_checksums(sink.fh, spans)


def _is_table_like(data: Any) -> bool:
    module = type(data).__module__.split(".")[0]
    return module in ("pyarrow", "pandas", "polars", "astropy") or hasattr(data, "__arrow_c_stream__")


def _to_items(data: Any, header: Optional[Header]) -> list[Any]:
    from ..compat.hdulist import HDUList, TensorHDU

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
            return [ImageData(_as_numpy(inner), _as_header(own) if own is not None else header)]
        return [TableData(data, header)]
    if _is_table_like(data) and not isinstance(data, (list, tuple)):
        if type(data).__name__ == "HDUList":  # astropy HDUList: not supported here
            raise TypeError("Unsupported data type for FITS writing")
        return [TableData(data, header)]
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError("At least one writable HDU is required")
        items = []
        for k, item in enumerate(data):
            h = header if k == 0 else None
            if isinstance(item, (Mapping, ImageData, TableData)) or _is_table_like(item):
                items += _to_items(item, h)
            elif isinstance(item, np.ndarray) or is_tensor(item):
                items.append(ImageData(_as_numpy(item), h))
            elif is_tensor(getattr(item, "data", None)) or isinstance(getattr(item, "data", None), np.ndarray):
                items.append(ImageData(_as_numpy(item.data), _as_header(getattr(item, "header", None))))
            else:
                raise TypeError(f"Unsupported HDU item type: {type(item).__name__}")
        return items
    raise TypeError("Unsupported data type for FITS writing")


def _as_header(header: Any) -> Optional[Header]:
    if header is None or isinstance(header, Header):
        return header
    if type(header).__module__.startswith("astropy"):
        return Header.from_astropy(header)
    return Header(header)


class FitsWriteError(FitsError, RuntimeError, ValueError, TypeError):
    """A write failed; the message names the file (``Failed to write FITS file '<path>'``)."""


def write(path: Any, data: Any, header: Any = None, overwrite: bool = False,
          checksum: bool = False, compress: Any = False, quantize: Any = None) -> None:
    """Write images, tables or a list of them as one FITS file, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; written to a temporary file beside it, fsync'd, then renamed over it.
    data : array, tensor, table, ``{"data", "header"}`` dict, list of those, or HDUList
        NumPy arrays and tensors become image HDUs (unsigned types via BZERO, int8 via
        BZERO=-128). Dicts of columns, pyarrow Tables / RecordBatches / RecordBatchReaders
        (streamed batch by batch), pandas and Polars DataFrames become binary tables; a table
        first gets an empty primary HDU.
    header : dict or Header, optional
        Extra cards for the first HDU written (structural keywords are ignored); values may be
        ``(value, comment)`` tuples; HISTORY/COMMENT become commentary cards.
    overwrite : bool
        Replace an existing file (else ``FileExistsError``).
    checksum : bool
        Write DATASUM and CHECKSUM on every HDU.
    compress : bool or str
        Tile-compress the images (``True`` → RICE_1, or a codec name); they are written as an
        empty primary plus compressed image HDUs. Tables are not compressed.
    quantize : None, bool, str or dict
        Quantise float images to 16-bit integers with BSCALE/BZERO (see the writing guide).

    Raises
    ------
    FileExistsError
        The file exists and ``overwrite`` is false.
    UInt64WriteError, QuantizeError
        uint64 images / dict columns; quantisation of non-float data.
    RuntimeError
        Any other failure, as ``Failed to write FITS file '<path>': <reason>``; the original file
        (if any) is untouched.
    """
    target = check_target(path, overwrite=overwrite)
    try:
        items = _to_items(data, _as_header(header))
        if compress is not False and compress is not None:
            _write_compressed(target, items, compress=compress, quantize=quantize,
                              overwrite=overwrite, checksum=checksum)
            return
        if quantize not in (None, False):
            from .quantize_linear import quantize_items

            items = quantize_items(items, quantize)
        write_hdus(target, items, overwrite=overwrite, checksum=checksum)
    except (UInt64WriteError, QuantizeError, FileExistsError, IsADirectoryError, KeyboardInterrupt):
        raise
    except (ValueError, TypeError, OSError) as exc:
        if isinstance(exc, FitsError) and not isinstance(exc, (ValueError, TypeError)):
            raise
        raise FitsWriteError(f"Failed to write FITS file '{target}': {exc}") from exc


def _write_compressed(target: str, items: list, *, compress: Any, quantize: Any,
                      overwrite: bool, checksum: bool) -> None:
    """Hand images to the tile-compression writer (`torchfits._compress_write`)."""
    from .compress_write import normalize_compress, write_compressed

    normalize_compress(compress)  # NOCOMPRESS, ints and unknown names are refused here
    images = [it for it in items if isinstance(it, ImageData)]
    if len(images) != len(items):
        raise ValueError("compress= applies to images only; write tables without compress")
    arrays = [it.array for it in images if not (it.array.size == 0 and it.array.ndim <= 1)]
    headers = [it.header for it in images if not (it.array.size == 0 and it.array.ndim <= 1)]
    write_compressed(target, arrays, headers, overwrite=overwrite, compress=compress,
                     quantize=quantize, checksum=checksum)


def write_tensor(path: Any, tensor: Any, header: Any = None, overwrite: bool = False,
                 compress: Any = False, quantize: Any = None, checksum: bool = False) -> None:
    """`write` for a ``torch.Tensor`` only (``TypeError`` for anything else)."""
    if not is_tensor(tensor):
        raise TypeError("tensor must be a torch.Tensor")
    write(path, tensor, header=header, overwrite=overwrite, checksum=checksum,
          compress=compress, quantize=quantize)

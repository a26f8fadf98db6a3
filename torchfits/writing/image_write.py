"""Image HDUs: structural cards from the array's dtype (unsigned types via BZERO, int8 via
BZERO=-128), big-endian storage written in slices, and quantised images with BSCALE/BZERO."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UInt64WriteError
from ..fits.header import Card, Header
from ..fits.layout import flip_sign_bit
from .atomic import Sink
from .cards import header_block
from .items import as_numpy

__all__ = ["encode_image", "image_cards", "write_image_hdu", "write_quantized_image_hdu", "HduSpan"]

# dtype → (BITPIX, BZERO or None, flip sign bit when storing)
_IMAGE_TYPES = {
    np.dtype(np.uint8): (8, None), np.dtype(np.int8): (8, -128),
    np.dtype(np.int16): (16, None), np.dtype(np.uint16): (16, 32768),
    np.dtype(np.int32): (32, None), np.dtype(np.uint32): (32, 2147483648),
    np.dtype(np.int64): (64, None),
    np.dtype(np.float32): (-32, None), np.dtype(np.float64): (-64, None),
}
_STORED = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}


def image_cards(arr: np.ndarray, primary: bool) -> tuple[list[Card], int | None, int]:
    """Structural cards of an image HDU, its BZERO (None unless offset-binary) and BITPIX."""
    if arr.dtype == np.uint64:
        raise UInt64WriteError(
            "a uint64 image is not written: torchfits keeps the 1.x rule and does not write the "
            "BITPIX=64 + BZERO=2**63 convention (fitsio cannot read back values of 2**63 and "
            "above); convert it with .astype(np.int64) when every value is below 2**63, or "
            ".astype(np.float64) (exact up to 2**53)")
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


def _stored_image(native: np.ndarray, bzero: int | None, bitpix: int) -> np.ndarray:
    if bzero is not None:
        return flip_sign_bit(native)
    return native.astype(_STORED[bitpix])


def encode_image(array: Any, *, primary: bool) -> tuple[list[Card], np.ndarray]:
    """Structural cards and big-endian data for one image HDU."""
    arr = as_numpy(array)
    cards, bzero, bitpix = image_cards(arr, primary)
    native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    return cards, _stored_image(native, bzero, bitpix)


# Images are converted and written in slices this large: the swapped copy stays in cache and
# the peak extra memory is one slice, not a second copy of the image.
_IMAGE_CHUNK_BYTES = 1 << 22


HduSpan = tuple  # (header_offset, data_offset, data_size)


def write_image_hdu(sink: Sink, array: np.ndarray, header: Header | None, *, primary: bool,
                    checksum: bool = False) -> HduSpan:
    """Write one image HDU (an empty one for a 0-size 1-D array) at the sink's position."""
    header_offset = sink.offset
    arr = as_numpy(array)
    if arr.size == 0 and arr.ndim <= 1:
        cards, _, _ = image_cards(np.empty((0,), np.uint8), primary)
        cards = [c for c in cards if not c.key.startswith("NAXIS")]
        cards.insert(2, Card("NAXIS", 0, "number of array dimensions"))
        sink.write(header_block(cards, header, table=False, checksum=checksum))
        return header_offset, sink.offset, 0
    cards, bzero, bitpix = image_cards(arr, primary)
    sink.write(header_block(cards, header, table=False, checksum=checksum))
    data_offset = sink.offset
    flat = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("=")).reshape(-1)
    step = max(1, _IMAGE_CHUNK_BYTES // flat.itemsize)
    for start in range(0, flat.size, step):
        sink.write(_stored_image(flat[start:start + step], bzero, bitpix))
    sink.pad()
    return header_offset, data_offset, flat.nbytes


def write_quantized_image_hdu(sink: Sink, item: Any, *, primary: bool, checksum: bool) -> HduSpan:
    header_offset = sink.offset
    cards, data = encode_image(item.codes, primary=primary)
    cards += [Card("BSCALE", float(item.scale)), Card("BZERO", float(item.zero))]
    if item.has_blank:
        cards.append(Card("BLANK", -32767))
    sink.write(header_block(cards, item.header, table=False, checksum=checksum))
    data_offset = sink.offset
    sink.write(data.reshape(-1).view(np.uint8))
    sink.pad()
    return header_offset, data_offset, data.nbytes

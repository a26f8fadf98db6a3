"""Per-process open-once image readers and the pixel → tensor step of every dataset.

Readers are keyed by process id: a forked DataLoader worker opens its own maps instead of
using the parent's, and nothing here is pickled (datasets carry paths and HDUs only).
With ``scale_on_device`` the raw big-endian bytes travel to the device and are swapped and
scaled there with torch operations.
"""
from __future__ import annotations

import math
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Optional

import numpy as np
import torch

from .._kernels import _image
from .._torch_adapter import numpy_decode_dtype, torch_dtype
from ..errors import FitsFileNotFoundError
from ..fits.hdu_index import HduIndex, get_index
from ..fits.source import ByteSource, stat_key
from ..image.plain import Image

__all__ = ["image_reader", "cutout_reader", "read_pixels", "device_decode", "validity_mask", "clear_readers"]

_CAPACITY = 128
_lock = threading.Lock()
_readers: "OrderedDict[tuple, tuple[Image, tuple]]" = OrderedDict()


_SMALL_FILE = 1 << 20  # read whole below this: one read() beats setting up and tearing down a map


class _FileBytes(ByteSource):
    """A small file read whole into memory (no map to set up and tear down per file)."""

    supports_mmap = True  # buffer() is available (it is this process's own copy)

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        data = bytearray(size)
        try:
            with open(path, "rb", buffering=0) as fh:
                got = fh.readinto(data)
        except OSError as exc:
            raise FitsFileNotFoundError(f"Could not open FITS file: {path} ({exc.strerror})") from None
        self.size = got or 0
        self._view = memoryview(data)[:self.size].toreadonly()

    def read(self, offset: int, size: int) -> bytes:
        offset = max(0, offset)
        return bytes(self._view[offset:offset + max(0, size)])

    def buffer(self) -> memoryview:
        return self._view


def image_reader(path: str, hdu: Any) -> Image:
    """The open `Image` of (path, HDU) in this process (an LRU of recently used ones).

    Each call checks the file's identity (one stat), so a replaced file is reopened. Files under
    1 MiB are read whole (stamps: one read per file per epoch); larger ones go through the
    shared HDU index cache and its file map."""
    key = (os.getpid(), path, hdu)
    version = stat_key(path)
    with _lock:
        cached = _readers.get(key)
        if cached is not None and cached[1] == version:
            _readers.move_to_end(key)
            return cached[0]
    if version[2] <= _SMALL_FILE:
        index = HduIndex(path, version, _FileBytes(path, version[2]))  # type: ignore[arg-type]
    else:
        index = get_index(path)
    img = Image(path, hdu, index=index)
    with _lock:
        _readers[key] = (img, version)
        while len(_readers) > _CAPACITY:
            _readers.popitem(last=False)
    return img


def cutout_reader(path: str, hdu: Any) -> Any:
    """The C cutout reader of an uncompressed image HDU (None where cutouts take the general
    path: compressed or truncated files, uint64 results)."""
    img = image_reader(path, hdu)
    if getattr(img, "is_compressed", False) or img.dtype == np.uint64:
        return None
    return img._cutout_reader()


def clear_readers() -> None:
    """Forget every open reader (tests; after files were rewritten in place)."""
    with _lock:
        _readers.clear()


def _box_key(img: Image, lead: tuple, box: Optional[tuple[int, int, int, int]]) -> Any:
    """NumPy key for leading-axis selection ``lead`` and a clamped ``(x1, y1, x2, y2)`` box."""
    if box is None:
        return lead if lead else None
    h, w = img.shape[-2:]
    x1, y1, x2, y2 = box
    x1, x2 = min(max(x1, 0), w), min(max(x2, 0), w)
    y1, y2 = min(max(y1, 0), h), min(max(y2, 0), h)
    return lead + (Ellipsis, slice(y1, max(y1, y2)), slice(x1, max(x1, x2)))


def read_pixels(path: str, hdu: Any, *, dtype: Any = None, device: str = "cpu",
                lead: tuple = (), box: Optional[tuple[int, int, int, int]] = None,
                scale_on_device: bool = False) -> torch.Tensor:
    """One image HDU (or leading-axis selection ``lead`` and cutout ``box`` of it) as a tensor."""
    img = image_reader(path, hdu)
    if box is not None and not lead and not scale_on_device and dtype is None:
        # The common stamp: one C call clamps, allocates and decodes every leading plane.
        reader = cutout_reader(path, hdu)
        if reader is not None:
            t = torch.from_numpy(reader.cutout(*box))
            return t if device == "cpu" else t.to(device, non_blocking=True)
    key = _box_key(img, lead, box)
    if scale_on_device and not getattr(img, "is_compressed", False):
        return device_decode(img, key, device, dtype)
    tdt = torch_dtype(dtype)
    if key is None:
        arr = img.read(dtype=None if tdt is None else numpy_decode_dtype(tdt))
    else:
        arr = img[key]
        if tdt is not None:
            arr = arr.astype(numpy_decode_dtype(tdt), copy=False)
    if not arr.flags.writeable:
        arr = arr.copy()  # BITPIX=8 reads view the file map; tensors must own their memory
    t = torch.from_numpy(np.ascontiguousarray(arr)) if arr.dtype != np.uint64 else \
        torch.from_numpy(arr.astype(np.float64))
    if tdt is not None and t.dtype != tdt:
        t = t.to(tdt)
    return t if device == "cpu" else t.to(device, non_blocking=True)


# -- the device path -------------------------------------------------------------------------------
_TORCH_STORAGE = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64,
                  -32: torch.float32, -64: torch.float64}
_TORCH_FLIPPED = {8: torch.int8, 16: torch.uint16, 32: torch.uint32, 64: torch.uint64}


def _raw_bytes(img: Image, key: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """The stored big-endian bytes the region covers, copied once on the host (no swap), and
    the region's shape."""
    plan = img.plan
    entry = img._entry
    isz = plan.storage_dtype.itemsize
    n = math.prod(plan.shape)
    img._index.check_data(entry, n * isz)
    flat = np.frombuffer(img._index.source.buffer(), np.uint8, n * isz, entry.data_offset)
    if key is None:
        return flat.copy(), plan.shape
    # Index the pixels as (..., W, itemsize) bytes: a region of pixels is a region of bytes.
    view = flat.reshape(plan.shape + (isz,))
    key = key if isinstance(key, tuple) else (key,)
    part = view[key + ((slice(None),) if Ellipsis in key else (Ellipsis, slice(None)))]
    return np.ascontiguousarray(part), part.shape[:-1]


def device_decode(img: Image, key: Any, device: str, dtype: Any = None) -> torch.Tensor:
    """Decode on ``device``: copy the raw big-endian bytes there (pinned, ``non_blocking`` on
    CUDA), then swap, flip the sign bit (unsigned conventions) and apply BSCALE/BZERO/BLANK with
    torch operations. Gives the same values as the host kernel."""
    plan = img.plan
    isz = plan.storage_dtype.itemsize
    raw, shape = _raw_bytes(img, key)
    host = torch.from_numpy(raw)
    if device.startswith("cuda") and torch.cuda.is_available():
        host = host.pin_memory()
    b = host.to(device, non_blocking=True).view(-1, isz)
    if plan.mode == _image.MODE_FLIP:
        b[:, 0] ^= 0x80  # BZERO = 2^(n-1): flipping the top bit of the big-endian word
    if isz > 1 and sys.byteorder == "little":
        b = b.flip(-1)
    storage = _TORCH_FLIPPED[plan.bitpix] if plan.mode == _image.MODE_FLIP else _TORCH_STORAGE[plan.bitpix]
    x = b.contiguous().view(storage).reshape(shape)
    if plan.mode == _image.MODE_SCALE:
        # Scale in float64 like the host kernel (then round to float32 where it does): same bits.
        wide = torch.float32 if device.startswith("mps") else torch.float64
        v = x.to(wide) * plan.bscale + plan.bzero
        if plan.blank is not None:
            v = torch.where(x == plan.blank, torch.full_like(v, float("nan")), v)
        x = v.to(_TORCH_STORAGE[-32] if plan.dtype == np.float32 else _TORCH_STORAGE[-64])
    elif x.dtype == torch.uint64:
        x = x.to(torch.float64)
    tdt = torch_dtype(dtype)
    return x if tdt is None or x.dtype == tdt else x.to(tdt)


def validity_mask(mask: torch.Tensor, *, is_dq: bool, bad_bits: Any) -> torch.Tensor:
    """``True`` = valid. Plain masks: ``mask.bool()``. Data-quality bitfields (0 = good):
    invalid where any of ``bad_bits`` (bit positions, an int or a sequence) is set, or where any
    bit is set when ``bad_bits`` is None."""
    if not is_dq:
        return mask.bool()
    if mask.is_floating_point():
        mask = mask.to(torch.int64)
    if bad_bits is None:
        return mask == 0
    bits = [bad_bits] if isinstance(bad_bits, (int, np.integer)) else list(bad_bits)
    fatal = 0
    for bit in bits:
        if isinstance(bit, bool) or not 0 <= int(bit) < 63:
            raise ValueError(f"bad_bits are bit positions 0..62, got {bit!r}")
        fatal |= 1 << int(bit)
    return (mask.to(torch.int64) & fatal) == 0

"""Per-process open-once image readers and the pixel → tensor step of every dataset.

Readers are per process: a forked DataLoader worker starts with none (the byte sources' rule,
`per_process`) and opens its own, and nothing here is pickled (datasets carry paths and HDUs
only).
With ``scale_on_device`` the raw big-endian bytes travel to the device and are swapped and
scaled there with torch operations.
"""
from __future__ import annotations

import math
import os
import sys
import threading
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import torch

from .._kernels import _header, _image
from .._torch_adapter import numpy_decode_dtype, torch_dtype
from ..fits.hdu_index import HduIndex, get_index
from ..fits.image_plan import plan_image
from ..fits.paths import is_url
from ..fits.sources import open_source
from ..fits.sources.base import faults_seen
from ..fits.sources.local import OPEN_READ, pread, stat_key
from ..fits.sources.resolve import per_process
from ..image.plain import Image
from .remote import local_copy
from .tiled import clear_layouts, open_stamp

__all__ = ["image_reader", "cutout_reader", "batch_cutouts", "batch_images", "to_tensor_batch",
           "read_pixels",
           "device_decode", "validity_mask", "clear_readers"]

_CAPACITY = 128
_lock = threading.Lock()
_readers: OrderedDict[tuple, tuple[Image, tuple]] = OrderedDict()


_SMALL_FILE = 1 << 20  # read whole below this: one read() beats setting up and tearing down a map


def _options_key(storage_options: dict | None) -> str:
    return repr(sorted((k, repr(v)) for k, v in (storage_options or {}).items()))


def is_remote(path: str) -> bool:
    """Whether ``path`` is an fsspec URL, read through the remote byte sources (the dataset's
    ``storage_options`` apply to URLs only)."""
    return bool(is_url(path))


def image_reader(path: str, hdu: Any, storage_options: dict | None = None) -> Image:
    """The open `Image` of (path, HDU) in this process (an LRU of recently used ones).

    Each call checks the file's identity (one stat), so a replaced file is reopened. Files under
    1 MiB are read whole (stamps: one read per file per epoch); larger ones go through the
    shared HDU index cache and its file map. URLs (with ``storage_options``) go through the
    remote byte sources: ranged reads, the index revalidated like ``torchfits.read`` does."""
    if is_remote(path):
        copy = local_copy(path, storage_options)  # a whole-file copy made by a prefetch
        if copy is not None:
            return image_reader(copy, hdu)
        key: tuple = (path, hdu, _options_key(storage_options))
        index = get_index(path, storage_options)
        with _lock:
            hit = _readers.get(key)
            if hit is not None and hit[0]._index is index:
                _readers.move_to_end(key)
                return hit[0]
        img = Image(path, hdu, index=index)
        _remember(key, img, None)
        return img
    key = (path, hdu)
    version = stat_key(path)
    with _lock:
        cached = _readers.get(key)
        if cached is not None and cached[1] == version:
            _readers.move_to_end(key)
            return cached[0]
    if version[2] <= _SMALL_FILE:
        src = open_source(path, in_memory=True)
        index = HduIndex(src.path, src.version, src)
        version = src.version or version  # the version it read
    else:
        index = get_index(path)
    img = Image(path, hdu, index=index)
    _remember(key, img, version)
    return img


def _remember(key: tuple, img: Image, version: Any) -> None:
    with _lock:
        _readers[key] = (img, version)
        while len(_readers) > _CAPACITY:
            _readers.popitem(last=False)


def cutout_reader(path: str, hdu: Any, storage_options: dict | None = None) -> Any:
    """The C cutout reader of an uncompressed image HDU (None where cutouts take the general
    path: compressed or truncated files, uint64 results). Over a remote file it reads what
    was fetched: call ``Image.prefetch_cutout`` first."""
    return _reader_of(image_reader(path, hdu, storage_options))


def _reader_of(img: Image) -> Any:
    if getattr(img, "is_compressed", False) or img.dtype == np.uint64:
        return None
    return img._cutout_reader()


def batch_cutouts(keys: list, key_ids: np.ndarray, boxes: np.ndarray,
                  storage_options: dict | None = None) -> np.ndarray | None:
    """Many boxes decoded into one ``(N, *lead, h, w)`` array, one kernel call per file with the
    GIL released, or None where the batch must take the per-item path: boxes of different
    sizes or cut by an image edge (the edge clamps them), compressed or truncated images,
    uint64 results, files whose leading axes or types differ.

    ``keys`` are the distinct ``(path, hdu)`` pairs, ``key_ids`` the pair of each box and
    ``boxes`` an ``(N, 4)`` int64 array of ``(x1, y1, x2, y2)``. Every value equals what
    `read_pixels` gives for the same box.
    """
    n = len(boxes)
    if n == 0:
        return None
    widths, heights = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    w, h = int(widths[0]), int(heights[0])
    if h <= 0 or w <= 0 or (widths != w).any() or (heights != h).any():
        return None
    jobs = []
    lead, dtype = None, None
    for k in np.unique(key_ids).tolist():
        path, hdu = keys[k]
        img = image_reader(path, hdu, storage_options)
        reader = _reader_of(img)
        if reader is None or img.ndim < 2:
            return None
        height, width = img.shape[-2:]
        slots = np.flatnonzero(key_ids == k)
        xs, ys = boxes[slots, 0], boxes[slots, 1]
        if xs.min() < 0 or ys.min() < 0 or xs.max() + w > width or ys.max() + h > height:
            return None
        if lead is None:
            lead, dtype = img.shape[:-2], img.dtype
        elif img.shape[:-2] != lead or img.dtype != dtype:
            return None
        jobs.append((img, reader, np.ascontiguousarray(np.stack([slots, xs, ys], axis=1),
                                                       dtype=np.int64)))
    out = np.empty((n,) + tuple(lead or ()) + (h, w), dtype)
    for img, reader, rows in jobs:
        if img._index.lazy:  # a remote image: fetch the rows the boxes cover first
            for _, a, b in rows.tolist():
                img.prefetch_cutout(a, b, a + w, b + h)
        _image.cutout_batch(reader, rows, h, w, out)
    if faults_seen():
        for img, _, _ in jobs:
            img._index.source.check()
    return out


# -- small files: one read, structural keywords, decode into the batch's slot -----------------------
_BLOCK = 2880
_FIRST_READ = 64 << 10
_SCALING = ("BSCALE", "BZERO", "BLANK")
_PLAIN = frozenset({"SIMPLE", "BITPIX", "NAXIS", "__ncards__", *_SCALING}
                   | {f"NAXIS{k}" for k in range(1, 33)})
_NAXIS_KEYS = tuple(f"NAXIS{k}" for k in range(1, 33))
_NATIVE: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
           64: np.dtype(np.int64), -32: np.dtype(np.float32), -64: np.dtype(np.float64)}

# (bitpix, mode, result dtype, C-order shape, bscale, bzero, blank or None)
_Plan = tuple[int, int, np.dtype, tuple[int, ...], float, float, Optional[int]]


def _primary_plain(path: str) -> tuple[_Plan, bytes, int] | None:
    """(plan, file bytes, data offset) of a plain primary image read with one ``pread`` (two
    for long headers or big files), or None for anything the general reader must judge:
    random groups, extensions' keywords, repeated or non-numeric scaling keywords, headers
    that are not printable, files cut short, empty or uint64 images."""
    try:
        fd = os.open(path, OPEN_READ)
    except OSError:
        return None  # the general path raises the right error
    try:
        # 64 KiB holds a stamp whole; below malloc's mmap threshold it costs no extra syscalls.
        buf = pread(fd, _FIRST_READ, 0)
        size = len(buf) if len(buf) < _FIRST_READ else os.fstat(fd).st_size
        end = _header.find_header_end(buf, 0, len(buf))
        if end < 0 or not _header.header_is_printable(buf, 0, end):
            return None
        found = _header.scan_structural(buf, 0, end)
        if found.get("SIMPLE") is not True or not _PLAIN.issuperset(found):
            return None
        bitpix, naxis = found.get("BITPIX"), found.get("NAXIS")
        if type(bitpix) is not int or bitpix not in _NATIVE or type(naxis) is not int \
                or not 1 <= naxis <= 32:
            return None
        naxes = [found.get(k) for k in _NAXIS_KEYS[:naxis]]
        for n in naxes:
            if type(n) is not int or n <= 0:
                return None
        shape = tuple(reversed(naxes))
        if "BSCALE" in found or "BZERO" in found or "BLANK" in found:
            for key in _SCALING:
                # Once, with a number: repeats and garbled values follow the general reader.
                if key in found and (type(found[key]) not in (int, float)
                                     or buf.count(key.encode(), 0, end) != 1):
                    return None
            entry = SimpleNamespace(bitpix=bitpix, naxes=tuple(naxes), shape=shape)
            p = plan_image(entry, found)  # type: ignore[arg-type]
            if p.dtype == np.uint64:
                return None
            plan: _Plan = (bitpix, p.mode, p.dtype, shape, p.bscale, p.bzero, p.blank)
        else:
            plan = (bitpix, _image.MODE_RAW, _NATIVE[bitpix], shape, 1.0, 0.0, None)
        nbytes = math.prod(shape) * (abs(bitpix) // 8)
        if size < end + nbytes:
            return None
        if len(buf) < end + nbytes:
            buf = pread(fd, nbytes, end)
            end = 0
            if len(buf) < nbytes:
                return None
        return plan, buf, end
    finally:
        os.close(fd)


def batch_images(paths: list[str], hdu: Any,
                 storage_options: dict | None = None) -> np.ndarray | None:
    """Whole images of many files decoded into one ``(N, *shape)`` array, or None where the
    batch takes the per-item path (shapes or types differ between files).

    Plain uncompressed primary images (``hdu=0``, local files) are read with one ``pread``,
    their structural keywords scanned by the C card scanner and their pixels decoded straight
    into the batch's slot; so are small tile-compressed images (an extension given by number:
    `open_stamp`, the tiles decoded on this thread); every other file goes through its
    open-once `Image`. Values equal
    `read_pixels` for every file.
    """
    out: np.ndarray | None = None
    fast = hdu == 0 and not isinstance(hdu, bool)
    start: tuple[int, ...] = ()
    step: tuple[int, ...] = ()
    for slot, path in enumerate(paths):
        local = "://" not in path and not is_remote(path)
        got = _primary_plain(path) if fast and local else None
        stamp = open_stamp(path, hdu, image_reader) if not fast and local else None
        if stamp is not None:
            if out is None:
                out = np.empty((len(paths),) + stamp.shape, stamp.dtype)
            elif out.shape[1:] != stamp.shape or out.dtype != stamp.dtype:
                return None
            stamp.decode_into(out[slot])
            continue
        if got is None:
            arr = image_reader(path, hdu, storage_options).read()
            if out is None:
                out = np.empty((len(paths),) + arr.shape, arr.dtype)
            elif out.shape[1:] != arr.shape or out.dtype != arr.dtype:
                return None
            out[slot] = arr
            continue
        (bitpix, mode, dtype, shape, bscale, bzero, blank), buf, offset = got
        if out is None:
            out = np.empty((len(paths),) + shape, dtype)
        elif out.shape[1:] != shape or out.dtype != dtype:
            return None
        if len(start) != len(shape):
            start, step = (0,) * len(shape), (1,) * len(shape)
        _image.decode_region(buf, offset, out[slot], bitpix, mode, shape, start, step, shape,
                             bscale, bzero, blank is not None, blank if blank is not None else 0)
    return out


def to_tensor_batch(arr: np.ndarray, dtype: Any, device: str) -> torch.Tensor:
    """A decoded batch as a tensor of ``dtype`` on ``device``: the same conversions
    `read_pixels` applies to each item, applied once to the whole batch."""
    tdt = torch_dtype(dtype)
    if tdt is not None:
        arr = arr.astype(numpy_decode_dtype(tdt), copy=False)
    t = torch.from_numpy(arr) if arr.dtype != np.uint64 else torch.from_numpy(arr.astype(np.float64))
    if tdt is not None and t.dtype != tdt:
        t = t.to(tdt)
    return t if device == "cpu" else t.to(device, non_blocking=True)


def clear_readers() -> None:
    """Forget every open reader and what the batch path learnt of the files (tests; after files
    were rewritten in place)."""
    with _lock:
        _readers.clear()
    clear_layouts()


@per_process
def _new_process() -> None:
    """A forked child starts with no readers (a new lock: a parent thread may have held the old
    one across the fork)."""
    global _lock
    _lock = threading.Lock()
    _readers.clear()


def _box_key(img: Image, lead: tuple, box: tuple[int, int, int, int] | None) -> Any:
    """NumPy key for leading-axis selection ``lead`` and a clamped ``(x1, y1, x2, y2)`` box."""
    if box is None:
        return lead if lead else None
    h, w = img.shape[-2:]
    x1, y1, x2, y2 = box
    x1, x2 = min(max(x1, 0), w), min(max(x2, 0), w)
    y1, y2 = min(max(y1, 0), h), min(max(y2, 0), h)
    return lead + (Ellipsis, slice(y1, max(y1, y2)), slice(x1, max(x1, x2)))


def read_pixels(path: str, hdu: Any, *, dtype: Any = None, device: str = "cpu",
                lead: tuple = (), box: tuple[int, int, int, int] | None = None,
                scale_on_device: bool = False,
                storage_options: dict | None = None) -> torch.Tensor:
    """One image HDU (or leading-axis selection ``lead`` and cutout ``box`` of it) as a tensor."""
    img = image_reader(path, hdu, storage_options)
    if box is not None and not lead and not scale_on_device and dtype is None \
            and not img._index.lazy:
        # The common stamp: one C call clamps, allocates and decodes every leading plane.
        reader = _reader_of(img)
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

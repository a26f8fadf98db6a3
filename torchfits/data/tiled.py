"""Tile-compressed stamps for the batch path: one small file read whole, its headers scanned by
the C card scanner, the tile layout taken from a per-process cache keyed by the cards that
decide it, and the tiles decoded on the calling thread straight into the batch's slot.

Files that share their compression cards (ZCMPTYPE, ZBITPIX, ZNAXISn, ZTILEn, ZNAMEn/ZVALn, the
column descriptions, BSCALE/BZERO/BLANK...) share one layout: the first of them is opened the
general way (a `CompressedImage`) and its layout and plan are kept; the rest
cost a ``pread``, a card scan and the codec's many-tile kernel. Anything the scan does not
judge exactly (long or odd headers, random groups, remote files, truncated data) returns None,
and the caller reads the file the general way, which words the error.
"""
from __future__ import annotations

import math
import os
import stat
import threading
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from .._kernels import _bintable, _header
from ..errors import FitsError
from ..fits.hdu_index import data_unit
from ..fits.image_plan import ImagePlan
from ..fits.sources.local import OPEN_READ, pread
from ..fits.sources.resolve import per_process
from ..fits.tile_layout import TileLayout
from ..image.codec_registry import TILE_OK, Codec, lookup
from ..image.compressed import convert_tile, tile_decoder

__all__ = ["CompressedStamp", "open_stamp", "clear_layouts"]

_BLOCK = 2880
_SMALL_FILE = 1 << 20  # larger files go through the general reader and its map
_MAX_DECODED = 256 << 20  # tile_layout's floor for the size check against the file
# Keywords of the HDUs before the target whose data size the scan works out itself.
_BEFORE = frozenset({"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "PCOUNT", "GCOUNT", "EXTNAME",
                     "EXTVER", "TFIELDS", "THEAP", "BSCALE", "BZERO", "BLANK", "__ncards__"})
# Cards of the compressed HDU that decide its layout and plan but differ between files that
# share one: the heap size and the checksums.
_PER_FILE = frozenset({b"PCOUNT  ", b"CHECKSUM", b"DATASUM ", b"ZHECKSUM", b"ZDATASUM"})
_PER_FILE_EQ = tuple(k + b"=" for k in sorted(_PER_FILE))
_DECIDING = frozenset({b"XTENSION", b"BITPIX  ", b"NAXIS   ", b"NAXIS1  ", b"NAXIS2  ", b"GCOUNT  ",
                       b"BSCALE  ", b"BZERO   ", b"BLANK   ",
                       b"HIERARCH", b"CONTINUE", b"EXTEND  ", b"SIMPLE  "})
_CAPACITY = 128
_FILES = 1 << 16  # files whose layout and offsets are remembered (per file version)
_MISSING: Any = object()
_GO = np.zeros(1, np.uint8)  # the kernels' stop flag, never raised here (one call, no siblings)
_STORAGE: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
            64: np.dtype(np.int64), -32: np.dtype(np.float32), -64: np.dtype(np.float64)}


class _Known:
    """What files of one layout share: the layout, the plan, the tiles' sizes and places, and
    for layouts the codec's many-tile kernel decodes alone (no per-tile scale or blank columns,
    no quantisation) what it needs."""

    __slots__ = ("layout", "plan", "npix", "dest", "ks", "codec", "storage", "desc", "desc_at",
                 "itemsize", "ncols")
    storage: np.dtype
    desc: np.dtype
    desc_at: int
    itemsize: int
    ncols: np.ndarray | None

    def __init__(self, layout: TileLayout, plan: ImagePlan) -> None:
        self.layout, self.plan = layout, plan
        per_axis = [np.minimum(t, n - np.arange(g) * t)
                    for t, n, g in zip(layout.tile, layout.shape, layout.grid)]
        npix = per_axis[0].astype(np.int64)
        for extent in per_axis[1:]:
            npix = np.multiply.outer(npix, extent).reshape(-1)
        self.npix = np.ascontiguousarray(npix, np.int64)
        self.dest = np.cumsum(self.npix) - self.npix
        self.ks = np.arange(len(self.npix), dtype=np.int64)
        zb = layout.zbitpix
        self.storage = _STORAGE[zb]
        self.codec: Codec | None = None
        cls = lookup(layout.zcmptype)
        try:
            codec = cls.from_zparams(layout.params, zb) if cls is not None else None
        except (TypeError, ValueError, OverflowError):
            codec = None  # the general decoder words the error
        col = layout.columns.get("COMPRESSED_DATA")
        if codec is None or col is None or not codec.has_many or layout.scalars \
                or layout.quantize is not None or layout.zblank is not None \
                or zb > 0 and (layout.zscale is not None or layout.zzero is not None) \
                or codec.many_itemsize not in (None, 4 if zb < 0 else self.storage.itemsize) \
                or codec.tile_ndim == 2 and any(t != 1 for t in layout.tile[:-2]):
            return
        self.codec = codec
        self.desc = np.dtype(">i4" if col.descriptor == "P" else ">i8")
        self.desc_at = col.offset
        self.itemsize = col.itemsize
        self.ncols = None
        if codec.tile_ndim == 2:
            width = layout.tile[-1]
            self.ncols = np.minimum(width, layout.shape[-1] - (self.ks % layout.grid[-1]) * width)


_lock = threading.Lock()
# (hdu, `_header_key`) and (hdu, `_layout_key`) → the layout's `_Known`, or None for a layout
# the general reader takes whole (tiles that are not runs of the image, huge images).
_layouts: dict[tuple, _Known | None] = {}
# (path, hdu) → (file version, `_Known`, data offset, heap offset, heap size) of the files read,
# or (file version, None) for those the batch path leaves to the general reader.
_files: dict[tuple, tuple] = {}


def clear_layouts() -> None:
    """Forget the cached layouts and the files scanned (`clear_readers` calls it)."""
    with _lock:
        _layouts.clear()
        _files.clear()


@per_process
def _new_process() -> None:
    """A forked child keeps what its parent learnt (keyed by file version and header cards,
    nothing open) but takes a new lock: a parent thread may have held the old one across the
    fork."""
    global _lock
    _lock = threading.Lock()


def _layout_key(buf: bytes, start: int, ncards: int) -> tuple:
    """The cards of the compressed header that its layout and plan depend on, as written: every
    ``Z`` and ``T`` keyword (compression and column cards; the few others with them cost only a
    miss) but the per-file ones, and the structural and scaling keywords; TFORMn without the
    ``(max)`` of a variable-length column, which only bounds the heap."""
    cards = []
    for p in range(start, start + 80 * ncards, 80):
        first = buf[p]
        if first == 90 or first == 84:  # Z, T
            key = buf[p:p + 8]
            if key in _PER_FILE:
                continue
            card = buf[p:p + 80]
            if key[:5] == b"TFORM":
                cut = card.find(b"(", 10)
                if cut > 0:
                    card = card[:cut]
            cards.append(card)
        elif buf[p:p + 8] in _DECIDING:
            cards.append(buf[p:p + 80])
    return tuple(cards)


def _header_key(buf: bytes, start: int, ncards: int) -> bytes:
    """The compressed header's cards as written but the per-file ones (each left as a newline
    and its keyword) and the ``(max)`` of each TFORMn (a newline): cheaper than `_layout_key`,
    and files with equal header keys have equal layout keys (it keeps everything that one
    keeps). A newline cannot occur in the printable header, so the key is unambiguous."""
    stop = start + 80 * ncards
    cuts = []
    for kw in _PER_FILE_EQ:
        i = buf.find(kw, start, stop)
        while i >= 0:
            if (i - start) % 80 == 0:
                cuts.append((i, i + 80, kw))
            i = buf.find(kw, i + 1, stop)
    i = buf.find(b"TFORM", start, stop)
    while i >= 0:
        if (i - start) % 80 == 0:
            j = buf.find(b"(", i + 10, i + 80)
            if j > 0:
                cuts.append((j, i + 80, b""))
        i = buf.find(b"TFORM", i + 1, stop)
    if not cuts:
        return buf[start:stop]
    cuts.sort()
    pieces: list[bytes] = []
    last = start
    for a, b, kw in cuts:
        pieces += (buf[last:a], b"\n", kw)
        last = b
    pieces.append(buf[last:stop])
    return b"".join(pieces)


def _int(found: dict, key: str, default: Any = None) -> Any:
    v = found.get(key, default)
    return v if type(v) is int else None


class CompressedStamp:
    """One tile-compressed image HDU of a small file, read and ready to decode."""

    __slots__ = ("path", "hdu", "known", "layout", "plan", "buf", "data_offset", "heap_offset",
                 "heap_size")

    def __init__(self, path: str, hdu: int, known: _Known, data_offset: int, heap_offset: int,
                 heap_size: int, *, buf: bytes) -> None:
        self.path, self.hdu = path, hdu
        self.known, self.layout, self.plan = known, known.layout, known.plan
        self.buf = buf
        self.data_offset, self.heap_offset, self.heap_size = data_offset, heap_offset, heap_size

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype:
        return self.plan.dtype

    def decode_into(self, out: np.ndarray) -> None:
        """Decode every tile into ``out`` (C-contiguous, of `shape` and `dtype`) on this thread;
        the values `CompressedImage.read` gives."""
        known, plan, lay = self.known, self.plan, self.layout
        direct = (plan.mode == 0 or lay.zbitpix < 0 and plan.mode != 2) and out.dtype == known.storage
        values = out.reshape(-1) if direct else np.empty(out.size, known.storage)
        if not (known.codec is not None and self._decode_many(values)):
            self._decode_tiles(values)
        if not direct:
            convert_tile(plan, lay.zbitpix, values.reshape(lay.shape), out)

    def _decode_many(self, values: np.ndarray) -> bool:
        """One call of the codec's many-tile kernel; False where a descriptor or a tile needs the
        tile-by-tile decoder (which reads it another way or raises the error naming it)."""
        known, lay = self.known, self.layout
        assert known.codec is not None
        nrows = len(known.ks)
        counts, offsets = np.empty(nrows, np.int64), np.empty(nrows, np.int64)
        # Every row's (count, heap offset), read and checked to lie in the heap in one C loop
        # (what a dozen NumPy calls on the descriptors cost: ~6 us a stamp, a third of its decode);
        # the kernel trusts its arguments, so the last descriptor is checked to lie in the bytes
        # read first (defensive: the scan has checked the table does).
        buf = memoryview(self.buf)
        last = self.data_offset + known.desc_at + (nrows - 1) * lay.row_bytes + 2 * known.desc.itemsize
        if nrows == 0 or last > buf.nbytes or _bintable.vla_descriptors(
                self.buf, lay.row_bytes, 0, None, nrows, self.data_offset + known.desc_at,
                known.desc.itemsize == 8, 8 * known.itemsize, self.heap_size, counts, offsets) >= 0 \
                or not counts.all():
            return False
        sizes = counts if known.itemsize == 1 else counts * known.itemsize
        heap = buf[self.heap_offset:self.heap_offset + self.heap_size]
        status = np.empty(nrows, np.uint8)
        known.codec.decode_many(heap, offsets, sizes, known.npix, known.dest, values, status, _GO,
                                known.ncols)
        return bool((status == TILE_OK).all())

    def _decode_tiles(self, values: np.ndarray) -> None:
        """The general tile decoder over the bytes read (per-tile scales, blanks, quantisation,
        odd tiles; errors name the file, HDU and tile)."""
        known = self.known
        index = SimpleNamespace(path=self.path, size=len(self.buf), lazy=False, source=None,
                                check_data=_no_check, data_view=lambda entry, ranges: self.buf)
        entry = SimpleNamespace(index=self.hdu, data_offset=self.data_offset,
                                heap_offset=self.heap_offset, heap_size=self.heap_size)
        dec = tile_decoder(index, entry, self.layout)
        ntiles = len(known.ks)
        kplan = dec.kernel_plan() or (np.zeros(ntiles, bool), np.zeros(ntiles, np.int64),
                                      np.zeros(ntiles, np.int64))
        dec.decode_into(known.ks, kplan, known.npix, known.dest, values, np.zeros(1, np.uint8))


def _no_check(entry: Any, nbytes: Any = None) -> None:
    """The scan checked that the table and heap are inside the bytes read."""


def _contiguous(lay: TileLayout) -> bool:
    """Each tile is one run of the image in C order (row tiles and their stacks): the tiles
    decode straight into the image's memory in tile order."""
    k = next((i for i, t in enumerate(lay.tile) if t != 1), len(lay.tile) - 1)
    return all(t == n for t, n in zip(lay.tile[k + 1:], lay.shape[k + 1:]))


def _read_small(path: str, hdu: int) -> tuple[bytes, tuple, tuple | None] | None:
    """(bytes, version, what `_files` holds of this version) of a local file up to
    `_SMALL_FILE`, or None: a larger file, or one this version of which the batch path has
    already found it does not take (nothing read then). The version (device, inode, size,
    mtime and ctime) is taken before the read."""
    try:
        fd = os.open(path, OPEN_READ)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > _SMALL_FILE or not stat.S_ISREG(st.st_mode):
            return None
        version = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        seen = _files.get((path, hdu))
        if seen is not None and seen[0] == version and seen[1] is None:
            return None
        buf = pread(fd, st.st_size, 0)
        return buf, version, seen if seen is not None and seen[0] == version else None
    finally:
        os.close(fd)


def _skip_hdu(buf: bytes, pos: int) -> int:
    """The offset of the HDU after the one at ``pos``, or -1 where the scan cannot tell."""
    end = _header.find_header_end(buf, pos, len(buf))
    if end < 0:
        return -1
    found = _header.scan_structural(buf, pos, end)
    if not _BEFORE.issuperset(k for k in found if not k.startswith("NAXIS")):
        return -1
    try:
        nbytes = data_unit(found, 0 if pos == 0 else 1, "")[4]  # the index's own size rule
    except FitsError:
        return -1
    return end + -(-nbytes // _BLOCK) * _BLOCK


def open_stamp(path: str, hdu: Any, opener: Callable[[str, Any], Any]) -> CompressedStamp | None:
    """The tile-compressed image HDU ``hdu`` (an integer above 0) of the small local file
    ``path``, read with one ``pread``, or None where the general reader must judge the file.

    A layout not seen before is taken from the general reader, ``opener(path, hdu)`` (an open
    `Image`), which raises the error naming the file and HDU where the file is bad."""
    if type(hdu) is not int or hdu < 1:
        return None
    got = _read_small(path, hdu)
    if got is None:
        return None
    buf, version, seen = got
    if len(buf) != version[2]:
        return None  # the file changed under the read
    if seen is not None:
        # This version of the file was scanned before: its layout and offsets are known.
        return CompressedStamp(path, hdu, *seen[1:], buf=buf)
    place = _scan(path, hdu, buf, opener)
    with _lock:
        if len(_files) >= _FILES:
            _files.clear()
        # None too: this version is left to the general reader without reading it again
        _files[(path, hdu)] = (version,) + place if place is not None else (version, None)
    return CompressedStamp(path, hdu, *place, buf=buf) if place is not None else None


def _scan(path: str, hdu: int, buf: bytes, opener: Callable[[str, Any], Any]) -> tuple | None:
    """(`_Known`, data offset, heap offset, heap size) of HDU ``hdu`` in the file's bytes
    ``buf``, or None where the general reader must judge the file."""
    if len(buf) % _BLOCK:
        return None
    pos = 0
    for _ in range(hdu):
        pos = _skip_hdu(buf, pos)
        if pos < 0 or pos >= len(buf):
            return None
    end = _header.find_header_end(buf, pos, len(buf))
    if end < 0 or not _header.header_is_printable(buf, pos, end):
        return None
    found = _header.scan_structural(buf, pos, end)
    if found.get("XTENSION") != "BINTABLE" or found.get("ZIMAGE") is not True \
            or found.get("BITPIX") != 8 or found.get("NAXIS") != 2 or _int(found, "GCOUNT", 1) != 1:
        return None
    row_bytes, nrows, pcount = found.get("NAXIS1"), found.get("NAXIS2"), found.get("PCOUNT", 0)
    theap = found.get("THEAP", None)
    if type(row_bytes) is not int or type(nrows) is not int or type(pcount) is not int \
            or row_bytes < 0 or nrows < 0 or pcount < 0:
        return None
    table_bytes = row_bytes * nrows
    if theap is None:
        theap = table_bytes
    if type(theap) is not int or theap < table_bytes:
        return None
    if end + table_bytes + pcount > len(buf):
        return None  # truncated: the general reader words it
    if buf.count(b"PCOUNT  =", pos, end) != 1:
        return None  # the heap size must be the one the general reader takes
    ncards = found["__ncards__"]
    quick = (hdu, _header_key(buf, pos, ncards))
    with _lock:
        known = _layouts.get(quick, _MISSING)
    if known is _MISSING:
        key = (hdu, _layout_key(buf, pos, ncards))
        with _lock:
            known = _layouts.get(key, _MISSING)
        if known is _MISSING:
            img = opener(path, hdu)
            if not getattr(img, "is_compressed", False):
                return None
            layout, plan = img.layout, img.plan
            fits_path = bool(layout.shape) and _contiguous(layout) \
                and math.prod(layout.shape) * (abs(layout.zbitpix) // 8) <= _MAX_DECODED
            known = _Known(layout, plan) if fits_path else None
        with _lock:
            if len(_layouts) >= _CAPACITY:
                _layouts.clear()
            _layouts[key] = _layouts[quick] = known
    if known is None:
        return None
    return (known, end, end + theap, max(0, table_bytes + pcount - theap))

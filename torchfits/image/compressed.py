"""Tile-compressed images (the FITS tiled image compression convention): plan the tiles a region
touches, decode them with the codecs in parallel, place them in the output; restore the header.

`CompressedImage` has the interface of `torchfits.image.Image` and registers itself as its engine
for tile-compressed HDUs, so `Image(...)` returns one for a
compressed HDU. Writing lives in :mod:`torchfits.writing.compress_write`.
"""
from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._kernels import _quantize
from ..errors import CodecError, CompressedTileError, CorruptHeaderError, HDUTypeError, TruncatedFileError
from ..fits.hdu_index import KIND_COMPRESSED, HduEntry, HduIndex, get_index
from ..fits.header import Header
from ..fits.image_plan import ImagePlan, plan_image
from ..fits.sources.base import faults_seen
from ..fits.threads import default_threads, fault_in, run_parallel, run_shared
from ..fits.tile_layout import TileLayout, image_header, tile_layout
from .codec_registry import TILE_OK, TILE_STOPPED, Codec, Gzip1, lookup
from .plain import Image, Region, check_out, output_array, region_from_key

__all__ = ["CompressedImage", "CompressedTileError", "convert_tile", "open_compressed",
           "tile_decoder"]

_INT_DTYPES: dict[int, np.dtype[Any]] = {8: np.dtype(np.uint8), 16: np.dtype(np.int16),
                                         32: np.dtype(np.int32), 64: np.dtype(np.int64)}
_FLOAT_DTYPES: dict[int, np.dtype[Any]] = {-32: np.dtype(np.float32), -64: np.dtype(np.float64)}
_CACHE_BYTES = 64 << 20
# Quantised tiles are decoded this many pixels at a time (int32: 256 KiB, within L2) and
# dequantised while still in cache.
_SCRATCH_PIXELS = 1 << 16
# Full-read outputs from this size are written with streaming stores by codecs that offer them
# (about a last-level cache, as the cutout kernel's threshold).
_STREAM_MIN_BYTES = 4 << 20


# -- tile decode ----------------------------------------------------------------------------------
class _TileDecoder:
    """Decodes tile k of one compressed HDU into the storage values of the image (native order):
    integers for integer images, floats (dequantised) for floating-point images."""

    def __init__(self, index: HduIndex, entry: HduEntry, layout: TileLayout) -> None:
        self.index = index
        self.entry = entry
        self.layout = layout
        self.where = f"{index.path}: HDU {entry.index}"
        index.check_data(entry, layout.row_bytes * layout.nrows)
        # Descriptors first; a lazy source fetches tile bytes per request (prefetch).
        buf = index.data_view(entry, [(0, layout.row_bytes * layout.nrows)])
        table = np.frombuffer(buf, np.uint8, layout.row_bytes * layout.nrows,
                              entry.data_offset).reshape(layout.nrows, layout.row_bytes)
        self.buf = buf
        self.descriptors = {}
        for name, col in layout.columns.items():
            dt = np.dtype(">i4" if col.descriptor == "P" else ">i8")
            raw = np.ascontiguousarray(table[:, col.offset:col.offset + 2 * dt.itemsize])
            self.descriptors[name] = raw.view(dt).astype(np.int64).reshape(layout.nrows, 2)
        self.scalars = {}
        for name, (offset, dt) in layout.scalars.items():
            raw = np.ascontiguousarray(table[:, offset:offset + dt.itemsize])
            self.scalars[name] = raw.view(dt).reshape(-1).astype(np.float64 if dt.kind == "f" else np.int64)
        self.heap_start = entry.heap_offset
        self.heap_size = entry.heap_size
        self.file_size = index.size
        zb = layout.zbitpix
        self.float_image = zb < 0
        self.storage: np.dtype[Any] = _FLOAT_DTYPES[zb] if zb < 0 else _INT_DTYPES[zb]
        # Integer images with ZSCALE/ZZERO: linear per-tile scaling, truncated to the integer
        # type (what CFITSIO-based readers return).
        self.int_scaled = zb > 0 and ("ZSCALE" in self.scalars or "ZZERO" in self.scalars
                                      or layout.zscale is not None or layout.zzero is not None)
        cls = lookup(layout.zcmptype)
        assert cls is not None  # tile_layout checked it
        try:
            self.codec: Codec = cls.from_zparams(layout.params, zb)
        except (TypeError, ValueError, OverflowError) as exc:
            # A missing, garbled or absurd ZVALn (BLOCKSIZE, BYTEPIX, SMOOTH).
            raise CorruptHeaderError(
                f"{self.where}: invalid {layout.zcmptype} parameters {layout.params!r} "
                f"(ZNAMEn/ZVALn): {exc}") from None

    #: Quantised tiles go through the codec's fused decode + dequantise when it has one (the
    #: tests switch it off to run the scratch path too).
    _fused_dequant = True

    def prefetch(self, ks: Any) -> None:
        """Fetch the heap bytes of tiles ``ks`` from a lazy source (coalesced, concurrent)."""
        if not self.index.lazy:
            return
        ks = np.asarray(ks, np.int64)
        ranges: list[tuple[int, int]] = []
        for name, desc in self.descriptors.items():
            itemsize = self.layout.columns[name].itemsize
            count, offset = desc[ks, 0], desc[ks, 1]
            ok = (count > 0) & (offset >= 0) & (offset + count * itemsize <= self.heap_size)
            ranges += [(self.heap_start + int(o), int(c) * itemsize)
                       for c, o in zip(count[ok], offset[ok])]
        self.index.source.ensure(ranges)

    def tile_sizes(self) -> np.ndarray:
        """Pixels in every tile (edge tiles are smaller), in tile order."""
        lay = self.layout
        per_axis = [np.minimum(t, n - np.arange(g) * t) for t, n, g in zip(lay.tile, lay.shape, lay.grid)]
        sizes = per_axis[0].astype(np.int64)
        for extent in per_axis[1:]:
            sizes = np.multiply.outer(sizes, extent).reshape(-1)
        return sizes.astype(np.int64)

    def kernel_plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """For codecs with a GIL-free many-tile kernel: (usable mask, absolute offsets, sizes)."""
        lay = self.layout
        codec = self.codec
        if not codec.has_many or "ZBLANK" in self.scalars or self.int_scaled:
            return None
        if codec.many_itemsize not in (None, 4 if self.float_image else self.storage.itemsize):
            return None
        if codec.tile_ndim == 2 and len(lay.tile) >= 2 and any(t != 1 for t in lay.tile[:-2]):
            return None
        desc = self.descriptors["COMPRESSED_DATA"]
        count, offset = desc[:, 0], desc[:, 1]
        size = count * lay.columns["COMPRESSED_DATA"].itemsize
        ok = (count > 0) & (offset >= 0) & (offset + size <= self.heap_size)
        return ok, self.heap_start + offset, size

    def decode_many(self, ks: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, stop: np.ndarray,
                    stream: bool = False) -> np.ndarray:
        """Run the codec's many-tile kernel over tiles ``ks`` into the flat ``out``.

        Tile i goes to ``out[dest[i]:dest[i] + npix[i]]`` (int32 for quantised images, else the
        storage type). Returns a status per tile: ``TILE_OK`` (decoded), ``TILE_MISMATCH`` (to
        be decoded tile by tile, which reads it another way or raises the error naming it) or
        ``TILE_STOPPED`` (not attempted: ``stop[0]`` was raised by a failing sibling chunk).
        """
        ncols = None
        if self.codec.tile_ndim == 2:
            # 2-D tiles (leading tile axes of 1): rows x the last-axis extent (edge tiles narrower)
            lay = self.layout
            width = lay.tile[-1]
            ncols = np.minimum(width, lay.shape[-1] - (ks % lay.grid[-1]) * width).astype(np.int64)
        status = np.empty(len(ks), np.uint8)
        self.codec.decode_many(self.buf, offsets, sizes, npix, dest, out, status, stop, ncols, stream)
        return status

    def decode_into(self, ks: np.ndarray, plan: tuple[np.ndarray, np.ndarray, np.ndarray],
                    npix: np.ndarray, dest: np.ndarray, values: np.ndarray,
                    stop: np.ndarray, stream: bool = False) -> None:
        """Decode tiles ``ks`` (``npix[i]`` pixels each) into ``values[dest[i]:...]``, the flat
        storage values.

        The many-tile kernel takes the tiles it can; the others (no kernel, an unusual tile, a
        bad one) are decoded one by one, raising the error that names the tile. On any error
        ``stop[0]`` is raised so sibling chunks on the pool stop early. ``stream``: ``values`` is
        a full read's output, faulted in (see `Codec.streams_output`).
        """
        try:
            if stop[0]:
                return
            usable, offsets, sizes = plan
            mask = usable[ks]
            fast = ks[mask]
            slow = [(int(k), int(d), int(n)) for k, d, n in zip(ks[~mask], dest[~mask], npix[~mask])]
            if fast.size:
                fdest = np.ascontiguousarray(dest[mask])
                fnpix = np.ascontiguousarray(npix[mask])
                foff = np.ascontiguousarray(offsets[fast])
                fsize = np.ascontiguousarray(sizes[fast])
                if self.float_image and self.layout.quantize is not None:
                    bad = self._decode_quantized(fast, foff, fsize, fnpix, fdest, values, stop)
                    if bad is None:
                        return
                else:
                    status = self.decode_many(fast, foff, fsize, fnpix, fdest, values, stop, stream)
                    if (status == TILE_STOPPED).any():
                        return
                    bad = status != TILE_OK
                slow += [(int(k), int(d), int(n)) for k, d, n in zip(fast[bad], fdest[bad], fnpix[bad])]
            for k, d, n in sorted(slow):
                if stop[0]:
                    return
                values[d:d + n] = self.decode(k).reshape(-1)
        except BaseException:
            stop[0] = 1
            raise

    def _decode_quantized(self, ks: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                          npix: np.ndarray, dest: np.ndarray, values: np.ndarray,
                          stop: np.ndarray) -> np.ndarray | None:
        """Quantised tiles: decode a few at a time into a cache-sized int32 scratch and dequantise
        them while they are still in cache. The mask of tiles left for the per-tile path, or
        None when stopped. A codec that `fuses_dequant` does both per tile in one call."""
        if self.codec.fuses_dequant and self._fused_dequant:
            zs, zz = self._zscale_zzero(ks)
            lay = self.layout
            status = np.empty(len(ks), np.uint8)
            self.codec.decode_many_dequant(self.buf, offsets, sizes, npix, dest, values, status, stop, zs,
                                           zz, np.ascontiguousarray(ks), int(lay.quantize or 0),
                                           lay.zdither0,
                                           int(lay.zblank) if lay.zblank is not None else None)
            if (status == TILE_STOPPED).any():
                return None
            return status != TILE_OK
        bad = np.zeros(len(ks), bool)
        limit = max(int(npix.max()), _SCRATCH_PIXELS)
        scratch = np.empty(limit, np.int32)
        pos = 0
        while pos < len(ks):
            end = pos + 1
            total = int(npix[pos])
            while end < len(ks) and total + npix[end] <= limit:
                total += int(npix[end])
                end += 1
            sub = slice(pos, end)
            local = np.cumsum(npix[sub]) - npix[sub]
            status = self.decode_many(ks[sub], offsets[sub], sizes[sub], npix[sub], local, scratch,
                                      stop)
            if (status == TILE_STOPPED).any():
                return None
            good = status == TILE_OK
            bad[sub] = ~good
            if good.all():
                self._dequantize_many(ks[sub], dest[sub], npix[sub], scratch, values, local)
            elif good.any():
                self._dequantize_many(ks[sub][good], np.ascontiguousarray(dest[sub][good]),
                                      np.ascontiguousarray(npix[sub][good]), scratch, values,
                                      np.ascontiguousarray(local[good]))
            pos = end
        return bad

    def _zscale_zzero(self, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ZSCALE and ZZERO of tiles ``ks`` (columns, else the header's), contiguous float64."""
        lay = self.layout
        zs = self.scalars.get("ZSCALE")
        zz = self.scalars.get("ZZERO")
        zs = zs[ks] if zs is not None else np.full(ks.size, lay.zscale or 1.0)
        zz = zz[ks] if zz is not None else np.full(ks.size, lay.zzero or 0.0)
        return np.ascontiguousarray(zs, np.float64), np.ascontiguousarray(zz, np.float64)

    def _dequantize_many(self, ks: np.ndarray, dest: np.ndarray, npix: np.ndarray, ints: np.ndarray,
                         values: np.ndarray, src: np.ndarray | None = None) -> None:
        lay = self.layout
        zs, zz = self._zscale_zzero(ks)
        _quantize.dequantize_many(ints, values, dest, npix, zs, zz, np.ascontiguousarray(ks),
                                  int(lay.quantize or 0), lay.zdither0, lay.zblank is not None,
                                  int(lay.zblank) if lay.zblank is not None else 0, src)

    def decode_batch(self, ks: list[int]) -> dict[int, np.ndarray]:
        """Decode several tiles (GIL-free kernel where the codec has one); tile → array."""
        self.prefetch(ks)
        kplan = self.kernel_plan()
        if kplan is None or len(ks) < 2:
            return {k: self.decode(k) for k in ks}
        karr = np.asarray(ks, np.int64)
        shapes = [self.tile_shape(int(k)) for k in karr]
        npix = np.array([math.prod(sh) for sh in shapes], np.int64)
        dest = np.cumsum(npix) - npix
        values = np.empty(int(npix.sum()), self.storage)
        self.decode_into(karr, kplan, npix, dest, values, np.zeros(1, np.uint8))
        return {int(k): values[d:d + n].reshape(sh) for k, sh, d, n in zip(karr, shapes, dest, npix)}

    def tile_shape(self, k: int) -> tuple[int, ...]:
        """The clipped shape of tile k (edge tiles are smaller)."""
        lay = self.layout
        pos = np.unravel_index(k, lay.grid)
        return tuple(int(min(t, n - int(i) * t)) for i, t, n in zip(pos, lay.tile, lay.shape))

    def _bytes(self, name: str, k: int) -> memoryview | None:
        desc = self.descriptors.get(name)
        if desc is None:
            return None
        count, offset = int(desc[k, 0]), int(desc[k, 1])
        if count == 0:
            return None
        size = count * self.layout.columns[name].itemsize
        if count < 0 or offset < 0 or offset + size > self.heap_size:
            raise CompressedTileError(
                f"{self.where}: tile {k}: {name} descriptor (count {count}, offset {offset}) points "
                f"outside the heap of {self.heap_size} bytes")
        start = self.heap_start + offset
        if start + size > self.file_size:
            raise TruncatedFileError(f"{self.where}: tile {k}: file is truncated inside the tile data")
        return self.buf[start:start + size]

    def _scalar(self, name: str, k: int, default: Any) -> Any:
        col = self.scalars.get(name)
        return col[k] if col is not None else default

    def decode(self, k: int) -> np.ndarray:
        """Tile k as an array of its clipped shape, in the storage type of the image."""
        self.prefetch([k])
        try:
            tile = self._decode(k)
        except CodecError as exc:
            raise CompressedTileError(f"{self.where}: tile {k}: {exc}") from None
        if self.int_scaled:
            lay = self.layout
            zs = float(self._scalar("ZSCALE", k, lay.zscale if lay.zscale is not None else 1.0))
            zz = float(self._scalar("ZZERO", k, lay.zzero if lay.zzero is not None else 0.0))
            info = np.iinfo(self.storage)
            scaled = np.trunc(tile.astype(np.float64) * zs + zz)
            tile = np.clip(scaled, info.min, info.max).astype(self.storage).reshape(tile.shape)
        return tile

    def _decode(self, k: int) -> np.ndarray:
        shape = self.tile_shape(k)
        npix = math.prod(shape)
        lay = self.layout
        data = self._bytes("COMPRESSED_DATA", k)
        if data is None:
            alt = self._bytes("GZIP_COMPRESSED_DATA", k)
            if alt is not None:
                return self._raw_tile(Gzip1().decode(alt, max_size=8 * npix), shape, k)
            alt = self._bytes("UNCOMPRESSED_DATA", k)
            if alt is not None:
                return self._raw_tile(bytes(alt), shape, k,
                                      itemsize=lay.columns["UNCOMPRESSED_DATA"].itemsize,
                                      code=lay.columns["UNCOMPRESSED_DATA"].code)
            if npix == 0:
                return np.empty(shape, self.storage)
            raise CompressedTileError(f"{self.where}: tile {k}: no data in any tile column")
        quantized = self.float_image and lay.quantize is not None
        decoded = self.codec.decode_tile(data, shape)  # a CodecError is named by `decode`
        if not self.codec.stores_integers:
            return self._raw_tile(decoded, shape, k, quantized=quantized)
        if quantized:
            return self._dequantize(decoded, shape, k)
        if self.float_image:
            raise CompressedTileError(f"{self.where}: tile {k}: float image tile without ZSCALE")
        return decoded.astype(self.storage, copy=False).reshape(shape)

    def _raw_tile(self, raw: Any, shape: tuple[int, ...], k: int, *, itemsize: int | None = None,
                  code: str | None = None, quantized: bool = False) -> np.ndarray:
        npix = math.prod(shape)
        if itemsize is None:
            itemsize = len(raw) // npix if npix else self.storage.itemsize
        if itemsize * npix != len(raw) or itemsize not in (1, 2, 4, 8):
            raise CompressedTileError(
                f"{self.where}: tile {k}: holds {len(raw)} bytes for {npix} pixels")
        dt: np.dtype[Any]
        if code in ("E", "D") or (code is None and self.float_image and not quantized):
            dt = np.dtype(">f4" if itemsize == 4 else ">f8")
        elif itemsize == 1:
            dt = np.dtype("u1")
        else:
            dt = np.dtype(f">i{itemsize}")
        values = np.frombuffer(raw, dt)
        if quantized:
            return self._dequantize(values.astype(np.int32), shape, k)
        return values.astype(self.storage).reshape(shape)

    def _dequantize(self, ints: np.ndarray, shape: tuple[int, ...], k: int) -> np.ndarray:
        lay = self.layout
        scale = float(self._scalar("ZSCALE", k, lay.zscale if lay.zscale is not None else 1.0))
        zero = float(self._scalar("ZZERO", k, lay.zzero if lay.zzero is not None else 0.0))
        blank = self._scalar("ZBLANK", k, lay.zblank)
        out = np.empty(shape, self.storage)
        seed = _quantize.dither_seed(k, lay.zdither0) if lay.quantize else 0
        _quantize.dequantize(np.ascontiguousarray(ints, np.int32).reshape(-1), out, scale, zero,
                             int(lay.quantize or 0), seed, blank is not None,
                             int(blank) if blank is not None else 0)
        return out


# -- placement ------------------------------------------------------------------------------------
def _axis_selection(start: int, step: int, count: int, tile: int, grid: int) -> dict[int, tuple]:
    """For one axis: tile number → (output slice, tile-local slice) of the selected indices."""
    out: dict[int, tuple] = {}
    if count == 0:
        return out
    idx = start + step * np.arange(count)
    tiles = idx // tile
    # idx is monotonic, so each tile's selections form one run
    bounds = np.flatnonzero(np.diff(tiles)) + 1
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, count]):
        t = int(tiles[a])
        lo = int(idx[a] - t * tile)
        hi = int(idx[b - 1] - t * tile)
        stop: int | None = hi + (1 if step > 0 else -1)
        if stop is not None and stop < 0:
            stop = None
        out[t] = (slice(int(a), int(b)), slice(lo, stop, step))
    return out


def tile_decoder(index: Any, entry: Any, layout: TileLayout) -> _TileDecoder:
    """The tile decoder of one compressed HDU: ``decode_into``, ``kernel_plan`` and ``decode``
    over ``index.data_view(entry, ...)`` (batch readers pass the bytes of a small file they
    read whole, with the HDU's offsets in ``entry``)."""
    return _TileDecoder(index, entry, layout)


def convert_tile(plan: ImagePlan, zbitpix: int, tile: np.ndarray, dest: np.ndarray) -> None:
    """Storage values ``tile`` (a tile or a band of tiles) written into ``dest`` as result
    values: the plan's unsigned conventions and BSCALE/BZERO/BLANK."""
    if plan.mode == 0 or zbitpix < 0 and plan.mode != 2:
        dest[...] = tile
    elif plan.mode == 1:  # unsigned / signed-byte conventions: flip the sign bit
        bits = tile.dtype.itemsize * 8
        u = tile.view(np.dtype(f"u{tile.dtype.itemsize}"))
        dest[...] = (u ^ np.array(1 << (bits - 1), u.dtype)).view(dest.dtype)
    else:
        # in double precision, rounded once to the result type (as plain images, and CFITSIO)
        vals = tile.astype(np.float64)
        if (plan.bscale, plan.bzero) != (1.0, 0.0):
            vals = vals * plan.bscale + plan.bzero
        if plan.blank is not None and tile.dtype.kind in "iu":
            vals[tile == plan.blank] = np.nan
        dest[...] = vals


class CompressedImage(Image):
    """An open tile-compressed image HDU: only the tiles a region touches are decoded.

    Decoded tiles of region reads stay in a bounded LRU cache (``cache_bytes``), so cutouts that
    share tiles decode them once. Full reads decode every tile once, in parallel.
    """

    is_compressed = True

    def __init__(self, source: Any, hdu: Any = 0, *, raw_scale: bool = False,
                 uint64_as_float: bool = False, index: HduIndex | None = None,
                 cache_bytes: int = _CACHE_BYTES) -> None:
        self._index = index if index is not None else get_index(source)
        self._entry = self._index.resolve(hdu)
        if self._entry.kind != KIND_COMPRESSED:
            raise HDUTypeError(f"{self._index.path}: HDU {self._entry.index} is not a compressed image")
        self._layout = tile_layout(self._index, self._entry, lookup)
        self._header = image_header(self._index.header_view(self._entry),
                                    f"{self._index.path}: HDU {self._entry.index}")
        lay = self._layout
        zblank_as_blank = lay.zbitpix > 0 and lay.zblank is not None and "BLANK" not in self._header
        plan_header = self._header
        if zblank_as_blank:
            plan_header = self._header.copy()
            plan_header["BLANK"] = lay.zblank
        fake = SimpleNamespace(bitpix=lay.zbitpix, naxes=tuple(reversed(lay.shape)), shape=lay.shape)
        self._plan = plan_image(fake, plan_header, raw_scale=raw_scale,  # type: ignore[arg-type]
                                uint64_as_float=uint64_as_float)
        self._decoder: _TileDecoder | None = None
        self._decoder_lock = threading.Lock()
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_bytes = int(cache_bytes)
        self._raw_scale, self._uint64_as_float = raw_scale, uint64_as_float
        self._cached = 0
        self._cache_lock = threading.Lock()

    # -- metadata ---------------------------------------------------------------------------------
    @property
    def header(self) -> Header:
        """The uncompressed image's header (see :func:`image_header`)."""
        return self._header.copy()

    @property
    def compressed_header(self) -> Header:
        """The raw header of the compressed BINTABLE HDU."""
        return self._index.header(self._entry)

    @property
    def layout(self) -> TileLayout:
        return self._layout

    @property
    def codec(self) -> str:
        return self._layout.zcmptype

    def tile_table(self) -> dict[str, np.ndarray]:
        """Where every tile's bytes are, for reference builders (`torchfits.zarr`).

        For each tile column of the HDU (``COMPRESSED_DATA`` and, where present,
        ``GZIP_COMPRESSED_DATA`` / ``UNCOMPRESSED_DATA``): an (ntiles, 2) int64 array of
        (absolute file offset, byte count) in tile order, count 0 where the tile has no bytes in
        that column; and the per-tile values of the ``ZSCALE``, ``ZZERO`` and ``ZBLANK`` columns
        the HDU has. A descriptor that points outside the heap raises `CompressedTileError`.
        """
        tiles = self._tiles()
        out: dict[str, np.ndarray] = {}
        for name, desc in tiles.descriptors.items():
            count, offset = desc[:, 0], desc[:, 1]
            size = count * self._layout.columns[name].itemsize
            outside = (offset < 0) | (offset + size > tiles.heap_size)
            bad = np.flatnonzero((count < 0) | (count > 0) & outside)
            if bad.size:
                k = int(bad[0])
                raise CompressedTileError(
                    f"{tiles.where}: tile {k}: {name} descriptor (count {int(count[k])}, offset "
                    f"{int(offset[k])}) points outside the heap of {tiles.heap_size} bytes")
            used = count > 0
            out[name] = np.stack([np.where(used, tiles.heap_start + offset, 0), np.where(used, size, 0)],
                                 axis=1).astype(np.int64)
        out.update((name, values.copy()) for name, values in tiles.scalars.items())
        return out

    def _zero_copy_ok(self) -> bool:
        return False

    def _tiles(self) -> _TileDecoder:
        if self._decoder is None:
            with self._decoder_lock:
                if self._decoder is None:
                    self._decoder = _TileDecoder(self._index, self._entry, self._layout)
        return self._decoder

    # -- conversion storage → result ---------------------------------------------------------------
    def _convert(self, tile: np.ndarray, dest: np.ndarray) -> None:
        convert_tile(self._plan, self._layout.zbitpix, tile, dest)

    def _fetch(self, ks: list[int]) -> dict[int, np.ndarray]:
        """Tiles ``ks`` from the LRU cache, decoding the missing ones in one batch."""
        found: dict[int, np.ndarray] = {}
        with self._cache_lock:
            cache = self._cache
            for k in ks:
                tile = cache.get(k)
                if tile is not None:
                    cache.move_to_end(k)
                    found[k] = tile
        missing = [k for k in ks if k not in found]
        if missing:
            fresh = self._tiles().decode_batch(missing)
            # Tiles read from a map the file shrank under are zeros: never cache or return them.
            if faults_seen():
                self._index.source.check()
            with self._cache_lock:
                for k, tile in fresh.items():
                    tile.setflags(write=False)
                    found[k] = tile
                    if k not in self._cache and tile.nbytes <= self._cache_bytes:
                        self._cache[k] = tile
                        self._cached += tile.nbytes
                while self._cached > self._cache_bytes and self._cache:
                    _, old = self._cache.popitem(last=False)
                    self._cached -= old.nbytes
        return found

    def _tile(self, k: int, use_cache: bool) -> np.ndarray:
        if not use_cache:
            tile = self._tiles().decode(k)
            if faults_seen():
                self._index.source.check()
            return tile
        return self._fetch([k])[k]

    def clear_cache(self) -> None:
        """Drop the decoded tiles kept for region reads."""
        with self._cache_lock:
            self._cache.clear()
            self._cached = 0

    def _decode_into(self, region: Region, out: np.ndarray, threads: int | None,
                     use_cache: bool) -> np.ndarray:
        starts, steps, counts = region
        lay = self._layout
        if out.size == 0 or not lay.shape:
            return out
        full = out.reshape(counts)
        if use_cache and len(lay.shape) >= 2 and lay.tile[-1] == lay.shape[-1] \
                and all(t == 1 for t in lay.tile[:-2]) and steps[-2] > 0:
            return self._decode_bands(region, full, out)
        per_axis = [_axis_selection(s, st, c, t, g)
                    for s, st, c, t, g in zip(starts, steps, counts, lay.tile, lay.grid)]
        jobs = []
        for combo in itertools.product(*[sorted(a.items()) for a in per_axis]):
            tile_pos = tuple(t for t, _ in combo)
            k = int(np.ravel_multi_index(tile_pos, lay.grid))
            jobs.append((k, tuple(sel[0] for _, sel in combo), tuple(sel[1] for _, sel in combo)))

        def work(job: tuple) -> None:
            k, dest, local = job
            tile = self._tile(k, use_cache)
            self._convert(tile[local], full[dest])

        nthreads = default_threads() if threads is None else max(1, int(threads))
        if nthreads == 1 or len(jobs) < 2:
            for job in jobs:
                work(job)
        else:
            nchunks = min(len(jobs), nthreads * 4)
            chunks = [jobs[i::nchunks] for i in range(nchunks)]
            def run_chunk(chunk: list) -> None:
                for j in chunk:
                    work(j)

            run_parallel(run_chunk, chunks)
        return out

    def _decode_bands(self, region: Region, full: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Region reads of full-width tiles (row tiles): stack the touched tiles' columns."""
        starts, steps, counts = region
        lay = self._layout
        t = lay.tile[-2]
        rows = starts[-2] + steps[-2] * np.arange(counts[-2])
        first, last = int(rows[0]) // t, int(rows[-1]) // t
        if steps[-1] > 0:
            stop = starts[-1] + steps[-1] * (counts[-1] - 1) + 1
            cols: Any = slice(starts[-1], stop, steps[-1])
        else:
            cols = starts[-1] + steps[-1] * np.arange(counts[-1])
        local: Any = slice(int(rows[0]) - first * t, int(rows[-1]) - first * t + 1, steps[-2])
        band_rows: Any = range(first, last + 1)
        if steps[-2] > t:
            # A stride longer than a tile (a thumbnail's sample) skips tiles: decode only those
            # holding a selected row, and pick the rows out of their stack.
            band_rows = np.unique(rows // t).tolist()
            local = np.searchsorted(band_rows, rows // t) * t + rows % t
        lead = [range(s, s + st * c, st) if c else range(0) for s, st, c in
                zip(starts[:-2], steps[:-2], counts[:-2])]
        grid_rows = lay.grid[-2]
        combos = list(itertools.product(*lead))
        lead_grid = lay.grid[:-2]
        bases = [(int(np.ravel_multi_index(c, lead_grid)) * grid_rows if c else 0) for c in combos]
        needed = [b + r for b in bases for r in band_rows]
        tiles = self._fetch(needed)
        for n, b in enumerate(bases):
            # a tile of a cube is (1, ..., rows, width): its last two axes are the band's
            parts = [tiles[b + r].reshape(tiles[b + r].shape[-2:])[:, cols] for r in band_rows]
            band = parts[0] if len(parts) == 1 else np.concatenate(parts)
            dest = full[np.unravel_index(n, counts[:-2])] if combos[0] else full
            self._convert(band[local], dest)
        return out

    # -- reads --------------------------------------------------------------------------------------
    def _read_native(self, out: Any = None, *, threads: int | None = None,
                     copy: bool = True) -> np.ndarray:
        # Every tile once, in parallel (the public `read` casts when a dtype was asked for);
        # always owned memory (``copy`` is accepted for the plain-image signature).
        nthreads = default_threads() if threads is None else max(1, int(threads))
        codec = self._tiles().codec
        resident = True  # a caller's output is taken as resident
        if out is None:
            # recycled: a loop of reads writes into the last output's pages, not fresh ones
            # (docs/architecture.md, "Image outputs are recycled")
            out = output_array(self.shape, self._plan.dtype)
            resident = (nthreads > 1 or codec.streams_output) and fault_in(out)
        else:
            out = check_out(out, self.shape, self._plan.dtype)
        if not self._layout.shape or out.size == 0:
            return out
        return self._read_all(out, nthreads, resident)

    def _contiguous(self) -> bool:
        """Each tile is one run of the image in C order (row tiles and their stacks)."""
        lay = self._layout
        k = next((i for i, t in enumerate(lay.tile) if t != 1), len(lay.tile) - 1)
        return all(t == n for t, n in zip(lay.tile[k + 1:], lay.shape[k + 1:]))

    def _read_all(self, out: np.ndarray, nthreads: int, resident: bool = False) -> np.ndarray:
        dec = self._tiles()
        dec.prefetch(np.arange(self._layout.nrows))
        lay = self._layout
        plan = self._plan
        npix = dec.tile_sizes()
        dest = np.cumsum(npix) - npix
        total = int(npix.sum())
        contiguous = self._contiguous()
        direct = contiguous and (plan.mode == 0 or (dec.float_image and plan.mode != 2)) \
            and out.dtype == dec.storage
        # Streaming stores for an output far larger than the caches that goes to memory anyway,
        # once its pages are in (``resident``: faulted in above, or a caller's): streaming into
        # pages not faulted yet measured slower (docs/benchmarks.md, session 14).
        stream = direct and resident and dec.codec.streams_output and out.nbytes >= _STREAM_MIN_BYTES
        if direct:
            values = out.reshape(-1)
        else:
            values = output_array((total,), dec.storage)  # scratch, recycled too
            if nthreads > 1:
                fault_in(values)
        kplan = dec.kernel_plan()
        ntiles = len(npix)
        ks_all = np.arange(ntiles, dtype=np.int64)
        if kplan is None:
            kplan = (np.zeros(ntiles, bool), np.zeros(ntiles, np.int64), np.zeros(ntiles, np.int64))
        # A failing chunk raises stop[0]: the kernels of its siblings stop at their next tile.
        stop = np.zeros(1, np.uint8)

        def chunk(bounds: tuple[int, int]) -> None:
            a, b = bounds
            dec.decode_into(ks_all[a:b], kplan, npix[a:b], dest[a:b], values, stop, stream)

        # A few chunks per thread, taken by whichever thread is free (the caller included), so
        # a pool thread that starts late leaves its chunks to the others instead of to a wait.
        nchunks = max(1, min(ntiles, nthreads * 4 if nthreads > 1 else 1))
        bounds = [(ntiles * i // nchunks, ntiles * (i + 1) // nchunks) for i in range(nchunks)]
        run_shared(chunk, bounds, nthreads)
        if faults_seen():
            self._index.source.check()
        if direct:
            return out
        if contiguous:
            self._convert(values.reshape(self.shape), out)
            return out
        # scatter tile-major values into the image, tile by tile
        grid = lay.grid

        def place(ks: range) -> None:
            for k in ks:
                pos = np.unravel_index(k, grid)
                sl = tuple(slice(int(p) * t, min((int(p) + 1) * t, n))
                           for p, t, n in zip(pos, lay.tile, lay.shape))
                shape = tuple(x.stop - x.start for x in sl)
                self._convert(values[dest[k]:dest[k] + npix[k]].reshape(shape), out[sl])

        if nthreads == 1:
            place(range(ntiles))
        else:
            run_parallel(place, [range(i, ntiles, nthreads) for i in range(nthreads)])
        return out

    def _read_region_native(self, region: Region, out_shape: tuple[int, ...], out: Any = None,
                            *, threads: int | None = None) -> np.ndarray:
        # Touched tiles only.
        if out is None:
            out = np.empty(out_shape, self._plan.dtype)
        else:
            out = check_out(out, out_shape, self._plan.dtype)
        return self._decode_into(region, out, threads if threads is not None else 1, use_cache=True)

    def _getitem_native(self, key: Any) -> np.ndarray:
        region, out_shape = region_from_key(self.shape, key)
        return self._read_region_native(region, out_shape)

    def _reopen_args(self) -> dict:
        return {**super()._reopen_args(), "cache_bytes": self._cache_bytes}

    def __repr__(self) -> str:
        return (f"CompressedImage(path={self.path!r}, hdu={self.hdu}, shape={self.shape}, "
                f"dtype={self.dtype}, codec={self.codec})")


Image._engines[KIND_COMPRESSED] = CompressedImage


def open_compressed(source: Any, hdu: Any = 1, *, raw_scale: bool = False,
                    cache_bytes: int = _CACHE_BYTES) -> CompressedImage:
    """Open a tile-compressed image HDU with an explicit tile-cache budget.

    ``open_image`` gives the same object with the default budget (64 MiB of decoded tiles).
    """
    return CompressedImage(source, hdu, raw_scale=raw_scale, cache_bytes=cache_bytes)

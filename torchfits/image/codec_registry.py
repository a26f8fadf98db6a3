"""Tile codecs of the FITS tiled image compression convention, behind one small contract.

Every codec has ``codec_id`` (its ZCMPTYPE), ``decode(buf, out=None)``, ``encode(buf)`` and
``get_config()``; :data:`REGISTRY` maps ZCMPTYPE → codec class and :func:`get_codec` builds one.
Each class also states what readers and writers need to know about it: the pixel types it
accepts, whether float images must be quantised for it, its ZNAMEn/ZVALn parameters, its
many-tile kernel (`Codec.decode_many`, the per-tile status protocol of ``_tilestatus.pxd``) and
how one tile is decoded and encoded (`Codec.decode_tile`, `Codec.encode_tile`).
"""
from __future__ import annotations

import bz2
import functools
import math
import zlib
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._kernels import _gziptiles, _hcompress, _plio, _quantize, _rice
from ..errors import CodecError

__all__ = ["Codec", "Rice1", "Gzip1", "Gzip2", "Plio1", "Hcompress1", "Bzip2", "NoCompress", "REGISTRY",
           "get_codec", "CodecError", "inflate_backend", "lookup", "writer_codec", "writer_names",
           "WriteOptions",
           "DEFAULT_CODEC", "TILE_OK", "TILE_MISMATCH", "TILE_STOPPED"]

# The per-tile status of every many-tile kernel (cython_src/_tilestatus.pxd).
TILE_OK: int = _gziptiles.OK
TILE_MISMATCH: int = _gziptiles.MISMATCH
TILE_STOPPED: int = _gziptiles.STOPPED


class WriteOptions(NamedTuple):
    """The codec parameters a writer was given (each codec uses its own)."""

    blocksize: int = 32  # RICE_1 BLOCKSIZE
    hcomp_scale: float = 0.0  # HCOMPRESS_1 SCALE
    hcomp_smooth: bool = False  # HCOMPRESS_1 SMOOTH (applied by readers)


_ERRORS = {-1: "truncated tile", -2: "corrupt tile", -3: "out of memory"}


def _check(rc: int, codec_id: str) -> None:
    if rc != 0:
        raise CodecError(f"{codec_id}: {_ERRORS.get(rc, f'error {rc}')}")


@functools.cache
def newer_libdeflate() -> str | None:
    """Once per process: switch the many-tile GZIP kernel to the libdeflate that the optional
    ``deflate`` package ships (``pip install torchfits[deflate]``), a newer release than most
    systems' that inflates the tiles of a float32 GZIP_2 image ~20 % faster (docs/benchmarks.md,
    "Tile-compressed images"). Returns the library now in use (`_gziptiles.inflater`). The
    package is located, not imported; nothing changes when it is missing or its library lacks
    libdeflate's entry points."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("deflate")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        import importlib.machinery

        for where in spec.submodule_search_locations:
            pkg = Path(where)
            dist = sorted(pkg.parent.glob("deflate-*.dist-info"))
            label = f"from deflate {dist[-1].name[len('deflate-'):-len('.dist-info')]}" if dist \
                else "from the deflate package"
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                lib = pkg / f"_deflate{suffix}"
                if lib.is_file() and _gziptiles.load_libdeflate(str(lib), label):
                    return str(_gziptiles.inflater())
    return str(_gziptiles.inflater())


@functools.cache
def inflate_backend() -> Any:
    """The module single GZIP tiles are inflated with: ``isal.isal_zlib`` (ISA-L's inflate, about
    1.5–2× zlib's speed) when the optional ``isal`` package is installed
    (``pip install torchfits[isal]``), else the standard library's ``zlib``. Runs of tiles (full
    reads, cached region reads) go through the compiled zlib loop of ``_kernels._gziptiles``
    instead. All produce the same bytes; compression always uses ``zlib`` so files do not depend
    on what is installed."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


def _as_bytes(buf: Any) -> np.ndarray:
    arr = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf
    return np.ascontiguousarray(arr.reshape(-1).view(np.uint8))


def _tile_bytes(buf: Any) -> bytes:
    """A tile's bytes, from an array (C order) or any bytes-like object."""
    return np.ascontiguousarray(buf).tobytes() if isinstance(buf, np.ndarray) else bytes(buf)


def _raw_into(raw: bytes, out: np.ndarray | None, what: str) -> Any:
    """``raw`` itself without ``out``, else copied into ``out``'s bytes, whose size it must match
    (``what`` starts the error: "NOCOMPRESS: tile holds")."""
    if out is None:
        return raw
    view = out.reshape(-1).view(np.uint8)
    if len(raw) != view.size:
        raise CodecError(f"{what} {len(raw)} bytes, expected {view.size}")
    view[:] = np.frombuffer(raw, np.uint8)
    return out


class Codec:
    """Base class: one tile in, one tile out.

    The class attributes say what readers and writers must know about the codec, so no caller
    tests a codec's name.
    """

    codec_id: ClassVar[str] = ""
    #: Other names writers accept for it (case-insensitive).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Tiles hold integers: a float image is quantised to be stored (ZSCALE/ZZERO).
    stores_integers: ClassVar[bool] = False
    #: Accepts 64-bit integer images.
    int64_ok: ClassVar[bool] = True
    #: CFITSIO reads it (public releases; writers suggest only these as alternatives).
    cfitsio_reads: ClassVar[bool] = True
    #: Writers accept its name (``compress=``, ``--algorithm``); the others only where asked for.
    offered: ClassVar[bool] = True
    #: The most one byte of tile data decodes to (bounds the image a file can claim).
    max_ratio: ClassVar[int] = 1
    #: 2 for codecs of 2-D tiles (every tile axis but the last two is 1), else 0.
    tile_ndim: ClassVar[int] = 0
    #: Bytes per COMPRESSED_DATA element: 1 (TFORM ``B``) or 2 (``I``).
    heap_itemsize: ClassVar[int] = 1
    #: Has a GIL-free many-tile kernel (`decode_many`).
    has_many: ClassVar[bool] = False
    #: Has `decode_many_dequant`: quantised tiles decoded and dequantised one at a time in one
    #: GIL-free call, each tile's integers still in cache when they are dequantised.
    fuses_dequant: ClassVar[bool] = False
    #: `decode_many` writes with streaming stores when told to (``stream``): no output line is
    #: read from memory before it is written. Full reads fault their fresh output in first, on
    #: one thread too (a streaming store to a page the kernel has just cleared in the cache would
    #: evict it; docs/benchmarks.md, "Tile-compressed images").
    streams_output: ClassVar[bool] = False

    # -- what writers ask ---------------------------------------------------------------------
    @classmethod
    def accepts(cls, zbitpix: int) -> bool:
        """Whether images of this ZBITPIX can be stored (floats: quantised or not)."""
        return zbitpix != 64 or cls.int64_ok

    @classmethod
    def check_shape(cls, shape: tuple[int, ...]) -> None:
        """Refuse an image shape the codec cannot tile."""
        if cls.tile_ndim == 2 and len(shape) < 2:
            raise ValueError(f"{cls.codec_id} needs a 2D (or higher) image")

    @classmethod
    def check_tile(cls, tile_shape: tuple[int, ...]) -> None:
        """Refuse a tile shape the codec cannot encode."""
        if cls.tile_ndim == 2 and any(t != 1 for t in tile_shape[:-2]):
            raise ValueError(f"{cls.codec_id} tiles are 2-D: every tile axis but the last two must be 1")

    @classmethod
    def default_tile(cls, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The tile shape (C order) used when the writer is given none: one row per tile."""
        return (1,) * (len(shape) - 1) + (shape[-1],)

    @classmethod
    def check_pixels(cls, native: np.ndarray, zbitpix: int) -> None:
        """Refuse stored pixel values the codec cannot encode."""

    @classmethod
    def encode_tile(cls, tile: np.ndarray, options: WriteOptions) -> bytes:
        """One tile of native-order stored values, encoded as the COMPRESSED_DATA bytes."""
        big = tile.astype(tile.dtype.newbyteorder(">"))  # the byte codecs store big-endian pixels
        return cls().encode(big)

    @classmethod
    def zparams(cls, options: WriteOptions, bytepix: int) -> list[tuple[str, Any]]:
        """The ZNAMEn/ZVALn pairs a writer records."""
        return []

    # -- what readers ask ---------------------------------------------------------------------
    @classmethod
    def from_zparams(cls, params: dict, zbitpix: int) -> Codec:
        """The codec that decodes an HDU with these ZNAMEn/ZVALn parameters."""
        return cls()

    @property
    def many_itemsize(self) -> int | None:
        """The output itemsize `decode_many` requires (None: any)."""
        return None

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> Any:
        """One tile's COMPRESSED_DATA → flat integers (`stores_integers`) or the tile's
        big-endian bytes (a buffer)."""
        return self.decode(data)

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        """Decode tile i (``sizes[i]`` bytes at ``offsets[i]`` of ``buf``, ``npix[i]`` pixels, rows
        of ``ncols[i]`` for 2-D codecs) into ``out[dest[i]:]``, GIL-free; ``status[i]`` becomes
        `TILE_OK`, `TILE_MISMATCH` or `TILE_STOPPED` (``stop[0]`` raised by another chunk).
        ``stream``: ``out`` is a full read's output, far larger than the caches and faulted in
        already, which a codec that `streams_output` may write with streaming stores (others
        ignore it)."""
        raise NotImplementedError

    def decode_many_dequant(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray,
                            npix: np.ndarray, dest: np.ndarray, out: np.ndarray,
                            status: np.ndarray, stop: np.ndarray, zscale: np.ndarray,
                            zzero: np.ndarray, tile_index: np.ndarray, method: int, zdither0: int,
                            null_value: int | None) -> None:
        """`decode_many` of quantised tiles straight into the float ``out``: tile i is
        dequantised with ``zscale[i]``, ``zzero[i]`` and the dither of tile ``tile_index[i]``
        (``method``, ``zdither0``; integers equal to ``null_value`` become NaN). Only codecs
        that `fuses_dequant`."""
        raise NotImplementedError

    # -- one tile -----------------------------------------------------------------------------
    def decode(self, buf: Any, out: np.ndarray | None = None) -> Any:
        raise NotImplementedError

    def encode(self, buf: Any) -> bytes:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "id")
        return f"{type(self).__name__}({args})"


class Rice1(Codec):
    """RICE_1: Rice-coded pixel differences.

    Parameters
    ----------
    blocksize : int
        Pixels per coding block (ZNAME BLOCKSIZE, default 32).
    bytepix : int
        Bytes per integer pixel, 1, 2, 4 or 8 (ZNAME BYTEPIX, default 4).
    """

    codec_id = "RICE_1"
    aliases = ("RICE",)
    stores_integers = True
    int64_ok = False
    max_ratio = 1100  # ~205:1 on constant blocks
    has_many = True
    fuses_dequant = True

    def __init__(self, blocksize: int = 32, bytepix: int = 4) -> None:
        if bytepix not in (1, 2, 4, 8):
            raise ValueError(f"RICE_1 BYTEPIX must be 1, 2, 4 or 8, not {bytepix}")
        if not 0 < blocksize <= 4096:
            raise ValueError(f"RICE_1 BLOCKSIZE must be in 1..4096, not {blocksize}")
        self.blocksize = int(blocksize)
        self.bytepix = int(bytepix)

    def decode(self, buf: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode into ``out`` (native integers of itemsize ``bytepix``; required: it gives the
        pixel count)."""
        if out is None:
            raise ValueError("RICE_1 decode needs out= (the tile size is not in the stream)")
        _check(_rice.decode(_as_bytes(buf), out, self.bytepix, self.blocksize), self.codec_id)
        return out

    def encode(self, buf: Any) -> bytes:
        arr = np.ascontiguousarray(buf)
        return _rice.encode(arr, self.bytepix, self.blocksize)

    @classmethod
    def encode_tile(cls, tile: np.ndarray, options: WriteOptions) -> bytes:
        return cls(blocksize=options.blocksize, bytepix=tile.dtype.itemsize).encode(tile)

    @classmethod
    def zparams(cls, options: WriteOptions, bytepix: int) -> list[tuple[str, Any]]:
        return [("BLOCKSIZE", options.blocksize), ("BYTEPIX", bytepix)]

    @classmethod
    def from_zparams(cls, params: dict, zbitpix: int) -> Rice1:
        # The convention's default, and CFITSIO's: a stream without BYTEPIX codes 4-byte
        # integers whatever ZBITPIX is (old writers, e.g. m13_rice.fits from 2006).
        return cls(blocksize=int(params.get("BLOCKSIZE", 32)), bytepix=int(params.get("BYTEPIX", 4)))

    @property
    def many_itemsize(self) -> int | None:
        return self.bytepix

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        ints = np.empty(math.prod(shape), np.dtype(f"i{self.bytepix}") if self.bytepix > 1 else np.uint8)
        return self.decode(data, ints)

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        _rice.decode_many(buf, offsets, sizes, npix, dest, out, self.bytepix, self.blocksize,
                          status, stop)

    def decode_many_dequant(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray,
                            npix: np.ndarray, dest: np.ndarray, out: np.ndarray,
                            status: np.ndarray, stop: np.ndarray, zscale: np.ndarray,
                            zzero: np.ndarray, tile_index: np.ndarray, method: int, zdither0: int,
                            null_value: int | None) -> None:
        if self.bytepix != 4:
            raise ValueError(f"quantised RICE_1 tiles hold 4-byte integers, not BYTEPIX {self.bytepix}")
        _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, out, self.blocksize, status, stop,
                                  zscale, zzero, tile_index, method, zdither0, null_value is not None,
                                  0 if null_value is None else null_value, _quantize.random_table())

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "blocksize": self.blocksize, "bytepix": self.bytepix}


class Gzip1(Codec):
    """GZIP_1: the tile's big-endian bytes, deflated (gzip or zlib framing on decode)."""

    codec_id = "GZIP_1"
    aliases: ClassVar[tuple[str, ...]] = ("GZIP",)
    max_ratio = 1100  # deflate: ~1032:1
    has_many = True
    shuffled: ClassVar[bool] = False

    def __init__(self, level: int = 6) -> None:
        self.level = int(level)

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> Any:
        return self.decode(data, max_size=8 * math.prod(shape))

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        newer_libdeflate()  # once per process, before any tile is inflated
        _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, out.itemsize, self.shuffled,
                               status, stop, stream and self.streams_output)

    def decode(self, buf: Any, out: np.ndarray | None = None, *,
               max_size: int | None = None) -> Any:
        """Inflate ``buf``; into ``out``'s bytes when given (sizes must agree).

        ``max_size`` bounds the inflated size (a hostile tile cannot balloon in memory).
        """
        limit = max_size if max_size is not None else (out.nbytes if out is not None else None)
        backend = inflate_backend()
        try:
            d = backend.decompressobj(47)  # 32 + 15: gzip or zlib framing
            data = bytes(buf) if not isinstance(buf, bytes) else buf
            raw = d.decompress(data, limit + 1) if limit is not None else d.decompress(data)
        except (zlib.error, backend.error) as exc:
            raise CodecError(f"{self.codec_id}: corrupt tile ({exc})") from None
        if limit is not None and len(raw) > limit:
            raise CodecError(f"{self.codec_id}: tile inflates to more than {limit} bytes")
        return _raw_into(raw, out, f"{self.codec_id}: tile inflates to")

    def encode(self, buf: Any) -> bytes:
        data = _tile_bytes(buf)
        c = zlib.compressobj(self.level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "level": self.level}


class Gzip2(Gzip1):
    """GZIP_2: like GZIP_1 after shuffling the bytes of ``itemsize``-byte elements by position."""

    codec_id = "GZIP_2"
    aliases = ()
    shuffled = True
    streams_output = True  # its un-shuffle writes the output (GZIP_1 inflates into it directly)

    def __init__(self, itemsize: int = 4, level: int = 6) -> None:
        super().__init__(level)
        self.itemsize = int(itemsize)

    @classmethod
    def encode_tile(cls, tile: np.ndarray, options: WriteOptions) -> bytes:
        big = tile.astype(tile.dtype.newbyteorder(">"))
        return cls(itemsize=big.dtype.itemsize).encode(big)

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        """The tile's big-endian bytes, unshuffled by the element size its length implies."""
        npix = math.prod(shape)
        inflated = Gzip1().decode(data, max_size=8 * npix)
        itemsize = len(inflated) // npix if npix else 1
        if itemsize not in (1, 2, 4, 8) or itemsize * npix != len(inflated):
            raise CodecError(f"inflates to {len(inflated)} bytes for {npix} pixels")
        out = np.empty(len(inflated), np.uint8)
        _quantize.unshuffle(np.frombuffer(inflated, np.uint8), out, itemsize)
        return out  # read as any buffer: no bytes copy of the tile

    def decode(self, buf: Any, out: np.ndarray | None = None, *,
               max_size: int | None = None) -> Any:
        raw = super().decode(buf, max_size=max_size if out is None else out.nbytes)
        if len(raw) % self.itemsize:
            raise CodecError(f"{self.codec_id}: {len(raw)} bytes is not a multiple of {self.itemsize}")
        target = np.empty(len(raw), np.uint8) if out is None else out.reshape(-1).view(np.uint8)
        if target.size != len(raw):
            raise CodecError(f"{self.codec_id}: tile inflates to {len(raw)} bytes, expected {target.size}")
        _quantize.unshuffle(np.frombuffer(raw, np.uint8), target, self.itemsize)
        return target.tobytes() if out is None else out

    def encode(self, buf: Any) -> bytes:
        data = np.ascontiguousarray(buf).reshape(-1).view(np.uint8) if isinstance(buf, np.ndarray) \
            else np.frombuffer(bytes(buf), np.uint8)
        return super().encode(_quantize.shuffle(data, self.itemsize))

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "itemsize": self.itemsize, "level": self.level}


class Plio1(Codec):
    """PLIO_1: IRAF line lists for non-negative integer masks (values < 2^24)."""

    codec_id = "PLIO_1"
    aliases = ("PLIO",)
    stores_integers = True
    int64_ok = False
    max_ratio = 1 << 16  # runs of a constant tile cost a few bytes each
    heap_itemsize = 2
    has_many = True

    @classmethod
    def check_pixels(cls, native: np.ndarray, zbitpix: int) -> None:
        if zbitpix < 0:
            raise ValueError(f"{cls.codec_id} compresses only integer masks")
        lo, hi = (int(native.min()), int(native.max())) if native.size else (0, 0)
        if lo < 0 or hi >= 1 << 24:
            raise ValueError(f"{cls.codec_id} compressed image needs stored integer values in 0 .. 2^24 - 1 "
                             "(unsigned 16/32-bit images are stored offset by BZERO and cannot use it)")

    @classmethod
    def encode_tile(cls, tile: np.ndarray, options: WriteOptions) -> bytes:
        return cls().encode(tile)

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        return self.decode(data, np.empty(math.prod(shape), np.int32))

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        _plio.decode_many(buf, offsets, sizes, npix, dest, out, status, stop)

    def decode(self, buf: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode into the int32 ``out`` (required: it gives the pixel count)."""
        if out is None:
            raise ValueError("PLIO_1 decode needs out= (the tile size is not in the stream)")
        _check(_plio.decode(_as_bytes(buf), out.reshape(-1)), self.codec_id)
        return out

    def encode(self, buf: Any) -> bytes:
        arr = np.ascontiguousarray(buf, dtype=np.int64).reshape(-1)
        if arr.size and (arr.min() < 0 or arr.max() >= 1 << 24):
            raise ValueError("PLIO_1 encodes only values in 0 .. 2^24 - 1")
        return _plio.encode(arr.astype(np.int32))


class Hcompress1(Codec):
    """HCOMPRESS_1: the H-transform codec for 2-D tiles.

    Parameters
    ----------
    tile_shape : (int, int), optional
        Tile shape in C order (rows, columns); needed by `decode` and `encode` (a reader's
        codec has none: its tiles differ at the edges).
    smooth : bool
        Smooth the coefficients on decode (ZNAME SMOOTH).
    scale : float
        Quantisation scale on encode (ZNAME SCALE; 0 = lossless).
    narrow : bool
        Decode in 32-bit arithmetic, as CFITSIO decodes 8- and 16-bit images (64-bit otherwise;
        the two differ only where a hostile stream overflows 32 bits).
    """

    codec_id = "HCOMPRESS_1"
    aliases = ("HCOMPRESS",)
    stores_integers = True
    int64_ok = False
    max_ratio = 1 << 16  # quadtrees of constant tiles cost a few bytes each
    tile_ndim = 2
    has_many = True

    def __init__(self, tile_shape: tuple[int, int] | None = None, smooth: bool = False,
                 scale: float = 0.0, narrow: bool = False) -> None:
        self.tile_shape = (int(tile_shape[0]), int(tile_shape[1])) if tile_shape is not None else None
        self.smooth = bool(smooth)
        self.scale = float(scale)
        self.narrow = bool(narrow)

    @classmethod
    def default_tile(cls, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) >= 2:
            return (1,) * (len(shape) - 2) + (min(16, shape[-2]), shape[-1])
        return super().default_tile(shape)

    @classmethod
    def encode_tile(cls, tile: np.ndarray, options: WriteOptions) -> bytes:
        two_d = tile.reshape(-1, tile.shape[-1]) if tile.ndim >= 2 else tile.reshape(1, -1)
        return cls(tile_shape=two_d.shape, scale=options.hcomp_scale).encode(two_d)

    @classmethod
    def zparams(cls, options: WriteOptions, bytepix: int) -> list[tuple[str, Any]]:
        scale = float(options.hcomp_scale) if options.hcomp_scale else 0
        return [("SCALE", scale), ("SMOOTH", int(bool(options.hcomp_smooth)))]

    @classmethod
    def from_zparams(cls, params: dict, zbitpix: int) -> Hcompress1:
        # CFITSIO decodes 8- and 16-bit images in 32-bit arithmetic, others in 64-bit
        return cls(smooth=bool(params.get("SMOOTH", 0)), narrow=zbitpix in (8, 16))

    def _shaped(self, tile_shape: tuple[int, int]) -> Hcompress1:
        return Hcompress1(tile_shape, smooth=self.smooth, scale=self.scale, narrow=self.narrow)

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        hshape = (1, shape[0]) if len(shape) < 2 else (math.prod(shape[:-1]), shape[-1])
        return self._shaped(hshape).decode(data).reshape(-1)

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        if ncols is None:
            raise ValueError(f"{self.codec_id} decode_many needs ncols= (tiles are 2-D)")
        _hcompress.decode_many(buf, offsets, sizes, npix // ncols, ncols, dest, out, self.smooth,
                               self.narrow, status, stop)

    def _shape(self) -> tuple[int, int]:
        if self.tile_shape is None:
            raise ValueError(f"{self.codec_id} needs tile_shape= to decode or encode one tile")
        return self.tile_shape

    def decode(self, buf: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode to int64 pixels of ``tile_shape`` (into ``out`` when given)."""
        ny, nx = self._shape()
        target = out if out is not None and out.dtype == np.int64 else np.empty(ny * nx, np.int64)
        _check(_hcompress.decode(_as_bytes(buf), target.reshape(-1), ny, nx, self.smooth,
                                 self.narrow), self.codec_id)
        if out is not None and target is not out:
            out.reshape(-1)[:] = target
            return out
        return target.reshape(self._shape())

    def encode(self, buf: Any) -> bytes:
        arr = np.ascontiguousarray(buf, dtype=np.int64).reshape(self._shape())
        return _hcompress.encode(arr, int(round(self.scale)))

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "tile_shape": self.tile_shape, "smooth": self.smooth,
                "scale": self.scale, "narrow": self.narrow}


class Bzip2(Codec):
    """BZIP2_1: the tile's big-endian integers as one bzip2 stream (outside the FITS standard).

    The integers are ZBITPIX's width for 8- and 16-bit images and 4 bytes otherwise (32-bit
    images and quantised floats), as CFITSIO's ``imcomp_compress_tile`` and
    ``imcomp_decompress_tile`` lay them out; there are no ZNAMEn/ZVALn parameters.

    Parameters
    ----------
    width : int
        Bytes per stored integer, 1, 2 or 4 (readers: from ZBITPIX; the one-tile `decode`
        ignores it).
    level : int
        The bzip2 block size in 100 kB (1..9) on encode; CFITSIO asks for 9.
    """

    codec_id = "BZIP2_1"
    aliases = ("BZIP2",)
    stores_integers = True  # CFITSIO refuses lossless floats for it: floats are quantised
    int64_ok = False  # CFITSIO has no 8-byte layout for it
    cfitsio_reads = False  # public CFITSIO releases have the bzip2 calls commented out
    # A constant run costs a few bytes per ~45 MB (bzip2 run-length codes it before its
    # 900 kB blocks): 64 MiB of zeros measured 79 bytes.
    max_ratio = 1 << 23
    has_many = True

    def __init__(self, width: int = 4, level: int = 9) -> None:
        if width not in (1, 2, 4):
            raise ValueError(f"BZIP2_1 integers are 1, 2 or 4 bytes wide, not {width}")
        if not 1 <= level <= 9:
            raise ValueError(f"bzip2 level must be in 1..9, not {level}")
        self.width = int(width)
        self.level = int(level)

    @classmethod
    def from_zparams(cls, params: dict, zbitpix: int) -> Bzip2:
        return cls(width={8: 1, 16: 2}.get(zbitpix, 4))

    @property
    def many_itemsize(self) -> int | None:
        return self.width

    def _ints(self, raw: Any, npix: int) -> np.ndarray:
        if len(raw) != npix * self.width:
            raise CodecError(f"{self.codec_id}: tile decompresses to {len(raw)} bytes, expected "
                             f"{npix * self.width} ({npix} pixels of {self.width} bytes)")
        return np.frombuffer(raw, np.uint8 if self.width == 1 else np.dtype(f">i{self.width}"))

    def decode_tile(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        """The tile's integers (big-endian), checked to fill the tile exactly."""
        npix = math.prod(shape)
        return self._ints(self.decode(data, max_size=npix * self.width), npix)

    def decode_many(self, buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                    dest: np.ndarray, out: np.ndarray, status: np.ndarray, stop: np.ndarray,
                    ncols: np.ndarray | None = None, stream: bool = False) -> None:
        # The standard library's bz2 releases the GIL while it decompresses, so chunks of
        # tiles on the thread pool run in parallel; a tile that fails is left to `decode_tile`.
        flat = out.reshape(-1)
        if out.itemsize != self.width:
            raise ValueError(f"{self.codec_id}: out must hold {self.width}-byte integers")
        for i in range(len(offsets)):
            if stop[0]:
                status[i:] = TILE_STOPPED
                return
            off, n, d = int(offsets[i]), int(npix[i]), int(dest[i])
            try:
                ints = self._ints(self.decode(buf[off:off + int(sizes[i])], max_size=n * self.width), n)
            except CodecError:
                status[i] = TILE_MISMATCH
                continue
            flat[d:d + n] = ints
            status[i] = TILE_OK

    def decode(self, buf: Any, out: np.ndarray | None = None, *,
               max_size: int | None = None) -> Any:
        """Decompress one stream (bytes after its end are ignored, as CFITSIO's
        ``BZ2_bzBuffToBuffDecompress`` ignores them); into ``out``'s bytes when given.

        ``max_size`` bounds the decompressed size (a hostile tile cannot balloon in memory).
        """
        limit = max_size if max_size is not None else (out.nbytes if out is not None else -1)
        d = bz2.BZ2Decompressor()
        try:
            raw = d.decompress(buf, limit + 1 if limit >= 0 else -1)
        except (OSError, ValueError) as exc:
            raise CodecError(f"{self.codec_id}: corrupt tile ({exc})") from None
        if limit >= 0 and len(raw) > limit:
            raise CodecError(f"{self.codec_id}: tile decompresses to more than {limit} bytes")
        if not d.eof:
            raise CodecError(f"{self.codec_id}: truncated tile (the bzip2 stream does not end)")
        return _raw_into(raw, out, f"{self.codec_id}: tile decompresses to")

    def encode(self, buf: Any) -> bytes:
        """Compress the bytes of ``buf`` (big-endian integers) as one stream."""
        data = np.ascontiguousarray(buf).reshape(-1).view(np.uint8).data \
            if isinstance(buf, np.ndarray) else bytes(buf)
        return bz2.compress(data, self.level)

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "width": self.width, "level": self.level}


class NoCompress(Codec):
    """NOCOMPRESS: the tile's big-endian bytes as they are."""

    codec_id = "NOCOMPRESS"
    cfitsio_reads = False
    offered = False  # CFITSIO cannot read it: written only where asked for by its name

    def decode(self, buf: Any, out: np.ndarray | None = None) -> Any:
        return _raw_into(bytes(buf), out, f"{self.codec_id}: tile holds")

    def encode(self, buf: Any) -> bytes:
        return _tile_bytes(buf)


REGISTRY: dict[str, type[Codec]] = {
    c.codec_id: c for c in (Rice1, Gzip1, Gzip2, Plio1, Hcompress1, Bzip2, NoCompress)
}
REGISTRY["RICE_ONE"] = Rice1  # the convention's early spelling
#: The codec writers use when told only to compress.
DEFAULT_CODEC = Rice1.codec_id


def lookup(zcmptype: Any) -> type[Codec] | None:
    """The codec class of a ZCMPTYPE as found in a header (any case and padding), or None."""
    return REGISTRY.get(str(zcmptype).strip().upper())


def writer_codec(zcmptype: str) -> type[Codec]:
    """The codec class of a ZCMPTYPE a writer chose (see `writer_names`)."""
    return REGISTRY[zcmptype]


def writer_names() -> dict[str, str]:
    """Names writers accept (ZCMPTYPEs and short aliases, upper case) → ZCMPTYPE, for the
    codecs `offered` to them."""
    out: dict[str, str] = {}
    for name, cls in REGISTRY.items():
        if cls.offered and name == cls.codec_id:
            out[name] = name
            out.update((alias, name) for alias in cls.aliases)
    return out


def get_codec(config: Any, **params: Any) -> Codec:
    """A codec from a ZCMPTYPE (plus parameters) or a ``get_config()`` dict."""
    if isinstance(config, dict):
        params = {**{k: v for k, v in config.items() if k != "id"}, **params}
        config = config["id"]
    name = str(config).strip().upper()
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unsupported compression algorithm {config!r}") from None
    return cls(**params)

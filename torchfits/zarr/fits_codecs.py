"""numcodecs codecs for FITS tiles and FITS pixel scaling, thin adapters over the tile codecs of
`torchfits.image.codec_registry`.

A tile codec decodes one tile's compressed bytes (one COMPRESSED_DATA cell of a tile-compressed
HDU) into the pixels of one zarr chunk of the tile's full shape, stored as FITS stores them:
big-endian integers of ZBITPIX (``uint8`` for 8 bits), or big-endian floats for floating-point
images. A FITS edge tile is smaller than the others; zarr gives every chunk the full shape, so
the codec places the edge tile's pixels in the corner of a zero-filled chunk and zarr drops the
rest. Encoding takes a full chunk and writes it as one tile.

The codec sees a tile's bytes and nothing else: not which tile it is. Two things need that:

- edge tiles whose pixel layout is not a prefix of a full tile's (a tile axis other than the
  slowest non-unit one is cut by the image edge), and
- quantised floating-point tiles (ZSCALE/ZZERO per tile, dither seeds per tile number).

For those a codec carries ``tiles``: a fingerprint (BLAKE2b, 10 bytes) of each tile's compressed
bytes → its tile number, and the per-tile scaling in ``quantize``. The reference builder
(`torchfits.zarr.references`) reads every tile once to make them; tiles with the same bytes are
accepted only where they decode to the same chunk. Otherwise the codec tries the tile shapes it
is given (``tile`` first, then ``clipped``) until one decodes, which is exact for prefix layouts:
the first pixels of a sequential stream do not depend on how many follow.

`FitsScale` is the BSCALE/BZERO/BLANK filter: physical = BZERO + BSCALE × stored, in double
precision rounded once to the result dtype; BLANK → NaN; the unsigned and signed-byte
conventions (BZERO = 2^(BITPIX-1), or -128 for BITPIX 8) flip the sign bit, exactly.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, ClassVar

import numcodecs
import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy

from .._kernels import _quantize
from ..errors import CodecError
from ..image.codec_registry import Codec, Gzip1, WriteOptions, get_codec

__all__ = ["FitsTileCodec", "FitsRice1", "FitsGzip1", "FitsGzip2", "FitsHcompress1", "FitsPlio1",
           "FitsScale", "CODECS", "fingerprint", "register_codecs", "storage_dtype"]

_STORAGE = {8: "u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}


def storage_dtype(bitpix: int) -> np.dtype[Any]:
    """The dtype FITS stores pixels of this BITPIX in (big-endian; ``uint8`` for 8 bits)."""
    try:
        return np.dtype(_STORAGE[int(bitpix)])
    except KeyError:
        raise ValueError(f"invalid BITPIX {bitpix!r}") from None


def fingerprint(data: Any) -> str:
    """The fingerprint of a tile's compressed bytes that a codec's ``tiles`` map is keyed by."""
    return hashlib.blake2b(memoryview(data).cast("B"), digest_size=10).hexdigest()


def _values(buf: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """``buf`` as a flat array of ``dtype``: an array of numbers of that kind and width by value
    (any byte order: zarr 3 hands codecs native arrays), anything else (bytes, ``uint8``) by
    reinterpreting its bytes."""
    if isinstance(buf, np.ndarray) and buf.dtype.kind == dtype.kind and buf.dtype.itemsize == dtype.itemsize:
        return np.ascontiguousarray(buf).reshape(-1).astype(dtype, copy=False)
    return ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1).view(dtype)


def _shape(value: Any, what: str) -> tuple[int, ...]:
    shape = tuple(int(n) for n in value)
    if not shape or any(n < 1 for n in shape):
        raise ValueError(f"{what} must be a non-empty list of positive sizes, not {value!r}")
    return shape


class FitsTileCodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """The base of the FITS tile codecs (see the module docstring).

    Parameters
    ----------
    bitpix : int
        ZBITPIX of the image: 8, 16, 32, 64, -32 or -64.
    tile : list of int
        The full tile shape in C order (reversed ZTILEn): the zarr chunk shape.
    clipped : list of lists of int, optional
        Shapes an edge tile may have, tried after ``tile`` when ``tiles`` is not given; each must
        lay its pixels out as a prefix of a full tile's.
    image : list of int, optional
        The image shape in C order (reversed ZNAXISn); needed with ``tiles``.
    tiles : dict, optional
        Fingerprint of a tile's compressed bytes → tile number (`fingerprint`).
    quantize : dict, optional
        Quantised floating-point tiles: ``method`` (0 no dither, 1 or 2 subtractive dither),
        ``zdither0``, ``zblank`` (the null code or None), ``zscale`` and ``zzero`` (one value
        per tile, or one for all) and ``gzip`` (numbers of tiles stored losslessly in
        GZIP_COMPRESSED_DATA). Needs ``tiles``.
    """

    codec_id: ClassVar[str] = ""
    zcmptype: ClassVar[str] = ""

    def __init__(self, bitpix: int = 32, tile: Any = (1,), clipped: Any = None, image: Any = None,
                 tiles: dict[str, int] | None = None, quantize: dict[str, Any] | None = None) -> None:
        self.bitpix = int(bitpix)
        self._storage = storage_dtype(self.bitpix)
        self.tile = list(_shape(tile, "tile"))
        self.clipped = [list(_shape(s, "clipped shape")) for s in clipped] if clipped else None
        self.image = list(_shape(image, "image")) if image is not None else None
        self.tiles = {str(k): int(v) for k, v in tiles.items()} if tiles is not None else None
        self.quantize = dict(quantize) if quantize is not None else None
        if self.tiles is not None and self.image is None:
            raise ValueError(f"{self.codec_id}: tiles= needs image= (the image shape)")
        if self.quantize is not None:
            if self.tiles is None:
                raise ValueError(f"{self.codec_id}: quantize= needs tiles= (the tile numbers)")
            if self.bitpix > 0:
                raise ValueError(f"{self.codec_id}: quantize= is for floating-point images (BITPIX < 0)")
        if self.image is not None and len(self.image) != len(self.tile):
            raise ValueError(f"{self.codec_id}: image {self.image} and tile {self.tile} differ in axes")
        self._codec = self._tile_codec()
        self._gzip = set(int(k) for k in (self.quantize or {}).get("gzip", ()))

    # -- what subclasses provide ------------------------------------------------------------------
    def _tile_codec(self) -> Codec:
        return get_codec(self.zcmptype)

    def _decode_values(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        """One tile's bytes → its values (flat): integers for the integer codecs, else the
        stored big-endian values."""
        decoded = self._codec.decode_tile(data, shape)
        if self._codec.stores_integers:
            return np.asarray(decoded).reshape(-1)
        return self._raw(decoded, shape)

    def _raw(self, raw: Any, shape: tuple[int, ...]) -> np.ndarray:
        npix = math.prod(shape)
        dt = np.dtype(">i4") if self.quantize is not None else self._storage
        if len(raw) != npix * dt.itemsize:
            raise CodecError(f"{self.zcmptype}: tile holds {len(raw)} bytes, not {npix} pixels of "
                             f"{dt.itemsize} bytes")
        return np.frombuffer(raw, dt)

    def _encode_values(self, tile: np.ndarray) -> bytes:
        return self._codec.encode_tile(tile, WriteOptions())

    # -- numcodecs ----------------------------------------------------------------------------
    def decode(self, buf: Any, out: Any = None) -> Any:
        data = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        full = tuple(self.tile)
        if self.tiles is not None:
            k = self.tiles.get(fingerprint(data))
            if k is None:
                raise CodecError(f"{self.codec_id}: these {data.size} bytes are none of the tiles this "
                                 "codec was made for (the file changed since its references were built?)")
            chunk = self.decode_tile(data, k)
        else:
            chunk = self._decode_prefix(data, full)
        return ndarray_copy(chunk, out) if out is not None else chunk

    def _decode_prefix(self, data: np.ndarray, full: tuple[int, ...]) -> np.ndarray:
        shapes = [full] + [tuple(s) for s in self.clipped or ()]
        error: CodecError | None = None
        for shape in shapes:
            try:
                values = self._decode_values(data, shape)
            except CodecError as exc:
                error = error or exc
                continue
            if values.size > math.prod(full):
                error = CodecError(f"{self.zcmptype}: tile of {values.size} pixels is larger than "
                                   f"the chunk {full}")
                continue
            chunk = np.zeros(math.prod(full), self._storage)
            chunk[:values.size] = values
            return chunk.reshape(full)
        raise error if error is not None else CodecError(
            f"{self.zcmptype}: the tile is none of the shapes {shapes}")

    def tile_shape(self, k: int) -> tuple[int, ...]:
        """The shape of tile ``k`` (edge tiles are cut by the image edge); needs ``image``."""
        if self.image is None:
            raise ValueError(f"{self.codec_id}: tile_shape needs image=")
        grid = [-(-n // t) for n, t in zip(self.image, self.tile)]
        if not 0 <= k < math.prod(grid):
            raise CodecError(f"{self.codec_id}: tile {k} is outside the {math.prod(grid)} tiles")
        pos = np.unravel_index(k, grid)
        return tuple(min(t, n - int(i) * t) for i, t, n in zip(pos, self.tile, self.image))

    def decode_tile(self, data: Any, k: int) -> np.ndarray:
        """Tile ``k`` from its compressed bytes as a full chunk (the tile in its corner)."""
        shape = self.tile_shape(k)
        q = self.quantize
        out_dtype = self._storage
        if k in self._gzip:  # stored losslessly beside the quantised tiles
            values = np.frombuffer(Gzip1().decode(data, max_size=8 * math.prod(shape)), self._storage)
            if values.size != math.prod(shape):
                raise CodecError(f"GZIP_COMPRESSED_DATA: tile {k} holds {values.size} pixels, not "
                                 f"{math.prod(shape)}")
        elif q is not None:
            ints = self._decode_values(data, shape)
            values = np.empty(math.prod(shape), self._storage.newbyteorder("="))
            method = int(q.get("method", 1))
            seed = _quantize.dither_seed(k, int(q.get("zdither0", 1))) if method else 0
            blank = q.get("zblank")
            _quantize.dequantize(np.ascontiguousarray(ints, np.int32), values,
                                 self._per_tile("zscale", k, 1.0), self._per_tile("zzero", k, 0.0),
                                 method, seed, blank is not None, int(blank) if blank is not None else 0)
        else:
            values = self._decode_values(data, shape)
            if values.size != math.prod(shape):
                raise CodecError(f"{self.zcmptype}: tile {k} holds {values.size} pixels, not "
                                 f"{math.prod(shape)}")
        chunk = np.zeros(tuple(self.tile), out_dtype)
        chunk[tuple(slice(0, n) for n in shape)] = values.reshape(shape)
        return chunk

    def _per_tile(self, name: str, k: int, default: float) -> float:
        value = (self.quantize or {}).get(name, default)
        return float(value[k] if isinstance(value, (list, tuple)) else value)

    def encode(self, buf: Any) -> bytes:
        if self.quantize is not None:
            raise CodecError(f"{self.codec_id}: quantised tiles are read-only here; write quantised "
                             "images with torchfits.write(..., compress=..., quantize_level=...)")
        values = _values(buf, self._storage)
        full = tuple(self.tile)
        if values.size != math.prod(full):
            raise CodecError(f"{self.codec_id}: a chunk of {values.size} pixels is not a {full} tile")
        return self._encode_values(values.astype(self._storage.newbyteorder("=")).reshape(full))

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"id": self.codec_id}
        config.update((k, v) for k, v in self.__dict__.items() if not k.startswith("_") and v is not None)
        return config

    def __repr__(self) -> str:
        config = self.get_config()
        for key in ("tiles", "quantize"):
            if key in config:
                config[key] = f"<{len(config[key])} entries>"
        args = ", ".join(f"{k}={v!r}" for k, v in config.items() if k != "id")
        return f"{type(self).__name__}({args})"


class FitsRice1(FitsTileCodec):
    """RICE_1 tiles (``blocksize``: ZNAME BLOCKSIZE, default 32; ``bytepix``: ZNAME BYTEPIX,
    default 4, the integer width the stream codes)."""

    codec_id = "fits_rice_1"
    zcmptype = "RICE_1"

    def __init__(self, bitpix: int = 32, tile: Any = (1,), blocksize: int = 32, bytepix: int = 4,
                 **kwargs: Any) -> None:
        self.blocksize = int(blocksize)
        self.bytepix = int(bytepix)
        super().__init__(bitpix, tile, **kwargs)

    def _tile_codec(self) -> Codec:
        return get_codec(self.zcmptype, blocksize=self.blocksize, bytepix=self.bytepix)

    def _encode_values(self, tile: np.ndarray) -> bytes:
        ints = tile.astype(np.uint8 if self.bytepix == 1 else np.dtype(f"i{self.bytepix}"))
        return self._codec.encode(ints)


class FitsGzip1(FitsTileCodec):
    """GZIP_1 tiles: the tile's big-endian bytes, deflated (``level`` on encode)."""

    codec_id = "fits_gzip_1"
    zcmptype = "GZIP_1"

    def __init__(self, bitpix: int = 32, tile: Any = (1,), level: int = 6, **kwargs: Any) -> None:
        self.level = int(level)
        super().__init__(bitpix, tile, **kwargs)

    def _tile_codec(self) -> Codec:
        return get_codec(self.zcmptype, level=self.level)

    def _decode_values(self, data: Any, shape: tuple[int, ...]) -> np.ndarray:
        # The inflated size tells how many pixels the tile has: no need to try shapes.
        width = 4 if self.quantize is not None else self._storage.itemsize
        raw = self._codec.decode(data, max_size=width * math.prod(self.tile))  # type: ignore[call-arg]
        npix = len(raw) // width
        sizes = [math.prod(s) for s in [self.tile] + (self.clipped or [])]
        if self.tiles is None and npix not in sizes or len(raw) % width:
            raise CodecError(f"{self.zcmptype}: tile inflates to {len(raw)} bytes, which is no tile "
                             f"of {sizes} pixels of {width} bytes")
        dt = np.dtype(">i4") if self.quantize is not None else self._storage
        return np.frombuffer(raw, dt)

    def _encode_values(self, tile: np.ndarray) -> bytes:
        return self._codec.encode(tile.astype(self._storage))


class FitsGzip2(FitsGzip1):
    """GZIP_2 tiles: like GZIP_1 after shuffling the bytes of each pixel by position."""

    codec_id = "fits_gzip_2"
    zcmptype = "GZIP_2"

    def _tile_codec(self) -> Codec:
        width = 4 if self.quantize is not None else self._storage.itemsize
        return get_codec(self.zcmptype, itemsize=width, level=self.level)


class FitsPlio1(FitsTileCodec):
    """PLIO_1 tiles: IRAF line lists (non-negative integers below 2^24)."""

    codec_id = "fits_plio_1"
    zcmptype = "PLIO_1"


class FitsHcompress1(FitsTileCodec):
    """HCOMPRESS_1 tiles (``smooth``: ZNAME SMOOTH on decode; ``scale``: ZNAME SCALE on encode,
    0 = lossless). Tiles are 2-D: every tile axis but the last two is 1."""

    codec_id = "fits_hcompress_1"
    zcmptype = "HCOMPRESS_1"

    def __init__(self, bitpix: int = 32, tile: Any = (1,), smooth: bool = False, scale: float = 0.0,
                 **kwargs: Any) -> None:
        self.smooth = bool(smooth)
        self.scale = float(scale)
        super().__init__(bitpix, tile, **kwargs)

    def _tile_codec(self) -> Codec:
        # CFITSIO decodes 8- and 16-bit images in 32-bit arithmetic, others in 64-bit
        return get_codec(self.zcmptype, smooth=self.smooth, scale=self.scale,
                         narrow=self.bitpix in (8, 16))

    def _encode_values(self, tile: np.ndarray) -> bytes:
        return self._codec.encode_tile(tile, WriteOptions(hcomp_scale=self.scale))


class FitsScale(numcodecs.abc.Codec):  # type: ignore[misc]
    """BSCALE/BZERO/BLANK as a filter: stored pixels (big-endian, of ``bitpix``) ↔ physical values.

    Parameters
    ----------
    bitpix : int
        BITPIX of the stored pixels.
    bscale, bzero : float
        physical = bzero + bscale × stored.
    blank : int, optional
        The stored value of null pixels (integer images): decoded as NaN.
    dtype : str
        The result dtype (torchfits's rules: ``float32`` for 8- and 16-bit and float32 images,
        ``float64`` otherwise; ``int8``/``uint16``/``uint32``/``uint64`` for the sign-bit
        conventions, which are exact).
    """

    codec_id = "fits_scale"

    def __init__(self, bitpix: int = 16, bscale: float = 1.0, bzero: float = 0.0,
                 blank: int | None = None, dtype: str = "float32") -> None:
        self.bitpix = int(bitpix)
        self.bscale = float(bscale)
        self.bzero = float(bzero)
        self.blank = int(blank) if blank is not None else None
        self.dtype = np.dtype(dtype).str
        self._storage = storage_dtype(self.bitpix)
        self._result = np.dtype(dtype)
        self._flip = self.bitpix > 0 and self._result.kind in "iu"
        if self._flip and self._result.itemsize != self._storage.itemsize:
            raise ValueError(f"fits_scale: an integer result must have the width of BITPIX {self.bitpix}")
        if self.bscale == 0.0:
            raise ValueError("fits_scale: BSCALE must not be 0")

    def _signbit(self, itemsize: int) -> Any:
        return np.array(1 << (8 * itemsize - 1), np.dtype(f"u{itemsize}"))

    def decode(self, buf: Any, out: Any = None) -> Any:
        stored = _values(buf, self._storage)
        if self._flip:
            u = stored.astype(stored.dtype.newbyteorder("=")).view(f"u{stored.dtype.itemsize}")
            result = (u ^ self._signbit(u.dtype.itemsize)).view(self._result)
        else:
            values = stored.astype(np.float64) * self.bscale + self.bzero
            if self.blank is not None and self.bitpix > 0:
                values[stored == self.blank] = np.nan
            result = values.astype(self._result)
        return ndarray_copy(result, out) if out is not None else result

    def encode(self, buf: Any) -> Any:
        values = _values(buf, self._result)
        if self._flip:
            u = values.astype(values.dtype.newbyteorder("=")).view(f"u{values.dtype.itemsize}")
            return (u ^ self._signbit(u.dtype.itemsize)).view(self._storage.newbyteorder("=")) \
                .astype(self._storage)
        stored = (values.astype(np.float64) - self.bzero) / self.bscale
        if self.bitpix < 0:
            return stored.astype(self._storage)
        nulls = np.isnan(stored)
        info = np.iinfo(self._storage)
        ints = np.clip(np.round(np.where(nulls, 0, stored)), info.min, info.max).astype(self._storage)
        if nulls.any():
            if self.blank is None:
                raise CodecError("fits_scale: NaN values need blank= (the stored null value)")
            ints[nulls] = self.blank
        return ints

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "bitpix": self.bitpix, "bscale": self.bscale, "bzero": self.bzero,
                "blank": self.blank, "dtype": self.dtype}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "id")
        return f"FitsScale({args})"


#: ZCMPTYPE → the numcodecs codec of its tiles.
CODECS: dict[str, type[FitsTileCodec]] = {
    c.zcmptype: c for c in (FitsRice1, FitsGzip1, FitsGzip2, FitsHcompress1, FitsPlio1)}


def register_codecs() -> None:
    """Register the codecs with numcodecs. Importing this module does it, and the
    ``numcodecs.codecs`` entry points of an installed torchfits load it when a codec id is
    first looked up."""
    for cls in (*CODECS.values(), FitsScale):
        numcodecs.register_codec(cls)


register_codecs()

"""Tile codecs of the FITS tiled image compression convention, behind one small contract.

Every codec has ``codec_id`` (its ZCMPTYPE), ``decode(buf, out=None)``, ``encode(buf)`` and
``get_config()``; :data:`REGISTRY` maps ZCMPTYPE → codec class and :func:`get_codec` builds one.
"""
from __future__ import annotations

import functools
import zlib
from typing import Any, ClassVar, Optional

import numpy as np

from .._kernels import _hcompress
from .._kernels import _plio
from .._kernels import _quantize
from .._kernels import _rice
from ..errors import CodecError

__all__ = ["Codec", "Rice1", "Gzip1", "Gzip2", "Plio1", "Hcompress1", "NoCompress", "REGISTRY",
           "get_codec", "CodecError", "inflate_backend"]


_ERRORS = {-1: "truncated tile", -2: "corrupt tile", -3: "out of memory"}


def _check(rc: int, codec_id: str) -> None:
    if rc != 0:
        raise CodecError(f"{codec_id}: {_ERRORS.get(rc, f'error {rc}')}")


@functools.lru_cache(maxsize=None)
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


class Codec:
    """Base class: one tile in, one tile out."""

    codec_id: ClassVar[str] = ""

    def decode(self, buf: Any, out: Optional[np.ndarray] = None) -> Any:
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

    def __init__(self, blocksize: int = 32, bytepix: int = 4) -> None:
        if bytepix not in (1, 2, 4, 8):
            raise ValueError(f"RICE_1 BYTEPIX must be 1, 2, 4 or 8, not {bytepix}")
        if not 0 < blocksize <= 4096:
            raise ValueError(f"RICE_1 BLOCKSIZE must be in 1..4096, not {blocksize}")
        self.blocksize = int(blocksize)
        self.bytepix = int(bytepix)

    def decode(self, buf: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Decode into ``out`` (native integers of itemsize ``bytepix``; required: it gives the
        pixel count)."""
        if out is None:
            raise ValueError("RICE_1 decode needs out= (the tile size is not in the stream)")
        _check(_rice.decode(_as_bytes(buf), out, self.bytepix, self.blocksize), self.codec_id)
        return out

    def encode(self, buf: Any) -> bytes:
        arr = np.ascontiguousarray(buf)
        return _rice.encode(arr, self.bytepix, self.blocksize)

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "blocksize": self.blocksize, "bytepix": self.bytepix}


class Gzip1(Codec):
    """GZIP_1: the tile's big-endian bytes, deflated (gzip or zlib framing on decode)."""

    codec_id = "GZIP_1"

    def __init__(self, level: int = 6) -> None:
        self.level = int(level)

    def decode(self, buf: Any, out: Optional[np.ndarray] = None, *,
               max_size: Optional[int] = None) -> Any:
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
        if out is None:
            return raw
        view = out.reshape(-1).view(np.uint8)
        if len(raw) != view.size:
            raise CodecError(f"{self.codec_id}: tile inflates to {len(raw)} bytes, expected {view.size}")
        view[:] = np.frombuffer(raw, np.uint8)
        return out

    def encode(self, buf: Any) -> bytes:
        data = np.ascontiguousarray(buf).tobytes() if isinstance(buf, np.ndarray) else bytes(buf)
        c = zlib.compressobj(self.level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "level": self.level}


class Gzip2(Gzip1):
    """GZIP_2: like GZIP_1 after shuffling the bytes of ``itemsize``-byte elements by position."""

    codec_id = "GZIP_2"

    def __init__(self, itemsize: int = 4, level: int = 6) -> None:
        super().__init__(level)
        self.itemsize = int(itemsize)

    def decode(self, buf: Any, out: Optional[np.ndarray] = None, *,
               max_size: Optional[int] = None) -> Any:
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

    def decode(self, buf: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
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
    tile_shape : (int, int)
        Tile shape in C order (rows, columns).
    smooth : bool
        Smooth the coefficients on decode (ZNAME SMOOTH).
    scale : float
        Quantisation scale on encode (ZNAME SCALE; 0 = lossless).
    narrow : bool
        Decode in 32-bit arithmetic, as CFITSIO decodes 8- and 16-bit images (64-bit otherwise;
        the two differ only where a hostile stream overflows 32 bits).
    """

    codec_id = "HCOMPRESS_1"

    def __init__(self, tile_shape: tuple[int, int], smooth: bool = False, scale: float = 0.0,
                 narrow: bool = False) -> None:
        self.tile_shape = (int(tile_shape[0]), int(tile_shape[1]))
        self.smooth = bool(smooth)
        self.scale = float(scale)
        self.narrow = bool(narrow)

    def decode(self, buf: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Decode to int64 pixels of ``tile_shape`` (into ``out`` when given)."""
        ny, nx = self.tile_shape
        target = out if out is not None and out.dtype == np.int64 else np.empty(ny * nx, np.int64)
        _check(_hcompress.decode(_as_bytes(buf), target.reshape(-1), ny, nx, self.smooth,
                                 self.narrow), self.codec_id)
        if out is not None and target is not out:
            out.reshape(-1)[:] = target
            return out
        return target.reshape(self.tile_shape)

    def encode(self, buf: Any) -> bytes:
        arr = np.ascontiguousarray(buf, dtype=np.int64).reshape(self.tile_shape)
        return _hcompress.encode(arr, int(round(self.scale)))

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "tile_shape": self.tile_shape, "smooth": self.smooth,
                "scale": self.scale, "narrow": self.narrow}


class NoCompress(Codec):
    """NOCOMPRESS: the tile's big-endian bytes as they are."""

    codec_id = "NOCOMPRESS"

    def decode(self, buf: Any, out: Optional[np.ndarray] = None) -> Any:
        raw = bytes(buf)
        if out is None:
            return raw
        view = out.reshape(-1).view(np.uint8)
        if len(raw) != view.size:
            raise CodecError(f"NOCOMPRESS: tile holds {len(raw)} bytes, expected {view.size}")
        view[:] = np.frombuffer(raw, np.uint8)
        return out

    def encode(self, buf: Any) -> bytes:
        return np.ascontiguousarray(buf).tobytes() if isinstance(buf, np.ndarray) else bytes(buf)


REGISTRY: dict[str, type[Codec]] = {
    c.codec_id: c for c in (Rice1, Gzip1, Gzip2, Plio1, Hcompress1, NoCompress)
}
REGISTRY["RICE_ONE"] = Rice1  # the convention's early spelling


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

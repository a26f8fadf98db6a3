"""The FITS codecs as zarr format 3 codecs, named ``numcodecs.<id>`` as zarr names the numcodecs
codecs it wraps (and as VirtualiZarr names the codecs of kerchunk references).

A tile codec is an array → bytes codec (the array's serializer: one chunk ↔ one FITS tile), so it
takes and gives pixel values whatever byte order the chunk has in memory; `FitsScale` is an
array → array filter whose encoded side has the stored dtype (BITPIX).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec
from zarr.dtype import parse_dtype
from zarr.registry import register_codec

from . import fits_codecs

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

__all__ = ["FitsTileV3", "FitsRice1V3", "FitsGzip1V3", "FitsGzip2V3", "FitsHcompress1V3", "FitsPlio1V3",
           "FitsScaleV3", "CODECS_V3", "register_zarr_codecs"]


class _Wrapped:
    """What both kinds share: the numcodecs configuration (without ``id``) as the zarr
    ``configuration``, and the numcodecs codec built from it."""

    numcodec: ClassVar[type[Any]]
    codec_name: ClassVar[str]
    configuration: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        if data.get("name") != cls.codec_name:
            raise ValueError(f"expected a {cls.codec_name} codec, not {data.get('name')!r}")
        return cls(configuration=dict(data.get("configuration") or {}))  # type: ignore[call-arg]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.codec_name, "configuration": dict(self.configuration)}

    @cached_property
    def codec(self) -> Any:
        """The numcodecs codec of this configuration."""
        return self.numcodec.from_config(dict(self.configuration))

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class FitsTileV3(_Wrapped, ArrayBytesCodec):
    """The base of the tile serializers; one subclass per ZCMPTYPE in `CODECS_V3`."""

    configuration: dict[str, Any] = field(default_factory=dict)
    is_fixed_size = False

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        values = self.codec.decode(chunk_bytes.as_numpy_array())
        native = np.asarray(values).astype(chunk_spec.dtype.to_native_dtype()).reshape(chunk_spec.shape)
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(cast(Any, native))

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = self.codec.encode(chunk_array.as_numpy_array())
        return chunk_spec.prototype.buffer.from_bytes(bytes(encoded))


@dataclass(frozen=True)
class FitsScaleV3(_Wrapped, ArrayArrayCodec):
    """BSCALE/BZERO/BLANK (`torchfits.zarr.fits_codecs.FitsScale`) as a zarr 3 filter."""

    numcodec = fits_codecs.FitsScale
    codec_name = "numcodecs.fits_scale"
    configuration: dict[str, Any] = field(default_factory=dict)
    is_fixed_size = True

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        stored = fits_codecs.storage_dtype(self.codec.bitpix).newbyteorder("=")
        return replace(chunk_spec, dtype=parse_dtype(stored, zarr_format=3))

    async def _decode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        values = self.codec.decode(chunk_array.as_numpy_array())
        native = np.asarray(values).astype(chunk_spec.dtype.to_native_dtype()).reshape(chunk_spec.shape)
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(cast(Any, native))

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        stored = np.asarray(self.codec.encode(chunk_array.as_numpy_array()))
        native = stored.astype(stored.dtype.newbyteorder("=")).reshape(chunk_spec.shape)
        return chunk_spec.prototype.nd_buffer.from_ndarray_like(cast(Any, native))


@dataclass(frozen=True)
class FitsRice1V3(FitsTileV3):
    """RICE_1 tiles (`torchfits.zarr.fits_codecs.FitsRice1`) as a zarr 3 serializer."""

    numcodec = fits_codecs.FitsRice1
    codec_name = "numcodecs.fits_rice_1"


@dataclass(frozen=True)
class FitsGzip1V3(FitsTileV3):
    """GZIP_1 tiles (`torchfits.zarr.fits_codecs.FitsGzip1`) as a zarr 3 serializer."""

    numcodec = fits_codecs.FitsGzip1
    codec_name = "numcodecs.fits_gzip_1"


@dataclass(frozen=True)
class FitsGzip2V3(FitsTileV3):
    """GZIP_2 tiles (`torchfits.zarr.fits_codecs.FitsGzip2`) as a zarr 3 serializer."""

    numcodec = fits_codecs.FitsGzip2
    codec_name = "numcodecs.fits_gzip_2"


@dataclass(frozen=True)
class FitsHcompress1V3(FitsTileV3):
    """HCOMPRESS_1 tiles (`torchfits.zarr.fits_codecs.FitsHcompress1`) as a zarr 3 serializer."""

    numcodec = fits_codecs.FitsHcompress1
    codec_name = "numcodecs.fits_hcompress_1"


@dataclass(frozen=True)
class FitsPlio1V3(FitsTileV3):
    """PLIO_1 tiles (`torchfits.zarr.fits_codecs.FitsPlio1`) as a zarr 3 serializer."""

    numcodec = fits_codecs.FitsPlio1
    codec_name = "numcodecs.fits_plio_1"


#: ZCMPTYPE → the zarr 3 serializer of its tiles.
CODECS_V3: dict[str, type[FitsTileV3]] = {
    c.numcodec.zcmptype: c for c in (FitsRice1V3, FitsGzip1V3, FitsGzip2V3, FitsHcompress1V3, FitsPlio1V3)}


def register_zarr_codecs() -> None:
    """Register the zarr 3 codecs with zarr. Importing this module does it, and the
    ``zarr.codecs`` entry points of an installed torchfits load it when zarr first meets a
    ``numcodecs.fits_*`` name."""
    for cls in CODECS_V3.values():
        register_codec(cls.codec_name, cls)
    register_codec(FitsScaleV3.codec_name, FitsScaleV3)


register_zarr_codecs()

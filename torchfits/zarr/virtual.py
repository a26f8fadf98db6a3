"""VirtualiZarr manifests of FITS images: the chunks of `torchfits.zarr.references` as a
``ManifestGroup`` of zarr format 3 arrays (the codecs of `torchfits.zarr.zarr3`), for
VirtualiZarr's ``ManifestStore`` and the stores it writes to (Icechunk, kerchunk).
"""
from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

import numpy as np

from ..fits.aliases import HduArg, PathArg
from .references import DEFAULT_CHUNK_BYTES, references

__all__ = ["manifest_group"]


def _uri(url: str) -> str:
    """An absolute URI (VirtualiZarr refuses paths): local paths become ``file://`` URIs."""
    return url if urlparse(url).scheme not in ("", "file") or url.startswith("file://") \
        else "file://" + os.path.abspath(url)


def manifest_group(source: PathArg, hdu: HduArg | None = None, *, url: str | None = None,
                   name: str | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                   storage_options: dict[str, Any] | None = None) -> Any:
    """The chunks of one image HDU as a VirtualiZarr ``ManifestGroup`` of one array.

    Takes the arguments of `torchfits.zarr.references`. The array's codecs are
    ``numcodecs.fits_*`` zarr 3 codecs, registered by the ``zarr.codecs`` entry points of an
    installed torchfits (or by `torchfits.zarr.zarr3.register_zarr_codecs`).
    """
    from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup
    from virtualizarr.manifests.utils import create_v3_array_metadata

    refs = references(source, hdu, url=url, name=name, chunk_bytes=chunk_bytes,
                      storage_options=storage_options)["refs"]
    (key,) = [k for k in refs if k.endswith("/.zarray")]
    array = key[:-len("/.zarray")]
    zarray = json.loads(refs[key])
    attrs = json.loads(refs[f"{array}/.zattrs"])
    dims = attrs.pop("_ARRAY_DIMENSIONS")
    codecs = [_v3(c) for c in zarray["filters"] or []]
    if zarray["compressor"] is not None:
        codecs.append(_v3(zarray["compressor"]))
    else:  # the stored pixels: big-endian, whatever dtype a filter gives them
        codecs.append({"name": "bytes", "configuration": {"endian": "big"}})
    dtype = np.dtype(zarray["dtype"])
    metadata = create_v3_array_metadata(
        shape=tuple(zarray["shape"]), data_type=dtype, chunk_shape=tuple(zarray["chunks"]),
        fill_value=np.nan if dtype.kind == "f" else None, codecs=codecs, attributes=attrs,
        dimension_names=dims)
    prefix = f"{array}/"
    entries = {k[len(prefix):]: {"path": _uri(v[0]), "offset": int(v[1]), "length": int(v[2])}
               for k, v in refs.items() if k.startswith(prefix) and not k[len(prefix):].startswith(".")}
    manifest = ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest(entries))
    return ManifestGroup(arrays={array: manifest}, attributes={})


def _v3(config: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in config.items() if k != "id"}
    return {"name": f"numcodecs.{config['id']}", "configuration": rest}

"""Kerchunk references to FITS images: every chunk of a zarr (format 2) array is a byte range of
the file, read in place by fsspec's ``reference://`` file system, zarr or xarray.

Plain images are cut into blocks of whole rows along the slowest axis (each a contiguous range
of big-endian pixels); tile-compressed images get one chunk per tile, the tile's bytes in the
heap of the binary table, decoded by the codecs of `torchfits.zarr.fits_codecs`. BSCALE/BZERO/BLANK
become the `FitsScale` filter, so zarr reads equal `torchfits.read_numpy`.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from .._kernels import _image
from ..fits.aliases import HduArg, PathArg
from ..fits.hdu_index import KIND_COMPRESSED, HduEntry, HduIndex, get_index
from ..fits.header import Header
from ..fits.image_plan import ImagePlan, plan_image
from ..fits.paths import is_url, with_storage_options
from ..fits.tile_layout import TileLayout
from ..image.compressed import CompressedImage

__all__ = ["references", "DEFAULT_CHUNK_BYTES"]

#: The size plain images are cut into (whole rows of the slowest axis, at least one).
DEFAULT_CHUNK_BYTES = 4 << 20
_STORAGE = {8: "|u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
_SKIP_KEYS = {"", "COMMENT", "HISTORY", "END"}
_CODEC_IDS = {"RICE_1": "fits_rice_1", "GZIP_1": "fits_gzip_1", "GZIP_2": "fits_gzip_2",
              "HCOMPRESS_1": "fits_hcompress_1", "PLIO_1": "fits_plio_1"}


def references(source: PathArg, hdu: HduArg | None = None, *, url: str | None = None,
               name: str | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
               storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Kerchunk references (version 1) to one image HDU, as a zarr format 2 group of one array.

    Parameters
    ----------
    source : str or os.PathLike
        The FITS file: a local path or a URL (read for its headers, and for tile-compressed
        images its tile table; quantised images and odd edge tiles also read every tile once).
    hdu : int, str, (str, int) or None
        The image HDU (plain or tile-compressed); default: the first HDU with data.
    url : str, optional
        Where the references point (default: ``source``, made absolute when local).
    name : str, optional
        The array's name in the group (default: EXTNAME, else ``PRIMARY`` or ``HDU<n>``).
    chunk_bytes : int
        About how many bytes a chunk of a plain image holds (whole rows; tiles are chunks of
        compressed images).
    storage_options : dict, optional
        Options for reading ``source`` (see ``docs/remote.md``); readers of the references
        pass their own (``remote_protocol``, ``remote_options``).

    Returns
    -------
    dict
        ``{"version": 1, "refs": {...}}``: ``.zgroup``, the array's ``.zarray`` and
        ``.zattrs`` (the image header's cards, ``_ARRAY_DIMENSIONS``) and one
        ``[url, offset, length]`` per chunk. Read with
        ``xarray.open_dataset(refs, engine="kerchunk")`` or
        ``zarr.open_array(fsspec.get_mapper("reference://", fo=refs), path=name)``.
    """
    _register()
    index = get_index(with_storage_options(source, storage_options))
    entry = index.resolve(hdu, first_with_data=True)
    if entry.is_table:
        raise ValueError(f"{index.path}: HDU {entry.index} is a table; references are made for images")
    if url is None:
        url = str(source) if is_url(str(source)) else os.path.abspath(os.fspath(source))
    if entry.kind == KIND_COMPRESSED:
        image = CompressedImage(index.path, entry.index, index=index)
        header = image.header
        zarray, chunks = _compressed(index, entry, image, url)
    else:
        if entry.is_groups:
            raise ValueError(f"{index.path}: HDU {entry.index} holds random groups, which are not an image")
        header = index.header(entry)
        zarray, chunks = _plain(index, entry, plan_image(entry, index.header_view(entry)), url,
                                int(chunk_bytes))
    if name is None:
        extname = header.get("EXTNAME")
        name = str(extname).strip() if isinstance(extname, str) and extname.strip() else (
            "PRIMARY" if entry.index == 0 else f"HDU{entry.index}")
    shape = zarray["shape"]
    attrs = _attributes(header)
    attrs["_ARRAY_DIMENSIONS"] = (["z", "y", "x"][-len(shape):] if len(shape) <= 3
                                  else [f"axis{len(shape) - i}" for i in range(len(shape))])
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}),
                            ".zattrs": json.dumps({}),
                            f"{name}/.zarray": json.dumps(zarray),
                            f"{name}/.zattrs": json.dumps(attrs)}
    refs.update((f"{name}/{key}", ref) for key, ref in chunks.items())
    return {"version": 1, "refs": refs}


def _register() -> None:
    """Register the codecs with numcodecs and zarr in this process (importing them does), so
    references read back here without an installed torchfits's entry points."""
    try:
        from . import zarr3  # noqa: F401
    except ImportError:  # zarr missing: numcodecs alone (kerchunk readers)
        try:
            from . import fits_codecs  # noqa: F401
        except ImportError:
            pass


def _attributes(header: Header) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for card in header.cards:
        key = card.key.strip()
        if key.upper() in _SKIP_KEYS or key in attrs:
            continue
        value = card.value
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        elif not isinstance(value, (bool, int, float, str)):
            value = str(value)
        attrs[key] = value
    return attrs


def _zarray(shape: tuple[int, ...], chunks: tuple[int, ...], dtype: str, compressor: Any,
            filters: Any) -> dict[str, Any]:
    return {"zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
            "compressor": compressor, "filters": filters, "fill_value": None, "order": "C",
            "dimension_separator": "."}


def _scale_filter(plan: ImagePlan) -> tuple[str, list[dict[str, Any]] | None]:
    """The array dtype and filters that turn stored pixels into the values `read_numpy` gives."""
    if plan.mode == _image.MODE_RAW:
        return _STORAGE[plan.bitpix], None
    blank = plan.blank if plan.bitpix > 0 else None
    dtype = np.dtype(plan.dtype).str
    return dtype, [{"id": "fits_scale", "bitpix": plan.bitpix, "bscale": plan.bscale, "bzero": plan.bzero,
                    "blank": blank, "dtype": dtype}]


def _plain(index: HduIndex, entry: HduEntry, plan: ImagePlan, url: str,
           chunk_bytes: int) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    shape = entry.shape
    if not entry.naxes or math.prod(shape) == 0:
        raise ValueError(f"{index.path}: HDU {entry.index} has no pixels to reference")
    itemsize = abs(plan.bitpix) // 8
    row = math.prod(shape[1:]) * itemsize  # bytes of one step along the slowest axis
    rows = max(1, min(shape[0], chunk_bytes // max(row, 1)))
    # Every chunk is read whole, the last one too: its range must stay inside the file (FITS
    # pads data to 2880 bytes, so it usually does), else fewer rows per chunk.
    room = index.size - entry.data_offset
    while rows > 1 and -(-shape[0] // rows) * rows * row > room:
        rows -= 1
    dtype, filters = _scale_filter(plan)
    zarray = _zarray(shape, (rows,) + shape[1:], dtype, None, filters)
    tail = ".0" * (len(shape) - 1)
    chunks = {f"{i}{tail}": [url, entry.data_offset + i * rows * row, rows * row]
              for i in range(-(-shape[0] // rows))}
    return zarray, chunks


def _prefix_clipped(lay: TileLayout) -> list[list[int]] | None:
    """The shapes of edge tiles when each lays its pixels out as a prefix of a full tile's (the
    only cut axis has tile extent 1 on every axis before it), else None."""
    clipped = []
    for j, (n, t) in enumerate(zip(lay.shape, lay.tile)):
        if n % t:
            if any(u != 1 for u in lay.tile[:j]):
                return None
            clipped.append([*lay.tile[:j], n % t, *lay.tile[j + 1:]])
    return clipped


def _compressed(index: HduIndex, entry: HduEntry, image: CompressedImage,
                url: str) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    lay = image.layout
    where = f"{index.path}: HDU {entry.index}"
    codec_id = _CODEC_IDS.get(lay.zcmptype)
    if codec_id is None:
        raise ValueError(f"{where}: {lay.zcmptype} tiles have no zarr codec (only "
                         f"{', '.join(_CODEC_IDS)})")
    if math.prod(lay.shape) == 0:
        raise ValueError(f"{where}: the compressed image has no pixels to reference")
    table = image.tile_table()
    if "ZBLANK" in table:
        raise ValueError(f"{where}: a ZBLANK column (a null value per tile) is not supported by the "
                         "zarr codecs")
    if lay.zbitpix > 0 and ("ZSCALE" in table or "ZZERO" in table or lay.zscale is not None
                            or lay.zzero is not None):
        raise ValueError(f"{where}: integer tiles scaled by ZSCALE/ZZERO are not supported by the zarr "
                         "codecs")
    if "UNCOMPRESSED_DATA" in table and table["UNCOMPRESSED_DATA"][:, 1].any():
        raise ValueError(f"{where}: tiles stored in UNCOMPRESSED_DATA are not supported by the zarr codecs")
    config: dict[str, Any] = {"id": codec_id, "bitpix": lay.zbitpix, "tile": list(lay.tile)}
    if lay.zcmptype == "RICE_1":
        config.update(blocksize=int(lay.params.get("BLOCKSIZE", 32)),
                      bytepix=int(lay.params.get("BYTEPIX", 4)))
    elif lay.zcmptype == "HCOMPRESS_1":
        config.update(smooth=bool(lay.params.get("SMOOTH", 0)))
    data = table["COMPRESSED_DATA"]
    gzip = table.get("GZIP_COMPRESSED_DATA")
    fallback = [k for k in range(lay.ntiles) if data[k, 1] == 0 and gzip is not None and gzip[k, 1] > 0]
    locations = data.copy()
    for k in fallback:
        locations[k] = gzip[k]  # type: ignore[index]
    empty = np.flatnonzero(locations[:, 1] == 0)
    if empty.size:
        raise ValueError(f"{where}: tile {int(empty[0])} has no bytes in any tile column")
    quantized = lay.zbitpix < 0 and lay.quantize is not None
    clipped = _prefix_clipped(lay)
    if quantized or fallback or clipped is None:
        quantize = None
        if quantized:
            quantize = {"method": int(lay.quantize or 0), "zdither0": int(lay.zdither0),
                        "zblank": lay.zblank, "gzip": fallback,
                        "zscale": _per_tile(table.get("ZSCALE"), lay.zscale, 1.0),
                        "zzero": _per_tile(table.get("ZZERO"), lay.zzero, 0.0)}
        elif fallback:
            raise ValueError(f"{where}: tiles in GZIP_COMPRESSED_DATA are only read for quantised images")
        config.update(image=list(lay.shape), quantize=quantize)
        config["tiles"] = _fingerprints(index, entry, locations, config, where)
    elif clipped:
        config["clipped"] = clipped
    dtype, filters = _scale_filter(image.plan)
    if quantized and filters is None:
        dtype = _STORAGE[lay.zbitpix]
    zarray = _zarray(lay.shape, lay.tile, dtype, {k: v for k, v in config.items() if v is not None},
                     filters)
    chunks = {}
    for k in range(lay.ntiles):
        key = ".".join(str(int(i)) for i in np.unravel_index(k, lay.grid))
        chunks[key] = [url, int(locations[k, 0]), int(locations[k, 1])]
    return zarray, chunks


def _per_tile(column: np.ndarray | None, keyword: float | None, default: float) -> Any:
    if column is not None:
        return [float(v) for v in column]
    return float(keyword) if keyword is not None else default


def _fingerprints(index: HduIndex, entry: HduEntry, locations: np.ndarray, config: dict[str, Any],
                  where: str) -> dict[str, int]:
    """Fingerprint → tile number, reading every tile once; tiles that share bytes must decode to
    the same chunk (else the codec could not tell them apart)."""
    from .fits_codecs import CODECS, fingerprint  # numcodecs: only here

    buf = index.data_view(entry, [(int(o) - entry.data_offset, int(n)) for o, n in locations])
    groups: dict[str, list[int]] = {}
    for k, (offset, size) in enumerate(locations):
        groups.setdefault(fingerprint(buf[int(offset):int(offset) + int(size)]), []).append(k)
    tiles = {fp: ks[0] for fp, ks in groups.items()}
    shared = {fp: ks for fp, ks in groups.items() if len(ks) > 1}
    if shared:
        params = {k: v for k, v in config.items() if k != "id" and v is not None}
        codec = CODECS[{v: z for z, v in _CODEC_IDS.items()}[config["id"]]](**params, tiles=tiles)
        for ks in shared.values():
            offset, size = (int(v) for v in locations[ks[0]])
            data = buf[offset:offset + size]
            first = codec.decode_tile(data, ks[0]).tobytes()
            for k in ks[1:]:
                if codec.decode_tile(data, k).tobytes() != first:
                    raise ValueError(
                        f"{where}: tiles {ks[0]} and {k} have the same compressed bytes but decode to "
                        "different pixels (their tile number, dither seed or ZSCALE/ZZERO differ), and "
                        "a zarr codec sees only a chunk's bytes, never which chunk it is: no "
                        "references can be made for this image")
    return tiles

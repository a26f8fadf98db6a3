"""Writing tile-compressed images: split the array into tiles, quantise float tiles, encode each
tile with its codec on the thread pool, and lay out the BINTABLE rows and heap.

`encode_compressed_hdu` gives the header cards, table rows and heap of one compressed HDU;
`write_compressed` writes a whole file (empty primary + compressed images).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._kernels import _quantize
from ..fits.header import Card, Header
from ..fits.layout import finish_header, flip_sign_bit
from ..fits.threads import default_threads, run_parallel
from ..image.codec_registry import (
    DEFAULT_CODEC,
    REGISTRY,
    Codec,
    Gzip1,
    WriteOptions,
    writer_codec,
    writer_names,
)

__all__ = [
    "encode_compressed_hdu", "write_compressed", "normalize_compress", "COMPRESS_NAMES", "header_bytes",
]

# Names `compress=` accepts (ZCMPTYPEs and short aliases) → ZCMPTYPE.
COMPRESS_NAMES = writer_names()
_DITHER_NAMES = {"NO_DITHER": 0, "SUBTRACTIVE_DITHER_1": 1, "SUBTRACTIVE_DITHER_2": 2}
_DITHER_BY_ID = {v: k for k, v in _DITHER_NAMES.items()}
# dtype → (ZBITPIX, BZERO of the offset convention or None)
_TYPES = {np.dtype(np.uint8): (8, None), np.dtype(np.int8): (8, -128),
          np.dtype(np.int16): (16, None), np.dtype(np.uint16): (16, 32768),
          np.dtype(np.int32): (32, None), np.dtype(np.uint32): (32, 2147483648),
          np.dtype(np.int64): (64, None),
          np.dtype(np.float32): (-32, None), np.dtype(np.float64): (-64, None)}
_STORAGE: dict[int, np.dtype[Any]] = {8: np.dtype(np.uint8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
            64: np.dtype(np.int64), -32: np.dtype(np.float32), -64: np.dtype(np.float64)}
_OWNED = {"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT", "TFIELDS",
          "THEAP", "BSCALE", "BZERO", "BLANK", "END", "ZIMAGE", "ZCMPTYPE", "ZBITPIX", "ZNAXIS",
          "ZQUANTIZ", "ZDITHER0", "ZSIMPLE", "ZTENSION", "ZPCOUNT", "ZGCOUNT", "ZEXTEND",
          "ZBLANK", "CHECKSUM", "DATASUM", "ZHECKSUM", "ZDATASUM"}
_OWNED_PREFIX = ("NAXIS", "ZNAXIS", "ZTILE", "ZNAME", "ZVAL", "TTYPE", "TFORM", "TUNIT", "TDIM",
                 "TNULL", "TSCAL", "TZERO")
_MAX_QUANT = 2.0 ** 30  # quantised codes must stay well inside int32


def normalize_compress(compress: Any, *, allow_nocompress: bool = False) -> str | None:
    """``False``/``None`` → None; ``True``/``""`` → RICE_1; a name (case-insensitive) → ZCMPTYPE.

    Codecs not `offered` to writers (NOCOMPRESS) are accepted only with ``allow_nocompress``.
    """
    if compress is None or compress is False:
        return None
    if compress is True:
        return DEFAULT_CODEC
    if not isinstance(compress, str):
        raise ValueError(f"compress must be bool or a compression algorithm string, not {compress!r}")
    name = compress.strip().upper() or DEFAULT_CODEC
    if allow_nocompress and name in REGISTRY and REGISTRY[name].codec_id == name \
            and not REGISTRY[name].offered:
        return name
    if name not in COMPRESS_NAMES:
        raise ValueError(f"Unsupported compression algorithm {compress!r}")
    return COMPRESS_NAMES[name]


def _quantize_spec(quantize: Any) -> tuple[float | None, int, int | None]:
    """(level or None for lossless, dither method, seed or None)."""
    if quantize is None:
        return 4.0, 1, None
    if quantize is False or (isinstance(quantize, (int, float)) and not isinstance(quantize, bool)
                             and quantize == 0):
        return None, 0, None
    if isinstance(quantize, bool):
        return 4.0, 1, None
    if isinstance(quantize, (int, float)):
        return float(quantize), 1, None
    seed = None
    if isinstance(quantize, dict):
        level = quantize.get("level", 4.0)
        method = quantize.get("method", quantize.get("dither", "SUBTRACTIVE_DITHER_1"))
        seed = quantize.get("seed")
    elif isinstance(quantize, (tuple, list)) and 1 <= len(quantize) <= 3:
        level = quantize[0]
        method = quantize[1] if len(quantize) > 1 else "SUBTRACTIVE_DITHER_1"
        seed = quantize[2] if len(quantize) > 2 else None
    else:
        raise ValueError(f"quantize must be None, False, a level, (level, dither[, seed]) or a "
                         f"dict, not {quantize!r}")
    if isinstance(method, str):
        key = method.strip().upper()
        if key not in _DITHER_NAMES:
            raise ValueError(f"unknown dither method {method!r}; use one of {sorted(_DITHER_NAMES)}")
        method_id = _DITHER_NAMES[key]
    elif method in (0, 1, 2):
        method_id = int(method)
    else:
        raise ValueError(f"unknown dither method {method!r}")
    if level is None or float(level) == 0:
        return None, 0, None
    if seed is not None and not 1 <= int(seed) <= 10000:
        raise ValueError("the dither seed (ZDITHER0) must be in 1..10000")
    return float(level), method_id, (int(seed) if seed is not None else None)


# Scale factors of CFITSIO's median-absolute-difference noise estimates: the MAD-to-sigma
# factor 1.482602 over sqrt(2), sqrt(6) and sqrt(70), the norms of the difference stencils.
_MAD2, _MAD3, _MAD5 = 1.0483579, 0.6052697, 0.1772048


def _noise(tile: np.ndarray) -> float:
    """Background noise of a float tile, estimated as CFITSIO does before it quantises one.

    Rows run along the tile's first FITS axis (a tile whose rows are shorter than 9 pixels is
    one row); NaN pixels are skipped, so the pixels on either side of a hole are neighbours.
    Each row gives the low median of its 2nd, 3rd and 5th order absolute differences
    (``|v[i] - v[i+2]|``, ``|2v[i] - v[i-2] - v[i+2]|``, ``|6v[i] - 4v[i-2] - 4v[i+2] + v[i-4] +
    v[i+4]|``), leaving out windows that are constant (`_quantize.noise_medians`); the medians
    over rows, scaled to a standard deviation, are three estimates. The result is the 3rd
    order estimate, or a non-zero smaller one of the other two: zero for any tile without
    noise (constant runs, ramps, fewer than 9 pixels), which is then stored losslessly instead
    of quantised. (CFITSIO takes the 2nd order row median over the 3rd order count of values,
    a slip that only matters when some windows are flat; here each order counts its own.)
    """
    nx = tile.shape[-1] if tile.ndim else 1
    shape = (-1, nx) if nx >= 9 else (1, -1)
    rows = np.ascontiguousarray(tile.reshape(shape), dtype=np.float64)
    d2, d3, d5 = _quantize.noise_medians(rows)
    noise2, noise3, noise5 = _MAD2 * d2, _MAD3 * d3, _MAD5 * d5
    best = noise3
    if noise2 != 0 and noise2 < best:
        best = noise2
    if noise5 != 0 and noise5 < best:
        best = noise5
    return best


def _tiles(shape: tuple[int, ...], tile: tuple[int, ...]) -> list[tuple[slice, ...]]:
    grid = [-(-n // t) for n, t in zip(shape, tile)]
    out = []
    for pos in np.ndindex(*grid):
        out.append(tuple(slice(p * t, min((p + 1) * t, n)) for p, t, n in zip(pos, tile, shape)))
    return out


class _ImagePlan(NamedTuple):
    """The checked image of one compressed HDU: its stored pixels and how they are tiled."""

    codec: type[Codec]
    native: np.ndarray  # stored values, native order (offset conventions applied)
    zbitpix: int
    bzero: int | None  # BZERO of an offset convention
    shape: tuple[int, ...]
    tile_shape: tuple[int, ...]


class _QuantPlan(NamedTuple):
    """How float tiles are quantised (``level`` None: they are not)."""

    level: float | None
    method: int  # dither method
    zdither0: int

    @property
    def on(self) -> bool:
        return self.level is not None


class _Tile(NamedTuple):
    """One encoded tile: its COMPRESSED_DATA, its GZIP_COMPRESSED_DATA (a float tile that could
    not be quantised), and its ZSCALE, ZZERO and whether it holds quantised nulls."""

    data: bytes
    gzip: bytes = b""
    zscale: float = 1.0
    zzero: float = 0.0
    has_null: bool = False


class _Table(NamedTuple):
    """The BINTABLE of the tiles: its columns (name, TFORM), row bytes and heap."""

    fields: list[tuple[str, str]]
    rows: bytes
    row_bytes: int
    heap: bytes


def _plan_image(array: Any, compress: Any, tile: Sequence[int] | None) -> _ImagePlan:
    """Check the image against the codec and tile it; offset conventions stored as integers."""
    cls = writer_codec(normalize_compress(compress, allow_nocompress=True) or DEFAULT_CODEC)
    arr = np.asarray(array)
    dtype = arr.dtype.newbyteorder("=")
    if dtype not in _TYPES:
        raise TypeError(f"Unsupported dtype for a compressed image: {arr.dtype}")
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError("a compressed image needs at least one pixel and one axis")
    zbitpix, bzero = _TYPES[dtype]
    shape = tuple(int(n) for n in arr.shape)
    cls.check_shape(shape)
    if not cls.accepts(zbitpix):
        able = " or ".join(c.codec_id for name, c in REGISTRY.items()
                           if name == c.codec_id and c.cfitsio_reads and c.accepts(zbitpix))
        raise ValueError(f"{cls.codec_id} cannot compress 64-bit integers; use {able}")
    tile_shape = tuple(int(t) for t in tile) if tile is not None else cls.default_tile(shape)
    if len(tile_shape) != len(shape) or any(t < 1 for t in tile_shape):
        raise ValueError(f"tile {tile_shape} does not match an image of shape {shape}")
    tile_shape = tuple(min(t, n) for t, n in zip(tile_shape, shape))
    cls.check_tile(tile_shape)
    native = np.ascontiguousarray(arr, dtype=dtype)
    if bzero is not None:  # offset conventions: store value - BZERO
        stored = flip_sign_bit(native, big_endian=False)
        native = stored.view(np.dtype(np.uint8) if zbitpix == 8 else _STORAGE[zbitpix])
    cls.check_pixels(native, zbitpix)
    return _ImagePlan(cls, native, zbitpix, bzero, shape, tile_shape)


def _plan_quantize(image: _ImagePlan, quantize: Any) -> _QuantPlan:
    """The quantisation of a float image (none for integers); lossless floats need a byte codec."""
    level, method, seed = _quantize_spec(quantize) if image.zbitpix < 0 else (None, 0, None)
    quantized = image.zbitpix < 0 and level is not None
    if image.zbitpix < 0 and not quantized and image.codec.stores_integers:
        able = ", ".join(c.codec_id for name, c in REGISTRY.items()
                         if name == c.codec_id and not c.stores_integers)
        able = " or ".join(able.rsplit(", ", 1))
        raise ValueError(f"lossless float compression needs {able}, not {image.codec.codec_id}")
    if seed is None and quantized and method:
        # a seed from the clock, as the convention suggests, so files differ in their dither
        seed = int.from_bytes(os.urandom(2), "big") % 10000 + 1
    return _QuantPlan(level if quantized else None, method, seed if seed is not None else 1)


def _encode_tiles(image: _ImagePlan, quant: _QuantPlan, options: WriteOptions,
                  threads: int | None) -> list[_Tile]:
    """Every tile encoded, in tile order, on the thread pool."""
    slices = _tiles(image.shape, image.tile_shape)
    codec = image.codec

    def encode_one(k: int) -> _Tile:
        t = np.ascontiguousarray(image.native[slices[k]])
        if quant.on:
            return _encode_quantized(t, k)
        return _Tile(codec.encode_tile(t, options))

    def _encode_quantized(t: np.ndarray, k: int) -> _Tile:
        level = quant.level
        assert level is not None
        finite = t[np.isfinite(t)]
        has_inf = bool(np.isinf(t).any())
        fallback = has_inf or finite.size < 2
        if not fallback:
            step = -level if level < 0 else _noise(t) / level
            lo, hi = float(finite.min()), float(finite.max())
            fallback = not (step > 0 and math.isfinite(step)) or (hi - lo) / step > _MAX_QUANT
        if fallback:
            # not quantisable (no noise, too few values, infinite, or too wide): lossless gzip,
            # as CFITSIO stores such tiles
            big = t.astype(t.dtype.newbyteorder(">"))
            return _Tile(b"", Gzip1().encode(big), 0.0, 0.0, False)
        zero = lo
        codes = np.empty(t.shape, np.int32)
        has_null = _quantize.quantize(t, codes, step, zero, quant.method,
                                      _quantize.dither_seed(k, quant.zdither0) if quant.method else 0)
        return _Tile(codec.encode_tile(codes, options), b"", step, zero, has_null)

    nthreads = default_threads() if threads is None else max(1, int(threads))
    if nthreads > 1 and len(slices) > 1:
        nchunks = min(len(slices), nthreads * 4)
        chunks = [range(i, len(slices), nchunks) for i in range(nchunks)]
        parts = run_parallel(lambda ks: [(k, encode_one(k)) for k in ks], chunks)
        results = dict(item for part in parts for item in part)
        return [results[k] for k in range(len(slices))]
    return [encode_one(k) for k in range(len(slices))]


def _lay_out_table(codec: type[Codec], tiles: list[_Tile], quantized: bool) -> _Table:
    """The descriptor (and ZSCALE/ZZERO) rows and the heap of the encoded tiles."""
    elem = codec.heap_itemsize
    heap = bytearray()
    main_desc, gz_desc = [], []
    for t in tiles:
        main_desc.append((len(t.data) // elem, len(heap)) if t.data else (0, 0))
        heap += t.data
        gz_desc.append((len(t.gzip), len(heap)) if t.gzip else (0, 0))
        heap += t.gzip
    use_gz = any(g[0] for g in gz_desc)
    wide = len(heap) >= 2 ** 31
    dcode = "Q" if wide else "P"
    dtype_desc = np.dtype(">i8" if wide else ">i4")
    fields = [("COMPRESSED_DATA", f"1{dcode}{'I' if elem == 2 else 'B'}"
               f"({max(d[0] for d in main_desc)})")]
    cols = [np.array(main_desc, dtype_desc)]
    if use_gz:
        fields.append(("GZIP_COMPRESSED_DATA", f"1{dcode}B({max(g[0] for g in gz_desc)})"))
        cols.append(np.array(gz_desc, dtype_desc))
    if quantized:
        fields += [("ZSCALE", "1D"), ("ZZERO", "1D")]
        cols.append(np.array([[t.zscale] for t in tiles], ">f8"))
        cols.append(np.array([[t.zzero] for t in tiles], ">f8"))
    rows = np.concatenate([c.reshape(len(tiles), -1).view(np.uint8) for c in cols], axis=1)
    return _Table(fields, rows.tobytes(), rows.shape[1], bytes(heap))


def _hdu_cards(image: _ImagePlan, quant: _QuantPlan, table: _Table, ntiles: int, any_null: bool,
               options: WriteOptions, primary: bool) -> list[Card]:
    """The structural and compression cards of the HDU."""
    cards = [Card("XTENSION", "BINTABLE", "binary table extension"), Card("BITPIX", 8),
             Card("NAXIS", 2), Card("NAXIS1", table.row_bytes), Card("NAXIS2", ntiles),
             Card("PCOUNT", len(table.heap)), Card("GCOUNT", 1), Card("TFIELDS", len(table.fields))]
    for n, (name, tform) in enumerate(table.fields, start=1):
        cards += [Card(f"TTYPE{n}", name), Card(f"TFORM{n}", tform)]
    cards += [Card("ZIMAGE", True, "extension contains compressed image"),
              Card("ZCMPTYPE", image.codec.codec_id, "compression algorithm")]
    if primary:
        cards.append(Card("ZSIMPLE", True, "file does conform to FITS standard"))
    else:
        cards.append(Card("ZTENSION", "IMAGE", "Image extension"))
    cards += [Card("ZBITPIX", image.zbitpix, "data type of original image"),
              Card("ZNAXIS", len(image.shape), "dimension of original image")]
    for k, n in enumerate(reversed(image.shape), start=1):
        cards.append(Card(f"ZNAXIS{k}", n, "length of original image axis"))
    for k, t in enumerate(reversed(image.tile_shape), start=1):
        cards.append(Card(f"ZTILE{k}", t, "size of tiles to be compressed"))
    if primary:
        cards.append(Card("ZEXTEND", True))
    else:
        cards += [Card("ZPCOUNT", 0), Card("ZGCOUNT", 1)]
    bytepix = 4 if quant.on else (image.native.dtype.itemsize if image.zbitpix > 0 else 4)
    for k, (name, value) in enumerate(image.codec.zparams(options, bytepix), start=1):
        cards += [Card(f"ZNAME{k}", name), Card(f"ZVAL{k}", value)]
    if quant.on:
        cards.append(Card("ZQUANTIZ", _DITHER_BY_ID[quant.method], "quantization method"))
        if quant.method:
            cards.append(Card("ZDITHER0", quant.zdither0, "dithering offset when quantizing floats"))
    if any_null:
        cards.append(Card("ZBLANK", _quantize.NULL_VALUE, "null value in the quantized data"))
    return cards


def _scaling_cards(image: _ImagePlan, header: Any, keep_scaling: bool) -> list[Card]:
    """BSCALE/BZERO of an offset convention, or the caller's BSCALE/BZERO/BLANK kept."""
    if image.bzero is not None:
        return [Card("BSCALE", 1), Card("BZERO", image.bzero)]
    cards = []
    if keep_scaling and header is not None and image.zbitpix > 0:
        h = header if isinstance(header, Header) else Header(header)
        for key in ("BSCALE", "BZERO", "BLANK"):
            if key in h:
                cards.append(Card(key, h[key], h.comments[key]))
    return cards


def encode_compressed_hdu(array: Any, header: Any = None, *, compress: Any = DEFAULT_CODEC,
                          tile: Sequence[int] | None = None, quantize: Any = None,
                          hcomp_scale: float = 0.0, hcomp_smooth: bool = False,
                          blocksize: int = 32, primary: bool = False, keep_scaling: bool = False,
                          threads: int | None = None) -> tuple[list[Card], bytes, bytes]:
    """Encode one image as a tile-compressed BINTABLE HDU.

    Parameters
    ----------
    array : numpy.ndarray
        The image (uint8, int8, int16, uint16, int32, uint32, int64 (GZIP/NOCOMPRESS only),
        float32 or float64), at least 1-D.
    header : dict or Header, optional
        Extra cards (structural and compression keywords are ignored).
    compress : str or bool
        ``RICE_1``, ``GZIP_1``, ``GZIP_2``, ``PLIO_1``, ``HCOMPRESS_1`` or ``NOCOMPRESS``
        (case-insensitive; ``True`` = RICE_1).
    tile : sequence of int, optional
        Tile shape in C order (slowest axis first), like the array's shape. Default: one row
        per tile (16 rows for HCOMPRESS_1).
    quantize : None, False, float, (level, dither[, seed]) or dict
        Float images only. ``None``: level 4 with SUBTRACTIVE_DITHER_1 (the convention's
        default); ``False`` or 0: lossless (GZIP_1/GZIP_2/NOCOMPRESS only). A positive level
        sets the quantisation step to noise / level; a negative level is the step itself.
        ``dither``: ``"NO_DITHER"``, ``"SUBTRACTIVE_DITHER_1"``, ``"SUBTRACTIVE_DITHER_2"``.
    hcomp_scale, hcomp_smooth : float, bool
        HCOMPRESS_1 SCALE (0 = lossless for integers) and SMOOTH (applied by readers).
    blocksize : int
        RICE_1 BLOCKSIZE.
    primary : bool
        The image is the file's primary image (ZSIMPLE instead of ZTENSION).
    keep_scaling : bool
        ``array`` holds stored integers and ``header``'s BSCALE/BZERO/BLANK describe them
        (e.g. floats quantised to int16 by the caller): keep those cards.
    threads : int, optional
        Encode threads (default: all cores).

    Returns
    -------
    (cards, table_bytes, heap_bytes)
        Every header card (structural, compression and the user's), the row bytes and the heap.
    """
    image = _plan_image(array, compress, tile)
    quant = _plan_quantize(image, quantize)
    options = WriteOptions(blocksize=blocksize, hcomp_scale=hcomp_scale, hcomp_smooth=hcomp_smooth)
    tiles = _encode_tiles(image, quant, options, threads)
    table = _lay_out_table(image.codec, tiles, quant.on)
    any_null = quant.on and any(t.has_null for t in tiles)
    cards = _hdu_cards(image, quant, table, len(tiles), any_null, options, primary)
    cards += _scaling_cards(image, header, keep_scaling)
    cards += _user_cards(header)
    return cards, table.rows, table.heap


def _user_cards(header: Any) -> list[Card]:
    from .cards import as_header

    h = as_header(header)
    if h is None:
        return []
    out = []
    for card in h.cards:
        key = card.key.upper()
        if key in _OWNED or any(key.startswith(p) and key[len(p):].isdigit() for p in _OWNED_PREFIX):
            continue
        out.append(card)
    return out


def header_bytes(cards: list[Card]) -> bytes:
    """The header blocks (END and padding to 2880 bytes included) for ``cards``."""
    from .cards import card_lines

    lines = []
    for c in cards:
        lines += card_lines(c.key, c.value, c.comment)
    return finish_header(lines)


def write_compressed(path: Any, images: Any, header: Any = None, *, overwrite: bool = False,
                     compress: Any = DEFAULT_CODEC, tile: Sequence[int] | None = None,
                     quantize: Any = None, checksum: bool = False, **options: Any) -> None:
    """Write one image (or a list of images) as an empty primary plus compressed image HDUs.

    ``header`` (a dict/Header, or a list of them, one per image) adds cards; the remaining
    arguments are those of :func:`encode_compressed_hdu`. The file is written atomically.
    """
    from ..fits.hdu_index import invalidate
    from .atomic import atomic_output, check_target
    from .cards import named_errors

    items = list(images) if isinstance(images, (list, tuple)) else [images]
    headers = header if isinstance(header, (list, tuple)) else [header] + [None] * (len(items) - 1)
    target = check_target(path, overwrite=overwrite)
    primary = [Card("SIMPLE", True, "conforms to FITS standard"), Card("BITPIX", 8),
               Card("NAXIS", 0), Card("EXTEND", True)]
    if checksum:
        primary += [Card("CHECKSUM", "0" * 16), Card("DATASUM", "0")]
    with atomic_output(target) as sink:
        spans = []
        start = sink.offset
        sink.write(header_bytes(primary))
        spans.append((start, sink.offset, 0))
        for k, (arr, h) in enumerate(zip(items, headers), start=1):
            with named_errors(target, k):
                cards, table, heap = encode_compressed_hdu(arr, h, compress=compress, tile=tile,
                                                           quantize=quantize, **options)
                if checksum:
                    cards += [Card("CHECKSUM", "0" * 16), Card("DATASUM", "0")]
                block = header_bytes(cards)
            start = sink.offset
            sink.write(block)
            data_offset = sink.offset
            sink.write(table)
            sink.write(heap)
            sink.pad()
            spans.append((start, data_offset, len(table) + len(heap)))
        if checksum:
            from .checksum import patch_file_checksums

            patch_file_checksums(sink.fh, spans)
    invalidate(target)

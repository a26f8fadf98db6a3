"""Writing tile-compressed images: split the array into tiles, quantise float tiles, encode each
tile with its codec on the thread pool, and lay out the BINTABLE rows and heap.

`encode_compressed_hdu` gives the header cards, table rows and heap of one compressed HDU;
`write_compressed` writes a whole file (empty primary + compressed images).
"""
from __future__ import annotations

import math
import os
from typing import Any, Optional, Sequence

import numpy as np

from .._kernels import _quantize
from ..fits.threads import default_threads, run_parallel
from ..image.codec_registry import get_codec
from ..fits.header import Card, Header
from ..fits.layout import finish_header, flip_sign_bit

__all__ = ["encode_compressed_hdu", "write_compressed", "normalize_compress", "COMPRESS_NAMES"]

COMPRESS_NAMES = {"RICE_1": "RICE_1", "RICE": "RICE_1", "GZIP_1": "GZIP_1", "GZIP": "GZIP_1",
                  "GZIP_2": "GZIP_2", "PLIO_1": "PLIO_1", "PLIO": "PLIO_1",
                  "HCOMPRESS_1": "HCOMPRESS_1", "HCOMPRESS": "HCOMPRESS_1"}
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


def normalize_compress(compress: Any, *, allow_nocompress: bool = False) -> Optional[str]:
    """``False``/``None`` → None; ``True``/``""`` → RICE_1; a name (case-insensitive) → ZCMPTYPE.

    NOCOMPRESS (which CFITSIO cannot read) is accepted only with ``allow_nocompress``.
    """
    if compress is None or compress is False:
        return None
    if compress is True:
        return "RICE_1"
    if not isinstance(compress, str):
        raise ValueError(f"compress must be bool or a compression algorithm string, not {compress!r}")
    name = compress.strip().upper() or "RICE_1"
    if allow_nocompress and name == "NOCOMPRESS":
        return name
    if name not in COMPRESS_NAMES:
        raise ValueError(f"Unsupported compression algorithm {compress!r}")
    return COMPRESS_NAMES[name]


def _quantize_spec(quantize: Any) -> tuple[Optional[float], int, Optional[int]]:
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


def _default_tile(shape: tuple[int, ...], codec: str) -> tuple[int, ...]:
    if codec == "HCOMPRESS_1" and len(shape) >= 2:
        return (1,) * (len(shape) - 2) + (min(16, shape[-2]), shape[-1])
    return (1,) * (len(shape) - 1) + (shape[-1],)


def encode_compressed_hdu(array: Any, header: Any = None, *, compress: Any = "RICE_1",
                          tile: Optional[Sequence[int]] = None, quantize: Any = None,
                          hcomp_scale: float = 0.0, hcomp_smooth: bool = False,
                          blocksize: int = 32, primary: bool = False, keep_scaling: bool = False,
                          threads: Optional[int] = None) -> tuple[list[Card], bytes, bytes]:
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
    codec = normalize_compress(compress, allow_nocompress=True) or "RICE_1"
    arr = np.asarray(array)
    dtype = arr.dtype.newbyteorder("=")
    if dtype not in _TYPES:
        raise TypeError(f"Unsupported dtype for a compressed image: {arr.dtype}")
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError("a compressed image needs at least one pixel and one axis")
    zbitpix, bzero = _TYPES[dtype]
    shape = tuple(int(n) for n in arr.shape)
    if codec == "HCOMPRESS_1" and len(shape) < 2:
        raise ValueError("HCOMPRESS_1 needs a 2D (or higher) image")
    if zbitpix == 64 and codec in ("RICE_1", "HCOMPRESS_1", "PLIO_1"):
        raise ValueError(f"{codec} cannot compress 64-bit integers; use GZIP_1 or GZIP_2")
    tile_shape = tuple(int(t) for t in tile) if tile is not None else _default_tile(shape, codec)
    if len(tile_shape) != len(shape) or any(t < 1 for t in tile_shape):
        raise ValueError(f"tile {tile_shape} does not match an image of shape {shape}")
    tile_shape = tuple(min(t, n) for t, n in zip(tile_shape, shape))
    if codec == "HCOMPRESS_1" and any(t != 1 for t in tile_shape[:-2]):
        raise ValueError("HCOMPRESS_1 tiles are 2-D: every tile axis but the last two must be 1")
    native = np.ascontiguousarray(arr, dtype=dtype)
    if bzero is not None:  # offset conventions: store value - BZERO
        stored = flip_sign_bit(native, big_endian=False)
        native = stored.view(np.dtype(np.uint8) if zbitpix == 8 else _STORAGE[zbitpix])
    if codec == "PLIO_1":
        if zbitpix < 0:
            raise ValueError("PLIO_1 compresses only integer masks")
        lo, hi = (int(native.min()), int(native.max())) if native.size else (0, 0)
        if lo < 0 or hi >= 1 << 24:
            raise ValueError("PLIO_1 compressed image needs stored integer values in 0 .. 2^24 - 1 "
                             "(unsigned 16/32-bit images are stored offset by BZERO and cannot use it)")
    level, method, seed = _quantize_spec(quantize) if zbitpix < 0 else (None, 0, None)
    quantized = zbitpix < 0 and level is not None
    if zbitpix < 0 and not quantized and codec not in ("GZIP_1", "GZIP_2", "NOCOMPRESS"):
        raise ValueError(f"lossless float compression needs GZIP_1, GZIP_2 or NOCOMPRESS, not {codec}")
    if seed is None and quantized and method:
        # a seed from the clock, as the convention suggests, so files differ in their dither
        seed = int.from_bytes(os.urandom(2), "big") % 10000 + 1
    zdither0 = seed if seed is not None else 1

    slices = _tiles(shape, tile_shape)
    bytepix = 4 if quantized else (dtype.itemsize if zbitpix > 0 else 4)

    def encode_one(k: int) -> tuple[bytes, bytes, float, float, bool]:
        t = np.ascontiguousarray(native[slices[k]])
        if quantized:
            return _encode_quantized(t, k)
        return _encode_ints(t), b"", 1.0, 0.0, False

    def _encode_ints(t: np.ndarray) -> bytes:
        if codec == "RICE_1":
            return get_codec(codec, blocksize=blocksize, bytepix=t.dtype.itemsize).encode(t)
        if codec == "PLIO_1":
            return get_codec(codec).encode(t)
        if codec == "HCOMPRESS_1":
            two_d = t.reshape(-1, t.shape[-1]) if t.ndim >= 2 else t.reshape(1, -1)
            return get_codec(codec, tile_shape=two_d.shape, scale=hcomp_scale).encode(two_d)
        big = t.astype(t.dtype.newbyteorder(">"))  # the byte codecs store big-endian pixels
        params = {"itemsize": big.dtype.itemsize} if codec == "GZIP_2" else {}
        return get_codec(codec, **params).encode(big)

    def _encode_quantized(t: np.ndarray, k: int) -> tuple[bytes, bytes, float, float, bool]:
        finite = t[np.isfinite(t)]
        has_inf = bool(np.isinf(t).any())
        fallback = has_inf or finite.size < 2
        if not fallback:
            step = -level if level < 0 else _noise(t) / level  # type: ignore[operator]
            lo, hi = float(finite.min()), float(finite.max())
            fallback = not (step > 0 and math.isfinite(step)) or (hi - lo) / step > _MAX_QUANT
        if fallback:
            # not quantisable (no noise, too few values, infinite, or too wide): lossless gzip,
            # as CFITSIO stores such tiles
            big = t.astype(t.dtype.newbyteorder(">"))
            return b"", get_codec("GZIP_1").encode(big), 0.0, 0.0, False
        zero = lo
        codes = np.empty(t.shape, np.int32)
        has_null = _quantize.quantize(t, codes, step, zero, method,
                                      _quantize.dither_seed(k, zdither0) if method else 0)
        return _encode_ints(codes), b"", step, zero, has_null

    nthreads = default_threads() if threads is None else max(1, int(threads))
    if nthreads > 1 and len(slices) > 1:
        nchunks = min(len(slices), nthreads * 4)
        chunks = [range(i, len(slices), nchunks) for i in range(nchunks)]
        parts = run_parallel(lambda ks: [(k, encode_one(k)) for k in ks], chunks)
        results = dict(item for part in parts for item in part)
        encoded = [results[k] for k in range(len(slices))]
    else:
        encoded = [encode_one(k) for k in range(len(slices))]

    # -- table and heap -----------------------------------------------------------------------------
    elem = 2 if codec == "PLIO_1" else 1
    heap = bytearray()
    main_desc, gz_desc = [], []
    for data, gz, _, _, _ in encoded:
        main_desc.append((len(data) // elem, len(heap)) if data else (0, 0))
        heap += data
        gz_desc.append((len(gz), len(heap)) if gz else (0, 0))
        heap += gz
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
        cols.append(np.array([[e[2]] for e in encoded], ">f8"))
        cols.append(np.array([[e[3]] for e in encoded], ">f8"))
    rows = np.concatenate([c.reshape(len(encoded), -1).view(np.uint8) for c in cols], axis=1)
    table = rows.tobytes()
    row_bytes = rows.shape[1]
    any_null = quantized and any(e[4] for e in encoded)

    cards = [Card("XTENSION", "BINTABLE", "binary table extension"), Card("BITPIX", 8),
             Card("NAXIS", 2), Card("NAXIS1", row_bytes), Card("NAXIS2", len(encoded)),
             Card("PCOUNT", len(heap)), Card("GCOUNT", 1), Card("TFIELDS", len(fields))]
    for n, (name, tform) in enumerate(fields, start=1):
        cards += [Card(f"TTYPE{n}", name), Card(f"TFORM{n}", tform)]
    cards += [Card("ZIMAGE", True, "extension contains compressed image"),
              Card("ZCMPTYPE", codec, "compression algorithm")]
    if primary:
        cards.append(Card("ZSIMPLE", True, "file does conform to FITS standard"))
    else:
        cards.append(Card("ZTENSION", "IMAGE", "Image extension"))
    cards += [Card("ZBITPIX", zbitpix, "data type of original image"),
              Card("ZNAXIS", len(shape), "dimension of original image")]
    for k, n in enumerate(reversed(shape), start=1):
        cards.append(Card(f"ZNAXIS{k}", n, "length of original image axis"))
    for k, t in enumerate(reversed(tile_shape), start=1):
        cards.append(Card(f"ZTILE{k}", t, "size of tiles to be compressed"))
    if primary:
        cards.append(Card("ZEXTEND", True))
    else:
        cards += [Card("ZPCOUNT", 0), Card("ZGCOUNT", 1)]
    params: list[tuple[str, Any]] = []
    if codec == "RICE_1":
        params = [("BLOCKSIZE", blocksize), ("BYTEPIX", bytepix)]
    elif codec == "HCOMPRESS_1":
        params = [("SCALE", float(hcomp_scale) if hcomp_scale else 0), ("SMOOTH", int(bool(hcomp_smooth)))]
    for k, (name, value) in enumerate(params, start=1):
        cards += [Card(f"ZNAME{k}", name), Card(f"ZVAL{k}", value)]
    if quantized:
        cards.append(Card("ZQUANTIZ", _DITHER_BY_ID[method], "quantization method"))
        if method:
            cards.append(Card("ZDITHER0", zdither0, "dithering offset when quantizing floats"))
    if any_null:
        cards.append(Card("ZBLANK", _quantize.NULL_VALUE, "null value in the quantized data"))
    if bzero is not None:
        cards += [Card("BSCALE", 1), Card("BZERO", bzero)]
    if keep_scaling and header is not None and bzero is None and zbitpix > 0:
        h = header if isinstance(header, Header) else Header(header)
        for key in ("BSCALE", "BZERO", "BLANK"):
            if key in h:
                cards.append(Card(key, h[key], h.comments[key]))
    for card in _user_cards(header):
        cards.append(card)
    return cards, table, bytes(heap)


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


def _header_bytes(cards: list[Card]) -> bytes:
    from .cards import card_lines

    lines = []
    for c in cards:
        lines += card_lines(c.key, c.value, c.comment)
    return finish_header(lines)


def write_compressed(path: Any, images: Any, header: Any = None, *, overwrite: bool = False,
                     compress: Any = "RICE_1", tile: Optional[Sequence[int]] = None,
                     quantize: Any = None, checksum: bool = False, **options: Any) -> None:
    """Write one image (or a list of images) as an empty primary plus compressed image HDUs.

    ``header`` (a dict/Header, or a list of them, one per image) adds cards; the remaining
    arguments are those of :func:`encode_compressed_hdu`. The file is written atomically.
    """
    from .atomic import atomic_output, check_target
    from .cards import named_errors
    from ..fits.hdu_index import invalidate

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
        sink.write(_header_bytes(primary))
        spans.append((start, sink.offset, 0))
        for k, (arr, h) in enumerate(zip(items, headers), start=1):
            with named_errors(target, k):
                cards, table, heap = encode_compressed_hdu(arr, h, compress=compress, tile=tile,
                                                           quantize=quantize, **options)
                if checksum:
                    cards += [Card("CHECKSUM", "0" * 16), Card("DATASUM", "0")]
                block = _header_bytes(cards)
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

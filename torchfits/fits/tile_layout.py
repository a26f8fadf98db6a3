"""The layout of a tile-compressed image HDU (the FITS tiled image compression convention):
its compression keywords and table columns checked (`tile_layout`), and the header of the image
it stores (`image_header`). Codecs are asked for through a lookup the engine passes in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from ..errors import CorruptHeaderError, TooManyAxesError
from .columns import parse_columns
from .hdu_index import HduEntry, HduIndex
from .header import Card, Header

__all__ = ["CodecRules", "TileLayout", "tile_layout", "image_header"]

_DITHER = {"NO_DITHER": 0, "SUBTRACTIVE_DITHER_1": 1, "SUBTRACTIVE_DITHER_2": 2}
_MAX_TILE_PIXELS = 1 << 31
# A floor below which any decoded size is allowed; above it the decoded image of a file is
# refused beyond what its codec can expand the file to (`CodecRules.max_ratio`).
_MIN_DECODED_BOUND = 256 << 20


class CodecRules(Protocol):
    """What the layout checks need to know of a codec."""

    @property
    def codec_id(self) -> str: ...  # the canonical ZCMPTYPE

    @property
    def max_ratio(self) -> int: ...  # the most one byte of tile data decodes to

    @property
    def stores_integers(self) -> bool: ...  # float images need ZSCALE to be read


@dataclass(frozen=True)
class _VarColumn:
    offset: int  # descriptor offset in the row
    descriptor: str  # "P" or "Q"
    code: str  # element type code
    itemsize: int


@dataclass(frozen=True)
class TileLayout:
    """Everything about one compressed HDU that does not depend on the pixels.

    Shapes are in C order (slowest axis first), like NumPy.
    """

    zcmptype: str
    zbitpix: int
    shape: tuple[int, ...]
    tile: tuple[int, ...]
    grid: tuple[int, ...]  # tiles along each axis
    params: dict
    quantize: int | None  # dither method, None when ZQUANTIZ says NONE / no quantisation
    zdither0: int
    zblank: int | None
    zscale: float | None
    zzero: float | None
    columns: dict  # name -> _VarColumn for the variable-length columns
    scalars: dict  # name -> (offset, dtype) for ZSCALE / ZZERO / ZBLANK columns
    row_bytes: int
    nrows: int

    @property
    def ntiles(self) -> int:
        return math.prod(self.grid)


_ITEMSIZE = {"B": 1, "I": 2, "J": 4, "K": 8, "E": 4, "D": 8}
_SCALAR_DTYPE = {"B": ">u1", "I": ">i2", "J": ">i4", "K": ">i8", "E": ">f4", "D": ">f8"}


def _zparams(s: dict) -> dict:
    params = {}
    for k in range(1, 100):
        name = s.get(f"ZNAME{k}")
        if not isinstance(name, str):
            break
        params[name.strip().upper()] = s.get(f"ZVAL{k}")
    return params


def tile_layout(index: HduIndex, entry: HduEntry,
                codecs: Callable[[str], CodecRules | None]) -> TileLayout:
    """Read and check the compression keywords and the table layout of a compressed HDU.

    ``codecs`` looks a ZCMPTYPE up (the engine's codec registry): None for an unknown one.
    """
    where = f"{index.path}: HDU {entry.index}"
    h = index.header_view(entry)
    zcmptype = str(h.get("ZCMPTYPE", "")).strip().upper()
    codec = codecs(zcmptype)
    if codec is None:
        raise CorruptHeaderError(f"{where}: unsupported compression algorithm ZCMPTYPE={zcmptype!r}")
    zcmptype = codec.codec_id  # the canonical spelling (RICE_ONE is RICE_1)
    zbitpix, naxes = entry.image_layout
    if zbitpix not in (8, 16, 32, 64, -32, -64):
        raise CorruptHeaderError(f"{where}: invalid ZBITPIX {zbitpix!r}")
    if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in naxes):
        raise CorruptHeaderError(f"{where}: invalid ZNAXISn values {naxes!r}")
    if len(naxes) > 64:
        raise TooManyAxesError(f"{where}: the compressed image has {len(naxes)} axes; NumPy arrays "
                               "and tensors hold at most 64 (the FITS standard allows 999)")
    tiles = []
    for k, n in enumerate(naxes, start=1):
        t = h.get(f"ZTILE{k}", n if k == 1 else 1)
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise CorruptHeaderError(f"{where}: invalid ZTILE{k}={t!r}")
        tiles.append(min(t, max(n, 1)))
    grid_f = [(-(-n // t) if n else 0) for n, t in zip(naxes, tiles)]
    if math.prod(tiles) > _MAX_TILE_PIXELS:
        raise CorruptHeaderError(f"{where}: tiles of {' x '.join(map(str, tiles))} pixels are too large")
    nrows = entry.nrows
    ntiles = math.prod(grid_f) if naxes else 0
    if ntiles != nrows:
        raise CorruptHeaderError(
            f"{where}: ZNAXISn / ZTILEn describe {ntiles} tiles but the table has {nrows} rows")
    decoded = math.prod(naxes) * (abs(zbitpix) // 8) if naxes else 0
    bound = max(_MIN_DECODED_BOUND, codec.max_ratio * index.size)
    if decoded > bound:
        # No codec expands a file this small into that many bytes: the header lies.
        raise CorruptHeaderError(
            f"{where}: ZNAXISn = {' x '.join(map(str, naxes))} ({decoded} bytes) cannot come from "
            f"a {index.size}-byte file with {zcmptype}")
    specs = parse_columns(h, "bintable")
    columns, scalars = {}, {}
    for spec in specs:
        name = spec.name.strip().upper()
        if name in ("COMPRESSED_DATA", "GZIP_COMPRESSED_DATA", "UNCOMPRESSED_DATA") and spec.is_vla:
            columns[name] = _VarColumn(spec.offset, spec.descriptor or "P", spec.code,
                                       _ITEMSIZE.get(spec.code, 1))
        elif name in ("ZSCALE", "ZZERO", "ZBLANK") and not spec.is_vla and spec.code in _SCALAR_DTYPE:
            scalars[name] = (spec.offset, np.dtype(_SCALAR_DTYPE[spec.code]))
    if "COMPRESSED_DATA" not in columns:
        raise CorruptHeaderError(f"{where}: no COMPRESSED_DATA column")
    quant = h.get("ZQUANTIZ")
    quantize: int | None
    if zbitpix < 0 and ("ZSCALE" in scalars or "ZSCALE" in h):
        quantize = _DITHER.get(str(quant).strip().upper(), 0) if quant is not None else 0
        if isinstance(quant, str) and quant.strip().upper() == "NONE":
            quantize = None
    else:
        quantize = None
    if zbitpix < 0 and quantize is None and codec.stores_integers:
        # These codecs store integers: a float image needs the quantisation scale to be read.
        raise CorruptHeaderError(
            f"{where}: floating-point image (ZBITPIX={zbitpix}) compressed with {zcmptype} has no "
            "ZSCALE column or keyword (a TTYPEn naming it may be garbled)")
    zdither0 = h.get("ZDITHER0", 1)
    if isinstance(zdither0, bool) or not isinstance(zdither0, int):
        zdither0 = 1
    if not -2**62 < zdither0 < 2**62:
        raise CorruptHeaderError(f"{where}: ZDITHER0={zdither0} is out of range")
    zblank = h.get("ZBLANK")
    zblank = zblank if isinstance(zblank, int) and not isinstance(zblank, bool) else None
    if zblank is not None and not -2**63 <= zblank < 2**63:
        raise CorruptHeaderError(f"{where}: ZBLANK={zblank} does not fit a 64-bit integer")
    zscale = h.get("ZSCALE") if isinstance(h.get("ZSCALE"), (int, float)) else None
    zzero = h.get("ZZERO") if isinstance(h.get("ZZERO"), (int, float)) else None
    return TileLayout(zcmptype, zbitpix, tuple(reversed(naxes)), tuple(reversed(tiles)),
                      tuple(reversed(grid_f)), _zparams(h), quantize, zdither0, zblank,
                      zscale, zzero, columns, scalars, entry.naxes[0] if entry.naxes else 0, nrows)


# -- header ---------------------------------------------------------------------------------------
_RESTORE = {"ZSIMPLE": "SIMPLE", "ZTENSION": "XTENSION", "ZBITPIX": "BITPIX", "ZNAXIS": "NAXIS",
            "ZPCOUNT": "PCOUNT", "ZGCOUNT": "GCOUNT", "ZEXTEND": "EXTEND", "ZBLOCKED": "BLOCKED",
            "ZHECKSUM": "CHECKSUM", "ZDATASUM": "DATASUM"}
_DROP = {"XTENSION", "BITPIX", "NAXIS", "PCOUNT", "GCOUNT", "TFIELDS", "THEAP", "ZIMAGE",
         "ZCMPTYPE", "ZQUANTIZ", "ZDITHER0", "ZMASKCMP", "ZBLANK", "ZSCALE", "ZZERO", "CHECKSUM",
         "DATASUM", "SIMPLE", "EXTEND", "END"}
_DROP_PREFIX = ("TTYPE", "TFORM", "TUNIT", "TDIM", "TNULL", "TSCAL", "TZERO", "TDISP", "TBCOL",
                "NAXIS", "ZTILE", "ZNAME", "ZVAL", "ZNAXIS")


def _dropped(key: str) -> bool:
    if key in _DROP or key in _RESTORE:
        return True
    for p in _DROP_PREFIX:
        if key.startswith(p) and key[len(p):].isdigit():
            return True
    return False


def image_header(raw: Header, where: str = "") -> Header:
    """The header of the uncompressed image from the header of its compressed HDU.

    ZSIMPLE/ZTENSION, ZBITPIX, ZNAXISn, ZPCOUNT/ZGCOUNT, ZEXTEND, ZHECKSUM/ZDATASUM become their
    plain forms; the table and compression keywords are removed; every other card is kept.
    """
    out = Header()
    primary = "ZSIMPLE" in raw
    if primary:
        out.append(Card("SIMPLE", True, raw.comments["ZSIMPLE"] if "ZSIMPLE" in raw else ""))
    else:
        out.append(Card("XTENSION", str(raw.get("ZTENSION", "IMAGE")).strip() or "IMAGE",
                        "Image extension"))
    out.append(Card("BITPIX", raw.get("ZBITPIX"), raw.comments["ZBITPIX"] if "ZBITPIX" in raw else ""))
    znaxis = raw.get("ZNAXIS", 0)
    znaxis = znaxis if isinstance(znaxis, int) and not isinstance(znaxis, bool) else 0
    if not 0 <= znaxis <= 999:
        raise CorruptHeaderError(f"{where or 'compressed image'}: ZNAXIS={znaxis} is outside 0..999")
    out.append(Card("NAXIS", znaxis, raw.comments["ZNAXIS"] if "ZNAXIS" in raw else ""))
    for k in range(1, znaxis + 1):
        key = f"ZNAXIS{k}"
        out.append(Card(f"NAXIS{k}", raw.get(key), raw.comments[key] if key in raw else ""))
    if primary:
        if "ZEXTEND" in raw:
            out.append(Card("EXTEND", raw["ZEXTEND"], raw.comments["ZEXTEND"]))
    else:
        out.append(Card("PCOUNT", raw.get("ZPCOUNT", 0), ""))
        out.append(Card("GCOUNT", raw.get("ZGCOUNT", 1), ""))
    for card in raw.cards:
        key = card.key.upper()
        if _dropped(key):
            continue
        if key == "EXTNAME" and str(card.value).strip() == "COMPRESSED_IMAGE":
            continue
        out.append(card)
    for zkey, key in (("ZHECKSUM", "CHECKSUM"), ("ZDATASUM", "DATASUM")):
        if zkey in raw:
            out.append(Card(key, raw[zkey], raw.comments[zkey]))
    return out

"""How the stored pixels of an image HDU become result values: the kernel mode, BSCALE/BZERO/
BLANK scaling and the result dtype (`plan_image`), for plain, tile-compressed and random-groups
images alike. Below the engine, so metadata calls answer dtypes without importing it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._kernels import _image
from .hdu_index import HduEntry
from .header import Header

__all__ = ["ImagePlan", "plan_image", "groups_layout", "groups_plans"]

_STORAGE: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
            64: np.dtype(np.int64), -32: np.dtype(np.float32), -64: np.dtype(np.float64)}
_UNSIGNED: dict[int, tuple[float, np.dtype]] = {
    8: (-128.0, np.dtype(np.int8)), 16: (32768.0, np.dtype(np.uint16)),
    32: (2147483648.0, np.dtype(np.uint32)), 64: (9223372036854775808.0, np.dtype(np.uint64))}
_SCALED: dict[int, np.dtype] = {8: np.dtype(np.float32), 16: np.dtype(np.float32), -32: np.dtype(np.float32),
           32: np.dtype(np.float64), 64: np.dtype(np.float64), -64: np.dtype(np.float64)}
_TOLERANCE = 1e-5


@dataclass(frozen=True)
class ImagePlan:
    """How to turn stored pixels into result values: kernel mode, scaling and result dtype."""

    bitpix: int
    shape: tuple[int, ...]
    dtype: np.dtype
    mode: int
    bscale: float = 1.0
    bzero: float = 0.0
    blank: int | None = None

    @property
    def storage_dtype(self) -> np.dtype:
        return _STORAGE[self.bitpix]


def _applied(header: Header, key: str, default: Any) -> Any:
    """The value of ``key`` that scaling applies: its last card when the keyword is repeated."""
    last = getattr(header, "_last_of_duplicates", None)
    if last and key in last:
        return last[key]
    return header.get(key, default)


def _number(header: Header, key: str, default: float) -> float:
    value = _applied(header, key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)


def plan_image(entry: HduEntry, header: Header, *, raw_scale: bool = False,
               uint64_as_float: bool = False) -> ImagePlan:
    """Choose the decode for one image HDU (the dtype rules of docs/images.md).

    ``uint64_as_float`` selects the torchfits 1.x rule for BITPIX=64 + BZERO=2^63 (float64)
    instead of the native uint64.
    """
    bitpix = entry.bitpix
    # An HDU without data (NAXIS=0) reads as an empty 1-D array.
    shape = entry.shape if entry.naxes else (0,)
    if raw_scale:
        return ImagePlan(bitpix, shape, _STORAGE[bitpix], _image.MODE_RAW)
    bscale = _number(header, "BSCALE", 1.0)
    bzero = _number(header, "BZERO", 0.0)
    blank = _applied(header, "BLANK", None) if bitpix > 0 else None
    if isinstance(blank, bool) or not isinstance(blank, int):
        blank = None
    elif not -(1 << (bitpix - 1)) <= blank < (1 << (bitpix - 1)) and not (bitpix == 8 and 0 <= blank < 256):
        blank = None  # no stored value can equal it
    if bitpix > 0 and abs(bscale - 1.0) < _TOLERANCE and bitpix in _UNSIGNED:
        offset, dtype = _UNSIGNED[bitpix]
        if abs(bzero - offset) < _TOLERANCE and not (bitpix == 64 and uint64_as_float):
            # Unsigned / signed-byte conventions: exact, BLANK ignored (it is a physical value).
            return ImagePlan(bitpix, shape, dtype, _image.MODE_FLIP)
    if bscale == 1.0 and bzero == 0.0 and blank is None:
        return ImagePlan(bitpix, shape, _STORAGE[bitpix], _image.MODE_RAW)
    return ImagePlan(bitpix, shape, _SCALED[bitpix], _image.MODE_SCALE, bscale, bzero, blank)


def groups_layout(entry: HduEntry) -> tuple[int, int, int, tuple[int, ...]]:
    """(GCOUNT, PCOUNT, values per array, array shape in C order) of a random-groups HDU."""
    shape = tuple(reversed(entry.naxes[1:]))
    return entry.gcount, entry.pcount, math.prod(shape), shape


def groups_plans(entry: HduEntry, header: Header, raw_scale: bool) -> tuple[ImagePlan, ImagePlan]:
    """(plan of the arrays as the user sees them, plan of one group row as stored): the arrays
    follow the image dtype rules with BSCALE/BZERO/BLANK; each row is PCOUNT + N values."""
    gcount, pcount, n, shape = groups_layout(entry)
    fake = SimpleNamespace(bitpix=entry.bitpix, naxes=(1,), shape=(1,))
    base = plan_image(fake, header, raw_scale=raw_scale)  # type: ignore[arg-type]
    return replace(base, shape=(gcount,) + shape), replace(base, shape=(gcount, pcount + n))

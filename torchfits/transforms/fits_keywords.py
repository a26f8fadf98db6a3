"""Transforms driven by FITS keywords: BSCALE/BZERO and BITPIX for images, TSCALn/TZEROn and
TNULLn for table columns.

torchfits' readers already apply BSCALE/BZERO, TSCAL/TZERO and TNULL (unless asked for raw
values), so these are for stored values: ``read(..., raw_scale=True)``, hand-built column
dicts, or data from other readers.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from ..errors import TransformError
from ._common import Dims, as_work, check_dim_param, out_dtype
from .base import FITSTransform
from .stats import extremes

__all__ = ["FITSHeaderScale", "FITSHeaderNormalize", "FITSScaleColumns", "TNullToNan"]


def _number(header: Mapping[str, Any], key: str, default: float, who: str) -> float:
    value = header.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool):
        raise TransformError(f"{who}: header keyword {key}={value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TransformError(f"{who}: header keyword {key}={value!r} is not a number") from None


def _path_header(path: Any, hdu: Any) -> Mapping[str, Any]:
    from ..fits.metadata import read_header

    return read_header(path, hdu)


def _linear(x: torch.Tensor, scale: float, zero: float) -> torch.Tensor:
    return (as_work(x) * scale + zero).to(out_dtype(x.dtype))


def _unlinear(x: torch.Tensor, scale: float, zero: float) -> torch.Tensor:
    return ((as_work(x) - zero) / scale).to(out_dtype(x.dtype))


def _low_span(value_range: tuple[float, float], like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (low, high) range as (low, high - low) tensors in ``like``'s dtype and device."""
    lo, hi = value_range
    return (torch.tensor(lo, dtype=like.dtype, device=like.device),
            torch.tensor(hi - lo, dtype=like.dtype, device=like.device))


class FITSHeaderScale(FITSTransform):
    """``physical = BSCALE * stored + BZERO``; ``inverse`` gives ``(physical - BZERO) / BSCALE``.

    For stored values (``read(..., raw_scale=True)``): the default reads are physical already,
    and scaling them again would be wrong. Integer inputs give float32 (float64 for 32/64-bit
    integers), never a wrapped integer; BSCALE=1, BZERO=0 returns the input untouched. A
    payload's ``ivar`` becomes ``ivar / BSCALE**2``.

    Parameters
    ----------
    bscale : float
        BSCALE, non-zero (default 1).
    bzero : float
        BZERO (default 0).
    """

    def __init__(self, bscale: float = 1.0, bzero: float = 0.0) -> None:
        self.bscale = _number({"BSCALE": bscale}, "BSCALE", 1.0, "FITSHeaderScale")
        self.bzero = _number({"BZERO": bzero}, "BZERO", 0.0, "FITSHeaderScale")
        if self.bscale == 0 or not math.isfinite(self.bscale):
            raise TransformError(f"FITSHeaderScale: bscale must be finite and non-zero, got {bscale!r}")
        if not math.isfinite(self.bzero):
            raise TransformError(f"FITSHeaderScale: bzero must be finite, got {bzero!r}")

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> FITSHeaderScale:
        """From a header mapping (``torchfits.Header``, ``astropy.io.fits.Header``, dict);
        absent keywords take the FITS defaults 1 and 0."""
        return cls(_number(header, "BSCALE", 1.0, cls.__name__),
                   _number(header, "BZERO", 0.0, cls.__name__))

    @classmethod
    def from_path(cls, path: Any, hdu: Any = 0) -> FITSHeaderScale:
        """From the header of HDU ``hdu`` of the file at ``path``."""
        return cls.from_header(_path_header(path, hdu))

    def _identity(self) -> bool:
        return self.bscale == 1.0 and self.bzero == 0.0

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        if self._identity():
            self._view(x, mask)  # still reject what is not a tensor or payload
            return x
        v = self._view(x, mask)
        out = _linear(v.flux, self.bscale, self.bzero)
        if v.ivar is None:
            return v.rebuild(out)
        return v.rebuild(out, ivar=(as_work(v.ivar) / self.bscale ** 2).to(out_dtype(v.ivar.dtype)))

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        if self._identity():
            self._view(x, mask)
            return x
        v = self._view(x, mask)
        out = _unlinear(v.flux, self.bscale, self.bzero)
        if v.ivar is None:
            return v.rebuild(out)
        return v.rebuild(out, ivar=(as_work(v.ivar) * self.bscale ** 2).to(out_dtype(v.ivar.dtype)))

    def _repr_args(self) -> dict[str, Any]:
        return {"bscale": self.bscale, "bzero": self.bzero}


class FITSHeaderNormalize(FITSTransform):
    """Normalize to [0, 1] by what the header says the data can hold.

    Integer images (BITPIX 8, 16, 32, 64) map the physical range of their storage type,
    ``BSCALE * [min, max] + BZERO``, onto [0, 1] (BITPIX 8 is unsigned; BITPIX 16 with
    BZERO 32768 is the unsigned 16-bit convention and maps [0, 65535]). Floating images
    (BITPIX -32, -64) are returned untouched, unless ``scale_floats=True``: then min-max over
    ``dim`` (every dim by default), and ``inverse`` uses the limits of the last ``forward``.
    Works on physical values (what torchfits reads return). ``ivar`` is propagated.

    Parameters
    ----------
    header : mapping
        Must hold BITPIX; BSCALE and BZERO default to 1 and 0.
    scale_floats : bool
        Min-max normalize floating images (default False).
    dim : int or tuple of int or None
        Dims of the min-max for ``scale_floats`` (keyword only; default all).
    """

    _RANGES = {8: (0, 255), 16: (-(2 ** 15), 2 ** 15 - 1), 32: (-(2 ** 31), 2 ** 31 - 1),
               64: (-(2 ** 63), 2 ** 63 - 1)}

    def __init__(self, header: Mapping[str, Any], scale_floats: bool = False, *,
                 dim: Dims = None) -> None:
        if not hasattr(header, "get"):
            raise TransformError("FITSHeaderNormalize: header must be a mapping, got "
                                 f"{type(header).__name__}")
        bitpix = header.get("BITPIX")
        if bitpix not in (8, 16, 32, 64, -32, -64) or isinstance(bitpix, bool):
            raise TransformError(f"FITSHeaderNormalize: BITPIX must be one of 8, 16, 32, 64, "
                                 f"-32, -64, got {bitpix!r}")
        self.bitpix = int(bitpix)
        self.bscale = _number(header, "BSCALE", 1.0, "FITSHeaderNormalize")
        self.bzero = _number(header, "BZERO", 0.0, "FITSHeaderNormalize")
        if self.bscale == 0:
            raise TransformError("FITSHeaderNormalize: BSCALE must be non-zero")
        self.scale_floats = bool(scale_floats)
        self.dim = check_dim_param(dim, "FITSHeaderNormalize")
        self._range: tuple[float, float] | None = None
        if self.bitpix > 0:
            lo, hi = self._RANGES[self.bitpix]
            self._range = (lo * self.bscale + self.bzero, hi * self.bscale + self.bzero)

    @classmethod
    def from_path(cls, path: Any, hdu: Any = 0, *, scale_floats: bool = False,
                  dim: Dims = None) -> FITSHeaderNormalize:
        """From the header of HDU ``hdu`` of the file at ``path``."""
        return cls(_path_header(path, hdu), scale_floats, dim=dim)

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        if self._range is None and not self.scale_floats:
            return x
        # 32/64-bit integer counts need float64: float32 would merge neighbouring values.
        xw = as_work(v.flux)
        if self._range is not None:
            low, span = _low_span(self._range, xw)
        else:
            with torch.no_grad():
                low, high = extremes(xw, self.dim, v.valid)
            span = torch.where(high > low, high - low, torch.ones_like(low))
            self._remember(low=low, span=span)
        out = ((xw - low) / span).to(out_dtype(v.flux.dtype))
        if v.ivar is None:
            return v.rebuild(out)
        return v.rebuild(out, ivar=(as_work(v.ivar) * span * span).to(out_dtype(v.ivar.dtype)))

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        if self._range is None and not self.scale_floats:
            return x
        yw = as_work(v.flux)
        if self._range is not None:
            low, span = _low_span(self._range, yw)
        else:
            low, span = self._recall("low", "span")
        out = (yw * span + low).to(out_dtype(v.flux.dtype))
        if v.ivar is None:
            return v.rebuild(out)
        return v.rebuild(out, ivar=(as_work(v.ivar) / (span * span)).to(out_dtype(v.ivar.dtype)))

    def _repr_args(self) -> dict[str, Any]:
        return {"bitpix": self.bitpix, "bscale": self.bscale, "bzero": self.bzero,
                "scale_floats": self.scale_floats}


def _columns(x: Any, who: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise TransformError(f"{who} takes a dict of column tensors (like table.read_torch "
                             f"returns), got {type(x).__name__}")
    return dict(x)


def _column(out: dict[str, Any], name: str, who: str) -> torch.Tensor:
    value = out[name]
    if not isinstance(value, torch.Tensor):
        raise TransformError(f"{who}: column {name!r} is a {type(value).__name__}, not a tensor")
    return value


def _table_columns(header: Mapping[str, Any], who: str) -> dict[int, str]:
    n = header.get("TFIELDS")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise TransformError(f"{who}: the header has no valid TFIELDS (got {n!r}); is it a "
                             "table header?")
    return {i: str(header.get(f"TTYPE{i}", f"col{i}")).strip() for i in range(1, n + 1)}


class FITSScaleColumns(FITSTransform):
    """``physical = TSCAL * stored + TZERO`` for the named columns of a column dict.

    Computed in float64, as the table readers do. Columns absent from the dict are skipped;
    columns with TSCAL=1, TZERO=0 are left as they are. ``inverse`` removes the scaling
    (the result stays float64).

    Parameters
    ----------
    scales : mapping of str to (float, float)
        Column name to ``(TSCAL, TZERO)``; TSCAL must be non-zero.
    """

    def __init__(self, scales: Mapping[str, tuple[float, float]]) -> None:
        if not isinstance(scales, Mapping):
            raise TransformError(f"FITSScaleColumns: scales must be a mapping of column name to "
                                 f"(TSCAL, TZERO), got {type(scales).__name__}")
        self.scales: dict[str, tuple[float, float]] = {}
        for name, pair in scales.items():
            try:
                tscal, tzero = (float(p) for p in pair)
            except (TypeError, ValueError):
                raise TransformError(f"FITSScaleColumns: column {name!r} needs a (TSCAL, TZERO) "
                                     f"pair of numbers, got {pair!r}") from None
            if tscal == 0:
                raise TransformError(f"FITSScaleColumns: TSCAL of column {name!r} must be non-zero")
            if (tscal, tzero) != (1.0, 0.0):
                self.scales[str(name)] = (tscal, tzero)

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> FITSScaleColumns:
        """From a binary/ASCII table header (TFIELDS, TTYPEn, TSCALn, TZEROn)."""
        who = cls.__name__
        return cls({name: (_number(header, f"TSCAL{i}", 1.0, who),
                           _number(header, f"TZERO{i}", 0.0, who))
                    for i, name in _table_columns(header, who).items()})

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        out = _columns(x, type(self).__name__)
        for name, (tscal, tzero) in self.scales.items():
            if name in out:
                out[name] = _column(out, name, type(self).__name__).to(torch.float64) * tscal + tzero
        return out

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        out = _columns(x, type(self).__name__)
        for name, (tscal, tzero) in self.scales.items():
            if name in out:
                out[name] = (_column(out, name, type(self).__name__).to(torch.float64) - tzero) / tscal
        return out

    def __repr__(self) -> str:
        return f"FITSScaleColumns({self.scales!r})"


class TNullToNan(FITSTransform):
    """Replace each column's TNULL sentinel with NaN.

    Integer columns become float64 (exact up to 2**53) so NaN can be stored; float columns
    keep their dtype. The comparison runs in the column's own dtype, so a valid value that
    would round onto the sentinel in a float is not nulled. There is no inverse.

    Parameters
    ----------
    nulls : mapping of str to int or float
        Column name to TNULL value.
    """

    invertible = False

    def __init__(self, nulls: Mapping[str, Any]) -> None:
        if not isinstance(nulls, Mapping):
            raise TransformError(f"TNullToNan: nulls must be a mapping of column name to TNULL, "
                                 f"got {type(nulls).__name__}")
        self.nulls: dict[str, Any] = {}
        for name, value in nulls.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TransformError(f"TNullToNan: TNULL of column {name!r} must be a number, "
                                     f"got {value!r}")
            self.nulls[str(name)] = value

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> TNullToNan:
        """From a table header: the columns with a TNULLn keyword."""
        cols = _table_columns(header, cls.__name__)
        return cls({name: header[f"TNULL{i}"] for i, name in cols.items()
                    if header.get(f"TNULL{i}") is not None})

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        out = _columns(x, type(self).__name__)
        for name, tnull in self.nulls.items():
            if name not in out:
                continue
            col = _column(out, name, type(self).__name__)
            if col.dtype == torch.bool:
                continue  # logical columns have no TNULL (FITS nulls them with a zero byte)
            if col.dtype.is_floating_point:
                hit = col == float(tnull)
            else:
                if float(tnull) != int(tnull):
                    continue  # a fractional sentinel can never equal an integer value
                info = torch.iinfo(col.dtype)
                if not info.min <= int(tnull) <= info.max:
                    out[name] = col.to(torch.float64)
                    continue
                hit = col == int(tnull)
                col = col.to(torch.float64)
            out[name] = torch.where(hit, col.new_full((), float("nan")), col)
        return out

    def __repr__(self) -> str:
        return f"TNullToNan({self.nulls!r})"

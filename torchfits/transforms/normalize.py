"""Normalizations: ``(x - offset) / scale`` with per-image statistics, undone by ``inverse``.

Each class computes its statistics over ``dim`` (default ``(-2, -1)``, one set per image of a
batch), remembers them for ``inverse`` (per thread), and propagates a payload's ``ivar``
exactly (``ivar * scale**2``) except where clipping makes the map nonlinear.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import TransformError
from ._common import Dims, View, as_work, check_dim_param, choice, out_dtype, positive, reduce_dims
from .base import FITSTransform
from .stats import estimate_background, extremes, flatten, quantiles, unflatten, zscale_limits

__all__ = ["ZScaleNormalize", "RobustNormalize", "BackgroundSubtract",
           "PercentileClipNormalize", "MinMaxNormalize", "GlobalScalarNorm"]


class _Affine(FITSTransform):
    """``y = (x - offset) / scale`` with ``offset``/``scale`` from :meth:`_stats`."""

    dim: tuple[int, ...] | None = (-2, -1)
    linear = True

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _map(self, xw: torch.Tensor, offset: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (xw - offset) / scale

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        xw = as_work(v.flux)
        with torch.no_grad():
            offset, scale = self._stats(xw, v)
        self._remember(offset=offset, scale=scale)
        out = self._map(xw, offset, scale).to(out_dtype(v.flux.dtype))
        if v.ivar is None:
            return v.rebuild(out)
        if not self.linear:
            self._warn_ivar()
            return v.rebuild(out)
        ivar = (as_work(v.ivar) * scale * scale).to(out_dtype(v.ivar.dtype))
        return v.rebuild(out, ivar=ivar)

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        offset, scale = self._recall("offset", "scale")
        v = self._view(x, mask)
        yw = as_work(v.flux)
        try:
            out = (yw * scale.to(yw.dtype) + offset.to(yw.dtype)).to(out_dtype(v.flux.dtype))
        except RuntimeError:
            raise TransformError(
                f"{type(self).__name__}.inverse: input shape {tuple(v.flux.shape)} does not "
                f"match the statistics of the last forward() (shape {tuple(scale.shape)})"
            ) from None
        if v.ivar is None or not self.linear:
            return v.rebuild(out)
        return v.rebuild(out, ivar=(as_work(v.ivar) / (scale * scale)).to(out_dtype(v.ivar.dtype)))

    def _repr_args(self) -> dict[str, Any]:
        return {"dim": self.dim}


def _tiny_span(lo: torch.Tensor) -> torch.Tensor:
    # A relative floor: 1e-6 absolute would vanish next to large values in float32.
    return torch.clamp_min(lo.abs() * 1e-6, 1e-6)


class ZScaleNormalize(_Affine):
    """Map the zscale limits ``(z1, z2)`` to 0 and 1: ``y = (x - z1) / (z2 - z1)``.

    Values outside the limits map outside [0, 1] (no clipping). ``inverse`` uses the limits of
    the last ``forward``.

    Parameters
    ----------
    contrast : float
        zscale contrast (default 0.25).
    dim : int or tuple of int or None
        Dims the limits are computed over (default ``(-2, -1)``).
    algorithm : {"proxy", "iraf"}
        See :func:`zscale_limits`; ``"iraf"`` matches ``astropy.visualization.ZScaleInterval``.
    """

    def __init__(self, contrast: float = 0.25, dim: Dims = (-2, -1), *,
                 algorithm: str = "proxy") -> None:
        self.contrast = positive(contrast, "contrast", "ZScaleNormalize", allow_zero=True)
        self.dim = check_dim_param(dim, "ZScaleNormalize")
        self.algorithm = choice(algorithm, ("proxy", "iraf"), "algorithm", "ZScaleNormalize")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        z1, z2 = zscale_limits(xw, self.contrast, self.dim, v.valid, algorithm=self.algorithm)
        return z1, z2 - z1

    def _repr_args(self) -> dict[str, Any]:
        return {"contrast": self.contrast, "dim": self.dim, "algorithm": self.algorithm}


class RobustNormalize(_Affine):
    """``y = (x - median) / sigma``, sigma the MAD-based standard deviation.

    Zero median and unit robust scale per image; sigma is floored at 1e-9 so a constant image
    maps to 0 instead of NaN. See :func:`estimate_background`.
    """

    def __init__(self, dim: Dims = (-2, -1)) -> None:
        self.dim = check_dim_param(dim, "RobustNormalize")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        med, sigma = estimate_background(xw, self.dim, v.valid)
        return med, torch.clamp_min(sigma, 1e-9)


class BackgroundSubtract(_Affine):
    """``y = x - median``: remove the sky level; ``ivar`` is unchanged."""

    def __init__(self, dim: Dims = (-2, -1)) -> None:
        self.dim = check_dim_param(dim, "BackgroundSubtract")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        med, _ = estimate_background(xw, self.dim, v.valid)
        return med, torch.ones_like(med)


class PercentileClipNormalize(_Affine):
    """Clip to the ``[lower_pct, upper_pct]`` percentiles, then map that range onto [0, 1].

    The same result as ``astropy.visualization.AsymmetricPercentileInterval(lower_pct,
    upper_pct)`` followed by a clipping ``ImageNormalize``. Percentiles interpolate linearly,
    as ``numpy.percentile`` does. ``inverse`` is approximate: clipped values come back as the
    limits. Clipping is nonlinear, so ``ivar`` passes through (with a warning).

    Parameters
    ----------
    lower_pct, upper_pct : float
        Percentiles with ``0 <= lower_pct <= upper_pct <= 100`` (defaults 1 and 99). Equal
        values give a constant 0 image.
    dim : int or tuple of int or None
        Dims the percentiles are computed over (default ``(-2, -1)``).
    """

    linear = False

    def __init__(self, lower_pct: float = 1.0, upper_pct: float = 99.0,
                 dim: Dims = (-2, -1)) -> None:
        lo = positive(lower_pct, "lower_pct", "PercentileClipNormalize", allow_zero=True)
        hi = positive(upper_pct, "upper_pct", "PercentileClipNormalize", allow_zero=True)
        if not lo <= hi <= 100:
            raise TransformError("PercentileClipNormalize: need 0 <= lower_pct <= upper_pct "
                                 f"<= 100, got lower_pct={lower_pct!r}, upper_pct={upper_pct!r}")
        self.lower_pct, self.upper_pct = lo, hi
        self.dim = check_dim_param(dim, "PercentileClipNormalize")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = quantiles(xw, (self.lower_pct / 100, self.upper_pct / 100), self.dim, v.valid)
        return lo, torch.where(hi > lo, hi - lo, torch.ones_like(lo))

    def _map(self, xw: torch.Tensor, offset: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch.clamp((xw - offset) / scale, 0, 1)

    def _repr_args(self) -> dict[str, Any]:
        return {"lower_pct": self.lower_pct, "upper_pct": self.upper_pct, "dim": self.dim}


class MinMaxNormalize(_Affine):
    """``y = (x - min) / (max - min)`` over the valid pixels of each image.

    A constant image uses a tiny span (``max(1e-6, 1e-6 |min|)``) and maps to 0; an image with
    no valid pixel gives NaN. Matches ``astropy.visualization.MinMaxInterval``.
    """

    def __init__(self, dim: Dims = (-2, -1)) -> None:
        self.dim = check_dim_param(dim, "MinMaxNormalize")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = extremes(xw, self.dim, v.valid)
        return lo, torch.where(hi > lo, hi - lo, _tiny_span(lo))


class GlobalScalarNorm(_Affine):
    """``y = x / s`` for one statistic ``s`` of the data (no offset, so zero stays zero).

    The simplest normalization, common in astronomical foundation models; colours (band
    ratios) survive when ``dim`` includes the channel axis.

    Parameters
    ----------
    stat : {"median", "max", "mean", "rms"}
        The statistic (default ``"median"``), over the valid pixels.
    dim : int or tuple of int or None
        Dims it is computed over; ``None`` (default) gives one scalar for the whole input.

    Notes
    -----
    ``s`` keeps its sign but its magnitude is floored at 1e-30; a statistic that is NaN (no
    valid pixel) divides by 1.
    """

    def __init__(self, stat: str = "median", dim: Dims = None) -> None:
        self.stat = choice(stat, ("median", "max", "mean", "rms"), "stat", "GlobalScalarNorm")
        self.dim = check_dim_param(dim, "GlobalScalarNorm")

    def _stats(self, xw: torch.Tensor, v: View) -> tuple[torch.Tensor, torch.Tensor]:
        dims = reduce_dims(xw.ndim, self.dim, "GlobalScalarNorm")
        if self.stat == "median":
            s = quantiles(xw, (0.5,), dims, v.valid)[0]
        elif self.stat == "max":
            s = extremes(xw, dims, v.valid)[1]
        else:
            flat, valid = flatten(xw, dims), flatten(v.valid, dims)
            data = flat if self.stat == "mean" else flat * flat
            n = valid.sum(-1)
            total = torch.where(valid, data, torch.zeros_like(data)).sum(-1)
            s = total / n.clamp_min(1)
            s = torch.where(n > 0, s, s.new_full((), float("nan")))
            if self.stat == "rms":
                s = torch.sqrt(s)
            s = unflatten(s, xw.shape, dims)
        floored = torch.where(s < 0, torch.clamp_max(s, -1e-30), torch.clamp_min(s, 1e-30))
        scale = torch.where(torch.isfinite(s), floored, torch.ones_like(s))
        return torch.zeros_like(scale), scale

    def _map(self, xw: torch.Tensor, offset: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return xw / scale

    def _repr_args(self) -> dict[str, Any]:
        return {"stat": self.stat, "dim": self.dim}

"""Pointwise stretches for high-dynamic-range data: arcsinh, log and square root."""
from __future__ import annotations

import math
from typing import Any

import torch

from ._common import as_work, out_dtype, positive
from .base import FITSTransform
from .stats import safe_arcsinh

__all__ = ["ArcsinhStretch", "LogStretch", "SqrtStretch"]


class _Stretch(FITSTransform):
    """A pointwise map ``f`` with an exact inverse; ``ivar`` optionally by the delta method."""

    batchable = True  # pointwise with fixed parameters: a batch equals its items stacked

    def __init__(self, propagate_ivar: bool) -> None:
        self.propagate_ivar = bool(propagate_ivar)

    def _f(self, xw: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _finv(self, yw: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _slope(self, xw: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        xw = as_work(v.flux)
        out = self._f(xw).to(out_dtype(v.flux.dtype))
        if v.ivar is None:
            return v.rebuild(out)
        if not self.propagate_ivar:
            self._warn_ivar()
            return v.rebuild(out)
        # var(f(x)) ~= f'(x)**2 var(x), so ivar' = ivar / f'(x)**2. Where f is flat (clamped
        # input) the output says nothing about the input: ivar 0, not infinity.
        slope = self._slope(xw)
        iw = as_work(v.ivar)
        ivar = torch.where(slope > 0, iw / (slope * slope), torch.zeros_like(iw))
        ivar = ivar.to(out_dtype(v.ivar.dtype))
        return v.rebuild(out, ivar=ivar)

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        yw = as_work(v.flux)
        out = self._finv(yw).to(out_dtype(v.flux.dtype))
        if v.ivar is None or not self.propagate_ivar:
            return v.rebuild(out)
        slope = self._slope(self._finv(yw))
        return v.rebuild(out, ivar=(as_work(v.ivar) * slope * slope).to(out_dtype(v.ivar.dtype)))


class ArcsinhStretch(_Stretch):
    """``y = arcsinh(a * x) / arcsinh(a)``: linear near 0, logarithmic for bright values.

    Maps 0 to 0 and 1 to 1 and keeps bright sources distinguishable instead of saturating.
    Equals ``astropy.visualization.AsinhStretch(a=1/a)`` (astropy's ``a`` is the transition
    point, ours its inverse). Negative values map to negative values (the stretch is odd).

    Parameters
    ----------
    a : float
        Softening, > 0 (default 1). Larger values make faint values brighter.
    propagate_ivar : bool
        Propagate a payload's ``ivar`` by the delta method (slope
        ``a / (sqrt(1 + (a x)**2) arcsinh(a))``); otherwise it passes through unchanged with a
        warning.
    """

    def __init__(self, a: float = 1.0, *, propagate_ivar: bool = False) -> None:
        super().__init__(propagate_ivar)
        self.a = positive(a, "a", "ArcsinhStretch")
        self._norm = math.asinh(self.a)

    def _f(self, xw: torch.Tensor) -> torch.Tensor:
        return safe_arcsinh(xw, self.a) / self._norm

    def _finv(self, yw: torch.Tensor) -> torch.Tensor:
        return torch.sinh(yw * self._norm) / self.a

    def _slope(self, xw: torch.Tensor) -> torch.Tensor:
        return self.a / (torch.sqrt(1 + (self.a * xw) ** 2) * self._norm)

    def _repr_args(self) -> dict[str, Any]:
        return {"a": self.a}


class LogStretch(_Stretch):
    """``y = log10(1 + a * max(x, 0)) / log10(1 + a)``: maps [0, 1] onto [0, 1].

    The same formula as ``astropy.visualization.LogStretch(a)``. Negative values are clamped
    to 0 first (subtract the background before a log stretch), so ``inverse`` returns 0 for
    them.

    Parameters
    ----------
    a : float
        Scale, > 0 (default 1000); larger values lift faint values more.
    eps : float
        Floor on the log argument (default 1e-9); the argument is >= 1 for finite input, so
        this only guards pathological values.
    propagate_ivar : bool
        Propagate ``ivar`` by the delta method (zero information where the input was clamped).
    """

    def __init__(self, a: float = 1000.0, eps: float = 1e-9, *,
                 propagate_ivar: bool = False) -> None:
        super().__init__(propagate_ivar)
        self.a = positive(a, "a", "LogStretch")
        self.eps = positive(eps, "eps", "LogStretch")
        self._norm = math.log10(1 + self.a)

    def _f(self, xw: torch.Tensor) -> torch.Tensor:
        arg = torch.clamp_min(1 + self.a * torch.clamp_min(xw, 0), self.eps)
        return torch.log10(arg) / self._norm

    def _finv(self, yw: torch.Tensor) -> torch.Tensor:
        return (torch.pow(10.0, yw * self._norm) - 1) / self.a

    def _slope(self, xw: torch.Tensor) -> torch.Tensor:
        slope = self.a / ((1 + self.a * torch.clamp_min(xw, 0)) * math.log(1 + self.a))
        return torch.where(xw > 0, slope, torch.zeros_like(slope))

    def _repr_args(self) -> dict[str, Any]:
        return {"a": self.a, "eps": self.eps}


class SqrtStretch(_Stretch):
    """``y = sqrt(max(x, 0))``; ``inverse`` squares.

    Variance-stabilizing for Poisson counts: with ``propagate_ivar=True`` the ivar of Poisson
    data becomes ~4 everywhere. Negative values are clamped to 0.
    """

    def __init__(self, *, propagate_ivar: bool = False) -> None:
        super().__init__(propagate_ivar)

    def _f(self, xw: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(torch.clamp_min(xw, 0))

    def _finv(self, yw: torch.Tensor) -> torch.Tensor:
        return yw * yw

    def _slope(self, xw: torch.Tensor) -> torch.Tensor:
        pos = torch.clamp_min(xw, torch.finfo(xw.dtype).tiny)
        return torch.where(xw > 0, 0.5 / torch.sqrt(pos), torch.zeros_like(xw))

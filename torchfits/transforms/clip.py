"""Outlier rejection: iterative sigma clipping and one-pass asymmetric clipping.

Clipped pixels are replaced by a fill value; they cannot be recovered, so neither class has
an ``inverse``. ``clip_mask`` gives the kept-pixel mask without changing the data.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import TransformError
from ._common import Dims, View, as_work, check_dim_param, choice, out_dtype, positive, reduce_dims
from .base import FITSTransform
from .stats import estimate_background, flatten, row_quantiles, unflatten

__all__ = ["SigmaClip", "AsymmetricSigmaClip"]


def _masked_mean(flat: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    n = keep.sum(-1, keepdim=True)
    total = torch.where(keep, flat, torch.zeros_like(flat)).sum(-1, keepdim=True)
    return torch.where(n > 0, total / n.clamp_min(1), flat.new_full((), float("nan")))


def _masked_median(flat: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return row_quantiles(flat, keep, (0.5,))[0]


class _Clip(FITSTransform):
    invertible = False
    dim: tuple[int, ...] | None = (-2, -1)

    def _keep(self, flat: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(kept mask, fill value per row) for rows of ``flat``."""
        raise NotImplementedError

    def _run(self, v: View) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        xw = as_work(v.flux)
        dims = reduce_dims(xw.ndim, self.dim, type(self).__name__)
        with torch.no_grad():
            keep, fill = self._keep(flatten(xw, dims), flatten(v.valid, dims))
        # Back from (*kept, n) to the input layout: undo the permutation of flatten().
        order = [d for d in range(xw.ndim) if d not in dims] + list(dims)
        moved = [xw.shape[d] for d in order]
        inverse_order = [order.index(d) for d in range(xw.ndim)]
        keep_full = keep.reshape(moved).permute(*inverse_order)
        return xw, keep_full, unflatten(fill, xw.shape, dims)

    def clip_mask(self, x: Any, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Boolean tensor shaped like the flux: True for pixels the clip keeps.

        Masked and non-finite pixels are never kept.
        """
        return self._run(self._view(x, mask))[1]

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        v = self._view(x, mask)
        if v.ivar is not None:
            self._warn_ivar()
        xw, keep, fill = self._run(v)
        return v.rebuild(torch.where(keep, xw, fill).to(out_dtype(v.flux.dtype)))


class SigmaClip(_Clip):
    """Iterative sigma clipping, as ``astropy.stats.sigma_clip`` does it.

    Each iteration computes the center (mean, or median) and the standard deviation of the
    pixels still kept, per image, and rejects pixels outside ``center -/+ n_sigma * std``;
    it stops when nothing changes or after ``max_iter`` iterations. Rejected pixels are
    replaced by ``fill``; masked and non-finite pixels come back NaN.

    Parameters
    ----------
    n_sigma : float
        Threshold in standard deviations, > 0 (default 3).
    max_iter : int
        Iterations, >= 1 (default 5).
    dim : int or tuple of int or None
        Dims clipped together (default ``(-2, -1)``); ``None`` clips the whole input as one.
    fill : {"mean", "median", "nan"}
        Replacement for rejected pixels: the mean or median of the kept pixels, or NaN.
    cenfunc : {"mean", "median"}
        Center of the clipping interval (torchfits 1.x used the mean; astropy's default is the
        median). The standard deviation is always about the mean, as astropy's ``std``.
    """

    def __init__(self, n_sigma: float = 3.0, max_iter: int = 5, dim: Dims = (-2, -1),
                 fill: str = "mean", *, cenfunc: str = "mean") -> None:
        self.n_sigma = positive(n_sigma, "n_sigma", "SigmaClip")
        if not isinstance(max_iter, int) or isinstance(max_iter, bool) or max_iter < 1:
            raise TransformError(f"SigmaClip: max_iter must be an integer >= 1, got {max_iter!r}")
        self.max_iter = max_iter
        self.dim = check_dim_param(dim, "SigmaClip")
        self.fill = choice(fill, ("mean", "median", "nan"), "fill", "SigmaClip")
        self.cenfunc = choice(cenfunc, ("mean", "median"), "cenfunc", "SigmaClip")

    def _keep(self, flat: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = valid
        for _ in range(self.max_iter):
            mean = _masked_mean(flat, keep)
            center = mean if self.cenfunc == "mean" else _masked_median(flat, keep)
            std = torch.sqrt(_masked_mean((flat - mean) ** 2, keep))
            new = keep & (flat >= center - self.n_sigma * std) & (flat <= center + self.n_sigma * std)
            if torch.equal(new, keep):
                break
            keep = new
        if self.fill == "mean":
            fill = _masked_mean(flat, keep)
        elif self.fill == "median":
            fill = _masked_median(flat, keep)
        else:
            fill = flat.new_full(keep.shape[:-1] + (1,), float("nan"))
        return keep, fill

    def _repr_args(self) -> dict[str, Any]:
        return {"n_sigma": self.n_sigma, "max_iter": self.max_iter, "dim": self.dim,
                "fill": self.fill, "cenfunc": self.cenfunc}


class AsymmetricSigmaClip(_Clip):
    """One-pass clipping around the median with separate low and high thresholds.

    Rejects pixels outside ``[median - n_low * sigma, median + n_high * sigma]``, sigma the
    MAD-based standard deviation (:func:`estimate_background`); the same as
    ``astropy.stats.sigma_clip(sigma_lower=n_low, sigma_upper=n_high, maxiters=1,
    cenfunc="median", stdfunc="mad_std")``. Faster than :class:`SigmaClip`, and lets bright
    sources survive a tighter cut on the faint side.

    Parameters
    ----------
    n_low, n_high : float
        Thresholds below and above the median, > 0 (default 3).
    dim : int or tuple of int or None
        Dims clipped together (default ``(-2, -1)``).
    fill : {"median", "nan"}
        Replacement for rejected pixels (default the median).
    """

    def __init__(self, n_low: float = 3.0, n_high: float = 3.0, dim: Dims = (-2, -1),
                 fill: str = "median") -> None:
        self.n_low = positive(n_low, "n_low", "AsymmetricSigmaClip")
        self.n_high = positive(n_high, "n_high", "AsymmetricSigmaClip")
        self.dim = check_dim_param(dim, "AsymmetricSigmaClip")
        self.fill = choice(fill, ("median", "nan"), "fill", "AsymmetricSigmaClip")

    def _keep(self, flat: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        med, sigma = estimate_background(flat, (-1,), valid)
        keep = valid & (flat >= med - self.n_low * sigma) & (flat <= med + self.n_high * sigma)
        fill = med if self.fill == "median" else torch.full_like(med, float("nan"))
        return keep, fill

    def _repr_args(self) -> dict[str, Any]:
        return {"n_low": self.n_low, "n_high": self.n_high, "dim": self.dim, "fill": self.fill}

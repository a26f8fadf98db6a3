"""Masked, batched statistics on tensors: quantiles, robust background, zscale limits, and
the guarded ``safe_arcsinh`` / ``safe_log`` primitives.

Every reduction takes ``dim`` (the axes reduced together, default the last two: one result
per image of a ``(B, C, H, W)`` batch) and a validity ``mask`` (True = use); non-finite values
never count. Results keep the reduced dims (size 1) so they broadcast against the input.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import TransformError
from ._common import Dims, as_work, out_dtype, positive, reduce_dims

__all__ = ["zscale_limits", "estimate_background", "safe_arcsinh", "safe_log"]

# 1 / Phi^-1(3/4): MAD -> standard deviation of a normal distribution (astropy's mad_std).
MAD_TO_STD = 1.482602218505602


def flatten(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Move ``dims`` last and merge them: ``(*kept, n)``."""
    keep = [d for d in range(x.ndim) if d not in dims]
    moved = x.permute(*keep, *dims)
    n = math.prod(x.shape[d] for d in dims)  # explicit: -1 is ambiguous for empty tensors
    return moved.reshape(*moved.shape[: len(keep)], n)


def unflatten(reduced: torch.Tensor, shape: Sequence[int], dims: tuple[int, ...]) -> torch.Tensor:
    """``(*kept,)`` results back to ``shape`` with ``dims`` set to 1."""
    return reduced.reshape([1 if d in dims else n for d, n in enumerate(shape)])


def valid_of(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    valid = torch.isfinite(x) if x.is_floating_point() else torch.ones_like(x, dtype=torch.bool)
    if mask is not None:
        try:
            valid = valid & torch.broadcast_to(mask.to(device=x.device, dtype=torch.bool),
                                               x.shape)
        except RuntimeError:
            raise TransformError(f"mask shape {tuple(mask.shape)} does not broadcast to data "
                                 f"shape {tuple(x.shape)}") from None
    return valid


def _lerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    # NumPy's linear interpolation, including its switch to the upper end for t >= 0.5,
    # so quantiles agree with numpy.percentile to the last bit in most cases.
    diff = b - a
    return torch.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def sorted_rows(flat: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row sorted ascending with invalid entries (as +inf) last; valid counts per row."""
    s, _ = torch.sort(torch.where(valid, flat, flat.new_full((), float("inf"))), dim=-1)
    return s, valid.sum(dim=-1, keepdim=True)


def quantile_sorted(s: torch.Tensor, count: torch.Tensor, q: float) -> torch.Tensor:
    """Linear-interpolated quantile ``q`` of rows sorted by :func:`sorted_rows` (NaN if empty)."""
    if s.shape[-1] == 0:
        return s.new_full(count.shape, float("nan"))
    last = (count - 1).clamp_min(0)
    pos = last.to(torch.float64) * q
    lo = pos.floor().long()
    hi = torch.minimum(lo + 1, last)
    out = _lerp(s.gather(-1, lo), s.gather(-1, hi), (pos - lo).to(s.dtype))
    return torch.where(count > 0, out, out.new_full((), float("nan")))


def _row_quantiles_numpy(flat: torch.Tensor, valid: torch.Tensor,
                         qs: Sequence[float]) -> list[torch.Tensor]:
    # NumPy's partition is a linear-time selection; torch's CPU sort and kthvalue are several
    # times slower for the same medians. Same positions and interpolation as the sort path.
    n = flat.shape[-1]
    a = flat.detach().reshape(-1, n).numpy()
    v = valid.reshape(-1, n).numpy()
    data = np.where(v, a, np.inf)
    counts = v.sum(axis=-1)
    out = np.full((len(qs), a.shape[0]), np.nan, dtype=a.dtype)
    for c in np.unique(counts).tolist():
        if c == 0:
            continue
        rows = np.nonzero(counts == c)[0]
        sub = data if rows.size == data.shape[0] else data[rows]
        pos = [q * (c - 1) for q in qs]
        lo = [math.floor(p) for p in pos]
        hi = [min(lo_ + 1, c - 1) for lo_ in lo]
        sub.partition(sorted(set(lo + hi)), axis=-1)
        for j, (p, lo_, hi_) in enumerate(zip(pos, lo, hi)):
            out[j, rows] = _lerp_np(sub[:, lo_], sub[:, hi_], p - lo_)
    shape = tuple(flat.shape[:-1]) + (1,)
    return [torch.from_numpy(o).reshape(shape) for o in out]


def _lerp_np(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


# Select with NumPy on CPU tensors (the tests switch this off to run the device path on CPU).
SELECT_WITH_NUMPY = True


def row_quantiles(flat: torch.Tensor, valid: torch.Tensor,
                  qs: Sequence[float]) -> list[torch.Tensor]:
    """Quantiles of the valid entries of each row of ``flat`` (shape ``(..., n)``), keepdim,
    NumPy's linear rule; NaN for a row with no valid entry."""
    if (SELECT_WITH_NUMPY and flat.device.type == "cpu" and flat.numel()
            and flat.dtype in (torch.float32, torch.float64)):
        return _row_quantiles_numpy(flat, valid, qs)
    s, count = sorted_rows(flat, valid)
    return [quantile_sorted(s, count, q) for q in qs]


def quantiles(x: torch.Tensor, qs: Sequence[float], dim: Dims = (-2, -1),
              mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """Quantiles (fractions in [0, 1]) over ``dim``, keepdim, NumPy's linear rule."""
    xw = as_work(x)
    dims = reduce_dims(xw.ndim, dim, "quantile")
    found = row_quantiles(flatten(xw, dims), flatten(valid_of(xw, mask), dims), qs)
    return tuple(unflatten(q, xw.shape, dims) for q in found)


def median(x: torch.Tensor, dim: Dims = (-2, -1),
           mask: torch.Tensor | None = None) -> torch.Tensor:
    return quantiles(x, (0.5,), dim, mask)[0]


def extremes(x: torch.Tensor, dim: Dims = (-2, -1),
             mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max of the valid values over ``dim`` (NaN where there are none)."""
    xw = as_work(x)
    dims = reduce_dims(xw.ndim, dim, "min/max")
    valid = valid_of(xw, mask)
    nan = xw.new_full((), float("nan"))
    if xw.numel() == 0:
        shape = [1 if d in dims else n for d, n in enumerate(xw.shape)]
        return xw.new_full(shape, float("nan")), xw.new_full(shape, float("nan"))
    inf = xw.new_full((), float("inf"))
    lo = torch.where(valid, xw, inf).amin(dim=dims, keepdim=True)
    hi = torch.where(valid, xw, -inf).amax(dim=dims, keepdim=True)
    empty = ~valid.any(dim=dims, keepdim=True) if len(dims) == 1 else \
        ~flatten(valid, dims).any(dim=-1).reshape(lo.shape)
    return torch.where(empty, nan, lo), torch.where(empty, nan, hi)


def estimate_background(x: torch.Tensor, dim: Dims = (-2, -1),
                        mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Robust sky level and noise: the median and the MAD scaled to a standard deviation.

    Parameters
    ----------
    x : Tensor
        Data, any shape; integer and half-precision inputs are computed in float32
        (float64 for 32/64-bit integers).
    dim : int or tuple of int or None
        Dims reduced together (default ``(-2, -1)``: one estimate per image); ``None``
        reduces everything.
    mask : Tensor, optional
        Boolean, True where a pixel may be used; broadcast to ``x``. Non-finite values are
        always skipped.

    Returns
    -------
    (median, sigma) : tuple of Tensor
        Keepdim tensors; ``sigma = 1.4826 * median(|x - median|)`` (astropy's ``mad_std``).
        A group with no valid value gives NaN for both.
    """
    xw = as_work(x)
    dims = reduce_dims(xw.ndim, dim, "estimate_background")
    with torch.no_grad():
        flat = flatten(xw, dims)
        valid = flatten(valid_of(xw, mask), dims)
        med = row_quantiles(flat, valid, (0.5,))[0]
        mad = row_quantiles((flat - med).abs(), valid, (0.5,))[0]
    return unflatten(med, xw.shape, dims), unflatten(mad * MAD_TO_STD, xw.shape, dims)


def _zscale_proxy(xw: torch.Tensor, dims: tuple[int, ...], mask: torch.Tensor | None,
                  contrast: float) -> tuple[torch.Tensor, torch.Tensor]:
    med, sigma = estimate_background(xw, dims, mask)
    vmin, vmax = extremes(xw, dims, mask)
    half = sigma / max(contrast, 1e-5)
    z1 = torch.where(sigma == 0, vmin, torch.maximum(med - half, vmin))
    z2 = torch.where(sigma == 0, vmax, torch.minimum(med + half, vmax))
    return z1, z2


def _dilate(bad: torch.Tensor, width: int) -> torch.Tensor:
    """``np.convolve(bad, ones(width), "same") > 0`` along the last dim (left-biased window)."""
    if width <= 1:
        return bad
    padded = torch.nn.functional.pad(bad.to(torch.float32).unsqueeze(1),
                                     (width // 2, (width - 1) // 2))
    return torch.nn.functional.max_pool1d(padded, width, stride=1).squeeze(1) > 0


def _zscale_iraf(xw: torch.Tensor, dims: tuple[int, ...], mask: torch.Tensor | None,
                 contrast: float, n_samples: int, max_reject: float = 0.5,
                 min_npixels: int = 5, krej: float = 2.5,
                 max_iterations: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """The IRAF zscale line fit, one group per row, as astropy's ``ZScaleInterval`` does it.

    Per group: keep the valid values in their original order, take every ``stride``-th of
    them (``stride = max(1, n // n_samples)``) up to ``n_samples``, sort, fit a line to the
    sorted samples with iterative k-sigma rejection (rejections grown by 1% of the samples),
    and bound the limits by the sample extremes.
    """
    flat = flatten(xw, dims)
    kept_shape = flat.shape[:-1]
    n = flat.shape[-1]
    groups = math.prod(kept_shape)
    flat = flat.reshape(groups, n).to(torch.float64)
    valid = flatten(valid_of(xw, mask), dims).reshape(groups, n)
    count = valid.sum(dim=-1, keepdim=True)
    stride = torch.clamp_min(torch.div(count, n_samples, rounding_mode="floor"), 1)
    rank = valid.cumsum(dim=-1) - 1
    take = valid & (rank % stride == 0) & (torch.div(rank, stride, rounding_mode="floor")
                                             < n_samples)
    width = min(n, n_samples)
    # Compact the taken values (in their original order) into (groups, width), then sort
    # only those: sorting the whole group would cost far more than the fit.
    slot = torch.where(take, torch.div(rank, stride, rounding_mode="floor"), width)
    buf = flat.new_full((groups, width + 1), float("inf"))
    buf.scatter_(1, slot, flat)
    samples, _ = torch.sort(buf[:, :width], dim=-1)
    npix = take.sum(dim=-1)
    exists = torch.arange(width, device=flat.device).expand(groups, width) < npix.unsqueeze(-1)
    xs = torch.arange(width, dtype=torch.float64, device=flat.device).expand(groups, width)
    y = torch.where(exists, samples, samples.new_zeros(()))

    minpix = torch.clamp_min((npix.to(torch.float64) * max_reject).floor().long(), min_npixels)
    ngrow = torch.clamp_min((npix.to(torch.float64) * 0.01).floor().long(), 1)
    bad = torch.zeros_like(exists)
    ngood = npix.clone()
    last_ngood = npix + 1
    slope = torch.zeros(groups, dtype=torch.float64, device=flat.device)
    for _ in range(max_iterations):
        active = (ngood < last_ngood) & (ngood >= minpix)
        if not bool(active.any()):
            break
        w = (exists & ~bad).to(torch.float64)
        sw, swx, swy = w.sum(-1), (w * xs).sum(-1), (w * y).sum(-1)
        swxx, swxy = (w * xs * xs).sum(-1), (w * xs * y).sum(-1)
        det = sw * swxx - swx * swx
        safe = torch.where(det == 0, torch.ones_like(det), det)
        b = torch.where(det == 0, torch.zeros_like(det), (sw * swxy - swx * swy) / safe)
        a = (swy - b * swx) / torch.where(sw == 0, torch.ones_like(sw), sw)
        resid = y - (a.unsqueeze(-1) + b.unsqueeze(-1) * xs)
        mean = (w * resid).sum(-1) / sw.clamp_min(1)
        std = torch.sqrt((w * (resid - mean.unsqueeze(-1)) ** 2).sum(-1) / sw.clamp_min(1))
        thr = (krej * std).unsqueeze(-1)
        new_bad = bad | (exists & ((resid < -thr) | (resid > thr)))
        # The dilation width differs per group; groups sharing a width dilate together.
        grown = new_bad.clone()
        for g in torch.unique(ngrow[active]).tolist():
            rows = active & (ngrow == g)
            grown[rows] = _dilate(new_bad[rows], int(g))
        grown &= exists
        bad = torch.where(active.unsqueeze(-1), grown, bad)
        slope = torch.where(active, b, slope)
        last_ngood = torch.where(active, ngood, last_ngood)
        ngood = torch.where(active, (exists & ~bad).sum(-1), ngood)

    idx_last = (npix - 1).clamp_min(0).unsqueeze(-1)
    vmin = samples[:, :1].squeeze(-1) if width else flat.new_full((groups,), float("nan"))
    vmax = samples.gather(-1, idx_last).squeeze(-1) if width else vmin
    med = quantile_sorted(samples, npix.unsqueeze(-1), 0.5).squeeze(-1)
    adj = slope / contrast if contrast > 0 else slope
    center = torch.div(npix - 1, 2, rounding_mode="floor").to(torch.float64)
    lo = torch.maximum(vmin, med - (center - 1) * adj)
    hi = torch.minimum(vmax, med + (npix.to(torch.float64) - center) * adj)
    fit_ok = ngood >= minpix
    vmin, vmax = torch.where(fit_ok, lo, vmin), torch.where(fit_ok, hi, vmax)
    empty = npix == 0
    nan = flat.new_full((), float("nan"))
    vmin, vmax = torch.where(empty, nan, vmin), torch.where(empty, nan, vmax)
    shape_out = [1 if d in dims else s for d, s in enumerate(xw.shape)]
    return (vmin.reshape(kept_shape).reshape(shape_out).to(xw.dtype),
            vmax.reshape(kept_shape).reshape(shape_out).to(xw.dtype))


def zscale_limits(x: torch.Tensor, contrast: float = 0.25, dim: Dims = (-2, -1),
                  mask: torch.Tensor | None = None, *, algorithm: str = "proxy",
                  n_samples: int = 1000) -> tuple[torch.Tensor, torch.Tensor]:
    """Display limits ``(z1, z2)`` in the manner of IRAF's zscale, per group of ``dim``.

    Parameters
    ----------
    x : Tensor
        Data; any shape.
    contrast : float
        Smaller values widen the range (default 0.25).
    dim : int or tuple of int or None
        Dims reduced together (default ``(-2, -1)``).
    mask : Tensor, optional
        Boolean, True where a pixel may be used. Non-finite values never count.
    algorithm : {"proxy", "iraf"}
        ``"proxy"`` (torchfits 1.x default): ``median -/+ sigma / contrast`` with the MAD
        sigma of :func:`estimate_background`, bounded by the data's min and max (min and max
        themselves when sigma is 0). ``"iraf"``: the iterative line fit of
        ``astropy.visualization.ZScaleInterval`` (same defaults), run for every group at once.
    n_samples : int
        Samples the ``"iraf"`` fit uses (default 1000).

    Returns
    -------
    (z1, z2) : tuple of Tensor
        Keepdim limits in the work dtype; ``z2 > z1`` is guaranteed (a constant group gets
        ``z2 = z1 + max(1e-6, 1e-6 |z1|)``); a group with no valid value gives NaN.
    """
    algorithm = algorithm if algorithm in ("proxy", "iraf") else ""
    if not algorithm:
        raise TransformError("zscale_limits: algorithm must be 'proxy' or 'iraf'")
    contrast = positive(contrast, "contrast", "zscale_limits", allow_zero=True)
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
        raise TransformError(f"zscale_limits: n_samples must be an integer >= 1, got {n_samples!r}")
    xw = as_work(x)
    dims = reduce_dims(xw.ndim, dim, "zscale_limits")
    with torch.no_grad():
        if algorithm == "proxy":
            z1, z2 = _zscale_proxy(xw, dims, mask, contrast)
        else:
            z1, z2 = _zscale_iraf(xw, dims, mask, contrast, n_samples)
        eps = torch.clamp_min(z1.abs() * 1e-6, 1e-6)
        z2 = torch.where(z2 <= z1, z1 + eps, z2)
    return z1, z2


def safe_arcsinh(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """``arcsinh(scale * x)`` computed in float32 or better, returned in the input's float dtype.

    Half-precision inputs are computed in float32 (``scale * x`` would overflow float16 for
    large ``scale``) and cast back; integer inputs return float32 (float64 for 32/64-bit).
    """
    return torch.arcsinh(as_work(x) * float(scale)).to(out_dtype(x.dtype))


def safe_log(x: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """Natural ``log(max(x, eps))``: finite for zero and negative inputs; NaN stays NaN.

    Computed in float32 or better (see :func:`safe_arcsinh`), returned in the input's float
    dtype.
    """
    eps = positive(eps, "eps", "safe_log")
    xw = as_work(x)
    return torch.log(torch.clamp_min(xw, eps)).to(out_dtype(x.dtype))

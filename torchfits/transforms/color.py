"""Colour images from bands: the Lupton et al. (2004) asinh composite (:func:`lupton_rgb`) and
an automatic 1-7 band preview (:func:`rgb`).

Both return display values in [0, 1], shaped ``(..., H, W, 3)``, on the input's device.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..errors import TransformError
from ._common import positive
from .stats import row_quantiles

__all__ = ["lupton_rgb", "rgb"]

# astropy's LuptonAsinhStretch keeps Q in a range where asinh(0.1 * Q) is well behaved.
_Q_EPS = 1.0 / 2 ** 23
_FRAC = 0.1


def _work(device: torch.device) -> torch.dtype:
    # float64 for accuracy; MPS has no float64.
    return torch.float32 if device.type == "mps" else torch.float64


def _check_dtype(dtype: torch.dtype | None, who: str) -> None:
    if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
        raise TransformError(f"{who}: dtype must be a floating torch dtype, got {dtype!r} "
                             "(scale to 0..255 and cast yourself for integer images)")


def _soft_q(Q: float) -> float:
    if Q < _Q_EPS:
        return 0.1
    return min(Q, 1e10)


def _lupton(bands: Sequence[torch.Tensor], Q: float,
            stretch: float | torch.Tensor) -> torch.Tensor:
    """Lupton mapping of three minimum-subtracted bands ``(..., H, W)`` -> ``(..., H, W, 3)``.

    Works band by band and stacks last, so no reduction runs over a size-3 axis.
    """
    q = _soft_q(Q)
    r, g, b = bands
    intensity = (r + g + b) / 3
    f = torch.asinh(intensity * (q / stretch)) * (_FRAC / math.asinh(_FRAC * q))
    positive_i = intensity > 0
    ratio = torch.where(positive_i, f / torch.where(positive_i, intensity, 1.0), 0.0)
    out = [torch.clamp_min(band * ratio, 0) for band in (r, g, b)]
    peak = torch.maximum(torch.maximum(out[0], out[1]), out[2])
    # Scale each over-bright pixel by its own peak (keeps star colours; never the field max).
    scale = torch.where(peak > 1, 1 / torch.where(peak > 1, peak, 1.0), 1.0)
    return torch.stack([band * scale for band in out], dim=-1)


def lupton_rgb(r: Any, g: Any, b: Any, *, Q: float = 8.0, stretch: float = 0.5,
               minimum: float | Sequence[float] = 0.0,
               dtype: torch.dtype | None = None) -> torch.Tensor:
    """Lupton et al. (2004) asinh colour composite of three bands (reddest first).

    The intensity ``I = mean(r, g, b)`` (after subtracting ``minimum``) is stretched with
    ``f(I) = asinh(Q I / stretch) * 0.1 / asinh(0.1 Q)``, every band is multiplied by
    ``f(I) / I``, negatives are set to 0, and a pixel whose brightest band exceeds 1 is
    divided by that value, so colours survive saturation. This is
    ``astropy.visualization.make_lupton_rgb`` with ``output_dtype=float``.

    Parameters
    ----------
    r, g, b : Tensor or array-like
        Bands of one shape ``(..., H, W)``; leading dims are a batch.
    Q : float
        Asinh softening, >= 0 (default 8).
    stretch : float
        Linear stretch, > 0 (default 0.5; astropy's default is 5). Smaller is brighter.
    minimum : float or sequence of 3 floats
        Black level, for all bands or per band (default 0).
    dtype : torch.dtype, optional
        Floating dtype of the result; computed in float64 (float32 on MPS) regardless.

    Returns
    -------
    Tensor
        ``(..., H, W, 3)`` in [0, 1].
    """
    positive(Q, "Q", "lupton_rgb", allow_zero=True)
    positive(stretch, "stretch", "lupton_rgb")
    _check_dtype(dtype, "lupton_rgb")
    bands = [torch.as_tensor(v) for v in (r, g, b)]
    if bands[0].shape != bands[1].shape or bands[1].shape != bands[2].shape:
        raise TransformError(f"lupton_rgb: band shapes differ: r {tuple(bands[0].shape)}, "
                             f"g {tuple(bands[1].shape)}, b {tuple(bands[2].shape)}")
    device = bands[0].device
    work = _work(device)
    mins = [float(minimum)] * 3 if isinstance(minimum, (int, float)) else [float(m) for m in minimum]
    if len(mins) != 3:
        raise TransformError(f"lupton_rgb: minimum takes 1 or 3 values, got {len(mins)}")
    out = _lupton([band.to(device=device, dtype=work) - m for band, m in zip(bands, mins)],
                  float(Q), float(stretch))
    return out if dtype is None else out.to(dtype)


def _band_stack(bands: tuple[Any, ...]) -> torch.Tensor:
    if not bands:
        raise TransformError("rgb: needs at least one band")
    if len(bands) == 1:
        stack = torch.as_tensor(bands[0])
        if stack.ndim == 2:
            stack = stack.unsqueeze(0)
        if stack.ndim not in (3, 4):
            raise TransformError("rgb: one argument must be (H, W), (C, H, W) or (B, C, H, W), "
                                 f"got shape {tuple(stack.shape)}")
    else:
        tensors = [torch.as_tensor(band) for band in bands]
        if any(t.shape != tensors[0].shape for t in tensors) or tensors[0].ndim not in (2, 3):
            raise TransformError("rgb: separate bands must share one (H, W) or (B, H, W) shape, "
                                 f"got {[tuple(t.shape) for t in tensors]}")
        stack = torch.stack([t.to(tensors[0].device) for t in tensors], dim=-3)
    if not 1 <= stack.shape[-3] <= 7:
        raise TransformError(f"rgb: takes 1 to 7 bands, got {stack.shape[-3]}")
    return stack.to(_work(stack.device))


def _mix_matrix(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(3, n) weights, rows R, G, B, bands blue to red.

    Band i sits at ``t = i / (n - 1)`` on a blue (0) to red (1) axis; each display channel
    (blue 0, green 0.5, red 1) takes the bands within a triangular window of half-width
    ``max(0.5, 1 / (n - 1))`` around it, rows normalized. Three bands map one to one; one band
    is grey.
    """
    if n == 1:
        return torch.ones(3, 1, dtype=dtype, device=device)
    t = torch.arange(n, dtype=dtype, device=device) / (n - 1)
    centers = torch.tensor([1.0, 0.5, 0.0], dtype=dtype, device=device).unsqueeze(-1)
    w = torch.clamp_min(1 - (t - centers).abs() / max(0.5, 1.0 / (n - 1)), 0)
    return w / w.sum(dim=-1, keepdim=True)


def _image_stats(img: torch.Tensor, qs: Sequence[float]) -> tuple[torch.Tensor, ...]:
    """Quantiles over the last two dims of a subsample (every 10th row/column of images with
    both sides >= 32), NaN ignored; also the raw MAD. Shapes ``(..., 1, 1)``."""
    if min(img.shape[-2:]) >= 32:
        img = img[..., ::10, ::10]
    flat = img.reshape(*img.shape[:-2], -1)
    valid = torch.isfinite(flat)
    med, *rest = row_quantiles(flat, valid, (0.5,) + tuple(qs))
    mad = row_quantiles((flat - med).abs(), valid, (0.5,))[0]
    out = [med, mad] + rest
    return tuple(o.unsqueeze(-1) for o in out)


def _stretch_for(level: torch.Tensor, target: float, q: float) -> torch.Tensor:
    """The Lupton ``stretch`` that maps intensity ``level`` to display value ``target``."""
    slope = _FRAC / math.asinh(_FRAC * q)
    s = q * level / math.sinh(min(max(target, 1e-4), 0.99) / slope)
    return torch.where(torch.isfinite(s) & (s > 0), s, torch.ones_like(s))


def _srgb(linear: torch.Tensor) -> torch.Tensor:
    linear = torch.clamp(linear, 0, 1)
    return torch.where(linear <= 0.0031308, linear * 12.92,
                       1.055 * torch.pow(linear, 1 / 2.4) - 0.055)


def rgb(*bands: Any, brightness: float = 0.15, saturation: float = 2.0, scene: str = "auto",
        weights: Any = None, calibrated: bool = False,
        zeropoints: Sequence[float] | None = None,
        dtype: torch.dtype | None = None) -> torch.Tensor:
    """An automatic colour preview of 1-7 aligned bands, bluest first.

    Steps, per image: convert counts with ``zeropoints`` (to nanomaggies, AB zero point
    22.5); unless the bands are ``calibrated``, subtract each band's median and divide by its
    MAD so pedestals and gains do not paint colour; mix the bands to R, G, B (``weights`` or a
    blue-to-red default); pick a black level and a Lupton stretch from the luminance
    statistics -- *empty* fields (mostly sky) put sky + 1 sigma at ``brightness``, *filled*
    fields (an object covering the frame, or towering above the noise) put the 90th percentile
    at 0.72; boost ``saturation`` around Rec. 709 luma; apply the sRGB transfer curve.
    NaN pixels are ignored by the statistics and come out black.

    Parameters
    ----------
    *bands : Tensor or array-like
        One ``(H, W)``, ``(C, H, W)`` or ``(B, C, H, W)`` tensor, or C separate ``(H, W)``
        (or ``(B, H, W)``) bands; C in 1..7, bluest first (unlike :func:`lupton_rgb`).
    brightness : float
        Display value of sky + 1 sigma on empty fields, in (0, 1) (default 0.15).
    saturation : float
        Colour boost, >= 0 (default 2; 1 keeps colours, 0 is grey).
    scene : {"auto", "empty", "filled"}
        Stretch choice (default ``"auto"``: filled when the median sits above 22% of the
        0.5-99.5 percentile span, or the 90th percentile is over 50 MADs above the median).
    weights : array-like, optional
        ``(3, C)`` mixing matrix, rows R, G, B.
    calibrated : bool
        The bands share one flux scale: skip the per-band equalization (implied by
        ``zeropoints``).
    zeropoints : sequence of float, optional
        AB magnitude of one count, per band.
    dtype : torch.dtype, optional
        Floating dtype of the result.

    Returns
    -------
    Tensor
        ``(H, W, 3)`` (or ``(B, H, W, 3)``) in [0, 1].
    """
    if not 0 < float(brightness) < 1:
        raise TransformError(f"rgb: brightness must be in (0, 1), got {brightness!r}")
    positive(saturation, "saturation", "rgb", allow_zero=True)
    if scene not in ("auto", "empty", "filled"):
        raise TransformError(f"rgb: scene must be 'auto', 'empty' or 'filled', got {scene!r}")
    _check_dtype(dtype, "rgb")
    stack = _band_stack(bands)
    stack = torch.where(torch.isfinite(stack), stack, stack.new_full((), float("nan")))
    n = stack.shape[-3]
    if zeropoints is not None:
        zps = [float(z) for z in zeropoints]
        if len(zps) != n:
            raise TransformError(f"rgb: {len(zps)} zeropoints for {n} bands")
        factor = torch.tensor([10 ** (-0.4 * (z - 22.5)) for z in zps], dtype=stack.dtype,
                              device=stack.device)
        stack = stack * factor.reshape(n, 1, 1)
    if not (calibrated or zeropoints is not None):
        med, mad = _image_stats(stack, ())
        stack = (stack - med) / torch.where(mad > 0, mad, torch.ones_like(mad))
    if weights is None:
        matrix = _mix_matrix(n, stack.dtype, stack.device)
    else:
        matrix = torch.as_tensor(weights, dtype=stack.dtype).to(stack.device)
        if tuple(matrix.shape) != (3, n):
            raise TransformError(f"rgb: weights must have shape (3, {n}), got {tuple(matrix.shape)}")
    mixed = torch.einsum("kc,...chw->...hwk", matrix, stack)
    luma = mixed.mean(dim=-1)
    med, mad, p_lo, p90, p_hi = _image_stats(luma, (0.005, 0.90, 0.995))
    med, mad, p_lo, p90, p_hi = (torch.nan_to_num(t, nan=0.0) for t in (med, mad, p_lo, p90, p_hi))
    span = p_hi - p_lo
    frac = torch.where(span > 0, (med - p_lo) / torch.where(span > 0, span, 1.0),
                       torch.ones_like(span))
    towering = torch.where(mad > 0, (p90 - med) / torch.where(mad > 0, mad, 1.0),
                           torch.zeros_like(mad))
    if scene == "auto":
        filled = (frac > 0.22) | (towering > 50)
    else:
        filled = torch.full_like(frac, scene == "filled", dtype=torch.bool)
    q = 8.0
    anchor = torch.clamp_min(torch.maximum(p90 - torch.clamp_min(p_lo, 0), mad), 1e-12)
    black = torch.where(filled, p_lo, med - 3 * mad)
    stretch = torch.where(filled, _stretch_for(anchor, 0.72, q),
                          _stretch_for(torch.clamp_min(3 * mad + 1.4826 * mad, 1e-12),
                                       float(brightness), q))
    shifted = torch.nan_to_num(torch.clamp_min(mixed - black.unsqueeze(-1), 0), nan=0.0,
                               posinf=0.0, neginf=0.0)
    mapped = _lupton(shifted.unbind(-1), q, stretch)
    luma709 = (mapped * torch.tensor([0.2126, 0.7152, 0.0722], dtype=mapped.dtype,
                                     device=mapped.device)).sum(-1, keepdim=True)
    mapped = torch.clamp(luma709 + float(saturation) * (mapped - luma709), 0, 1)
    out = _srgb(mapped)
    return out if dtype is None else out.to(dtype)

"""Pictures of images: the PNG thumbnails notebooks show (`Image._repr_png_`) and the PNGs of
`torchfits.preview`, from a decimated read, display limits and a stretch of `torchfits.transforms`.

The pipeline is astropy's ``ImageNormalize`` (limits, clip to [0, 1], stretch, clip) followed by
8-bit quantisation; torch (for the transforms) and Pillow (for PNG) are imported when a picture
is drawn, never by ``import torchfits``.
"""
from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from ..errors import HDUTypeError

__all__ = ["STRETCHES", "THUMBNAIL_SIZE", "Interval", "parse_interval", "picture_key", "sample",
           "display_limits", "stretched", "quantized", "encode_png", "picture_png", "thumbnail_png",
           "pillow"]

STRETCHES = ("linear", "sqrt", "log", "asinh")
#: The longest side of a notebook thumbnail, in pixels.
THUMBNAIL_SIZE = 256
#: Display limits are computed from at most about this many pixels (a strided sample of more).
LIMIT_PIXELS = 1 << 22
#: Each stretch's parameter ``a`` when none is given, in torchfits.transforms's convention.
DEFAULT_A = {"asinh": 10.0, "log": 1000.0}
PERCENTILE = 99.5

Interval = Union[str, float, tuple[float, float]]


def pillow() -> Any:
    """``PIL.Image``, or ImportError with the install hint."""
    try:
        from PIL import Image as PILImage
    except ImportError as exc:
        raise ImportError("PNG pictures need Pillow: pip install 'torchfits[preview]'") from exc
    return PILImage


def parse_interval(interval: Any) -> tuple[Any, ...]:
    """``("zscale",)``, ``("minmax",)``, ``("percentile", p)`` or ``("manual", lo, hi)``.

    Takes ``"zscale"``, ``"minmax"``, ``"percentile"`` (99.5), a percentile as a number or a
    numeric string (``99.5``, ``"99.5"``: the central fraction kept, as astropy's
    ``PercentileInterval``), or explicit limits ``(vmin, vmax)``.
    """
    if isinstance(interval, str):
        text = interval.strip().lower()
        if text in ("zscale", "minmax"):
            return (text,)
        if text == "percentile":
            return ("percentile", PERCENTILE)
        try:
            value: float = float(text)
        except ValueError:
            raise ValueError(f"interval must be 'zscale', 'minmax', 'percentile', a percentile "
                             f"such as '99.5', or (vmin, vmax); got {interval!r}") from None
    elif isinstance(interval, (tuple, list)):
        if len(interval) != 2:
            raise ValueError(f"interval limits must be (vmin, vmax), got {interval!r}")
        lo, hi = (float(v) for v in interval)
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
            raise ValueError(f"interval limits must be finite with vmax > vmin, got {interval!r}")
        return ("manual", lo, hi)
    elif isinstance(interval, (int, float)) and not isinstance(interval, bool):
        value = float(interval)
    else:
        raise ValueError(f"interval must be a name, a percentile or (vmin, vmax); got {interval!r}")
    if not 0 < value <= 100:
        raise ValueError(f"a percentile interval keeps 0 < p <= 100 percent of the pixels, got {value}")
    return ("percentile", value)


def picture_key(shape: Sequence[int], size: int | None) -> tuple[tuple[Any, ...], int] | None:
    """The index that samples a picture out of an array of ``shape``, and its step.

    Axes of length 1 are dropped; of a cube, the first plane (index 0 on every axis before the
    last two longer than 1). Both picture axes take every ``step``-th pixel, ``step`` the
    largest that leaves the longest side at least ``size`` (1 when ``size`` is None), so the
    sample's longest side is between ``size`` and 2 x ``size`` (a 20k x 20k image with size 256
    decodes 257 rows of 257 pixels). None when the array has fewer than two axes longer than 1.
    """
    long_axes = [k for k, n in enumerate(shape) if n > 1]
    if len(long_axes) < 2:
        return None
    rows, cols = long_axes[-2:]
    longest = max(shape[rows], shape[cols])
    step = max(1, longest // size) if size else 1
    key = tuple(slice(None, None, step) if k in (rows, cols) else 0 for k in range(len(shape)))
    return key, step


def _as_float64(part: Any) -> np.ndarray:
    if hasattr(part, "detach"):  # a torch tensor (bfloat16 has no NumPy type)
        part = part.detach().cpu()
        if not part.dtype.is_floating_point or part.dtype.itemsize < 4:
            part = part.double()
        part = part.numpy()
    arr = np.asarray(part)
    if arr.dtype.kind == "c":
        raise ValueError(f"a picture needs real values, got {arr.dtype}")
    return np.asarray(arr, dtype=np.float64)


def sample(pixels: Any, size: int | None, where: str | None = None) -> np.ndarray:
    """The picture of ``pixels`` (an `Image`, array or tensor) as a 2-D float64 array, read
    through `picture_key`: only the sampled pixels are decoded from an `Image`."""
    shape = tuple(int(n) for n in pixels.shape)
    found = picture_key(shape, size)
    if found is None or 0 in shape:
        what = f"{where} has" if where else "an array of"
        message = (f"{what} shape {shape}: a picture needs two axes longer than 1" if where
                   else f"{what} shape {shape} has no two axes longer than 1 to draw")
        if found is not None:
            message = f"{what} shape {shape}: no pixels to draw"
        raise HDUTypeError(message) if where else ValueError(message)
    key, _ = found
    values = _as_float64(pixels[key])
    return values.reshape(values.shape[-2:]) if values.ndim != 2 else values


def display_limits(values: np.ndarray, interval: Any = "zscale", *,
                   contrast: float = 0.25) -> tuple[float, float]:
    """``(vmin, vmax)`` of the finite ``values`` by ``interval`` (see `parse_interval`), from
    `torchfits.transforms.stats`: zscale is its IRAF fit (astropy's ``ZScaleInterval``), a
    percentile its NumPy-rule quantiles. NaN limits when no value is finite."""
    spec = parse_interval(interval)
    if spec[0] == "manual":
        return float(spec[1]), float(spec[2])
    import torch

    from ..transforms.stats import extremes, quantiles, zscale_limits

    if values.size > LIMIT_PIXELS and values.ndim == 2:
        k = math.ceil(math.sqrt(values.size / LIMIT_PIXELS))
        values = values[::k, ::k]
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
    if spec[0] == "zscale":
        z1, z2 = zscale_limits(t, contrast, dim=None, algorithm="iraf")
    elif spec[0] == "minmax":
        z1, z2 = extremes(t, dim=None)
    else:
        cut = (100.0 - spec[1]) / 200.0
        z1, z2 = quantiles(t, (cut, 1.0 - cut), dim=None)
    return float(z1.reshape(())), float(z2.reshape(()))


def stretched(values: np.ndarray, vmin: float, vmax: float, stretch: str = "asinh",
              a: float | None = None) -> np.ndarray:
    """``values`` mapped to [0, 1] as astropy's ``ImageNormalize(vmin, vmax, stretch, clip=True)``:
    ``(x - vmin) / (vmax - vmin)`` clipped, the stretch of `torchfits.transforms.stretch`, clipped
    again. NaN stays NaN.

    ``a`` is the stretch's parameter in torchfits.transforms's convention: ``asinh``'s softening
    (default 10, astropy's ``AsinhStretch(a=0.1)``), ``log``'s scale (default 1000, as astropy's).
    """
    if stretch not in STRETCHES:
        raise ValueError(f"stretch must be one of {', '.join(STRETCHES)}; got {stretch!r}")
    if a is not None and stretch not in DEFAULT_A:
        raise ValueError(f"the {stretch} stretch takes no parameter a (asinh and log do)")
    x: np.ndarray = np.subtract(values, vmin, dtype=np.float64)
    span = vmax - vmin
    if span != 0 and math.isfinite(span):
        x /= span
    np.clip(x, 0.0, 1.0, out=x)
    if stretch == "linear":
        return x
    import torch

    from ..transforms.stretch import ArcsinhStretch, LogStretch, SqrtStretch

    transform: Any = (ArcsinhStretch(a if a is not None else DEFAULT_A["asinh"]) if stretch == "asinh"
                      else LogStretch(a if a is not None else DEFAULT_A["log"]) if stretch == "log"
                      else SqrtStretch())
    y = transform(torch.from_numpy(x)).numpy()
    return np.asarray(np.clip(y, 0.0, 1.0), dtype=np.float64)


def quantized(y: np.ndarray) -> np.ndarray:
    """[0, 1] values → uint8 levels ``rint(255 y)``; NaN (no data) is 0, black."""
    levels: np.ndarray = np.rint(np.nan_to_num(y, nan=0.0) * 255.0).astype(np.uint8)
    return levels


def encode_png(levels: np.ndarray) -> bytes:
    """A 2-D uint8 array as an 8-bit greyscale PNG; row 0 of the array is the top of the picture."""
    buf = io.BytesIO()
    pillow().fromarray(np.ascontiguousarray(levels)).save(buf, format="PNG")
    return buf.getvalue()


def _fit(y: np.ndarray, size: int | None) -> np.ndarray:
    """``y`` resampled (box filter) so its longest side is ``size``; never enlarged."""
    h, w = y.shape
    if not size or max(h, w) <= size:
        return y
    scale = size / max(h, w)
    pil = pillow()
    small = pil.fromarray(np.ascontiguousarray(y, dtype=np.float32))  # mode "F"
    resized = small.resize((max(1, round(w * scale)), max(1, round(h * scale))), pil.Resampling.BOX)
    return np.asarray(resized, dtype=np.float64)


def _render(values: np.ndarray, stretch: str, interval: Any, size: int | None, contrast: float,
            a: float | None) -> bytes:
    vmin, vmax = display_limits(values, interval, contrast=contrast)
    y = _fit(stretched(values, vmin, vmax, stretch, a), size)
    return encode_png(np.flipud(quantized(y)))


def picture_png(pixels: Any, *, stretch: str = "asinh", interval: Any = "zscale",
                size: int | None = None, contrast: float = 0.25, a: float | None = None,
                where: str | None = None) -> bytes:
    """An 8-bit greyscale PNG of ``pixels`` (an `Image`, array or tensor).

    The picture is sampled with `picture_key` (longest side at most ``size`` after a box
    resample, never enlarged; every pixel when ``size`` is None), limited by ``interval``,
    stretched, quantised, and flipped so FITS row 1 is at the bottom (as ds9 shows it).
    """
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ValueError(f"size must be a positive integer or None, got {size!r}")
    if stretch not in STRETCHES:
        raise ValueError(f"stretch must be one of {', '.join(STRETCHES)}; got {stretch!r}")
    parse_interval(interval)
    pillow()  # the missing dependency before any pixel is read
    return _render(sample(pixels, size, where), stretch, interval, size, contrast, a)


def thumbnail_png(pixels: Any, size: int = THUMBNAIL_SIZE) -> bytes | None:
    """The zscale/asinh thumbnail of a notebook repr, or None when it cannot be drawn (Pillow
    or torch missing, fewer than two axes longer than 1, no finite pixel) so Jupyter shows
    the other reprs."""
    try:
        import torch  # noqa: F401
        pillow()
    except ImportError:
        return None
    shape = tuple(int(n) for n in pixels.shape)
    if picture_key(shape, size) is None or 0 in shape:
        return None
    values = sample(pixels, size)
    if not np.isfinite(values).any():
        return None
    return _render(values, "asinh", "zscale", size, 0.25, None)

"""`torchfits.preview`: a PNG picture of an image HDU, an `Image`, an array or a tensor (zscale
limits and an asinh stretch by default), returned as bytes and written atomically when asked.
"""
from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from ..errors import HDUTypeError
from ..fits.aliases import HduArg
from ..fits.paths import parse_path, with_storage_options
from ..image.groups import GroupsImage
from ..image.plain import Image, open_image, read_numpy
from ..image.thumbnail import Interval, picture_png
from .atomic import atomic_output, check_target

__all__ = ["preview"]

PreviewSource = Union[str, "os.PathLike[str]", Image, np.ndarray, Any]


def _pixels(source: Any, hdu: HduArg | None,
            storage_options: dict[str, Any] | None) -> tuple[Any, str | None]:
    """What to draw (an `Image`, or an array) and how errors name it (file and HDU)."""
    if isinstance(source, Image):
        if hdu is not None:
            raise ValueError("hdu= selects an HDU of a file; an Image already is one")
        img = source
    elif isinstance(source, (str, os.PathLike)):
        fp = parse_path(with_storage_options(source, storage_options))
        if fp.section is not None:  # an image section is small by choice: read it whole
            arr = read_numpy(source, hdu, storage_options=storage_options)
            return arr, f"{os.fspath(source)}"
        img = open_image(source, hdu, storage_options=storage_options)
    else:
        if hdu is not None:
            raise ValueError(f"hdu= selects an HDU of a file, not of a {type(source).__name__}")
        return source if hasattr(source, "shape") and hasattr(source, "__getitem__") \
            else np.asarray(source), None
    where = f"{img.path}: HDU {img.hdu}"
    if isinstance(img, GroupsImage):
        raise HDUTypeError(f"{where} is a random-groups HDU: its group arrays are no picture")
    return img, where


def preview(source: PreviewSource, out: str | os.PathLike[str] | None = None, *,
            hdu: HduArg | None = None, stretch: str = "asinh", interval: Interval = "zscale",
            size: int | None = None, contrast: float = 0.25, a: float | None = None,
            overwrite: bool = False, storage_options: dict[str, Any] | None = None) -> bytes:
    """A greyscale PNG of an image: display limits, a stretch, 8 bits (astropy's
    ``ImageNormalize`` on the pixels, built on `torchfits.transforms`).

    Parameters
    ----------
    source : str, os.PathLike, Image, numpy.ndarray or torch.Tensor
        A FITS file (a CFITSIO suffix selects the HDU, ``f.fits[SCI]``, and may cut a section,
        ``f.fits[1][1:500,1:500]``), an open `Image`, or pixels in memory. Axes of length 1 are
        dropped; of a cube, the first plane is drawn.
    out : str or os.PathLike, optional
        Also write the PNG here (a temporary file renamed over it: never half-written).
    hdu : int, str or (str, int), optional
        The HDU of a file (default: the first HDU with data, as `read_numpy`).
    stretch : {"asinh", "linear", "sqrt", "log"}
        Applied after the limits map the pixels to [0, 1].
    interval : str, float or (float, float)
        ``"zscale"`` (IRAF's, as astropy's ``ZScaleInterval``), ``"minmax"``, a percentile kept
        (``99.5``, ``"99.5"``, or ``"percentile"`` for 99.5) or explicit ``(vmin, vmax)``.
    size : int, optional
        Longest side of the picture in pixels (never enlarged). A file's image is then read
        through a strided slice (every k-th row and column, between ``size`` and 2 x ``size``
        of each), so a huge image is not decoded whole; None draws every pixel.
    contrast : float
        zscale's contrast (default 0.25).
    a : float, optional
        The stretch's parameter: asinh's softening (default 10, astropy's
        ``AsinhStretch(a=0.1)``) or log's scale (default 1000).
    overwrite : bool
        Replace an existing ``out``.
    storage_options : dict, optional
        fsspec options for URLs (see docs/remote.md).

    Returns
    -------
    bytes
        The PNG: mode ``L`` (8-bit grey), FITS row 1 at the bottom, NaN pixels black.
    """
    target = None if out is None else check_target(out, overwrite=overwrite)
    pixels, where = _pixels(source, hdu, storage_options)
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError("preview draws through torchfits.transforms, which needs torch: "
                          "pip install 'torchfits[torch]'") from exc
    png = picture_png(pixels, stretch=stretch, interval=interval, size=size, contrast=contrast,
                      a=a, where=where)
    if target is not None:
        with atomic_output(target) as sink:
            sink.write(png)
    return png

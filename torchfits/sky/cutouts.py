"""Sky cutouts: stamps around (RA, Dec) positions of one image, centred as astropy's `Cutout2D`
centres them, cut in one kernel call, each with its header and WCS.

World → pixel goes through astropy.wcs (`all_world2pix`: TAN, SIP, TPV, ZPN, DSS plates, …);
each stamp's header is the parent's with the pixel-offset keywords moved
(`torchfits.fits.section_header`).
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..fits.aliases import HduArg, PathArg
from ..fits.header import Header
from ..fits.section_header import SectionHeaders
from ..image.boxes import edge_args
from ..image.plain import Image, open_image

__all__ = ["cutouts", "image_wcs", "stamp_boxes", "world_to_pixel"]

_LOOKUP = ("CPDIS1", "CPDIS2", "D2IMDIS1", "D2IMDIS2")


def image_wcs(image: Image) -> Any:
    """The ``astropy.wcs.WCS`` of a 2-D image (its lookup-table distortion HDUs read through
    ``astropy.io.fits`` when the header names them)."""
    from astropy.wcs import WCS

    header = image.header
    if image.ndim != 2:
        raise ValueError(f"{image.path}: HDU {image.hdu}: sky cutouts need a 2-D image, not shape "
                         f"{image.shape}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy's notes about cards it fixed up
        if any(k in header for k in _LOOKUP):
            from astropy.io import fits

            with fits.open(image.path) as hdul:
                return WCS(header.to_astropy(), hdul)
        return WCS(header.to_astropy())


def world_to_pixel(wcs: Any, ra: Any, dec: Any, *,
                   quiet: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """0-based pixel ``(x, y)`` of (RA, Dec) in degrees through ``wcs.all_world2pix`` (the
    distortions included, as ``Cutout2D`` places a ``SkyCoord``); ``quiet`` returns the
    best guess of a distortion inversion that does not converge (far outside the image)
    instead of raising."""
    ra_arr = np.atleast_1d(np.asarray(ra, dtype=np.float64))
    dec_arr = np.atleast_1d(np.asarray(dec, dtype=np.float64))
    if ra_arr.ndim != 1 or ra_arr.shape != dec_arr.shape:
        raise ValueError(f"ra and dec must be numbers or 1-D arrays of one length, not shapes "
                         f"{ra_arr.shape} and {dec_arr.shape}")
    if not (np.isfinite(ra_arr).all() and np.isfinite(dec_arr).all()):
        raise ValueError("ra and dec must be finite")
    if len(ra_arr) == 0:
        return np.empty(0), np.empty(0)
    if quiet and wcs.has_distortion:
        x, y = wcs.all_world2pix(ra_arr, dec_arr, 0, quiet=True)
    else:
        x, y = wcs.all_world2pix(ra_arr, dec_arr, 0)
    return np.asarray(x, np.float64), np.asarray(y, np.float64)


def stamp_size(size: Any) -> tuple[int, int]:
    """``size`` (pixels: an int, or ``(h, w)``) as a checked ``(h, w)``."""
    pair = (size, size) if isinstance(size, (int, np.integer)) else tuple(size) \
        if isinstance(size, (tuple, list)) else None
    if pair is None or len(pair) != 2 or any(
            isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0 for s in pair):
        raise ValueError(f"size must be a positive number of pixels or an (h, w) pair of them, "
                         f"not {size!r}")
    return int(pair[0]), int(pair[1])


def stamp_boxes(x: np.ndarray, y: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(N, 4)`` boxes ``(x1, y1, x2, y2)`` of ``size`` (h, w) centred on 0-based pixels
    ``(x, y)`` by `Cutout2D`'s rule: the first pixel is ``ceil(position - size / 2)`` (an even
    size puts a position on a pixel centre just right of the stamp's middle)."""
    h, w = size
    x1 = np.ceil(x - (w / 2.0)).astype(np.int64)
    y1 = np.ceil(y - (h / 2.0)).astype(np.int64)
    return np.stack([x1, y1, x1 + w, y1 + h], axis=1)


def cutouts(path: PathArg, hdu: HduArg | None = None, *, ra: Any, dec: Any, size: Any,
            edge: str = "raise", pad_value: Any = None,
            headers: bool = True) -> tuple[np.ndarray | list[np.ndarray], Sequence[Header] | None]:
    """Stamps of ``size`` pixels around sky positions of one image, with their headers.

    Parameters
    ----------
    path : str or os.PathLike
        The FITS file.
    hdu : int or str, optional
        The image HDU; by default the first HDU with data.
    ra, dec : float or array_like
        Positions in degrees, in the frame of the image's WCS.
    size : int or (int, int)
        Stamp size in pixels: ``n`` (square) or ``(h, w)``. An angular size ``s`` is
        ``round(s / pixel_scale)`` pixels, as ``Cutout2D`` counts it.
    edge : {"raise", "pad", "clamp"}
        A stamp that leaves the image: raise `CutoutEdgeError` (the default; `Cutout2D`'s
        ``mode="strict"``), fill the outside with ``pad_value`` (``mode="partial"``), or cut it
        at the edge (``mode="trim"``; those stamps are smaller).
    pad_value : number, optional
        The fill of ``edge="pad"``: NaN for floating images and 0 for integer ones by default.
    headers : bool
        Return each stamp's header (False: None in its place, and no header work).

    Returns
    -------
    (stamps, headers)
        ``stamps`` is an ``(N, h, w)`` NumPy array (a list of arrays where ``edge="clamp"`` cut
        a stamp; ``torch.from_numpy`` makes a tensor without a copy). ``headers`` is a sequence
        of N `Header` objects, built as they are read: NAXISn of the stamp and every
        pixel-offset keyword (CRPIXia, SIP's reference, DSS CNPIXn, IRAF LTVn) moved, so its WCS
        equals ``Cutout2D(...).wcs``.
    """
    edge, pad_value = edge_args(edge, pad_value)
    image = open_image(path, hdu)
    hw = stamp_size(size)
    x, y = world_to_pixel(image_wcs(image), ra, dec)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        i = int(np.flatnonzero(~(np.isfinite(x) & np.isfinite(y)))[0])
        raise ValueError(f"{image.path}: HDU {image.hdu}: position {i} has no pixel in this "
                         "image's projection")
    boxes = stamp_boxes(x, y, hw)
    stamps = image.cutouts(boxes, edge=edge, pad_value=pad_value) if len(boxes) \
        else np.empty((0,) + hw, image.dtype)
    if not headers:
        return stamps, None
    starts, counts = boxes[:, 1::-1], np.broadcast_to(np.array(hw, np.int64), (len(boxes), 2))
    if edge == "clamp":
        height, width = image.shape
        x1, y1 = np.clip(boxes[:, 0], 0, width), np.clip(boxes[:, 1], 0, height)
        x2, y2 = np.clip(boxes[:, 2], 0, width), np.clip(boxes[:, 3], 0, height)
        starts, counts = np.stack([y1, x1], axis=1), np.stack([y2 - y1, x2 - x1], axis=1)
    return stamps, SectionHeaders(image.header, starts, counts)

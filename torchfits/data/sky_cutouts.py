"""Sky cutouts for training: (RA, Dec) positions over many overlapping images → the image that
holds each position best → stamps centred as astropy's `Cutout2D` centres them.

Footprints (`torchfits.sky.footprints`, from a sidecar or computed at construction) find the
images whose sky cone may hold a position; the WCS of each of them places it; the image where it
lies farthest from the edge wins. Items and batches are those of `FitsCutoutDataset`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from ..fits.header import Header
from ..fits.section_header import section_header
from ..image.plain import open_image
from ..query.sky import separation_deg
from ..sky.cutouts import image_wcs, stamp_boxes, stamp_size, world_to_pixel
from ..sky.footprints import Footprint, for_images
from .cutouts import FitsCutoutDataset
from .hdus import resolve_paths

__all__ = ["FitsSkyCutoutDataset"]


def _positions(positions: Any, columns: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """(ra, dec) float64 arrays from a pair of arrays, an (N, 2) array or a table."""
    if isinstance(positions, Mapping) or hasattr(positions, "column_names") \
            or hasattr(positions, "columns"):
        cols = [positions[c] for c in columns]
        ra, dec = (np.asarray(c.to_numpy() if hasattr(c, "to_numpy") else c, dtype=np.float64)
                   for c in cols)
    elif isinstance(positions, (tuple, list)) and len(positions) == 2:
        ra, dec = (np.asarray(c, dtype=np.float64) for c in positions)
    else:
        arr = np.asarray(positions, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError("positions must be (ra, dec) arrays, an (N, 2) array or a table "
                             f"with columns {columns}")
        ra, dec = arr[:, 0], arr[:, 1]
    ra, dec = np.atleast_1d(ra), np.atleast_1d(dec)
    if ra.ndim != 1 or ra.shape != dec.shape:
        raise ValueError(f"ra and dec must be 1-D and of one length, not {ra.shape} and {dec.shape}")
    if not (np.isfinite(ra).all() and np.isfinite(dec).all()):
        raise ValueError("positions must be finite")
    return ra, dec


class FitsSkyCutoutDataset(FitsCutoutDataset):
    """One stamp per sky position, cut from the image that holds it best.

    Each position goes to the image whose footprint holds it with the largest distance to the
    nearest edge (in that image's pixels; the first image listed wins a tie); the stamp is
    centred as ``Cutout2D(data, SkyCoord(ra, dec), size, wcs)`` centres it on that image.
    Items, batches (one kernel call per file), ``transform``, ``dtype`` and the edge policy
    are those of `FitsCutoutDataset`: a stamp that leaves its image raises `CutoutEdgeError`
    unless ``edge="pad"`` or ``edge="clamp"``.

    Parameters
    ----------
    images : path, glob pattern, or list of them
        The images (one image HDU each, 2-D, with a celestial WCS).
    positions : (ra, dec) arrays, (N, 2) array, or table
        Degrees. A table (a mapping, a pyarrow or pandas table) gives them in ``columns``.
    size : int or (int, int)
        Stamp size in pixels.
    hdu : int or str, optional
        The image HDU of every file; by default the first HDU with data.
    columns : (str, str)
        The RA and Dec columns of a table.
    footprints : str or os.PathLike, optional
        A footprint sidecar written by `torchfits.sky.footprints.build`: its entries for the
        same file versions are used, the others computed (one header read per image).
    transform, device, add_channel_dim, dtype, edge, pad_value
        As in `FitsCutoutDataset`.

    Raises
    ------
    ValueError
        A position no image holds (the message names it).
    """

    def __init__(self, images: Any, positions: Any, size: Any, *, hdu: Any = None,
                 columns: tuple[str, str] = ("ra", "dec"), footprints: Any = None,
                 transform: Callable[..., Any] | None = None, device: Any = "cpu",
                 add_channel_dim: bool = True, dtype: Any = None, edge: str = "raise",
                 pad_value: Any = None) -> None:
        paths = resolve_paths(images)
        hw = stamp_size(size)
        ra, dec = _positions(positions, tuple(columns))  # type: ignore[arg-type]
        fps = for_images(paths, hdu, footprints)
        best = np.full(len(ra), -1, np.int64)
        margin = np.full(len(ra), -np.inf)
        px, py = np.full(len(ra), np.nan), np.full(len(ra), np.nan)
        for k, fp in enumerate(fps):
            near = np.flatnonzero(separation_deg(ra, dec, fp.center[0], fp.center[1]) <= fp.radius)
            if not len(near):
                continue
            x, y = world_to_pixel(image_wcs(open_image(fp.path, fp.hdu)), ra[near], dec[near],
                                  quiet=True)
            h, w = fp.shape
            m = np.minimum(np.minimum(x + 0.5, w - 0.5 - x), np.minimum(y + 0.5, h - 0.5 - y))
            better = np.isfinite(m) & (m >= 0) & (m > margin[near])
            take = near[better]
            best[take], margin[take], px[take], py[take] = k, m[better], x[better], y[better]
        missing = np.flatnonzero(best < 0)
        if len(missing):
            i = int(missing[0])
            raise ValueError(f"{len(missing)} of {len(ra)} positions lie in none of the "
                             f"{len(paths)} images, the first (RA, Dec) = ({ra[i]!r}, {dec[i]!r}) "
                             f"at position {i}")
        boxes = stamp_boxes(px, py, hw) if len(ra) else np.empty((0, 4), np.int64)
        specs = [(fps[k].path, fps[k].hdu, *b)
                 for k, b in zip(best.tolist(), boxes.tolist())]
        super().__init__(specs, transform=transform, device=device,
                         add_channel_dim=add_channel_dim, dtype=dtype, edge=edge,
                         pad_value=pad_value)
        self.footprints: list[Footprint] = fps
        self.size = hw
        self.image_index = best
        self.pixels = np.stack([px, py], axis=1)

    def header(self, i: int) -> Header:
        """The header of stamp ``i``: its image's header with NAXISn and the pixel-offset
        keywords moved, so its WCS equals ``Cutout2D(...).wcs`` (before ``edge="clamp"``
        cuts it)."""
        path, hdu, box = self._specs[self._position(i)]
        x1, y1, x2, y2 = box
        return section_header(open_image(path, hdu).header, (y1, x1), (1, 1), (y2 - y1, x2 - x1))

    def __repr__(self) -> str:
        return (f"FitsSkyCutoutDataset(n={len(self)}, images={len(self.footprints)}, "
                f"size={self.size}, device={self.device!r})")

"""Image footprints on the sky: each image's corners, centre and enclosing radius through its
WCS, kept in a JSON sidecar so a dataset over many images finds the ones that hold a position
without opening every header again.

An entry is keyed by the file's size and modification time; a changed file's entry is computed
again (`for_images` does so in memory; `build` rewrites the sidecar).
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..fits.paths import fspath
from ..image.plain import open_image
from ..query.sky import separation_deg
from .cutouts import image_wcs

__all__ = ["Footprint", "build", "load", "for_images", "footprint"]

_FORMAT = "torchfits-footprints"
_VERSION = 1
_BORDER = 16  # samples per image side: distortions can bulge an edge past its corners


class Footprint(NamedTuple):
    """Where one image HDU lies on the sky (degrees).

    ``corners`` are the outer corners of the first and last pixels, ``(ra, dec)`` each, in the
    order (x, y) = (-0.5, -0.5), (w - 0.5, -0.5), (w - 0.5, h - 0.5), (-0.5, h - 0.5);
    ``radius`` is the largest separation of the image's border from ``center``, so every pixel
    lies in the cone (``center``, ``radius``). ``size`` and ``mtime_ns`` name the file version.
    """

    path: str
    hdu: int
    shape: tuple[int, int]
    center: tuple[float, float]
    radius: float
    corners: tuple[tuple[float, float], ...]
    size: int
    mtime_ns: int


def footprint(path: Any, hdu: Any = None) -> Footprint:
    """The `Footprint` of one image HDU (``hdu`` None: the first HDU with data)."""
    text = fspath(path)
    image = open_image(text, hdu)
    wcs = image_wcs(image)
    h, w = image.shape
    t = np.linspace(0.0, 1.0, _BORDER + 1)
    xs = np.concatenate([-0.5 + w * t, np.full_like(t, w - 0.5), w - 0.5 - w * t,
                         np.full_like(t, -0.5)])
    ys = np.concatenate([np.full_like(t, -0.5), -0.5 + h * t, np.full_like(t, h - 0.5),
                         h - 0.5 - h * t])
    ra, dec = wcs.all_pix2world(xs, ys, 0)
    c_ra, c_dec = wcs.all_pix2world([(w - 1) / 2.0], [(h - 1) / 2.0], 0)
    radius = float(np.max(separation_deg(ra, dec, c_ra[0], c_dec[0])))
    corners = tuple((float(ra[k * (_BORDER + 1)]), float(dec[k * (_BORDER + 1)])) for k in range(4))
    st = os.stat(text)
    return Footprint(text, image.hdu, (h, w), (float(c_ra[0]), float(c_dec[0])),
                     radius * (1 + 1e-9) + 1e-9, corners, st.st_size, st.st_mtime_ns)


def _fresh(fp: Footprint) -> bool:
    try:
        st = os.stat(fp.path)
    except OSError:
        return False
    return st.st_size == fp.size and st.st_mtime_ns == fp.mtime_ns


def load(sidecar: Any) -> list[Footprint]:
    """The footprints a sidecar written by `build` holds (paths resolved against its folder)."""
    text = fspath(sidecar)
    with open(text, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("version") != _VERSION:
        raise ValueError(f"{text}: not a torchfits footprint sidecar (format {_FORMAT!r}, "
                         f"version {_VERSION})")
    base = os.path.dirname(os.path.abspath(text))
    out = []
    for e in doc["images"]:
        out.append(Footprint(os.path.normpath(os.path.join(base, e["path"])), int(e["hdu"]),
                             (int(e["shape"][0]), int(e["shape"][1])),
                             (float(e["center"][0]), float(e["center"][1])), float(e["radius"]),
                             tuple((float(a), float(b)) for a, b in e["corners"]),
                             int(e["size"]), int(e["mtime_ns"])))
    return out


def build(paths: Sequence[Any], hdu: Any = None, *, out: Any = None) -> list[Footprint]:
    """The footprints of ``paths`` (one image HDU each), written to the sidecar ``out`` (JSON;
    paths stored relative to its folder) when given.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The image files.
    hdu : int or str, optional
        The image HDU of every file; by default the first HDU with data.
    out : str or os.PathLike, optional
        The sidecar to write (replaced atomically).

    Returns
    -------
    list of Footprint
    """
    found = [footprint(p, hdu) for p in paths]
    if out is not None:
        target = os.path.abspath(fspath(out))
        base = os.path.dirname(target)
        doc = {"format": _FORMAT, "version": _VERSION, "images": [
            {"path": os.path.relpath(os.path.abspath(fp.path), base), "hdu": fp.hdu,
             "shape": list(fp.shape), "center": list(fp.center), "radius": fp.radius,
             "corners": [list(c) for c in fp.corners], "size": fp.size,
             "mtime_ns": fp.mtime_ns} for fp in found]}
        tmp = f"{target}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, target)
    return found


def for_images(paths: Sequence[Any], hdu: Any = None, sidecar: Any = None) -> list[Footprint]:
    """The footprint of each of ``paths``: from ``sidecar`` where it holds the same file
    version and HDU, computed otherwise (and not written back)."""
    known: dict[str, Footprint] = {}
    if sidecar is not None:
        for fp in load(sidecar):
            known[os.path.abspath(fp.path)] = fp
    out = []
    for p in paths:
        text = fspath(p)
        kept = known.get(os.path.abspath(text))
        if kept is not None and _fresh(kept) and (hdu is None or _same_hdu(kept, hdu)):
            out.append(kept._replace(path=text))
        else:
            out.append(footprint(text, hdu))
    return out


def _same_hdu(fp: Footprint, hdu: Any) -> bool:
    return isinstance(hdu, int) and not isinstance(hdu, bool) and hdu == fp.hdu

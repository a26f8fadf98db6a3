"""Great-circle geometry of cone searches: separations, and the box a cone fits in.

Every sky feature shares these: the where dialect's ``cone(...)`` (its exact test and the
declination band and RA windows the row kernel checks first), the statistics sidecar's file and
chunk skipping, cross-matches and cutouts. Angles are degrees throughout; arithmetic is float64.
The separation is Vincenty's formula, as astropy's ``SkyCoord.separation`` computes it, so a
boundary decision agrees with astropy's to rounding (docs/sky.md).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ConeBox", "cone_box", "separation_deg", "in_cone", "check_cone"]

# the band and windows are widened by this much so that rounding in their own arithmetic can
# never drop a row the exact test would keep (1e-9 deg is 3.6 micro-arcseconds)
_MARGIN_DEG = 1e-9


class ConeBox(NamedTuple):
    """The declination band and RA windows a cone lies inside.

    ``ra_windows`` holds closed ``(lo, hi)`` intervals in degrees within ``[0, 360]``: one, or
    two when the cone crosses RA 0/360; ``None`` when every RA can match (the cone touches a
    pole, or is wider than a hemisphere in RA).
    """

    dec_lo: float
    dec_hi: float
    ra_windows: tuple[tuple[float, float], ...] | None


def check_cone(ra0: Any, dec0: Any, radius: Any) -> tuple[float, float, float]:
    """Check a cone's centre and radius; return them as floats.

    Raises
    ------
    ValueError
        On a non-finite value, a declination outside [-90, 90] or a negative radius.
    """
    try:
        ra, dec, r = float(ra0), float(dec0), float(radius)
    except (TypeError, ValueError):
        raise ValueError(
            f"cone centre and radius must be numbers, got {ra0!r}, {dec0!r}, {radius!r}"
        ) from None
    if not (math.isfinite(ra) and math.isfinite(dec) and math.isfinite(r)):
        raise ValueError(f"cone centre and radius must be finite, got ({ra}, {dec}, {r})")
    if not -90.0 <= dec <= 90.0:
        raise ValueError(f"cone declination {dec} is outside [-90, 90]")
    if r < 0:
        raise ValueError(f"cone radius {r} is negative")
    return ra % 360.0, dec, r


def cone_box(ra0: float, dec0: float, radius: float) -> ConeBox:
    """The declination band and RA windows that hold every point within ``radius`` of the centre.

    Parameters
    ----------
    ra0, dec0 : float
        The centre, degrees.
    radius : float
        Degrees.

    Returns
    -------
    ConeBox
        Widened by 1e-9 deg on every side, so a box test never drops a point the exact test keeps.
    """
    ra0, dec0, radius = check_cone(ra0, dec0, radius)
    dec_lo = max(-90.0, dec0 - radius - _MARGIN_DEG)
    dec_hi = min(90.0, dec0 + radius + _MARGIN_DEG)
    if radius >= 90.0 or dec_hi >= 90.0 or dec_lo <= -90.0:
        return ConeBox(dec_lo, dec_hi, None)
    # the widest RA extent of a small circle: sin(half_width) = sin(r) / cos(dec0)
    s = math.sin(math.radians(radius)) / math.cos(math.radians(dec0))
    if s >= 1.0:
        return ConeBox(dec_lo, dec_hi, None)
    half = math.degrees(math.asin(s)) + _MARGIN_DEG
    lo, hi = ra0 - half, ra0 + half
    if lo < 0.0:
        return ConeBox(dec_lo, dec_hi, ((0.0, hi), (lo + 360.0, 360.0)))
    if hi > 360.0:
        return ConeBox(dec_lo, dec_hi, ((0.0, hi - 360.0), (lo, 360.0)))
    return ConeBox(dec_lo, dec_hi, ((lo, hi),))


def separation_deg(ra1: Any, dec1: Any, ra2: Any, dec2: Any) -> Any:
    """Great-circle separation in degrees (Vincenty's formula; NumPy broadcasting).

    Parameters
    ----------
    ra1, dec1, ra2, dec2 : float or array-like
        Degrees; any shapes that broadcast together. NaN in gives NaN out.

    Returns
    -------
    float or numpy.ndarray
        Degrees in [0, 180].
    """
    lon1, lat1 = np.radians(np.asarray(ra1, dtype=np.float64)), np.radians(np.asarray(dec1, dtype=np.float64))
    lon2, lat2 = np.radians(np.asarray(ra2, dtype=np.float64)), np.radians(np.asarray(dec2, dtype=np.float64))
    dlon = lon2 - lon1
    sdl, cdl = np.sin(dlon), np.cos(dlon)
    s1, c1 = np.sin(lat1), np.cos(lat1)
    s2, c2 = np.sin(lat2), np.cos(lat2)
    num1 = c2 * sdl
    num2 = c1 * s2 - s1 * c2 * cdl
    den = s1 * s2 + c1 * c2 * cdl
    return np.degrees(np.arctan2(np.hypot(num1, num2), den))


def in_cone(ra: Any, dec: Any, ra0: float, dec0: float, radius: float) -> np.ndarray:
    """Which points lie within ``radius`` degrees of the centre (boundary included; NaN never)."""
    return np.asarray(separation_deg(ra, dec, ra0, dec0) <= radius)

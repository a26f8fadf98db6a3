"""Sky-native operations over FITS catalogs and images: cross-matches, sky cutouts, HEALPix order.

The cone geometry they share lives below the engine, in :mod:`torchfits.query.sky`; see
docs/sky.md.
"""
from __future__ import annotations

from .healpix_sort import sort_healpix

__all__ = ["sort_healpix"]

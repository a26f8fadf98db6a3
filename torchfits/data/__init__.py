"""Training on FITS with PyTorch: datasets over files, cutouts, spectra and catalog rows, with
sharding by (rank, worker), per-epoch seeded shuffles, and `make_loader`.

This adapter imports torch; ``import torchfits`` does not import it.
"""
from __future__ import annotations

from .bands import BandInfo, discover_bands
from .cutouts import CutoutSpec, FitsCutoutDataset, FitsStagedCutoutIterableDataset
from .images import (
    FitsCubeDataset,
    FitsCubeIterableDataset,
    FitsImageDataset,
    FitsImageIterableDataset,
    FitsTensorDataset,
    FitsTensorIterableDataset,
)
from .loader import fits_collate_fn, make_loader
from .sky_cutouts import FitsSkyCutoutDataset
from .spectra import FitsSpectrumDataset, FitsSpectrumIterableDataset
from .tables import FitsTableDataset, FitsTableIterableDataset

__all__ = ["BandInfo", "CutoutSpec", "discover_bands", "FitsTensorDataset",
           "FitsTensorIterableDataset", "FitsImageDataset", "FitsImageIterableDataset",
           "FitsCubeDataset", "FitsCubeIterableDataset", "FitsSpectrumDataset",
           "FitsSpectrumIterableDataset", "FitsTableDataset", "FitsTableIterableDataset",
           "FitsCutoutDataset", "FitsSkyCutoutDataset", "FitsStagedCutoutIterableDataset",
           "fits_collate_fn", "make_loader"]

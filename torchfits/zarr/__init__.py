"""Zarr and xarray: kerchunk references to FITS images (`references`), VirtualiZarr manifests
(`manifest_group`) and the numcodecs and zarr codecs that decode FITS tiles and pixel scaling
(`torchfits.zarr.fits_codecs`, `torchfits.zarr.zarr3`); docs/zarr.md.

numcodecs, zarr and VirtualiZarr are imported when first needed.
"""
from __future__ import annotations

import importlib
from typing import Any

from .references import DEFAULT_CHUNK_BYTES, references

__all__ = ["references", "manifest_group", "DEFAULT_CHUNK_BYTES", "FitsRice1", "FitsGzip1", "FitsGzip2",
           "FitsHcompress1", "FitsPlio1", "FitsScale", "register_codecs"]

_LAZY = {name: "fits_codecs" for name in ("FitsRice1", "FitsGzip1", "FitsGzip2", "FitsHcompress1",
                                          "FitsPlio1", "FitsScale", "register_codecs")}
_LAZY["manifest_group"] = "virtual"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)

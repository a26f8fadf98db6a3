"""Hypothesis strategies that describe FITS files, and writers that build them with astropy or
fitsio (never with torchfits, so the oracle stays independent of the code under test)."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
from hypothesis import strategies as st

from _oracles import OFFSET_BZERO, make_stored, write_image

# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

BITPIXES = (8, 16, 32, 64, -32, -64)
#: scaling conventions: stored values as they are, the unsigned/signed-byte offset, a linear
#: scaling to physical floats, BLANK alone, scaling with BLANK
CONVENTIONS = ("raw", "offset", "scaled", "blank", "scaled-blank")


@dataclass
class ImageSpec:
    bitpix: int
    shape: tuple[int, ...]
    convention: str
    bscale: Optional[float]
    bzero: Optional[float]
    seed: int
    writer: str
    extension: bool

    @property
    def hdu(self) -> int:
        return 1 if self.extension else 0


@st.composite
def image_specs(draw: Any) -> ImageSpec:
    bitpix = draw(st.sampled_from(BITPIXES))
    ndim = draw(st.integers(1, 3))
    # length-1 axes are common; a zero-size axis is rare but must read as an empty array
    shape = tuple(draw(st.one_of(st.integers(1, 7), st.just(1), st.just(0)))
                  for _ in range(ndim))
    conventions = ["raw", "scaled"] + (["offset", "blank", "scaled-blank"] if bitpix > 0 else [])
    convention = draw(st.sampled_from(conventions))
    bscale = bzero = None
    if convention == "offset":
        bscale, bzero = 1.0, float(OFFSET_BZERO[bitpix])
    elif convention.startswith("scaled"):
        bscale = draw(st.sampled_from([1.0, 2.0, 0.5, 0.001, -3.25, 1e-7]))
        bzero = draw(st.sampled_from([0.0, 1.0, -100.5, 32768.0, 1e6]))
    writer = draw(st.sampled_from(["astropy", "fitsio"]))
    return ImageSpec(bitpix, shape, convention, bscale, bzero,
                     draw(st.integers(0, 2**16)), writer, draw(st.booleans()))


def write_image_spec(path: Path, spec: ImageSpec) -> Path:
    """Write ``spec`` (the stored values come from ``make_stored``: extremes, NaN payloads, ±Inf)."""
    stored = make_stored(spec.bitpix, spec.shape, spec.seed)
    blank = None
    if spec.convention.endswith("blank"):
        blank = int(stored.ravel()[0]) if stored.size else 7
    bzero: Any = spec.bzero
    if spec.convention == "offset":
        bzero = OFFSET_BZERO[spec.bitpix]
    if 0 in spec.shape:
        # write_image checks the bytes it wrote, which a zero-size array has none of
        from astropy.io import fits

        hdu = fits.PrimaryHDU(stored) if not spec.extension else fits.ImageHDU(stored)
        for key, value in (("BSCALE", spec.bscale), ("BZERO", bzero), ("BLANK", blank)):
            if value is not None:
                hdu.header[key] = value
        hdus = [fits.PrimaryHDU(), hdu] if spec.extension else [hdu]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.HDUList(hdus).writeto(path, overwrite=True)
        return path
    return write_image(path, stored, bitpix=spec.bitpix, bscale=spec.bscale, bzero=bzero,
                       blank=blank, writer=spec.writer, extension=spec.extension)


@st.composite
def index_for(draw: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A basic NumPy index into ``shape``: per axis an integer or a slice with any step."""
    out: list[Any] = []
    for n in shape:
        if n and draw(st.booleans()) and len(out) < len(shape) - 1:
            out.append(draw(st.integers(-n, n - 1)))
            continue
        start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
        out.append(slice(start, stop, step))
    return tuple(out)

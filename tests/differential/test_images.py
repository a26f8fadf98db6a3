"""Every image route against astropy and fitsio: generated files over every BITPIX × scaling
convention × BLANK × odd shapes (1-D, 3-D, length-1 and zero-size axes), read whole, raw, sliced,
through the 1.x API, the HDU list, the torch image dataset and Dask."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st

import torchfits  # noqa: E402
from _oracles import assert_matches, expected_image, result_rule, to_numpy  # noqa: E402

from ._profile import diff_settings  # noqa: E402
from .strategies import image_specs, index_for, write_image_spec  # noqa: E402


@diff_settings(60)
@given(spec=image_specs(), data=st.data())
def test_image_routes_equal_the_oracles(spec, data):
    with tempfile.TemporaryDirectory() as d:
        path = write_image_spec(Path(d) / "img.fits", spec)
        hdu = spec.hdu
        what = f"{spec}"
        if 0 in spec.shape:
            return check_zero_size(path, spec)
        expected, mode, astropy_check = expected_image(path, hdu)

        full = torchfits.read_numpy(path, hdu)
        assert_matches(full, expected, mode, what=f"read_numpy {what}")
        identity = spec.bscale in (None, 1.0) and spec.bzero in (None, 0.0)
        blank = spec.convention.endswith("blank")
        if not (blank and (identity or blank_is_zero(path, hdu))):
            # astropy (and fitsio) apply BLANK only together with BSCALE/BZERO; torchfits turns
            # BLANK pixels into NaN on its own too (docs/images.md), which expected_image encodes.
            # astropy ignores BLANK = 0 altogether (finding H25-B, in the oracle)
            astropy_check(full)

        raw, rmode, _ = expected_image(path, hdu, raw_scale=True)
        assert_matches(torchfits.read_numpy(path, hdu, raw_scale=True), raw, rmode,
                       what=f"read_numpy(raw_scale) {what}")

        img = torchfits.open_image(path, hdu)
        assert tuple(img.shape) == expected.shape, what
        for _ in range(3):
            index = data.draw(index_for(expected.shape), label="index")
            assert_matches(img[index], np.asarray(expected[index]), mode,
                           what=f"open_image[{index}] {what}")

        compat, cmode, compat_check = expected_image(path, hdu, api="compat")
        tensor = torchfits.read(path, hdu)
        assert_matches(tensor, compat, cmode, what=f"1.x read {what}")

        with torchfits.open(path) as hdul:
            assert_matches(np.asarray(hdul[hdu].data), compat, cmode, what=f"1.x open {what}")

        from torchfits.data import FitsImageDataset

        sample = FitsImageDataset([str(path)], hdu, add_channel_dim=False)[0]
        sample = sample[0] if isinstance(sample, tuple) else sample
        if expected.dtype == np.uint64:
            # the torch datasets give uint64 as float64, images as table rows (docs/training.md)
            assert_matches(to_numpy(sample), expected.astype(np.float64), "ulp",
                           what=f"FitsImageDataset {what}")
        else:
            assert_matches(to_numpy(sample), expected, mode, what=f"FitsImageDataset {what}")

        pytest.importorskip("dask.array")
        from torchfits.dask import read_images

        arr = read_images(path, hdu).compute()
        assert_matches(arr, expected, mode, what=f"dask.read_images {what}")


def blank_is_zero(path, hdu):
    """Whether the image's BLANK is 0, which astropy's scaled read ignores (H25-B)."""
    from astropy.io import fits

    return fits.getheader(path, hdu).get("BLANK") == 0


def check_zero_size(path, spec):
    """A zero-size image reads as an empty array of the documented dtype and astropy's shape,
    through every route."""
    from astropy.io import fits

    shape = fits.getdata(path, spec.hdu).shape if spec.extension else fits.getdata(path).shape
    blank = 1 if spec.convention.endswith("blank") else None
    dtype, _ = result_rule(spec.bitpix, spec.bscale or 1.0, spec.bzero or 0, blank)
    routes = {
        "read_numpy": torchfits.read_numpy(path, spec.hdu),
        "open_image[...]": torchfits.open_image(path, spec.hdu)[...],
        "1.x read": to_numpy(torchfits.read(path, spec.hdu)),
    }
    for name, arr in routes.items():
        assert arr.shape == shape, f"{name} {spec}: shape {arr.shape} != astropy {shape}"
        if name != "1.x read":
            assert arr.dtype == dtype, f"{name} {spec}: dtype {arr.dtype} != {dtype}"

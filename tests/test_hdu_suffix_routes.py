"""HDU addressing on every route: the ``[SCI,2]`` / ``[1]`` path suffix in the torch datasets,
``torchfits.dataset``, ``torchfits.sql`` and ``fits()``, and ``("SCI", 2)`` / ``"SCI,2"`` in the
1.x ``HDUList``; astropy is the oracle for what each HDU holds."""
from __future__ import annotations

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits.errors import FitsError, HDUNotFoundError  # noqa: E402


def _image(value: float, ver: int) -> "fits.ImageHDU":
    hdu = fits.ImageHDU(np.arange(20, dtype=np.float32).reshape(4, 5) + value, name="SCI")
    hdu.header["EXTVER"] = ver
    return hdu


def _table(values: list, ver: int) -> "fits.BinTableHDU":
    cols = [fits.Column(name="a", format="J", array=np.array(values, dtype=np.int32)),
            fits.Column(name="flux", format="E", array=np.array(values, dtype=np.float32) / 2)]
    hdu = fits.BinTableHDU.from_columns(cols, name="CAT")
    hdu.header["EXTVER"] = ver
    return hdu


@pytest.fixture
def two_versions(tmp_path):
    """0 PRIMARY (empty), 1 SCI v1, 2 SCI v2, 3 CAT v1, 4 CAT v2."""
    path = tmp_path / "two.fits"
    fits.HDUList([fits.PrimaryHDU(), _image(0, 1), _image(100, 2),
                  _table([1, 2, 3], 1), _table([10, 20], 2)]).writeto(path)
    return str(path)


def _astropy(path: str, hdu) -> np.ndarray:
    with fits.open(path) as hdul:
        return np.asarray(hdul[hdu].data)


# -- the 1.x HDUList -----------------------------------------------------------------------------

def test_hdulist_extver_lookup(two_versions):
    with torchfits.open(two_versions) as hdul:
        np.testing.assert_array_equal(hdul[("SCI", 2)].to_tensor().numpy(),
                                      _astropy(two_versions, ("SCI", 2)))
        np.testing.assert_array_equal(hdul["SCI", 1].to_tensor().numpy(),
                                      _astropy(two_versions, ("SCI", 1)))
        assert hdul["sci,2"] is hdul[2]
        assert hdul["SCI"] is hdul[1]           # a name alone: its first HDU
        assert hdul["PRIMARY"] is hdul[0]
        assert ("SCI", 2) in hdul and "SCI,2" in hdul and "primary" in hdul
        assert ("SCI", 3) not in hdul and "SCI,3" not in hdul
        with pytest.raises(HDUNotFoundError, match=r"\('SCI', 3\) not found.*2 SCI \(EXTVER 2\)"):
            hdul["SCI", 3]
        with pytest.raises(TypeError, match="EXTVER must be an integer"):
            hdul["SCI", "2"]

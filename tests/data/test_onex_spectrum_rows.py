"""FitsSpectrumDataset(row=k) on 2-D image HDUs with IVAR/MASK companions (the DESI layout):
row k of each arm as a 1-D spectrum (issue #25)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torchfits.data import FitsSpectrumDataset, FitsSpectrumIterableDataset  # noqa: E402

NSPEC = 4
ARMS = {"B": 30, "R": 25, "Z": 20}


def _desi(path, fits, arms=ARMS):
    hdus = [fits.PrimaryHDU()]
    for arm, nwave in arms.items():
        base = {"B": 1000.0, "R": 2000.0, "Z": 3000.0}[arm]
        flux = (np.arange(NSPEC * nwave, dtype=np.float32).reshape(NSPEC, nwave) + base)
        hdus += [fits.ImageHDU(np.linspace(base, base + 1, nwave), name=f"{arm}_WAVELENGTH"),
                 fits.ImageHDU(flux, name=f"{arm}_FLUX"),
                 fits.ImageHDU(flux * 0 + 2, name=f"{arm}_IVAR"),
                 fits.ImageHDU((np.arange(NSPEC * nwave) % 3 == 0).astype(np.int32)
                               .reshape(NSPEC, nwave), name=f"{arm}_MASK")]
    fits.HDUList(hdus).writeto(path)
    return str(path)


def _expect_flux(arm, row, nwave):
    base = {"B": 1000.0, "R": 2000.0, "Z": 3000.0}[arm]
    return np.arange(row * nwave, (row + 1) * nwave, dtype=np.float32) + base


def _kw(arms=ARMS):
    return dict(hdu=[f"{a}_FLUX" for a in arms], ivar_hdu=[f"{a}_IVAR" for a in arms],
                mask_hdu=[f"{a}_MASK" for a in arms])


@pytest.mark.parametrize("row", [0, 2])
def test_dict_layout_one_row_per_arm(tmp_path, fits, row):
    path = _desi(tmp_path / "coadd.fits", fits)
    item = FitsSpectrumDataset(path, row=row, layout="dict", **_kw())[0]
    assert set(item) == {"B_FLUX", "R_FLUX", "Z_FLUX"}
    for arm, nwave in ARMS.items():
        part = item[f"{arm}_FLUX"]
        assert part["flux"].shape == (nwave,)
        np.testing.assert_array_equal(part["flux"].numpy(), _expect_flux(arm, row, nwave))
        assert part["ivar"].shape == (nwave,) and bool((part["ivar"] == 2).all())
        mask = (np.arange(row * nwave, (row + 1) * nwave) % 3 == 0)
        np.testing.assert_array_equal(part["mask"].numpy(), mask)  # True = valid (nonzero kept)


def test_concat_and_iterable_twin(tmp_path, fits):
    path = _desi(tmp_path / "coadd.fits", fits)
    item = FitsSpectrumDataset(path, row=1, layout="concat", **_kw())[0]
    expect = np.concatenate([_expect_flux(a, 1, n) for a, n in ARMS.items()])
    np.testing.assert_array_equal(item["flux"].numpy(), expect)
    assert item["ivar"].shape == expect.shape and item["mask"].shape == expect.shape
    streamed = list(FitsSpectrumIterableDataset(path, row=1, layout="concat", **_kw()))
    assert len(streamed) == 1
    np.testing.assert_array_equal(streamed[0]["flux"].numpy(), expect)


def test_single_arm_with_wavelength(tmp_path, fits):
    path = _desi(tmp_path / "coadd.fits", fits)
    ds = FitsSpectrumDataset([path, path], hdu="R_FLUX", ivar_hdu="R_IVAR", mask_hdu="R_MASK",
                             wavelength_hdu="R_WAVELENGTH", row=3)
    items = [ds[0], ds[1]]
    assert items[0]["flux"].shape == (25,) and items[0]["wavelength"].shape == (25,)
    np.testing.assert_array_equal(items[0]["flux"].numpy(), _expect_flux("R", 3, 25))
    batch = torch.utils.data.default_collate(items)
    assert batch["flux"].shape == (2, 25)
    assert ds.__getitems__([0, 1])[1]["flux"].shape == (25,)


def test_stack_refuses_unequal_lengths(tmp_path, fits):
    path = _desi(tmp_path / "coadd.fits", fits)
    with pytest.raises(ValueError, match="layout='stack' requires equal nwave per arm"):
        FitsSpectrumDataset(path, row=0, layout="stack", **_kw())[0]
    equal = _desi(tmp_path / "equal.fits", fits, arms={"B": 10, "R": 10})
    item = FitsSpectrumDataset(equal, row=2, layout="stack", **_kw({"B": 10, "R": 10}))[0]
    assert item["flux"].shape == (2, 10)
    np.testing.assert_array_equal(item["flux"][1].numpy(), _expect_flux("R", 2, 10))


def test_row_past_the_end(tmp_path, fits):
    path = _desi(tmp_path / "coadd.fits", fits)
    with pytest.raises(IndexError, match="row=9"):
        FitsSpectrumDataset(path, row=9, **_kw())[0]

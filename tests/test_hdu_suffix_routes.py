"""HDU addressing on every route: the ``[SCI,2]`` / ``[1]`` path suffix in the torch datasets,
``torchfits.dataset``, ``torchfits.sql`` and ``fits()``, and ``("SCI", 2)`` / ``"SCI,2"`` in the
1.x ``HDUList``; astropy is the oracle for what each HDU holds."""
from __future__ import annotations

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits.errors import HDUNotFoundError  # noqa: E402


def _image(value: float, ver: int) -> fits.ImageHDU:
    hdu = fits.ImageHDU(np.arange(20, dtype=np.float32).reshape(4, 5) + value, name="SCI")
    hdu.header["EXTVER"] = ver
    return hdu


def _table(values: list, ver: int) -> fits.BinTableHDU:
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


# -- dataset(), sql() and fits() -----------------------------------------------------------------

def _rows(table) -> list:
    return table.column("a").to_pylist()


def test_dataset_path_suffix(two_versions):
    assert _rows(torchfits.dataset(two_versions + "[CAT,2]").to_table()) == \
        _astropy(two_versions, ("CAT", 2))["a"].tolist() == [10, 20]
    assert _rows(torchfits.dataset(two_versions + "[3]").to_table()) == [1, 2, 3]
    assert _rows(torchfits.dataset(two_versions + "[cat]").to_table()) == [1, 2, 3]
    # each file its own HDU; the path column says which
    both = torchfits.dataset([two_versions + "[CAT,2]", two_versions + "[3]"], add_path_column=True)
    got = both.to_table().to_pydict()
    assert got["a"] == [10, 20, 1, 2, 3] and got["hdu"] == [4, 4, 3, 3, 3]
    # the suffix wins over the default hdu; the same HDU given both ways is fine
    assert _rows(torchfits.dataset(two_versions + "[CAT,2]", hdu=4).to_table()) == [10, 20]
    assert _rows(torchfits.dataset(two_versions + "[CAT,2]", hdu=("CAT", 2)).to_table()) == [10, 20]
    with pytest.raises(ValueError, match=r"suffix selects HDU \('CAT', 2\) and hdu=3 another"):
        torchfits.dataset(two_versions + "[CAT,2]", hdu=3)
    with pytest.raises(HDUNotFoundError, match="CAT.*not found"):
        torchfits.dataset(two_versions + "[CAT,3]")
    with pytest.raises(ValueError, match="image section cannot select table rows"):
        torchfits.dataset(two_versions + "[1:2,*]")


def test_dataset_brackets_literal_glob_and_suffix(tmp_path):
    for name, ver, values in (("cat1.fits", 1, [1]), ("cat2.fits", 2, [2]),
                              ("odd.fits[2]", 1, [7])):
        fits.HDUList([fits.PrimaryHDU(), _table(values, ver)]).writeto(tmp_path / name)
    # a name that exists is a file, even with brackets in it
    assert _rows(torchfits.dataset(str(tmp_path / "odd.fits[2]")).to_table()) == [7]
    # brackets on a name whose base does not exist: a glob
    assert _rows(torchfits.dataset(str(tmp_path / "cat[12].fits")).to_table()) == [1, 2]
    # the base exists: an HDU suffix (here naming HDU 1, the table)
    assert _rows(torchfits.dataset(str(tmp_path / "cat2.fits[1]")).to_table()) == [2]
    with pytest.raises(FileNotFoundError, match="no files match"):
        torchfits.dataset(str(tmp_path / "nope.fits[1]"))


def test_sql_and_fits_path_suffix(two_versions):
    pytest.importorskip("duckdb")
    q = f"SELECT sum(a) AS s FROM '{two_versions}[CAT,2]'"
    assert torchfits.sql(q).fetchall() == [(30,)]
    q = f"SELECT sum(a) FROM fits('{two_versions}[CAT,1]')"
    assert torchfits.sql(q).fetchall() == [(6,)]
    q = (f"SELECT a.a, b.a FROM '{two_versions}[CAT,1]' a "
         f"JOIN '{two_versions}[CAT,2]' b ON b.a = 10 * a.a ORDER BY 1")
    assert torchfits.sql(q).fetchall() == [(1, 10), (2, 20)]
    with pytest.raises(ValueError, match="suffix selects HDU"):
        torchfits.sql(f"SELECT * FROM fits('{two_versions}[CAT,2]', hdu=3)")


def test_scan_polars_path_suffix(two_versions):
    pl = pytest.importorskip("polars")
    df = torchfits.scan_polars(two_versions + "[CAT,2]").collect()
    assert df["a"].to_list() == [10, 20]
    assert isinstance(df, pl.DataFrame)


# -- the torch datasets --------------------------------------------------------------------------

def test_image_datasets_path_suffix(two_versions):
    torch = pytest.importorskip("torch")
    from torchfits.data import (
        FitsCubeDataset,
        FitsImageDataset,
        FitsImageIterableDataset,
        FitsTensorDataset,
        make_loader,
    )

    sci2 = _astropy(two_versions, ("SCI", 2))
    sci1 = _astropy(two_versions, ("SCI", 1))
    ds = FitsImageDataset([two_versions + "[SCI,2]", two_versions + "[1]"], label_key="EXTVER")
    assert np.array_equal(ds[0][0][0].numpy(), sci2) and np.array_equal(ds[1][0][0].numpy(), sci1)
    assert [int(ds[i][1]) for i in range(2)] == [2, 1]
    assert ds.files == [two_versions + "[SCI,2]", two_versions + "[1]"]
    # batches (the one-pread batch decoder is for unsuffixed files) equal items
    batch = ds.__getitems__([0, 1])
    assert torch.equal(batch[0][0], ds[0][0]) and torch.equal(batch[1][0], ds[1][0])
    flux, labels = next(iter(make_loader(ds, batch_size=2, shuffle=False)))
    assert flux.shape == (2, 1, 4, 5) and labels.tolist() == [2, 1]
    assert np.array_equal(flux[0, 0].numpy(), sci2)
    # the suffix wins over the default hdu; the same HDU given both ways is fine
    assert np.array_equal(FitsTensorDataset(two_versions + "[SCI,2]", hdu=2)[0][0].numpy(), sci2)
    assert np.array_equal(FitsTensorDataset(two_versions + "[2]", hdu="SCI,2")[0][0].numpy(), sci2)
    # the 1.x string form needs no suffix, and a tuple is still a list of HDUs (stacked)
    assert np.array_equal(FitsTensorDataset(two_versions, hdu="SCI,2")[0][0].numpy(), sci2)
    stacked = FitsTensorDataset(two_versions, hdu=("SCI", 2))[0][0]
    assert stacked.shape == (2, 4, 5) and np.array_equal(stacked[1].numpy(), sci2)
    items = list(FitsImageIterableDataset([two_versions + "[SCI,2]", two_versions + "[SCI]"]))
    assert np.array_equal(items[0][0].numpy(), sci2) and np.array_equal(items[1][0].numpy(), sci1)
    assert FitsCubeDataset(two_versions + "[SCI,2]", slice_index=1)[0][0].tolist() == \
        sci2[1].tolist()
    with pytest.raises(ValueError, match=r"suffix selects HDU \('SCI', 2\) and hdu=1 another"):
        FitsImageDataset(two_versions + "[SCI,2]", hdu=1)
    with pytest.raises(ValueError, match="several"):
        FitsImageDataset(two_versions + "[SCI,2]", hdu=["SCI", 2])
    with pytest.raises(ValueError, match="not image sections"):
        FitsImageDataset(two_versions + "[1:2,*]")
    with pytest.raises(HDUNotFoundError, match="not found"):
        FitsImageDataset(two_versions + "[SCI,3]")
    with pytest.raises(ValueError, match="without an HDU suffix"):
        FitsImageDataset.from_bands(two_versions + "[SCI,2]")


def test_dataset_with_suffix_pickles(two_versions):
    pytest.importorskip("torch")
    import pickle

    from torchfits.data import FitsImageDataset

    ds = pickle.loads(pickle.dumps(FitsImageDataset(two_versions + "[SCI,2]")))
    assert np.array_equal(ds[0][0][0].numpy(), _astropy(two_versions, ("SCI", 2)))


def test_cutout_datasets_path_suffix(two_versions):
    pytest.importorskip("torch")
    from torchfits.data import FitsCutoutDataset, FitsStagedCutoutIterableDataset

    sci2 = _astropy(two_versions, ("SCI", 2))
    ds = FitsCutoutDataset([(two_versions + "[SCI,2]", None, 1, 1, 2),
                            (two_versions + "[SCI,2]", 2, 0, 0, 2)])
    assert np.array_equal(ds[0][0].numpy(), sci2[1:3, 1:3])
    assert np.array_equal(ds[1][0].numpy(), sci2[0:2, 0:2])
    assert ds.files == [two_versions]
    with pytest.raises(ValueError, match="suffix selects HDU"):
        FitsCutoutDataset([(two_versions + "[SCI,2]", 1, 0, 0, 2)])
    with pytest.raises(ValueError, match="not an image-section suffix"):
        FitsCutoutDataset([(two_versions + "[1:2,*]", None, 0, 0, 2)])
    with pytest.raises(ValueError, match="not image sections"):
        FitsStagedCutoutIterableDataset([two_versions + "[1:2,*]"], cutout_size=2)
    staged = FitsStagedCutoutIterableDataset([two_versions + "[SCI,2]"], cutouts_per_file=3,
                                             cutout_size=2, cutout_generator=lambda h, w, ch, cw:
                                             (1, 2, 3, 4))
    for t in staged:
        assert np.array_equal(t[0].numpy(), sci2[2:4, 1:3])


def test_table_and_spectrum_datasets_path_suffix(two_versions):
    torch = pytest.importorskip("torch")
    from torchfits.data import FitsSpectrumDataset, FitsTableDataset, FitsTableIterableDataset

    rows = FitsTableDataset(two_versions + "[CAT,2]")
    for route in (FitsTableDataset, FitsTableIterableDataset):
        with pytest.raises(ValueError, match="image section cannot select table rows"):
            route(two_versions + "[1:2,*]")
    assert [int(rows[i][0]["a"]) for i in range(len(rows))] == [10, 20]
    assert len(FitsTableDataset(two_versions + "[CAT,2]", hdu=("CAT", 2))) == 2
    assert len(FitsTableDataset(two_versions + "[4]", hdu="CAT,2")) == 2
    with pytest.raises(ValueError, match="suffix selects HDU"):
        FitsTableDataset(two_versions + "[CAT,2]", hdu=3)
    it = FitsTableIterableDataset([two_versions + "[CAT,2]", two_versions + "[CAT,1]"])
    assert [int(r["a"]) for r in it] == [10, 20, 1, 2, 3]
    batches = list(FitsTableIterableDataset([two_versions + "[CAT,2]", two_versions + "[3]"],
                                            as_batches=True))
    assert torch.cat([b["a"] for b in batches]).tolist() == [10, 20, 1, 2, 3]
    spec = FitsSpectrumDataset([two_versions + "[CAT,2]", two_versions + "[SCI,2]"],
                               column="flux")
    assert spec[0]["flux"].tolist() == [5.0, 10.0]
    assert np.array_equal(spec[1]["flux"].numpy(), _astropy(two_versions, ("SCI", 2)))

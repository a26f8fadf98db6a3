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


# -- dataset(), sql() and fits() -----------------------------------------------------------------

def _rows(table) -> list:
    return table.column("a").to_pylist()


def test_dataset_path_suffix(two_versions):
    pytest.importorskip("pyarrow")
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
    pytest.importorskip("pyarrow")
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

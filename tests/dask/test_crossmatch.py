"""torchfits.dask.crossmatch: the cross-match per HEALPix partition on the folder's
LocalCluster, equal to torchfits.crossmatch (after sorting by the left row number)."""
from __future__ import annotations

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("cdshealpix")

import torchfits  # noqa: E402
import torchfits.dask as tfd  # noqa: E402
from torchfits.dask.crossmatch import margin_depth  # noqa: E402

ARCSEC = 1.0 / 3600.0


def _catalogs(seed=0, n=6000, radius=3 * ARCSEC):
    rng = np.random.default_rng(seed)
    ra = rng.uniform(0, 360, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    k = n // 20
    near_pole = rng.uniform(0, 1e-3, k)
    dec[:k] = np.where(np.arange(k) % 2, 90.0 - near_pole, -90.0 + near_pole)
    ra[k:2 * k] = rng.uniform(-1e-3, 1e-3, k) % 360
    # right: each left source moved by up to 1.5 radii, plus a second copy for half of them
    def moved(k):
        d = rng.uniform(0, 1.5 * radius, k)
        t = rng.uniform(0, 2 * np.pi, k)
        return ((ra[:k] + d * np.sin(t) / np.maximum(np.cos(np.radians(dec[:k])), 1e-3)) % 360,
                np.clip(dec[:k] + d * np.cos(t), -90, 90))
    r1, d1 = moved(n)
    r2, d2 = moved(n // 2)
    rra, rdec = np.concatenate([r1, r2]), np.concatenate([d1, d2])
    rdec[5] = np.nan
    perm = rng.permutation(rra.size)
    left = pa.table({"id": np.arange(n), "ra": ra, "dec": dec, "mag": rng.uniform(14, 24, n)})
    right = pa.table({"id": np.arange(rra.size) + 10 ** 6, "ra": rra[perm], "dec": rdec[perm],
                      "flag": pa.array(rng.integers(0, 3, rra.size), pa.int32())})
    return left, right


def _frame(table):
    return table.to_pandas()


def _equal(ddf, local):
    got = ddf.compute().sort_index(kind="stable")
    want = _frame(local)
    assert np.array_equal(got.index.to_numpy(), np.asarray(local["id_left"]))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


@pytest.mark.parametrize("how", ["nearest", "all"])
def test_dask_equals_local_from_files(client, tmp_path, how):
    left, right = _catalogs()
    torchfits.write(str(tmp_path / "left.fits"), left)
    for k in range(3):
        torchfits.write(str(tmp_path / f"right{k}.fits"), right.slice(k * 3000, 3000))
    radius = 3 * ARCSEC
    lsrc, rsrc = str(tmp_path / "left.fits"), str(tmp_path / "right*.fits")
    local = torchfits.crossmatch(lsrc, rsrc, radius, how=how)
    assert local.num_rows > 3000
    ddf = tfd.crossmatch(lsrc, rsrc, radius, how=how, npartitions=5, fragment_rows=2500)
    assert list(ddf.columns) == local.column_names
    assert ddf.npartitions == 5
    _equal(ddf, local)


@pytest.mark.parametrize("npartitions", [1, 13])
def test_dask_equals_local_from_tables(client, npartitions):
    left, right = _catalogs(1)
    radius = 3 * ARCSEC
    local = torchfits.crossmatch(left, right, radius, columns=(["id"], ["id", "flag"]))
    ddf = tfd.crossmatch(left, right, radius, columns=(["id"], ["id", "flag"]), npartitions=npartitions,
                         fragment_rows=1000)
    _equal(ddf, local)


def test_dask_larger_radius_and_datasets(client, tmp_path):
    left, right = _catalogs(2, n=3000, radius=0.5)
    torchfits.write(str(tmp_path / "l.fits"), left)
    torchfits.write(str(tmp_path / "r.fits"), right)
    ds_l, ds_r = torchfits.dataset(str(tmp_path / "l.fits")), torchfits.dataset(str(tmp_path / "r.fits"))
    local = torchfits.crossmatch(ds_l, ds_r, 0.5, how="all")
    _equal(tfd.crossmatch(ds_l, ds_r, 0.5, how="all", npartitions=4, fragment_rows=800), local)


def test_dask_empty_and_errors(tmp_path):
    left, right = _catalogs(3, n=100)
    ddf = tfd.crossmatch(left.slice(0, 0), right, ARCSEC)
    assert len(ddf.compute(scheduler="sync")) == 0
    assert list(ddf.columns) == ["id_left", "ra_left", "dec_left", "mag", "id_right", "ra_right", "dec_right",
                                 "flag", "separation_deg"]
    with pytest.raises(ValueError, match="radius_deg"):
        tfd.crossmatch(left, right, 20.0)
    with pytest.raises(ValueError, match="fragment_rows"):
        tfd.crossmatch(left, right, ARCSEC, fragment_rows=0)
    torchfits.write(str(tmp_path / "l.fits"), left)
    with pytest.raises(ValueError, match="filter"):
        filtered = torchfits.dataset(str(tmp_path / "l.fits")).filter(pa.compute.field("id") > 3)
        tfd.crossmatch(filtered, right, ARCSEC)


def test_margin_depth():
    assert margin_depth(10.0) == 0
    assert margin_depth(ARCSEC) > margin_depth(60 * ARCSEC) > margin_depth(1.0)
    # a cell at that order is at least four radii across
    for r in (ARCSEC, 0.01, 1.0, 10.0):
        k = margin_depth(r)
        assert np.degrees(np.sqrt(4 * np.pi / (12 * 4 ** k))) >= 4 * r

"""torchfits.crossmatch: nearest and all-pairs matches within a radius.

Oracle: astropy's ``match_coordinates_sky`` plus the radius cut (nearest) and
``search_around_sky`` (all), on catalogs with near-duplicates, sources at the poles and across
RA 0/360, dense fields and pairs placed just inside and just outside the radius; the same
catalogs as files, datasets and Arrow tables.
"""
from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
u = pytest.importorskip("astropy.units")
coords = pytest.importorskip("astropy.coordinates")

import torchfits  # noqa: E402
from torchfits.errors import ColumnNotFoundError  # noqa: E402
from torchfits.query.sky import separation_deg  # noqa: E402

ARCSEC = 1.0 / 3600.0


def _offset(ra, dec, dist, angle):
    """Points ``dist`` degrees from (ra, dec) towards position angle ``angle`` (radians)."""
    ra0, dec0, d = np.radians(ra), np.radians(dec), np.radians(dist)
    sd = np.sin(dec0) * np.cos(d) + np.cos(dec0) * np.sin(d) * np.cos(angle)
    dec1 = np.arcsin(np.clip(sd, -1, 1))
    ra1 = ra0 + np.arctan2(np.sin(angle) * np.sin(d) * np.cos(dec0), np.cos(d) - np.sin(dec0) * sd)
    return np.degrees(ra1) % 360.0, np.degrees(dec1)


def make_catalogs(seed=0, n=4000, radius=2 * ARCSEC):
    """(left, right) Arrow tables: all-sky sources, poles, RA 0/360, near-duplicates, and right
    sources at distances from 0.1 to 3 radii of the left ones."""
    rng = np.random.default_rng(seed)
    ra = rng.uniform(0, 360, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    # a tenth at the poles, a tenth across RA 0/360
    k = n // 10
    near_pole = rng.uniform(0, 3e-3, k)
    dec[:k] = np.where(np.arange(k) % 2 == 0, 90 - near_pole, -90 + near_pole)
    ra[k:2 * k] = rng.uniform(-2e-3, 2e-3, k) % 360.0
    # near-duplicates on the left: pairs 0.3 radius apart
    a, b = slice(2 * k, 2 * k + k // 2), slice(2 * k + k // 2, 3 * k)
    ra[a], dec[a] = _offset(ra[b], dec[b], 0.3 * radius, rng.uniform(0, 2 * np.pi, k // 2))
    dist = rng.uniform(0.1, 3.0, n) * radius
    rra, rdec = _offset(ra, dec, dist, rng.uniform(0, 2 * np.pi, n))
    # a second, farther candidate for a third of the rows, and unrelated sources
    m = n // 3
    ra2, dec2 = _offset(ra[:m], dec[:m], dist[:m] * rng.uniform(1.0, 1.5, m), rng.uniform(0, 2 * np.pi, m))
    extra_ra, extra_dec = rng.uniform(0, 360, n // 4), np.degrees(np.arcsin(rng.uniform(-1, 1, n // 4)))
    rra = np.concatenate([rra, ra2, extra_ra])
    rdec = np.concatenate([rdec, dec2, extra_dec])
    perm = rng.permutation(rra.size)
    left = pa.table({"id": np.arange(n), "ra": ra, "dec": dec,
                     "mag": rng.uniform(14, 24, n).astype(np.float32)})
    right = pa.table({"id": np.arange(rra.size) + 10 ** 6, "ra": rra[perm], "dec": rdec[perm],
                      "flux": rng.uniform(0, 1, rra.size)})
    return left, right


def _sky(table):
    return coords.SkyCoord(table["ra"].to_numpy() * u.deg, table["dec"].to_numpy() * u.deg)


def _far_from_edge(sep, radius):
    # pairs whose separation is within rounding of the radius may fall either way in astropy
    # (chord test) and here (separation test); they are checked apart
    return np.abs(sep - radius) > 1e-12


def check_nearest(result, left, right, radius):
    idx, d2, _ = coords.match_coordinates_sky(_sky(left), _sky(right))
    sep = d2.deg
    want = np.flatnonzero(sep <= radius)
    got = result["id_left"].to_numpy()
    assert np.all(np.diff(got) > 0)  # left row order, one row each
    ok = _far_from_edge(sep, radius)
    assert np.array_equal(np.intersect1d(got, np.flatnonzero(ok)), np.intersect1d(want, np.flatnonzero(ok)))
    pos = np.searchsorted(got, want[ok[want]])
    assert np.array_equal(result["id_right"].to_numpy()[pos] - 10 ** 6, idx[want[ok[want]]])
    np.testing.assert_allclose(result["separation_deg"].to_numpy()[pos], sep[want[ok[want]]],
                               rtol=0, atol=1e-9)
    # every match holds Vincenty's separation within the radius
    r_ids = result["id_right"].to_numpy() - 10 ** 6
    exact = separation_deg(left["ra"].to_numpy()[got], left["dec"].to_numpy()[got],
                           right["ra"].to_numpy()[r_ids], right["dec"].to_numpy()[r_ids])
    np.testing.assert_allclose(result["separation_deg"].to_numpy(), exact, rtol=0, atol=1e-12)
    assert np.all(exact <= radius + 1e-12)


def check_all(result, left, right, radius):
    i1, i2, d2, _ = coords.search_around_sky(_sky(left), _sky(right), radius * u.deg)
    sep = d2.deg
    ok = _far_from_edge(sep, radius)
    want = sorted(zip(i1[ok].tolist(), i2[ok].tolist(), strict=True))
    gl, gr = result["id_left"].to_numpy(), result["id_right"].to_numpy() - 10 ** 6
    gs = result["separation_deg"].to_numpy()
    keep = _far_from_edge(gs, radius)
    assert sorted(zip(gl[keep].tolist(), gr[keep].tolist(), strict=True)) == want
    # ordered by left row, then separation, then right row
    assert np.all(np.lexsort((gr, gs, gl)) == np.arange(gl.size))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nearest_equals_astropy(seed):
    left, right = make_catalogs(seed)
    radius = 2 * ARCSEC
    result = torchfits.crossmatch(left, right, radius)
    assert result.num_rows > 1000
    check_nearest(result, left, right, radius)


@pytest.mark.parametrize("seed", [0, 1])
def test_all_equals_search_around_sky(seed):
    left, right = make_catalogs(seed)
    radius = 2 * ARCSEC
    result = torchfits.crossmatch(left, right, radius, how="all")
    check_all(result, left, right, radius)
    assert result.num_rows > torchfits.crossmatch(left, right, radius).num_rows


@pytest.mark.parametrize("radius", [0.05 * ARCSEC, 30 * ARCSEC, 0.5, 3.0])
def test_other_radii(radius):
    left, right = make_catalogs(3, n=1500, radius=radius)
    check_nearest(torchfits.crossmatch(left, right, radius), left, right, radius)
    if radius < 1:
        check_all(torchfits.crossmatch(left, right, radius, how="all"), left, right, radius)


def test_left_in_chunks(monkeypatch):
    import torchfits.sky.crossmatch as xmatch

    left, right = make_catalogs(8, n=3000)
    radius = 2 * ARCSEC
    for how in ("nearest", "all"):
        want = torchfits.crossmatch(left, right, radius, how=how)
        monkeypatch.setattr(xmatch, "_CHUNK_ROWS", 700)
        assert torchfits.crossmatch(left, right, radius, how=how).equals(want)
        monkeypatch.undo()


def test_dense_field():
    # 20,000 sources in a 0.1 degree field: the grid shrinks its cells below the all-sky size
    rng = np.random.default_rng(7)
    n = 20_000
    left = pa.table({"id": np.arange(n), "ra": rng.uniform(359.95, 360.05, n) % 360,
                     "dec": rng.uniform(-0.05, 0.05, n)})
    right = pa.table({"id": np.arange(n) + 10 ** 6, "ra": rng.uniform(359.95, 360.05, n) % 360,
                      "dec": rng.uniform(-0.05, 0.05, n)})
    radius = 2 * ARCSEC
    check_nearest(torchfits.crossmatch(left, right, radius), left, right, radius)
    check_all(torchfits.crossmatch(left, right, radius, how="all"), left, right, radius)


def test_boundary_and_ties():
    radius = 1 * ARCSEC
    ra0 = np.array([10.0, 123.0, 200.0, 359.9999999, 0.0, 33.0])
    dec0 = np.array([20.0, -45.0, 0.0, 10.0, -90.0, 89.99999])
    # just inside and just outside: position angles off the equator; along the meridian at the
    # poles, where arcsin near 1 would lose the digits
    pa_ = np.array([0.3, 4.0, 5.0, 1.5])
    in_ra, in_dec = _offset(ra0[:4], dec0[:4], radius * (1 - 1e-7), pa_)
    out_ra, out_dec = _offset(ra0[:4], dec0[:4], radius * (1 + 1e-7), pa_)
    inside_ra = np.concatenate([in_ra, [150.0, 33.0]])
    inside_dec = np.concatenate([in_dec, [-90 + radius * (1 - 1e-7), 89.99999 - radius * (1 - 1e-7)]])
    outside_ra = np.concatenate([out_ra, [150.0, 33.0]])
    outside_dec = np.concatenate([out_dec, [-90 + radius * (1 + 1e-7), 89.99999 - radius * (1 + 1e-7)]])
    left = pa.table({"ra": np.concatenate([ra0, ra0]), "dec": np.concatenate([dec0, dec0])})
    right = pa.table({"ra": np.concatenate([outside_ra, inside_ra]),
                      "dec": np.concatenate([outside_dec, inside_dec])})
    out = torchfits.crossmatch(left, right, radius, how="all", columns=([], []))
    assert out.column_names == ["separation_deg"]
    res = torchfits.crossmatch(left.append_column("i", pa.array(np.arange(12))),
                               right.append_column("j", pa.array(np.arange(12))), radius, how="all")
    # each left point matches only the inside point
    assert res["i"].to_pylist() == list(range(12))
    assert res["j"].to_pylist() == [6, 7, 8, 9, 10, 11] * 2
    # ties: identical right sources, the lowest right row wins
    right2 = pa.table({"ra": [10.0, 10.0, 10.0], "dec": [20.0 + 0.5 * ARCSEC] * 3, "j": [0, 1, 2]})
    res = torchfits.crossmatch(pa.table({"ra": [10.0], "dec": [20.0]}), right2, radius)
    assert res["j"].to_pylist() == [0]
    res = torchfits.crossmatch(pa.table({"ra": [10.0], "dec": [20.0]}), right2, radius, how="all")
    assert res["j"].to_pylist() == [0, 1, 2]


def test_nulls_nan_and_empty():
    left = pa.table({"ra": pa.array([10.0, None, np.nan, 10.0]), "dec": pa.array([20.0, 20.0, 20.0, np.nan])})
    right = pa.table({"ra": pa.array([10.0, np.nan, None]), "dec": pa.array([20.0, 20.0, 20.0])})
    res = torchfits.crossmatch(left, right, ARCSEC)
    assert res.num_rows == 1 and res["ra_left"].to_pylist() == [10.0]
    empty = left.slice(0, 0)
    for a, b in ((empty, right), (left, right.slice(0, 0)), (empty, empty)):
        res = torchfits.crossmatch(a, b, ARCSEC, how="all")
        assert res.num_rows == 0
        assert res.column_names == ["ra_left", "dec_left", "ra_right", "dec_right", "separation_deg"]
        assert res.schema.field("separation_deg").type == pa.float64()


def test_sources_files_datasets_and_tables(tmp_path):
    left, right = make_catalogs(4, n=2000)
    radius = 2 * ARCSEC
    want = torchfits.crossmatch(left, right, radius)
    lp = tmp_path / "left.fits"
    torchfits.write(str(lp), left)
    # the right catalog in three files
    parts = []
    for k, (a, b) in enumerate([(0, 1000), (1000, 2000), (2000, right.num_rows)]):
        parts.append(tmp_path / f"right{k}.fits")
        torchfits.write(str(parts[-1]), right.slice(a, b - a))
    for lsrc, rsrc in [(str(lp), str(tmp_path / "right*.fits")), (lp, [str(p) for p in parts]),
                       (torchfits.dataset(str(lp)), torchfits.dataset([str(p) for p in parts])),
                       (left.to_batches()[0] if left.to_batches() else left, right)]:
        got = torchfits.crossmatch(lsrc, rsrc, radius)
        assert got.equals(want), (type(lsrc), type(rsrc))


def test_columns_suffixes_and_names():
    left, right = make_catalogs(5, n=500)
    res = torchfits.crossmatch(left, right, 2 * ARCSEC, columns=(["id", "mag"], ["ID", "flux"]))
    assert res.column_names == ["id_left", "mag", "id_right", "flux", "separation_deg"]
    res = torchfits.crossmatch(left, right, 2 * ARCSEC, columns=(["mag"], None), suffixes=("_a", "_b"))
    assert res.column_names == ["mag", "id", "ra", "dec", "flux", "separation_deg"]
    res = torchfits.crossmatch(left.rename_columns(["id", "RA", "DE", "mag"]), right, 2 * ARCSEC,
                               ra=("RA", "ra"), dec=("DE", "dec"), columns=(["id"], ["id"]),
                               suffixes=("", "_2"))
    assert res.column_names == ["id", "id_2", "separation_deg"]
    with pytest.raises(ValueError, match="repeat the column names"):
        torchfits.crossmatch(left.rename_columns(["id", "ra", "dec", "separation_deg"]), right, ARCSEC)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"radius_deg": 0}, ValueError, "radius_deg"),
    ({"radius_deg": -1}, ValueError, "radius_deg"),
    ({"radius_deg": float("nan")}, ValueError, "radius_deg"),
    ({"radius_deg": 10.5}, ValueError, "at most 10"),
    ({"radius_deg": "x"}, TypeError, "radius_deg"),
    ({"how": "best"}, ValueError, "how"),
    ({"columns": ["id"]}, TypeError, "pair"),
    ({"columns": (["id"], "mag")}, TypeError, "right"),
    ({"ra": ("ra",)}, TypeError, "ra"),
    ({"suffixes": ("_x", "_x")}, ValueError, "suffixes"),
    ({"columns": (["nope"], None)}, ColumnNotFoundError, "nope"),
    ({"dec": "nope"}, ColumnNotFoundError, "nope"),
])
def test_argument_errors(kwargs, error, match):
    left, right = make_catalogs(6, n=100)
    args = {"radius_deg": ARCSEC, **kwargs}
    with pytest.raises(error, match=match):
        torchfits.crossmatch(left, right, **args)


def test_refusals():
    left = pa.table({"ra": [1.0], "dec": [95.0]})
    with pytest.raises(ValueError, match=r"\[-90, 90\]"):
        torchfits.crossmatch(left, left, ARCSEC)
    with pytest.raises(TypeError, match="left catalog"):
        torchfits.crossmatch({"ra": [1.0]}, left, ARCSEC)

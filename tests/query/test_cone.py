"""cone() and separation() in the where dialect: parsing, and rows equal to astropy's
``SkyCoord.separation`` (the oracle) through the pyarrow translation and the table scan."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest

from torchfits.errors import WhereSyntaxError
from torchfits.query import expr as E
from torchfits.query.sky import separation_deg

astropy_coords = pytest.importorskip("astropy.coordinates")
units = pytest.importorskip("astropy.units")


def _oracle(ra: np.ndarray, dec: np.ndarray, ra0: float, dec0: float, r: float) -> np.ndarray:
    """Row numbers astropy puts within ``r`` degrees (boundary included; NaN never)."""
    deg = units.deg
    sep = astropy_coords.SkyCoord(ra * deg, dec * deg).separation(
        astropy_coords.SkyCoord(ra0 * deg, dec0 * deg)).deg
    return np.flatnonzero(sep <= r)


def _sky(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ra = rng.uniform(0.0, 360.0, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    return ra, dec


# -- parsing ------------------------------------------------------------------------------------


def test_cone_parses_to_the_node() -> None:
    tree = E.parse("cone(RA, `DEC`, -10, 20.5, 0.25)")
    assert tree == E.Cone(E.Column("RA"), E.Column("DEC"), 350.0, 20.5, 0.25)
    assert E.parse(E.to_string(tree)) == tree


@pytest.mark.parametrize("text", [
    "separation(RA, DEC, 10, 20) <= 0.5",
    "0.5 >= separation(RA, DEC, 10, 20)",
])
def test_separation_at_most_is_a_cone(text: str) -> None:
    assert E.parse(text) == E.Cone(E.Column("RA"), E.Column("DEC"), 10.0, 20.0, 0.5)


def test_separation_below_excludes_the_boundary() -> None:
    tree = E.parse("separation(RA, DEC, 10, 20) < 0.5")
    assert isinstance(tree, E.Cone)
    assert tree.radius == math.nextafter(0.5, 0.0)
    assert E.parse("0.5 > separation(RA, DEC, 10, 20)") == tree
    assert E.parse(E.to_string(tree)) == tree


@pytest.mark.parametrize(("text", "message"), [
    ("cone(RA, DEC, 1, 2)", "cone() takes 5 arguments, got 4"),
    ("cone(RA, DEC, 1, 95, 1)", "declination 95.0 is outside"),
    ("cone(RA, DEC, 1, 2, -1)", "radius -1.0 is negative"),
    ("cone(1, DEC, 1, 2, 3)", "cone() needs a column for its RA"),
    ("cone(RA, DEC + 1, 1, 2, 3)", "cone() needs a column for its declination"),
    ("cone(RA, DEC, 'a', 2, 3)", "cone() needs a number for its centre RA"),
    ("cone(RA, DEC, 1 + 2, 2, 3)", "cone() needs a number for its centre RA"),
    ("separation(RA, DEC, 1, 2)", "separation() must be compared with a radius"),
    ("separation(RA, DEC, 1, 2) + 1 < 3", "separation() must be compared with a radius"),
    ("separation(RA, DEC, 1, 2) > 3", "NOT cone("),
    ("separation(RA, DEC, 1, 2) < 0", "selects nothing"),
    ("separation(RA, DEC, 1, 91) < 1", "declination 91.0 is outside"),
])
def test_bad_calls_name_the_function(text: str, message: str) -> None:
    with pytest.raises(WhereSyntaxError, match="where .*" + re.escape(message)):
        E.parse(text)


# -- the pyarrow translation --------------------------------------------------------------------

_CONES = [
    (10.0, 20.0, 5.0), (359.9, 0.0, 3.0), (0.05, -30.0, 1.0), (0.0, 89.5, 2.0),
    (180.0, -90.0, 10.0), (123.0, 45.0, 0.0), (200.0, 10.0, 120.0),
]


@pytest.mark.parametrize(("ra0", "dec0", "r"), _CONES)
def test_arrow_filter_equals_astropy(ra0: float, dec0: float, r: float) -> None:
    ra, dec = _sky(50_000)
    ra[:3] = ra0  # the centre itself, even for r == 0
    dec[:3] = dec0
    table = pa.table({"RA": ra, "DEC": dec})
    got = _arrow_rows(table, f"cone(RA, DEC, {ra0}, {dec0}, {r})")
    np.testing.assert_array_equal(got, _oracle(ra, dec, ra0, dec0, r))


def _arrow_rows(table: pa.Table, text: str) -> np.ndarray:
    ids = pa.table({**{c: table[c] for c in table.column_names}, "_i": np.arange(table.num_rows)})
    kept = ids.filter(E.to_pyarrow(E.parse(text), ids.schema))
    return np.asarray(kept["_i"])


def test_nan_is_false_and_null_unknown() -> None:
    table = pa.table({
        "RA": pa.array([10.0, float("nan"), None, 10.0, 10.0], pa.float64()),
        "DEC": pa.array([20.0, 20.0, 20.0, None, 80.0], pa.float32()),
    })
    assert list(_arrow_rows(table, "cone(RA, DEC, 10, 20, 1)")) == [0]
    # NOT: NaN rows are outside, null rows stay unknown (dropped) even when DEC is far away
    assert list(_arrow_rows(table, "NOT cone(RA, DEC, 10, 20, 1)")) == [1, 4]
    table = table.set_column(0, "RA", pa.array([None, 1.0, 1.0, 1.0, None], pa.float64()))
    assert list(_arrow_rows(table, "NOT cone(RA, DEC, 10, 20, 1)")) == [1, 2]


def test_boundary_matches_vincenty() -> None:
    ra0, dec0, r = 33.0, -41.0, 0.75
    rng = np.random.default_rng(3)
    pa_ = rng.uniform(0.0, 2 * math.pi, 400)
    # points at the boundary and 1e-10 deg either side of it, by bisection on our separation
    pts = []
    for angle in pa_:
        for offset in (-1e-10, 0.0, 1e-10):
            d = r + offset
            lat0, lon0 = math.radians(dec0), math.radians(ra0)
            lat = math.asin(math.sin(lat0) * math.cos(math.radians(d))
                            + math.cos(lat0) * math.sin(math.radians(d)) * math.cos(angle))
            lon = lon0 + math.atan2(math.sin(angle) * math.sin(math.radians(d)) * math.cos(lat0),
                                    math.cos(math.radians(d)) - math.sin(lat0) * math.sin(lat))
            pts.append((math.degrees(lon) % 360.0, math.degrees(lat)))
    ra, dec = (np.array(c) for c in zip(*pts))
    table = pa.table({"RA": ra, "DEC": dec})
    got = _arrow_rows(table, f"cone(RA, DEC, {ra0}, {dec0}, {r})")
    want = _oracle(ra, dec, ra0, dec0, r)
    mine = np.flatnonzero(separation_deg(ra, dec, ra0, dec0) <= r)
    # astropy and our Vincenty agree to rounding: any row they differ on is within 1e-9 deg
    sep = separation_deg(ra, dec, ra0, dec0)
    for rows in (np.setxor1d(got, want), np.setxor1d(got, mine)):
        assert np.all(np.abs(sep[rows] - r) < 1e-9)
    outside = np.abs(sep - r) > 1e-9
    np.testing.assert_array_equal(np.intersect1d(got, np.flatnonzero(outside)),
                                  np.intersect1d(want, np.flatnonzero(outside)))


def test_ra_outside_0_360() -> None:
    ra, dec = _sky(20_000, seed=5)
    shifted = np.where(ra > 180.0, ra - 360.0, ra)  # -180..180
    table = pa.table({"RA": shifted, "DEC": dec})
    for ra0 in (0.0, 359.5, 180.0, 181.0):
        got = _arrow_rows(table, f"cone(RA, DEC, {ra0}, 10, 4)")
        np.testing.assert_array_equal(got, _oracle(ra, dec, ra0, 10.0, 4.0))


def test_cone_needs_numeric_columns() -> None:
    with pytest.raises(ValueError, match="cone.. needs a numeric RA column"):
        E.validate(E.parse("cone(NAME, DEC, 1, 2, 3)"), {"NAME": pa.string(), "DEC": pa.float64()})


# -- scan ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["D", "E"])
def test_scan_where_cone_equals_astropy(tmp_path, code: str) -> None:
    from astropy.io import fits

    import torchfits

    ra, dec = _sky(30_000, seed=7)
    dec[:4] = np.nan
    cols = [fits.Column("RA", code, array=ra), fits.Column("DEC", code, array=dec),
            fits.Column("ID", "K", array=np.arange(len(ra)))]
    path = tmp_path / "sky.fits"
    fits.BinTableHDU.from_columns(cols).writeto(path)
    dtype = np.float64 if code == "D" else np.float32
    ra_s, dec_s = ra.astype(dtype).astype(np.float64), dec.astype(dtype).astype(np.float64)
    for ra0, dec0, r in _CONES:
        got = torchfits.scan(str(path), where=f"cone(RA, DEC, {ra0}, {dec0}, {r})").to_arrow()
        np.testing.assert_array_equal(np.sort(np.asarray(got["ID"])),
                                      _oracle(ra_s, dec_s, ra0, dec0, r))

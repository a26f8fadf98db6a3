"""cone() on every route that takes a filter, against astropy's ``SkyCoord.separation``: the
kernel box (float64, float32, scaled and nullable columns, RA in -180..180), the statistics
sidecar, the 1.x reads, the torch dataset, Dask, DuckDB and Polars."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

import torchfits
from _tablehelpers import write_astropy
from torchfits.query import expr as E
from torchfits.query.pushdown import plan_pushdown

fits = pytest.importorskip("astropy.io.fits")
coords = pytest.importorskip("astropy.coordinates")
units = pytest.importorskip("astropy.units")

N = 6000  # rows per file
FILES = 3
# (ra0, dec0, radius): ordinary, across RA 0/360, touching a pole, the pole itself, wide, tiny
CONES = [(150.0, 20.0, 4.0), (359.5, -10.0, 3.0), (0.2, 40.0, 2.5), (80.0, 88.5, 2.0),
         (0.0, -90.0, 6.0), (200.0, 0.0, 95.0), (10.0, 10.0, 0.0)]


def _oracle(ra: np.ndarray, dec: np.ndarray, ra0: float, dec0: float, r: float) -> np.ndarray:
    deg = units.deg
    with np.errstate(invalid="ignore"):
        sep = coords.SkyCoord(ra * deg, dec * deg).separation(
            coords.SkyCoord(ra0 * deg, dec0 * deg)).deg
        return np.flatnonzero(sep <= r)


def _positions(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ra = rng.uniform(0.0, 360.0, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    for k, (ra0, dec0, _) in enumerate(CONES):  # each centre itself, and the poles
        ra[k], dec[k] = ra0, dec0
    dec[len(CONES)], dec[len(CONES) + 1] = 90.0, -90.0
    return ra, dec


@pytest.fixture(scope="module")
def sky(tmp_path_factory):
    """``(directory, ra, dec, id)``: FILES files sorted by declination (so the sidecar has
    chunks to skip), float64 RA/DEC with NaN rows, ids 0..; the arrays hold every file's rows."""
    root = tmp_path_factory.mktemp("sky")
    ra, dec = _positions(N * FILES, 11)
    ra[100:103] = np.nan
    dec[200:202] = np.nan
    order = np.argsort(np.nan_to_num(dec, nan=0.0), kind="stable")
    ra, dec = ra[order], dec[order]
    ids = np.arange(len(ra))
    for f in range(FILES):
        part = slice(f * N, (f + 1) * N)
        cols = [fits.Column("ID", "K", array=ids[part]), fits.Column("RA", "D", array=ra[part]),
                fits.Column("DEC", "D", array=dec[part]),
                fits.Column("MAG", "E", array=(ids[part] % 25).astype(np.float32))]
        fits.BinTableHDU.from_columns(cols).writeto(root / f"part{f}.fits")
    return str(root), ra, dec, ids


def _where(cone: tuple[float, float, float]) -> str:
    return "cone(RA, DEC, {}, {}, {})".format(*cone)


def _ids(table) -> list[int]:
    return sorted(np.asarray(table["ID"]).tolist())


@pytest.mark.parametrize("cone", CONES)
def test_scan_and_dataset(sky, cone) -> None:
    root, ra, dec, ids = sky
    want = sorted(ids[_oracle(ra, dec, *cone)].tolist())
    scanner = torchfits.scan(root, columns=["ID"], where=_where(cone))
    assert scanner._kernel  # the box runs in the kernel
    assert _ids(scanner.to_arrow()) == want
    ds = torchfits.dataset(root)
    assert _ids(ds.to_table(columns=["ID"], filter=_where(cone))) == want
    assert _ids(ds.scanner(columns=["ID"], filter=_where(cone)).to_table()) == want
    # under OR / NOT the whole test runs in pyarrow
    outside = torchfits.scan(root, columns=["ID"], where="NOT " + _where(cone)).to_arrow()
    nan_rows = ids[np.isnan(ra) | np.isnan(dec)].tolist()
    assert sorted(set(_ids(outside)) - set(nan_rows)) == sorted(set(ids.tolist()) - set(want)
                                                               - set(nan_rows))
    assert set(nan_rows) <= set(_ids(outside))  # NaN is outside every cone
    both = torchfits.scan(root, columns=["ID"], where=_where(cone) + " OR MAG < 1").to_arrow()
    assert _ids(both) == sorted(set(want) | set(ids[ids % 25 == 0].tolist()))
    # beside a residual pyarrow evaluates (arithmetic): the cone in NumPy, then the rest
    faint = torchfits.scan(root, columns=["ID"], where=_where(cone) + " AND MAG + 1 >= 6").to_arrow()
    assert _ids(faint) == sorted(set(want) & set(ids[ids % 25 >= 5].tolist()))


def test_sidecar_skips_files_and_chunks(sky, tmp_path, decodes) -> None:
    from torchfits.tables.stats_index import build_index

    root, ra, dec, ids = sky
    sidecar = build_index(root, output=str(tmp_path / "index.json"), chunk_rows=1000)
    ds = torchfits.dataset(root, index=sidecar)
    for cone in CONES:
        decodes.clear()
        got = ds.to_table(columns=["ID"], filter=_where(cone))
        assert _ids(got) == sorted(ids[_oracle(ra, dec, *cone)].tolist())
    decodes.clear()
    ds.to_table(columns=["ID"], filter=_where((150.0, 20.0, 0.5)))
    # sorted by declination: only the chunk(s) around dec 20 are read
    assert sum(d.planned for d in decodes) <= 2 * 1000 * 2


def test_may_match_uses_band_and_windows() -> None:
    from torchfits.tables.stats_index import ColumnStats, may_match

    tree = E.parse("cone(RA, DEC, 10, 20, 1)")

    def stats(ra, dec, nulls=0):
        return {"RA": ColumnStats(*ra, nulls), "DEC": ColumnStats(*dec, nulls)}

    assert may_match(tree, stats((0.0, 360.0), (19.5, 30.0)), 10)
    assert not may_match(tree, stats((0.0, 360.0), (21.5, 30.0)), 10)
    assert not may_match(tree, stats((20.0, 40.0), (0.0, 30.0)), 10)
    assert may_match(tree, stats((-180.0, 180.0), (0.0, 30.0)), 10)  # RA not in [0, 360]
    assert not may_match(tree, stats((0.0, 360.0), (0.0, 30.0), nulls=10), 10)
    wrap = E.parse("cone(RA, DEC, 359.5, 0, 1)")
    assert may_match(wrap, stats((0.0, 0.3), (-1.0, 1.0)), 10)
    assert not may_match(wrap, stats((1.0, 300.0), (-1.0, 1.0)), 10)
    assert may_match(E.parse("NOT cone(RA, DEC, 10, 20, 1)"), stats((0.0, 360.0), (21.5, 30.0)), 10)


@pytest.mark.parametrize("cone", CONES)
def test_kernel_column_kinds(tmp_path, cone) -> None:
    """float32, scaled integers with TNULL, integers, RA in -180..180: the kernel box and the
    exact test agree with astropy on the values the decoder produces."""
    ra, dec = _positions(20_000, 5)
    n = len(ra)
    ra_pm = np.where(ra > 180.0, ra - 360.0, ra)
    ra_j = np.round((ra_pm - 10.0) / 1e-6).astype(np.int32)  # stored; RAJ = stored * 1e-6 + 10
    dec_j = np.round(dec / 1e-6).astype(np.int32)
    ra_j[5:7] = -(2**31)  # TNULL
    cols = [fits.Column("ID", "K", array=np.arange(n)),
            fits.Column("RA32", "E", array=ra.astype(np.float32)),
            fits.Column("DEC32", "E", array=dec.astype(np.float32)),
            fits.Column("RAPM", "D", array=ra_pm), fits.Column("DEC", "D", array=dec),
            fits.Column("RAJ", "J", array=ra_j), fits.Column("DECJ", "J", array=dec_j),
            fits.Column("RAI", "I", array=np.round(ra_pm).astype(np.int16)),
            fits.Column("DECI", "I", array=np.round(dec).astype(np.int16))]
    path = write_astropy(tmp_path / "kinds.fits", cols, extra={
        "TSCAL6": 1e-6, "TZERO6": 10.0, "TNULL6": -(2**31), "TSCAL7": 1e-6})
    table = torchfits.scan(path).to_arrow()
    for ra_col, dec_col in (("RA32", "DEC32"), ("RAPM", "DEC"), ("RAJ", "DECJ"), ("RAI", "DECI")):
        r = np.asarray(table[ra_col].to_numpy(zero_copy_only=False), np.float64)
        d = np.asarray(table[dec_col].to_numpy(zero_copy_only=False), np.float64)
        valid = ~(np.asarray(table[ra_col].is_null()) | np.asarray(table[dec_col].is_null()))
        want = [i for i in _oracle(np.where(valid, r, 0), d, *cone) if valid[i]]
        where = f"cone({ra_col}, {dec_col}, {cone[0]}, {cone[1]}, {cone[2]})"
        scanner = torchfits.scan(path, columns=["ID"], where=where)
        assert scanner._kernel, ra_col
        assert _ids(scanner.to_arrow()) == want, ra_col
        # the three-valued program path (the box beside an OR term) agrees
        other = torchfits.scan(path, columns=["ID"], where=where + " AND (ID < 10000 OR ID >= 10000)")
        assert _ids(other.to_arrow()) == want, ra_col


def test_plan_keeps_the_exact_test_as_residual(sky) -> None:
    root = sky[0]
    scanner = torchfits.scan(os.path.join(root, "part0.fits"))
    src = scanner.sources[0]
    types = {f.name: f.type for f in scanner.schema}
    tree = E.parse("cone(RA, DEC, 1, 2, 3) AND MAG < 4")
    plans, residual = plan_pushdown(tree, src.specs, types, mapping="native", apply_nulls=True)
    assert len(plans) == 2 and residual == E.parse("cone(RA, DEC, 1, 2, 3)")
    plans, residual = plan_pushdown(E.parse("cone(RA, DEC, 1, 2, 3) OR MAG < 4"), src.specs, types,
                                    mapping="native", apply_nulls=True)
    assert plans == [] and isinstance(residual, E.Or)


def test_compat_reads(sky) -> None:
    root, ra, dec, ids = sky
    path = os.path.join(root, "part1.fits")
    part = slice(N, 2 * N)
    for cone in CONES[:4]:
        want = sorted(ids[part][_oracle(ra[part], dec[part], *cone)].tolist())
        got = torchfits.table.read(path, 1, columns=["ID"], where=_where(cone))
        assert _ids(got) == want
        sep = f"separation(RA, DEC, {cone[0]}, {cone[1]}) <= {cone[2]}"
        assert _ids(torchfits.table.read(path, 1, columns=["ID"], where=sep)) == want
    pytest.importorskip("torch")
    cone = CONES[0]
    want = sorted(ids[part][_oracle(ra[part], dec[part], *cone)].tolist())
    from torchfits.data.tables import FitsTableDataset

    rows = FitsTableDataset(path, 1, columns=["ID"], where=_where(cone))
    assert sorted(int(rows[i][0]["ID"]) for i in range(len(rows))) == want


def test_compat_evaluator(sky) -> None:
    from torchfits.where import evaluate_where, parse_where_expression

    _, ra, dec, _ = sky
    ast = parse_where_expression("cone(RA, DEC, 359.5, -10, 3) AND NOT RA IS NULL")
    got = np.flatnonzero(evaluate_where(ast, {"RA": ra, "DEC": dec}))
    np.testing.assert_array_equal(got, _oracle(ra, dec, 359.5, -10.0, 3.0))


def test_dask(sky) -> None:
    pytest.importorskip("dask.dataframe")
    import torchfits.dask as tdask

    root, ra, dec, ids = sky
    cone = CONES[1]
    frame = tdask.read_table(root, columns=["ID"], where=_where(cone)).compute()
    assert sorted(frame["ID"].tolist()) == sorted(ids[_oracle(ra, dec, *cone)].tolist())


def test_duckdb(sky) -> None:
    duckdb = pytest.importorskip("duckdb")
    root, ra, dec, ids = sky
    for cone in CONES:
        rows = torchfits.sql(f"SELECT ID FROM '{root}/*.fits' WHERE cone(RA, DEC, {cone[0]}, "
                             f"{cone[1]}, {cone[2]})").fetchall()
        want = ids[_oracle(ra, dec, *cone)]
        assert sorted(r[0] for r in rows) == sorted(want.tolist())
    sep = torchfits.sql(f"SELECT separation(RA, DEC, 10, 20) AS s FROM '{root}/*.fits' "
                        "WHERE ID = 7").fetchall()[0][0]
    deg = units.deg
    expected = coords.SkyCoord(ra[7] * deg, dec[7] * deg).separation(
        coords.SkyCoord(10 * deg, 20 * deg)).deg
    assert abs(sep - expected) < 1e-9
    # a connection's own macro of that name is kept
    con = duckdb.connect()
    con.execute("CREATE TEMP MACRO cone(a, b, c, d, e) AS a < 0")
    rows = torchfits.sql(f"SELECT count(*) FROM '{root}/*.fits' WHERE cone(RA, DEC, 1, 2, 3)",
                         con=con).fetchall()
    assert rows == [(0,)]


def test_polars(sky) -> None:
    pytest.importorskip("polars")
    root, ra, dec, ids = sky
    for cone in CONES:
        frame = torchfits.scan_polars(root).filter(torchfits.polars_cone("RA", "DEC", *cone))
        got = sorted(frame.select("ID").collect()["ID"].to_list())
        assert got == sorted(ids[_oracle(ra, dec, *cone)].tolist())
    with pytest.raises(ValueError, match="declination"):
        torchfits.polars_cone("RA", "DEC", 0, 91, 1)


def test_bad_cone_is_a_value_error(sky) -> None:
    root = sky[0]
    with pytest.raises(ValueError, match="cone"):
        torchfits.scan(root, where="cone(RA, DEC, 0, 91, 1)")
    with pytest.raises(ValueError, match="cone"):
        torchfits.table.read(os.path.join(root, "part0.fits"), 1, where="cone(RA, DEC, 0, 0, -1)")
    empty = torchfits.scan(root, columns=["ID"], where="cone(RA, DEC, 0, 0, 0)").to_arrow()
    assert empty.num_rows == 0 and isinstance(empty, pa.Table)

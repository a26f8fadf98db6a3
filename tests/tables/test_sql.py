"""DuckDB over torchfits datasets: ``con.sql("... FROM ds")`` and `torchfits.sql`, checked
against DuckDB over the same rows as Parquet."""
from __future__ import annotations

import os

import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("astropy")


from torchfits.tables.dataset import dataset  # noqa: E402
from torchfits.tables.sql import sql  # noqa: E402

QUERIES = [
    "SELECT count(*) FROM {t}",
    "SELECT count(*), avg(mag) FROM {t} WHERE mag < 16 AND ra BETWEEN 10 AND 100",
    "SELECT id, name FROM {t} WHERE flags IN (1, 3, 5) AND name = 'beta'",
    "SELECT id FROM {t} WHERE flags IS NULL",
    "SELECT id FROM {t} WHERE flags IS NOT NULL AND cnt >= 0 AND cnt < 10",
    "SELECT name, count(*), min(ra), max(mag), sum(cnt) FROM {t} GROUP BY name",
    "SELECT id FROM {t} WHERE star AND mag > 19.5",
    "SELECT id FROM {t} WHERE name > 'eps' OR cnt = -3",
    "SELECT id FROM {t} WHERE flags != 2 AND id % 7 = 0",
    "SELECT id FROM {t} WHERE name LIKE 'ga%' AND ra > 200",
    "SELECT id, mag FROM {t} WHERE mag + cnt > 300",
    "SELECT id FROM {t} WHERE NOT (cnt < 0) AND flags = 4",
    "SELECT count(*) FROM {t} WHERE ra > 1000",
    "SELECT max(id) FROM {t} WHERE id BETWEEN 100 AND 5000",
]


@pytest.mark.parametrize("query", QUERIES)
def test_dataset_in_duckdb_matches_parquet(catalog, query):
    fdir, pdir = catalog
    con = duckdb.connect()
    ds = dataset(fdir)  # noqa: F841 - DuckDB finds it by name
    got = sorted(con.sql(query.format(t="ds")).fetchall())
    want = sorted(con.sql(query.format(t=f"read_parquet('{pdir}/*.parquet')")).fetchall())
    assert len(got) == len(want)
    for g, w in zip(got, want):  # float sums may differ in the last bits with batch boundaries
        assert [pytest.approx(x) if isinstance(x, float) else x for x in w] == list(g)


def test_duckdb_pushes_projection_and_filter(catalog, decodes):
    fdir, _ = catalog
    ds = dataset(fdir)  # noqa: F841
    con = duckdb.connect()
    (n,) = con.sql("SELECT count(name) FROM ds WHERE cnt = 7").fetchall()[0]
    assert {c for d in decodes for c in d.columns} <= {"name", "cnt"}
    assert sum(d.rows for d in decodes if "name" in d.columns) == n  # only matching rows decoded


def test_sql_function_paths_globs_hdus_and_joins(catalog, tmp_path):
    fdir, pdir = catalog
    one = os.path.join(fdir, "cat_0.fits")
    assert sql(f"SELECT count(*) FROM '{one}'").fetchall()[0] == (3000,)
    assert sql(f"SELECT count(*) FROM '{fdir}/*.fits' WHERE flags IS NULL").fetchall()[0] == \
        duckdb.sql(f"SELECT count(*) FROM '{pdir}/*.parquet' WHERE flags IS NULL").fetchall()[0]
    assert sql(f"SELECT count(*) FROM fits('{one}', hdu='CATALOG')").fetchall()[0] == (3000,)
    q = (f"SELECT f.id, p.mag FROM fits('{fdir}/*.fits', hdu=1) AS f "
         f"JOIN '{pdir}/cat_2.parquet' AS p ON f.id = p.id WHERE f.cnt > 400 ORDER BY f.id")
    got = sql(q).fetchall()
    want = duckdb.sql(q.replace(f"fits('{fdir}/*.fits', hdu=1)", f"'{pdir}/*.parquet'")).fetchall()
    assert got == want and got
    rel = sql(f"SELECT filename, count(*) AS n FROM fits('{fdir}/*.fits', add_path_column=true) "
              "GROUP BY filename ORDER BY filename")
    assert [r[1] for r in rel.fetchall()] == [3000] * 4
    con = duckdb.connect()
    sql(f"SELECT * FROM '{one}'", con=con).create_view("cat")
    assert con.sql("SELECT count(*) FROM cat -- 'x.fits' in a comment").fetchall()[0] == (3000,)
    assert sql("SELECT 'not_a_table.fits' AS s").fetchall()[0] == ("not_a_table.fits",)
    two = os.path.join(fdir, "cat_1.fits")
    assert sql(f"SELECT count(*) FROM '{one}' a, '{two}' b WHERE a.id + 3000 = b.id").fetchall()[0] == (3000,)
    assert sql(f"SELECT count(*), 'x.fits' FROM (SELECT * FROM '{one}') t, fits('{two}') u "
               "WHERE t.id + 3000 = u.id").fetchall()[0] == (3000, "x.fits")


def test_sql_errors(catalog):
    fdir, _ = catalog
    with pytest.raises(ValueError, match="fits"):
        sql(f"SELECT * FROM fits('{fdir}/cat_0.fits', bogus=1)")
    with pytest.raises(FileNotFoundError):
        sql("SELECT * FROM 'missing_*.fits'")

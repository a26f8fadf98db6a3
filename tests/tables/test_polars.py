"""Polars over FITS: ``pl.scan_pyarrow_dataset(torchfits.dataset(...))`` and the native IO
plugin `scan_polars`, checked against Polars over the same rows as Parquet."""
from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("astropy")


from torchfits.tables.dataset import dataset  # noqa: E402
from torchfits.tables.polars_source import scan_polars  # noqa: E402

QUERIES = [
    lambda lf: lf.filter(pl.col("mag") < 16).select("id", "mag"),
    lambda lf: lf.filter(pl.col("flags").is_in([1, 3]) & (pl.col("name") == "beta")).select("id"),
    lambda lf: lf.filter(pl.col("flags").is_null()).select("id"),
    lambda lf: lf.filter(pl.col("ra").is_between(50, 100) | pl.col("star")).select("id", "star"),
    lambda lf: lf.filter(pl.col("name").str.starts_with("ga") & (pl.col("cnt") > 0)).select("id", "name"),
    lambda lf: lf.filter((pl.col("mag") + pl.col("cnt")) > 300).select("id"),
    lambda lf: lf.group_by("name").agg(pl.len(), pl.col("mag").mean(), pl.col("flags").sum()),
    lambda lf: lf.select(pl.len()),
    lambda lf: lf.filter(pl.col("cnt") != 3).select(pl.col("id").max()),
]


@pytest.mark.parametrize("k", range(len(QUERIES)))
@pytest.mark.parametrize("how", ["pyarrow_dataset", "io_plugin"])
def test_matches_parquet(catalog, k, how):
    fdir, pdir = catalog
    lf = pl.scan_pyarrow_dataset(dataset(fdir)) if how == "pyarrow_dataset" else scan_polars(fdir)
    got = QUERIES[k](lf).collect()
    want = QUERIES[k](pl.scan_parquet(f"{pdir}/*.parquet")).collect()
    assert got.sort(got.columns).equals(want.sort(want.columns)), (got, want)


def test_io_plugin_pushes_projection_predicate_and_n_rows(catalog, decodes):
    fdir, _ = catalog
    lf = scan_polars(fdir)
    got = lf.filter(pl.col("cnt") == 7).select("name").collect()
    assert {c for d in decodes for c in d.columns} <= {"name", "cnt"}
    assert sum(d.rows for d in decodes if "name" in d.columns) == got.height
    decodes.clear()
    assert lf.select("id").head(5).collect()["id"].to_list() == [0, 1, 2, 3, 4]
    assert sum(d.rows for d in decodes) < 12000  # stopped early


def test_path_columns(catalog):
    fdir, _ = catalog
    lf = scan_polars(fdir, add_path_column=True)
    out = lf.group_by("filename").agg(pl.len()).collect()
    assert sorted(out["len"].to_list()) == [3000] * 4


# -- NaN, null and infinities: each engine's own answer ----------------------------------------
_SPECIAL = [1.0, float("nan"), 25.0, float("inf"), float("-inf"), 21.0, float("nan"), -0.0, 0.0, 21.5]


@pytest.fixture(scope="module")
def specials(tmp_path_factory):
    import numpy as np
    import pyarrow as pa

    import torchfits

    path = str(tmp_path_factory.mktemp("nan") / "nan.fits")
    n = len(_SPECIAL)
    j = [None if k in (2, 5) else k * 7 - 20 for k in range(n)]  # nulls → a TNULL sentinel
    torchfits.write(path, pa.table({"i": np.arange(n), "e": np.array(_SPECIAL, np.float32),
                                    "d": np.array(_SPECIAL, np.float64),
                                    "j": pa.array(j, pa.int32())}), overwrite=True)
    assert torchfits.scan(path).to_arrow()["j"].null_count == 2
    return path


def _specials_in_memory(path):
    import torchfits

    return torchfits.scan(path).to_arrow()


_OPS = ["gt", "ge", "lt", "le", "eq", "ne", "not_gt", "between", "is_in", "eq_nan", "ge_inf",
        "le_-inf", "gt_or_j", "and_j"]


def _polars_expr(op, col):
    c = pl.col(col)
    return {"gt": c > 21, "ge": c >= 21, "lt": c < 21, "le": c <= 21, "eq": c == 21,
            "ne": c != 21, "not_gt": ~(c > 21), "between": c.is_between(0, 25),
            "is_in": c.is_in([1, 22] if col == "j" else [1.0, 21.0]), "eq_nan": c == float("nan"),
            "ge_inf": c >= float("inf"), "le_-inf": c <= float("-inf"),
            "gt_or_j": (c > 21) | (pl.col("j") > 0), "and_j": (c > 1) & (pl.col("j") < 30)}[op]


@pytest.mark.parametrize("col", ["e", "d", "j"])
@pytest.mark.parametrize("op", _OPS)
def test_polars_pushdown_gives_polars_answer_on_nan_null_inf(specials, op, col):
    expr = _polars_expr(op, col)
    want = pl.from_arrow(_specials_in_memory(specials)).filter(expr)["i"].to_list()
    assert scan_polars(specials).filter(expr).collect()["i"].to_list() == want


_SQL = ["{c} > 21", "{c} >= 21", "{c} < 21", "{c} <= 21", "{c} = 21", "{c} <> 21",
        "NOT ({c} > 21)", "{c} BETWEEN 0 AND 25", "{c} IN (1, 21)", "{c} = 'nan'::double",
        "{c} >= 'inf'::double", "{c} <= '-inf'::double", "{c} IS NULL", "isnan({c})",
        "{c} > 21 OR j > 0", "{c} > 1 AND j < 30", "NOT ({c} < 1 OR j IS NULL)"]


# integers hold no NaN: j is not asked about NaN
@pytest.mark.parametrize("cond, col", [(cond, col) for cond in _SQL for col in ("e", "d", "j")
                                       if not (col == "j" and "nan" in cond)])
def test_duckdb_over_dataset_gives_duckdb_answer_on_nan_null_inf(specials, cond, col):
    duckdb = pytest.importorskip("duckdb")
    where = cond.format(c=col)
    mem = _specials_in_memory(specials)  # noqa: F841 - DuckDB finds it by name
    ds = dataset(specials)  # noqa: F841
    want = duckdb.sql(f"SELECT i FROM mem WHERE {where} ORDER BY i").fetchall()
    got = duckdb.sql(f"SELECT i FROM ds WHERE {where} ORDER BY i").fetchall()
    assert got == want

"""Polars over FITS: ``pl.scan_pyarrow_dataset(torchfits.dataset(...))`` and the native IO
plugin `scan_polars`, checked against Polars over the same rows as Parquet."""
from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("pyarrow")
pytest.importorskip("astropy")

from _datasets import make_catalog_dir  # noqa: E402

from torchfits.tables import scan as _scan  # noqa: E402
from torchfits.tables.polars_source import scan_polars  # noqa: E402
from torchfits.tables.dataset import dataset  # noqa: E402


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return make_catalog_dir(str(tmp_path_factory.mktemp("plcat")))


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


def test_io_plugin_pushes_projection_predicate_and_n_rows(catalog, monkeypatch):
    fdir, _ = catalog
    seen = []
    real = _scan.TableSource.decode

    def spy(self, *, columns, rows=None, row_range=None, **kwargs):
        n = len(rows) if rows is not None else row_range[1] - row_range[0]
        seen.append((tuple(columns), n))
        return real(self, columns=columns, rows=rows, row_range=row_range, **kwargs)

    monkeypatch.setattr(_scan.TableSource, "decode", spy)
    lf = scan_polars(fdir)
    got = lf.filter(pl.col("cnt") == 7).select("name").collect()
    assert {c for cols, _ in seen for c in cols} <= {"name", "cnt"}
    assert sum(n for cols, n in seen if "name" in cols) == got.height
    seen.clear()
    assert lf.select("id").head(5).collect()["id"].to_list() == [0, 1, 2, 3, 4]
    assert sum(n for _, n in seen) < 12000  # stopped early


def test_path_columns(catalog):
    fdir, _ = catalog
    lf = scan_polars(fdir, add_path_column=True)
    out = lf.group_by("filename").agg(pl.len()).collect()
    assert sorted(out["len"].to_list()) == [3000] * 4

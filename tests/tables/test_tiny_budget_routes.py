"""Scans of a table with variable-length (P/Q) columns under a tiny residency budget
(``TORCHFITS_RESIDENT_MB`` 0 and 1): every route that shares the scanner — Polars (IO plugin and
``scan_pyarrow_dataset``), DuckDB over the dataset, ``scan().to_arrow()`` and the training dataset —
releases the rows and heap spans of each chunk as it goes and still gives astropy's values.
(The Dask route: tests/dask/test_tiny_budget.py.)"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("astropy")

import _tablehelpers as th  # noqa: E402
import torchfits  # noqa: E402
from torchfits.fits.sources import residency  # noqa: E402
from torchfits.tables.source import TableSource  # noqa: E402

BUDGETS = ["0", "1"]


@pytest.fixture(scope="module")
def vla_file(tmp_path_factory):
    """(path, astropy's values) of one `_tablehelpers.write_vla_table` file, written and read once."""
    path = str(tmp_path_factory.mktemp("vla") / "vla.fits")
    th.write_vla_table(path)
    yield path, th.astropy_vla(path)
    torchfits.clear_file_cache()


@pytest.fixture
def tiny_budget(request, monkeypatch):
    """The budget (bytes) of ``TORCHFITS_RESIDENT_MB`` = the test's parameter; the heap spans
    the scan reads, counted."""
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", request.param)
    residency.forget_all()
    spans: list[int] = []
    real = TableSource._heap_span

    def counted(self, table, chosen):
        spans.append(len(table))
        return real(self, table, chosen)

    monkeypatch.setattr(TableSource, "_heap_span", counted)
    yield residency.budget(), spans
    residency.forget_all()


def _arrow_parts(table):
    return {"V": th.arrow_vla_parts(table.column("V")), "K": th.arrow_vla_parts(table.column("K")),
            "X": (table.column("X").to_numpy().astype(np.int64),) * 2}


def _check(table, want, tiny_budget, chunks=3):
    budget, spans = tiny_budget
    th.assert_vla_equal(_arrow_parts(table), want)
    assert len(spans) >= chunks and sum(spans) >= th.VLA_ROWS, spans  # each chunk's heap span read
    assert residency.held() <= budget


@pytest.mark.parametrize("tiny_budget", BUDGETS, indirect=True)
@pytest.mark.parametrize("how", ["io_plugin", "pyarrow_dataset"])
def test_polars(vla_file, tiny_budget, how):
    pl = pytest.importorskip("polars")
    from torchfits.tables.polars_source import scan_polars

    path, want = vla_file
    lf = scan_polars(path) if how == "io_plugin" else pl.scan_pyarrow_dataset(torchfits.dataset(path))
    _check(lf.sort("X").collect().to_arrow(), want, tiny_budget)


@pytest.mark.parametrize("tiny_budget", BUDGETS, indirect=True)
def test_duckdb(vla_file, tiny_budget):
    duckdb = pytest.importorskip("duckdb")

    path, want = vla_file
    con = duckdb.connect()
    con.register("t", torchfits.dataset(path))
    got = con.sql("SELECT X, V, K FROM t ORDER BY X").arrow()
    _check(got.read_all() if hasattr(got, "read_all") else got, want, tiny_budget)  # (a reader from 1.4)
    con.close()


@pytest.mark.parametrize("tiny_budget", BUDGETS, indirect=True)
def test_scan_to_arrow(vla_file, tiny_budget):
    path, want = vla_file
    _check(torchfits.scan(path).to_arrow(), want, tiny_budget, chunks=1)  # one chunk
    tiny_budget[1].clear()
    batches = torchfits.scan(path, batch_size=1024).to_batches()
    _check(pa.Table.from_batches(batches), want, tiny_budget, chunks=6)


@pytest.mark.parametrize("tiny_budget", ["0"], indirect=True)
def test_training_dataset(vla_file, tiny_budget):
    pytest.importorskip("torch")
    from torchfits.data import FitsTableIterableDataset

    path, want = vla_file
    batches = list(FitsTableIterableDataset(path, columns=["X", "V", "K"], as_batches=True, batch_size=1024))
    got = {"X": (np.concatenate([b["X"].numpy() for b in batches]).astype(np.int64),) * 2}
    for name in ("V", "K"):
        got[name] = th.vla_parts(t.numpy() for b in batches for t in b[name])
    th.assert_vla_equal(got, want)
    assert len(tiny_budget[1]) > 2 and residency.held() == 0

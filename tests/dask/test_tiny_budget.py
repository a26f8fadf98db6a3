"""Dask over a table with variable-length (P/Q) columns under a tiny residency budget
(``TORCHFITS_RESIDENT_MB`` 0 and 1, set in the workers of the folder's cluster): every partition
releases its rows and heap span as it goes, and the frame still equals astropy's values (the
other routes: tests/tables/test_tiny_budget_routes.py)."""
from __future__ import annotations

import pytest

pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")
pytest.importorskip("astropy")

import torchfits.dask as tfd  # noqa: E402
from _daskhelpers import resident_held, set_resident_mb  # noqa: E402
from _tablehelpers import assert_vla_equal, astropy_vla, vla_parts, write_vla_table  # noqa: E402


@pytest.fixture(scope="module")
def vla_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vla") / "vla.fits")
    write_vla_table(path)
    return path, astropy_vla(path)


@pytest.mark.parametrize("env", ["0", "1"])
def test_partitions_over_a_tiny_budget_equal_astropy(client, vla_file, env):
    path, want = vla_file
    budgets = client.run(set_resident_mb, env)
    try:
        ddf = tfd.read_table(path, split_row_groups=2000)
        assert ddf.npartitions == 3
        got = ddf.compute().sort_values("X")
        held = client.run(resident_held)
    finally:
        client.run(set_resident_mb, None)
    x = got["X"].to_numpy().astype("int64")
    assert_vla_equal({"X": (x, x), "V": vla_parts(got["V"]), "K": vla_parts(got["K"])}, want)
    assert all(held[w] <= budgets[w] == int(float(env) * (1 << 20)) for w in held), (held, budgets)

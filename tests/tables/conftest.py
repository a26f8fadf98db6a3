"""Fixtures shared by the table tests."""
from __future__ import annotations

import pytest

from _datasets import make_catalog_dir


@pytest.fixture(scope="session")
def catalog(tmp_path_factory):
    """``(fits_dir, parquet_dir)``: the same catalog as FITS files and as Parquet files
    (`make_catalog_dir`), built once for the dataset, DuckDB and Polars tests; read only."""
    return make_catalog_dir(str(tmp_path_factory.mktemp("catalog")))

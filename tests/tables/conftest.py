"""Fixtures shared by the table tests."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from _datasets import make_catalog_dir
from torchfits.tables.source import TableSource


@pytest.fixture(scope="session")
def catalog(tmp_path_factory):
    """``(fits_dir, parquet_dir)``: the same catalog as FITS files and as Parquet files
    (`make_catalog_dir`), built once for the dataset, DuckDB and Polars tests; read only."""
    return make_catalog_dir(str(tmp_path_factory.mktemp("catalog")))


@dataclass
class Decode:
    """One call of ``TableSource.decode``: the source, its keyword arguments and its batch."""

    source: TableSource
    kwargs: dict[str, Any]
    batch: Any

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.kwargs.get("columns") or ())

    @property
    def rows(self) -> int:
        """Rows decoded (for a where-decode: its hits)."""
        return int(self.batch.num_rows)

    @property
    def planned(self) -> int:
        """Rows asked for: the explicit row numbers, else the row range."""
        rows, row_range = self.kwargs.get("rows"), self.kwargs.get("row_range")
        return len(rows) if rows is not None else row_range[1] - row_range[0]


@pytest.fixture
def decodes(monkeypatch) -> list[Decode]:
    """Every ``TableSource.decode`` call the test makes from here on, in order (clear it between
    steps)."""
    seen: list[Decode] = []
    real = TableSource.decode

    def spy(self, **kwargs):
        batch = real(self, **kwargs)
        seen.append(Decode(self, kwargs, batch))
        return batch

    monkeypatch.setattr(TableSource, "decode", spy)
    return seen

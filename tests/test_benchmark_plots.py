"""benchmarks/plots.py reads the numbers the benchmark page reports (no timing here)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import plots  # noqa: E402

PAGE = """
## Training (`run_training.py`)

| scenario | torchfits | fitsio loop |
|---|---|---|
| files | 0.166 s (12,039 images/s) | 2.7× |
| rows | 1.5 s | 10.5× |

## Dask

| route | 1 worker ms | vs Parquet |
|:--|--:|--:|
| torchfits | 1,926 | 0.51× |
| Parquet | 4196 | 1.00× |
"""


def test_cells_in_ms_or_seconds():
    assert plots._number("1,926") == 1926.0
    assert plots._number("0.166 s (12,039 images/s)") == 166.0
    assert plots._number("**12.5**") == 12.5
    assert plots._number("n/a") is None


def test_sections_take_their_time_column():
    sections = plots.parse_sections(PAGE)
    assert list(sections) == ["Training (`run_training.py`)", "Dask"]
    (_, labels, values), = sections["Training (`run_training.py`)"]
    assert labels == ["files", "rows"] and values == [166.0, 1500.0]
    (caption, labels, values), = sections["Dask"]
    assert caption == "1 worker ms" and values == [1926.0, 4196.0]
    assert plots.slug("Training (`run_training.py`)") == "training"

"""Every ```python example in README.md and docs/*.md runs, in a directory holding the sample
files the docs refer to (sample_image.fits, sample_catalog.fits)."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _examples():
    for doc in DOCS:
        for i, code in enumerate(BLOCK.findall(doc.read_text())):
            yield pytest.param(code, id=f"{doc.name}-{i}")


@pytest.fixture
def sample_dir(tmp_path, monkeypatch):
    from torchfits.cli.demo import make_sample_files

    make_sample_files(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("code", list(_examples()))
def test_doc_example_runs(code, sample_dir):
    needs = {m for m in ("torch", "duckdb", "polars", "pandas", "astropy", "dask", "distributed") if re.search(rf"\b{m}\b", code)}
    for module in sorted(needs):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"example needs {module}")
    if re.search(r"\btorchfits\.read\(|\.to_torch|read_tensor|read_subset|open_subset_reader", code) \
            and importlib.util.find_spec("torch") is None:
        pytest.skip("example needs torch")
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})

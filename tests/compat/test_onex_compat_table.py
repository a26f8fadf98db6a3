"""docs/compatibility.md has one row per torchfits 1.x feature: every public 1.x name (API
contract, Part 2) sits in exactly one row with a status, and every name exists (issue #25)."""
import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"

ROOT = """read write open read_header read_colnames read_extname read_hdu_type read_keys read_nrows
read_num_hdus read_shape read_table_info read_tensor read_hdus read_subset open_subset_reader
open_table_reader read_batch read_batch_info get_cache_performance clear_all_caches
clear_file_cache verify_checksums insert_hdu replace_hdu delete_hdu write_checksums write_tensor
to_pandas to_arrow to_polars to_astropy Header Card HDUList TensorHDU TableHDU TableHDURef
__version__ torchfits.table torchfits.cache torchfits.transforms torchfits.data torchfits.where
torchfits.hdu torchfits.io""".split()

SUBMODULES = {
    "hdu": "DataView TableDataAccessor",
    "io": "cache_subsystem_policy clear_cache_subsystem",
    "table": """TABLE_BACKENDS append_rows clear_cache FITSPolarsFrame dataset delete_rows
        drop_columns duckdb_query insert_column insert_rows read read_arrow read_astropy
        read_polars read_torch reader rename_columns replace_column scan scan_polars scan_torch
        scanner schema to_astropy to_duckdb to_pandas to_polars update_rows write write_csv
        write_ipc write_parquet""",
    "cache": """CacheConfig CacheManager cache_root remote_cache_root sample_cache_root clear
        clear_cache clear_all_caches configure_cache configure_for_environment get_cache_manager
        get_cache_stats get_optimal_cache_config optimize_for_dataset stats""",
    "where": """evaluate_where normalize_where_syntax parse_where_expression parse_where_literal
        tokenize_where_expression where_identifier_re where_columns_from_ast""",
    "data": """BandInfo CutoutSpec discover_bands FitsTensorDataset FitsTensorIterableDataset
        FitsImageDataset FitsImageIterableDataset FitsCubeDataset FitsCubeIterableDataset
        FitsSpectrumDataset FitsSpectrumIterableDataset FitsTableDataset FitsTableIterableDataset
        FitsCutoutDataset FitsStagedCutoutIterableDataset fits_collate_fn make_loader""",
    "data.remote": "is_http_url cache_path_for_url resolve_local_path prefetch_urls",
}

NAMES_1X = ROOT + [f"{mod}.{name}" for mod, names in SUBMODULES.items() for name in names.split()]
STATUSES = {"supported", "supported differently", "not supported"}


def _rows():
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| 1.x feature |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1]))
    return rows


def test_one_row_per_feature_with_a_status():
    rows = _rows()
    firsts = [first for first, _ in rows]
    assert len(firsts) == len(set(firsts)), "a feature appears in two rows"
    for first, status in rows:
        assert status in STATUSES, (first, status)


def test_every_1x_name_has_exactly_one_row():
    seen: dict[str, int] = {}
    for first, _ in _rows():
        for name in re.findall(r"`([^`]+)`", first):
            seen[name] = seen.get(name, 0) + 1
    missing = [n for n in NAMES_1X if n not in seen]
    twice = [n for n in NAMES_1X if seen.get(n, 0) > 1]
    assert not missing, f"1.x names with no row in docs/compatibility.md: {missing}"
    assert not twice, f"1.x names in more than one row: {twice}"


def test_every_1x_name_exists():
    pytest.importorskip("torch")  # torchfits.data imports torch
    import torchfits

    absent = []
    for name in NAMES_1X:
        if name.startswith("torchfits."):
            importlib.import_module(name)  # a sub-namespace
            continue
        module, _, attr = name.rpartition(".")
        owner = importlib.import_module(f"torchfits.{module}") if module else torchfits
        if not hasattr(owner, attr):
            absent.append(name)
    assert not absent

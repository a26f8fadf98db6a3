"""The root namespace: the torchfits 1.x names (docs/compatibility.md) plus the native API,
all resolvable, lazily, without importing torch or pyarrow."""
import subprocess
import sys

import pytest

import torchfits

COMPAT = """read write open read_header read_colnames read_extname read_hdu_type read_keys read_nrows
read_num_hdus read_shape read_table_info read_tensor read_hdus read_subset open_subset_reader
open_table_reader read_batch read_batch_info get_cache_performance clear_all_caches
clear_file_cache verify_checksums insert_hdu replace_hdu delete_hdu write_checksums write_tensor
to_pandas to_arrow to_polars to_astropy Header Card HDUList TensorHDU TableHDU TableHDURef""".split()
NATIVE = ("scan dataset sql scan_polars polars_cone open_image read_numpy info cutouts crossmatch "
          "sort_healpix preview").split()


def test_all_names_exist_and_are_unique():
    assert len(torchfits.__all__) == len(set(torchfits.__all__))
    assert not [n for n in torchfits.__all__ if n.startswith("_") and n != "__version__"]
    for name in COMPAT + NATIVE:
        assert name in torchfits.__all__, name
    for name in torchfits.__all__:
        assert getattr(torchfits, name) is not None


def test_submodules_and_unknown_names():
    for name in ("table", "cache", "where", "hdu", "errors"):
        assert getattr(torchfits, name).__name__ == f"torchfits.{name}"
    with pytest.raises(AttributeError):
        torchfits.no_such_thing  # noqa: B018
    assert callable(torchfits.scan)  # a function, not the scanner module


def test_star_import_stays_light():
    code = ("import sys; sys.modules['torch'] = None; from torchfits import *; "
            "print('torch' in sys.modules and sys.modules['torch'] is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_dir_lists_only_public_names():
    names = dir(torchfits)
    for leak in ("Any", "importlib", "threading", "annotations", "_lock", "_LAZY", "_SUBMODULES"):
        assert leak not in names, leak
    assert {"scan", "info", "sql", "__version__", "errors"} <= set(names)
    assert all(not n.startswith("_") or (n.startswith("__") and n.endswith("__")) for n in names)

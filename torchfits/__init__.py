"""torchfits: fast FITS data access into NumPy, Arrow and (optionally) torch.

Names resolve lazily on first use, so ``import torchfits`` imports neither torch nor pyarrow.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any

from ._version import __version__

# name → module that defines it (relative to this package)
_LAZY = {
    # native API
    "scan": "_scan",
    "Scanner": "_scan",
    "dataset": "_dataset",
    "FitsDataset": "_dataset",
    "FitsFragment": "_dataset",
    "FitsScanner": "_dataset",
    "sql": "_sql",
    "scan_polars": "_polars_source",
    "open_image": "image",
    "read_numpy": "image",
    "Image": "image",
    "info": "meta",
    "HduInfo": "meta",
    # headers and metadata
    "Header": "header",
    "Card": "header",
    "read_header": "meta",
    "read_keys": "meta",
    "read_num_hdus": "meta",
    "read_hdu_type": "meta",
    "read_shape": "meta",
    "read_extname": "meta",
    "read_colnames": "meta",
    "read_nrows": "meta",
    "read_table_info": "meta",
    # torchfits 1.x reads
    "read": "io",
    "read_tensor": "io",
    "read_hdus": "io",
    "read_batch": "io",
    "read_batch_info": "io",
    "read_subset": "io",
    "open_subset_reader": "io",
    "open": "hdu",
    "write": "writer",
    "write_tensor": "writer",
    "insert_hdu": "edit",
    "replace_hdu": "edit",
    "delete_hdu": "edit",
    "update_header": "edit",
    "write_checksums": "checksum",
    "verify_checksums": "checksum",
    "HDUList": "hdu",
    "TensorHDU": "hdu",
    "TableHDU": "_table_hdu",
    "TableHDURef": "_table_hdu",
    "open_table_reader": "open_table",
    "to_arrow": "interop",
    "to_pandas": "interop",
    "to_polars": "interop",
    "to_astropy": "interop",
    # caches
    "get_cache_performance": "cache",
    "clear_all_caches": "cache",
    "clear_file_cache": "cache",
    "FitsError": "errors",
}
_SUBMODULES = {"errors", "cache", "io", "hdu", "image", "meta", "header", "cli", "where", "table",
               "interop", "writer", "edit", "checksum"}

__all__ = sorted(set(_LAZY) - {"Image", "HduInfo", "FitsError", "Scanner", "FitsFragment",
                               "FitsScanner"}) + ["__version__"]

_lock = threading.RLock()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None and name not in _SUBMODULES:
        raise AttributeError(f"module 'torchfits' has no attribute {name!r}")
    with _lock:
        if name in globals():
            return globals()[name]
        if module is None:
            value = importlib.import_module(f".{name}", __name__)
        else:
            value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)

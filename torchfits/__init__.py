"""torchfits: fast FITS data access into NumPy, Arrow and (optionally) torch.

Names resolve lazily on first use, so ``import torchfits`` imports neither torch nor pyarrow.
"""

import importlib as _importlib
import threading as _threading
from typing import Any as _Any

from ._version import __version__

# name → module that defines it (relative to this package)
_LAZY = {
    # native API
    "scan": "tables.scan",
    "Scanner": "tables.scan",
    "dataset": "tables.dataset",
    "FitsDataset": "tables.dataset",
    "FitsFragment": "tables.dataset",
    "FitsScanner": "tables.dataset",
    "sql": "tables.sql",
    "scan_polars": "tables.polars_source",
    "polars_cone": "tables.polars_source",
    "crossmatch": "sky.crossmatch",
    "open_image": "image.plain",
    "read_numpy": "image.plain",
    "read_groups": "image.groups",
    "Image": "image.plain",
    "info": "fits.metadata",
    "cutouts": "sky.cutouts",
    "HduInfo": "fits.metadata",
    # headers and metadata
    "Header": "fits.header",
    "Card": "fits.header",
    "read_header": "fits.metadata",
    "read_keys": "fits.metadata",
    "read_num_hdus": "fits.metadata",
    "read_hdu_type": "fits.metadata",
    "read_shape": "fits.metadata",
    "read_extname": "fits.metadata",
    "read_colnames": "fits.metadata",
    "read_nrows": "fits.metadata",
    "read_table_info": "fits.metadata",
    # torchfits 1.x reads
    "read": "compat.reads",
    "read_tensor": "compat.reads",
    "read_hdus": "compat.reads",
    "read_batch": "compat.reads",
    "read_batch_info": "compat.reads",
    "read_subset": "compat.reads",
    "open_subset_reader": "compat.reads",
    "open": "compat.hdulist",
    "write": "writing.api",
    "write_tensor": "writing.api",
    "insert_hdu": "writing.hdu_edit",
    "replace_hdu": "writing.hdu_edit",
    "delete_hdu": "writing.hdu_edit",
    "update_header": "writing.hdu_edit",
    "write_checksums": "writing.checksum",
    "verify_checksums": "writing.checksum",
    "HDUList": "compat.hdulist",
    "TensorHDU": "compat.hdulist",
    "TableHDU": "compat.table_hdu",
    "TableHDURef": "compat.table_hdu",
    "open_table_reader": "compat.open_table",
    "to_arrow": "compat.interop",
    "to_pandas": "compat.interop",
    "to_polars": "compat.interop",
    "to_astropy": "compat.interop",
    # caches
    "get_cache_performance": "compat.cache",
    "clear_all_caches": "compat.cache",
    "clear_file_cache": "compat.cache",
    "FitsError": "errors",
    # sky-native operations
    "sort_healpix": "sky.healpix_sort",
    # pictures
    "preview": "writing.png",
}
_SUBMODULES = {
    # the 1.x module paths (compat shims) and the errors module
    "errors", "cache", "io", "hdu", "where", "table",
    # role subpackages
    "fits", "image", "query", "tables", "writing", "sky", "compat", "cli",
    # adapters (need their optional dependency)
    "transforms",
    # optional adapters (their dependencies load only when called)
    "dask", "hats", "zarr",
    # adapters
    "data",
}

__all__ = sorted(set(_LAZY) - {"Image", "HduInfo", "FitsError", "Scanner", "FitsFragment",
                               "FitsScanner"}) + ["__version__"]

_lock = _threading.RLock()


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None and name not in _SUBMODULES:
        raise AttributeError(f"module 'torchfits' has no attribute {name!r}")
    with _lock:
        if name in globals():
            return globals()[name]
        if module is None:
            value = _importlib.import_module(f".{name}", __name__)
        else:
            value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    # public names only: the lazy API, the subpackages, and dunders; never helper imports
    public = {n for n in globals() if not n.startswith("_") or (n.startswith("__") and n.endswith("__"))}
    return sorted(public | set(_LAZY) | _SUBMODULES)

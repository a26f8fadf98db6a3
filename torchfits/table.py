"""``torchfits.table``: the torchfits 1.x table API.

Kept for the 1.x import path; reads and edits live in :mod:`torchfits.compat.table`, the
conversions in :mod:`torchfits.compat.interop` (``to_pandas`` is its ``table_to_pandas``, ...).
"""
from typing import Any

from .compat import table as _impl
from .compat.interop import (  # noqa: F401
    TABLE_EXPORTS,
    FITSPolarsFrame,
    duckdb_query,
    read_astropy,
    read_polars,
    scan_polars,
    to_duckdb,
    write_csv,
    write_ipc,
    write_parquet,
)
from .compat.interop import table_to_astropy as to_astropy
from .compat.interop import table_to_pandas as to_pandas
from .compat.interop import table_to_polars as to_polars
from .compat.table import *  # noqa: F401,F403

__all__ = sorted(_impl.__all__ + TABLE_EXPORTS)


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

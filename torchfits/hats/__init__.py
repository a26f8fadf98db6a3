"""HATS catalogs (the HEALPix-partitioned Parquet that hats and lsdb read) from FITS tables.

``import torchfits.hats`` imports none of its optional dependencies (install the ``hats`` extra).
See docs/sky.md, "HATS catalogs".

- `write`: FITS tables → a HATS catalog directory, in two streaming passes.
- `hats_import_reader`: a reader plug-in for hats-import's own pipeline (``FitsReader``),
  decoding through torchfits.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .catalog import write

__all__ = ["write", "hats_import_reader"]


def hats_import_reader(*, chunksize: int = 500_000, columns: Sequence[str] | None = None,
                       hdu: int | str = 1, threads: int | None = None,
                       storage_options: dict[str, Any] | None = None) -> Any:
    """A hats-import ``InputReader`` that reads FITS tables through torchfits.

    Pass it as ``ImportArguments(file_reader=...)``; hats-import pickles it to its workers.
    Its class, ``torchfits.hats.import_reader.FitsReader``, subclasses hats-import's
    ``InputReader`` and is defined only when this is called (hats-import is imported here).

    Parameters
    ----------
    chunksize : int
        Rows per chunk handed to the pipeline.
    columns : list of str, optional
        Columns to read; None reads all.
    hdu : int or str
        The table HDU of every file.
    threads : int, optional
        Decode threads in each worker (default: every core).
    storage_options : dict, optional
        fsspec and torchfits remote options for URL inputs.
    """
    from .import_reader import FitsReader

    return FitsReader(chunksize=chunksize, columns=columns, hdu=hdu, threads=threads,
                      storage_options=storage_options)

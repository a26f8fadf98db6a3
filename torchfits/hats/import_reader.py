"""A hats-import reader plug-in: FITS tables read through torchfits, in chunks, inside
hats-import's own pipeline (``ImportArguments(file_reader=torchfits.hats.hats_import_reader())``).

This module imports hats-import; ``torchfits.hats`` imports it only when the reader is asked for.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from hats_import.catalog.file_readers import InputReader

from ..fits.paths import with_storage_options
from ..tables.decode_options import DecodeOptions
from ..tables.scan import Scanner
from ..tables.source import TableSource, resolve_sources

__all__ = ["FitsReader"]


class FitsReader(InputReader):  # type: ignore[misc]
    """Chunked FITS table reader for hats-import, decoding with torchfits.

    Parameters
    ----------
    chunksize : int
        Rows per yielded ``pyarrow.Table``.
    columns : list of str, optional
        Columns to read (hats-import's ``read_columns`` narrows them further); None reads all.
    hdu : int or str
        The table HDU of every file.
    threads : int, optional
        Decode threads in each worker (default: every core).
    storage_options : dict, optional
        fsspec and torchfits remote options for URL inputs (merged over a ``UPath``'s own).
    """

    def __init__(self, chunksize: int = 500_000, columns: Sequence[str] | None = None,
                 hdu: int | str = 1, threads: int | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        if isinstance(chunksize, bool) or not isinstance(chunksize, int) or chunksize < 1:
            raise ValueError(f"chunksize must be a positive int, not {chunksize!r}")
        self.chunksize = chunksize
        self.columns = None if columns is None else list(columns)
        self.hdu = hdu
        self.threads = threads
        self.storage_options = dict(storage_options or {})

    def read(self, input_file: Any, read_columns: Sequence[str] | None = None) -> Iterator[Any]:
        """Yield the table of ``input_file`` as ``pyarrow.Table`` chunks of ``chunksize`` rows."""
        import pyarrow as pa

        columns = read_columns if read_columns is not None else self.columns
        sources = [TableSource.open(p, self.hdu) for p in resolve_sources(self._path(input_file))]
        scanner = Scanner(sources, columns=columns, batch_size=self.chunksize,
                          options=DecodeOptions(threads=self.threads), schema_metadata=False)
        for batch in scanner.to_batches():
            yield pa.Table.from_batches([batch])

    def _path(self, input_file: Any) -> Any:
        protocol = getattr(input_file, "protocol", "")
        if protocol in ("", "file", "local"):
            if not isinstance(input_file, (str, os.PathLike)):
                input_file = str(getattr(input_file, "path", input_file))
            self.regular_file_exists(input_file)
            return with_storage_options(input_file, self.storage_options)
        options = dict(getattr(input_file, "storage_options", {}) or {}, **self.storage_options)
        return with_storage_options(str(input_file), options)

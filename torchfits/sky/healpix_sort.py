"""`sort_healpix`: rewrite a catalog with its rows in nested HEALPix order, and index its row
ranges by cell in the statistics sidecar, so a small cone reads only the rows around it.

The rows are moved as raw bytes: every column keeps its TFORM, scaling, nulls and units, the
header is copied card for card (CHECKSUM/DATASUM recomputed when present), every other HDU is
copied byte for byte, and the heap is copied unchanged (descriptors are offsets into it, so they
stay valid whatever row holds them). The output is written atomically (temporary file, fsync,
rename), so it may replace the input.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..fits.aliases import HduArg, PathArg
from ..tables.decode_options import DecodeOptions
from ..tables.sky_index import check_order, coordinates, healpix_cells, sky_columns
from ..tables.source import TableSource
from ..tables.stats_index import DEFAULT_CHUNK_ROWS, INDEX_NAME, file_entry, update_index

__all__ = ["sort_healpix"]

_DECODE_ROWS = 1 << 20  # coordinate rows decoded at a time
_GATHER_BYTES = 64 << 20  # row bytes gathered and written at a time


def healpix_order_of(src: TableSource, ra: str, dec: str, order: int) -> np.ndarray:
    """The stable permutation that puts the table's rows in nested HEALPix order at ``order``
    (rows without a position last, in their original order)."""
    cells = np.empty(src.nrows, dtype=np.uint64)
    options = DecodeOptions(threads=1)
    for start in range(0, src.nrows, _DECODE_ROWS):
        stop = min(start + _DECODE_ROWS, src.nrows)
        batch = src.decode(columns=[ra, dec], row_range=(start, stop), options=options)
        cells[start:stop] = healpix_cells(coordinates(batch.column(0), ra),
                                          coordinates(batch.column(1), dec), order)
    return np.argsort(cells, kind="stable")


def sort_healpix(source: PathArg, output: PathArg, order: int, *, ra: str = "ra", dec: str = "dec",
                 hdu: HduArg = 1, overwrite: bool = False, index: Any = True,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS) -> str:
    """Write ``source`` to ``output`` with the rows of table ``hdu`` ordered by HEALPix cell.

    Parameters
    ----------
    source : str or os.PathLike
        The catalog (a FITS file with a binary or ASCII table).
    output : str or os.PathLike
        The file to write (atomically; it may be ``source`` itself with ``overwrite=True``).
    order : int
        The HEALPix order (0 ... 29) of the nested cell index the rows are sorted by (stable:
        rows of one cell keep their order; rows with a null, NaN or infinite coordinate go last).
    ra, dec : str
        The coordinate columns, degrees (case-insensitive).
    hdu : int or str
        The table HDU; every other HDU is copied unchanged.
    overwrite : bool
        Replace an existing ``output``.
    index : bool, str or os.PathLike
        True (default): add ``output``'s entry, with its row ranges by cell, to the statistics
        sidecar in its directory (``_torchfits_index.json``, created or updated); a path: to that
        sidecar; False: write no sidecar. Sorting files one after another into one directory
        leaves one sidecar for all of them (do not run them concurrently).
    chunk_rows : int
        The sidecar's statistics chunk size (an existing sidecar with another is rewritten).

    Returns
    -------
    str
        The path written.

    Notes
    -----
    Memory: 8 bytes per row for the permutation (plus 8 while it is computed) and one gather
    buffer of 64 MB. The rows are read in cell order through the file's memory map, so a file
    much larger than memory is read at random by the page cache: split such catalogs into files
    that fit (docs/sky.md).
    """
    from ..fits.hdu_index import get_index, invalidate
    from ..fits.layout import padded
    from ..fits.paths import fspath
    from ..writing.atomic import atomic_output, check_target
    from ..writing.checksum import header_with_checksum_cards, patch_file_checksums
    from ..writing.hdu_bytes import copy_hdu

    order = check_order(order)
    src = TableSource.open(source, hdu)
    ra_name, dec_name = sky_columns((ra, dec), [s.name for s in src.specs], src.label)
    for name in (ra_name, dec_name):
        spec = next(s for s in src.specs if s.name == name)
        if spec.descriptor:
            raise TypeError(f"{src.label}: column {name!r} is variable-length, not one value per row")
    target = check_target(output, overwrite=overwrite)
    permutation = healpix_order_of(src, ra_name, dec_name, order)
    index_of = get_index(source)
    table = src.entry
    rows, _ = src.buffers()
    rb = table.row_bytes
    matrix = np.frombuffer(rows, np.uint8, table.nrows * rb).reshape(table.nrows, rb)
    buf = index_of.source.buffer()
    with atomic_output(target) as sink:
        for entry in index_of.entries:
            if entry.index != table.index:
                copy_hdu(sink, index_of, entry, primary=entry.index == 0)
                continue
            header = bytes(buf[entry.header_offset:entry.data_offset])
            checked = b"CHECKSUM" in _keys(header) or b"DATASUM" in _keys(header)
            if checked:
                header = header_with_checksum_cards(header)
            header_offset = sink.offset
            sink.write(header)
            data_offset = sink.offset
            step = max(1, _GATHER_BYTES // max(rb, 1))
            for start in range(0, table.nrows, step):
                sink.write(np.ascontiguousarray(matrix[permutation[start:start + step]]))
            # the gap and the heap after the rows, unchanged
            rest = entry.data_offset + table.nrows * rb
            sink.write(buf[rest:min(entry.data_offset + padded(entry.data_size), len(buf))])
            index_of.source.check()
            sink.pad()
            if checked:
                patch_file_checksums(sink.fh, [(header_offset, data_offset, entry.data_size)])
    invalidate(target)
    if index is not False:
        sidecar = os.path.join(os.path.dirname(os.path.abspath(target)), INDEX_NAME) if index is True \
            else fspath(index)
        entry_doc = file_entry(target, table.index, chunk_rows=chunk_rows, sky=(ra_name, dec_name),
                               sky_order=order)
        update_index({target: entry_doc}, sidecar, chunk_rows)
    return target


def _keys(header: bytes) -> set[bytes]:
    return {header[p:p + 8].rstrip() for p in range(0, len(header) - 79, 80)}

"""Insert, replace and delete whole HDUs of a FITS file; every edit rewrites the file atomically
(temporary file, fsync, rename) and copies the HDUs it keeps byte for byte.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from .._torch_adapter import is_tensor
from ..fits.hdu_index import HduEntry, HduIndex, get_index
from ..fits.header import Header
from .atomic import Sink, atomic_output, require_file
from .cards import checked_header, named_errors
from .hdu_bytes import copy_hdu
from .header_edit import update_header
from .image_write import write_image_hdu
from .items import ImageData, TableData, as_numpy, is_table_like

__all__ = ["insert_hdu", "replace_hdu", "delete_hdu", "update_header"]

_STALE = {"BSCALE", "BZERO", "BLANK", "DATASUM", "CHECKSUM", "EXTEND", "THEAP"}
_COLUMN_KEY = re.compile(r"^T[A-Z]{3,5}\d+$")

Piece = Callable[[Sink, bool], tuple]


def _check_compress(compress: Any) -> str | None:
    """The codec for ``compress`` (None for no compression); bad names raise before any I/O."""
    from .compress_write import normalize_compress

    try:
        return normalize_compress(compress)
    except ValueError as exc:
        raise RuntimeError(str(exc)) from None


def _item(data: Any, header: Header | None) -> Any:
    if is_tensor(data) or isinstance(data, np.ndarray):
        return ImageData(as_numpy(data), header)
    if isinstance(data, dict) and "data" not in data or is_table_like(data):
        return TableData(data, header)
    raise ValueError(f"Unsupported HDU data type: {type(data).__name__} "
                     "(expected a tensor, an array, or a dict of columns)")


def _new_piece(item: Any) -> Piece:
    def write(sink: Sink, primary: bool) -> tuple:
        if isinstance(item, ImageData):
            return write_image_hdu(sink, item.array, item.header, primary=primary)
        from .table_write import write_table_hdu

        return write_table_hdu(sink, item)
    return write


def _old_piece(index: HduIndex, entry: HduEntry) -> Piece:
    def write(sink: Sink, primary: bool) -> tuple:
        return copy_hdu(sink, index, entry, primary=primary)
    return write


def _assemble(target: str, pieces: list[tuple[Piece, bool]], codec: str | None = None) -> None:
    """Write ``(piece, is_image)`` in order; a table first gets an empty primary before it.

    With a ``codec`` the whole output is then re-encoded with image tile compression (images
    become compressed HDUs behind an empty primary; tables and compressed HDUs are copied). The
    edit is assembled in a scratch file first, so a failure in either step leaves the target as
    it was.
    """
    if pieces and not pieces[0][1]:
        empty = ImageData(np.empty((0,), np.uint8))
        pieces.insert(0, (_new_piece(empty), True))
    if codec is None:
        with atomic_output(target) as sink:
            for i, (piece, _) in enumerate(pieces):
                with named_errors(target, i):
                    piece(sink, i == 0)
        return
    import os
    import tempfile

    from .recompress import compress_file

    fd, scratch = tempfile.mkstemp(prefix=".torchfits-edit-", suffix=".fits",
                                   dir=os.path.dirname(os.path.abspath(target)))
    os.close(fd)
    try:
        with atomic_output(scratch) as sink:
            for i, (piece, _) in enumerate(pieces):
                with named_errors(target, i):
                    piece(sink, i == 0)
        compress_file(scratch, target, algorithm=codec, overwrite=True)
    finally:
        try:
            os.unlink(scratch)
        except OSError:
            pass


def _resolve(index: HduIndex, hdu: Any) -> HduEntry:
    if isinstance(hdu, (str, tuple)):
        return index.resolve(hdu)  # EXTNAME, "EXTNAME,EXTVER" or (EXTNAME, EXTVER): one rule
    if isinstance(hdu, bool) or not isinstance(hdu, (int, np.integer)):
        raise TypeError(f"hdu must be an integer or an EXTNAME, not {type(hdu).__name__}")
    if hdu < 0 or hdu >= len(index):
        raise IndexError(f"index {hdu} out of range for {len(index)} HDUs")
    return index.entries[int(hdu)]


def _existing(index: HduIndex) -> list[tuple[Piece, bool]]:
    return [(_old_piece(index, e), e.is_image) for e in index.entries]


def insert_hdu(path: Any, data: Any, index: int = 1, header: Any = None, compress: Any = False) -> None:
    """Insert a new HDU before position ``index`` (``index == n_hdus`` or ``-1`` appends).

    Parameters
    ----------
    path : str or os.PathLike
        An existing FITS file (``FileNotFoundError`` otherwise).
    data : tensor, ndarray, or dict of columns / Arrow-like table
        An image or a binary table.
    index : int
        ``0 <= index <= n_hdus``; 0 makes a new image the primary and demotes the old primary
        to an image extension. A negative index counts positions from the end of the file:
        ``-1`` appends, ``-2`` inserts before the last HDU, down to ``-(n_hdus + 1)`` (= 0).
    header : dict or Header, optional
        Extra cards for the new HDU.
    """
    codec = _check_compress(compress)
    target = require_file(path)
    idx = get_index(target)
    n = len(idx)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -(n + 1) <= index <= n:
        raise IndexError(f"index {index} out of range for {n} HDUs")
    if index < 0:
        index = n + 1 + int(index)
    item = _item(data, checked_header(header, target, index))
    pieces = _existing(idx)
    new = (_new_piece(item), isinstance(item, ImageData))
    if index == 0 and not new[1]:
        raise ValueError("a table cannot become the primary HDU; insert it at index >= 1")
    pieces.insert(int(index), new)
    _assemble(target, pieces, codec)


def _kept_header(idx: HduIndex, entry: HduEntry, table: bool) -> Header:
    """The old header minus structural, stale scaling/checksum and column keywords."""
    from .cards import is_structural

    old = idx.header(entry)
    kept = Header()
    for card in old.cards:
        key = card.key
        if not key or key in _STALE or key == "CONTINUE" or is_structural(key, True):
            continue
        if _COLUMN_KEY.match(key) or key == "SIMPLE":
            continue
        kept.append(card)
    return kept


def replace_hdu(path: Any, hdu: Any, data: Any, header: Any = None, compress: Any = False) -> None:
    """Replace one HDU's content.

    With ``header=None`` the old header's own cards (EXTNAME, user keywords) are kept, minus
    structural keywords and stale BSCALE/BZERO/BLANK/DATASUM/CHECKSUM; a given ``header``
    replaces the old one entirely. Replacing HDU 0 with a table gives an empty primary, the
    table, then the remaining HDUs unchanged.
    """
    codec = _check_compress(compress)
    target = require_file(path)
    idx = get_index(target)
    entry = _resolve(idx, hdu)
    probe = _item(data, None)
    table = isinstance(probe, TableData)
    new_header = (checked_header(header, target, entry.index) if header is not None
                  else _kept_header(idx, entry, table))
    item = _item(data, new_header)
    pieces = _existing(idx)
    pieces[entry.index] = (_new_piece(item), not table)
    _assemble(target, pieces, codec)


def delete_hdu(path: Any, hdu: Any, compress: Any = False) -> None:
    """Remove one HDU. Deleting HDU 0 promotes the next image HDU to primary (keeping its
    EXTNAME) or puts an empty primary before a table; the only HDU cannot be deleted."""
    codec = _check_compress(compress)
    target = require_file(path)
    idx = get_index(target)
    entry = _resolve(idx, hdu)
    if len(idx) == 1:
        raise ValueError(f"Cannot delete the last HDU of {target}: a FITS file needs at least one HDU")
    pieces = _existing(idx)
    del pieces[entry.index]
    _assemble(target, pieces, codec)

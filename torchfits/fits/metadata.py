"""Header and metadata calls: answered from the HDU index and header cards alone (no pixel I/O).

NumPy-only: nothing here imports torch or pyarrow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .hdu_index import KIND_BINTABLE, KIND_COMPRESSED, KIND_TABLE, HduEntry, get_index
from .paths import parse_path, with_storage_options
from ..errors import FitsError, FitsFileNotFoundError, HDUNotFoundError, HDUTypeError, KeywordNotFoundError
from .header import Header

__all__ = [
    "HduInfo",
    "info",
    "read_header",
    "read_keys",
    "read_num_hdus",
    "read_hdu_type",
    "read_shape",
    "read_extname",
    "read_colnames",
    "read_nrows",
    "read_table_info",
]

_HDU_TYPE = {KIND_BINTABLE: "BINARY_TABLE", KIND_TABLE: "ASCII_TABLE"}


def _locate(path: Any, hdu: Any, *, allow_auto: bool = False,
            storage_options: Optional[dict] = None) -> tuple[Any, HduEntry]:
    fp = parse_path(with_storage_options(path, storage_options))
    index = get_index(fp.path)
    if fp.hdu is not None and hdu in (0, None, "auto"):
        hdu = fp.hdu
    return index, index.resolve(hdu, allow_auto=allow_auto)


def read_header(path: Any, hdu: Any = 0, *, compressed: bool = False,
                storage_options: Optional[dict] = None) -> Header:
    """The typed header of one HDU (``None``/``"auto"`` picks the HDU as ``read`` does).

    Long CONTINUE strings are joined; HIERARCH keywords appear without the prefix. For a
    tile-compressed image this is the image's header (Z-keywords restored to BITPIX, NAXISn,
    …); ``compressed=True`` gives the header of the compressed binary table as stored.
    """
    index, entry = _locate(path, hdu, allow_auto=True, storage_options=storage_options)
    if entry.kind == KIND_COMPRESSED and not compressed:
        from ..image.compressed import image_header

        return image_header(index.header_view(entry))
    return index.header(entry)


def read_keys(path: Any, keys: Any, hdu: Any = 0) -> dict[str, Any]:
    """Typed values of ``keys`` in request order; a missing keyword raises.

    A long string value is returned as its first card (with the trailing ``&``), as torchfits
    1.x did: only the named cards are read.
    """
    if isinstance(keys, str):
        keys = [keys]
    index, entry = _locate(path, hdu)
    first: dict[str, Any] = {}
    for kind, key, value, _comment, _raw in index.parsed_cards(entry):
        if kind in (0, 1) and key not in first:
            first[key] = value
    result = {}
    for k in keys:
        name = k.upper() if k.upper() in first else k
        if name not in first:
            raise KeywordNotFoundError(f"read_keys: keyword not found: {k}")
        result[k] = first[name]
    return result


def read_num_hdus(path: Any) -> int:
    """Number of HDUs in the file."""
    return len(get_index(parse_path(path).path))


def read_hdu_type(path: Any, hdu: Any = 0) -> str:
    """``"IMAGE"`` (also compressed images and empty primaries), ``"BINARY_TABLE"`` or
    ``"ASCII_TABLE"``."""
    _, entry = _locate(path, hdu)
    return _HDU_TYPE.get(entry.kind, "IMAGE")


def read_shape(path: Any, hdu: Any = 0) -> tuple[int, tuple[int, ...]]:
    """``(bitpix, shape)``: storage BITPIX and the C-order shape (compressed: logical image)."""
    index, entry = _locate(path, hdu)
    if entry.is_table:
        raise HDUTypeError(f"{index.path}: HDU {entry.index} is a table: Could not read image parameters")
    bitpix, naxes = entry.image_layout
    return bitpix, tuple(reversed(naxes))


def read_extname(path: Any, hdu: Any = 0) -> Optional[str]:
    """EXTNAME of the HDU, or None (also for a missing file or an index past the end)."""
    try:
        index, entry = _locate(path, hdu)
    except FitsFileNotFoundError:
        return None
    except HDUNotFoundError:
        if isinstance(hdu, str):
            raise
        return None
    return entry.extname


def _table(path: Any, hdu: Any, caller: str) -> tuple[Any, HduEntry, Header]:
    index, entry = _locate(path, hdu)
    if not entry.is_table:
        raise HDUTypeError(
            f"{caller} (HDU must be a table): {index.path}: HDU {entry.index} is "
            f"{'a compressed image' if entry.kind == KIND_COMPRESSED else 'an image'}"
        )
    return index, entry, index.header_view(entry)


def _colnames(header: Header, entry: HduEntry) -> list[str]:
    names = []
    for i in range(1, entry.tfields + 1):
        name = header.get(f"TTYPE{i}")
        names.append(name.strip() if isinstance(name, str) and name.strip() else f"col{i}")
    return names


def read_colnames(path: Any, hdu: Any = 1) -> list[str]:
    """Column names (TTYPEn; ``colN`` for an unnamed column)."""
    _, entry, header = _table(path, hdu, "read_colnames")
    return _colnames(header, entry)


def read_nrows(path: Any, hdu: Any = 1) -> int:
    """Number of rows of a table HDU."""
    _, entry, _ = _table(path, hdu, "read_nrows")
    return entry.nrows


def read_table_info(path: Any, hdu: Any = 1) -> dict[str, Any]:
    """``{"nrows", "colnames", "tforms"}`` with TFORMs as written."""
    _, entry, header = _table(path, hdu, "read_table_info")
    tforms = [str(header.get(f"TFORM{i}", "")).strip() for i in range(1, entry.tfields + 1)]
    return {"nrows": entry.nrows, "colnames": _colnames(header, entry), "tforms": tforms}


@dataclass(frozen=True)
class HduInfo:
    """A one-line summary of an HDU."""

    index: int
    name: str
    kind: str  # primary | image | bintable | table | compressed_image
    shape: tuple[int, ...]  # images: C-order pixel shape; tables: (nrows, ncols)
    bitpix: Optional[int]
    dtype: Optional[str]  # result dtype of an image read
    nrows: Optional[int]
    ncols: Optional[int]
    codec: Optional[str]
    ncards: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def info(path: Any, *, storage_options: Optional[dict] = None) -> list[HduInfo]:
    """Summaries of every HDU in the file (a path, URL, bytes or a binary file object)."""
    from ..image.plain import plan_image  # numpy-only

    index = get_index(parse_path(with_storage_options(path, storage_options)).path)
    out = []
    for e in index.entries:
        if e.is_table:
            out.append(HduInfo(e.index, e.display_name, e.kind, (e.nrows, e.tfields), None, None,
                               e.nrows, e.tfields, None, e.ncards))
            continue
        bitpix, naxes = e.image_layout
        dtype = None
        if e.is_image:
            try:
                dtype = str(plan_image(e, index.header_view(e)).dtype)
            except FitsError:
                dtype = None
        out.append(HduInfo(e.index, e.display_name, e.kind, tuple(reversed(naxes)), bitpix, dtype,
                           None, None, e.zcmptype, e.ncards))
    return out

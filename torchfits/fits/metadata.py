"""Header and metadata calls: answered from the HDU index and header cards alone (no pixel I/O).

NumPy-only: nothing here imports torch or pyarrow.
"""
from __future__ import annotations

from typing import Any

from ..errors import FitsError, FitsFileNotFoundError, HDUNotFoundError, HDUTypeError, KeywordNotFoundError
from .aliases import HduArg, PathArg
from .hdu_index import KIND_BINTABLE, KIND_COMPRESSED, KIND_TABLE, HduEntry, check_hdu_arg, get_index
from .header import Header
from .paths import parse_path, with_storage_options
from .record import FrozenRecord

__all__ = [
    "HduInfo",
    "FileInfo",
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
KIND_GROUPS = "groups"  # HduInfo.kind of a random-groups primary


def _locate(path: Any, hdu: Any, *, allow_auto: bool = False,
            storage_options: dict[str, Any] | None = None) -> tuple[Any, HduEntry]:
    check_hdu_arg(hdu)
    fp = parse_path(with_storage_options(path, storage_options))
    index = get_index(fp.path)
    if fp.hdu is not None and hdu in (0, None, "auto"):
        hdu = fp.hdu
    return index, index.resolve(hdu, allow_auto=allow_auto)


def read_header(path: PathArg, hdu: HduArg = 0, *, compressed: bool = True,
                storage_options: dict[str, Any] | None = None) -> Header:
    """The typed header of one HDU (``None``/``"auto"`` picks the HDU as ``read`` does).

    Long CONTINUE strings are joined; HIERARCH keywords appear without the prefix. For a
    tile-compressed image this is the header as stored (the binary table: ``ZIMAGE``,
    ``ZBITPIX``, ``ZCMPTYPE``, ``ZTILEn`` …), as torchfits 1.x gives it; ``compressed=False``
    (or ``open_image(path, hdu).header``) gives the image's header, Z-keywords restored to
    BITPIX, NAXISn, ….
    """
    index, entry = _locate(path, hdu, allow_auto=True, storage_options=storage_options)
    if entry.kind == KIND_COMPRESSED and not compressed:
        from .tile_layout import image_header

        return image_header(index.header_view(entry), f"{index.path}: HDU {entry.index}")
    header: Header = index.header(entry)
    return header


def read_keys(path: PathArg, keys: Any, hdu: HduArg = 0) -> dict[str, Any]:
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


def read_num_hdus(path: PathArg) -> int:
    """Number of HDUs in the file."""
    return len(get_index(parse_path(path).path))


def read_hdu_type(path: PathArg, hdu: HduArg = 0) -> str:
    """``"IMAGE"`` (also compressed images and empty primaries), ``"BINARY_TABLE"`` or
    ``"ASCII_TABLE"``."""
    _, entry = _locate(path, hdu)
    return _HDU_TYPE.get(entry.kind, "IMAGE")


def read_shape(path: PathArg, hdu: HduArg = 0) -> tuple[int, tuple[int, ...]]:
    """``(bitpix, shape)``: storage BITPIX and the C-order shape (compressed: logical image)."""
    index, entry = _locate(path, hdu)
    if entry.is_table:
        raise HDUTypeError(f"{index.path}: HDU {entry.index} is a table: Could not read image parameters")
    bitpix, naxes = entry.image_layout
    return bitpix, tuple(reversed(naxes))


def read_extname(path: PathArg, hdu: HduArg = 0) -> str | None:
    """EXTNAME of the HDU, or None (also for a missing file or an index past the end)."""
    try:
        index, entry = _locate(path, hdu)
    except FitsFileNotFoundError:
        return None
    except HDUNotFoundError:
        if isinstance(hdu, (str, tuple)):
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


def read_colnames(path: PathArg, hdu: HduArg = 1) -> list[str]:
    """Column names (TTYPEn; ``colN`` for an unnamed column)."""
    _, entry, header = _table(path, hdu, "read_colnames")
    return _colnames(header, entry)


def read_nrows(path: PathArg, hdu: HduArg = 1) -> int:
    """Number of rows of a table HDU."""
    _, entry, _ = _table(path, hdu, "read_nrows")
    return entry.nrows


def read_table_info(path: PathArg, hdu: HduArg = 1) -> dict[str, Any]:
    """``{"nrows", "colnames", "tforms"}`` with TFORMs as written."""
    _, entry, header = _table(path, hdu, "read_table_info")
    tforms = [str(header.get(f"TFORM{i}", "")).strip() for i in range(1, entry.tfields + 1)]
    return {"nrows": entry.nrows, "colnames": _colnames(header, entry), "tforms": tforms}


class HduInfo(FrozenRecord):
    """A one-line summary of an HDU: ``index``, ``name``, ``kind`` (primary, image, bintable,
    table or compressed_image), ``shape`` (images: the C-order pixel shape; tables: (nrows,
    ncols)), ``bitpix``, ``dtype`` (the result dtype of an image read, compressed images too),
    ``nrows``, ``ncols``, ``codec`` and ``ncards``; for a random-groups HDU (kind ``groups``)
    ``gcount`` and ``pcount``, with ``shape`` the (GCOUNT, NAXISn..NAXIS2) shape of its data."""

    __slots__ = ("index", "name", "kind", "shape", "bitpix", "dtype", "nrows", "ncols", "codec",
                 "ncards", "gcount", "pcount")
    index: int
    name: str
    kind: str
    shape: tuple[int, ...]
    bitpix: int | None
    dtype: str | None
    nrows: int | None
    ncols: int | None
    codec: str | None
    ncards: int
    gcount: int | None
    pcount: int | None

    def __init__(self, index: int, name: str, kind: str, shape: tuple[int, ...],
                 bitpix: int | None, dtype: str | None, nrows: int | None,
                 ncols: int | None, codec: str | None, ncards: int,
                 gcount: int | None = None, pcount: int | None = None) -> None:
        for field, value in zip(self.__slots__, (index, name, kind, shape, bitpix, dtype, nrows,
                                                 ncols, codec, ncards, gcount, pcount)):
            object.__setattr__(self, field, value)

    @property
    def type(self) -> str:
        """``EMPTY`` (an HDU without data), ``IMAGE``, ``COMPRESSED_IMAGE``, ``GROUPS`` (random
        groups), ``BINTABLE`` or ``TABLE``."""
        if self.kind in (KIND_BINTABLE, KIND_TABLE):
            return "BINTABLE" if self.kind == KIND_BINTABLE else "TABLE"
        if self.kind == KIND_GROUPS:
            return "GROUPS"
        if not self.shape or 0 in self.shape:
            return "EMPTY"
        return "COMPRESSED_IMAGE" if self.kind == KIND_COMPRESSED else "IMAGE"

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.field_names()}


_INFO_COLUMNS = ("No.", "Name", "Type", "Dimensions", "Format", "Cards")


class FileInfo(list[HduInfo]):  # a list, so loops and indexing work as before
    """:func:`info`'s result: a list of :class:`HduInfo` (iterate, index, ``len``) whose repr
    is a table of the HDUs, like ``astropy.io.fits.info``."""

    def __init__(self, path: str, hdus: list[HduInfo]) -> None:
        super().__init__(hdus)
        self.path = path

    def rows(self) -> list[tuple[str, ...]]:
        """The table cells: index, name, type, dimensions, format, cards."""
        out: list[tuple[str, ...]] = []
        for h in self:
            if h.nrows is not None:
                dims = f"{h.nrows} rows x {h.ncols} cols"
                fmt = ""
            else:
                dims = "x".join(str(n) for n in h.shape) if h.shape and 0 not in h.shape else ""
                fmt = (h.dtype or "") if dims else ""
                if h.codec:
                    fmt = f"{fmt} ({h.codec})".strip()
                if h.kind == KIND_GROUPS:
                    dims = "x".join(str(n) for n in h.shape[1:])
                    fmt = (f"{h.dtype or ''} ({h.gcount} groups, {h.pcount} parameters)").strip()
            out.append((str(h.index), h.name, h.type, dims, fmt, str(h.ncards)))
        return out

    def __repr__(self) -> str:
        rows = [_INFO_COLUMNS] + self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(_INFO_COLUMNS))]
        lines = [f"{self.path}: {len(self)} HDU{'s' if len(self) != 1 else ''}"]
        for r in rows:
            lines.append("  ".join(c.rjust(w) if i in (0, 5) else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        import html

        head = "".join(f"<th>{html.escape(c)}</th>" for c in _INFO_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self.rows())
        return (f"<p><code>{html.escape(self.path)}</code></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _compressed_dtype(index: Any, e: HduEntry) -> str | None:
    """The dtype a read of a tile-compressed image returns: ZBITPIX with the image's
    BSCALE/BZERO/BLANK (ZBLANK) rules, like a plain image."""
    from types import SimpleNamespace

    from .image_plan import plan_image  # numpy-only

    h = index.header_view(e)
    zbitpix = h.get("ZBITPIX")
    if not isinstance(zbitpix, int) or zbitpix not in (8, 16, 32, 64, -32, -64):
        return None
    plan_header = {k: h.get(k) for k in ("BSCALE", "BZERO", "BLANK") if h.get(k) is not None}
    if "BLANK" not in plan_header and isinstance(h.get("ZBLANK"), int):
        plan_header["BLANK"] = h.get("ZBLANK")
    fake = SimpleNamespace(bitpix=zbitpix, naxes=(1,), shape=(1,))
    try:
        return str(plan_image(fake, plan_header).dtype)  # type: ignore[arg-type]
    except (FitsError, KeyError, TypeError, ValueError):
        return None


def info(path: PathArg, *, storage_options: dict[str, Any] | None = None) -> FileInfo:
    """Summaries of every HDU in the file: a list of :class:`HduInfo` whose repr is a table."""
    from .image_plan import groups_plans, plan_image  # numpy-only

    fp = parse_path(with_storage_options(path, storage_options))
    index = get_index(fp.path)
    out = []
    for e in index.entries:
        if e.is_table:
            out.append(HduInfo(e.index, e.display_name, e.kind, (e.nrows, e.tfields), None, None,
                               e.nrows, e.tfields, None, e.ncards))
            continue
        bitpix, naxes = e.image_layout
        dtype = None
        if e.is_groups:
            try:
                plan, _ = groups_plans(e, index.header_view(e), False)
                dtype = str(plan.dtype)
            except FitsError:
                dtype = None
            out.append(HduInfo(e.index, e.display_name, KIND_GROUPS, (e.gcount,) + tuple(reversed(naxes[1:])),
                               bitpix, dtype, None, None, None, e.ncards, e.gcount, e.pcount))
            continue
        if e.is_image:
            try:
                dtype = str(plan_image(e, index.header_view(e)).dtype)
            except FitsError:
                dtype = None
        elif e.kind == KIND_COMPRESSED:
            dtype = _compressed_dtype(index, e)
        out.append(HduInfo(e.index, e.display_name, e.kind, tuple(reversed(naxes)), bitpix, dtype,
                           None, None, e.zcmptype, e.ncards))
    return FileInfo(fp.path, out)

"""Header cards of the HDUs the package writes: the keywords the writer owns, the user's extra
cards merged after them, and the finished header block.

Every card a writer or editor formats goes through `card_lines`, which refuses what FITS cannot
hold (a byte outside printable ASCII, NaN or infinity, a container as a value, a malformed or
too long keyword) with `HeaderCardError` before anything is written, and writes a list of
COMMENT/HISTORY/blank-keyword values (or one value with newlines) as one card per line.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import HeaderCardError, UInt64WriteError
from ..fits.header import COMMENTARY, Card, Header, format_card
from ..fits.layout import finish_header

__all__ = ["STRUCTURAL", "is_structural", "header_lines", "header_block", "as_header",
           "card_lines", "card_bytes", "named_errors", "checked_header"]

# Keywords the writer owns: user values for these are ignored.
STRUCTURAL = frozenset({"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
                        "TFIELDS", "THEAP", "BSCALE", "BZERO", "BLANK", "END"})

_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]")
_STANDARD_KEY = re.compile(r"[A-Z0-9_-]{1,8}")
_CONTAINERS = (list, tuple, dict, set, frozenset, bytes, bytearray, np.ndarray)


def _where_bad(text: str) -> str | None:
    """How the first character outside printable ASCII in ``text`` is described, or None."""
    m = _NOT_PRINTABLE.search(text)
    if m is None:
        return None
    ch = m.group()
    name = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(ch)
    what = name or (f"control character 0x{ord(ch):02X}" if ord(ch) < 0x80
                    else f"non-ASCII character {ch!r} (U+{ord(ch):04X})")
    return f"{what} at position {m.start()}"


def _check_keyword(key: Any) -> None:
    if not isinstance(key, str):
        raise HeaderCardError(f"header keyword {key!r}: keywords are strings, not {type(key).__name__}")
    bad = _where_bad(key)
    if bad:
        raise HeaderCardError(f"header keyword {key!r}: {bad}; FITS keywords are printable ASCII "
                              "(0x20-0x7E)")
    if key in COMMENTARY or _STANDARD_KEY.fullmatch(key):
        return
    # Anything else is written as a HIERARCH card: ``HIERARCH <key> = <value>``.
    if not key.strip():
        raise HeaderCardError(f"header keyword {key!r} is blank; only commentary cards have no keyword")
    if key != key.strip():
        raise HeaderCardError(f"header keyword {key!r}: leading or trailing blanks do not survive "
                              "a HIERARCH card")
    if "=" in key:
        raise HeaderCardError(f"header keyword {key!r} contains '=', which ends a HIERARCH keyword")


def _check_text(key: str, what: str, text: str) -> None:
    bad = _where_bad(text)
    if bad:
        raise HeaderCardError(f"header keyword {key!r}: the {what} {text!r} has {bad}; FITS header "
                              "text is printable ASCII (0x20-0x7E)")


def _scalar(key: str, value: Any) -> Any:
    """A value's Python scalar, checked: finite numbers, printable text, no containers."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (str, bytes)) and getattr(value, "ndim", 1) == 0:
        value = item()
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise HeaderCardError(f"header keyword {key!r}: the value {value!r} cannot be written; "
                                  "FITS header values cannot be NaN or infinite")
        return value
    if isinstance(value, complex):
        if not (math.isfinite(value.real) and math.isfinite(value.imag)):
            raise HeaderCardError(f"header keyword {key!r}: the value {value!r} cannot be written; "
                                  "FITS header values cannot be NaN or infinite")
        return value
    if isinstance(value, _CONTAINERS):
        raise HeaderCardError(f"header keyword {key!r}: a {type(value).__name__} is not a FITS "
                              "header value (one str, bool, int, float or complex per card; "
                              "only COMMENT and HISTORY take a list, one card per item)")
    text = str(value)
    _check_text(key, "value", text)
    return text if not isinstance(value, str) else value


def _commentary_lines(key: str, value: Any) -> list[str]:
    """The lines of a commentary value: a list/tuple gives one line per item, and a newline in
    any item starts a new line (what ``str()`` of a read COMMENT/HISTORY list gives)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    lines: list[str] = []
    for item in items:
        if isinstance(item, np.generic):
            item = item.item()
        text = "" if item is None else str(item)
        for line in text.replace("\r\n", "\n").split("\n"):
            _check_text(key or "(blank keyword)", "commentary text", line)
            lines.append(line)
    return lines


def card_lines(key: Any, value: Any, comment: Any = "") -> list[str]:
    """One logical card as 80-character lines, refused with `HeaderCardError` when FITS cannot
    hold it. A COMMENT/HISTORY/blank-keyword value that is a list (or holds newlines) gives
    one card per line; a line longer than 72 characters continues on further cards."""
    _check_keyword(key)
    comment = "" if comment is None else str(comment)
    if key in COMMENTARY:
        return [line for text in _commentary_lines(key, value) for line in format_card(key, text, "")]
    value = _scalar(key, value)
    _check_text(key, "comment", comment)
    try:
        lines = format_card(key, value, comment)
    except ValueError:  # a value that cannot fit beside its keyword
        lines = [""]
    if any(len(line) != 80 for line in lines):
        raise HeaderCardError(f"header keyword {key!r} is too long: the keyword and its value do "
                              "not fit an 80-character card")
    return lines


def card_bytes(key: Any, value: Any, comment: Any = "") -> list[bytes]:
    """`card_lines` encoded: the 80-byte records of one logical card."""
    return [line.encode("ascii") for line in card_lines(key, value, comment)]


@contextmanager
def named_errors(path: Any = None, hdu: Any = None) -> Iterator[None]:
    """Add the file and HDU to a `HeaderCardError` or `UInt64WriteError` raised inside (once
    each); the error keeps its class."""
    try:
        yield
    except (HeaderCardError, UInt64WriteError) as exc:
        text = str(exc)
        if hdu is not None and not text.startswith(("HDU ", "Failed to write")):
            text = f"HDU {hdu}: {text}"
        if path is not None and not text.startswith("Failed to write"):
            text = f"Failed to write FITS file '{path}': {text}"
        if text == str(exc):
            raise
        raise type(exc)(text) from None


# Keywords that describe the layout of some other kind of HDU: table columns, random groups,
# a tile-compressed image. Copied from another HDU's header (``header=dict(read_header(f))``)
# they would make the HDU written invalid (fitsverify: "TFORM1 is not allowed in the array HDU")
# or make readers take a table for a compressed image, so they are dropped like structural ones.
_COLUMN_PREFIXES = ("TTYPE", "TFORM", "TZERO", "TSCAL", "TBCOL", "TDIM", "TNULL")
# Column descriptions a table keeps from the user's header but an image cannot have.
_DESCRIPTION_PREFIXES = ("TUNIT", "TDISP", "TCTYP", "TCUNI", "TCRVL", "TCDLT", "TCRPX", "TCROT",
                         "TLMIN", "TLMAX", "TDMIN", "TDMAX")
_GROUPS_PREFIXES = ("PTYPE", "PSCAL", "PZERO")
_COMPRESSION = frozenset({"GROUPS", "ZIMAGE", "ZCMPTYPE", "ZBITPIX", "ZNAXIS", "ZMASKCMP",
                          "ZQUANTIZ", "ZDITHER0", "ZSIMPLE", "ZTENSION", "ZEXTEND", "ZBLANK",
                          "ZPCOUNT", "ZGCOUNT", "ZHECKSUM", "ZDATASUM", "ZBLOCKED", "ZTHEAP"})
_COMPRESSION_PREFIXES = ("ZNAXIS", "ZTILE", "ZNAME", "ZVAL")


# Image keywords a table cannot have (fitsverify: "DATAMAX is not allowed in the Bin/ASCII table").
_IMAGE_ONLY = frozenset({"BUNIT", "DATAMAX", "DATAMIN"})


def _column_number(key: str, prefixes: tuple[str, ...]) -> int:
    """n of a ``<prefix>n`` keyword, or 0."""
    for p in prefixes:
        if key.startswith(p) and key[len(p):].isdigit():
            return int(key[len(p):])
    return 0


def is_structural(key: str, table: bool, tfields: int | None = None) -> bool:
    """Whether the writer owns ``key`` (or drops it) in an image (``table=False``) or table HDU:
    the structural keywords, those describing table columns, random groups or a
    tile-compressed image, which never belong to the HDU being written as given, keywords of the
    other HDU kind (column descriptions in an image; BUNIT/DATAMIN/DATAMAX in a table of
    ``tfields`` columns, and descriptions of columns it does not have)."""
    k = key.upper()
    if k in STRUCTURAL or k in _COMPRESSION or (k.startswith("NAXIS") and k[5:].isdigit()):
        return True
    if _column_number(k, _COLUMN_PREFIXES + _GROUPS_PREFIXES + _COMPRESSION_PREFIXES):
        return True
    if not table:
        return bool(_column_number(k, _DESCRIPTION_PREFIXES))
    if tfields is None:  # not the header of a table being written
        return False
    return k in _IMAGE_ONLY or _column_number(k, _DESCRIPTION_PREFIXES) > tfields


def header_lines(cards: Iterable[Card], user: Header | None, *, table: bool,
                 checksum: bool = False) -> tuple[list[str], dict[str, int]]:
    """80-character lines of a header (END and padding excluded) and the line number of each
    writer-owned keyword, so streamed writes can patch NAXIS2/PCOUNT/TFORMn afterwards."""
    lines: list[str] = []
    where: dict[str, int] = {}
    tfields: int | None = None
    for c in cards:
        where.setdefault(c.key, len(lines))
        lines += card_lines(c.key, c.value, c.comment)
        if c.key == "TFIELDS":
            tfields = int(c.value)
    # BLOCKED belongs to a primary header only (fitsverify: "not allowed in extensions").
    dropped = ("CHECKSUM", "DATASUM") + (() if "SIMPLE" in where else ("BLOCKED",))
    if user is not None:
        long_strings = False
        for c in user.cards:
            if c.key and (is_structural(c.key, table, tfields) or c.key in dropped):
                continue
            # The writer's own cards (column keywords from the data, EXTNAME from Arrow
            # metadata) win over the same keyword in the user's header; CONTINUE and LONGSTRN
            # are regenerated.
            if c.key in ("CONTINUE", "LONGSTRN") or c.key in where:
                continue
            formatted = card_lines(c.key, c.value, c.comment)
            long_strings = long_strings or (len(formatted) > 1 and c.key not in ("HISTORY", "COMMENT", ""))
            lines += formatted
        if long_strings:
            # Announce the CONTINUE long-string convention (as CFITSIO does).
            lines += format_card("LONGSTRN", "OGIP 1.0", "The OGIP Long String Convention may be used.")
    if checksum:
        lines += format_card("CHECKSUM", "0000000000000000", "HDU checksum")
        lines += format_card("DATASUM", "0", "data unit checksum")
    return lines, where


def header_block(cards: Iterable[Card], user: Header | None, *, table: bool,
                  checksum: bool = False) -> bytes:
    lines, _ = header_lines(cards, user, table=table, checksum=checksum)
    return finish_header(lines)


def as_header(header: Any) -> Header | None:
    """The caller's ``header=`` as a `Header`, every card checked (`HeaderCardError` before any
    I/O). A dict's COMMENT/HISTORY/blank-keyword value that is a list or tuple (what
    ``dict(read_header(f))`` holds) becomes one card per item."""
    if header is None:
        return None
    if isinstance(header, Header):
        out = header
    elif type(header).__module__.startswith("astropy"):
        out = Header.from_astropy(header)
    elif isinstance(header, Mapping):
        cards: list[Card] = []
        for key, value in header.items():
            if isinstance(key, str) and key.strip().upper() in ("COMMENT", "HISTORY", "") \
                    and isinstance(value, (list, tuple)):
                cards += [Card(key.strip().upper(), v, "") for v in value]
            elif isinstance(value, tuple) and len(value) == 2:
                cards.append(Card(key, value[0], "" if value[1] is None else value[1]))
            else:
                cards.append(Card(key, value, ""))
        for c in cards:
            _check_keyword(c.key)
        out = Header(cards)
    else:
        out = Header(header)
    for c in out.cards:
        card_lines(c.key, c.value, c.comment)
    return out


def checked_header(header: Any, path: Any = None, hdu: Any = None) -> Header | None:
    """`as_header` whose `HeaderCardError` names the file and HDU being written."""
    with named_errors(path, hdu):
        return as_header(header)

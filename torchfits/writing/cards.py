"""Header cards of the HDUs the package writes: the keywords the writer owns, the user's extra
cards merged after them, and the finished header block."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from ..fits.header import Card, Header, format_card
from ..fits.layout import finish_header

__all__ = ["STRUCTURAL", "is_structural", "header_lines", "header_block", "as_header"]

# Keywords the writer owns: user values for these are ignored.
STRUCTURAL = frozenset({"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
                        "TFIELDS", "THEAP", "BSCALE", "BZERO", "BLANK", "END"})


def is_structural(key: str, table: bool) -> bool:
    k = key.upper()
    if k in STRUCTURAL or (k.startswith("NAXIS") and k[5:].isdigit()):
        return True
    if table:
        for prefix in ("TTYPE", "TFORM", "TZERO", "TSCAL", "TBCOL", "TDIM", "TNULL"):
            if k.startswith(prefix) and k[len(prefix):].isdigit():
                return True
    return False


def header_lines(cards: Iterable[Card], user: Optional[Header], *, table: bool,
                 checksum: bool = False) -> tuple[list[str], dict[str, int]]:
    """80-character lines of a header (END and padding excluded) and the line number of each
    writer-owned keyword, so streamed writes can patch NAXIS2/PCOUNT/TFORMn afterwards."""
    lines: list[str] = []
    where: dict[str, int] = {}
    for c in cards:
        where.setdefault(c.key, len(lines))
        lines += format_card(c.key, c.value, c.comment)
    if user is not None:
        long_strings = False
        for c in user.cards:
            if c.key and (is_structural(c.key, table) or c.key in ("CHECKSUM", "DATASUM")):
                continue
            # The writer's own cards (column keywords from the data, EXTNAME from Arrow
            # metadata) win over the same keyword in the user's header; CONTINUE and LONGSTRN
            # are regenerated.
            if c.key in ("CONTINUE", "LONGSTRN") or c.key in where:
                continue
            formatted = format_card(c.key, c.value, c.comment)
            long_strings = long_strings or (len(formatted) > 1 and c.key not in ("HISTORY", "COMMENT", ""))
            lines += formatted
        if long_strings:
            # Announce the CONTINUE long-string convention (as CFITSIO does).
            lines += format_card("LONGSTRN", "OGIP 1.0", "The OGIP Long String Convention may be used.")
    if checksum:
        lines += format_card("CHECKSUM", "0000000000000000", "HDU checksum")
        lines += format_card("DATASUM", "0", "data unit checksum")
    return lines, where


def header_block(cards: Iterable[Card], user: Optional[Header], *, table: bool,
                  checksum: bool = False) -> bytes:
    lines, _ = header_lines(cards, user, table=table, checksum=checksum)
    return finish_header(lines)


def as_header(header: Any) -> Optional[Header]:
    if header is None or isinstance(header, Header):
        return header
    if type(header).__module__.startswith("astropy"):
        return Header.from_astropy(header)
    return Header(header)

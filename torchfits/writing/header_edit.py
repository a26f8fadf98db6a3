"""Edit header keywords of one HDU in a file: set, delete, rename.

Cards are edited as raw 80-byte records, so every other card stays byte for byte. When the
edited header still fits the blocks it occupied (and no checksum must be refreshed), only
those header blocks are rewritten in place; otherwise the file is rewritten atomically.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import HeaderCardError, KeywordNotFoundError
from ..fits.aliases import HduArg, PathArg
from ..fits.hdu_index import get_index, invalidate
from ..fits.header import COMMENTARY
from .atomic import in_place_errors, require_file
from .cards import card_bytes, named_errors
from .hdu_bytes import header_from_raw, raw_cards

__all__ = ["update_header", "raw_key"]

_PROTECTED = {"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT", "TFIELDS",
              "END", "CONTINUE", "THEAP"}


def raw_key(card: bytes) -> str:
    """A raw card's keyword; HIERARCH cards give the keyword after ``HIERARCH``."""
    head = card[:8].decode("ascii", "replace").rstrip().upper()
    if head == "HIERARCH":
        text = card[9:].decode("ascii", "replace")
        return text.split("=", 1)[0].strip().upper()
    return head


def _check_key(key: str) -> str:
    k = key.strip()
    if k.upper().startswith("HIERARCH "):
        k = k[9:].strip()
    upper = k.upper()
    if upper in _PROTECTED or (upper.startswith("NAXIS") and upper[5:].isdigit()):
        raise ValueError(f"keyword {key!r} is structural and cannot be edited")
    return k


def _groups(cards: list[bytes]) -> list[list[bytes]]:
    """Cards grouped as logical cards (a long string with its CONTINUE cards is one group)."""
    groups: list[list[bytes]] = []
    for card in cards:
        if raw_key(card) == "CONTINUE" and groups:
            groups[-1].append(card)
        else:
            groups.append([card])
    return groups


def update_header(path: PathArg, hdu: HduArg = 0, set: Mapping[str, Any] | None = None,
                  delete: Iterable[str] = (), rename: Mapping[str, str] | None = None) -> None:
    """Set, delete and rename keywords of one HDU.

    Parameters
    ----------
    path : str or os.PathLike
        The FITS file, edited in place (header blocks) or rewritten atomically.
    hdu : int or str
        HDU index or EXTNAME.
    set : dict, optional
        ``key → value`` or ``key → (value, comment)``; an existing keyword keeps its position
        (and comment, unless one is given); a new one goes before END. HISTORY/COMMENT values
        are appended as new commentary cards, one per item of a list or tuple (and per line
        of a value with newlines).
    delete : iterable of str
        Keywords to remove (every card of each); a missing keyword raises KeyError.
    rename : dict, optional
        ``old → new``; a missing keyword raises KeyError, and a ``new`` that is already in the
        header (after ``delete``) raises `HeaderCardError`, as it would leave two cards of one
        keyword.

    Raises
    ------
    HeaderCardError
        A keyword, value or comment FITS cannot hold (a character outside printable ASCII, NaN
        or infinity, a malformed keyword) or a rename onto an existing keyword; nothing is
        written, and the message names the file, the HDU and the keyword(s).
    """
    target = require_file(path)
    with named_errors(target, hdu):
        new_header, entry, idx, checksum = _edited_header(target, hdu, set, delete, rename)
    _write_header(target, idx, entry, new_header, checksum)


def _edited_header(target: str, hdu: HduArg, set: Mapping[str, Any] | None,
                   delete: Iterable[str], rename: Mapping[str, str] | None) -> tuple:
    """The new header block of the edited HDU (every new card checked), its entry and index,
    and whether checksums must be refreshed."""
    idx = get_index(target)
    entry = idx.resolve(hdu)
    groups = _groups(raw_cards(idx, entry))
    header = idx.header_view(entry)

    def positions(key: str) -> list[int]:
        wanted = key.upper()
        return [i for i, g in enumerate(groups) if raw_key(g[0]) == wanted]

    for key in delete:
        k = _check_key(key)
        where = positions(k)
        if not where:
            raise KeywordNotFoundError(f"missing keyword {key}")
        for i in reversed(where):
            del groups[i]
    for old, new in (rename or {}).items():
        k = _check_key(old)
        where = positions(k)
        if not where:
            raise KeywordNotFoundError(f"missing keyword {old}")
        n = _check_key(new)
        n = n if len(n) > 8 else n.upper()  # as ``set`` writes it (not a HIERARCH card)
        if n.upper() != k.upper() and n.upper() not in COMMENTARY and positions(n):
            # Two cards of one keyword: readers disagree on which one counts (astropy refuses
            # the rename for this reason).
            raise HeaderCardError(f"cannot rename {k.upper()} to {n.upper()}: {n.upper()} already "
                                  f"exists (delete {n.upper()} in the same edit to replace it)")
        old_value, old_comment = header[k], header.card(k).comment
        groups[where[0]] = card_bytes(n, old_value, old_comment)
    for key, value in (set or {}).items():
        k = _check_key(key)
        comment: str | None = None
        if k.upper() in COMMENTARY:  # every item of a list or tuple is a line
            groups.append(card_bytes(k.upper(), value))
            continue
        if isinstance(value, tuple) and len(value) == 2:
            value, comment = value
        where = positions(k)
        if where and comment is None:
            comment = header.card(k).comment if k in header else ""
        lines = card_bytes(k if len(k) > 8 else k.upper(), value, comment or "")
        if where:
            groups[where[0]] = lines
            for i in reversed(where[1:]):
                del groups[i]
        else:
            groups.append(lines)
    cards = [c for g in groups for c in g]
    checksum = "CHECKSUM" in header or "DATASUM" in header
    if checksum:
        cards = [c for c in cards if raw_key(c) not in ("CHECKSUM", "DATASUM")]
        from .checksum import ZERO_CHECKSUM

        cards += card_bytes("CHECKSUM", ZERO_CHECKSUM, "HDU checksum") + \
            card_bytes("DATASUM", "0", "data unit checksum")
    return header_from_raw(cards), entry, idx, checksum


def _write_header(target: str, idx: Any, entry: Any, new_header: bytes, checksum: bool) -> None:
    """Put ``new_header`` in place of ``entry``'s header: in its blocks when it fits them (and no
    checksum must be refreshed), else by rewriting the file atomically."""
    old_size = entry.data_offset - entry.header_offset
    if len(new_header) == old_size and not checksum:
        with in_place_errors(target), open(target, "r+b") as fh:
            fh.seek(entry.header_offset)
            fh.write(new_header)
            fh.flush()
            os.fsync(fh.fileno())
        invalidate(target)
        return
    from .checksum import replace_header

    replace_header(target, idx.source, entry, new_header, checksum=checksum)

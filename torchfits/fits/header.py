"""FITS headers: an ordered, case-insensitive mapping of typed values that also keeps every card.

`Header` is a ``dict`` (keyword → value of its first card) plus the ordered card list, so
commentary cards, repeated keywords and comments survive a read → edit → write cycle.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .layout import CARD
from .layout import padding as block_padding

__all__ = ["Card", "CommentaryLines", "Header", "format_card", "header_from_parsed", "with_values"]

COMMENTARY = frozenset({"HISTORY", "COMMENT", ""})
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
# a notebook shows this many cards of a header; the rest are counted under the table
_HTML_CARDS = 200


class Card(NamedTuple):
    """One header card: ``(key, value, comment)``; equal to the plain tuple."""

    key: str
    value: Any = None
    comment: str = ""

    @property
    def keyword(self) -> str:
        return self.key

    def __repr__(self) -> str:
        return f"Card(key={self.key!r}, value={self.value!r}, comment={self.comment!r})"


class CommentaryLines(list[str]):
    """Every line of a HISTORY or COMMENT keyword, in card order (what ``header["HISTORY"]``
    gives, as in astropy); ``str()`` joins them with newlines."""

    def __str__(self) -> str:
        return "\n".join(str(v) for v in self)


def _add_line(h: Header, key: str, value: Any) -> None:
    lines = dict.get(h, key)
    if isinstance(lines, CommentaryLines):
        lines.append(value)
    else:
        h._store(key, CommentaryLines([value]))


def _python_value(value: Any) -> Any:
    """NumPy scalars become the Python scalars FITS cards can hold."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (str, bytes)) and getattr(value, "ndim", 1) == 0:
        return item()
    return value


class _Comments:
    """``header.comments["KEY"]`` → first comment (astropy style); ``header.comments("KEY")`` →
    the comments of every card with that keyword (torchfits 1.x style)."""

    def __init__(self, header: Header) -> None:
        self._header = header

    def __getitem__(self, key: str) -> str:
        return self._header.card(key).comment

    def __call__(self, key: str) -> list[str]:
        k = self._header._canonical(key)
        return [c.comment for c in self._header._cards if c.key == k]


class Header(dict[str, Any]):
    """An ordered, case-insensitive FITS header.

    Parameters
    ----------
    cards : Header, dict, or sequence of ``Card`` / ``(key, value)`` / ``(key, value, comment)``
        Initial content. A dict value may be a ``(value, comment)`` tuple.

    Notes
    -----
    The mapping view gives the value of the *first* card of a keyword, except HISTORY and
    COMMENT, which give all their lines (a `CommentaryLines` list). ``del`` and ``pop`` remove
    every card of a keyword.
    """

    def __init__(self, cards: Any = None) -> None:
        super().__init__()
        self._cards: list[Card] = []
        self._folded: dict[str, str] = {}  # upper-cased keyword → keyword as stored
        if cards is None:
            return
        if isinstance(cards, Header):
            self._cards = list(cards._cards)
            self._folded = dict(cards._folded)
            # The stored pairs as they are: going through the other header's __getitem__
            # would canonicalise (and copy commentary lists) once per keyword.
            dict.update(self, dict.items(cards))
            for key in ("HISTORY", "COMMENT"):  # own lists, not the other header's
                if dict.__contains__(self, key):
                    dict.__setitem__(self, key, CommentaryLines(dict.__getitem__(self, key)))
        elif isinstance(cards, dict):
            for key, value in cards.items():
                if isinstance(value, tuple) and len(value) == 2:
                    self.append(Card(str(key), value[0], str(value[1])))
                else:
                    self.append(Card(str(key), value, ""))
        elif isinstance(cards, (list, tuple)):
            for item in cards:
                if isinstance(item, (Card, tuple, list)) and 2 <= len(item) <= 3:
                    self.append(Card(*item))
                else:
                    raise TypeError(f"cannot build a Header from a sequence containing {item!r}")
        else:
            raise TypeError(f"cannot build a Header from {type(cards).__name__}")

    # -- keyword canonicalisation -------------------------------------------------------------
    def _canonical(self, key: str) -> str:
        if not isinstance(key, str):
            raise TypeError(f"header keywords are strings, not {type(key).__name__}")
        if dict.__contains__(self, key):
            return key
        upper = key.upper()
        if upper.startswith("HIERARCH "):
            upper = upper[9:].strip()
            key = key[9:].strip()
        found = self._folded.get(upper)
        if found is not None:
            return found
        return upper if key == key.upper() or len(key) <= 8 else key

    def _store(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._folded[key.upper()] = key

    def _refresh(self, key: str) -> None:
        """Recompute the mapping value of ``key`` from the card list."""
        matching = [c for c in self._cards if c.key == key]
        if not matching:
            dict.pop(self, key, None)
            self._folded.pop(key.upper(), None)
        elif key in ("HISTORY", "COMMENT"):
            self._store(key, CommentaryLines(c.value for c in matching))
        else:
            self._store(key, matching[0].value)

    # -- mapping protocol -------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, self._canonical(key))
        return CommentaryLines(value) if isinstance(value, CommentaryLines) else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, self._canonical(key))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __setitem__(self, key: str, value: Any) -> None:
        key = self._canonical(key)
        comment = None
        if isinstance(value, tuple) and len(value) == 2:
            value, comment = value
        if key in ("HISTORY", "COMMENT"):
            for line in value if isinstance(value, list) else [value]:
                self.append(Card(key, _python_value(line), comment or ""))
            return
        if isinstance(value, list):
            self.remove(key, ignore_missing=True, remove_all=True)
            for item in value:
                self.append(Card(key, _python_value(item), comment or ""))
            return
        value = _python_value(value)
        for i, card in enumerate(self._cards):
            if card.key == key:
                self._cards[i] = Card(key, value, card.comment if comment is None else comment)
                self._refresh(key)
                return
        self.append(Card(key, value, comment or ""))

    def __delitem__(self, key: str) -> None:
        self.remove(key, remove_all=True)

    def pop(self, key: str, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        self.remove(key, remove_all=True)
        return value

    def popitem(self) -> tuple[str, Any]:
        if not self._cards:
            raise KeyError("popitem(): header is empty")
        key = self._cards[-1].key
        value = self[key]
        self.remove(key, remove_all=True)
        return key, value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Any = (), **kwargs: Any) -> None:  # type: ignore[override]
        if isinstance(other, Header):
            for card in other._cards:
                if card.key in COMMENTARY:
                    self.append(card)
                else:
                    self[card.key] = (card.value, card.comment)
        else:
            for key, value in dict(other).items():
                self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def clear(self) -> None:
        dict.clear(self)
        self._cards.clear()
        self._folded.clear()

    def copy(self) -> Header:
        return Header(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Header):
            return self._cards == other._cards
        return dict.__eq__(self, other)

    __hash__ = None

    def __reduce__(self) -> Any:
        return (_rebuild, (list(self._cards),))

    # -- card API ---------------------------------------------------------------------------------
    @property
    def cards(self) -> tuple[Card, ...]:
        return tuple(self._cards)

    @property
    def comments(self) -> _Comments:
        return _Comments(self)

    def append(self, card: Any) -> None:
        """Append a card (a ``Card`` or a ``(key, value[, comment])`` tuple)."""
        card = Card(*card) if not isinstance(card, Card) else card
        key = self._canonical(card.key) if card.key else ""
        card = Card(key, _python_value(card.value), card.comment or "")
        self._cards.append(card)
        # Appending changes the mapping only for a new keyword or a commentary line.
        if key in ("HISTORY", "COMMENT"):
            _add_line(self, key, card.value)
        elif not dict.__contains__(self, key):
            self._store(key, card.value)

    def insert(self, index: int, card: Any) -> None:
        """Insert a card before position ``index`` of the card list."""
        card = Card(*card) if not isinstance(card, Card) else card
        key = self._canonical(card.key) if card.key else ""
        self._cards.insert(index, Card(key, _python_value(card.value), card.comment or ""))
        self._refresh(key)

    def remove(self, key: str, *, ignore_missing: bool = False, remove_all: bool = False) -> None:
        """Remove the first card of ``key`` (every card with ``remove_all``)."""
        key = self._canonical(key)
        positions = [i for i, c in enumerate(self._cards) if c.key == key]
        if not positions:
            if ignore_missing:
                return
            raise KeyError(f"Keyword {key!r} not found")
        for i in reversed(positions if remove_all else positions[:1]):
            del self._cards[i]
        self._refresh(key)

    def card(self, key: str) -> Card:
        """The first card with ``key``."""
        k = self._canonical(key)
        for c in self._cards:
            if c.key == k:
                return c
        raise KeyError(f"Keyword {key!r} not found")

    def add_history(self, value: str) -> None:
        self.append(Card("HISTORY", value, ""))

    def add_comment(self, value: str) -> None:
        self.append(Card("COMMENT", value, ""))

    def get_history(self) -> list[Any]:
        return [c.value for c in self._cards if c.key == "HISTORY"]

    def get_comment(self) -> list[Any]:
        return [c.value for c in self._cards if c.key == "COMMENT"]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.keys(self))

    def __repr__(self) -> str:
        return "\n".join(format_card(c.key, _printable(c.value), c.comment)[0].rstrip()
                         for c in self._cards)

    def _repr_html_(self) -> str:
        from .notebook_html import html_table

        shown = self._cards[:_HTML_CARDS]
        rows = [(c.key, _printable(c.value), c.comment or "") for c in shown]
        return html_table(("keyword", "value", "comment"), rows, more=len(self._cards) - len(shown))

    # -- serialisation ----------------------------------------------------------------------------
    def tostring(self, sep: str = "", endcard: bool = True, padding: bool = True) -> str:
        """The header as FITS cards (80 characters each), with END and block padding."""
        lines: list[str] = []
        for c in self._cards:
            lines.extend(format_card(c.key, _printable(c.value), c.comment))
        if endcard:
            lines.append("END".ljust(CARD))
        text = sep.join(lines)
        if padding and not sep:
            text += " " * block_padding(len(text))
        return text

    def to_astropy(self) -> Any:
        """Convert to ``astropy.io.fits.Header`` (needs astropy)."""
        try:
            from astropy.io import fits
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("astropy is required for Header.to_astropy()") from exc
        return fits.Header.fromstring(self.tostring())

    @classmethod
    def from_astropy(cls, header: Any) -> Header:
        """Build from an ``astropy.io.fits.Header`` through its card text."""
        from .._kernels import _header

        text = header.tostring(padding=True).encode("ascii")
        cards = _header.parse_cards(text, 0, len(text))
        return header_from_parsed(cards)


def with_values(header: Header, positions: Iterable[tuple[int, Any]]) -> Header:
    """A copy of ``header`` whose cards at ``positions`` (index into ``header.cards``, new
    value) take new values, comments kept: one copy, no keyword lookups (the many stamp headers
    of a batch of cutouts). Each card must be the only one of its keyword."""
    out = Header(header)
    for i, value in positions:
        key, _, comment = out._cards[i]
        out._cards[i] = Card(key, value, comment)
        dict.__setitem__(out, key, value)
    return out


def _rebuild(cards: list[Card]) -> Header:
    h = Header()
    for c in cards:
        h.append(c)
    return h


def header_from_parsed(parsed: Iterable[tuple[Any, ...]], *, raw_values: bool = False) -> Header:
    """Assemble a `Header` from ``_header.parse_cards`` output, joining CONTINUE long strings.

    With ``raw_values`` the mapping holds the value text as written (the torchfits 1.x
    ``open()`` behaviour): unquoted strings, ``"T"``, ``"12.5"``.
    """
    h = Header()
    cards = h._cards
    for kind, key, value, comment, raw in parsed:
        if kind == 3:  # END
            break
        if kind == 2:  # CONTINUE: extend the previous long string when it asked for it
            if cards and isinstance(cards[-1].value, str) and cards[-1].value.endswith("&") \
                    and isinstance(value, str):
                prev = cards[-1]
                joined = prev.value[:-1] + value
                cmt = prev.comment + (comment if not prev.comment else (" " + comment if comment else ""))
                cards[-1] = Card(prev.key, joined, cmt)
                continue
            cards.append(Card("CONTINUE", value, comment))
            continue
        if raw_values and kind == 0 and not isinstance(value, str):
            value = raw
        cards.append(Card(key, value, comment))
    last: dict[str, Any] = {}
    for card in cards:
        if card.key in ("HISTORY", "COMMENT"):
            _add_line(h, card.key, card.value)
        elif not dict.__contains__(h, card.key):
            h._store(card.key, card.value)
        elif card.key not in COMMENTARY and card.key != "CONTINUE":
            last[card.key] = card.value
    if last:
        # The mapping keeps the first card (as astropy's Header does); readers that apply a
        # repeated keyword (BSCALE/BZERO/BLANK) use the last one, as CFITSIO and astropy do.
        h._last_of_duplicates = last  # type: ignore[attr-defined]
    return h


# -- card formatting ---------------------------------------------------------------------------
class _Verbatim(str):
    """Value text written as is (unquoted)."""


def _printable(value: Any) -> Any:
    """A value read from a file, ready to print: a number that overflowed a double on reading
    (``1E400`` reads as inf) prints as such a number again instead of blocking the header."""
    if isinstance(value, float) and not math.isfinite(value):
        return _Verbatim("NAN" if value != value else ("-1E400" if value < 0 else "1E400"))
    if isinstance(value, complex) and not (math.isfinite(value.real) and math.isfinite(value.imag)):
        def part(x: float) -> Any:
            return _format_float(x) if math.isfinite(x) else _printable(x)

        return _Verbatim(f"({part(value.real)}, {part(value.imag)})")
    return value


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, _Verbatim):
        return str(value).rjust(20)
    if isinstance(value, bool):
        return ("T" if value else "F").rjust(20)
    if isinstance(value, int):
        return str(value).rjust(20)
    if isinstance(value, float):
        return _format_float(value).rjust(20)
    if isinstance(value, complex):
        return f"({_format_float(value.real)}, {_format_float(value.imag)})".rjust(20)
    text = str(value).replace("'", "''")
    return f"'{text.ljust(8)}'".ljust(20)


def _format_float(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"FITS header values cannot be {value!r}")
    text = repr(value).upper()
    if "E" not in text and "." not in text:
        text += ".0"
    if len(text) > 20:
        text = f"{value:.16G}"
        if "E" not in text and "." not in text:
            text += ".0"
    return text


def format_card(key: str, value: Any, comment: str = "") -> list[str]:
    """Format one logical card as one or more 80-character FITS cards (CONTINUE for long
    strings, several lines for long commentary text, HIERARCH for long or spaced keys)."""
    value = _python_value(value)
    if key in COMMENTARY:
        text = "" if value is None else str(value)
        chunks = [text[i:i + 72] for i in range(0, len(text), 72)] or [""]
        return [(key.ljust(8) + chunk).ljust(CARD) for chunk in chunks]
    hierarch = len(key) > 8 or not set(key) <= _KEY_CHARS
    prefix = f"HIERARCH {key} = " if hierarch else f"{key.ljust(8)}= "
    if isinstance(value, str) and not isinstance(value, _Verbatim) \
            and len(prefix) + len(value.replace("'", "''")) + 2 > CARD:
        return _format_long_string(prefix, value, comment)
    body = prefix + _format_value(value)
    if comment:
        body += " / " + comment
    if len(body) > CARD:
        if len(prefix) + len(_format_value(value).rstrip()) > CARD:
            raise ValueError(f"header card {key!r} is too long for 80 characters")
        body = body[:CARD]
    return [body.ljust(CARD)]


def _format_long_string(prefix: str, value: str, comment: str) -> list[str]:
    """Split a long string over CONTINUE cards; each part but the last ends with '&'."""
    lines: list[str] = []
    room_first = CARD - len(prefix) - 3  # quotes and '&'
    room = CARD - 10 - 3
    rest = value
    first = True
    while True:
        limit = room_first if first else room
        part = ""
        # Take characters while the escaped part fits.
        while rest and len((part + rest[0]).replace("'", "''")) <= limit:
            part += rest[0]
            rest = rest[1:]
        escaped = part.replace("'", "''")
        head = prefix if first else "CONTINUE  "
        if rest:
            lines.append((head + f"'{escaped}&'").ljust(CARD))
        else:
            line = head + f"'{escaped}'"
            if comment and len(line) + 3 + len(comment) <= CARD:
                line += " / " + comment
            lines.append(line.ljust(CARD))
            break
        first = False
    return lines

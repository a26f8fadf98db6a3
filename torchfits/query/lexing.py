"""Lexical pieces shared by both where dialects: quoted literals, numbers, reserved words."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..errors import WhereSyntaxError

__all__ = [
    "RESERVED_WORDS", "TokenStream", "in_list", "quoted_end", "scan_quoted", "unescape_quoted",
    "number_or_none",
]

#: Words that are never column names in either dialect (compared case-insensitively).
RESERVED_WORDS = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "NONE"})


_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_PREFIXED_INT_RE = re.compile(r"^([+-]?)0([xXoObB])([0-9A-Fa-f]+)$")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def quoted_end(text: str, start: int) -> int:
    """The offset just past the quoted literal opening at ``start``, or -1 when it is unterminated.

    A backslash escapes the character after it; in a single-quoted literal a doubled quote
    (FITS's spelling) stands for one and does not close it.
    """
    quote = text[start]
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            i += 2
        elif ch != quote:
            i += 1
        elif quote == "'" and text[i + 1 : i + 2] == "'":
            i += 2
        else:
            return i + 1
    return -1


def unescape_quoted(inner: str, quote: str) -> str:
    """The value of a quoted literal's content: ``\\<quote>`` and ``\\\\`` escapes undone, and in
    a single-quoted literal a doubled quote read as one; any other backslash stays."""
    out: list[str] = []
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner) and inner[i + 1] in (quote, "\\"):
            out.append(inner[i + 1])
            i += 2
        elif quote == "'" and ch == "'" and inner[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def scan_quoted(text: str, start: int) -> tuple[str, int]:
    """Read the quoted literal opening at ``start``; return its unescaped content and end offset."""
    end = quoted_end(text, start)
    if end < 0:
        raise WhereSyntaxError(
            f"Unterminated quoted literal in where expression (quote opened at position {start})"
        )
    return unescape_quoted(text[start + 1 : end - 1], text[start]), end


def number_or_none(text: str) -> Any | None:
    """Return ``text`` as an int or float when it is spelled as one, else None."""
    if _INT_RE.match(text):
        try:
            return int(text)
        except ValueError:  # beyond Python's int-from-string digit limit
            return float(text)
    prefixed = _PREFIXED_INT_RE.match(text)
    if prefixed:
        sign, base_letter, digits = prefixed.groups()
        base = {"x": 16, "o": 8, "b": 2}[base_letter.lower()]
        try:
            value = int(digits, base)
        except ValueError:
            return None
        return -value if sign == "-" else value
    if _FLOAT_RE.match(text):
        return float(text)
    return None


T = TypeVar("T")


class TokenStream(Protocol):
    """What :func:`in_list` needs of a parser: its tokens (with ``kind``) one at a time."""

    def peek(self) -> Any: ...

    def advance(self) -> Any: ...

    def end_error(self) -> WhereSyntaxError: ...


def in_list(stream: TokenStream, item: Callable[[], T], kinds: tuple[str, str, str],
            misplaced: Callable[[Any], WhereSyntaxError]) -> list[T]:
    """The values of an IN list: ``(item, item, ...)``, ``()``, or one item without parentheses.

    ``kinds`` are the stream's token kinds for the opening and closing parenthesis and the comma;
    ``misplaced(token)`` is the error for a token where a comma or the closing parenthesis belongs.
    """
    lparen, rparen, comma = kinds
    tok = stream.peek()
    if tok is None:
        raise stream.end_error()
    if tok.kind != lparen:
        return [item()]
    stream.advance()
    values: list[T] = []
    tok = stream.peek()
    if tok is not None and tok.kind == rparen:
        stream.advance()
        return values
    while True:
        values.append(item())
        tok = stream.peek()
        if tok is None:
            raise stream.end_error()
        if tok.kind not in (rparen, comma):
            raise misplaced(tok)
        stream.advance()
        if tok.kind == rparen:
            return values

"""Lexical pieces shared by both where dialects: quoted literals, numbers, reserved words."""
from __future__ import annotations

import re
from typing import Any

from ..errors import WhereSyntaxError

__all__ = ["RESERVED_WORDS", "scan_quoted", "number_or_none"]

#: Words that are never column names in either dialect (compared case-insensitively).
RESERVED_WORDS = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "NONE"})


_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_PREFIXED_INT_RE = re.compile(r"^([+-]?)0([xXoObB])([0-9A-Fa-f]+)$")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def scan_quoted(text: str, start: int) -> tuple[str, int]:
    """Read the quoted literal opening at ``start``; return its unescaped content and end offset."""
    quote = text[start]
    out: list[str] = []
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in (quote, "\\"):
            out.append(text[i + 1])
            i += 2
            continue
        if ch == quote:
            # FITS writes a quote inside a single-quoted string by doubling it
            if quote == "'" and i + 1 < n and text[i + 1] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise WhereSyntaxError(
        f"Unterminated quoted literal in where expression (quote opened at position {start})"
    )


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

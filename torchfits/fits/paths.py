"""Path handling: ``os.PathLike`` → str and CFITSIO extended syntax on the last path component.

``file.fits[1]`` / ``file.fits[SCI]`` select an HDU; ``file.fits[x1:x2,y1:y2]`` (1-based,
inclusive, optional ``:step``, ``*`` for a whole axis) selects an image section.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import UnsafePathError

__all__ = ["FitsPath", "parse_path", "fspath", "check_safe_path"]

_FILTER = re.compile(r"\[([^\[\]]*)\]$")


@dataclass(frozen=True)
class FitsPath:
    path: str
    hdu: Any = None  # int or EXTNAME from a ``[...]`` suffix
    section: Optional[tuple] = None  # a NumPy key (C order) from an image-section suffix


# Schemes CFITSIO (or a shell) would act on instead of opening a file, refused in any case.
_SHELL_SCHEMES = frozenset({"shell", "sh", "bash", "cmd", "exec", "pipe", "stdin", "stdout",
                            "mem", "shmem", "compress", "root", "irafmem"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def check_safe_path(p: str) -> str:
    """Refuse what would run a command rather than name a file: pipes, a leading ``!``,
    command substitution, and shell-like schemes (``shell://``, ``stdin``, ``mem://`` …)."""
    scheme = _SCHEME.match(p)
    bad = ("|" in p or p.lstrip().startswith("!") or "`" in p or "$(" in p
           or p.strip().lower() in ("-", "stdin", "stdout")
           or (scheme is not None and scheme.group(1).lower() in _SHELL_SCHEMES))
    if bad:
        raise UnsafePathError(f"Security Error: refusing path {p!r}: pipes, '!' prefixes, command "
                              "substitution and shell-like schemes are not file names")
    return p


def fspath(path: Any) -> str:
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        return check_safe_path(p.decode() if isinstance(p, bytes) else p)
    raise ValueError("Path must be a string or list of strings")


def _section(text: str) -> Optional[tuple]:
    parts = [p.strip() for p in text.split(",")]
    key = []
    for part in parts:
        if part == "*":
            key.append(slice(None))
            continue
        m = re.fullmatch(r"(-?\d+):(-?\d+)(?::(\d+))?", part)
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2))
        step = int(m.group(3) or 1)
        if lo < 1 or hi < lo or step < 1:
            raise ValueError(f"invalid image section {text!r}: ranges are 1-based and ascending")
        key.append(slice(lo - 1, hi, step))
    return tuple(reversed(key))  # FITS axis order → C order


def parse_path(path: Any) -> FitsPath:
    """Split CFITSIO filters off the final path component (only if the literal path is absent)."""
    p = fspath(path)
    if not p:
        raise ValueError("Path must be a non-empty string")
    if os.path.exists(p) or "[" not in os.path.basename(p):
        return FitsPath(p)
    hdu: Any = None
    section = None
    rest = p
    while True:
        m = _FILTER.search(rest)
        if not m or "[" not in os.path.basename(rest):
            break
        inner = m.group(1).strip()
        rest = rest[: m.start()]
        sec = _section(inner) if ":" in inner or inner == "*" else None
        if sec is not None:
            section = sec
        elif inner.isdigit():
            hdu = int(inner)
        elif inner:
            hdu = inner
    return FitsPath(rest, hdu, section)

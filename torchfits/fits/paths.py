"""Path handling: ``os.PathLike`` → str and CFITSIO extended syntax on the last path component.

``file.fits[1]`` / ``file.fits[SCI]`` / ``file.fits[SCI,2]`` (EXTNAME, EXTVER) select an HDU;
``file.fits[x1:x2,y1:y2]`` (1-based, inclusive, optional ``:step``, ``*`` for a whole axis) selects
an image section.
"""
from __future__ import annotations

import os
import re
from typing import Any

from ..errors import UnsafePathError
from .record import FrozenRecord

__all__ = ["FitsPath", "SourcePath", "parse_path", "hdu_suffix", "fspath", "check_safe_path",
           "with_storage_options", "is_local_path", "is_url", "is_glob", "display_name"]

_FILTER = re.compile(r"\[([^\[\]]*)\]$")


class FitsPath(FrozenRecord):
    """A source with what its CFITSIO-style suffix selected: ``path`` (a local path str, a
    `SourcePath`, bytes-like contents or a file object), ``hdu`` (an int, an EXTNAME or an
    (EXTNAME, EXTVER) pair from a ``[...]`` suffix) and ``section`` (a NumPy key, C order, from an
    image-section suffix)."""

    __slots__ = ("path", "hdu", "section")
    path: Any
    hdu: Any
    section: tuple | None

    def __init__(self, path: Any, hdu: Any = None, section: tuple | None = None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "hdu", hdu)
        object.__setattr__(self, "section", section)


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


class SourcePath(FrozenRecord):
    """An fsspec URL together with its ``storage_options`` (what ``storage_options=`` makes)."""

    __slots__ = ("url", "storage_options")
    url: str
    storage_options: dict | None

    def __init__(self, url: str, storage_options: dict | None = None) -> None:
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "storage_options", storage_options)

    def __str__(self) -> str:
        return self.url


def with_storage_options(path: Any, storage_options: dict | None) -> Any:
    """``path`` bound to ``storage_options`` (unchanged when there are none)."""
    if not storage_options:
        return path
    if isinstance(path, (list, tuple)):
        return type(path)(with_storage_options(p, storage_options) for p in path)
    if isinstance(path, SourcePath):
        return SourcePath(path.url, dict(path.storage_options or {}, **storage_options))
    if isinstance(path, (str, os.PathLike)):
        return SourcePath(fspath(path), dict(storage_options))
    raise TypeError("storage_options apply to paths and URLs, not to "
                    f"{type(path).__name__} sources")


def is_glob(text: str) -> bool:
    """Whether a path or URL part has glob characters (``*``, ``?``, ``[``): it names files to find."""
    return any(ch in text for ch in "*?[")


def is_url(text: Any) -> bool:
    """True for ``scheme://...`` strings (``file://`` included) and the ``vos:`` short forms."""
    if not isinstance(text, str):
        return False
    if text.startswith(("vos:", "vault:")):
        return True
    head, sep, _ = text.partition("://")
    return bool(sep) and (head.replace("::", "").replace("+", "").replace("-", "").isalnum()
                          or "::" in head)


def is_local_path(path: Any) -> bool:
    """A str/PathLike naming a local file (not a URL, not bytes, not a file object)."""
    if isinstance(path, SourcePath) or not isinstance(path, (str, os.PathLike)):
        return False
    p = os.fspath(path)
    if isinstance(p, bytes):
        return True
    return "://" not in p and not p.startswith(("vos:", "vault:"))


def display_name(path: Any) -> str:
    """A printable name for any source."""
    if isinstance(path, (str, os.PathLike)):
        return fspath(path)
    name = getattr(path, "name", None)
    return name if isinstance(name, str) else f"<{type(path).__name__}>"


def fspath(path: Any) -> str:
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        return check_safe_path(p.decode() if isinstance(p, bytes) else p)
    raise ValueError("Path must be a string or list of strings")


def refuse_cfitsio_special(p: str) -> None:
    # CFITSIO reads "|cmd" / "!name" / "-" as pipes, overwrite markers and stdin: never run them.
    if p.startswith("|") or p.rstrip().endswith("|"):
        raise ValueError(f"{p!r}: CFITSIO-style pipes are not supported (torchfits never runs "
                         "commands); open the data yourself and pass bytes or a file object")
    if p.startswith("!") and not os.path.exists(p):
        raise ValueError(f"{p!r}: the CFITSIO '!' overwrite prefix is not supported; pass "
                         "overwrite=True to the writer instead")


def _section(text: str) -> tuple | None:
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
    if isinstance(path, SourcePath):
        parsed = parse_path(path.url)
        return FitsPath(SourcePath(parsed.path, path.storage_options), parsed.hdu, parsed.section)
    if not isinstance(path, (str, os.PathLike)):
        if path is None or isinstance(path, (int, float, list, tuple, dict)):
            raise ValueError("Path must be a string or list of strings")
        return FitsPath(path)  # bytes-like contents or a file object
    p = fspath(path)
    if not p:
        raise ValueError("Path must be a non-empty string")
    refuse_cfitsio_special(p)
    check_safe_path(p)
    remote = "://" in p or p.startswith(("vos:", "vault:"))
    # A name without "[" has no suffix to split: no stat needed to know it is the literal path.
    if "[" not in os.path.basename(p) or (not remote and os.path.exists(p)):
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
            name, sep, ver = inner.partition(",")
            # [SCI,2]: EXTNAME and EXTVER, as CFITSIO reads them
            hdu = (name.strip(), int(ver)) if sep and ver.strip().isdigit() and name.strip() else inner
    return FitsPath(rest, hdu, section)


def hdu_suffix(path: Any) -> FitsPath | None:
    """What a path names where brackets may also be glob characters (``dataset``, ``sql``, the
    torch datasets): a local path that exists is a file (None); else a name ending in ``[...]``
    whose part before the brackets exists is that file with its CFITSIO suffix (the
    `FitsPath`); else None (a glob, or a missing file). A URL ending in ``[...]`` always names
    an HDU (as in `read` and `scan`): telling an object from a glob would cost a request, and
    object globs do not end in ``]``."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    p = fspath(path)
    if not p.endswith("]") or "[" not in p.rsplit("/", 1)[-1] or p.startswith(("vos:", "vault:")):
        return None
    if "://" in p:
        fp = parse_path(p)
        return fp if isinstance(fp.path, str) and fp.path != p else None
    if os.path.exists(p):
        return None
    fp = parse_path(p)
    return fp if isinstance(fp.path, str) and fp.path != p and os.path.isfile(fp.path) else None

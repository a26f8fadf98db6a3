"""Where cached remote blocks and gzip seek indexes live, how big the cache may grow, clearing it.

Layout under ``remote_cache_root()``: one sparse mirror file per remote object version plus a
``.json`` sidecar (the validator: size, ETag, mtime; and the bitmap of blocks present). The
least recently used mirrors are removed when the directory outgrows its budget
(``TORCHFITS_REMOTE_CACHE_GB``, default 10).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

__all__ = ["cache_root", "remote_cache_root", "mirror_path", "trim", "usage", "clear_remote",
           "budget_bytes"]


def cache_root() -> Path:
    """``$TORCHFITS_CACHE_DIR``, else ``$XDG_CACHE_HOME/torchfits``, else ``~/.cache/torchfits``."""
    env = os.environ.get("TORCHFITS_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "torchfits"
    return Path.home() / ".cache" / "torchfits"


def remote_cache_root() -> Path:
    """``$TORCHFITS_REMOTE_CACHE``, else ``cache_root()/remote``."""
    env = os.environ.get("TORCHFITS_REMOTE_CACHE")
    return Path(env) if env else cache_root() / "remote"


def budget_bytes() -> int:
    try:
        gb = float(os.environ.get("TORCHFITS_REMOTE_CACHE_GB", "10"))
    except ValueError:
        gb = 10.0
    return int(gb * (1 << 30))


def mirror_path(url: str, validator: dict, root: Path | None = None) -> str:
    """The mirror file of one object version (the URL and validator name it)."""
    ident = repr((url, sorted((k, str(v)) for k, v in validator.items())))
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return str((root or remote_cache_root()) / digest[:2] / f"{digest}.blocks")


def _mirrors(root: Path) -> list[Path]:
    return list(root.glob("*/*.blocks")) if root.is_dir() else []


def usage(root: Path | None = None) -> dict:
    """Files and bytes the block cache holds on disk (sparse files count what they store)."""
    root = root or remote_cache_root()
    files = _mirrors(root)
    stored = 0
    for f in files:
        try:
            st = f.stat()
            stored += getattr(st, "st_blocks", 0) * 512 or st.st_size
        except OSError:
            pass
    return {"path": str(root), "files": len(files), "bytes": stored}


def trim(root: Path | None = None, budget: int | None = None, keep: str | None = None) -> int:
    """Remove least recently used mirrors until the cache fits ``budget``; returns files removed."""
    root = root or remote_cache_root()
    budget = budget_bytes() if budget is None else budget
    entries = []
    total = 0
    for f in _mirrors(root):
        try:
            st = f.stat()
        except OSError:
            continue
        used = getattr(st, "st_blocks", 0) * 512 or st.st_size
        total += used
        entries.append((st.st_mtime, used, f))
    removed = 0
    for _, used, f in sorted(entries):
        if total <= budget:
            break
        if keep is not None and str(f) == keep:
            continue
        for p in (f, Path(str(f) + ".json")):
            try:
                p.unlink()
            except OSError:
                pass
        total -= used
        removed += 1
    return removed


def clear_remote(root: Path | None = None) -> None:
    """Delete every cached mirror and gzip seek index."""
    root = root or remote_cache_root()
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(cache_root() / "gzindex", ignore_errors=True)

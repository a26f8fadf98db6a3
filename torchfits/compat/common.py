"""Argument checks and small helpers shared by the torchfits 1.x functions and objects."""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["check_mmap", "require_module", "hdu_name"]


def check_mmap(mmap: Any) -> None:
    """Validate the 1.x ``mmap=`` argument (``bool`` or ``"auto"``).

    The engine always maps local files; the argument only ever chose an I/O strategy, but a wrong
    value is still refused as 1.x did.
    """
    if isinstance(mmap, bool) or (isinstance(mmap, str) and mmap.lower() == "auto"):
        return
    raise ValueError("mmap must be bool or 'auto'")


def require_module(module: str, package: str, what: str) -> Any:
    """Import an optional dependency, or say which package to install for ``what``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{package} is required for {what}: pip install {package}") from exc


def hdu_name(header: Mapping[str, Any], index: int | None, default: str = "") -> str:
    """The name an HDU object shows: its EXTNAME, else ``PRIMARY`` for HDU 0, else ``HDU<n>``
    (``default`` for an in-memory HDU that has no position in a file)."""
    name = header.get("EXTNAME")
    if name is not None and str(name).strip():
        return str(name).strip()
    if index is None:
        return default
    return "PRIMARY" if index == 0 else f"HDU{index}"

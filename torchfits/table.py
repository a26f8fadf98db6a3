"""``torchfits.table``: the torchfits 1.x table API.

Kept for the 1.x import path; the code lives in :mod:`torchfits.compat.table`.
"""
from typing import Any

from .compat import table as _impl
from .compat.table import *  # noqa: F401,F403
from .compat.table import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

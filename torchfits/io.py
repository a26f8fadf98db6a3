"""``torchfits.io``: the torchfits 1.x read functions and cache-subsystem helpers.

Kept for the 1.x import path; the code lives in :mod:`torchfits.compat.reads`.
"""
from typing import Any

from .compat import reads as _impl
from .compat.reads import *  # noqa: F401,F403
from .compat.reads import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

"""``torchfits.cache``: the torchfits 1.x cache controls.

Kept for the 1.x import path; the code lives in :mod:`torchfits.compat.cache`.
"""
from typing import Any

from .compat import cache as _impl
from .compat.cache import *  # noqa: F401,F403
from .compat.cache import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

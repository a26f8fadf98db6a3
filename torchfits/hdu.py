"""``torchfits.hdu``: the torchfits 1.x object API (open, HDUList, TensorHDU, ...).

Kept for the 1.x import path; the code lives in :mod:`torchfits.compat.hdulist`.
"""
from typing import Any

from .compat import hdulist as _impl
from .compat.hdulist import *  # noqa: F401,F403
from .compat.hdulist import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

"""``torchfits.where``: the torchfits 1.x where dialect (tokenizer, tuple AST, NumPy evaluator).

Kept for the 1.x import path; the code lives in :mod:`torchfits.query.where_compat`.
"""
from typing import Any

from .query import where_compat as _impl
from .query.where_compat import *  # noqa: F401,F403
from .query.where_compat import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real module
    return getattr(_impl, name)

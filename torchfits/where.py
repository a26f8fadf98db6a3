"""``torchfits.where``: the torchfits 1.x where dialect (tokenizer, tuple AST, NumPy evaluator).

Kept for the 1.x import path; the parser lives in :mod:`torchfits.query.where_compat`, the
evaluator in :mod:`torchfits.compat.where_eval`.
"""
from typing import Any

from .compat import where_eval as _eval
from .compat.where_eval import *  # noqa: F401,F403
from .query import where_compat as _impl
from .query.where_compat import *  # noqa: F401,F403

__all__ = sorted(_impl.__all__ + _eval.__all__)


def __getattr__(name: str) -> Any:
    # names outside __all__ (lazy attributes, helpers) resolve in the real modules
    return getattr(_eval if hasattr(_eval, name) else _impl, name)

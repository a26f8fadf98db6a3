"""Progress bars for long work, through tqdm when it is installed (optional).

``progress=None`` means "only when stderr is a terminal"; ``True`` forces a bar (still needs
tqdm; without it nothing is shown); ``False`` never shows one. The bar writes to stderr, so
it never mixes with data written to stdout.
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar", "wants_progress"]


def wants_progress(progress: bool | None) -> bool:
    """Whether to draw a bar for a ``progress=`` argument."""
    if progress is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


class _NoBar:
    """Stands in for a tqdm bar when none is shown."""

    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def progress_bar(*, total: int | None, desc: str, enabled: bool | None, unit: str = "it") -> Any:
    """A tqdm bar (a context manager with ``update(n)``), or a silent stand-in when progress
    is off, not a terminal (``enabled=None``) or tqdm is not installed."""
    if not wants_progress(enabled):
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                disable=False, dynamic_ncols=True)

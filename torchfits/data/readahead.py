"""Read-ahead hints for local files: the kernel is asked to start reading a batch's files (or a
table's next chunk) before they are decoded, so their disk waits overlap instead of coming one
file at a time from a cold page cache. A hint never changes values; where the platform has no
``posix_fadvise`` (Windows, macOS) it is a no-op."""
from __future__ import annotations

import os
from collections.abc import Iterable

from ..fits.paths import is_url
from ..fits.sources.local import OPEN_READ

__all__ = ["will_need", "will_need_range", "FILE_AHEAD"]

FILE_AHEAD = 4 << 20
"""Bytes from the start of each batch file asked for: stamps whole, while a batch of big
multi-extension files cannot pull gigabytes it may never read into the page cache."""


def _advise(path: str, offset: int, size: int) -> None:
    try:
        fd = os.open(path, OPEN_READ)
    except OSError:
        return  # the read that follows raises the right error
    try:
        os.posix_fadvise(fd, offset, size, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass  # a hint only
    finally:
        os.close(fd)


def will_need(paths: Iterable[str]) -> None:
    """Ask the kernel to read the first `FILE_AHEAD` bytes of each local file of ``paths`` (a
    small file whole) now, in the background."""
    if not hasattr(os, "posix_fadvise"):
        return
    for path in paths:
        if not is_url(path):
            _advise(path, 0, FILE_AHEAD)


def will_need_range(path: str, offset: int, size: int) -> None:
    """Ask the kernel to read bytes ``[offset, offset + size)`` of the local file ``path``."""
    if size > 0 and hasattr(os, "posix_fadvise") and not is_url(path):
        _advise(path, offset, size)

"""Atomic file replacement: every writer fills a temporary file beside the target, fsyncs it and
renames it over the target, so a failure at any point leaves the original file untouched.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Any, BinaryIO, Iterator

from ..fits.hdu_index import invalidate
from ..fits.paths import fspath
from ..errors import FitsFileExistsError, FitsFileNotFoundError
from ..fits.layout import padding

__all__ = ["Sink", "atomic_output", "check_target"]



class Sink:
    """The byte stream a writer fills; counts bytes so callers can pad and patch by offset.

    Every byte of every writer passes through `write`, which is therefore the one place a test
    can inject an I/O failure (a full disk) into any write.
    """

    def __init__(self, fh: BinaryIO, path: str) -> None:
        self.fh = fh
        self.path = path
        self.offset = 0

    def write(self, data: Any) -> None:
        """Append ``data`` (anything exposing the buffer protocol)."""
        view = memoryview(data).cast("B")
        self.fh.write(view)
        self.offset += view.nbytes

    def pad(self, fill: bytes = b"\0") -> None:
        """Pad to the next 2880-byte block boundary with ``fill``."""
        n = padding(self.offset)
        if n:
            self.write(fill * n)

    def patch(self, offset: int, data: bytes) -> None:
        """Overwrite bytes already written (a header card fixed up after streaming)."""
        self.fh.flush()
        here = self.fh.tell()
        self.fh.seek(offset)
        self.fh.write(data)
        self.fh.seek(here)


def check_target(path: Any, *, overwrite: bool) -> str:
    """The target as a string, after the overwrite/directory checks every writer makes."""
    target = fspath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(f"{target} is a directory")
    if os.path.exists(target) and not overwrite:
        raise FitsFileExistsError(f"File '{target}' already exists. Use overwrite=True to overwrite.")
    return target


def require_file(path: Any) -> str:
    """The path of an existing regular file that an in-place edit will replace."""
    target = fspath(path)
    if not os.path.isfile(target):
        raise FitsFileNotFoundError(f"FITS file not found: {target}")
    return target


@contextmanager
def atomic_output(target: str) -> Iterator[Sink]:
    """Yield a `Sink` on a temporary file in ``target``'s directory; on success fsync it, give
    it the target's mode (or the umask default) and rename it over ``target``; on any failure
    delete it and re-raise, leaving ``target`` as it was."""
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".torchfits-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w+b") as fh:
            yield Sink(fh, tmp)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        invalidate(target)
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    # The rename itself is durable only once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

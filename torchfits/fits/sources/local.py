"""Local files as byte sources: a read-only memory map shared by every reader of one file
version, or (for small files a dataset reads once per epoch) one read into process memory."""
from __future__ import annotations

import os
import stat
from typing import Callable

from ..._kernels._safemap import SafeMap
from ...errors import FitsFileNotFoundError
from .base import ViewSource

__all__ = ["LocalSource", "InMemoryFileSource", "stat_key", "HUGE_MIN_BYTES", "OPEN_READ", "pread"]

HUGE_MIN_BYTES = 4 << 20
"""Maps of files from this size on ask for transparent huge pages (`LocalSource`)."""

OPEN_READ = os.O_RDONLY | getattr(os, "O_BINARY", 0)
"""``os.open`` flags of a read-only descriptor: binary on Windows, where a descriptor opens in
text mode otherwise (its reads would turn CR LF into LF and stop at a ^Z byte)."""


def _seek_read(fd: int, n: int, offset: int) -> bytes:
    """``os.pread`` for platforms without it (Windows): a seek and reads until ``n`` bytes or
    the end of the file. The descriptor's position moves: only for descriptors no other thread
    uses."""
    os.lseek(fd, offset, os.SEEK_SET)
    parts = []
    while n > 0:
        part = os.read(fd, n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


pread: Callable[[int, int, int], bytes] = getattr(os, "pread", _seek_read)
"""``os.pread`` (fd, n, offset) where the platform has it (POSIX), else `_seek_read`."""


def stat_key(path: str) -> tuple[int, int, int, int, int]:
    """The identity of one version of a file: (device, inode, size, mtime_ns, ctime_ns).

    One stat. The ctime catches an in-place rewrite whose writer restored the size and mtime
    (no call can set a file's ctime back).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FitsFileNotFoundError(
            f"Could not open FITS file: {path} (FITS file not found)"
        ) from None
    except OSError as exc:
        raise FitsFileNotFoundError(f"Could not open FITS file: {path} ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise FitsFileNotFoundError(f"Could not open FITS file: {path} (not a regular file)")
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class LocalSource(ViewSource):
    """A local file mapped read-only; the map is shared by every reader of this file version.

    The map is a ``SafeMap``: an access past the end of a file that another process truncated
    reads zeros and flags the map (instead of killing the process with SIGBUS); :meth:`check`
    turns the flag into :class:`TruncatedFileError`.

    A map of `HUGE_MIN_BYTES` or more asks for transparent huge pages (``MADV_HUGEPAGE``)
    before its first access: a cold read then fills the page cache with 2 MiB folios, which
    every map of the file (ours, other libraries') maps 2 MiB at a time, so reads that jump
    between pages (cutout rows, a whole image row apart) walk no page tables. Pages already in
    the cache keep their size (docs/architecture.md, "Cutouts read the file map").
    """

    supports_mmap = True
    maps_file = True

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        try:
            # A bare descriptor: a Python file object would add fstat, isatty and tell calls.
            fd = os.open(path, OPEN_READ | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise FitsFileNotFoundError(
                f"Could not open FITS file: {path} ({exc.strerror})"
            ) from None
        try:
            # Maps at most the file's size now: a file that shrank since stat is not over-read.
            self._map = SafeMap(fd, size)
        except OSError as exc:
            raise FitsFileNotFoundError(
                f"Could not open FITS file: {path} ({exc.strerror})"
            ) from None
        finally:
            os.close(fd)
        self.size = len(self._map)
        # Advised before any access: a sequential read's readahead keeps the folio size of its
        # first miss, so a hint after the header was read would not reach the data behind it.
        if self.size >= HUGE_MIN_BYTES:
            self.huge_pages = self._map.advise_huge(0, self.size) > 0
        self._view = memoryview(self._map)

    @property
    def faulted(self) -> bool:
        return self._map.faulted

    def release(self, offset: int, size: int) -> int:
        # madvise(MADV_DONTNEED) on the shared read-only map: the pages leave RSS, stay in the
        # page cache, and map again (same bytes) if a view reads them later.
        return int(self._map.release(offset, size))


class InMemoryFileSource(ViewSource):
    """A small file read whole into this process's memory (no map to set up and tear down)."""

    supports_mmap = True  # buffer() is available (it is this process's own copy)

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        data = bytearray(size)
        try:
            with open(path, "rb", buffering=0) as fh:
                got = fh.readinto(data)
        except OSError as exc:
            raise FitsFileNotFoundError(f"Could not open FITS file: {path} ({exc.strerror})") from None
        self.size = got or 0
        self._view = memoryview(data)[:self.size].toreadonly()

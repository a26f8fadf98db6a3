"""Byte sources: one small interface over where FITS bytes live.

Readers ask a source for ranges, or for a buffer over the whole file: ``buffer()`` is valid
everywhere; ``view()`` is the same buffer but only valid for the ranges passed to ``ensure``
first (a local map holds everything, so there both are the map and ``ensure`` does nothing;
remote, file-object and gzip sources fetch just those ranges).
"""
from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from typing import Optional, Sequence

from .._kernels._safemap import SafeMap
from .._kernels._safemap import fault_count as faults_seen  # 0 until any map faulted: the hot-path test
from ..errors import FitsFileNotFoundError, TruncatedFileError

__all__ = ["ByteSource", "LocalSource", "compression_of", "faults_seen", "stat_key"]


class ByteSource(ABC):
    """Random access to the bytes of one file."""

    path: str
    size: int
    supports_mmap: bool = False

    @abstractmethod
    def read(self, offset: int, size: int) -> bytes:
        """Return ``size`` bytes from ``offset`` (fewer at end of file)."""

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Read several ``(offset, size)`` ranges; sources with latency override this to batch."""
        return [self.read(offset, size) for offset, size in ranges]

    def buffer(self) -> memoryview:
        """A read-only buffer over the whole file (only where ``supports_mmap``)."""
        raise NotImplementedError(f"{type(self).__name__} has no zero-copy buffer")

    @property
    def faulted(self) -> bool:
        """True once a read found the bytes gone (the file shrank under its map)."""
        return False

    def ensure(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Make ``(offset, size)`` ranges readable through ``view()`` (nothing to do for a map)."""

    def view(self) -> memoryview:
        """The whole-file buffer, valid for the ranges passed to ``ensure``."""
        return self.buffer()


    def check(self) -> None:
        """Raise :class:`TruncatedFileError` if the file shrank while it was being read.

        Readers call it after decoding from :meth:`buffer`: whatever the decode saw past the new
        end of the file was zeros, not data.
        """
        if self.faulted:
            raise TruncatedFileError(
                f"{self.path}: the file was truncated while it was being read "
                "(it shrank under its memory map); the data read is not valid"
            )


# Whole-file compression, told by the first bytes (decoded by fits/gzip_source.py).
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x1f\x9d", "compress"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)


def compression_of(head: bytes) -> Optional[str]:
    """The whole-file compression named by the first bytes, or None for plain bytes."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


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


class LocalSource(ByteSource):
    """A local file mapped read-only; the map is shared by every reader of this file version.

    The map is a ``SafeMap``: an access past the end of a file that another process truncated
    reads zeros and flags the map (instead of killing the process with SIGBUS); :meth:`check`
    turns the flag into :class:`TruncatedFileError`.
    """

    supports_mmap = True

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        try:
            # A bare descriptor: a Python file object would add fstat, isatty and tell calls.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
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
        self._view = memoryview(self._map)

    def read(self, offset: int, size: int) -> bytes:
        offset = max(0, offset)
        return bytes(self._view[offset:offset + max(0, size)])

    def buffer(self) -> memoryview:
        return self._view

    @property
    def faulted(self) -> bool:
        return self._map.faulted

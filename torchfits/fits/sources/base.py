"""The byte source interface: one small contract over where FITS bytes live.

Readers ask a source for ranges, or for a buffer over the whole file: ``buffer()`` is valid
everywhere; ``view()`` is the same buffer but only valid for the ranges passed to ``ensure``
first (a local map holds everything, so there both are the map and ``ensure`` does nothing;
remote, file-object and gzip sources fetch just those ranges).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from ..._kernels._safemap import fault_count as faults_seen  # 0 until any map faulted: the hot-path test
from ...errors import TruncatedFileError

__all__ = ["ByteSource", "ViewSource", "compression_of", "faults_seen"]


class ByteSource(ABC):
    """Random access to the bytes of one file.

    `open_source` sets two names on what it returns, for the caches built over a source (the
    HDU index): ``cache_key``, under which such a cache may keep what it derived from these
    bytes for as long as `open_source` keeps returning this same object for it (None: the
    source is opened once, nothing is kept); and ``version``, the identity of the file version
    a local path named (`stat_key`), None elsewhere.
    """

    path: str
    size: int
    supports_mmap: bool = False
    maps_file: bool = False  # whether read bytes become resident pages of a file map (`release`)
    huge_pages: bool = False  # whether that map asked for 2 MiB pages (`LocalSource`)
    cache_key: str | None = None
    version: tuple[int, int, int, int, int] | None = None

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
        return None  # a mapped file is readable everywhere; sources that fetch override this

    def view(self) -> memoryview:
        """The whole-file buffer, valid for the ranges passed to ``ensure``."""
        return self.buffer()

    def release(self, offset: int, size: int) -> int:
        """Let go of this process's resident pages of a range a sequential reader is done with.

        Only a memory-mapped file has such pages (`LocalSource`, ``maps_file``); the bytes stay
        readable through ``view()`` and ``buffer()`` (a later access maps them again). Readers
        hand finished ranges to `residency.done`, which calls this beyond its budget. Returns
        the bytes released; 0 here.
        """
        return 0

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


class ViewSource(ByteSource):
    """A source whose whole file is one memoryview in ``_view`` (a map, or bytes in memory)."""

    supports_mmap = True
    _view: memoryview

    def read(self, offset: int, size: int) -> bytes:
        offset = max(0, offset)
        return bytes(self._view[offset:offset + max(0, size)])

    def buffer(self) -> memoryview:
        return self._view


# Whole-file compression, told by the first bytes (decoded by whole_file_compression).
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x1f\x9d", "compress"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)


def compression_of(head: bytes) -> str | None:
    """The whole-file compression named by the first bytes, or None for plain bytes."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None

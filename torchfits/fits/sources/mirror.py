"""Sources that fill a sparse local mirror on demand: only the blocks a reader asks for are fetched.

The mirror is a file of the source's full size (sparse: blocks never fetched take no disk) mapped
into memory, plus a bitmap of the blocks already present. Readers that know what they need call
``ensure(ranges)`` and then read the map through ``view()``; ``buffer()`` fetches everything.
Remote objects, seekable file objects and gzip members all sit behind this one class.
"""
from __future__ import annotations

import json
import mmap
import os
import tempfile
import threading
from abc import abstractmethod
from collections.abc import Sequence

from ...errors import FitsError, TruncatedFileError
from .base import ByteSource

__all__ = ["MirroredSource", "BLOCK_SIZE", "coalesce"]

BLOCK_SIZE = 64 * 1024  # one fetch unit: small enough for cutouts, large enough for headers
_GAP_BLOCKS = 4  # missing runs closer than this are fetched as one request
_MAX_REQUEST = 8 * 1024 * 1024  # long runs are split so the pool can fetch them concurrently


def coalesce(runs: Sequence[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Merge sorted ``(start, stop)`` runs separated by at most ``gap``."""
    out: list[tuple[int, int]] = []
    for start, stop in sorted(runs):
        if out and start - out[-1][1] <= gap:
            if stop > out[-1][1]:
                out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out


class MirroredSource(ByteSource):
    """A byte source read through a sparse local mirror, block by block.

    Subclasses implement ``_fetch(ranges)`` returning the bytes of each ``(offset, size)`` range.

    Parameters
    ----------
    path : str
        A name for messages (URL, ``<bytes>``, ...).
    size : int
        Total size in bytes.
    cache_file : str, optional
        A persistent mirror file (the block cache); its bitmap lives beside it as
        ``cache_file + ".json"`` together with ``validator``. Without it an anonymous temporary
        file is used and forgotten on close.
    validator : dict, optional
        What identifies this version of the object (size, ETag, mtime); a cached mirror whose
        validator differs is discarded.
    """

    supports_mmap = True

    def __init__(self, path: str, size: int, *, cache_file: str | None = None,
                 validator: dict | None = None, block_size: int = BLOCK_SIZE) -> None:
        self.path = path
        self.size = int(size)
        self.block_size = int(block_size)
        self._lock = threading.Lock()
        self._nblocks = -(-self.size // self.block_size)
        self._present = bytearray(self._nblocks)
        self._cache_file = cache_file
        self._validator = dict(validator or {}, size=self.size, block_size=self.block_size)
        self.fetched_bytes = 0
        self.requests = 0
        if self.size == 0:
            self._map = None
            self._view = memoryview(b"")
            return
        if cache_file is not None:
            fh = self._open_cached(cache_file)
        else:
            fh = tempfile.TemporaryFile(dir=os.environ.get("TORCHFITS_TMPDIR") or None)
            fh.truncate(self.size)
        try:
            self._map = mmap.mmap(fh.fileno(), self.size, access=mmap.ACCESS_WRITE)
        finally:
            fh.close()
        self._view = memoryview(self._map).toreadonly()

    # -- the persistent block cache -------------------------------------------------------------
    def _open_cached(self, cache_file: str):  # type: ignore[no-untyped-def]
        os.makedirs(os.path.dirname(cache_file) or ".", exist_ok=True)
        meta_file = cache_file + ".json"
        present = None
        try:
            with open(meta_file) as f:
                meta = json.load(f)
            if meta.get("validator") == self._validator and os.path.getsize(cache_file) == self.size:
                bits = bytes.fromhex(meta.get("present", ""))
                if len(bits) == self._nblocks:
                    present = bytearray(bits)
        except (OSError, ValueError):
            present = None
        if present is None:
            # A new object version (or a damaged cache entry): start from an empty mirror.
            for p in (meta_file, cache_file):
                try:
                    os.unlink(p)
                except OSError:
                    pass
            fh = open(cache_file, "w+b")
            fh.truncate(self.size)
        else:
            self._present = present
            fh = open(cache_file, "r+b")
        return fh

    def _save_meta(self) -> None:
        if self._cache_file is None:
            return
        meta = {"validator": self._validator, "present": bytes(self._present).hex(),
                "source": self.path}
        tmp = self._cache_file + ".json.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(meta, f)
            os.replace(tmp, self._cache_file + ".json")
            os.utime(self._cache_file)  # LRU order of the cache directory
        except OSError:
            pass  # a cache that cannot be written only costs refetches

    # -- fetching -------------------------------------------------------------------------------
    @abstractmethod
    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, size)`` range (all within the source)."""

    def _whole(self) -> bytes | None:
        """Hook for sources that learn the whole content while fetching a range."""
        return None

    def ensure(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Make the bytes of every ``(offset, size)`` range readable through ``view()``."""
        bs = self.block_size
        wanted: list[tuple[int, int]] = []
        for offset, size in ranges:
            offset = max(0, int(offset))
            stop = min(self.size, offset + max(0, int(size)))
            if stop > offset:
                wanted.append((offset // bs, -(-stop // bs)))
        if not wanted:
            return
        with self._lock:
            present = self._present
            runs = []
            for b0, b1 in coalesce(wanted, 0):
                b = b0
                while b < b1:
                    if present[b]:
                        b += 1
                        continue
                    e = b
                    while e < b1 and not present[e]:
                        e += 1
                    runs.append((b, e))
                    b = e
            if not runs:
                return
            requests = []
            for b0, b1 in coalesce(runs, _GAP_BLOCKS):
                start, stop = b0 * bs, min(self.size, b1 * bs)
                while start < stop:
                    end = min(stop, start + _MAX_REQUEST)
                    requests.append((start, end - start))
                    start = end
            datas = self._fetch(requests)
            self.requests += len(requests)
            for (start, size), data in zip(requests, datas):
                if len(data) != size:
                    raise TruncatedFileError(
                        f"{self.path}: truncated: asked for {size} bytes at offset {start}, got "
                        f"{len(data)}")
                self._map[start:start + size] = data  # type: ignore[index]
                self.fetched_bytes += size
                # Requests start on block boundaries and end on one or at the end of the file.
                for b in range(start // bs, -(-(start + size) // bs)):
                    present[b] = 1
            self._save_meta()

    def mark_all(self, data: bytes) -> None:
        """Store the whole content at once (a server that ignored a range sent all of it)."""
        if len(data) != self.size:
            raise FitsError(f"{self.path}: got {len(data)} bytes for an object of {self.size} bytes")
        if self._map is not None:
            self._map[:] = data
        for b in range(self._nblocks):
            self._present[b] = 1

    def complete(self) -> bool:
        return all(self._present)

    def read(self, offset: int, size: int) -> bytes:
        offset = max(0, offset)
        self.ensure([(offset, size)])
        return bytes(self._view[offset:offset + max(0, size)])

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        self.ensure(ranges)
        return [bytes(self._view[max(0, o):max(0, o) + max(0, s)]) for o, s in ranges]

    def view(self) -> memoryview:
        return self._view

    def buffer(self) -> memoryview:
        self.ensure([(0, self.size)])
        return self._view

    def close(self) -> None:
        if self._map is not None:
            self._view.release()
            try:
                self._map.close()
            except BufferError:
                pass  # arrays still view the map; it closes when they go

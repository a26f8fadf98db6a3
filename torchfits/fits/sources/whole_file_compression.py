"""Whole-file compression (``.fits.gz``, ``.bz2``, ``.xz``, ``.Z``), detected by magic bytes.

gzip gets random access when the optional ``rapidgzip`` package is installed: the first open
builds a seek index (one parallel pass, kept in memory and, for local files, in the cache
directory), after which a cutout inflates only the chunks that hold its bytes. Without it, and
for the other formats, the file is inflated once into an unlinked temporary file that is then
memory mapped (``isal`` speeds up that pass when installed; ``zlib`` is the fallback).
"""
from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import os
import shutil
import tempfile
import threading
import zlib
from typing import Any

from ...errors import FitsError, NotFitsError
from .base import ByteSource
from .block_cache import cache_root
from .local import LocalSource
from .mirror import MirroredSource

__all__ = ["decompressed_source", "GzipIndexedSource"]

_CHUNK = 4 * 1024 * 1024


def _gzip_stream(fh: Any) -> Any:
    try:
        from isal import igzip  # optional: several times faster than zlib

        return igzip.GzipFile(fileobj=fh, mode="rb")
    except ImportError:
        import gzip

        return gzip.GzipFile(fileobj=fh, mode="rb")


def _inflate_to_temp(source: ByteSource, kind: str, name: str) -> ByteSource:
    """Inflate the whole file once into an unlinked temporary file and map it."""
    raw = _SourceReader(source)
    if kind == "gzip":
        stream: Any = _gzip_stream(raw)
    elif kind == "bzip2":
        stream = bz2.BZ2File(raw, "rb")
    elif kind == "xz":
        stream = lzma.LZMAFile(raw, "rb")  # type: ignore[arg-type]
    else:
        try:
            import unlzw3  # type: ignore[import-not-found]
        except ImportError:
            raise FitsError(
                f"{name}: the file is compressed with Unix compress (.Z); reading it needs the "
                "'unlzw3' package (pip install 'torchfits[compression]')") from None
        stream = io.BytesIO(unlzw3.unlzw(raw.read()))
    fd, tmp = tempfile.mkstemp(prefix="torchfits-", suffix=".fits",
                               dir=os.environ.get("TORCHFITS_TMPDIR") or None)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                shutil.copyfileobj(stream, out, _CHUNK)
            except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
                raise NotFitsError(f"{name}: corrupt {kind} data: {exc}") from None
        size = os.path.getsize(tmp)
        src = LocalSource(tmp, size)
    finally:
        os.unlink(tmp)  # the map keeps the inflated bytes alive; nothing is left on disk
    src.path = name
    return src


class _SourceReader(io.RawIOBase):
    """A read-only file object over a ByteSource (for the standard decompressors)."""

    def __init__(self, source: ByteSource) -> None:
        self._src = source
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._src.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), max(0, self._src.size - self._pos))
        if n:
            b[:n] = self._src.read(self._pos, n)
        self._pos += n
        return n


class GzipIndexedSource(MirroredSource):
    """A local ``.gz`` read through rapidgzip's seek index: only touched chunks are inflated."""

    def __init__(self, path: str, name: str, index: bytes, size: int) -> None:
        self._gz_path = path
        self._index = index
        self._io_lock = threading.Lock()
        super().__init__(name, size, block_size=256 * 1024)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        import rapidgzip

        out = []
        # Large requests (whole-image reads) inflate in parallel; cutouts need one chunk or two.
        total = sum(size for _, size in ranges)
        threads = max(1, min(8, os.cpu_count() or 1)) if total > 16 * 1024 * 1024 else 1
        # A reader per call: rapidgzip aborts the interpreter at exit if one is left open.
        with self._io_lock, rapidgzip.open(self._gz_path, parallelization=threads) as r:
            r.import_index(io.BytesIO(self._index))
            for offset, size in ranges:
                r.seek(offset)
                out.append(r.read(size))
        return out


def _index_file(path: str, st: os.stat_result) -> str:
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:20]
    return str(cache_root() / "gzindex" / f"{digest}-{st.st_size}-{st.st_mtime_ns}.idx")


def _gzip_indexed(path: str, name: str) -> ByteSource | None:
    try:
        import rapidgzip
    except ImportError:
        return None
    st = os.stat(path)
    idx_path = _index_file(path, st)
    try:
        with open(idx_path, "rb") as f:
            index = f.read()
        with rapidgzip.open(path, parallelization=1) as r:
            r.import_index(io.BytesIO(index))
            size = r.size()
        return GzipIndexedSource(path, name, index, size)
    except Exception:  # noqa: BLE001 - no (usable) saved index: build one
        pass
    try:
        with rapidgzip.open(path, parallelization=max(1, min(8, os.cpu_count() or 1))) as r:
            size = r.seek(0, io.SEEK_END)
            buf = io.BytesIO()
            r.export_index(buf)
            index = buf.getvalue()
    except Exception as exc:  # noqa: BLE001 - rapidgzip raises plain exceptions on bad data
        raise NotFitsError(f"{name}: corrupt gzip data: {exc}") from None
    try:
        os.makedirs(os.path.dirname(idx_path), exist_ok=True)
        tmp = idx_path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(index)
        os.replace(tmp, idx_path)
    except OSError:
        pass  # an index that cannot be saved is rebuilt next time
    return GzipIndexedSource(path, name, index, size)


def decompressed_source(source: ByteSource, kind: str, *, local_path: str | None = None) -> ByteSource:
    """A source over the inflated bytes of ``source`` (compressed as ``kind``)."""
    name = source.path
    if kind == "gzip" and local_path is not None:
        indexed = _gzip_indexed(local_path, name)
        if indexed is not None:
            return indexed
    return _inflate_to_temp(source, kind, name)


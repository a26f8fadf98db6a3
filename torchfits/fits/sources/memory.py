"""In-process sources: bytes-like objects (zero copy) and binary file objects."""
from __future__ import annotations

import io
import threading
from typing import Any

from .base import ByteSource, ViewSource
from .mirror import MirroredSource

__all__ = ["BytesSource", "FileObjectSource", "is_file_object", "is_bytes_like", "file_object_source"]


def is_bytes_like(obj: Any) -> bool:
    return isinstance(obj, (bytes, bytearray, memoryview))


def is_file_object(obj: Any) -> bool:
    return hasattr(obj, "read") and callable(obj.read) and not isinstance(obj, (str, bytes))


class BytesSource(ViewSource):
    """``bytes``/``bytearray``/``memoryview`` contents, read in place (no copy).

    A ``bytearray`` the caller changes later changes what the source reads; pass ``bytes`` for a
    snapshot.
    """

    supports_mmap = True

    def __init__(self, data: Any, path: str = "<bytes>") -> None:
        view = memoryview(data)
        if not view.contiguous:
            view = memoryview(view.tobytes())
        self._view = view.cast("B").toreadonly() if view.format != "B" or view.ndim != 1 \
            else view.toreadonly()
        self.path = path
        self.size = len(self._view)


class FileObjectSource(MirroredSource):
    """A seekable binary file object, read range by range (its position is restored after use)."""

    def __init__(self, fileobj: Any, size: int, path: str) -> None:
        self._fileobj = fileobj
        self._io_lock = threading.Lock()
        super().__init__(path, size)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        out = []
        with self._io_lock:
            fh = self._fileobj
            here = fh.tell()
            try:
                for offset, size in ranges:
                    fh.seek(offset)
                    chunks = []
                    left = size
                    while left > 0:
                        chunk = fh.read(left)
                        if not chunk:
                            break
                        chunks.append(chunk)
                        left -= len(chunk)
                    out.append(b"".join(chunks))
            finally:
                fh.seek(here)
        return out


def _name(fileobj: Any) -> str:
    name = getattr(fileobj, "name", None)
    return name if isinstance(name, str) else f"<{type(fileobj).__name__}>"


def file_object_source(fileobj: Any) -> ByteSource:
    """A source over a binary file object: ranged reads when seekable, else read once."""
    if isinstance(fileobj, io.TextIOBase):
        raise TypeError("file objects must be opened in binary mode ('rb'), not text mode")
    path = _name(fileobj)
    if isinstance(fileobj, io.BytesIO):
        return BytesSource(fileobj.getbuffer().tobytes(), path)
    seekable = False
    try:
        seekable = bool(fileobj.seekable())
    except (AttributeError, OSError, ValueError):
        seekable = False
    if seekable:
        here = fileobj.tell()
        size = fileobj.seek(0, io.SEEK_END)
        fileobj.seek(here)
        return FileObjectSource(fileobj, int(size), path)
    data = fileobj.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{path}: read() returned {type(data).__name__}, not bytes: open the "
                        "file in binary mode ('rb')")
    return BytesSource(bytes(data), path)

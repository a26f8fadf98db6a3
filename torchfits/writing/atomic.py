"""Atomic file replacement: every writer fills a temporary file beside the target, fsyncs it and
renames it over the target, so a failure at any point leaves the original file untouched.

Temporary files are named ``.torchfits-<host>-<pid>-<random>.tmp``; one left behind by a process
that was killed (its pid is gone on this host) is removed by the next write to that directory.
"""
from __future__ import annotations

import glob
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from .._kernels import _safemap
from ..errors import FitsError, FitsFileExistsError, FitsFileNotFoundError, FitsIOError, TruncatedFileError
from ..fits.hdu_index import invalidate
from ..fits.layout import padding
from ..fits.paths import fspath, is_url

__all__ = ["Sink", "atomic_output", "check_target", "in_place_errors", "remove_stale_temporaries"]

_PREFIX = ".torchfits-"
_STALE_UNKNOWN_S = 24 * 3600  # a temp file of no known owner is stale after a day


def _host_tag() -> str:
    # Short and filename-safe; a directory shared between hosts never sees another host's pids.
    return hashlib.blake2s(socket.gethostname().encode(), digest_size=4).hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def remove_stale_temporaries(directory: str) -> list[str]:
    """Delete temp files in ``directory`` left by killed writers; returns the paths removed.

    A file is stale when it names this host and a pid that no longer exists, or when it names no
    owner we can check (older naming) and is more than a day old.
    """
    removed = []
    host = _host_tag()
    now = time.time()
    for path in glob.glob(os.path.join(glob.escape(directory), _PREFIX + "*.tmp")):
        parts = os.path.basename(path)[len(_PREFIX):].split("-")
        try:
            if len(parts) >= 3 and len(parts[0]) == 8 and parts[1].isdigit():
                if parts[0] != host or int(parts[1]) == os.getpid() or _pid_alive(int(parts[1])):
                    continue
            elif now - os.stat(path).st_mtime < _STALE_UNKNOWN_S:
                continue
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue  # raced with another cleaner, or not ours to delete
    return removed


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
        self.patch_many([offset], data)

    def patch_many(self, offsets: Iterable[int], data: bytes) -> None:
        """Overwrite ``data`` at each of ``offsets`` (bytes already written), in one pass: the
        stream is flushed once and sought back once, however many places change."""
        self.fh.flush()
        try:
            fd: int | None = self.fh.fileno()
        except (AttributeError, OSError, ValueError):  # not backed by a file descriptor
            fd = None
        if fd is not None and hasattr(os, "pwrite"):  # one syscall a place; the position stays
            for offset in offsets:
                os.pwrite(fd, data, offset)
            return
        here = self.fh.tell()
        for offset in offsets:
            self.fh.seek(offset)
            self.fh.write(data)
        self.fh.flush()
        self.fh.seek(here)


def check_target(path: Any, *, overwrite: bool) -> str:
    """The target as a string, after the overwrite/directory checks every writer makes."""
    target = fspath(path)
    if is_url(target):
        fs, remote = _url_fs(target)
        if fs.exists(remote) and not overwrite:
            raise FitsFileExistsError(f"File '{target}' already exists. Use overwrite=True to overwrite.")
        return target
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


def _url_fs(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise ImportError(f"writing {url} needs fsspec: pip install 'torchfits[remote]'") from None
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("http", "https", "ftp", "ftps"):
        raise ValueError(f"cannot write to {scheme}:// URLs; write to a file system or object "
                         "store URL (s3://, gs://, memory://, ...) or a local path")
    fs, remote = fsspec.core.url_to_fs(url)
    return fs, remote


def _gzip_file(src: str, dst: str) -> None:
    try:
        from isal import igzip as gz  # optional: several times faster than zlib

        opener: Any = gz.open
    except ImportError:
        import gzip

        opener = gzip.open
    level = 6 if opener.__module__ == "gzip" else 2
    with open(src, "rb") as fin, opener(dst, "wb", compresslevel=level) as fout:
        while True:
            chunk = fin.read(8 << 20)
            if not chunk:
                break
            fout.write(chunk)


@contextmanager
def atomic_output(target: str) -> Iterator[Sink]:
    """Yield a `Sink` on a temporary file in ``target``'s directory; on success fsync it, give
    it the target's mode (or the umask default) and rename it over ``target``; on any failure
    delete it and re-raise, leaving ``target`` as it was.

    A target ending in ``.gz`` is written gzip-compressed; an fsspec URL is written to a local
    temporary file and uploaded when complete (one PUT: atomic on object stores)."""
    lower = target.lower()
    if lower.endswith((".bz2", ".xz", ".z")):
        raise ValueError(f"{target}: writing {os.path.splitext(target)[1]} files is not supported "
                         "(write .fits or .fits.gz)")
    if is_url(target) or lower.endswith(".gz"):
        with _staged_output(target) as sink:
            yield sink
        return
    with _local_output(target) as sink:
        yield sink


@contextmanager
def _staged_output(target: str) -> Iterator[Sink]:
    remote = is_url(target)
    directory = None if remote else os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".torchfits-", suffix=".tmp", dir=directory)
    staged = [tmp]
    try:
        with os.fdopen(fd, "w+b") as fh:
            yield Sink(fh, tmp)
            fh.flush()
        final = tmp
        if target.lower().endswith(".gz"):
            fd2, final = tempfile.mkstemp(prefix=".torchfits-", suffix=".gz.tmp", dir=directory)
            os.close(fd2)
            staged.append(final)
            _gzip_file(tmp, final)
        if remote:
            fs, path = _url_fs(target)
            fs.put_file(final, path)
        else:
            with open(final, "rb+") as fh:
                os.fsync(fh.fileno())
            _take_mode(final, target)
            os.replace(final, target)
            staged.remove(final)
            _fsync_directory(directory or ".")
    finally:
        _discard(*staged)
        invalidate(target)


@contextmanager
def _local_output(target: str) -> Iterator[Sink]:
    directory = os.path.dirname(os.path.abspath(target))
    remove_stale_temporaries(directory)
    faults = _safemap.fault_count()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_PREFIX}{_host_tag()}-{os.getpid()}-", suffix=".tmp",
                                   dir=directory)
    except OSError as exc:
        raise _io_error(target, exc) from exc
    try:
        with os.fdopen(fd, "w+b") as fh:
            yield Sink(fh, tmp)
            fh.flush()
            os.fsync(fh.fileno())
        if _safemap.fault_count() != faults:
            # A source file shrank under its map while we copied from it: what we copied of the
            # lost part is zeros. Never rename that over the target.
            raise TruncatedFileError(
                f"{target}: not written: a file being copied was truncated during the write")
        _take_mode(tmp, target)
        os.replace(tmp, target)
    except BaseException as exc:
        _discard(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FitsError) and exc.errno is not None:
            raise _io_error(target, exc) from exc
        raise
    finally:
        invalidate(target)
    _fsync_directory(directory)


def _take_mode(tmp: str, target: str) -> None:
    """Give the temporary file the mode of the file it replaces (or the umask default)."""
    if os.path.exists(target):
        os.chmod(tmp, os.stat(target).st_mode & 0o7777)
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)


def _discard(*paths: str) -> None:
    """Delete temporary files, ignoring those already gone (or not ours to delete)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


@contextmanager
def in_place_errors(target: str) -> Iterator[None]:
    """Turn an OS error of an in-place edit (bytes written into the file itself) into
    :class:`FitsIOError` naming the file."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, FitsError) or exc.errno is None:
            raise
        raise _io_error(target, exc, "in-place write failed") from exc


def _io_error(target: str, exc: OSError,
              what: str = "write failed, the file is unchanged") -> FitsIOError:
    err = FitsIOError(f"{target}: {what}: {exc.strerror or exc} (errno {exc.errno})")
    err.errno = exc.errno
    err.strerror = exc.strerror
    err.filename = target
    return err


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

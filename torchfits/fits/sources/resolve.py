"""`open_source`: the one door from what a caller names (a path, a URL, bytes, a file object) to
the `ByteSource` of its FITS bytes, whole-file compression undone; and the per-process rule.

Open sources are kept while anything uses them (weakly: the HDU index cache decides how long):
a local path's per file version (one stat a call), a URL's per storage options (re-validated
every few seconds), a file object's while the object lives; bytes are wrapped anew each call.

The modules for compressed files, URLs and in-memory sources (and the hashlib, tempfile, socket
and fsspec they bring) are imported where those are met: a plain local file's first call in a
process loads none of them.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from typing import Any, Callable

from ...errors import FitsFileNotFoundError
from ..paths import SourcePath, check_safe_path, is_url, refuse_cfitsio_special
from .base import ByteSource, compression_of, faults_seen
from .local import InMemoryFileSource, LocalSource, stat_key

__all__ = ["open_source", "per_process"]

_lock = threading.Lock()
# path → weak reference to its source (a plain dict: the hit path is two C lookups).
_local: dict[str, weakref.ref[ByteSource]] = {}
_remote: weakref.WeakValueDictionary[str, ByteSource] = weakref.WeakValueDictionary()
# The fetched source behind an inflated remote one (what re-validation asks the server about).
_raw: weakref.WeakKeyDictionary[ByteSource, ByteSource] = weakref.WeakKeyDictionary()
_objects: weakref.WeakKeyDictionary[Any, ByteSource] = weakref.WeakKeyDictionary()
_resets: list[Callable[[], None]] = []


def open_source(obj: Any, *, storage_options: dict | None = None, cache: bool = True,
                in_memory: bool = False, fresh: bool = False) -> ByteSource:
    """The byte source of ``obj``, with any whole-file compression (gzip, bzip2, xz, Unix
    compress: told by the first bytes) undone.

    Parameters
    ----------
    obj : str, os.PathLike, SourcePath, bytes-like or binary file object
        A local path; an fsspec URL (``https://``, ``s3://``, ``memory://``, ``file://``, the
        ``vos:``/``vault:`` short forms ...); a `SourcePath` (a URL bound to its storage
        options); ``bytes``/``bytearray``/``memoryview`` contents (read in place); or a binary
        file object (read by ranges when seekable, else once).
    storage_options : dict, optional
        fsspec options (and torchfits's ``allow_private_hosts``, ``cache``, ``cache_dir``). With
        them, a local path is read through fsspec too.
    cache : bool
        False opens a source of the caller's own, shared with no one and kept nowhere (the
        caller may ``close`` it).
    in_memory : bool
        Read a local file whole into this process's memory instead of mapping it (small files a
        dataset reads once per epoch: one read costs less than a map). Implies ``cache=False``.
    fresh : bool
        Open a path or URL anew even when a source for it is open and still valid, and keep the
        new one (after a caller dropped what it built over the old one: a cleared or
        invalidated cache re-reads the file, and re-asks the server about a URL). A file
        object's source is kept: a stream is read once.

    Returns
    -------
    ByteSource
        The same object again for the same path, file version and storage options while
        anything holds it: its ``cache_key`` names it for caches built over it (None when it is
        opened once), its ``version`` is the local file version (`stat_key`).

    Raises
    ------
    TypeError
        For an object that names no bytes (naming its type), or a text-mode file object.
    FitsFileNotFoundError
        For a path or URL that names no file.
    """
    if isinstance(obj, (str, os.PathLike)):
        path = obj if type(obj) is str and obj else _fspath(obj)
        if storage_options or is_url(path):
            check_safe_path(path)  # shell-like schemes are refused, never handed to fsspec
            return _open_url(path, storage_options, cache, fresh)
        # The hit path of every call on a local file, inline: one stat, two dict lookups.
        try:
            version = stat_key(path)
        except FitsFileNotFoundError:
            refuse_cfitsio_special(path)  # "|cmd" / "!name" get their own message
            raise
        if cache and not in_memory and not fresh:
            ref = _local.get(path)
            src = ref() if ref is not None else None
            if src is not None and src.version == version and not (faults_seen() and src.faulted):
                return src
        return _open_local(path, cache and not in_memory, in_memory, version, fresh)
    if isinstance(obj, SourcePath):
        merged = dict(obj.storage_options or {}, **(storage_options or {}))
        return open_source(obj.url, storage_options=merged or None, cache=cache, fresh=fresh)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        from .memory import BytesSource

        return _inflated(BytesSource(obj))
    if hasattr(obj, "read") and callable(obj.read):
        return _open_file_object(obj, cache)
    raise TypeError(f"path must be a str, os.PathLike, bytes or a binary file object, "
                    f"not {type(obj).__name__}")


def _open_local(path: str, cache: bool, in_memory: bool,
                version: tuple[int, int, int, int, int] | None = None,
                fresh: bool = False) -> ByteSource:
    if version is None:
        try:
            version = stat_key(path)
        except FitsFileNotFoundError:
            refuse_cfitsio_special(path)
            raise
    if cache and not fresh:
        ref = _local.get(path)
        src = ref() if ref is not None else None
        if src is not None and src.version == version and not (faults_seen() and src.faulted):
            return src
    src = InMemoryFileSource(path, version[2]) if in_memory else LocalSource(path, version[2])
    kind = compression_of(bytes(src.buffer()[:6]))
    if kind is not None:
        from .whole_file_compression import decompressed_source

        src = decompressed_source(src, kind, local_path=path)
    src.version = version
    if cache:
        src.cache_key = path
        with _lock:
            _local[path] = weakref.ref(src, functools.partial(_forget_local, path))
    return src


def _forget_local(path: str, ref: weakref.ref[ByteSource]) -> None:
    """A local source died (its index left the cache): drop its entry unless a newer one
    replaced it. No lock: this runs wherever the collector does, maybe inside ``_lock``; losing
    a race costs one reopen."""
    if _local.get(path) is ref:
        _local.pop(path, None)


def _open_url(url: str, storage_options: dict | None, cache: bool, fresh: bool) -> ByteSource:
    if url.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return _open_local(_fspath(unquote(urlsplit(url).path)), cache, False, None, fresh)
    from . import remote

    if url.startswith(("vos:", "vault:")):
        return _open_local(remote.fetch_vos(url, storage_options), cache, False, None, fresh)
    if not cache:
        return _inflated(remote.open_remote(url, storage_options))
    # The URL leads the key, so the index cache can forget every entry of a URL by its prefix.
    key = "\0".join((url, repr(sorted((k, repr(v)) for k, v in (storage_options or {}).items()))))
    src = None if fresh else _remote.get(key)
    if src is not None and remote.still_valid(_raw.get(src, src), storage_options):
        return src
    raw = remote.open_remote(url, storage_options)
    src = _inflated(raw)
    src.cache_key = key
    with _lock:
        _remote[key] = src
        if raw is not src:
            _raw[src] = raw
    return src


def _open_file_object(fileobj: Any, cache: bool) -> ByteSource:
    from .memory import file_object_source

    if not cache:
        return _inflated(file_object_source(fileobj))
    # A stream can be read once: its source stays with the object while the object lives.
    try:
        hit = _objects.get(fileobj)
    except TypeError:
        hit = None
    if hit is not None:
        return hit
    src = _inflated(file_object_source(fileobj))
    try:
        with _lock:
            _objects[fileobj] = src
    except TypeError:
        return src  # not weak-referenceable: opened again next time, nothing kept
    src.cache_key = f"<object at {id(fileobj):#x}>"
    return src


def _inflated(src: ByteSource) -> ByteSource:
    kind = compression_of(src.read(0, 6))
    if kind is None:
        return src
    from .whole_file_compression import decompressed_source

    src.ensure([(0, src.size)])  # one coalesced fetch, then inflate from the mirror
    return decompressed_source(src, kind)


def _fspath(path: Any) -> str:
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = p.decode()
    if not p:
        raise ValueError("Path must be a non-empty string")
    return p


# -- the per-process rule -------------------------------------------------------------------------

def per_process(reset: Callable[[], None]) -> Callable[[], None]:
    """Register ``reset`` to run in every forked child: it empties a cache holding open
    sources or what was built over them (fsspec file systems and their sessions are not
    fork-safe, and a forked DataLoader worker opens its own). Returns ``reset``."""
    _resets.append(reset)
    return reset


def _new_process() -> None:
    """In a forked child: remote sources and every registered cache are dropped. A local file's
    map stays (the same file, readable from both processes), and so does a file object's source
    (a stream the parent consumed cannot be read again)."""
    global _lock, _remote, _raw
    _lock = threading.Lock()  # a parent thread may have held the old one across the fork
    _remote = weakref.WeakValueDictionary()
    _raw = weakref.WeakKeyDictionary()
    remote = sys.modules.get(__package__ + ".remote")
    if remote is not None:
        remote.forget_filesystems()
    for reset in _resets:
        reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process)

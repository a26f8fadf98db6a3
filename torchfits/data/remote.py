"""Whole-file copies of ``http(s)`` URLs in the remote cache (the ``torchfits.data.remote`` module
of torchfits 1.x): `is_http_url`, `cache_path_for_url`, `resolve_local_path`, `prefetch_urls`.

Each URL has one stable path directly under the remote cache root (``TORCHFITS_REMOTE_CACHE``,
else ``cache_root()/remote``; or the ``cache_dir`` given). A URL is downloaded once in a process:
a resolve or prefetch that finds it in flight waits for that download, which writes to a
temporary name and renames it into place, so a copy that exists is complete. Downloads go
through the same security guard as every remote read (private hosts refused unless allowed).

Datasets read a URL from its copy once one exists (`local_copy`), else by ranged reads through
the block mirror; `make_loader(..., optimize_cache=True)` starts the copies (docs/remote.md says
when each route is used).
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..fits.paths import fspath
from ..fits.sources.block_cache import remote_cache_root
from ..fits.threads import process_executor

__all__ = ["is_http_url", "cache_path_for_url", "resolve_local_path", "prefetch_urls", "local_copy"]

_lock = threading.Lock()
_in_flight: dict[str, Future] = {}
_PREFETCH_WORKERS = 4


def _after_fork() -> None:
    """A forked child gets a fresh lock (a thread of the parent may have held it at the fork)
    and no downloads in flight: the parent's never finish here."""
    global _lock
    _lock = threading.Lock()
    _in_flight.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def is_http_url(url: Any) -> bool:
    """Whether ``url`` is an ``http://`` or ``https://`` URL (any case)."""
    return isinstance(url, str) and url.split("://", 1)[0].lower() in ("http", "https") \
        and "://" in url


def cache_path_for_url(url: str, cache_dir: Any = None) -> str:
    """The stable path of ``url``'s whole-file copy, directly under ``cache_dir`` (default: the
    remote cache root). The name is a digest of the URL followed by its file name, so the
    suffix (``.fits.gz``, ``.fz``) still tells how to open it. Nothing is created."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a string, not {type(url).__name__}")
    root = Path(fspath(cache_dir)) if cache_dir is not None else remote_cache_root()
    digest = hashlib.sha256(url.encode()).hexdigest()[:24]
    name = os.path.basename(urlsplit(url).path) or "download.fits"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-100:]
    return str(root / f"{digest}-{name}")


def resolve_local_path(url: Any, cache_dir: Any = None, download: bool = True, *,
                       storage_options: dict | None = None) -> str:
    """A local path for ``url``: a local path as it is; for an ``http(s)`` URL its copy in the
    cache, downloaded first when missing (waiting for a download of it already in flight).
    ``download=False`` returns the cache path without any network access (the file may not
    exist). ``storage_options`` as for remote reads (``allow_private_hosts``, headers ...)."""
    if not is_http_url(url):
        return fspath(url)
    target = cache_path_for_url(url, cache_dir)
    if not download or os.path.exists(target):
        return target
    return _submit(url, target, storage_options, wait=True).result()


def prefetch_urls(urls: Iterable[Any], cache_dir: Any = None, *,
                  storage_options: dict | None = None) -> list[Future]:
    """Start background downloads of the ``http(s)`` URLs among ``urls`` that have no copy yet
    (other items are skipped); returns one future per download started or joined, each giving
    the local path (or raising the download's error)."""
    futures = []
    for url in urls:
        if not is_http_url(url):
            continue
        target = cache_path_for_url(url, cache_dir)
        if not os.path.exists(target):
            futures.append(_submit(url, target, storage_options, wait=False))
    return futures


def local_copy(path: str, storage_options: dict | None = None) -> str | None:
    """The complete whole-file copy of an ``http(s)`` URL (in ``storage_options["cache_dir"]``
    or the remote cache root), or None: what the datasets read instead of ranged requests."""
    if not is_http_url(path):
        return None
    target = cache_path_for_url(path, (storage_options or {}).get("cache_dir"))
    return target if os.path.exists(target) else None


def _submit(url: str, target: str, storage_options: dict | None, *, wait: bool) -> Future:
    """The download of ``url`` to ``target``: the one in flight, else a new one (run here when
    the caller waits, so a full pool never delays it; else on the prefetch pool)."""
    with _lock:
        running = _in_flight.get(target)
        if running is not None:
            return running
        fut: Future = Future()
        _in_flight[target] = fut
        pool = None if wait else process_executor("torchfits-prefetch", _PREFETCH_WORKERS)
    if pool is None:
        _run(fut, url, target, storage_options)
    else:
        pool.submit(_run, fut, url, target, storage_options)
    return fut


def _run(fut: Future, url: str, target: str, storage_options: dict | None) -> None:
    try:
        if not os.path.exists(target):
            _download(url, target, storage_options)
        fut.set_result(target)
    except BaseException as exc:  # handed to every waiter
        fut.set_exception(exc)
    finally:
        with _lock:
            _in_flight.pop(target, None)


def _download(url: str, target: str, storage_options: dict | None) -> None:
    from ..fits.sources.remote import download

    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=folder)
    os.close(fd)
    try:
        download(url, tmp, storage_options)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

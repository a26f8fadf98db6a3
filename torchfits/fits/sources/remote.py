"""fsspec URLs (``http(s)://``, ``s3://``, ``gs://``, ``memory://``, chained URLs ...) as byte sources.

Reads go through a sparse local mirror (``mirror``): a request fetches only the blocks it
touches, nearby blocks are coalesced, long runs are split and fetched concurrently by fsspec's
bounded pool. Mirrors persist in the block cache (``block_cache``) when the object has a
validator (ETag or mtime), so a second process re-reads nothing it already has.

Security (the torchfits 1.x guard, on by default): ``ftp://`` is refused, and so is any
``http(s)`` URL whose host resolves to a loopback, private, link-local or otherwise reserved
address, checked again on every redirect. ``TORCHFITS_ALLOW_PRIVATE_HOSTS=1`` or
``storage_options={"allow_private_hosts": True}`` lifts it for local servers.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ...errors import (
    FitsError,
    FitsFileNotFoundError,
    HttpBlockedError,
    RemoteFileChangedError,
    RemoteReadError,
)
from . import http_checks
from .base import ByteSource
from .block_cache import mirror_path, remote_cache_root, trim
from .memory import BytesSource
from .mirror import MirroredSource

__all__ = ["RemoteSource", "open_remote", "check_url", "normalize_url", "redacted_url",
           "split_storage_options", "validator_of", "list_remote", "read_small", "write_small",
           "remote_identity", "check_writable", "guarded_filesystem", "fetch_vos", "still_valid",
           "forget_filesystems", "HttpObject", "download"]

log = logging.getLogger(__name__)
_OUR_OPTIONS = ("allow_private_hosts", "cache", "cache_dir") + http_checks.OPTIONS
_BLOCKED_SCHEMES = ("ftp", "ftps")
_HTTP = ("http", "https")


def normalize_url(url: str) -> str:
    """``vos:path`` / ``vault:path`` → ``vos://cadc.nrc.ca~vault/path`` (1.x short forms)."""
    for short in ("vos:", "vault:"):
        if url.startswith(short) and not url.startswith("vos://"):
            rest = url[len(short):].lstrip("/")
            return f"vos://cadc.nrc.ca~vault/{rest}"
    return url


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def allow_private(storage_options: dict | None) -> bool:
    if storage_options and "allow_private_hosts" in storage_options:
        return _truthy(storage_options["allow_private_hosts"])
    return _truthy(os.environ.get("TORCHFITS_ALLOW_PRIVATE_HOSTS", ""))


def _resolve(host: str) -> list[str]:
    """Every address ``host`` resolves to (tests replace this to simulate DNS)."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as exc:
        raise FitsFileNotFoundError(f"Could not open FITS file: cannot resolve host {host!r} "
                                    f"({exc.strerror})") from None
    return sorted({str(info[4][0]) for info in infos})


def _blocked_address(addr: str) -> bool:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_reserved
            or ip.is_multicast or ip.is_unspecified)


def check_url(url: str, allow_private_hosts: bool = False) -> None:
    """Raise HttpBlockedError for ``ftp://`` or an http(s) host on an internal network."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in _BLOCKED_SCHEMES:
        raise HttpBlockedError(f"{scheme}:// URLs are not supported: access to internal or "
                               "private networks is blocked for FTP (use https://)")
    if scheme not in _HTTP or allow_private_hosts:
        return
    host = urlsplit(url).hostname or ""
    if not host:
        raise FitsError(f"URL has no host: {redacted_url(url)}")
    try:
        addrs = [str(ipaddress.ip_address(host))]
    except ValueError:
        addrs = _resolve(host)
    for addr in addrs:
        if _blocked_address(addr):
            raise HttpBlockedError(
                f"access to internal or private networks is blocked: {host} resolves to {addr} "
                "(set TORCHFITS_ALLOW_PRIVATE_HOSTS=1 or storage_options="
                "{'allow_private_hosts': True} to read from a local server)")


def redacted_url(url: str) -> str:
    """A URL without user:password and query string, for messages."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def _blocked_in(exc: BaseException) -> HttpBlockedError | None:
    """A guard refusal that fsspec wrapped (it reports failed requests as not found), or None."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 20:
        if isinstance(cur, HttpBlockedError):
            return cur.with_traceback(None)
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return None


def _raise_blocked(exc: BaseException) -> None:
    """Re-raise a guard refusal that fsspec wrapped."""
    blocked = _blocked_in(exc)
    if blocked is not None:
        raise blocked from None


def _store_error(exc: BaseException, name: str, what: str,
                 byte_range: tuple[int, int] | None = None) -> FitsError:
    """A store's (fsspec's) error as ours, naming only the redacted URL, never the store's own
    message (it may hold a signed URL): raise it outside the ``except`` clause, so that nothing
    chains to the original."""
    blocked = _blocked_in(exc)
    if blocked is not None:
        return blocked
    if isinstance(exc, FitsError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return FitsFileNotFoundError(f"Could not open FITS file: {name} (FITS file not found)")
    why = " (access denied)" if isinstance(exc, PermissionError) else ""
    return RemoteReadError(f"{name}: {what}: {type(exc).__name__}{why}", url=name, byte_range=byte_range)


def split_storage_options(storage_options: dict | None) -> tuple[dict, dict]:
    """(torchfits's own options, the rest for fsspec)."""
    ours: dict = {}
    rest: dict = {}
    for k, v in (storage_options or {}).items():
        (ours if k in _OUR_OPTIONS else rest)[k] = v
    return ours, rest


def _guard_trace(allow: bool) -> Any:
    """An aiohttp trace config that re-checks the guard on every request and redirect."""
    import aiohttp

    async def on_start(session: Any, ctx: Any, params: Any) -> None:
        check_url(str(params.url), allow)

    async def on_redirect(session: Any, ctx: Any, params: Any) -> None:
        location = params.response.headers.get("Location")
        if location:
            check_url(str(params.response.url.join(type(params.response.url)(location))), allow)

    tc = aiohttp.TraceConfig()
    tc.on_request_start.append(on_start)
    tc.on_request_redirect.append(on_redirect)
    return tc


def _with_credentials(options: dict) -> dict:
    """HTTP options plus an Authorization header from the environment (unless one is given)."""
    options = dict(options)
    headers = dict(options.get("headers") or {})
    if not any(k.lower() == "authorization" for k in headers):
        auth = os.environ.get("TORCHFITS_HTTP_AUTHORIZATION")
        token = os.environ.get("TORCHFITS_HTTP_TOKEN")
        if auth:
            headers["Authorization"] = auth
        elif token:
            headers["Authorization"] = f"Bearer {token}"
    if headers:
        options["headers"] = headers
    return options


def _with_guard(options: dict, allow: bool) -> dict:
    options = dict(options)
    client = dict(options.get("client_kwargs") or {})
    client["trace_configs"] = list(client.get("trace_configs") or []) + [_guard_trace(allow)]
    if "timeout" not in client:  # fsspec's own requests (listings): not aiohttp's 300 s either
        client["timeout"] = _client_timeout(http_checks.settings_of(None))
    options["client_kwargs"] = client
    return options


_fs_lock = threading.Lock()
_fs_cache: dict = {}


def _filesystem(url: str, options: dict, allow: bool) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            f"reading {redacted_url(url)} needs fsspec: pip install 'torchfits[remote]'") from None
    protocol = url.split("://", 1)[0].lower()
    if protocol in _HTTP:
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            raise ImportError("reading http(s) URLs needs aiohttp: pip install 'torchfits[remote]'") from None
    if protocol not in _HTTP:
        # fsspec caches these file systems itself (per protocol and options).
        return fsspec.core.url_to_fs(url, **options)
    options = _with_credentials(options)
    # Kept per process: fsspec's async file systems are not fork-safe (a forked DataLoader
    # worker must not use its parent's event loop and sessions); `open_source` forgets them in
    # a new process (`forget_filesystems`).
    key = (repr(sorted((k, repr(v)) for k, v in options.items())), allow)
    with _fs_lock:
        fs = _fs_cache.get(key)
    if fs is None:
        options = _with_guard(options, allow)
        options.setdefault("skip_instance_cache", True)
        fs, _ = fsspec.core.url_to_fs(url, **options)
        with _fs_lock:
            _fs_cache[key] = fs
    return fs, url


def forget_filesystems() -> None:
    """Drop this module's http(s) file systems (a forked process must open its own). A new
    lock too: a thread of the parent may have held the old one when the process forked."""
    global _fs_lock, _fs_cache
    _fs_lock = threading.Lock()
    _fs_cache = {}


def validator_of(info: dict) -> dict:
    """What identifies one version of a remote object (size plus ETag/mtime where given)."""
    out: dict = {}
    for k, v in info.items():
        lk = k.lower()
        if lk in ("etag", "mtime", "last_modified", "lastmodified", "last-modified", "md5",
                  "checksum", "generation", "version_id", "created"):
            out[lk] = str(v)
    return out


def _client_timeout(settings: http_checks.HttpSettings) -> Any:
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=settings.timeout, sock_read=settings.timeout)


_CONCURRENCY = 32  # ranged requests of one read in flight at once


class _Retry(Exception):
    """One attempt failed in a way worth trying again (``status`` None: no answer)."""

    def __init__(self, problem: str, status: int | None = None, wait: float | None = None) -> None:
        super().__init__(problem)
        self.problem, self.status, self.wait = problem, status, wait


class HttpObject:
    """Verified, retried requests for one http(s) object, over the session of its fsspec file
    system (so its headers, auth, client options and the security guard apply).

    ``pinned`` is the validator the object had when it was opened (`probe`): every answer is
    compared with it, and a strong ETag goes out as ``If-Match``.
    """

    def __init__(self, fs: Any, url: str, settings: http_checks.HttpSettings) -> None:
        self.fs = fs
        self.url = url
        self.name = redacted_url(url)
        self.settings = settings
        self.pinned: dict = {}

    # -- one request, tried again until it succeeds or the retries are spent --------------------
    async def _attempt(self, session: Any, method: str, headers: dict) -> tuple[int, Any, bytes]:
        kw = dict(self.fs.kwargs)
        merged = dict(kw.pop("headers", None) or {})
        merged.update(headers)
        merged["Accept-Encoding"] = "identity"
        kw["timeout"] = _client_timeout(self.settings)
        async with session.request(method, self.fs.encode_url(self.url), headers=merged, **kw) as r:
            body = await r.read() if method == "GET" else b""
            return r.status, r.headers, body

    async def _request(self, method: str, headers: dict, what: str,
                       accept: Callable[[int, Any, bytes], Any]) -> Any:
        """``accept(status, headers, body)`` → the result, or raises `_Retry` / a final error."""
        import aiohttp

        session = await self.fs.set_session()
        tries = self.settings.retries + 1
        failure: _Retry | None = None
        for attempt in range(tries):
            if failure is not None:
                delay = http_checks.backoff(attempt, self.settings, failure.wait)
                log.debug("%s: %s: %s; retry %d of %d in %.2f s", self.name, what, failure.problem,
                          attempt, tries - 1, delay)
                await asyncio.sleep(delay)
            failure = None
            try:
                status, hdrs, body = await self._attempt(session, method, headers)
            except HttpBlockedError:
                raise
            except aiohttp.TooManyRedirects:
                failure = _Retry("too many redirects (a redirect loop)")
                break
            except asyncio.TimeoutError:
                failure = _Retry(f"no answer within {self.settings.timeout:g} s (timeout)")
                continue
            except aiohttp.ClientPayloadError:
                failure = _Retry("the connection closed before the whole body came (truncated body)")
                continue
            except (aiohttp.ClientError, OSError) as exc:
                failure = _Retry(f"connection failed ({type(exc).__name__})")
                continue
            try:
                return accept(status, hdrs, body)
            except _Retry as exc:
                failure = exc
        assert failure is not None
        n = f" after {tries} tries" if tries > 1 and "redirect" not in failure.problem else ""
        message = (f"Could not open FITS file: {self.name} ({failure.problem}{n})" if what == "opening"
                   else f"{self.name}: {what}: {failure.problem}{n}")
        raise RemoteReadError(message, url=self.name, status=failure.status)

    def _final(self, status: int, hdrs: Any, what: str, byte_range: tuple[int, int] | None) -> None:
        """Raise for an answer that no retry can fix; `_Retry` for one that may pass later."""
        if status in (404, 410):
            raise FitsFileNotFoundError(f"Could not open FITS file: {self.name} (FITS file not found: "
                                        f"HTTP {status})")
        if status == 412:
            raise RemoteFileChangedError(
                f"{self.name}: {what}: the object changed since it was opened (HTTP 412: its ETag is "
                f"no longer {self.pinned.get('etag')}); open it again", url=self.name,
                byte_range=byte_range, status=status)
        if http_checks.retryable_status(status):
            raise _Retry(f"HTTP {status}", status, http_checks.retry_after(hdrs.get("Retry-After")))
        why = {401: " (authentication required)", 403: " (access denied)",
               416: " (range not satisfiable)"}.get(status, "")
        raise RemoteReadError(f"{self.name}: {what}: HTTP {status}{why}", url=self.name,
                              byte_range=byte_range, status=status)

    def _check_version(self, hdrs: Any, what: str, byte_range: tuple[int, int] | None) -> None:
        diff = http_checks.changed(self.pinned, hdrs)
        if diff:
            raise RemoteFileChangedError(
                f"{self.name}: {what}: the object changed while it was being read ({diff}); no "
                "bytes of two versions are mixed: open it again", url=self.name,
                byte_range=byte_range, status=None)

    # -- what the sources ask --------------------------------------------------------------------
    async def probe(self) -> dict:
        """Size and validator (``{"size", "ETag", "Last-Modified", "body"}``): a HEAD, else a
        one-byte range GET (no Content-Length, or HEAD refused); ``body`` is the whole object when
        the server answered a range request with all of it and no length."""
        what = "opening"

        def head(status: int, hdrs: Any, body: bytes) -> Any:
            if status in (405, 501, 403, 400):
                return None  # HEAD refused (a URL signed for GET only): try a ranged GET
            if not 200 <= status < 300:
                self._final(status, hdrs, what, None)
            enc = hdrs.get("Content-Encoding", "identity")
            if "Content-Length" not in hdrs or enc not in ("identity", ""):
                return None
            return {"size": int(hdrs["Content-Length"]), **_validator_headers(hdrs), "body": None}

        info = await self._request("HEAD", {}, what, head)
        if info is not None:
            return info

        def get(status: int, hdrs: Any, body: bytes) -> Any:
            if status == 206:
                total = hdrs.get("Content-Range", "").rpartition("/")[2]
                if total.isdigit():
                    return {"size": int(total), **_validator_headers(hdrs), "body": None}
                return {"size": None, **_validator_headers(hdrs), "body": None}
            if status == 200:
                return {"size": len(body), **_validator_headers(hdrs), "body": body}
            self._final(status, hdrs, what, None)

        info = await self._request("GET", {"Range": "bytes=0-0"}, what, get)
        if info["size"] is None:  # ranges but no total: read it whole
            info = await self._request("GET", {}, what, get)
        return info

    async def get_range(self, offset: int, size: int, total: int) -> bytes:
        """Bytes ``offset..offset+size`` of this version: verified, else retried, else an error.
        A server that ignores ``Range`` answers with the whole object: that is returned."""
        what = f"reading bytes {offset}..{offset + size}"
        rng = (offset, offset + size)
        headers = {"Range": f"bytes={offset}-{offset + size - 1}", **http_checks.pin_headers(self.pinned)}

        def accept(status: int, hdrs: Any, body: bytes) -> bytes:
            if status not in (200, 206):
                self._final(status, hdrs, what, rng)
            self._check_version(hdrs, what, rng)
            problem = http_checks.check_range(status, hdrs, offset, size, total, len(body))
            if problem:
                raise _Retry(problem, status)
            return body

        try:
            return await self._request("GET", headers, what, accept)  # type: ignore[no-any-return]
        except RemoteReadError as exc:
            if exc.byte_range is None:
                exc.byte_range = rng
            raise

    async def get_whole(self) -> bytes:
        """The whole object in one verified answer (a small one: a statistics sidecar)."""
        what = "reading"

        def accept(status: int, hdrs: Any, body: bytes) -> bytes:
            if status != 200:
                self._final(status, hdrs, what, None)
            length = hdrs.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != len(body):
                raise _Retry(f"{len(body)} bytes received of {length} (truncated body)", status)
            return body

        return await self._request("GET", {}, what, accept)  # type: ignore[no-any-return]

    async def get_ranges(self, ranges: list[tuple[int, int]], total: int) -> list[bytes]:
        gate = asyncio.Semaphore(_CONCURRENCY)

        async def one(offset: int, size: int) -> bytes:
            async with gate:
                return await self.get_range(offset, size, total)

        results = await asyncio.gather(*(one(o, s) for o, s in ranges), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:  # a version change first: it says what to do
            raise next((e for e in errors if isinstance(e, RemoteFileChangedError)), errors[0])
        return results  # type: ignore[return-value]

    def run(self, coro: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self.fs.loop, lambda: coro)


def _validator_headers(hdrs: Any) -> dict:
    return {k: hdrs[k] for k in ("ETag", "Last-Modified") if hdrs.get(k)}


def _is_http(url: str) -> bool:
    return url.split("://", 1)[0].lower() in _HTTP


class RemoteSource(MirroredSource):
    """One remote object read by byte ranges: http(s) through `HttpObject` (every answer
    verified, retried, of the version pinned at open), other stores through fsspec."""

    def __init__(self, url: str, fs: Any, fspath: str, size: int, validator: dict,
                 cache_file: str | None, http: HttpObject | None = None) -> None:
        self._fs = fs
        self._fspath = fspath
        self._http = http
        self.url = url
        self.validator = validator
        self.stale = False
        self.checked_at = time.monotonic()
        super().__init__(redacted_url(url), size, cache_file=cache_file, validator=validator)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        if self.stale:
            raise RemoteFileChangedError(f"{self.path}: the object changed since it was opened; "
                                         "open it again", url=self.path)
        if self._http is not None:
            try:
                datas = self._http.run(self._http.get_ranges(ranges, self.size))
            except RemoteFileChangedError:
                self.stale = True
                raise
        else:
            datas = self._fetch_fsspec(ranges)
        out = []
        for (offset, size), data in zip(ranges, datas):
            if len(data) != size and len(data) == self.size:
                # The server ignored the Range header and sent the whole object: keep all of it.
                self.mark_all(data)
                data = data[offset:offset + size]
            out.append(data)
        return out

    def _fetch_fsspec(self, ranges: list[tuple[int, int]]) -> list[Any]:
        fs, p = self._fs, self._fspath
        failure: tuple[int, int, BaseException] | None = None
        try:
            datas = fs.cat_ranges([p] * len(ranges), [o for o, _ in ranges],
                                  [o + s for o, s in ranges], on_error="return")
        except Exception as exc:  # noqa: BLE001 - any store error, reported without its text
            failure = (ranges[0][0], ranges[0][0] + ranges[0][1], exc)
        else:
            for (offset, size), data in zip(ranges, datas):
                if isinstance(data, BaseException):
                    failure = (offset, offset + size, data)
                    break
        if failure is not None:
            start, stop, err = failure
            raise _store_error(err, self.path, f"reading bytes {start}..{stop}", (start, stop))
        return datas  # type: ignore[no-any-return]


def open_remote(url: str, storage_options: dict | None = None) -> ByteSource:
    """A byte source for an fsspec URL (after the security guard).

    http(s): a HEAD (or a one-byte ranged GET) gives the size and the validator that every later
    range request of this source must match. Other stores: fsspec's ``info``.
    """
    ours, _ = split_storage_options(storage_options)
    url = normalize_url(url)
    name = redacted_url(url)
    fs, path = guarded_filesystem(url, storage_options)
    http, info = _probe(fs, url, path, ours, name)
    if info.get("body") is not None:  # the server sent it all: nothing more to ask
        return BytesSource(info["body"], name)
    size = info.get("size")
    if info.get("type") == "directory":
        raise FitsFileNotFoundError(f"Could not open FITS file: {name} (a directory)")
    if size is None:
        # No size from the store: the object can only be read whole.
        return BytesSource(_cat_whole(fs, path, name), name)
    validator = validator_of(info)
    if http is not None:
        http.pinned = validator
    cache = ours.get("cache", os.environ.get("TORCHFITS_REMOTE_CACHE_MODE", "blocks"))
    protocol = url.split("://", 1)[0].lower()
    cache_file = None
    if cache not in (False, None, "none", "off", "0") and validator and protocol != "memory":
        root = ours.get("cache_dir")
        from pathlib import Path

        root_path = Path(root) if root else remote_cache_root()
        cache_file = mirror_path(url, dict(validator, size=size), root_path)
        trim(root_path, keep=cache_file)
    src = RemoteSource(url, fs, path, int(size), validator, cache_file, http)
    if cache == "file":
        src.buffer()  # the whole object now, then every read is local
    return src


def _cat_whole(fs: Any, path: str, name: str) -> bytes:
    failure = None
    try:
        return bytes(fs.cat_file(path))
    except Exception as exc:  # noqa: BLE001 - any store error, reported without its text
        failure = _store_error(exc, name, "reading the whole object")
    raise failure


def list_remote(url: str, storage_options: dict | None = None, *, glob: bool = True) -> list[str]:
    """The FITS files a remote glob (``glob``) or directory URL names, as full URLs, sorted.

    The listing request goes through the same security guard and credentials as reads. An
    http(s) "directory" can only be listed when the server answers it with an HTML page of
    links (fsspec reads the links); object stores (``s3://``, ``gs://`` ...) list natively.
    """
    url = normalize_url(url)
    fs, path = guarded_filesystem(url, storage_options)
    pattern = path if glob else path.rstrip("/") + "/*.fit*"
    try:
        found = fs.glob(pattern)
    except HttpBlockedError:
        raise
    except (FileNotFoundError, OSError) as exc:
        _raise_blocked(exc)
        found = []
    if not found:
        hint = (" (an http(s) directory is listed from the HTML index page the server returns "
                "for it, and this one returned none: pass the files as a list of URLs)"
                if url.split("://", 1)[0].lower() in _HTTP else "")
        raise FitsFileNotFoundError(f"no FITS files match {redacted_url(url)}{hint}")
    return [fs.unstrip_protocol(p) if "://" not in p else p for p in sorted(found)]


def guarded_filesystem(url: str, storage_options: dict | None = None) -> tuple[Any, str]:
    """The fsspec file system and path of ``url``, after the security guard, with the caller's
    fsspec options and credentials: what every remote request here goes through."""
    _, options = split_storage_options(storage_options)
    url = normalize_url(url)
    allow = allow_private(storage_options)
    check_url(url, allow)
    return _filesystem(url, options, allow)


def read_small(url: str, storage_options: dict | None = None) -> bytes | None:
    """The whole of a small remote object (a statistics sidecar), through the guard; None when
    the store has no such object, or refuses it (a missing key can be a 403 on S3 or a CDN) or
    fails (a 5xx after the retries): then with a warning, since a sidecar only speeds reads up."""
    ours, _ = split_storage_options(storage_options)
    name = redacted_url(url)
    fs, path = guarded_filesystem(url, storage_options)
    failure: FitsError | None = None
    if _is_http(url):
        http = HttpObject(fs, url, http_checks.settings_of(ours))
        try:
            return http.run(http.get_whole())  # type: ignore[no-any-return]
        except FitsFileNotFoundError:
            return None
        except RemoteReadError as exc:
            failure = exc
    else:
        try:
            return bytes(fs.cat_file(path))
        except Exception as exc:  # noqa: BLE001 - any store error, reported without its text
            failure = _store_error(exc, name, "reading")
        if isinstance(failure, HttpBlockedError):
            raise failure
        if isinstance(failure, FitsFileNotFoundError):
            return None
    warnings.warn(f"{failure}: read as no statistics sidecar", RuntimeWarning, stacklevel=3)
    return None


def download(url: str, target: str, storage_options: dict | None = None) -> None:
    """Copy the object ``url`` into the local file ``target``: http(s) by verified ranges of the
    version found first (or one verified whole answer), other stores by fsspec."""
    ours, _ = split_storage_options(storage_options)
    name = redacted_url(url)
    fs, path = guarded_filesystem(url, storage_options)
    if not _is_http(url):
        failure = None
        try:
            fs.get_file(path, target)
        except Exception as exc:  # noqa: BLE001 - any store error, reported without its text
            failure = _store_error(exc, name, "downloading")
        if failure is not None:
            raise failure
        return
    http = HttpObject(fs, url, http_checks.settings_of(ours))
    info = http.run(http.probe())
    with open(target, "wb") as out:
        if info["body"] is not None:
            out.write(info["body"])
            return
        size = int(info["size"])
        http.pinned = validator_of(info)
        step, batch = 8 << 20, 8
        for start in range(0, size, step * batch):
            ranges = [(o, min(step, size - o)) for o in range(start, min(size, start + step * batch), step)]
            for data in http.run(http.get_ranges(ranges, size)):
                if len(data) == size and size > step:  # the server ignored Range: all of it
                    out.seek(0)
                    out.write(data)
                    out.truncate(size)
                    return
                out.write(data)


def check_writable(url: str) -> None:
    """Refuse a URL no upload can go to (an http(s) server takes none), before any work."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("http", "https", "ftp", "ftps"):
        raise ValueError(f"cannot write to {scheme}:// URLs ({redacted_url(url)}); write to a file system "
                         "or an object store (s3://, gs://, abfs://, ...)")


def write_small(url: str, data: bytes, storage_options: dict | None = None) -> None:
    """Upload ``data`` as the object ``url`` in one request (readers see all of it or none)."""
    check_writable(url)
    fs, path = guarded_filesystem(url, storage_options)
    fs.pipe_file(path, data)


def remote_identity(url: str, storage_options: dict | None = None) -> dict:
    """What a statistics entry records of one remote object version: its size and the
    validator `open_remote` compares (ETag, modification time, ... as the store gives them)."""
    ours, _ = split_storage_options(storage_options)
    fs, path = guarded_filesystem(url, storage_options)
    _, info = _probe(fs, url, path, ours, redacted_url(url))
    size = len(info["body"]) if info.get("body") is not None else info["size"]
    return {"size": int(size), "validator": validator_of(info)}


def _probe(fs: Any, url: str, path: str, ours: dict, name: str) -> tuple[HttpObject | None, dict]:
    """Size and validator of one object: http(s) by a checked HEAD (or one-byte GET; its
    ``body`` holds the whole object when the server sent it all), other stores by ``fs.info``."""
    if _is_http(url):
        http = HttpObject(fs, url, http_checks.settings_of(ours))
        return http, http.run(http.probe())
    failure = None
    try:
        info = fs.info(path)
    except Exception as exc:  # noqa: BLE001 - any store error, reported without its text
        failure = _store_error(exc, name, "opening")
    if failure is not None:
        raise failure  # outside the except block: no chained exception carries the URL's secrets
    return None, info


def fetch_vos(url: str, storage_options: dict | None = None) -> str:
    """Download a VOSpace file once into the remote cache with the CADC ``vos`` client; its path.

    VOSpace offers no byte ranges or validators through the client, so the whole file is cached
    (``torchfits.cache.clear_cache(disk=True)`` forgets it).
    """
    url = normalize_url(url)
    try:
        import vos  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError("reading vos:/vault: URLs needs the CADC 'vos' client: "
                          "pip install 'torchfits[vos]'") from None
    ours, _ = split_storage_options(storage_options)
    from pathlib import Path

    root = Path(ours["cache_dir"]) if ours.get("cache_dir") else remote_cache_root()
    import hashlib

    target = root / "vos" / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".fits")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.part")
        try:
            vos.Client().copy(url, str(tmp))
        except Exception as exc:  # noqa: BLE001 - the client raises many kinds
            raise FitsFileNotFoundError(f"Could not open FITS file: {url} ({type(exc).__name__}: "
                                        f"{exc})") from None
        os.replace(tmp, target)
    return str(target)


def still_valid(src: ByteSource, storage_options: dict | None, ttl: float = 5.0) -> bool:
    """Whether a cached remote source still describes the object (re-checked after ``ttl`` s)."""
    if not isinstance(src, RemoteSource):
        return True
    if src.stale:
        return False
    now = time.monotonic()
    if now - getattr(src, "checked_at", 0.0) < ttl:
        return True
    try:
        info = src._http.run(src._http.probe()) if src._http is not None else src._fs.info(src._fspath)
    except Exception:  # noqa: BLE001 - whatever failed, the source is not known to be valid
        return False
    ok = info.get("size") == src.size and validator_of(info) == src.validator
    if ok:
        src.checked_at = now
    return ok

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

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ...errors import FitsError, FitsFileNotFoundError, HttpBlockedError
from .base import ByteSource
from .block_cache import mirror_path, remote_cache_root, trim
from .memory import BytesSource
from .mirror import MirroredSource

__all__ = ["RemoteSource", "open_remote", "check_url", "normalize_url", "redacted_url",
           "split_storage_options", "validator_of", "list_remote", "read_small", "write_small",
           "remote_identity", "check_writable", "guarded_filesystem", "fetch_vos", "still_valid",
           "forget_filesystems"]

_OUR_OPTIONS = ("allow_private_hosts", "cache", "cache_dir")
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


def _raise_blocked(exc: BaseException) -> None:
    """Re-raise a guard refusal that fsspec wrapped (it reports failed requests as not found)."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 20:
        if isinstance(cur, HttpBlockedError):
            raise cur.with_traceback(None) from None
        cur = cur.__cause__ or cur.__context__
        seen += 1


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


class RemoteSource(MirroredSource):
    """One remote object read by byte ranges through fsspec."""

    def __init__(self, url: str, fs: Any, fspath: str, size: int, validator: dict,
                 cache_file: str | None) -> None:
        self._fs = fs
        self._fspath = fspath
        self.url = url
        self.validator = validator
        self.checked_at = time.monotonic()
        super().__init__(redacted_url(url), size, cache_file=cache_file, validator=validator)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        fs, p = self._fs, self._fspath
        if len(ranges) == 1:
            (offset, size), = ranges
            with _fsspec_errors(self.path, lambda exc: FitsError(
                    f"{self.path}: reading bytes {offset}..{offset + size}: {type(exc).__name__}")):
                datas = [fs.cat_file(p, start=offset, end=offset + size)]
        else:
            datas = fs.cat_ranges([p] * len(ranges), [o for o, _ in ranges],
                                  [o + s for o, s in ranges], on_error="return")
        out = []
        for (offset, size), data in zip(ranges, datas):
            if isinstance(data, BaseException):
                _raise_blocked(data)
                if isinstance(data, FitsError):
                    raise data
                raise FitsError(f"{self.path}: reading bytes {offset}..{offset + size}: "
                                f"{type(data).__name__}") from None
            if len(data) != size and len(data) == self.size:
                # The server ignored the Range header and sent the whole object: keep all of it.
                self.mark_all(data)
                data = data[offset:offset + size]
            out.append(data)
        return out


@contextmanager
def _fsspec_errors(name: str, other: Callable[[OSError], FitsError]) -> Iterator[None]:
    """fsspec's errors for the object ``name`` as ours: a blocked address stays as it is, a missing
    object is `FitsFileNotFoundError`, any other OSError becomes ``other(exc)``."""
    try:
        yield
    except HttpBlockedError:
        raise
    except FileNotFoundError as exc:
        _raise_blocked(exc)
        raise FitsFileNotFoundError(f"Could not open FITS file: {name} (FITS file not found)") from None
    except OSError as exc:
        _raise_blocked(exc)
        raise other(exc) from None


def open_remote(url: str, storage_options: dict | None = None) -> ByteSource:
    """A byte source for an fsspec URL (after the security guard)."""
    ours, _ = split_storage_options(storage_options)
    url = normalize_url(url)
    fs, path = guarded_filesystem(url, storage_options)
    with _fsspec_errors(redacted_url(url), lambda exc: FitsFileNotFoundError(
            f"Could not open FITS file: {redacted_url(url)} ({type(exc).__name__})")):
        info = fs.info(path)
    size = info.get("size")
    if info.get("type") == "directory":
        raise FitsFileNotFoundError(f"Could not open FITS file: {redacted_url(url)} (a directory)")
    if size is None:
        # No size from the server: the object can only be read whole.
        return BytesSource(fs.cat_file(path), redacted_url(url))
    validator = validator_of(info)
    cache = ours.get("cache", os.environ.get("TORCHFITS_REMOTE_CACHE_MODE", "blocks"))
    protocol = url.split("://", 1)[0].lower()
    cache_file = None
    if cache not in (False, None, "none", "off", "0") and validator and protocol != "memory":
        root = ours.get("cache_dir")
        from pathlib import Path

        root_path = Path(root) if root else remote_cache_root()
        cache_file = mirror_path(url, dict(validator, size=size), root_path)
        trim(root_path, keep=cache_file)
    src = RemoteSource(url, fs, path, int(size), validator, cache_file)
    if cache == "file":
        src.buffer()  # the whole object now, then every read is local
    return src


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
    the store has no such object or refuses to say (a missing key can be a 403 on S3)."""
    fs, path = guarded_filesystem(url, storage_options)
    try:
        return bytes(fs.cat_file(path))
    except HttpBlockedError:
        raise
    except (FileNotFoundError, PermissionError, OSError) as exc:
        _raise_blocked(exc)
        return None


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
    fs, path = guarded_filesystem(url, storage_options)
    info = fs.info(path)
    return {"size": int(info["size"]), "validator": validator_of(info)}


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
    now = time.monotonic()
    if now - getattr(src, "checked_at", 0.0) < ttl:
        return True
    try:
        info = src._fs.info(src._fspath)
    except (OSError, FitsError):
        return False
    ok = info.get("size") == src.size and validator_of(info) == src.validator
    if ok:
        src.checked_at = now
    return ok

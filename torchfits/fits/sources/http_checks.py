"""What an http(s) response must be before its bytes are used, and when a request is tried again.

No I/O here: `remote` sends the requests and asks these functions about each answer.

* Settings: the idle timeout (``TORCHFITS_HTTP_TIMEOUT`` / ``storage_options["http_timeout"]``,
  seconds, default 10: connecting, and waiting for the next bytes of a body), the retry count
  (``TORCHFITS_HTTP_RETRIES`` / ``http_retries``, default 3) and the first backoff
  (``http_backoff``, default 0.5 s, doubled on each retry, with jitter, at most 10 s).
* Verification of a ranged answer (`check_range`): a 206 whose ``Content-Range`` is exactly the
  range asked for and whose body has exactly that length, or a 200 whose body is the whole
  object (a server that ignores ``Range``); anything else is refused.
* Versions (`validator_of_headers`, `changed`): the ETag (else Last-Modified) an object had when
  it was opened is pinned; a strong ETag is sent as ``If-Match``; every answer's validator is
  compared with the pinned one.
* Retries (`retryable_status`, `backoff`): connection errors, truncated bodies, timeouts, 408,
  425, 429 and 5xx (but 501 and 505) are tried again after an exponential backoff with jitter,
  or after the ``Retry-After`` the server asked for (at most 60 s).
"""
from __future__ import annotations

import email.utils
import os
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HttpSettings", "settings_of", "check_range", "validator_of_headers", "changed",
           "pin_headers", "retryable_status", "backoff", "retry_after", "OPTIONS",
           "DEFAULT_TIMEOUT", "DEFAULT_RETRIES"]

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF = 0.5
MAX_BACKOFF = 10.0
MAX_RETRY_AFTER = 60.0
OPTIONS = ("http_timeout", "http_retries", "http_backoff")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class HttpSettings:
    """Timeout (seconds, connect and idle read), retries after the first try, first backoff."""

    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    backoff: float = DEFAULT_BACKOFF


def _number(value: Any, name: str, kind: type) -> Any:
    try:
        out = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    if out < 0:
        raise ValueError(f"{name} must be >= 0, not {value!r}")
    return out


def settings_of(options: Mapping[str, Any] | None) -> HttpSettings:
    """The settings of one call: ``storage_options`` first, then the environment, then defaults."""
    options = options or {}
    timeout = options.get("http_timeout", os.environ.get("TORCHFITS_HTTP_TIMEOUT") or DEFAULT_TIMEOUT)
    retries = options.get("http_retries", os.environ.get("TORCHFITS_HTTP_RETRIES") or DEFAULT_RETRIES)
    return HttpSettings(timeout=_number(timeout, "http timeout", float) or DEFAULT_TIMEOUT,
                        retries=_number(retries, "http retries", int),
                        backoff=_number(options.get("http_backoff", DEFAULT_BACKOFF), "http backoff", float))


def check_range(status: int, headers: Mapping[str, str], offset: int, size: int, total: int,
                got: int) -> str | None:
    """Why an answer to ``Range: bytes=offset-(offset+size-1)`` cannot be used, or None.

    ``got`` is the length of the body received. A 200 is usable only when it is the whole
    object of ``total`` bytes (the caller slices it)."""
    if status == 200:
        if got != total:
            return f"a 200 answer of {got} bytes for an object of {total} bytes"
        return None
    if status != 206:
        return f"HTTP {status}"
    text = headers.get("Content-Range")
    if not text:
        return "a 206 answer without Content-Range"
    m = _CONTENT_RANGE.match(text.strip())
    if m is None:
        return f"an unreadable Content-Range {text!r}"
    first, last, whole = int(m.group(1)), int(m.group(2)), m.group(3)
    if (first, last) != (offset, offset + size - 1):
        return f"Content-Range bytes {first}-{last} for bytes {offset}-{offset + size - 1}"
    if whole != "*" and int(whole) != total:
        return f"Content-Range total {whole} for an object of {total} bytes"
    if got != size:
        return f"{got} bytes received for {size} asked (truncated body)"
    return None


def validator_of_headers(headers: Mapping[str, str]) -> dict:
    """The validator an answer carries, under the keys `remote.validator_of` gives fsspec's info
    (``etag``, else ``last-modified``)."""
    etag = headers.get("ETag")
    if etag:
        return {"etag": etag}
    modified = headers.get("Last-Modified")
    return {"last-modified": modified} if modified else {}


def changed(pinned: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
    """How an answer's validator differs from the pinned one (None: same version, or the
    answer carries no validator of the pinned kind)."""
    for key, header in (("etag", "ETag"), ("last-modified", "Last-Modified")):
        if key in pinned:
            now = headers.get(header)
            if now is not None and _weak(now) != _weak(pinned[key]):
                return f"{header} {pinned[key]} became {now}"
            return None
    return None


def _weak(etag: str) -> str:
    return etag[2:] if etag.startswith("W/") else etag


def pin_headers(pinned: Mapping[str, str]) -> dict:
    """``If-Match`` for a strong pinned ETag (a weak one cannot be matched by a range request)."""
    etag = pinned.get("etag")
    if etag and not etag.startswith("W/") and etag.startswith('"'):
        return {"If-Match": etag}
    return {}


def retryable_status(status: int) -> bool:
    """Whether an HTTP status says "try again later" (408, 425, 429, 5xx but 501 and 505)."""
    return status in (408, 425, 429) or (500 <= status < 600 and status not in (501, 505))


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(attempt: int, settings: HttpSettings, asked: float | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): what the server asked (at most 60 s),
    else ``backoff * 2**(attempt-1)`` (at most 10 s) times a random factor in [0.5, 1)."""
    if asked is not None:
        return min(asked, MAX_RETRY_AFTER)
    base = min(MAX_BACKOFF, settings.backoff * (2 ** (attempt - 1)))
    return base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not security

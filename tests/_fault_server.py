"""An HTTP server on 127.0.0.1 that misbehaves on purpose, for the remote-fault tests.

It serves in-memory files (``files``: name → bytes) with HEAD, single ``Range`` GETs, ETags and
``If-Match``, and can, for range GETs:

* ``fault``: answer wrongly ``times`` times (-1: always), then correctly:
  ``"shift"`` (the bytes of another offset, under an honest Content-Range), ``"lie"`` (the bytes
  of one offset under the Content-Range of another, neither the one asked), ``"norange"`` (a 206
  of other bytes without Content-Range), ``"short"`` (fewer bytes than asked, honestly sized),
  ``"close"`` (the connection closes mid-body), ``"503"`` (with ``Retry-After: 0``),
  ``"stall"`` (no answer for ``stall`` seconds), ``"stall_body"`` (headers, then silence);
* ``flaky``: a fraction of answers (seeded) that are 503s;
* ``head_status``: answer every HEAD with this status;
* ``change_after``: ``(name, new_bytes, n)``: after ``n`` range GETs the file is replaced (the
  ETag changes; ``If-Match`` is honoured with a 412);
* ``replica``: name → other bytes, served on every second GET under their own ETag (two
  replicas behind one name that ignore ``If-Match``);
* ``refuse``: name (or last path part) → a status every request for it gets (a 403: what CDNs
  and S3 answer for a missing key; a 503);
* ``validators=False``: no ETag; ``lengths=False``: no Content-Length on HEAD.

``/loop/<name>`` redirects to itself forever. ``requests`` records (method, path, headers).
"""
from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler

from _http_server import LocalServer


def etag_of(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


class FaultServer(LocalServer):
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.fault: str | None = None
        self.times = -1
        self.stall = 2.0
        self.flaky = 0.0
        self.head_status: int | None = None
        self.change_after: tuple[str, bytes, int] | None = None
        self.replica: dict[str, bytes] = {}
        self.refuse: dict[str, int] = {}
        self.validators = True
        self.lengths = True
        self.requests: list[tuple[str, str, dict]] = []
        self.range_gets = 0
        self._gets = 0
        self._rng = random.Random(1)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _name(self) -> str:
                return self.path.split("?", 1)[0].lstrip("/")

            def _plain(self, status: int, headers: dict | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _early(self) -> tuple[str, bytes] | None:
                """The file to serve, or None when an answer was already sent."""
                with server._lock:
                    server.requests.append((self.command, self.path, dict(self.headers)))
                name = self._name()
                if name.startswith("loop/"):
                    self._plain(302, {"Location": self.path})
                    return None
                status = server.refuse.get(name, server.refuse.get(name.rsplit("/", 1)[-1]))
                if status is not None:
                    self._plain(status, {"Retry-After": "0"})
                    return None
                data = server.files.get(name)
                if data is None:
                    self._plain(404)
                    return None
                return name, data

            def do_HEAD(self) -> None:
                found = self._early()
                if found is None:
                    return
                if server.head_status is not None:
                    self._plain(server.head_status, {"Retry-After": "0"})
                    return
                _, data = found
                self.send_response(200)
                if server.lengths:
                    self.send_header("Content-Length", str(len(data)))
                if server.validators:
                    self.send_header("ETag", etag_of(data))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def _take_fault(self) -> str | None:
                with server._lock:
                    if server.flaky and server._rng.random() < server.flaky:
                        return "503"
                    if server.fault is None or server.times == 0:
                        return None
                    if server.times > 0:
                        server.times -= 1
                    return server.fault

            def do_GET(self) -> None:
                found = self._early()
                if found is None:
                    return
                name, data = found
                rng = self.headers.get("Range")
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", (rng or "").strip())
                with server._lock:
                    server._gets += 1
                    if m:
                        server.range_gets += 1
                    if server.change_after and server.change_after[0] == name \
                            and server.range_gets > server.change_after[2]:
                        server.files[name] = data = server.change_after[1]
                    if name in server.replica and server._gets % 2 == 0:
                        data = server.replica[name]
                        alt = True
                    else:
                        alt = False
                size = len(data)
                tag = etag_of(data)
                match = self.headers.get("If-Match")
                if match and not alt and match != tag:
                    self._plain(412)
                    return
                fault = self._take_fault() if m else None
                if fault == "503":
                    self._plain(503, {"Retry-After": "0"})
                    return
                if fault == "stall":
                    time.sleep(server.stall)
                    self._plain(503)
                    return
                if not m:
                    self._send(200, data, {}, tag)
                    return
                start = int(m.group(1))
                stop = min(size, int(m.group(2)) + 1) if m.group(2) else size
                shift = 2880 if start + 2880 < size else -2880
                body = data[start:stop]
                cr = f"bytes {start}-{stop - 1}/{size}"
                if fault == "shift":
                    body = data[start + shift:stop + shift]
                    cr = f"bytes {start + shift}-{start + shift + len(body) - 1}/{size}"
                elif fault == "lie":
                    body = data[start + shift:stop + shift]
                    cr = f"bytes {start + 1}-{start + len(body)}/{size}"
                elif fault == "norange":
                    body, cr = data[start + shift:stop + shift], ""
                elif fault == "short":
                    body = body[: max(1, len(body) // 2)]
                    cr = f"bytes {start}-{start + len(body) - 1}/{size}"
                headers = {"Content-Range": cr} if cr else {}
                if fault == "close":
                    self.send_response(206)
                    self.send_header("Content-Range", cr)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if fault == "stall_body":
                    self.send_response(206)
                    self.send_header("Content-Range", cr)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[:10])
                    self.wfile.flush()
                    time.sleep(server.stall)
                    self.close_connection = True
                    return
                self._send(206, body, headers, tag)

            def _send(self, status: int, body: bytes, headers: dict, tag: str) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                if server.validators:
                    self.send_header("ETag", tag)
                self.end_headers()
                self.wfile.write(body)

        self._listen(Handler)

"""A small HTTP file server on 127.0.0.1 for remote-read tests (and the remote benchmark).

It serves files from one directory, honours single ``Range: bytes=a-b`` requests (or ignores them
when asked), answers HEAD with size and ETag, redirects ``/redirect/<name>`` to ``/<name>``
(optionally on another server), and counts the body bytes it sends and the headers it saw.
With ``listing=True`` a directory (``/``) answers with an HTML page linking its files, the way
fsspec lists (and globs) an HTTP "directory"; without it, directories are 404 like on most
object stores served over plain HTTP.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

_S = TypeVar("_S", bound="LocalServer")


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) serving one handler class; a context
    manager that starts it and stops it. The servers of the tests share this lifecycle."""

    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self: _S) -> _S:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


class FileServer(LocalServer):
    def __init__(self, root: str, *, honour_range: bool = True, redirect_to: str | None = None,
                 listing: bool = False) -> None:
        self.root = root
        self.listing = listing
        self.honour_range = honour_range
        self.redirect_to = redirect_to  # base URL other servers' files are redirected to
        self.bytes_sent = 0
        self.requests: list[tuple[str, str, dict]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _target(self) -> str | None:
                name = self.path.split("?", 1)[0].lstrip("/")
                full = os.path.join(server.root, name)
                return full if os.path.isfile(full) else None

            def _redirect(self) -> bool:
                if not self.path.startswith("/redirect/"):
                    return False
                rest = self.path[len("/redirect/"):]
                base = server.redirect_to or ""
                self.send_response(302)
                self.send_header("Location", f"{base}/{rest}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def _record(self) -> None:
                with server._lock:
                    server.requests.append((self.command, self.path, dict(self.headers)))

            def do_HEAD(self) -> None:
                self._record()
                if self._redirect():
                    return
                full = self._target()
                if full is None:
                    self.send_error(404)
                    return
                st = os.stat(full)
                self.send_response(200)
                self.send_header("Content-Length", str(st.st_size))
                self.send_header("ETag", _etag(full))
                if server.honour_range:
                    self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def _listing(self) -> bool:
                name = self.path.split("?", 1)[0].lstrip("/")
                folder = os.path.join(server.root, name)
                if not server.listing or not os.path.isdir(folder):
                    return False
                prefix = "/" + name if name and not name.endswith("/") else "/" + name
                prefix = prefix if prefix.endswith("/") else prefix + "/"
                links = "".join(f'<a href="{prefix}{n}">{n}</a>\n' for n in sorted(os.listdir(folder)))
                body = f"<html><body>\n{links}</body></html>\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return True

            def do_GET(self) -> None:
                self._record()
                if self._redirect() or self._listing():
                    return
                full = self._target()
                if full is None:
                    self.send_error(404)
                    return
                size = os.path.getsize(full)
                start, stop = 0, size
                rng = self.headers.get("Range")
                partial = False
                if rng and server.honour_range:
                    m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                    if m:
                        start = int(m.group(1))
                        stop = min(size, int(m.group(2)) + 1) if m.group(2) else size
                        partial = True
                with open(full, "rb") as f:
                    f.seek(start)
                    body = f.read(max(0, stop - start))
                self.send_response(206 if partial else 200)
                if partial:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", _etag(full))
                self.end_headers()
                self.wfile.write(body)
                with server._lock:
                    server.bytes_sent += len(body)

        self._listen(Handler)

    def reset(self) -> None:
        with self._lock:
            self.bytes_sent = 0
            self.requests.clear()


def _etag(path: str) -> str:
    st = os.stat(path)
    return '"' + hashlib.md5(f"{st.st_size}-{st.st_mtime_ns}".encode()).hexdigest() + '"'

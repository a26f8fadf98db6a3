"""An S3-compatible server for tests: moto on 127.0.0.1, started and stopped by the test."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """Run a moto S3 server for the ``with`` block; yields the ``storage_options`` that reach
    it (endpoint and dummy credentials). Skips the test when s3fs or moto are missing."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield {"endpoint_url": f"http://{host}:{port}", "key": "testing", "secret": "testing"}
    finally:
        server.stop()


def s3_filesystem(storage_options: dict):
    """A fresh (uncached) s3fs file system for the server ``storage_options`` name."""
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, **storage_options)

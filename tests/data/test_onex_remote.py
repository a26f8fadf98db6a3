"""torchfits.data.remote (the 1.x module): whole-file copies of http(s) URLs in the remote cache,
downloaded once however resolves and prefetches overlap; datasets read from a copy once it
exists and make_loader(optimize_cache=True) starts the copies (issue #25). Served from
127.0.0.1 only."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
fits = pytest.importorskip("astropy.io.fits")

from _http_server import FileServer  # noqa: E402
from torchfits.data import (  # noqa: E402
    FitsCutoutDataset,
    FitsImageDataset,
    make_loader,
    remote,  # noqa: E402
)
from torchfits.errors import HttpBlockedError  # noqa: E402

pytestmark = [pytest.mark.usefixtures("isolated_remote")]
LOCAL = {"allow_private_hosts": True}


@pytest.fixture
def www(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    for k in range(3):
        fits.PrimaryHDU(np.full((8, 6), k, np.float32)).writeto(root / f"s{k}.fits")
    with FileServer(str(root)) as srv:
        yield str(root), srv


def _gets(srv, name):
    return sum(1 for method, path, _ in srv.requests if method == "GET" and path.endswith(name))


def test_names_and_paths(tmp_path, monkeypatch):
    assert remote.is_http_url("https://example.org/a.fits") and remote.is_http_url("HTTP://x/y")
    assert not remote.is_http_url("s3://bucket/a.fits") and not remote.is_http_url("/tmp/a.fits")
    assert not remote.is_http_url(3)
    monkeypatch.setenv("TORCHFITS_REMOTE_CACHE", str(tmp_path / "rc"))
    url = "https://example.org/data/img.fits.fz?x=1"
    p = remote.cache_path_for_url(url)
    assert p == remote.cache_path_for_url(url)  # stable
    assert os.path.dirname(p) == str(tmp_path / "rc") and p.endswith("img.fits.fz")
    assert p != remote.cache_path_for_url("https://example.org/data/other/img.fits.fz")
    monkeypatch.delenv("TORCHFITS_REMOTE_CACHE")
    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(tmp_path / "c"))
    assert os.path.dirname(remote.cache_path_for_url(url)) == str(tmp_path / "c" / "remote")
    assert os.path.dirname(remote.cache_path_for_url(url, tmp_path / "mine")) == str(tmp_path / "mine")
    # download=False: the cache path, no network (the host does not exist)
    assert remote.resolve_local_path("https://no-such-host.invalid/a.fits", download=False) \
        == remote.cache_path_for_url("https://no-such-host.invalid/a.fits")
    assert remote.resolve_local_path(str(tmp_path / "local.fits")) == str(tmp_path / "local.fits")


def test_resolve_downloads_once(www, tmp_path):
    root, srv = www
    url = f"{srv.url}/s1.fits"
    with pytest.raises(HttpBlockedError):
        remote.resolve_local_path(url, tmp_path / "c")  # 127.0.0.1 needs explicit permission
    local = remote.resolve_local_path(url, tmp_path / "c", storage_options=LOCAL)
    with open(local, "rb") as a, open(os.path.join(root, "s1.fits"), "rb") as b:
        assert a.read() == b.read()
    assert remote.resolve_local_path(url, tmp_path / "c", storage_options=LOCAL) == local
    assert _gets(srv, "s1.fits") == 1
    assert [n for n in os.listdir(tmp_path / "c") if n.startswith(".download-")] == []


def test_overlapping_resolves_and_prefetches_download_once(www, tmp_path, monkeypatch):
    root, srv = www
    url = f"{srv.url}/s2.fits"
    real = remote._download

    def slow(*args):  # keep the download in flight while the others arrive
        time.sleep(0.3)
        real(*args)

    monkeypatch.setattr(remote, "_download", slow)
    futures = remote.prefetch_urls([url, "/not/a/url.fits"], tmp_path / "c", storage_options=LOCAL)
    assert len(futures) == 1
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        remote.resolve_local_path(url, tmp_path / "c", storage_options=LOCAL))) for _ in range(6)]
    for t in threads:
        t.start()
    futures += remote.prefetch_urls([url], tmp_path / "c", storage_options=LOCAL)
    for t in threads:
        t.join()
    assert {f.result() for f in futures} | set(results) == {remote.cache_path_for_url(url, tmp_path / "c")}
    assert _gets(srv, "s2.fits") == 1
    assert remote.prefetch_urls([url], tmp_path / "c", storage_options=LOCAL) == []  # cached


def test_missing_url_fails_and_leaves_nothing(www, tmp_path):
    _, srv = www
    with pytest.raises(FileNotFoundError):
        remote.resolve_local_path(f"{srv.url}/nope.fits", tmp_path / "c", storage_options=LOCAL)
    assert os.listdir(tmp_path / "c") == []


def test_make_loader_prefetches_whole_files_and_datasets_use_them(www, tmp_path):
    root, srv = www
    urls = [f"{srv.url}/s{k}.fits" for k in range(3)]
    ds = FitsImageDataset(urls, cache_dir=tmp_path / "c", storage_options=LOCAL)
    make_loader(ds, batch_size=3, shuffle=False)
    for url in urls:  # the background copies land in the dataset's cache_dir
        remote.resolve_local_path(url, tmp_path / "c", storage_options=LOCAL)
        assert _gets(srv, url.rsplit("/", 1)[1]) == 1
    srv.reset()
    batch, _ = next(iter(make_loader(ds, batch_size=3, shuffle=False, optimize_cache=False)))
    assert batch.shape == (3, 1, 8, 6) and [int(b[0, 0, 0]) for b in batch] == [0, 1, 2]
    assert srv.requests == []  # read from the copies


def test_cutout_datasets_keep_byte_ranges(www, tmp_path, monkeypatch):
    _, srv = www
    url = f"{srv.url}/s0.fits"
    ds = FitsCutoutDataset([(url, 0, 0, 0, 4)], storage_options=LOCAL)
    make_loader(ds, batch_size=1, shuffle=False)
    time.sleep(0.2)
    assert not os.path.exists(remote.cache_path_for_url(url))
    assert ds[0].shape == (1, 4, 4)

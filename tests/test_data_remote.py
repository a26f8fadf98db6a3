"""Training datasets over fsspec URLs (a 127.0.0.1 HTTP server the tests start): the same
items as the local files, ``storage_options`` honoured, small pickles that reopen in
DataLoader workers, staged mosaics cleaned up."""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
fits = pytest.importorskip("astropy.io.fits")

from torchfits.data import (  # noqa: E402
    FitsCutoutDataset,
    FitsImageDataset,
    FitsStagedCutoutIterableDataset,
    FitsTableDataset,
    FitsTableIterableDataset,
    fits_collate_fn,
    make_loader,
)
from torchfits.errors import HttpBlockedError  # noqa: E402

from _http_server import FileServer  # noqa: E402
from _stamps import write_stamp  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
              pytest.mark.usefixtures("isolated_remote")]
LOCAL = {"allow_private_hosts": True}
HAS_FORK = "fork" in mp.get_all_start_methods()


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    root = tmp_path_factory.mktemp("www_data")
    rng = np.random.default_rng(2)
    for k in range(5):
        write_stamp(root / f"s{k}.fits", rng.normal(size=(16, 12)).astype(np.float32),
                    cards=[("CLASS", k)])
    write_stamp(root / "mosaic.fits", rng.normal(size=(600, 500)).astype(np.float32))
    n = 5000
    fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="K", array=np.arange(n)),
        fits.Column(name="MAG", format="E", array=rng.normal(18, 1, n).astype(np.float32))],
        name="CAT").writeto(root / "cat.fits")
    with FileServer(str(root)) as srv:
        yield str(root), srv


def _pairs(root, srv, names):
    return [os.path.join(root, n) for n in names], [f"{srv.url}/{n}" for n in names]


def test_image_datasets_over_http(www):
    root, srv = www
    local, urls = _pairs(root, srv, [f"s{k}.fits" for k in range(5)])
    ds = FitsImageDataset(urls, label_key="CLASS", storage_options=LOCAL)
    ref = FitsImageDataset(local, label_key="CLASS")
    for i in range(5):
        a, b = ds[i], ref[i]
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    x, y = fits_collate_fn(ds.__getitems__([3, 1, 4]))
    rx, ry = fits_collate_fn(ref.__getitems__([3, 1, 4]))
    assert torch.equal(x, rx) and torch.equal(y, ry)
    blob = pickle.dumps(ds)
    assert len(blob) < 4096 and b"allow_private_hosts" in blob
    with pytest.raises(HttpBlockedError):
        FitsImageDataset(urls)[0]  # 127.0.0.1 needs the caller's explicit permission


def test_cutouts_over_http_fetch_only_their_rows(www):
    root, srv = www
    (local,), (url,) = _pairs(root, srv, ["mosaic.fits"])
    boxes = [(10 * k, 7 * k, 32) for k in range(20)] + [(480, 590, 32)]  # the last one clamps
    ds = FitsCutoutDataset([(url, 0, *b) for b in boxes], storage_options=LOCAL)
    ref = FitsCutoutDataset([(local, 0, *b) for b in boxes])
    srv.reset()
    assert torch.equal(fits_collate_fn(ds.__getitems__(list(range(20)))),
                       fits_collate_fn(ref.__getitems__(list(range(20)))))
    assert torch.equal(ds[20], ref[20]) and ds[20].shape == (1, 10, 20)
    assert 0 < srv.bytes_sent < os.path.getsize(local) // 2


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
def test_remote_loaders_reopen_in_workers(www):
    root, srv = www
    local, urls = _pairs(root, srv, [f"s{k}.fits" for k in range(5)])
    for ctx in ("fork", "spawn"):
        got = {}
        ds = FitsImageDataset(urls, label_key="CLASS", storage_options=LOCAL)
        for x, y in make_loader(ds, batch_size=2, num_workers=2, multiprocessing_context=ctx):
            got.update({int(label): img for img, label in zip(x, y)})
        assert sorted(got) == list(range(5))
        assert all(np.array_equal(got[k][0].numpy(), fits.getdata(local[k])) for k in got)
    ids = []
    tds = FitsTableIterableDataset(f"{srv.url}/cat.fits", hdu="CAT", batch_size=700,
                                   as_batches=True, storage_options=LOCAL)
    for batch in make_loader(tds, batch_size=None, num_workers=2, multiprocessing_context="fork"):
        ids.append(batch["ID"])
    assert torch.equal(torch.sort(torch.cat(ids)).values, torch.arange(5000))


def test_tables_over_http(www):
    root, srv = www
    (local,), (url,) = _pairs(root, srv, ["cat.fits"])
    for as_batches in (True, False):
        a = list(FitsTableIterableDataset(url, hdu="CAT", batch_size=999, as_batches=as_batches,
                                          storage_options=LOCAL))
        b = list(FitsTableIterableDataset(local, hdu="CAT", batch_size=999, as_batches=as_batches))
        assert len(a) == len(b) and all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
    remote = FitsTableDataset(url, hdu="CAT", where="MAG > 18.5", storage_options=LOCAL)
    here = FitsTableDataset(local, hdu="CAT", where="MAG > 18.5")
    assert len(remote) == len(here) and int(remote[7][0]["ID"]) == int(here[7][0]["ID"])
    assert len(pickle.dumps(FitsTableIterableDataset(url, hdu="CAT", storage_options=LOCAL))) < 4096
    with pytest.raises(TypeError, match="storage_options"):
        FitsTableIterableDataset(url, hdu="CAT", storage_options="nope")


def test_staged_mosaics_are_copied_and_removed(www, tmp_path):
    root, srv = www
    (local,), (url,) = _pairs(root, srv, ["mosaic.fits"])
    stage = tmp_path / "stage"
    stage.mkdir()
    kw = dict(cutouts_per_file=6, cutout_size=24, seed=3)
    remote = list(FitsStagedCutoutIterableDataset([url], staging_dir=str(stage),
                                                  storage_options=LOCAL, **kw))
    here = list(FitsStagedCutoutIterableDataset([local], **kw))
    assert len(remote) == 6 and all(torch.equal(a, b) for a, b in zip(remote, here))
    assert os.listdir(stage) == []  # cleaned up after use
    kept = FitsStagedCutoutIterableDataset([url], staging_dir=str(stage), cleanup=False,
                                           storage_options=LOCAL, **kw)
    assert all(torch.equal(a, b) for a, b in zip(kept, here))
    (folder,) = os.listdir(stage)
    with open(stage / folder / "mosaic.fits", "rb") as fh, open(local, "rb") as ref:
        assert fh.read() == ref.read()

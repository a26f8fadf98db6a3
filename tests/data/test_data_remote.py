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

from _http_server import FileServer  # noqa: E402
from _stamps import write_stamp  # noqa: E402
from torchfits.data import (  # noqa: E402
    FitsCutoutDataset,
    FitsImageDataset,
    FitsImageIterableDataset,
    FitsSpectrumDataset,
    FitsSpectrumIterableDataset,
    FitsStagedCutoutIterableDataset,
    FitsTableDataset,
    FitsTableIterableDataset,
    fits_collate_fn,
    make_loader,
)
from torchfits.data.loader import FitsBatch  # noqa: E402
from torchfits.errors import HttpBlockedError  # noqa: E402

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
    for k in range(4):  # spectra: 1-D flux, IVAR, MASK (DQ bits), WAVE images and a table arm
        flux = rng.normal(10, 1, 300).astype(np.float32)
        fits.HDUList([
            fits.PrimaryHDU(flux),
            fits.ImageHDU((1.0 / (1.0 + np.abs(flux))).astype(np.float32), name="IVAR"),
            fits.ImageHDU((np.arange(300) % 7 == k).astype(np.int16) * 4, name="MASK"),
            fits.ImageHDU(np.linspace(3600, 9800, 300), name="WAVE"),
            fits.ImageHDU(np.ones(299, np.float32), name="SHORT"),
            fits.BinTableHDU.from_columns([
                fits.Column(name="FLUX", format="300E", array=flux[None] * 2),
                fits.Column(name="IVAR", format="300E", array=np.ones((1, 300), np.float32))],
                name="TAB")]).writeto(root / f"spec{k}.fits")
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
    ds = FitsCutoutDataset([(url, 0, *b) for b in boxes], storage_options=LOCAL, edge="clamp")
    ref = FitsCutoutDataset([(local, 0, *b) for b in boxes], edge="clamp")
    srv.reset()
    assert torch.equal(fits_collate_fn(ds.__getitems__(list(range(20)))),
                       fits_collate_fn(ref.__getitems__(list(range(20)))))
    assert torch.equal(ds[20], ref[20]) and ds[20].shape == (1, 10, 20)
    padded = FitsCutoutDataset([(url, 0, 480, 590, 32)], storage_options=LOCAL, edge="pad")[0]
    assert padded.shape == (1, 32, 32) and torch.equal(padded[:, :10, :20], ref[20])
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


def _same(a, b):
    """Payloads (tensors or nested dicts of them) equal value for value and type for type."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a.dtype == b.dtype and torch.equal(a, b)


def test_spectra_over_http(www):
    root, srv = www
    local, urls = _pairs(root, srv, [f"spec{k}.fits" for k in range(4)])
    kw = dict(ivar_hdu="IVAR", mask_hdu="MASK", wavelength_hdu="WAVE", mask_is_dq=True,
              bad_bits=[2])
    ds = FitsSpectrumDataset(urls, storage_options=LOCAL, **kw)
    ref = FitsSpectrumDataset(local, **kw)
    with fits.open(local[2]) as hdul:  # the astropy oracle for one file
        one = ds[2]
        assert np.array_equal(one["flux"].numpy(), hdul[0].data)
        assert np.array_equal(one["ivar"].numpy(), hdul["IVAR"].data)
        assert np.array_equal(one["mask"].numpy(), (hdul["MASK"].data & 4) == 0)
        assert np.array_equal(one["wavelength"].numpy(), hdul["WAVE"].data)
    for i in range(4):
        assert _same(ds[i], ref[i])
    # The batch path stacks each part once; equal to collating the items.
    batch = ds.__getitems__([3, 0, 2])
    assert isinstance(batch, FitsBatch)
    assert _same(fits_collate_fn(batch), fits_collate_fn([ref[3], ref[0], ref[2]]))
    assert fits_collate_fn(batch)["flux"].shape == (3, 300)
    # Table arms take the per-item path, over HTTP too.
    tab = FitsSpectrumDataset(urls, hdu="TAB", column="FLUX", ivar_column="IVAR", row=0,
                              storage_options=LOCAL)
    tref = FitsSpectrumDataset(local, hdu="TAB", column="FLUX", ivar_column="IVAR", row=0)
    assert _same(fits_collate_fn(tab.__getitems__([1, 3])), fits_collate_fn([tref[1], tref[3]]))
    assert torch.equal(tab[1]["flux"], 2 * ref[1]["flux"])
    blob = pickle.dumps(ds)
    assert len(blob) < 4096 and b"allow_private_hosts" in blob
    with pytest.raises(HttpBlockedError):
        FitsSpectrumDataset(urls)[0]  # 127.0.0.1 needs the caller's explicit permission
    with pytest.raises(TypeError, match="storage_options"):
        FitsSpectrumDataset(urls, storage_options=["nope"])
    streamed = list(FitsSpectrumIterableDataset(urls, storage_options=LOCAL, **kw))
    assert len(streamed) == 4 and all(_same(a, ref[i]) for i, a in enumerate(streamed))


def test_spectrum_batches_fall_back_item_by_item(www):
    root, srv = www
    local, _ = _pairs(root, srv, [f"spec{k}.fits" for k in range(4)])
    # Several arms, and a mask whose shape differs from the flux: the per-item path (and its
    # error naming the file and both shapes).
    arms = FitsSpectrumDataset(local, hdu=[0, "IVAR"], layout="stack")
    assert _same(fits_collate_fn(arms.__getitems__([0, 1])), fits_collate_fn([arms[0], arms[1]]))
    bad = FitsSpectrumDataset(local, ivar_hdu="SHORT")
    with pytest.raises(ValueError, match=r"spec1.fits: ivar has shape \(299,\) but the flux"):
        bad.__getitems__([1, 2])


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
def test_iterable_images_over_http(www):
    root, srv = www
    local, urls = _pairs(root, srv, [f"s{k}.fits" for k in range(5)])
    ref = [fits.getdata(p)[None] for p in local]
    got = list(FitsImageIterableDataset(urls, storage_options=LOCAL))
    assert len(got) == 5 and all(np.array_equal(g.numpy(), r) for g, r in zip(got, ref))
    with pytest.raises(HttpBlockedError):
        list(FitsImageIterableDataset(urls))
    for ctx in ("fork", "spawn"):
        ds = FitsImageIterableDataset(urls, storage_options=LOCAL, shuffle=True, seed=4)
        seen = [x for batch in make_loader(ds, batch_size=2, num_workers=2,
                                           multiprocessing_context=ctx) for x in batch]
        keys = sorted(float(x.double().sum()) for x in seen)
        assert keys == sorted(float(r.astype(np.float64).sum()) for r in ref)  # each once
    sds = FitsSpectrumIterableDataset(_pairs(root, srv, [f"spec{k}.fits" for k in range(4)])[1],
                                      storage_options=LOCAL)
    fluxes = [b["flux"] for b in make_loader(sds, batch_size=1, num_workers=2,
                                             multiprocessing_context="fork")]
    assert len(fluxes) == 4


def test_hdu_suffixes_on_urls_name_the_hdu_on_every_route(www):
    """``https://.../cat.fits[CAT]`` names the HDU in datasets and SQL as in ``read``/``scan``."""
    import torchfits

    root, srv = www
    url, local = f"{srv.url}/cat.fits", os.path.join(root, "cat.fits")
    want = torchfits.scan(local, hdu="CAT").to_arrow()
    for suffix in ("[CAT]", "[1]"):
        got = torchfits.dataset(url + suffix, storage_options=LOCAL).to_table()
        assert got.equals(want)
        count = torchfits.sql(f"select count(*) from '{url + suffix}'", storage_options=LOCAL)
        assert count.fetchall() == [(want.num_rows,)]
        assert len(FitsTableDataset(url + suffix, storage_options=LOCAL)) == want.num_rows
    (stamp,) = [f"{srv.url}/s0.fits"]
    item, _ = FitsImageDataset([stamp + "[0]"], storage_options=LOCAL)[0]
    assert torch.equal(item, FitsImageDataset([os.path.join(root, "s0.fits")])[0][0])
    with pytest.raises(torchfits.errors.HDUNotFoundError, match="cat.fits.*HDU 5"):
        torchfits.dataset(url + "[5]", storage_options=LOCAL)
    with pytest.raises(ValueError, match="section"):
        torchfits.dataset(url + "[1][1:3]", storage_options=LOCAL)

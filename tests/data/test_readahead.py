"""Read-ahead hints (`torchfits.data.readahead`): a map-style batch asks the kernel for every
local file of the batch before decoding it, the table stream for each chunk's byte range before
it decodes; the values are those read without hints."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits.data import (  # noqa: E402
    FitsImageDataset,
    FitsTableIterableDataset,
    readahead,  # noqa: E402
)
from torchfits.data.readers import clear_readers  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise")


@pytest.fixture
def hints(monkeypatch):
    """Every WILLNEED hint as (inode, offset, size), the hint still passed on to the kernel."""
    seen: list[tuple[int, int, int]] = []
    real = os.posix_fadvise

    def record(fd: int, offset: int, size: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            seen.append((os.fstat(fd).st_ino, offset, size))
        real(fd, offset, size, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    return seen


def _files(tmp_path, compressed: bool) -> list[str]:
    rng = np.random.default_rng(7)
    paths = []
    for k in range(6):
        data = rng.integers(-500, 3000, (24, 20)).astype(np.int16)
        path = tmp_path / f"s{k}.fits"
        hdus = [fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1")] if compressed \
            else [fits.PrimaryHDU(data)]
        fits.HDUList(hdus).writeto(path)
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("compressed", [False, True])
def test_batch_hints_every_file_and_keeps_values(tmp_path, hints, compressed):
    paths = _files(tmp_path, compressed)
    hdu = 1 if compressed else 0
    clear_readers()
    ds = FitsImageDataset(paths, hdu=hdu)
    order = [4, 0, 5, 2]
    got = ds.__getitems__(order)
    inodes = {os.stat(p).st_ino: p for p in paths}
    assert sorted(inodes[i] for i, off, n in hints) == sorted(paths[i] for i in order)
    assert all(off == 0 and n == readahead.FILE_AHEAD for _, off, n in hints)  # stamps whole
    images, labels = got.collated
    for slot, i in enumerate(order):
        want = torch.from_numpy(np.asarray(torchfits.read(paths[i], hdu=hdu)))
        assert torch.equal(images[slot, 0], want)
    assert torch.equal(labels, torch.zeros(len(order), dtype=torch.int64))


def test_batch_of_one_and_urls_give_no_hint(tmp_path, hints):
    paths = _files(tmp_path, False)
    FitsImageDataset(paths).__getitems__([3])
    readahead.will_need(["https://example.org/a.fits", "s3://bucket/b.fits"])
    assert hints == []


def test_table_chunks_are_hinted_ahead(tmp_path, hints, monkeypatch):
    import torchfits.data.tables as tables

    n = 5003
    rng = np.random.default_rng(3)
    path = str(tmp_path / "cat.fits")
    fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="K", array=np.arange(n, dtype=np.int64)),
        fits.Column(name="MAG", format="E", array=rng.normal(18, 2, n).astype(np.float32))]).writeto(path)
    monkeypatch.setattr(tables, "_CHUNK_BYTES", 12 * 1000)  # chunks of 1000 rows
    batches = list(FitsTableIterableDataset(path, as_batches=True, batch_size=250))
    assert torch.equal(torch.cat([b["ID"] for b in batches]), torch.arange(n))
    with fits.open(path) as hdul:
        want_mag = np.asarray(hdul[1].data["MAG"])
        data0 = hdul[1]._data_offset
    assert torch.equal(torch.cat([b["MAG"] for b in batches]), torch.from_numpy(want_mag.astype(np.float32)))
    ino = os.stat(path).st_ino
    ranges = sorted((off, size) for i, off, size in hints if i == ino)
    # one hint per chunk, covering the rows' bytes back to back (12 bytes a row)
    assert ranges == [(data0 + 12 * c, 12 * min(1000, n - c)) for c in range(0, n, 1000)]

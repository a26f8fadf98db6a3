"""The cutout kernel (``_image.CutoutReader``): every BITPIX and scaling against astropy, memory
reused from dropped cutouts without touching kept ones, and the C call path of SubsetReader."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import torchfits
from torchfits._kernels import _image

BOXES = [(0, 0, 5, 4), (3, 2, 17, 11), (-4, -2, 3, 30), (10, 7, 100, 100), (5, 5, 5, 9),
         (9, 3, 2, 8), (0, 0, 17, 13), (16, 12, 17, 13)]


def _image_file(tmp_path, fits, dtype, shape=(13, 17), **cards):
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "f":
        data = rng.standard_normal(shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(max(info.min, -30000), min(info.max, 30000), shape).astype(dtype)
    hdu = fits.ImageHDU(data)
    for k, v in cards.items():
        hdu.header[k] = v
    path = tmp_path / f"{np.dtype(dtype).name}_{len(shape)}.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=True)
    return path


@pytest.mark.parametrize("dtype,cards", [
    (np.uint8, {}), (np.int16, {}), (np.int32, {}), (np.int64, {}), (np.float32, {}),
    (np.float64, {}), (np.uint16, {}), (np.uint32, {}), (np.int16, {"BSCALE": 0.5, "BZERO": 3.0}),
    (np.int32, {"BLANK": 7, "BSCALE": 2.0}),
], ids=lambda v: str(v))
@pytest.mark.parametrize("shape", [(13, 17), (3, 13, 17)], ids=["2d", "3d"])
def test_cutouts_match_astropy(tmp_path, fits, dtype, cards, shape):
    path = _image_file(tmp_path, fits, dtype, shape, **cards)
    want = fits.getdata(path, 1)
    img = torchfits.open_image(str(path), 1)
    reader = img._cutout_reader()
    assert reader is not None
    for x1, y1, x2, y2 in BOXES:
        got = reader.cutout(x1, y1, x2, y2)
        ref = want[..., max(y1, 0):max(y2, 0), max(x1, 0):max(x2, 0)]
        assert got.shape == ref.shape and got.flags.c_contiguous and got.flags.writeable
        np.testing.assert_array_equal(got, ref)
        assert got.dtype == img.dtype


def test_dropped_cutouts_are_reused_and_kept_ones_untouched(tmp_path, fits):
    path = _image_file(tmp_path, fits, np.float32, (64, 64))
    want = fits.getdata(path, 1)
    reader = torchfits.open_image(str(path), 1)._cutout_reader()
    _image.release_cutout_memory()
    kept = [reader.cutout(i, i, i + 16, i + 16) for i in range(20)]
    assert _image.cutout_memory_kept() == 0
    dropped = [reader.cutout(0, 0, 16, 16) for _ in range(10)]
    del dropped
    gc.collect()
    assert _image.cutout_memory_kept() == 10 * 16 * 16 * 4
    again = [reader.cutout(40, 40, 56, 56) for _ in range(12)]  # 10 reused, 2 fresh
    assert _image.cutout_memory_kept() == 0
    for i, c in enumerate(kept):
        np.testing.assert_array_equal(c, want[i:i + 16, i:i + 16])
    for c in again:
        np.testing.assert_array_equal(c, want[40:56, 40:56])
    assert len({c.__array_interface__["data"][0] for c in kept + again}) == 32
    del again, c
    gc.collect()
    assert _image.release_cutout_memory() == 12 * 16 * 16 * 4
    assert _image.cutout_memory_kept() == 0


@pytest.mark.skipif(os.name == "nt", reason="Windows blocks come from plain malloc")
def test_cutouts_start_on_a_cache_line(tmp_path, fits):
    # The streaming copy writes whole aligned 32-byte vectors; malloc's 16-byte alignment put
    # every other cutout on the 8-byte fallback. Fresh blocks and reused ones both start on 64.
    path = _image_file(tmp_path, fits, np.float32, (64, 64))
    want = fits.getdata(path, 1)
    reader = torchfits.open_image(str(path), 1)._cutout_reader()
    _image.release_cutout_memory()
    for size in (16, 15, 9):  # blocks of 1,024, 900 and 324 bytes
        fresh = [reader.cutout(i, i, i + size, i + size) for i in range(24)]
        del fresh
        reused = [reader.cutout(i, i, i + size, i + size) for i in range(24)]
        for i, c in enumerate(reused):
            assert c.__array_interface__["data"][0] % 64 == 0
            np.testing.assert_array_equal(c, want[i:i + size, i:i + size])
    assert _image.cutout_array((3, 5), np.float32).__array_interface__["data"][0] % 64 == 0
    _image.release_cutout_memory()


def test_kept_cutouts_outlive_reader_cache_and_pool(tmp_path, fits):
    # Aligned blocks are freed with free() like malloc's: kept ones stay valid and writable
    # after their reader, the file cache and the pool are gone; threads get blocks of their own.
    import threading

    path = _image_file(tmp_path, fits, np.float32, (64, 64))
    want = fits.getdata(path, 1)
    reader = torchfits.open_subset_reader(str(path), 1)
    _image.release_cutout_memory()
    kept = [reader(i, 2 * i, i + 9, 2 * i + 9).numpy() for i in range(20)]
    del reader
    torchfits.clear_file_cache()
    gc.collect()
    _image.release_cutout_memory()
    for i, c in enumerate(kept):
        np.testing.assert_array_equal(c, want[2 * i:2 * i + 9, i:i + 9])
        c += 1  # writable, and no other cutout shares its memory
    for i, c in enumerate(kept):
        np.testing.assert_array_equal(c, want[2 * i:2 * i + 9, i:i + 9] + 1)

    cut = torchfits.open_image(str(path), 1)._cutout_reader()
    found: dict[int, list] = {}

    def work(k):
        found[k] = [cut.cutout(k, j, k + 16, j + 16) for j in range(40)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [c for k in found for c in found[k]]
    assert len({c.__array_interface__["data"][0] for c in got}) == len(got) == 160
    for k, cs in found.items():
        for j, c in enumerate(cs):
            assert c.__array_interface__["data"][0] % 64 == 0
            np.testing.assert_array_equal(c, want[j:j + 16, k:k + 16])
    _image.release_cutout_memory()


def test_kept_memory_is_bounded(tmp_path, fits):
    path = _image_file(tmp_path, fits, np.float64, (1024, 1024))
    reader = torchfits.open_image(str(path), 1)._cutout_reader()
    _image.release_cutout_memory()
    batch = [reader.cutout(0, 0, 512, 256) for _ in range(100)]  # 1 MiB each
    del batch
    gc.collect()
    assert 0 < _image.cutout_memory_kept() <= 64 << 20
    big = [reader.cutout(0, 0, 1024, 1024)]  # 8 MiB: larger than any block kept
    del big
    gc.collect()
    assert _image.cutout_memory_kept() <= 64 << 20
    _image.release_cutout_memory()


def test_reader_argument_checks(tmp_path, fits):
    path = _image_file(tmp_path, fits, np.float32)
    reader = torchfits.open_image(str(path), 1)._cutout_reader()
    np.testing.assert_array_equal(reader.cutout(np.int64(1), np.int32(1), 4, 4),
                                  fits.getdata(path, 1)[1:4, 1:4])
    with pytest.raises(ValueError, match="does not match"):
        _image.CutoutReader(memoryview(path.read_bytes()), 2880 * 2, -32, _image.MODE_RAW, (13, 17),
                            np.float64)


def test_subset_reader_calls(tmp_path, fits):
    torch = pytest.importorskip("torch")
    path = _image_file(tmp_path, fits, np.int16, (3, 13, 17), BZERO=32768)
    want = fits.getdata(path, 1)
    with torchfits.open_subset_reader(str(path), 1) as r:
        t = r(2, 3, 9, 11)
        assert isinstance(t, torch.Tensor) and t.dtype == torch.uint16
        np.testing.assert_array_equal(t.numpy(), want[:, 3:11, 2:9])
        out = torch.zeros((3, 8, 7), dtype=torch.uint16)
        assert r(2, 3, 9, 11, out=out) is out
        np.testing.assert_array_equal(out.numpy(), want[:, 3:11, 2:9])
        np.testing.assert_array_equal(r.read(2, 3, 9, 11).numpy(), want[:, 3:11, 2:9])
    with pytest.raises(RuntimeError, match="closed"):
        r(0, 0, 1, 1)


def test_compressed_subset_reader_has_no_map_cutouts(tmp_path, fits):
    pytest.importorskip("torch")
    data = np.arange(40 * 30, dtype=np.int16).reshape(40, 30)
    path = tmp_path / "c.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data)]).writeto(path)
    with torchfits.open_subset_reader(str(path), 1) as r:
        np.testing.assert_array_equal(r(3, 4, 10, 20).numpy(), data[4:20, 3:10])
        with pytest.raises(ValueError, match="no uncompressed image"):
            r.cutout(0, 0, 2, 2)


@pytest.fixture
def streaming():
    """Cutouts written with streaming stores from the first byte (normally from 4 MiB kept)."""
    old = _image.set_stream_min_bytes(0)
    yield
    _image.set_stream_min_bytes(old)


@pytest.mark.parametrize("dtype,cards", [
    (np.uint8, {}), (np.int8, {}), (np.int16, {}), (np.int32, {}), (np.int64, {}),
    (np.float32, {}), (np.float64, {}), (np.uint16, {}), (np.uint32, {}),
    (np.int16, {"BSCALE": 0.5, "BZERO": 3.0}),
], ids=lambda v: str(v))
@pytest.mark.parametrize("shape", [(40, 72), (2, 40, 72)], ids=["2d", "3d"])
def test_streamed_cutouts_match_astropy(tmp_path, fits, streaming, dtype, cards, shape):
    # Rows of 8, 16, 32 and 64 px and odd widths: streaming stores take whole aligned 32-byte
    # and 8-byte words, and every other row falls back to the plain copy.
    if np.dtype(dtype) == np.int8:
        path = _image_file(tmp_path, fits, np.uint8, shape, BZERO=-128)
    else:
        path = _image_file(tmp_path, fits, dtype, shape, **cards)
    want = fits.getdata(path, 1)
    img = torchfits.open_image(str(path), 1)
    reader = img._cutout_reader()
    for x1, y1, x2, y2 in [(0, 0, 8, 5), (3, 1, 19, 9), (5, 7, 37, 40), (8, 2, 72, 31), (1, 1, 8, 4),
                           (60, 30, 72, 40)]:
        np.testing.assert_array_equal(reader.cutout(x1, y1, x2, y2), want[..., y1:y2, x1:x2])
    for w in (8, 16, 32, 7):
        boxes = np.array([[x, y, x + w, y + 6] for x, y in [(0, 0), (3, 5), (72 - w, 34), (17, 11)]])
        got = img.cutouts(boxes)
        for b, g in zip(boxes.tolist(), got):
            np.testing.assert_array_equal(g, want[..., b[1]:b[3], b[0]:b[2]])


def test_batched_arrays_reuse_their_memory(tmp_path, fits):
    path = _image_file(tmp_path, fits, np.float32, (64, 64))
    img = torchfits.open_image(str(path), 1)
    _image.release_cutout_memory()
    boxes = np.array([[i, i, i + 16, i + 16] for i in range(40)])
    first = img.cutouts(boxes)
    address = first.__array_interface__["data"][0]
    del first
    gc.collect()
    assert _image.cutout_memory_kept() == 40 * 16 * 16 * 4
    again = img.cutouts(boxes)  # the same block, already faulted in
    assert again.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(again[5], fits.getdata(path, 1)[5:21, 5:21])
    assert _image.cutout_array((0, 3), np.float32).shape == (0, 3)
    assert _image.cutout_array((2, 3), np.dtype(">f4")).dtype == np.dtype(">f4")  # not pooled
    del again
    _image.release_cutout_memory()


def _rss_file() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) * 1024
    pytest.skip("/proc/self/status has no RssFile")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/self/status")
@pytest.mark.parametrize("route", ["reader", "image", "batch"])
def test_cutout_loops_over_images_beyond_the_budget_keep_rss_bounded(tmp_path, fits, monkeypatch, route):
    from torchfits.fits.sources import residency

    path = tmp_path / "big.fits"
    side = 2048  # 16 MiB of float32, against a budget of 1 MiB
    fits.PrimaryHDU(np.arange(side * side, dtype=np.float32).reshape(side, side)).writeto(path)
    torchfits.clear_file_cache()
    residency.forget_all()
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "1")  # the variable reaches cutout loops too
    calls = []
    real_done = residency.done
    monkeypatch.setattr(residency, "done", lambda *a: (calls.append(a[1:]), real_done(*a)))
    boxes = [(x, y, x + 64, y + 64) for y in range(0, side, 64) for x in range(0, side, 512)]
    before = _rss_file()
    peak = 0
    if route == "reader":
        r = torchfits.open_subset_reader(str(path), 0)
        for b in boxes:
            r(*b)
            peak = max(peak, _rss_file() - before)
    elif route == "image":
        img = torchfits.open_image(str(path), 0)
        for x1, y1, x2, y2 in boxes:
            img[y1:y2, x1:x2]
            peak = max(peak, _rss_file() - before)
    else:
        img = torchfits.open_image(str(path), 0)
        for k in range(0, len(boxes), 8):
            img.cutouts(np.array(boxes[k:k + 8]))
            peak = max(peak, _rss_file() - before)
    # 128 boxes x 64 rows x 4 KiB: 32 MiB of pages read, the limit every 1 MiB.
    assert len(calls) >= 16 and all(c == (2880, side * side * 4) for c in calls)
    assert peak < 8 << 20, peak  # the file is 16 MiB; every 1 MiB of it leaves RSS again
    torchfits.clear_file_cache()
    residency.forget_all()


def test_cutouts_within_the_budget_keep_their_pages(tmp_path, fits, monkeypatch):
    from torchfits.fits.sources import residency

    path = _image_file(tmp_path, fits, np.float32, (256, 256))
    calls = []
    monkeypatch.setattr(residency, "done", lambda *a: calls.append(a))
    r = torchfits.open_subset_reader(str(path), 1)
    for i in range(200):
        r(i % 100, i % 90, i % 100 + 64, i % 90 + 64)
    assert calls == []


def test_batched_cutouts_keep_the_callers_order(tmp_path, fits):
    # The batch is cut in image-row order; each stamp still lands in its box's slot.
    path = _image_file(tmp_path, fits, np.int16, (40, 50))
    want = fits.getdata(path, 1)
    rng = np.random.default_rng(3)
    boxes = np.array([(x, y, x + 6, y + 5) for x, y in zip(rng.integers(0, 44, 300),
                                                           rng.integers(0, 35, 300))])
    got = torchfits.open_image(str(path), 1).cutouts(boxes[::-1])
    for stamp, (x1, y1, x2, y2) in zip(got, boxes[::-1].tolist()):
        np.testing.assert_array_equal(stamp, want[y1:y2, x1:x2])


def test_residency_counts_huge_pages_by_the_band(tmp_path, fits):
    # On a map of 2 MiB pages a box maps the 2 MiB pages of its rows' band, counted so.
    path = _image_file(tmp_path, fits, np.float32, (64, 4096))  # rows 16 KiB apart
    img = torchfits.open_image(str(path), 1)
    calls = []
    r = _image.CutoutReader(img._index.source.view(), img._entry.data_offset, -32, 0, (64, 4096),
                            np.float32)
    r.set_residency(4 << 20, lambda: calls.append(1), 2 << 20)
    for _ in range(3):
        r.cutout(0, 0, 64, 64)  # a 1 MiB band: at most two 2 MiB pages, 4 MiB a box
    assert len(calls) == 3
    calls.clear()
    r.set_residency(4 << 20, lambda: calls.append(1))  # 4 KiB pages: 64 rows, 256 KiB a box
    for _ in range(16):
        r.cutout(0, 0, 64, 64)
    assert len(calls) == 1

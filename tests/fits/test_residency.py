"""Bounded memory: map pages that sequential readers are done with leave RSS beyond a budget,
and every view over a released range still reads the file's bytes."""
import os

import numpy as np
import pytest

import torchfits
from _fitsbytes import fits_bytes, set_card
from torchfits._kernels._safemap import SafeMap
from torchfits.fits.hdu_index import get_index
from torchfits.fits.sources import residency

PAGE = os.sysconf("SC_PAGESIZE")
fits = pytest.importorskip("astropy.io.fits")
BIG_ROWS = 32 << 20  # 256 MiB of rows
needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/self/status")


def _status(key: str) -> int:
    """A /proc/self/status entry in bytes (RssFile, VmRSS)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    pytest.skip(f"/proc/self/status has no {key}")


def _int64_table(path, nrows: int, chunk: int = 1 << 20) -> None:
    """A one-column (K) binary table of 0..nrows-1, written in chunks (never whole in memory)."""
    hdu = fits.BinTableHDU.from_columns([fits.Column("X", "K", array=np.zeros(1, np.int64))])
    raw = fits_bytes([fits.PrimaryHDU(), hdu])
    raw = set_card(raw, b"NAXIS2", str(nrows).encode())
    header_end = len(raw) - 2880  # one data block holds the single row astropy wrote
    with open(path, "wb") as fh:
        fh.write(raw[:header_end])
        for a in range(0, nrows, chunk):
            fh.write(np.arange(a, min(a + chunk, nrows), dtype=">i8").tobytes())
        fh.write(b"\0" * ((-nrows * 8) % 2880))


@pytest.fixture
def big_table(tmp_path):
    path = tmp_path / "big.fits"
    _int64_table(path, BIG_ROWS)
    yield str(path)
    torchfits.clear_file_cache()
    path.unlink()


def test_safemap_release_keeps_bytes(tmp_path):
    path = tmp_path / "m.bin"
    data = np.random.default_rng(0).integers(0, 256, 5 * PAGE + 123, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        m = SafeMap(fd, data.size)
    finally:
        os.close(fd)
    view = np.frombuffer(m, np.uint8)
    assert np.array_equal(view, data)
    assert m.release(1, PAGE) == 0                   # no whole page inside the range
    assert m.release(1, 3 * PAGE) == 2 * PAGE        # only the whole pages inside it
    assert m.release(4 * PAGE, 10 * PAGE) == PAGE + 123  # the map's last (partial) page is its own
    assert m.release(-PAGE, 2 * PAGE) == PAGE
    assert m.release(0, 0) == 0
    assert np.array_equal(view, data)                # released pages map again, same bytes
    assert not m.faulted


def test_only_mapped_sources_are_recorded():
    before = residency.held()
    index = get_index(fits_bytes_table())
    assert not index.source.maps_file
    residency.done(index.source, 0, 1 << 20)
    assert residency.held() == before


def fits_bytes_table():
    hdu = fits.BinTableHDU.from_columns([fits.Column("X", "K", array=np.arange(10))])
    return bytes(fits_bytes([fits.PrimaryHDU(), hdu]))


@needs_proc
def test_streaming_scan_keeps_rss_bounded(big_table):
    size = os.path.getsize(big_table)
    residency.forget_all()
    file0, rss0 = _status("RssFile"), _status("VmRSS")
    peak_file = peak_rss = 0
    total = n = 0
    for batch in torchfits.scan(big_table, batch_size=1 << 20).to_batches():
        column = batch.column(0).to_numpy()
        total += int(column.sum())
        n += len(column)
        if n == len(column):  # the first batch's lazy imports (pyarrow's, ~40 MiB) are not rows
            rss0 = _status("VmRSS")
        peak_file = max(peak_file, _status("RssFile") - file0)
        peak_rss = max(peak_rss, _status("VmRSS") - rss0)
    assert n == BIG_ROWS
    assert total == n * (n - 1) // 2
    # The budget (64 MiB) plus a batch's rows, far below the 256 MiB the file maps.
    assert peak_file < residency.BUDGET + (48 << 20), (peak_file, size)
    assert peak_rss < size // 2, (peak_rss, size)
    assert residency.held() <= residency.BUDGET


def test_training_batches_keep_rss_bounded(big_table):
    """`FitsTableIterableDataset`'s plain numeric batches (decoded in 32 MiB chunks, not through
    the scanner) release the pages behind them too."""
    pytest.importorskip("torch")
    from torchfits.data import FitsTableIterableDataset

    residency.forget_all()
    file0 = _status("RssFile")
    peak_file = total = 0
    for batch in FitsTableIterableDataset(big_table, as_batches=True, batch_size=1 << 20):
        total += int(batch["X"].sum())
        peak_file = max(peak_file, _status("RssFile") - file0)
    assert total == BIG_ROWS * (BIG_ROWS - 1) // 2
    assert peak_file < residency.BUDGET + (48 << 20), peak_file


@needs_proc
def test_views_survive_released_pages(tmp_path, monkeypatch):
    """Zero-copy views (a BITPIX=8 image read with copy=False, the table's row bytes) read the
    file's bytes after scans released every range they finished."""
    monkeypatch.setattr(residency, "BUDGET", 0)  # release every finished range at once
    pixels = np.random.default_rng(1).integers(0, 256, (1024, 1024), dtype=np.uint8)
    path = tmp_path / "views.fits"
    rows = np.arange(300_000, dtype=np.int64)
    fits.HDUList([fits.PrimaryHDU(pixels),
                  fits.BinTableHDU.from_columns([fits.Column("X", "K", array=rows)])]).writeto(path)
    image = torchfits.read_numpy(str(path), 0, copy=False)
    assert not image.flags.owndata and np.array_equal(image, pixels)
    index = get_index(str(path))
    entry = index.resolve(1)
    row_bytes = np.frombuffer(index.source.buffer(), ">i8", entry.nrows, entry.data_offset)
    for _ in range(2):
        got = np.concatenate([b.column(0).to_numpy()
                              for b in torchfits.scan(str(path), batch_size=4096).to_batches()])
        assert np.array_equal(got, rows)
    index.source.release(0, index.size)  # everything, the image's pages too
    assert np.array_equal(image, pixels)
    assert np.array_equal(row_bytes, rows)
    assert residency.held() == 0


def test_budget_from_the_environment(monkeypatch):
    """``TORCHFITS_RESIDENT_MB`` sets the process budget (docs/environment.md); a bad value is
    an error naming the variable."""
    monkeypatch.delenv("TORCHFITS_RESIDENT_MB", raising=False)
    assert residency.budget() == residency.BUDGET
    for value, want in (("0", 0), ("16", 16 << 20), ("0.5", 1 << 19), (" 8 ", 8 << 20)):
        monkeypatch.setenv("TORCHFITS_RESIDENT_MB", value)
        assert residency.budget() == want
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "inf")
    assert residency.budget() >= 1 << 60
    for bad in ("-1", "lots", "nan"):
        monkeypatch.setenv("TORCHFITS_RESIDENT_MB", bad)
        with pytest.raises(ValueError, match="TORCHFITS_RESIDENT_MB"):
            residency.budget()


@needs_proc
def test_zero_budget_from_the_environment_releases_every_range(tmp_path, monkeypatch):
    residency.forget_all()
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "0")
    path = tmp_path / "rows.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column("X", "K", array=np.arange(200_000, dtype=np.int64))])]).writeto(path)
    total = sum(b.num_rows for b in torchfits.scan(str(path), batch_size=8192).to_batches())
    assert total == 200_000 and residency.held() == 0
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "inf")
    sum(b.num_rows for b in torchfits.scan(str(path), batch_size=8192).to_batches())
    assert residency.held() >= 200_000 * 8 * 0.9  # every finished range kept
    residency.forget_all()


def _thp_offered() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            mode = fh.read()
    except OSError:
        return False
    return "[always]" in mode or "[madvise]" in mode


def test_safemap_advise_huge_covers_whole_2mib_pages(tmp_path):
    path = tmp_path / "h.bin"
    huge = 2 << 20
    data = np.random.default_rng(1).integers(0, 256, 3 * huge + 1000, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        m = SafeMap(fd, data.size)
    finally:
        os.close(fd)
    assert m.advise_huge(0, huge - 1) == 0  # no whole 2 MiB page inside
    assert m.advise_huge(-5, 10) == 0
    got = m.advise_huge(100, 3 * huge)  # [100, 3 MiB·2 + 100): pages 1 and 2
    assert got in (0, 2 * huge)  # 0 where the platform has no such hint
    assert m.advise_huge(0, 10 * huge) in (0, 3 * huge)  # clipped to the map
    np.testing.assert_array_equal(np.frombuffer(m, np.uint8), data)  # bytes unchanged
    del m


def test_local_maps_of_large_files_ask_for_huge_pages(tmp_path):
    from torchfits.fits.sources.local import HUGE_MIN_BYTES, LocalSource

    small, large = tmp_path / "small.bin", tmp_path / "large.bin"
    small.write_bytes(b"\1" * (HUGE_MIN_BYTES - 1))
    large.write_bytes(b"\2" * (HUGE_MIN_BYTES + 4096))
    assert not LocalSource(str(small), HUGE_MIN_BYTES - 1).huge_pages
    src = LocalSource(str(large), HUGE_MIN_BYTES + 4096)
    assert src.huge_pages == (_thp_offered() and os.uname().sysname == "Linux")
    assert bytes(src.view()[-3:]) == b"\2\2\2"

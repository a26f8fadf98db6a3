"""Bounded memory: map pages that sequential readers are done with leave RSS beyond a budget,
and every view over a released range still reads the file's bytes."""
import os

import numpy as np
import pytest

import torchfits
from _fitsbytes import fits_bytes, set_card
from torchfits._kernels._safemap import SafeMap
from torchfits.fits import threads
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


def _mapped_random(path, size: int, seed: int):
    """(random bytes, a SafeMap of a file holding them)."""
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        return data, SafeMap(fd, data.size)
    finally:
        os.close(fd)


def test_safemap_release_keeps_bytes(tmp_path):
    data, m = _mapped_random(tmp_path / "m.bin", 5 * PAGE + 123, seed=0)
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


@needs_proc
def test_training_batches_keep_rss_bounded(big_table, monkeypatch):
    """`FitsTableIterableDataset`'s plain numeric batches (decoded in 8 MiB chunks, not through
    the scanner) release the pages behind them too: a pass over more rows than the budget
    releases each chunk once sliced, so about one chunk stays mapped, whatever the budget."""
    pytest.importorskip("torch")
    from torchfits.data import FitsTableIterableDataset

    for env in ("", "0", "128"):  # 8 MiB chunks, and shared libraries the first batch loads
        monkeypatch.setenv("TORCHFITS_RESIDENT_MB", env)
        residency.forget_all()
        file0 = _status("RssFile")
        peak_file = total = 0
        for batch in FitsTableIterableDataset(big_table, as_batches=True, batch_size=1 << 18):
            total += int(batch["X"].sum())
            peak_file = max(peak_file, _status("RssFile") - file0)
        assert total == BIG_ROWS * (BIG_ROWS - 1) // 2
        assert peak_file < 32 << 20, (env, peak_file)


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


def test_safemap_advise_huge_covers_whole_2mib_pages(tmp_path):
    huge = 2 << 20
    data, m = _mapped_random(tmp_path / "h.bin", 3 * huge + 1000, seed=1)
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
    assert src.huge_pages == (threads._transparent_huge_pages() and os.uname().sysname == "Linux")
    assert bytes(src.view()[-3:]) == b"\2\2\2"


@pytest.mark.parametrize("data", [
    np.random.default_rng(2).standard_normal((301, 257)).astype(">f4"),
    np.random.default_rng(3).integers(-30000, 30000, (7, 45, 33)).astype(">i2"),
    np.random.default_rng(4).integers(0, 255, (513, 67)).astype(np.uint8),
])
def test_banded_whole_image_read_equals_astropy(tmp_path, monkeypatch, data):
    """Whole images at least the budget are decoded in bands of rows, each band's map pages
    released behind the decode; every band boundary (uneven last band, 3-D, scaled) reads the
    file's pixels."""
    import torchfits.image.plain as plain

    monkeypatch.setattr(plain, "_BAND_BYTES", 4096)  # many bands, the last one shorter
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "0")
    path = tmp_path / "img.fits"
    hdu = fits.PrimaryHDU(data)
    if data.dtype.kind == "i" and data.dtype.itemsize == 2:
        hdu.header["BSCALE"], hdu.header["BZERO"] = 0.5, 3.0
    hdu.writeto(path)
    want = fits.getdata(path)
    got = torchfits.read_numpy(str(path), 0)
    assert got.dtype == want.dtype.newbyteorder("=") and np.array_equal(got, want)
    out = np.empty_like(got)
    assert torchfits.read_numpy(str(path), 0, out=out) is out and np.array_equal(out, want)
    torchfits.clear_file_cache()


@needs_proc
def test_whole_image_read_keeps_one_band_mapped(tmp_path, monkeypatch):
    """A whole-image read of an image over the budget holds the result and one band of the map,
    not the result and the whole map (RssFile sampled at every band's release)."""
    import torchfits.image.plain as plain

    pixels = np.arange(4096 * 2048, dtype=">f4").reshape(4096, 2048)  # 32 MiB
    path = tmp_path / "big_image.fits"
    fits.PrimaryHDU(pixels).writeto(path)
    residency.forget_all()
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "16")
    source = get_index(str(path)).source
    source.release(0, source.size)
    file0, samples = _status("RssFile"), []
    release = source.release

    def sampled(offset, size):
        samples.append(_status("RssFile") - file0)
        return release(offset, size)

    monkeypatch.setattr(source, "release", sampled)
    got = torchfits.read_numpy(str(path), 0)
    assert np.array_equal(got, pixels)
    assert len(samples) == pixels.nbytes // plain._BAND_BYTES
    assert max(samples) < 2 * plain._BAND_BYTES + (1 << 20), samples
    torchfits.clear_file_cache()


def _vla_table(path, nrows: int, cell: int) -> None:
    """A one-column ``1PJ`` table: row ``i`` holds ints ``i*cell .. (i+1)*cell - 1``, its cells
    written in row order after the rows (the heap), in chunks (never whole in memory)."""
    hdu = fits.BinTableHDU.from_columns([fits.Column("V", "PJ()", array=np.array(
        [np.zeros(cell, np.int32)], dtype=object))])
    raw = fits_bytes([fits.PrimaryHDU(), hdu])
    start = len(raw) - 2880  # the single data block: one descriptor, one cell
    heap = nrows * cell * 4
    raw = set_card(raw, b"NAXIS2", str(nrows).encode())
    raw = set_card(raw, b"PCOUNT", str(heap).encode())
    with open(path, "wb") as fh:
        fh.write(raw[:start])
        desc = np.empty((nrows, 2), ">i4")
        desc[:, 0] = cell
        desc[:, 1] = np.arange(nrows) * cell * 4
        fh.write(desc.tobytes())
        chunk = 1 << 20
        for a in range(0, nrows * cell, chunk):
            fh.write(np.arange(a, min(a + chunk, nrows * cell), dtype=">i4").tobytes())
        fh.write(b"\0" * ((-(nrows * 8 + heap)) % 2880))


@needs_proc
def test_vla_heap_scan_keeps_rss_bounded(tmp_path, monkeypatch):
    """A scan of a variable-length column hands the heap span of each batch's cells to the
    residency too: 96 MiB of heap streamed with a 16 MiB budget keeps about the budget mapped."""
    nrows, cell = 1 << 17, 192
    path = tmp_path / "vla.fits"
    _vla_table(path, nrows, cell)
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "16")
    residency.forget_all()
    file0 = _status("RssFile")
    peak_file = total = n = 0
    for batch in torchfits.scan(str(path), batch_size=8192).to_batches():
        values = batch.column(0).flatten().to_numpy()
        assert values.size == batch.num_rows * cell
        assert values[0] == n * cell and values[-1] == (n + batch.num_rows) * cell - 1
        total += values.size
        n += batch.num_rows
        if n == batch.num_rows:  # the first batch's lazy imports map shared libraries (RssFile)
            file0 = _status("RssFile") - batch.num_rows * (8 + 4 * cell)
        peak_file = max(peak_file, _status("RssFile") - file0)
    assert n == nrows and total == nrows * cell
    assert peak_file < (16 << 20) + (24 << 20), peak_file  # not the 97 MiB the file maps
    assert residency.held() <= 16 << 20
    # Rows taken by index (every third, ascending) release their rows' span and heap span too.
    residency.forget_all()
    take = np.arange(0, nrows, 3)
    file0, peak_file, n = _status("RssFile"), 0, 0
    for batch in torchfits.scan(str(path), rows=take, batch_size=8192).to_batches():
        values = batch.column(0).flatten().to_numpy().reshape(-1, cell)
        assert np.array_equal(values[:, 0], take[n:n + batch.num_rows] * cell)
        n += batch.num_rows
        peak_file = max(peak_file, _status("RssFile") - file0)
    assert n == take.size
    assert peak_file < (16 << 20) + (24 << 20), peak_file
    torchfits.clear_file_cache()


def test_released_heaps_and_taken_rows_equal_astropy(tmp_path, monkeypatch):
    """With a budget of 0 every finished range (rows, heap spans, rows taken by index) is
    released as soon as it is decoded: scans, row-index scans and the 1.x batches still equal
    astropy's values."""
    rng = np.random.default_rng(5)
    nrows = 5000
    cells = [rng.standard_normal(rng.integers(0, 40)).astype(np.float32) for _ in range(nrows)]
    ints = [rng.integers(-9, 9, rng.integers(0, 5)).astype(np.int64) for _ in range(nrows)]
    path = tmp_path / "vla_small.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([
        fits.Column("V", "PE()", array=np.array(cells, dtype=object)),
        fits.Column("K", "QK()", array=np.array(ints, dtype=object)),
        fits.Column("X", "J", array=np.arange(nrows, dtype=np.int32))])]).writeto(path)
    want = fits.getdata(path, 1)
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "0")
    residency.forget_all()
    for _ in range(2):  # the second pass maps every released range again
        got = torchfits.scan(str(path), batch_size=333).to_arrow()
        for name in ("V", "K"):
            assert all(np.array_equal(a, b) for a, b in zip(got.column(name).to_pylist(), want[name]))
        take = np.sort(rng.choice(nrows, 700, replace=False))
        picked = torchfits.scan(str(path), rows=take, batch_size=64).to_arrow()
        assert np.array_equal(picked.column("X").to_numpy(), take)
        assert all(np.array_equal(a, want["V"][r]) for a, r in zip(picked.column("V").to_pylist(), take))
        assert residency.held() == 0
    from torchfits.compat.table import scan_torch

    batches = list(scan_torch(str(path), 1, columns=["X", "V"], batch_size=1000))
    assert np.array_equal(np.concatenate([b["X"].numpy() for b in batches]), np.arange(nrows))
    flat = [t.numpy() for b in batches for t in b["V"]]
    assert all(np.array_equal(a, b) for a, b in zip(flat, want["V"]))
    torchfits.clear_file_cache()


def _small_vla_file(path, nrows: int = 20_000) -> None:
    """Rows of a ``1PJ`` column, 4 ints a cell, about 400 kB: larger than a budget of 0, within
    the default one."""
    _vla_table(path, nrows, 4)


def test_heap_span_is_read_only_when_the_budget_could_release(tmp_path, monkeypatch):
    """A table within the budget hands its whole heap to the residency as one range without
    reading a descriptor (nothing of it could be released before the rest); over the budget,
    each chunk's heap span is read from its descriptors."""
    from torchfits.tables.source import TableSource

    path = tmp_path / "vla_span.fits"
    _small_vla_file(path)
    calls = []
    span = TableSource._heap_span

    def spy(self, table, chosen):
        calls.append(len(table))
        return span(self, table, chosen)

    monkeypatch.setattr(TableSource, "_heap_span", spy)
    for env, spans in (("", False), ("inf", False), ("0", True), ("0.1", True)):
        monkeypatch.setenv("TORCHFITS_RESIDENT_MB", env)
        residency.forget_all()
        calls.clear()
        batches = torchfits.scan(str(path), batch_size=4096).to_batches()
        got = [b.column(0).flatten().to_numpy() for b in batches]
        assert np.array_equal(np.concatenate(got), np.arange(80_000))
        assert (calls == [4096] * 4 + [20_000 - 4 * 4096]) if spans else not calls, (env, calls)
        if not spans:  # the heap (320 kB) is held with the rows
            entry = get_index(str(path)).resolve(1)
            assert residency.held() == entry.nrows * entry.row_bytes + entry.heap_size
    residency.forget_all()
    torchfits.clear_file_cache()


def test_release_now_drops_the_ranges_it_overlaps(tmp_path):
    """`residency.release` gives the pages back at once and forgets every recorded range it
    overlaps (in whole), so `held` counts only ranges still kept."""
    _, m = _mapped_random(tmp_path / "r.bin", 64 * PAGE, seed=6)

    class Source:
        maps_file = True
        released: list = []

        def release(self, offset, size):
            self.released.append((offset, size))
            return m.release(offset, size)

    src, other = Source(), Source()
    residency.forget_all()
    limit = residency.budget()
    try:
        for k in range(4):
            residency.done(src, k * 8 * PAGE, 8 * PAGE)
        residency.done(other, 0, 8 * PAGE)
        assert residency.held() == 40 * PAGE <= limit
        residency.release(src, 12 * PAGE, 8 * PAGE)  # halves of the 2nd and 3rd ranges
        assert residency.held() == 24 * PAGE
        assert src.released[-3:] == [(12 * PAGE, 8 * PAGE), (8 * PAGE, 8 * PAGE), (16 * PAGE, 8 * PAGE)]
        residency.release(src, 40 * PAGE, 4 * PAGE)  # no recorded range: held unchanged
        assert residency.held() == 24 * PAGE and src.released[-1] == (40 * PAGE, 4 * PAGE)
        residency.release(src, 0, 64 * PAGE)
        assert residency.held() == 8 * PAGE  # ``other``'s range is kept
    finally:
        residency.forget_all()
    assert residency.held() == 0


def test_ranges_indexed_by_source_follow_every_change(monkeypatch):
    """`release` looks only at its source's ranges: the index by source holds exactly what the
    recency order holds through records, re-records, evictions and releases."""

    class Source:
        maps_file = True

        def release(self, offset, size):
            pass

    def index_agrees():
        flat = {(sid, off): n for sid, ranges in residency._by_source.items() for off, n in ranges.items()}
        assert flat == {k: n for k, (_, n) in residency._ranges.items()}
        assert all(residency._by_source.values())  # no empty entries left behind

    a, b = Source(), Source()
    residency.forget_all()
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", str(10 * PAGE / (1 << 20)))
    try:
        for k in range(6):
            residency.done(a, k * PAGE, PAGE)
            residency.done(b, 2 * k * PAGE, 2 * PAGE)  # over the budget: the oldest leave
            index_agrees()
        residency.done(a, 5 * PAGE, PAGE)  # read again
        index_agrees()
        assert (id(b), 8 * PAGE) in residency._ranges and (id(b), 10 * PAGE) in residency._ranges
        assert (id(b), 0) not in residency._ranges  # evicted
        residency.release(b, 9 * PAGE, 2 * PAGE)  # b's ranges at 8 and 10 pages
        index_agrees()
        assert (id(b), 8 * PAGE) not in residency._ranges and (id(b), 10 * PAGE) not in residency._ranges
        residency.release(a, 0, 64 * PAGE)
        index_agrees()
        assert id(a) not in residency._by_source and residency.held() == sum(
            n for _, n in residency._ranges.values())
    finally:
        residency.forget_all()
    assert not residency._by_source


def test_reads_that_release_behind_them_keep_held_truthful(tmp_path, monkeypatch):
    """A whole image read in bands and a training pass over more rows than the budget release
    behind themselves through `residency.release`: ranges an earlier read recorded over the same
    bytes leave `held` as their pages leave RSS."""
    pytest.importorskip("torch")
    import torchfits.image.plain as plain
    from torchfits.data import FitsTableIterableDataset

    residency.forget_all()
    pixels = np.arange(256 * 128, dtype=">f4").reshape(256, 128)
    rows = np.arange(200_000, dtype=np.int64)
    path = tmp_path / "both.fits"
    fits.HDUList([fits.PrimaryHDU(pixels),
                  fits.BinTableHDU.from_columns([fits.Column("X", "K", array=rows)])]).writeto(path)
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "inf")
    assert np.array_equal(torchfits.read_numpy(str(path), 0), pixels)  # recorded whole
    assert torchfits.scan(str(path), batch_size=8192).to_arrow().num_rows == rows.size
    assert residency.held() == pixels.nbytes + rows.nbytes
    monkeypatch.setattr(plain, "_BAND_BYTES", 4096)
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "0.1")  # the image (128 kB) is banded below
    get_index(str(path))  # (same index, same source)
    assert np.array_equal(torchfits.read_numpy(str(path), 0), pixels)
    assert residency.held() == rows.nbytes  # the image's recorded range left with its bands
    total = sum(int(b["X"].sum()) for b in
                FitsTableIterableDataset(str(path), as_batches=True, batch_size=1 << 14))
    assert total == int(rows.sum())
    assert residency.held() == 0  # the pass (1.6 MB, over the budget) released every chunk
    residency.forget_all()
    torchfits.clear_file_cache()


def test_one_descriptor_reader_for_cells_and_spans(tmp_path):
    """`TableSource._descriptor_cells` reads P and Q descriptors for both the heap prefetch
    (`_heap_cells`: only non-empty cells inside the heap) and `done`'s span (clipped to the heap);
    absurd counts and offsets neither overflow nor count."""
    from torchfits.tables.source import TableSource

    path = tmp_path / "desc.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([
        fits.Column("V", "PE()", array=np.array([np.ones(3, np.float32)] * 4, dtype=object)),
        fits.Column("K", "QK()", array=np.array([np.ones(2, np.int64)] * 4, dtype=object))])]).writeto(path)
    src = TableSource.open(str(path), 1)
    heap = src.entry.heap_size
    v, k = src.specs
    cases = [(2, 0), (0, 5), (1, -4), (2**31 - 1, 0), (1, heap - 4), (2, heap - 4)]
    table = np.zeros((len(cases), src.entry.row_bytes), np.uint8)
    for row, (count, offset) in enumerate(cases):
        table[row, v.offset:v.offset + 8] = np.array([count, offset], ">i4").view(np.uint8)
        table[row, k.offset:k.offset + 16] = np.array([count * 2**31, offset], ">i8").view(np.uint8)
    (vo, vn), (ko, kn) = src._heap_cells(table, [v, k])
    assert vo.tolist() == [0, heap - 4] and vn.tolist() == [8, 4]
    assert ko.size == 0  # every count but 0 is beyond the heap
    assert src._heap_span(table, [v]) == (0, heap)
    assert src._heap_span(table[[1]], [v, k]) == (heap, 0)  # empty cells: no span
    assert src._heap_span(table[[0]], [v]) == (0, 8)

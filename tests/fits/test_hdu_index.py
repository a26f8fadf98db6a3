"""The HDU index: many HDUs, mixed kinds, selection rules, autodetect, cache validity, threads."""
from __future__ import annotations

import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import torchfits
from _oracles import assert_bits_equal, astropy_data, astropy_header, hdu_offsets
from torchfits.errors import HDUNotFoundError

SHAPES = [(12,), (3, 4), (2, 3, 2), (1, 12), (4, 3)]
DTYPES = [np.int16, np.float32, np.int32, np.float64, np.uint8, np.int64]


def _many_hdus(path, fits, n=100):
    """Primary (2×3 int16) + n-1 image extensions E1..E{n-1} with distinct values and shapes."""
    hdus = [fits.PrimaryHDU(np.arange(6, dtype=np.int16).reshape(2, 3))]
    for i in range(1, n):
        data = (np.arange(12) * i + i).astype(DTYPES[i % len(DTYPES)]).reshape(SHAPES[i % len(SHAPES)])
        hdus.append(fits.ImageHDU(data, name=f"E{i}"))
    fits.HDUList(hdus).writeto(path, overwrite=True)
    return path


@pytest.fixture
def many_hdus(tmp_path, fits):
    return _many_hdus(tmp_path / "many.fits", fits)


def test_many_hdus_count_and_data(many_hdus, fits):
    assert torchfits.read_num_hdus(many_hdus) == 100
    for i in range(100):
        expected = astropy_data(many_hdus, i)
        assert_bits_equal(torchfits.read_numpy(many_hdus, i),
                          expected.astype(expected.dtype.newbyteorder("=")), what=f"HDU {i}")
    for i in (1, 37, 99):
        assert_bits_equal(torchfits.read_numpy(many_hdus, f"e{i}"), torchfits.read_numpy(many_hdus, i))
        assert torchfits.read_extname(many_hdus, i) == f"E{i}"
    with pytest.raises(HDUNotFoundError):
        torchfits.read_numpy(many_hdus, 100)
    with pytest.raises(HDUNotFoundError):
        torchfits.read_numpy(many_hdus, "E100")


def test_many_hdus_info(many_hdus):
    infos = torchfits.info(many_hdus)
    offs = hdu_offsets(many_hdus)
    assert len(infos) == 100 == len(offs)
    for i, (inf, off) in enumerate(zip(infos, offs)):
        assert inf.index == i
        assert inf.kind == ("primary" if i == 0 else "image")
        assert tuple(inf.shape) == off["shape"]
        assert inf.bitpix == off["bitpix"]
        if i:
            assert inf.name == f"E{i}"


def test_info_mixed(mixed_fits):
    infos = torchfits.info(mixed_fits)
    # Value records (not dataclasses, which cost the header path ~10 ms of start-up): frozen,
    # comparable, picklable, with to_dict() naming every field.
    first = infos[1]
    assert list(first.to_dict()) == ["index", "name", "kind", "shape", "bitpix", "dtype", "nrows",
                                     "ncols", "codec", "ncards", "gcount", "pcount"]
    again = pickle.loads(pickle.dumps(first))
    assert again == first and hash(first) == hash(again)
    assert first != infos[2] and "name='TAB'" in repr(first)
    with pytest.raises(AttributeError):
        first.name = "other"  # type: ignore[misc]
    assert [i.kind for i in infos] == ["primary", "bintable", "table", "image", "compressed_image"]
    assert [i.index for i in infos] == [0, 1, 2, 3, 4]
    assert [i.name for i in infos][1:] == ["TAB", "ASC", "SCI", "COMP"]
    assert (infos[1].nrows, infos[1].ncols) == (5, 4)
    assert (infos[2].nrows, infos[2].ncols) == (4, 2)
    assert tuple(infos[3].shape) == (3, 4) and infos[3].bitpix == -32
    assert tuple(infos[4].shape) == (24, 25) and infos[4].bitpix == 16
    assert infos[4].codec == "RICE_1"
    assert not infos[3].codec
    assert tuple(infos[0].shape or ()) in ((), (0,))


def test_duplicate_and_numeric_extnames(tmp_path, fits):
    path = tmp_path / "dup.fits"
    fits.HDUList([
        fits.PrimaryHDU(),
        fits.ImageHDU(np.full((2, 2), 1, np.int16), name="DUP"),
        fits.ImageHDU(np.full((2, 2), 2, np.int16), name="1"),
        fits.ImageHDU(np.full((2, 2), 3, np.int16), name="DUP"),
    ]).writeto(path)
    # first match wins; EXTNAME matching is case-insensitive for the functional readers
    assert torchfits.read_numpy(path, "dup").tolist() == [[1, 1], [1, 1]]
    # a numeric string is an EXTNAME, not an index
    assert torchfits.read_numpy(path, "1").tolist() == [[2, 2], [2, 2]]
    assert torchfits.read_numpy(path, 1).tolist() == [[1, 1], [1, 1]]
    # bool is an int
    assert torchfits.read_numpy(path, True).tolist() == [[1, 1], [1, 1]]
    assert torchfits.read_header(path, "1")["EXTNAME"] == "1"


def test_hdulist_extname_case_insensitive(mixed_fits, torch):
    # 1.2.3 was case-sensitive here only; EXTNAMEs are case-insensitive everywhere else
    with torchfits.open(mixed_fits) as hdul:
        assert len(hdul) == 5
        assert hdul["SCI"].header["EXTNAME"] == "SCI"
        assert hdul["sci"] is hdul["SCI"]
        with pytest.raises(KeyError, match="HDU 'nope' not found"):
            hdul["nope"]


# ------------------------------------------------------------------------------------------
# autodetect (API §2.1)
# ------------------------------------------------------------------------------------------

def _table(fits, name="T"):
    return fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(3))], name=name)


def test_autodetect_image_after_table(tmp_path, fits, torch):
    path = tmp_path / "a.fits"
    fits.HDUList([fits.PrimaryHDU(), _table(fits),
                  fits.ImageHDU(np.arange(6, dtype=np.float32).reshape(2, 3), name="IMG")]).writeto(path)
    for sel in (None, "auto"):
        t = torchfits.read(path, hdu=sel)
        assert isinstance(t, torch.Tensor)
        assert t.tolist() == [[0, 1, 2], [3, 4, 5]]
        assert torchfits.read_header(path, sel)["EXTNAME"] == "IMG"


def test_autodetect_skips_zero_axis_image(tmp_path, fits, torch):
    path = tmp_path / "z.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.zeros((0, 4), np.int16), name="EMPTY"),
                  fits.ImageHDU(np.ones((2, 2), np.int32), name="REAL")]).writeto(path)
    assert torchfits.read(path, hdu=None).tolist() == [[1, 1], [1, 1]]
    assert torchfits.read_header(path, "auto")["EXTNAME"] == "REAL"


def test_autodetect_primary_with_data(tmp_path, fits, torch):
    path = tmp_path / "p.fits"
    fits.HDUList([fits.PrimaryHDU(np.full((3,), 9, np.int16)),
                  fits.ImageHDU(np.ones((2, 2), np.int32))]).writeto(path)
    assert torchfits.read(path, hdu=None).tolist() == [9, 9, 9]


def test_autodetect_table_only(tmp_path, fits, torch):
    path = tmp_path / "t.fits"
    fits.HDUList([fits.PrimaryHDU(), _table(fits, "FIRST"), _table(fits, "SECOND")]).writeto(path)
    out = torchfits.read(path, hdu=None)
    assert isinstance(out, dict) and list(out) == ["A"]
    assert out["A"].tolist() == [0, 1, 2]
    assert torchfits.read_header(path, None)["EXTNAME"] == "FIRST"


def test_autodetect_empty_primary_only(tmp_path, fits, torch):
    path = tmp_path / "e.fits"
    fits.PrimaryHDU().writeto(path)
    t = torchfits.read(path, hdu="auto")
    assert t.dtype == torch.uint8 and tuple(t.shape) == (0,)
    assert torchfits.read_header(path, None)["NAXIS"] == 0


def test_autodetect_rejected_elsewhere(mixed_fits):
    """None/"auto" are only for read() and read_header() (API §1.2)."""
    with pytest.raises((ValueError, TypeError)):
        torchfits.read_numpy(mixed_fits, None)
    with pytest.raises((ValueError, TypeError)):
        torchfits.read_shape(mixed_fits, None)
    with pytest.raises((ValueError, TypeError)):
        torchfits.open_image(mixed_fits, None)


# ------------------------------------------------------------------------------------------
# the metadata cache: invisible, invalidated when the file changes
# ------------------------------------------------------------------------------------------

def _bump_mtime(path, seconds=5):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def test_cache_invalidated_on_rewrite_different_size(tmp_path, fits):
    path = tmp_path / "c.fits"
    fits.PrimaryHDU(np.arange(4, dtype=np.int16)).writeto(path)
    assert torchfits.read_numpy(path).tolist() == [0, 1, 2, 3]
    assert torchfits.read_num_hdus(path) == 1
    assert torchfits.read_header(path)["NAXIS1"] == 4
    fits.HDUList([fits.PrimaryHDU(np.arange(10, 20, dtype=np.int32)),
                  fits.ImageHDU(np.ones(3, np.float32), name="NEW")]).writeto(path, overwrite=True)
    _bump_mtime(path)
    assert torchfits.read_numpy(path).tolist() == list(range(10, 20))
    assert torchfits.read_num_hdus(path) == 2
    assert torchfits.read_header(path)["NAXIS1"] == 10
    assert torchfits.read_extname(path, 1) == "NEW"
    assert [i.kind for i in torchfits.info(path)] == ["primary", "image"]


def test_cache_invalidated_on_same_size_rewrite(tmp_path, fits):
    path = tmp_path / "c.fits"
    hdu = fits.PrimaryHDU(np.arange(4, dtype=np.int16))
    hdu.header["VERSION"] = 1
    hdu.writeto(path)
    size = path.stat().st_size
    assert torchfits.read_header(path)["VERSION"] == 1
    img = torchfits.read_numpy(path).tolist()
    hdu = fits.PrimaryHDU(np.arange(4, dtype=np.int16)[::-1].copy())
    hdu.header["VERSION"] = 2
    hdu.writeto(path, overwrite=True)
    assert path.stat().st_size == size
    _bump_mtime(path)
    assert torchfits.read_header(path)["VERSION"] == 2
    assert torchfits.read_numpy(path).tolist() == img[::-1]
    assert torchfits.read_keys(path, ["VERSION"]) == {"VERSION": 2}


def test_cache_invalidated_on_replace(tmp_path, fits):
    path = tmp_path / "r.fits"
    fits.PrimaryHDU(np.zeros(8, np.float32)).writeto(path)
    assert torchfits.read_numpy(path).sum() == 0
    other = tmp_path / "other.fits"
    fits.PrimaryHDU(np.ones(8, np.float32)).writeto(other)
    _bump_mtime(other)
    os.replace(other, path)
    assert torchfits.read_numpy(path).tolist() == [1.0] * 8
    img = torchfits.open_image(path)
    assert img[2:4].tolist() == [1.0, 1.0]


def test_cache_performance_stats(tmp_path, fits):
    path = tmp_path / "s.fits"
    fits.PrimaryHDU(np.zeros((4, 4), np.int16)).writeto(path)
    torchfits.clear_file_cache()
    s0 = torchfits.get_cache_performance()
    assert set(s0) >= {"cache_size", "hit_rate", "miss_rate", "total_requests", "hits", "misses"}
    assert s0["hits"] == 0 and s0["misses"] == 0 and s0["total_requests"] == 0
    assert s0["cache_size"] == 0
    torchfits.read_header(path)
    s1 = torchfits.get_cache_performance()
    assert s1["misses"] >= 1 and s1["cache_size"] >= 1
    for _ in range(3):
        torchfits.read_header(path)
        torchfits.read_numpy(path)
    s2 = torchfits.get_cache_performance()
    assert s2["hits"] >= s1["hits"] + 3
    assert s2["total_requests"] == s2["hits"] + s2["misses"]
    assert s2["hit_rate"] == pytest.approx(s2["hits"] / s2["total_requests"])
    assert s2["miss_rate"] == pytest.approx(s2["misses"] / s2["total_requests"])
    _bump_mtime(path)
    torchfits.read_header(path)
    assert torchfits.get_cache_performance()["misses"] >= s2["misses"] + 1
    torchfits.clear_file_cache()
    s3 = torchfits.get_cache_performance()
    assert s3["cache_size"] == 0 and s3["hits"] == 0


def test_clear_file_cache_selective_and_clear_all(tmp_path, fits):
    path = tmp_path / "s.fits"
    fits.PrimaryHDU(np.zeros((4, 4), np.int16)).writeto(path)
    torchfits.read_header(path)
    torchfits.clear_file_cache(data=False, meta=False, hdu_types=False, stats=True, handles=True)
    assert torchfits.get_cache_performance()["hits"] == 0
    root = torchfits.cache.cache_root()
    assert str(root) == os.environ["TORCHFITS_CACHE_DIR"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "junk").write_text("x")
    torchfits.clear_all_caches()
    assert not (root / "junk").exists()
    assert torchfits.read_header(path)["NAXIS"] == 2


def test_cache_module_surface(monkeypatch, tmp_path):
    cache = torchfits.cache
    for name in ("CacheConfig", "CacheManager", "cache_root", "remote_cache_root", "sample_cache_root",
                 "clear", "clear_cache", "clear_all_caches", "configure_cache",
                 "configure_for_environment", "get_cache_manager", "get_cache_stats",
                 "get_optimal_cache_config", "optimize_for_dataset", "stats"):
        assert name in cache.__all__, name
    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(tmp_path / "tfc"))
    monkeypatch.delenv("TORCHFITS_REMOTE_CACHE")
    monkeypatch.delenv("TORCHFITS_SAMPLE_CACHE")
    assert cache.cache_root() == tmp_path / "tfc"
    assert cache.remote_cache_root() == tmp_path / "tfc" / "remote"
    assert cache.sample_cache_root() == tmp_path / "tfc" / "samples"
    monkeypatch.delenv("TORCHFITS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "torchfits"
    st = cache.get_cache_stats()
    assert {"hits", "misses", "io_hits", "io_misses", "io_total_requests", "cpp_cache_size",
            "config", "hit_rate"} <= set(st)
    assert st["cpp_cache_size"] == 0
    assert "io" in cache.stats()
    cfg = cache.CacheConfig()
    assert ((cfg.max_files, cfg.max_memory_mb, cfg.disk_cache_gb, cfg.prefetch_enabled)
            == (100, 1024, 10, True))
    assert cfg.copy() is not cfg and cfg.copy().max_files == 100
    assert cache.get_optimal_cache_config()["environment"] in {"local", "hpc", "cloud", "gpu"}
    with pytest.warns(DeprecationWarning):
        cache.configure_cache(10, 100)


# ------------------------------------------------------------------------------------------
# thread safety
# ------------------------------------------------------------------------------------------

def test_concurrent_reads_of_one_file(tmp_path, fits):
    path = tmp_path / "t.fits"
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((64, 96)).astype(np.float32) for _ in range(16)]
    fits.HDUList([fits.PrimaryHDU()] + [fits.ImageHDU(a, name=f"H{i}") for i, a in enumerate(arrays)]
                 ).writeto(path)
    torchfits.clear_file_cache()
    barrier = threading.Barrier(8, timeout=60)

    def work(k):
        if k < 8:
            barrier.wait()  # first wave starts together on a cold cache
        i = k % 16
        hdu = i + 1 if k % 2 else f"h{i}"
        a = torchfits.read_numpy(path, hdu)
        h = torchfits.read_header(path, hdu)
        img = torchfits.open_image(path, hdu)
        s = img[k % 60:, ::3]
        return i, a, h["EXTNAME"], s, k % 60

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(320)))
    for i, a, name, s, start in results:
        assert_bits_equal(a, arrays[i], what=f"HDU {i + 1}")
        assert name == f"H{i}"
        assert_bits_equal(s, arrays[i][start:, ::3])


def test_concurrent_slices_of_one_image(tmp_path, fits):
    path = tmp_path / "one.fits"
    data = np.arange(300 * 200, dtype=np.int32).reshape(300, 200)
    fits.PrimaryHDU(data).writeto(path)
    img = torchfits.open_image(path)

    def work(k):
        return k, img[k:k + 7, (k % 5)::(k % 4 + 1)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        for k, s in pool.map(work, range(250)):
            assert np.array_equal(s, data[k:k + 7, (k % 5)::(k % 4 + 1)])


def test_headers_equal_astropy_for_every_hdu(many_hdus, fits):
    for i in (0, 1, 50, 99):
        assert torchfits.read_header(many_hdus, i)["NAXIS1"] == astropy_header(many_hdus, i)["NAXIS1"]


def test_column_specs_parsed_once_per_file_version(tmp_path):
    """A table's column specs come from the index, parsed once per file version: reopening
    the table reuses them; a rewritten file (a new version) is parsed again."""
    from astropy.io import fits

    from torchfits.fits.hdu_index import get_index
    from torchfits.tables.source import TableSource

    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns([fits.Column("a", "J", array=np.arange(3))]).writeto(path)
    first = TableSource.open(str(path), 1).specs
    again = TableSource.open(str(path), 1).specs
    assert [s.name for s in first] == ["a"] and all(x is y for x, y in zip(first, again))
    index = get_index(str(path))
    assert index.column_specs(index.resolve(1)) == tuple(first)
    fits.BinTableHDU.from_columns([fits.Column("b", "E", array=np.ones(3)),
                                   fits.Column("c", "K", array=np.arange(3))]).writeto(path, overwrite=True)
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert [s.name for s in TableSource.open(str(path), 1).specs] == ["b", "c"]


def test_bad_column_description_raises_on_every_open(tmp_path):
    """A corrupt TFORM is not cached as a result: every open says what is wrong."""
    from astropy.io import fits

    from torchfits.errors import CorruptHeaderError
    from torchfits.tables.source import TableSource

    path = tmp_path / "bad.fits"
    fits.BinTableHDU.from_columns([fits.Column("a", "J", array=np.arange(3))]).writeto(path)
    raw = bytearray(path.read_bytes())
    at = raw.index(b"TFORM1  = 'J")
    raw[at + 11:at + 12] = b"Y"  # an unknown type code
    path.write_bytes(bytes(raw))
    for _ in range(2):
        with pytest.raises(CorruptHeaderError, match="bad.fits"):
            TableSource.open(str(path), 1)

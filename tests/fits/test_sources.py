"""Every source a user has: bytes, file objects, memory://, file:// and whole-file compression."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

astropy_fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits import dataset, read_header, scan  # noqa: E402
from torchfits.errors import FitsError, NotFitsError  # noqa: E402
from torchfits.image.plain import open_image, read_numpy  # noqa: E402


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(tmp_path / "cache"))


def _write_mef(path, rows=3000):
    rng = np.random.default_rng(5)
    img = rng.normal(size=(300, 200)).astype(np.float32)
    ints = (rng.integers(0, 3000, size=(40, 60))).astype(np.int16)
    vla = np.empty(rows, dtype=object)
    for i in range(rows):
        vla[i] = np.arange(i % 7, dtype=np.float64) + i
    cols = [
        astropy_fits.Column("a", "K", array=np.arange(rows)),
        astropy_fits.Column("b", "D", array=rng.normal(size=rows)),
        astropy_fits.Column("name", "8A", array=np.array([f"s{i}" for i in range(rows)])),
        astropy_fits.Column("v", "PD()", array=vla),
    ]
    hdus = astropy_fits.HDUList([
        astropy_fits.PrimaryHDU(img),
        astropy_fits.BinTableHDU.from_columns(cols, name="CAT"),
        astropy_fits.ImageHDU(ints, name="INTS"),
        astropy_fits.CompImageHDU(img, compression_type="RICE_1", tile_shape=(32, 200), name="COMP"),
    ])
    hdus.writeto(path, overwrite=True)
    return img, ints


@pytest.fixture(scope="module")
def mef(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("src") / "mef.fits")
    img, ints = _write_mef(path)
    return path, img, ints


def _same_everywhere(source, path, img, ints):
    """Image, cutout, header, table scan and compressed image from ``source`` equal the file's."""
    np.testing.assert_array_equal(read_numpy(source), img)
    np.testing.assert_array_equal(read_numpy(source, "INTS"), ints)
    im = open_image(source)
    np.testing.assert_array_equal(im[10:74, 20:84], img[10:74, 20:84])
    np.testing.assert_array_equal(im[5, ::3], img[5, ::3])
    assert read_header(source)["NAXIS1"] == 200
    comp = open_image(source, "COMP")
    np.testing.assert_allclose(comp[40:100, 3:50], astropy_fits.getdata(path, "COMP")[40:100, 3:50])
    got = scan(source, "CAT", columns=["a", "v", "name"], where="a >= 100 AND a < 140").to_table()
    assert got.column("a").to_pylist() == list(range(100, 140))
    assert got.column("v").to_pylist()[3] == list(np.arange(103 % 7, dtype=float) + 103)
    assert got.column("name").to_pylist()[0] == "s100"


def test_bytes_bytearray_memoryview(mef):
    path, img, ints = mef
    data = Path(path).read_bytes()
    for source in (data, bytearray(data), memoryview(data)):
        _same_everywhere(source, path, img, ints)


def test_seekable_file_object_reads_ranges_and_keeps_position(mef):
    path, img, ints = mef
    with open(path, "rb") as fh:
        fh.seek(17)
        _same_everywhere(fh, path, img, ints)
        assert fh.tell() == 17
        assert not fh.closed


class _Pipe(io.RawIOBase):
    """A non-seekable binary stream (like a socket or pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b):  # type: ignore[no-untyped-def]
        return self._data.readinto(b)


def test_non_seekable_stream_and_bytesio(mef):
    path, img, ints = mef
    data = Path(path).read_bytes()
    np.testing.assert_array_equal(read_numpy(io.BufferedReader(_Pipe(data))), img)
    _same_everywhere(io.BytesIO(data), path, img, ints)


def test_text_mode_file_object_is_refused(mef):
    path, _, _ = mef
    with open(path, encoding="latin-1") as fh, pytest.raises(TypeError, match="binary mode"):
        read_numpy(fh)


def test_memory_and_file_urls(mef):
    fsspec = pytest.importorskip("fsspec")
    path, img, ints = mef
    fs = fsspec.filesystem("memory")
    fs.pipe("/i11/mef.fits", Path(path).read_bytes())
    try:
        _same_everywhere("memory://i11/mef.fits", path, img, ints)
    finally:
        fs.rm("/i11/mef.fits")
    _same_everywhere("file://" + os.path.abspath(path), path, img, ints)


@pytest.mark.parametrize("kind", ["gzip-astropy", "gzip", "bz2", "xz"])
def test_whole_file_compression(mef, tmp_path, kind):
    path, img, ints = mef
    data = Path(path).read_bytes()
    if kind == "gzip-astropy":
        target = str(tmp_path / "mef.fits.gz")
        with astropy_fits.open(path) as hdul:
            hdul.writeto(target)  # astropy gzips by suffix
        assert Path(target).read_bytes()[:2] == b"\x1f\x8b"
    else:
        opener = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind]
        target = str(tmp_path / "mef.bin")  # detected by magic bytes, not by the name
        Path(target).write_bytes(opener(data))
    _same_everywhere(target, path, img, ints)
    # compressed bytes in memory too
    np.testing.assert_array_equal(read_numpy(Path(target).read_bytes()), img)


def test_gzip_without_rapidgzip_streams(mef, tmp_path, monkeypatch):
    import sys

    path, img, ints = mef
    target = str(tmp_path / "plain-stream.fits.gz")
    Path(target).write_bytes(gzip.compress(Path(path).read_bytes()))
    monkeypatch.setitem(sys.modules, "rapidgzip", None)  # import fails
    monkeypatch.setitem(sys.modules, "isal", None)
    torchfits.clear_file_cache()
    _same_everywhere(target, path, img, ints)


def test_gzip_seek_index_is_saved_and_reused(mef, tmp_path):
    pytest.importorskip("rapidgzip")
    img = (np.arange(1600 * 1600, dtype=np.float32) % 9973).reshape(1600, 1600)
    plain = tmp_path / "big.fits"
    astropy_fits.PrimaryHDU(img).writeto(plain)
    target = str(tmp_path / "indexed.fits.gz")
    Path(target).write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
    torchfits.clear_file_cache()
    np.testing.assert_array_equal(open_image(target)[100:164, 0:64], img[100:164, 0:64])
    saved = list((tmp_path / "cache" / "gzindex").glob("*.idx"))
    assert len(saved) == 1
    torchfits.clear_file_cache()
    from torchfits.fits.hdu_index import get_index
    from torchfits.fits.sources.whole_file_compression import GzipIndexedSource

    idx = get_index(target)
    assert isinstance(idx.source, GzipIndexedSource)
    np.testing.assert_array_equal(open_image(target)[1200:1264, 100:164], img[1200:1264, 100:164])
    # only the touched part of the inflated file was materialised
    assert idx.source.fetched_bytes < idx.source.size // 2


def test_corrupt_gzip_is_a_clear_error(tmp_path):
    target = tmp_path / "bad.fits.gz"
    target.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 40)
    with pytest.raises(FitsError):
        read_numpy(str(target))


def test_compress_Z_names_the_package(tmp_path, monkeypatch):
    import sys

    target = tmp_path / "x.fits.Z"
    target.write_bytes(b"\x1f\x9d\x90" + b"\x00" * 100)
    monkeypatch.setitem(sys.modules, "unlzw3", None)  # import fails
    with pytest.raises(FitsError, match="unlzw3"):
        read_numpy(str(target))


def test_compress_Z_file_reads(tmp_path):
    """A file made by Unix ``compress`` (tests/data/unix_compress.fits.Z): image and table."""
    pytest.importorskip("unlzw3")
    path = str(Path(__file__).parent.parent / "data" / "unix_compress.fits.Z")
    img = (np.arange(30 * 20, dtype=np.int16) * 7 - 1000).reshape(30, 20)
    np.testing.assert_array_equal(read_numpy(path), img)
    np.testing.assert_array_equal(open_image(path)[3:9, 2:15], img[3:9, 2:15])
    got = scan(path, "CAT", where="a >= 30").to_table()
    assert got.column("a").to_pylist() == list(range(30, 150, 3))
    assert got.column("b").to_pylist() == [i / 4 for i in range(10, 50)]
    assert read_header(path, "CAT")["NAXIS2"] == 50


def test_dataset_directory_mixing_plain_and_gzip(mef, tmp_path):
    path, _, _ = mef
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(path, d / "a.fits")
    (d / "b.fits.gz").write_bytes(gzip.compress(Path(path).read_bytes()))
    ds = dataset(str(d), "CAT")
    assert ds.count_rows() == 6000
    t = ds.to_table(columns=["a"], filter=__import__("pyarrow.compute").compute.field("a") < 5)
    assert sorted(t.column("a").to_pylist()) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    duckdb = pytest.importorskip("duckdb")
    assert duckdb is not None
    rel = torchfits.sql(f"SELECT count(*) FROM '{d}/*.fits*'", hdu="CAT")
    assert rel.fetchall()[0][0] == 6000


def test_compat_read_and_info_take_bytes_and_gz(mef, tmp_path):
    pytest.importorskip("torch")
    path, img, _ = mef
    data = Path(path).read_bytes()
    np.testing.assert_array_equal(torchfits.read(data).numpy(), img)
    gz = tmp_path / "c.fits.gz"
    gz.write_bytes(gzip.compress(data))
    np.testing.assert_array_equal(torchfits.read(str(gz), hdu="INTS").numpy(),
                                  astropy_fits.getdata(path, "INTS"))
    np.testing.assert_array_equal(torchfits.read_subset(str(gz), 0, 5, 6, 25, 30).numpy(), img[6:30, 5:25])
    assert [h.name for h in torchfits.info(io.BytesIO(data))][:2] == ["PRIMARY", "CAT"]
    assert torchfits.table.read(data, "CAT", columns=["a"]).num_rows == 3000


def test_not_fits_bytes_is_a_clear_error():
    with pytest.raises(NotFitsError):
        read_numpy(b"hello world" * 400)


def test_cfitsio_pipes_are_refused():
    with pytest.raises(ValueError, match="pipes"):
        read_numpy("|cat x.fits")


def test_write_fits_gz_and_fsspec_urls(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    img = np.arange(40 * 50, dtype=np.float32).reshape(40, 50)
    target = tmp_path / "out.fits.gz"
    torchfits.write(str(target), img)
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    np.testing.assert_array_equal(astropy_fits.getdata(target), img)
    np.testing.assert_array_equal(read_numpy(str(target)), img)
    # an in-place edit of a .fits.gz keeps it gzip-compressed
    torchfits.write_checksums(str(target))
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    assert torchfits.verify_checksums(str(target))
    url = "memory://i11-write/out.fits"
    try:
        torchfits.write(url, img)
        np.testing.assert_array_equal(read_numpy(url), img)
        with pytest.raises(FileExistsError):
            torchfits.write(url, img)
        torchfits.write(url, img * 2, overwrite=True)
        np.testing.assert_array_equal(read_numpy(url), img * 2)  # the cached index was dropped
        torchfits.write(url + ".gz", img)
        assert fsspec.filesystem("memory").cat("/i11-write/out.fits.gz")[:2] == b"\x1f\x8b"
        np.testing.assert_array_equal(read_numpy(url + ".gz"), img)
    finally:
        fsspec.filesystem("memory").rm("/i11-write", recursive=True)
    with pytest.raises(ValueError, match="bz2"):
        torchfits.write(str(tmp_path / "x.fits.bz2"), img)
    with pytest.raises(ValueError, match="http"):
        torchfits.write("http://127.0.0.1:1/x.fits", img)


def test_hdulist_open_on_bytes_streams_and_urls(mef):
    fsspec = pytest.importorskip("fsspec")
    pytest.importorskip("torch")
    path, img, _ = mef
    data = Path(path).read_bytes()
    fsspec.filesystem("memory").pipe("/i11-open/mef.fits", data)
    try:
        for source in (data, io.BytesIO(data), "memory://i11-open/mef.fits"):
            with torchfits.open(source) as hdul:
                assert len(hdul) == 4
                np.testing.assert_array_equal(hdul[0].data[:5, :5].numpy(), img[:5, :5])
                cat = hdul["CAT"]
                assert cat.num_rows == 3000
                assert cat.to_arrow().column("a").to_pylist()[:3] == [0, 1, 2]
    finally:
        fsspec.filesystem("memory").rm("/i11-open", recursive=True)


def test_coalesce_and_cache_trim(tmp_path):
    from torchfits.fits.sources.block_cache import mirror_path, trim, usage
    from torchfits.fits.sources.mirror import coalesce

    assert coalesce([(10, 20), (0, 5), (22, 30), (50, 60)], 2) == [(0, 5), (10, 30), (50, 60)]
    assert coalesce([(0, 10), (2, 4)], 0) == [(0, 10)]
    paths = []
    for k in range(3):
        p = Path(mirror_path(f"https://h/{k}.fits", {"etag": "x"}, tmp_path))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"\1" * 8192)
        Path(str(p) + ".json").write_text("{}")
        os.utime(p, (1000 + k, 1000 + k))  # k=0 is the least recently used
        paths.append(p)
    assert usage(tmp_path)["files"] == 3
    removed = trim(tmp_path, budget=2 * 8192 + 100)
    assert removed == 1 and not paths[0].exists() and paths[1].exists() and paths[2].exists()
    assert not Path(str(paths[0]) + ".json").exists()

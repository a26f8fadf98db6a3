"""Remote reads over real HTTP servers on 127.0.0.1: byte ranges, fallbacks, redirects, the
security guard, credentials and the block cache."""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
astropy_fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from _http_server import FileServer  # noqa: E402
from torchfits import dataset, read_header, scan  # noqa: E402
from torchfits.errors import FitsFileNotFoundError, HttpBlockedError  # noqa: E402
from torchfits.fits.sources import remote as remote_source  # noqa: E402
from torchfits.image.plain import open_image, read_numpy  # noqa: E402

pytestmark = pytest.mark.usefixtures("isolated_remote")
LOCAL = {"allow_private_hosts": True}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(11)
    img = rng.normal(size=(1024, 1024)).astype(np.float32)
    n = 200_000
    cols = [astropy_fits.Column(name, "D", array=rng.normal(size=n)) for name in "abcde"]
    cols.insert(0, astropy_fits.Column("id", "K", array=np.arange(n)))
    comp = (np.arange(512 * 512, dtype=np.int32) % 1000).reshape(512, 512)
    astropy_fits.HDUList([
        astropy_fits.PrimaryHDU(img),
        astropy_fits.BinTableHDU.from_columns(cols, name="CAT"),
        astropy_fits.CompImageHDU(comp, compression_type="RICE_1", tile_shape=(32, 32), name="COMP"),
    ]).writeto(root / "mef.fits")
    return str(root), img, comp


def _size(root):
    return os.path.getsize(os.path.join(root, "mef.fits"))


def test_ranged_reads_fetch_a_small_fraction(served):
    root, img, comp = served
    size = _size(root)
    with FileServer(root) as srv:
        url = f"{srv.url}/mef.fits"
        hdr = read_header(url, "CAT", storage_options=LOCAL)
        assert hdr["NAXIS2"] == 200_000
        assert srv.bytes_sent < 400_000  # headers (and a few blocks), not the data
        srv.reset()
        cut = open_image(url, storage_options=LOCAL)[500:564, 300:364]
        np.testing.assert_array_equal(cut, img[500:564, 300:364])
        assert 0 < srv.bytes_sent < size / 10
        srv.reset()
        t = scan(url, "CAT", columns=["id", "b"], row_slice=(50_000, 60_000),
                 storage_options=LOCAL).to_table()
        assert t.column("id").to_pylist() == list(range(50_000, 60_000))
        assert srv.bytes_sent < size / 10
        srv.reset()
        tiles = open_image(url, "COMP", storage_options=LOCAL)[100:140, 200:260]
        np.testing.assert_array_equal(tiles, comp[100:140, 200:260])
        assert srv.bytes_sent < size / 20
        # range requests only (plus HEAD), no whole-file GET
        assert all("Range" in h for m, _, h in srv.requests if m == "GET")


def test_whole_reads_equal_the_file(served):
    root, img, comp = served
    with FileServer(root) as srv:
        url = f"{srv.url}/mef.fits"
        np.testing.assert_array_equal(read_numpy(url, storage_options=LOCAL), img)
        np.testing.assert_array_equal(read_numpy(url, "COMP", storage_options=LOCAL), comp)
        got = scan(url, "CAT", where="id < 5", storage_options=LOCAL).to_table()
        assert got.column("id").to_pylist() == [0, 1, 2, 3, 4]
        expect = astropy_fits.getdata(os.path.join(root, "mef.fits"), "CAT")
        np.testing.assert_array_equal(got.column("c").to_numpy(), expect["c"][:5])


def test_server_ignoring_range_falls_back_cleanly(served):
    root, img, _ = served
    with FileServer(root, honour_range=False) as srv:
        url = f"{srv.url}/mef.fits"
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[0:64, 0:64], img[:64, :64])
        first = srv.bytes_sent
        assert first >= _size(root)
        # everything arrived with the first answer: later reads fetch nothing
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[900:964, 10:74],
                                      img[900:964, 10:74])
        rows = scan(url, "CAT", columns=["id"], row_slice=(0, 3), storage_options=LOCAL).to_table()
        assert rows.num_rows == 3
        assert srv.bytes_sent == first


def test_redirects_are_followed(served):
    root, img, _ = served
    with FileServer(root) as srv:
        srv.redirect_to = srv.url
        url = f"{srv.url}/redirect/mef.fits"
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[3:9, 4:11], img[3:9, 4:11])


def _box(url: str, y: int) -> np.ndarray:
    return open_image(url, storage_options=LOCAL)[y:y + 4, 8:12]


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork start method")
def test_forked_process_opens_its_own_index(served):
    # The parent's index holds an fsspec file system that is not fork-safe: a forked child
    # indexes the URL again in its own process to fetch rows the parent has not.
    root, img, _ = served
    with FileServer(root) as srv:
        url = f"{srv.url}/mef.fits"
        np.testing.assert_array_equal(_box(url, 8), img[8:12, 8:12])
        with mp.get_context("fork").Pool(1) as pool:
            np.testing.assert_array_equal(pool.apply(_box, (url, 900)), img[900:904, 8:12])


def test_guard_refuses_private_hosts_and_ftp(served, monkeypatch):
    root, _, _ = served
    with FileServer(root) as srv:
        url = f"{srv.url}/mef.fits"
        with pytest.raises(HttpBlockedError, match="internal or private networks"):
            read_numpy(url)
        assert srv.requests == []  # refused before any request
        with pytest.raises(OSError):  # HttpBlockedError is an OSError (1.x contract)
            scan(url)
        monkeypatch.setenv("TORCHFITS_ALLOW_PRIVATE_HOSTS", "1")
        assert read_header(url)["NAXIS"] == 2
    for blocked in ("ftp://example.org/a.fits", "http://10.0.0.8/a.fits", "http://169.254.169.254/x",
                    "http://[::1]/a.fits", "https://192.168.1.1/a.fits"):
        with pytest.raises(HttpBlockedError):
            remote_source.check_url(blocked)
    remote_source.check_url("http://93.184.216.34/a.fits")  # a public address passes


def test_guard_checks_every_redirect(served, monkeypatch):
    root, _, _ = served
    # Pretend 127.0.0.1 is public and "internal.test" resolves to a private address.
    monkeypatch.setattr(remote_source, "_blocked_address", lambda a: a.startswith("10."))
    monkeypatch.setattr(remote_source, "_resolve", lambda host: ["10.1.2.3"] if host == "internal.test"
                        else ["127.0.0.1"])
    with FileServer(root) as srv:
        srv.redirect_to = f"http://internal.test:{srv.port}"
        with pytest.raises(HttpBlockedError):
            read_numpy(f"{srv.url}/redirect/mef.fits")
        assert not any(p == "/mef.fits" for _, p, _ in srv.requests)


def test_credentials_from_environment_not_leaked(served, monkeypatch):
    root, _, _ = served
    monkeypatch.setenv("TORCHFITS_HTTP_TOKEN", "s3cr3t-token")
    with FileServer(root) as a, FileServer(root) as b:
        read_header(f"{a.url}/mef.fits", storage_options=LOCAL)
        assert any(h.get("Authorization") == "Bearer s3cr3t-token" for _, _, h in a.requests)
        # a redirect to another origin does not carry the credentials
        a.redirect_to = b.url
        a.reset()
        read_header(f"{a.url}/redirect/mef.fits", storage_options=LOCAL)
        assert b.requests and not any("Authorization" in h for _, _, h in b.requests)
        with pytest.raises(FitsFileNotFoundError) as err:
            read_header(f"{a.url}/missing.fits?sig=abc", storage_options=LOCAL)
        assert "s3cr3t" not in str(err.value) and "sig=abc" not in str(err.value)
    monkeypatch.delenv("TORCHFITS_HTTP_TOKEN")
    monkeypatch.setenv("TORCHFITS_HTTP_AUTHORIZATION", "Basic dXNlcjpwdw==")
    torchfits.clear_file_cache()
    with FileServer(root) as a:
        read_header(f"{a.url}/mef.fits", storage_options=LOCAL)
        assert any(h.get("Authorization") == "Basic dXNlcjpwdw==" for _, _, h in a.requests)


def test_block_cache_persists_and_revalidates(served, tmp_path):
    root, img, _ = served
    www = tmp_path / "www2"
    shutil.copytree(root, www)
    with FileServer(str(www)) as srv:
        url = f"{srv.url}/mef.fits"
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[10:20, 10:20], img[10:20, 10:20])
        assert srv.bytes_sent > 0
        usage = torchfits.cache.remote_cache_usage()
        assert usage["files"] == 1 and usage["bytes"] > 0
        torchfits.clear_file_cache()  # a new process would start here: only the disk cache is left
        srv.reset()
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[10:20, 10:20], img[10:20, 10:20])
        assert srv.bytes_sent == 0
        # the object changes (new ETag): the stale mirror is not used
        new = img + 1
        astropy_fits.PrimaryHDU(new).writeto(www / "mef.fits", overwrite=True)
        torchfits.clear_file_cache()
        np.testing.assert_array_equal(open_image(url, storage_options=LOCAL)[10:20, 10:20], new[10:20, 10:20])
        # caching can be turned off per call
        torchfits.cache.clear_cache(disk=True)
        assert torchfits.cache.remote_cache_usage()["files"] == 0
        read_header(url, storage_options={**LOCAL, "cache": False})
        assert torchfits.cache.remote_cache_usage()["files"] == 0


def test_dataset_sql_and_compat_reads_over_http(served):
    root, img, _ = served
    with FileServer(root) as srv:
        url = f"{srv.url}/mef.fits"
        ds = dataset([url, url], "CAT", storage_options=LOCAL, add_path_column=True)
        assert ds.count_rows() == 400_000
        import pyarrow.compute as pc

        t = ds.to_table(columns=["id", "filename"], filter=pc.field("id") < 2)
        assert t.column("id").to_pylist() == [0, 1, 0, 1]
        assert set(t.column("filename").to_pylist()) == {url}
        pytest.importorskip("duckdb")
        rel = torchfits.sql(f"SELECT count(*) FROM '{url}' WHERE id < 10", hdu="CAT", storage_options=LOCAL)
        assert rel.fetchall()[0][0] == 10
        pytest.importorskip("torch")
        np.testing.assert_array_equal(torchfits.read(url, storage_options=LOCAL).numpy(), img)
        sub = torchfits.read_subset(url, 0, 5, 6, 25, 30, storage_options=LOCAL)
        np.testing.assert_array_equal(sub.numpy(), img[6:30, 5:25])


def test_gzip_over_http(served, tmp_path):
    import gzip

    root, img, _ = served
    www = tmp_path / "gz"
    www.mkdir()
    with open(os.path.join(root, "mef.fits"), "rb") as fh:
        (www / "mef.fits.gz").write_bytes(gzip.compress(fh.read(), compresslevel=1))
    with FileServer(str(www)) as srv:
        np.testing.assert_array_equal(
            open_image(f"{srv.url}/mef.fits.gz", storage_options=LOCAL)[7:9, 1:5], img[7:9, 1:5])


def test_missing_remote_file(served):
    root, _, _ = served
    with FileServer(root) as srv:
        with pytest.raises(FitsFileNotFoundError, match="not found"):
            read_numpy(f"{srv.url}/nope.fits", storage_options=LOCAL)


def test_vos_short_forms_normalise_and_name_the_extra():
    assert remote_source.normalize_url("vos:me/x.fits") == "vos://cadc.nrc.ca~vault/me/x.fits"
    assert remote_source.normalize_url("vault:/me/x.fits") == "vos://cadc.nrc.ca~vault/me/x.fits"
    try:
        import vos  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="torchfits\\[vos\\]"):
            read_numpy("vos:me/x.fits")


def test_s3_through_moto_server(served, monkeypatch):
    from _s3_server import moto_s3, s3_filesystem

    root, img, _ = served
    with moto_s3(monkeypatch) as so:
        fs = s3_filesystem(so)
        fs.mkdir("tfbucket")
        fs.put(os.path.join(root, "mef.fits"), "tfbucket/mef.fits")
        url = "s3://tfbucket/mef.fits"
        np.testing.assert_array_equal(open_image(url, storage_options=so)[40:104, 8:72], img[40:104, 8:72])
        t = scan(url, "CAT", columns=["id"], row_slice=(10, 20), storage_options=so).to_table()
        assert t.column("id").to_pylist() == list(range(10, 20))
        assert dataset("s3://tfbucket/*.fits", "CAT", storage_options=so).count_rows() == 200_000


def test_vos_reads_through_the_client_once(served, monkeypatch, tmp_path):
    import sys
    import types

    root, img, _ = served
    calls = []

    class Client:
        def copy(self, source, dest):
            calls.append(source)
            shutil.copy(os.path.join(root, "mef.fits"), dest)

    monkeypatch.setitem(sys.modules, "vos", types.SimpleNamespace(Client=Client))
    np.testing.assert_array_equal(read_numpy("vos:me/mef.fits")[:4, :4], img[:4, :4])
    torchfits.clear_file_cache()
    np.testing.assert_array_equal(read_numpy("vault:me/mef.fits")[:4, :4], img[:4, :4])
    assert calls == ["vos://cadc.nrc.ca~vault/me/mef.fits"]  # the second read used the cache


def test_remote_table_with_corrupt_descriptors_names_the_row(tmp_path):
    # Lazily fetched tables fetch only the heap ranges their descriptors point at: an absurd
    # descriptor must be neither fetched nor overflow the range arithmetic; the decoder names it.
    from torchfits.errors import CorruptHeaderError
    from torchfits.fits.hdu_index import get_index

    n = 50
    cols = [astropy_fits.Column("id", "J", array=np.arange(n)),
            astropy_fits.Column("v", "QD()", array=np.array([np.arange(i % 5, dtype=np.float64)
                                                             for i in range(n)], dtype=object))]
    path = tmp_path / "vla.fits"
    astropy_fits.HDUList([astropy_fits.PrimaryHDU(),
                          astropy_fits.BinTableHDU.from_columns(cols)]).writeto(path)
    e = get_index(str(path)).entries[1]
    raw = bytearray(path.read_bytes())
    p = e.data_offset + 7 * e.row_bytes + 4
    raw[p:p + 16] = (2**62 - 1).to_bytes(8, "big") + (8).to_bytes(8, "big")
    path.write_bytes(bytes(raw))
    with FileServer(str(tmp_path)) as srv:
        url = f"{srv.url}/vla.fits"
        ok = scan(url, 1, rows=[0, 3], storage_options=LOCAL).to_arrow()
        assert ok.column("v").to_pylist() == [[], [0.0, 1.0, 2.0]]
        with pytest.raises(CorruptHeaderError,
                           match=r"vla\.fits: HDU 1: column 2 \('v'.*row 7: corrupt heap"):
            scan(url, 1, storage_options=LOCAL).to_arrow()


def test_http_glob_lists_through_the_guard(served, tmp_path):
    root, _, _ = served
    with FileServer(root, listing=True) as srv:
        with pytest.raises(HttpBlockedError):
            dataset(f"{srv.url}/*.fits", "CAT")
        assert srv.requests == []  # the listing request is refused before it is sent
        ds = dataset(f"{srv.url}/m*.fits", "CAT", storage_options=LOCAL)
        assert ds.files == [f"{srv.url}/mef.fits"]
    with FileServer(root) as srv:  # no HTML index page: say what to do instead
        with pytest.raises(FitsFileNotFoundError, match="list of URLs"):
            dataset(f"{srv.url}/*.fits", "CAT", storage_options=LOCAL)

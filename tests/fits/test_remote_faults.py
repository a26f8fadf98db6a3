"""Remote reads against a misbehaving HTTP server on 127.0.0.1 (tests/_fault_server.py): every
fault gives the right data or a clean FitsError naming the URL without its secrets, within the
timeout; a faulty run never poisons the block cache."""
from __future__ import annotations

import gzip
import io
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
astropy_fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from _fault_server import FaultServer, etag_of  # noqa: E402
from torchfits import dataset, scan  # noqa: E402
from torchfits.errors import (  # noqa: E402
    FitsError,
    FitsFileNotFoundError,
    RemoteFileChangedError,
    RemoteReadError,
)
from torchfits.fits.sources import http_checks  # noqa: E402
from torchfits.image.plain import open_image, read_numpy  # noqa: E402

pytestmark = pytest.mark.usefixtures("isolated_remote")
FAST = {"allow_private_hosts": True, "http_timeout": 0.4, "http_backoff": 0.01, "http_retries": 3}
N_ROWS = 20_000


def _mef(seed: int = 3, extra_cards: int = 0) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    img = rng.normal(size=(256, 256)).astype(np.float32)
    comp = (np.arange(128 * 128, dtype=np.int32) * (seed + 1) % 997).reshape(128, 128)
    ids = np.arange(N_ROWS, dtype=np.int64)
    cols = [astropy_fits.Column("id", "K", array=ids),
            astropy_fits.Column("x", "D", array=rng.normal(size=N_ROWS)),
            astropy_fits.Column("y", "E", array=rng.normal(size=N_ROWS).astype(np.float32))]
    primary = astropy_fits.PrimaryHDU(img)
    for k in range(extra_cards):
        primary.header[f"PAD{k}"] = k
    buf = io.BytesIO()
    astropy_fits.HDUList([
        primary,
        astropy_fits.BinTableHDU.from_columns(cols, name="CAT"),
        astropy_fits.CompImageHDU(comp, compression_type="RICE_1", tile_shape=(16, 16), name="COMP"),
    ]).writeto(buf)
    x = np.asarray(astropy_fits.open(io.BytesIO(buf.getvalue()))["CAT"].data["x"])
    return buf.getvalue(), img, comp, x


@pytest.fixture(scope="module")
def mef():
    return _mef()


@pytest.fixture
def srv(mef):
    data = mef[0]
    with FaultServer({"mef.fits": data, "mef.fits.gz": gzip.compress(data, compresslevel=1),
                      "d/mef.fits": data}) as server:
        yield server


def _all_reads(url, mef, gz_url=None):
    """read_numpy, plain and tile-compressed cutouts, scans with projection/where/row ranges."""
    _, img, comp, x = mef
    np.testing.assert_array_equal(read_numpy(url, storage_options=FAST), img)
    torchfits.clear_file_cache()
    np.testing.assert_array_equal(open_image(url, storage_options=FAST)[100:140, 30:90], img[100:140, 30:90])
    np.testing.assert_array_equal(open_image(url, "COMP", storage_options=FAST)[40:70, 5:50],
                                  comp[40:70, 5:50])
    t = scan(url, "CAT", columns=["id", "x"], row_slice=(5_000, 9_000), storage_options=FAST).to_table()
    assert t.column("id").to_pylist() == list(range(5_000, 9_000))
    np.testing.assert_array_equal(t.column("x").to_numpy(), x[5_000:9_000])
    w = scan(url, "CAT", columns=["x"], where="id >= 19990", storage_options=FAST).to_table()
    np.testing.assert_array_equal(w.column("x").to_numpy(), x[19_990:])
    if gz_url:
        np.testing.assert_array_equal(open_image(gz_url, storage_options=FAST)[7:9, 1:5], img[7:9, 1:5])


def _no_secret(exc: BaseException, *secrets: str) -> None:
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 30:
        for s in secrets:
            assert s not in str(cur) and s not in repr(cur), (type(cur), str(cur))
            for arg in cur.args:
                assert s not in str(arg)
        cur = cur.__cause__ or cur.__context__
        seen += 1


FAULTS = ["shift", "lie", "norange", "short", "close", "503", "stall", "stall_body"]


@pytest.mark.parametrize("fault", FAULTS)
def test_transient_faults_are_retried_to_the_right_bytes(srv, mef, fault):
    srv.stall = 1.0
    srv.fault, srv.times = fault, 2
    _all_reads(f"{srv.url}/mef.fits", mef, f"{srv.url}/mef.fits.gz")


@pytest.mark.parametrize("fault", FAULTS)
def test_lasting_faults_are_clean_errors_within_the_timeout(srv, mef, fault):
    srv.stall = 1.0
    srv.fault, srv.times = fault, -1
    url = f"http://user:hunter2@127.0.0.1:{srv.port}/mef.fits?X-Amz-Signature=SECRET42"
    t0 = time.monotonic()
    with pytest.raises(RemoteReadError) as info:
        open_image(url, storage_options=FAST)[10:20, 10:20]
    assert time.monotonic() - t0 < 8
    exc = info.value
    assert isinstance(exc, FitsError) and not isinstance(exc, FitsFileNotFoundError)
    assert f"http://127.0.0.1:{srv.port}/mef.fits" in str(exc) and exc.url in str(exc)
    assert exc.byte_range is not None and f"{exc.byte_range[0]}..{exc.byte_range[1]}" in str(exc)
    assert "after 4 tries" in str(exc)
    if fault == "503":
        assert exc.status == 503 and "HTTP 503" in str(exc)
    _no_secret(exc, "SECRET42", "hunter2")


def test_flaky_server_with_thirty_percent_503s(srv, mef):
    srv.flaky = 0.3
    opts = dict(FAST, http_retries=8)
    _, img, comp, x = mef
    for _ in range(2):
        torchfits.clear_file_cache()
        np.testing.assert_array_equal(read_numpy(f"{srv.url}/mef.fits", storage_options=opts), img)
        t = scan(f"{srv.url}/mef.fits", "CAT", columns=["x"], storage_options=opts).to_table()
        np.testing.assert_array_equal(t.column("x").to_numpy(), x)
    assert any(m == "GET" for m, _, _ in srv.requests)


def test_timeout_from_the_environment(srv, monkeypatch):
    monkeypatch.setenv("TORCHFITS_HTTP_TIMEOUT", "0.3")
    monkeypatch.setenv("TORCHFITS_HTTP_RETRIES", "1")
    srv.stall, srv.fault = 3.0, "stall"
    t0 = time.monotonic()
    with pytest.raises(RemoteReadError, match="timeout.*after 2 tries"):
        read_numpy(f"{srv.url}/mef.fits", storage_options={"allow_private_hosts": True})
    assert time.monotonic() - t0 < 2.5
    assert http_checks.settings_of(None) == http_checks.HttpSettings(timeout=0.3, retries=1)


def test_a_change_mid_read_never_mixes_versions(srv, mef):
    data, img, _, _ = mef
    new, new_img, _, _ = _mef(seed=9, extra_cards=60)  # a longer header: every pixel moves
    url = f"{srv.url}/mef.fits"
    # honest server (If-Match honoured): the header is read, then the file is replaced
    srv.change_after = ("mef.fits", new, 1)
    with pytest.raises(RemoteFileChangedError, match="changed"):
        read_numpy(url, storage_options=FAST)
    assert any(h.get("If-Match") == etag_of(data) for m, _, h in srv.requests if m == "GET")
    # a later read opens the new version whole
    srv.change_after = None
    torchfits.clear_file_cache()
    np.testing.assert_array_equal(read_numpy(url, storage_options=FAST), new_img)


def test_an_open_handle_raises_after_a_change(srv, mef):
    _, img, _, _ = mef
    new, _, _, _ = _mef(seed=5)
    url = f"{srv.url}/mef.fits"
    handle = open_image(url, storage_options=FAST)
    np.testing.assert_array_equal(handle[0:10, 0:10], img[0:10, 0:10])
    srv.files["mef.fits"] = new
    np.testing.assert_array_equal(handle[0:10, 0:10], img[0:10, 0:10])  # blocks it already has
    with pytest.raises(RemoteFileChangedError):
        handle[200:256, 0:256]
    with pytest.raises(RemoteFileChangedError):  # and it stays refused
        handle[150:160, 0:10]


def test_alternating_replicas_give_one_version_or_an_error(srv, mef):
    _, img, _, _ = mef
    other, _, _, _ = _mef(seed=4)
    srv.replica["mef.fits"] = other
    url = f"{srv.url}/mef.fits"
    for _ in range(3):
        torchfits.clear_file_cache()
        try:
            got = read_numpy(url, storage_options=FAST)
        except RemoteFileChangedError as exc:
            assert "ETag" in str(exc)
        else:
            np.testing.assert_array_equal(got, img)


def test_cache_poisoning_is_impossible(srv, mef, tmp_path):
    _, img, _, _ = mef
    url = f"{srv.url}/mef.fits"
    opts = dict(FAST, cache_dir=str(tmp_path / "blocks"))
    srv.fault, srv.times = "shift", -1
    with pytest.raises(RemoteReadError):
        open_image(url, storage_options=opts)[100:120, 0:256]
    srv.fault = "lie"
    with pytest.raises(RemoteReadError):
        read_numpy(url, storage_options=opts)
    # a healthy server afterwards, in what would be a new process: only verified blocks were kept
    srv.fault = None
    torchfits.clear_file_cache()
    np.testing.assert_array_equal(read_numpy(url, storage_options=opts), img)
    torchfits.clear_file_cache()
    srv.requests.clear()
    np.testing.assert_array_equal(open_image(url, storage_options=opts)[100:120, 0:256], img[100:120])
    assert not [r for r in srv.requests if r[0] == "GET"]  # all from the disk cache


def test_no_validator_no_disk_cache_and_no_length_uses_ranges(srv, mef, tmp_path):
    _, img, _, _ = mef
    url = f"{srv.url}/mef.fits"
    srv.validators, srv.lengths = False, False
    opts = dict(FAST, cache_dir=str(tmp_path / "blocks"))
    np.testing.assert_array_equal(open_image(url, storage_options=opts)[3:9, 4:8], img[3:9, 4:8])
    gets = [h for m, _, h in srv.requests if m == "GET"]
    assert gets and all("Range" in h for h in gets)  # the size came from a one-byte range
    assert not list((tmp_path / "blocks").glob("*/*.blocks"))


def test_errors_say_what_happened(srv):
    base = srv.url
    with pytest.raises(FitsFileNotFoundError, match="not found"):
        read_numpy(f"{base}/nope.fits", storage_options=FAST)
    srv.head_status = 503
    with pytest.raises(RemoteReadError, match=r"^Could not open FITS file: .*HTTP 503 after 4 tries") as info:
        read_numpy(f"{base}/mef.fits?token=SECRET42", storage_options=FAST)
    assert not isinstance(info.value, FileNotFoundError) and isinstance(info.value, RuntimeError)
    _no_secret(info.value, "SECRET42")
    srv.head_status = None
    with pytest.raises(RemoteReadError, match="redirect") as info:
        read_numpy(f"{base}/loop/mef.fits?sig=SECRET42", storage_options=FAST)
    _no_secret(info.value, "SECRET42")
    srv.refuse["mef.fits"] = 403
    with pytest.raises(RemoteReadError, match="HTTP 403 .access denied") as info:
        read_numpy(f"{base}/mef.fits", storage_options=FAST)
    assert info.value.status == 403


def test_forbidden_or_failing_sidecar_means_no_sidecar(srv, mef):
    urls = [f"{srv.url}/d/mef.fits"]
    for status in (403, 503):
        srv.refuse = {"_torchfits_index.json": status}
        torchfits.clear_file_cache()
        with pytest.warns(RuntimeWarning, match=f"HTTP {status}"):
            ds = dataset(urls, "CAT", storage_options=FAST)
            assert ds.count_rows() == N_ROWS
        pytest.importorskip("duckdb")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rel = torchfits.sql(f"SELECT count(*) FROM '{urls[0]}' WHERE id < 10", hdu="CAT",
                                storage_options=FAST)
            assert rel.fetchall()[0][0] == 10


def test_sidecar_probe_403_warns(srv):
    from torchfits.fits.sources.remote import read_small

    srv.refuse = {"side.json": 403}
    with pytest.warns(RuntimeWarning, match="HTTP 403"):
        assert read_small(f"{srv.url}/side.json", FAST) is None
    assert read_small(f"{srv.url}/missing.json", FAST) is None


def test_torch_datasets_and_downloads_under_faults(srv, mef, tmp_path):
    torch = pytest.importorskip("torch")
    from torchfits.data import FitsCutoutDataset
    from torchfits.data.remote import resolve_local_path

    _, img, _, _ = mef
    url = f"{srv.url}/mef.fits"
    srv.flaky = 0.3
    opts = dict(FAST, http_retries=8)
    ds = FitsCutoutDataset([(url, 0, 10 * k, 5 * k, 16) for k in range(6)], storage_options=opts)
    for k in range(6):
        assert torch.equal(ds[k][0], torch.from_numpy(img[5 * k:5 * k + 16, 10 * k:10 * k + 16]))
    path = resolve_local_path(url, tmp_path / "copies", storage_options=opts)
    with open(path, "rb") as fh:
        assert fh.read() == srv.files["mef.fits"]
    srv.flaky, srv.fault, srv.times = 0.0, "shift", -1
    with pytest.raises(RemoteReadError):
        resolve_local_path(f"{srv.url}/d/mef.fits", tmp_path / "copies", storage_options=opts)
    assert not list((tmp_path / "copies").glob("*d_mef*"))


def test_dask_under_faults(srv, mef):
    pytest.importorskip("dask.dataframe")
    import torchfits.dask as tfd

    _, _, _, x = mef
    srv.flaky = 0.3
    opts = dict(FAST, http_retries=8)
    ddf = tfd.read_table([f"{srv.url}/mef.fits"], hdu="CAT", columns=["x"], where="id < 100",
                         storage_options=opts)
    got = ddf.compute(scheduler="sync")
    np.testing.assert_array_equal(np.sort(got["x"].to_numpy()), np.sort(x[:100]))


def test_checks():
    ok = {"Content-Range": "bytes 10-19/100"}
    assert http_checks.check_range(206, ok, 10, 10, 100, 10) is None
    shifted = {"Content-Range": "bytes 20-29/100"}
    assert "Content-Range" in http_checks.check_range(206, shifted, 10, 10, 100, 10)
    assert "truncated" in http_checks.check_range(206, ok, 10, 10, 100, 5)
    assert "total" in http_checks.check_range(206, {"Content-Range": "bytes 10-19/99"}, 10, 10, 100, 10)
    assert http_checks.check_range(206, {"Content-Range": "bytes 10-19/*"}, 10, 10, 100, 10) is None
    assert http_checks.check_range(200, {}, 10, 10, 100, 100) is None
    assert http_checks.check_range(200, {}, 10, 10, 100, 10) is not None
    assert http_checks.changed({"etag": '"a"'}, {"ETag": '"b"'})
    assert http_checks.changed({"etag": '"a"'}, {"ETag": 'W/"a"'}) is None
    assert http_checks.changed({"last-modified": "x"}, {"Last-Modified": "y"})
    assert http_checks.pin_headers({"etag": '"a"'}) == {"If-Match": '"a"'}
    assert http_checks.pin_headers({"etag": 'W/"a"'}) == {}
    assert http_checks.retry_after("3") == 3.0 and http_checks.retry_after(None) is None
    s = http_checks.HttpSettings(backoff=1.0)
    assert 1.0 <= http_checks.backoff(2, s) < 2.0 and http_checks.backoff(1, s, 120.0) == 60.0
    assert all(http_checks.retryable_status(c) for c in (429, 500, 502, 503, 504))
    assert not any(http_checks.retryable_status(c) for c in (403, 404, 501))
    with pytest.raises(ValueError, match="http retries"):
        http_checks.settings_of({"http_retries": "many"})

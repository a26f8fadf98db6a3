"""torchfits.dask on a real distributed.LocalCluster (2 worker processes on 127.0.0.1).

One module-scoped cluster keeps startup to a few seconds; the worker-failure test runs last
because it kills a worker (the nanny restarts it). Oracles: astropy reads of the same files,
NumPy for images.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
import torchfits.dask as tfd  # noqa: E402
from torchfits.errors import ColumnNotFoundError, FitsError, FitsFileExistsError  # noqa: E402
from torchfits.tables.stats_index import INDEX_NAME, build_index  # noqa: E402

NFILES = 12
NROWS = 4000
BANDS = np.array(["g", "r", "i", "z"])


# -- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    """A LocalCluster with 2 single-threaded worker processes, closed at the end of the module."""
    env_path = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(torchfits.__file__)),
                                           os.environ.get("PYTHONPATH", "")] if p)
    os.environ["PYTHONPATH"] = env_path  # workers import this torchfits, not another install
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _write_catalog(path: str, k: int) -> None:
    rng = np.random.default_rng(k)
    ids = np.arange(k * NROWS, (k + 1) * NROWS, dtype=np.int64)
    mag = rng.uniform(14, 24, NROWS).astype(np.float32)
    flag = rng.integers(-1, 3, NROWS).astype(np.int32)
    cols = [
        fits.Column("id", "K", array=ids),
        fits.Column("ra", "D", array=rng.uniform(0, 360, NROWS)),
        fits.Column("dec", "D", array=rng.uniform(-90, 90, NROWS)),
        fits.Column("mag", "E", array=mag),
        fits.Column("flag", "J", array=flag, null=-1),  # TNULL: -1 reads as null
        fits.Column("band", "1A", array=BANDS[rng.integers(0, 4, NROWS)]),
    ]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path)


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    d = tmp_path_factory.mktemp("catalogs")
    for k in range(NFILES):
        _write_catalog(str(d / f"cat{k:02d}.fits"), k)
    build_index(str(d), chunk_rows=1000)
    return d


@pytest.fixture(scope="module")
def astropy_frame(catalogs):
    """The same catalogs read by astropy, as one pandas frame (flag nulls → pandas NA)."""
    frames = []
    for k in range(NFILES):
        with fits.open(catalogs / f"cat{k:02d}.fits") as hdul:
            data = hdul[1].data
            flag = np.asarray(data["flag"])
            nullable = pd.array(flag.astype(np.int32), dtype="Int32")
            nullable[flag == -1] = pd.NA
            frames.append(pd.DataFrame({
                "id": np.asarray(data["id"]), "ra": np.asarray(data["ra"]), "dec": np.asarray(data["dec"]),
                "mag": np.asarray(data["mag"]),
                "flag": nullable,
                "band": [s.strip() for s in data["band"]],
            }))
    return pd.concat(frames, ignore_index=True)


# -- install-free checks ----------------------------------------------------------------------------
def test_importing_torchfits_dask_does_not_import_dask():
    code = ("import sys, torchfits, torchfits.dask; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]; "
            "assert not bad, bad; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "dask" in dir(torchfits)


def test_meta_comes_from_the_schema_without_decoding(catalogs, monkeypatch):
    from torchfits.tables.source import TableSource

    def refuse(self, **kwargs):
        raise AssertionError("building the graph decoded data")

    monkeypatch.setattr(TableSource, "decode", refuse)
    ddf = tfd.read_table(str(catalogs), where="mag < 20")
    assert list(ddf.columns) == ["id", "ra", "dec", "mag", "flag", "band"]
    dtypes = ddf.dtypes.to_dict()
    assert dtypes["id"] == np.int64 and dtypes["mag"] == np.float32
    assert str(dtypes["flag"]) == "Int32"  # TNULL column: a nullable dtype in every partition
    assert ddf.npartitions == 1  # twelve small files gathered into one ~128 MB partition


def test_bad_arguments_raise_clear_errors(catalogs):
    with pytest.raises(ColumnNotFoundError, match="nope"):
        tfd.read_table(str(catalogs), columns=["ra", "nope"])
    with pytest.raises(ColumnNotFoundError, match="index column 'nope'"):
        tfd.read_table(str(catalogs), index="nope")
    with pytest.raises(ValueError, match="split_row_groups"):
        tfd.read_table(str(catalogs), split_row_groups=0)
    with pytest.raises(ValueError, match="unknown column 'nope'"):
        tfd.read_table(str(catalogs), where="nope > 3")


def test_storage_options_without_remote_support_is_a_fits_error(catalogs, monkeypatch):
    import torchfits.tables.dataset as dsmod

    def local_only(*args, storage_options=None, **kwargs):
        if storage_options:
            raise NotImplementedError("remote sources (storage_options) are not supported yet")
        raise AssertionError("storage_options was not forwarded")

    monkeypatch.setattr(dsmod, "dataset", local_only)
    with pytest.raises(FitsError, match="remote support"):
        tfd.read_table("s3://bucket/cat.fits", storage_options={"anon": True})


def test_split_row_groups_and_stats_chunks(catalogs):
    ddf = tfd.read_table(str(catalogs), split_row_groups=1500)
    # cuts fall on the sidecar's 1000-row chunks: 2000 + 2000 rows per file
    assert ddf.npartitions == 2 * NFILES
    whole = tfd.read_table(str(catalogs), split_row_groups=False)
    assert whole.npartitions == NFILES
    assert len(ddf) == NFILES * NROWS


def _write_array_table(path: str) -> None:
    """Every column kind Dask would otherwise turn into strings: fixed-size arrays, TDIM,
    variable-length arrays (ints, floats, logicals), bits, logical arrays; plus strings."""
    n = 6
    cols = [
        fits.Column("arr", "2J", array=np.arange(2 * n, dtype="i4").reshape(n, 2)),
        fits.Column("cube", "6E", dim="(3,2)", array=np.arange(6 * n, dtype="f4").reshape(n, 2, 3)),
        fits.Column("vla", "PJ()", array=np.array([np.arange(k, dtype="i4") * 7 for k in range(n)],
                                                  dtype=object)),
        fits.Column("vlf", "QD()", array=np.array([np.linspace(0, 1, k + 1) for k in range(n)],
                                                  dtype=object)),
        fits.Column("vll", "PL()", array=np.array([np.array([True, False] * k, dtype=bool)
                                                   for k in range(n)], dtype=object)),
        fits.Column("bits", "11X", array=np.array([[(i + j) % 3 == 0 for j in range(11)]
                                                    for i in range(n)])),
        fits.Column("flags", "3L", array=np.array([[True, False, i % 2 == 0] for i in range(n)])),
        fits.Column("name", "5A", array=np.array(["ab", "cde", "", "x y", "zzzzz", "q"])),
        fits.Column("id", "K", array=np.arange(n, dtype="i8")),
    ]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path)


@pytest.mark.parametrize("convert_string", [True, False])
def test_array_columns_arrive_as_arrays_not_strings(tmp_path, convert_string):
    """Dask's string conversion of object columns used to turn every array cell into its repr
    (``'[45 56]'``); each cell must equal what ``scan().to_pandas()`` gives."""
    import dask

    path = str(tmp_path / "arrays.fits")
    _write_array_table(path)
    want = torchfits.scan(path).to_pandas()
    with dask.config.set({"dataframe.convert-string": convert_string}):
        ddf = tfd.read_table(path)
        got = ddf.compute(scheduler="sync")
        subset = tfd.read_table(path, columns=["vla", "name"], where="id > 2").compute(scheduler="sync")
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for name in ("arr", "cube", "vla", "vlf", "vll", "bits", "flags"):
        assert ddf.dtypes[name] == object and got[name].dtype == object, (name, ddf.dtypes[name])
        for a, b in zip(got[name], want[name]):
            assert not isinstance(a, str), (name, a)
            assert np.array_equal(np.asarray(a.tolist() if hasattr(a, "tolist") else a),
                                  np.asarray(b.tolist())), (name, a, b)
            assert np.asarray(a).dtype == np.asarray(b).dtype, name
    if convert_string:  # strings stay strings, in the dtype Dask's option asks for
        assert isinstance(ddf.dtypes["name"], pd.StringDtype) and got["name"].dtype == ddf.dtypes["name"]
    assert list(got["name"]) == list(want["name"]) == ["ab", "cde", "", "x y", "zzzzz", "q"]
    assert list(got["id"]) == list(range(6))
    assert [list(v) for v in subset["vla"]] == [list(np.arange(k) * 7) for k in (3, 4, 5)]
    assert list(subset["name"]) == ["x y", "zzzzz", "q"]


# -- on the cluster -----------------------------------------------------------------------------------
def test_filtered_groupby_matches_pandas_over_astropy(client, catalogs, astropy_frame):
    where = "mag < 21.5 AND dec > -30"
    ddf = tfd.read_table(str(catalogs), where=where)
    got = ddf.groupby("band").agg({"ra": "mean", "mag": "sum", "id": "count", "flag": "sum"}).compute()
    ref = astropy_frame[(astropy_frame.mag < np.float32(21.5)) & (astropy_frame.dec > -30)]
    want = ref.groupby("band").agg({"ra": "mean", "mag": "sum", "id": "count", "flag": "sum"})
    got = got.sort_index()
    assert list(got.index) == list(want.index)
    np.testing.assert_allclose(got["ra"].to_numpy(), want["ra"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(got["mag"].to_numpy(np.float64), want["mag"].to_numpy(np.float64), rtol=1e-5)
    assert got["id"].tolist() == want["id"].tolist()
    assert got["flag"].astype("int64").tolist() == want["flag"].astype("int64").tolist()


def _install_decode_counter():
    from torchfits.tables.source import TableSource

    if getattr(TableSource, "_counted", None) is None:
        original = TableSource.decode
        seen: list = []

        def counting(self, *, columns, **kwargs):
            seen.append(tuple(sorted(columns)) if columns is not None else ("<all>",))
            return original(self, columns=columns, **kwargs)

        TableSource._counted = (original, seen)
        TableSource.decode = counting
    TableSource._counted[1].clear()
    return True


def _collect_decode_counter():
    from torchfits.tables.source import TableSource

    original, seen = TableSource._counted
    TableSource.decode = original
    del TableSource._counted
    return list(seen)


def test_projection_decodes_only_requested_columns_in_workers(client, catalogs, astropy_frame):
    client.run(_install_decode_counter)
    try:
        ddf = tfd.read_table(str(catalogs), where="mag < 20")
        got = ddf[["ra", "dec"]].sum().compute()
    finally:
        seen = client.run(_collect_decode_counter)
    decoded = {c for calls in seen.values() for cols in calls for c in cols}
    assert sum(len(calls) for calls in seen.values()) >= NFILES  # the workers did decode
    # the where-term ran in the predicate kernel on raw rows: only ra and dec were decoded
    assert decoded == {"ra", "dec"}
    ref = astropy_frame[astropy_frame.mag < np.float32(20)]
    np.testing.assert_allclose([got["ra"], got["dec"]], [ref.ra.sum(), ref.dec.sum()], rtol=1e-12)


def test_statistics_skip_files_and_give_divisions(client, catalogs, astropy_frame):
    lo, hi = 3 * NROWS + 10, 5 * NROWS - 10
    ddf = tfd.read_table(str(catalogs), where=f"id >= {lo} AND id < {hi}", split_row_groups=False)
    assert ddf.npartitions == 2  # the other ten files never become tasks
    assert len(ddf) == hi - lo
    gathered = tfd.read_table(str(catalogs), where=f"id >= {lo} AND id < {hi}")
    assert gathered.npartitions == 1 and len(gathered) == hi - lo
    indexed = tfd.read_table(str(catalogs), index="id", split_row_groups=1000)
    assert indexed.known_divisions
    assert indexed.npartitions == NFILES * NROWS // 1000
    assert indexed.divisions[0] == 0 and indexed.divisions[-1] == NFILES * NROWS - 1
    part = indexed.loc[lo:hi].compute()
    ref = astropy_frame.set_index("id").loc[lo:hi]
    np.testing.assert_array_equal(part.index.to_numpy(), ref.index.to_numpy())
    np.testing.assert_array_equal(part["ra"].to_numpy(), ref["ra"].to_numpy())
    # no sidecar: unknown divisions
    assert not tfd.read_table(str(catalogs), index="id", sidecar=False).known_divisions


def test_small_files_gather_into_partitions_keeping_divisions(client, catalogs, astropy_frame, monkeypatch):
    import torchfits.tables.dask_frame as dask_frame

    # files of 4000 rows x ~40 bytes: a 400 kB target gathers two or three files per partition
    monkeypatch.setattr(dask_frame, "TARGET_PARTITION_BYTES", 2 * NROWS * 45)
    ddf = tfd.read_table(str(catalogs), index="id")
    assert 1 < ddf.npartitions < NFILES
    assert ddf.known_divisions and ddf.divisions[0] == 0 and ddf.divisions[-1] == NFILES * NROWS - 1
    got = ddf.compute()
    ref = astropy_frame.set_index("id").sort_index()
    np.testing.assert_array_equal(got.index.to_numpy(), ref.index.to_numpy())
    np.testing.assert_array_equal(got["mag"].to_numpy(), ref["mag"].to_numpy())
    lo, hi = NROWS + 5, 3 * NROWS + 5
    part = ddf.loc[lo:hi].compute()
    np.testing.assert_array_equal(part.index.to_numpy(), np.arange(lo, hi + 1))


def test_fragment_tokens_name_file_version_and_rows(tmp_path):
    from dask.base import tokenize

    path = tmp_path / "t.fits"
    torchfits.write(str(path), {"a": np.arange(100, dtype=np.int64)})
    frag = next(torchfits.dataset(str(path)).get_fragments())
    again = next(torchfits.dataset(str(path)).get_fragments())
    assert tokenize(frag) == tokenize(again)
    halves = frag.split(50)
    assert tokenize(halves[0]) != tokenize(halves[1]) != tokenize(frag)
    torchfits.write(str(path), {"a": np.arange(100, 200, dtype=np.int64)}, overwrite=True)
    os.utime(path, ns=(1, 1))  # another version, whatever the clock's resolution
    rewritten = next(torchfits.dataset(str(path)).get_fragments())
    assert tokenize(rewritten) != tokenize(frag)


def test_dataset_to_dask_dataframe(client, catalogs, astropy_frame):
    ds = torchfits.dataset(str(catalogs), add_path_column=True).filter("band == 'g'")
    ddf = ds.to_dask_dataframe(columns=["mag", "filename"])
    assert list(ddf.columns) == ["mag", "filename"]
    counts = ddf.groupby("filename").mag.count().compute()
    ref = astropy_frame[astropy_frame.band == "g"]
    assert int(counts.sum()) == len(ref)
    assert len(counts) == NFILES


def _write_images(d, n, shape, fits_mod):
    rng = np.random.default_rng(7)
    arrays = []
    for k in range(n):
        a = rng.integers(0, 60000, shape).astype(np.uint16)  # written as int16 + BZERO 32768
        arrays.append(a)
        fits_mod.PrimaryHDU(a).writeto(str(d / f"img{k}.fits"))
    return arrays


def test_image_stack_sum_and_blocks(client, tmp_path):
    arrays = _write_images(tmp_path, 6, (64, 80), fits)
    stack = tfd.read_images(str(tmp_path))
    assert stack.shape == (6, 64, 80) and stack.dtype == np.uint16
    assert int(stack.astype(np.int64).sum().compute()) == int(sum(a.astype(np.int64).sum() for a in arrays))
    ref = np.stack(arrays)
    small = tfd.read_images([str(tmp_path / f"img{k}.fits") for k in range(6)], chunks=(2, 32, 40))
    assert small.numblocks == (3, 2, 2)
    np.testing.assert_array_equal(small.blocks[1, 1, 0].compute(), ref[2:4, 32:64, 0:40])
    np.testing.assert_array_equal(small[:, 5, ::7].compute(), ref[:, 5, ::7])


def test_large_image_blocks_decode_their_region(client, tmp_path):
    rng = np.random.default_rng(3)
    img = rng.normal(size=(900, 700)).astype(np.float32)
    fits.PrimaryHDU(img).writeto(str(tmp_path / "big.fits"))
    arr = tfd.read_images(str(tmp_path / "big.fits"), chunks=(256, 300))
    assert arr.chunks == ((256, 256, 256, 132), (300, 300, 100))
    np.testing.assert_array_equal(arr.blocks[1, 1].compute(), img[256:512, 300:600])
    np.testing.assert_allclose(float(arr.sum().compute()), float(img.astype(np.float64).sum()), rtol=1e-6)
    auto = tfd.read_images(str(tmp_path / "big.fits"))
    assert auto.chunks[1] == (700,)  # whole rows: every block is one contiguous byte range


def test_compressed_image_blocks_are_whole_tiles(client, tmp_path):
    rng = np.random.default_rng(5)
    img = rng.integers(-2000, 2000, (500, 400)).astype(np.int32)
    hdu = fits.CompImageHDU(img, compression_type="RICE_1", tile_shape=(50, 40))
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(str(tmp_path / "c.fits"))
    import dask

    with dask.config.set({"array.chunk-size": "64KiB"}):
        arr = tfd.read_images(str(tmp_path / "c.fits"), hdu=1)
    assert arr.dtype == np.int32
    assert all(c % 50 == 0 for c in arr.chunks[0][:-1]) and all(c % 40 == 0 for c in arr.chunks[1][:-1])
    assert arr.npartitions > 1
    np.testing.assert_array_equal(arr.compute(), img)
    np.testing.assert_array_equal(arr[123:321, 17:390].compute(), img[123:321, 17:390])


def test_read_images_refuses_mixed_shapes(tmp_path):
    fits.PrimaryHDU(np.zeros((4, 5), np.float32)).writeto(str(tmp_path / "a.fits"))
    fits.PrimaryHDU(np.zeros((4, 6), np.float32)).writeto(str(tmp_path / "b.fits"))
    with pytest.raises(ValueError, match="same-shaped"):
        tfd.read_images(str(tmp_path))


def test_images_pickle_small():
    import pickle

    blocks = tfd.ImageBlocks(["/data/a.fits"] * 3, 0, (10, 10), np.float32, stack=True)
    payload = pickle.dumps(blocks)
    assert len(payload) < 400
    back = pickle.loads(payload)
    assert back.shape == (3, 10, 10) and back.dtype == np.float32


def test_to_fits_round_trip_with_sidecar(client, catalogs, astropy_frame, tmp_path):
    out = tmp_path / "out"
    ddf = tfd.read_table(str(catalogs), where="flag >= 1", index="id")
    paths = tfd.to_fits(ddf, str(out))
    assert len(paths) == ddf.npartitions
    assert sorted(os.listdir(out)) == sorted([os.path.basename(p) for p in paths] + [INDEX_NAME])
    back = tfd.read_table(str(out), index="id")
    assert back.known_divisions  # the sidecar written by to_fits knows each file's id range
    got = back.compute()
    ref = astropy_frame[astropy_frame.flag.fillna(-1) >= 1].set_index("id")
    np.testing.assert_array_equal(got.index.to_numpy(), ref.index.to_numpy())
    np.testing.assert_array_equal(got["mag"].to_numpy(), ref["mag"].to_numpy())
    assert got["band"].tolist() == ref["band"].tolist()
    # files are independent FITS tables astropy reads
    with fits.open(paths[0]) as hdul:
        assert "id" in hdul[1].columns.names
    with pytest.raises(FitsFileExistsError, match="overwrite=True"):
        tfd.to_fits(ddf, str(out))
    assert len(tfd.to_fits(ddf, str(out), overwrite=True)) == len(paths)


def test_to_fits_deferred(client, tmp_path):
    df = pd.DataFrame({"a": np.arange(10, dtype=np.int64), "b": np.linspace(0, 1, 10)})
    ddf = dd.from_pandas(df, npartitions=3)
    job = tfd.to_fits(ddf, str(tmp_path / "d"), compute=False, sidecar=False)
    assert not os.path.exists(tmp_path / "d" / "part-00000.fits")
    paths = job.compute()
    assert len(paths) == 3 and not os.path.exists(tmp_path / "d" / INDEX_NAME)
    got = pd.concat([torchfits.scan(p).to_pandas() for p in paths], ignore_index=True)
    pd.testing.assert_frame_equal(got, df)


# -- remote sources: HTTP on 127.0.0.1, read by the worker processes --------------------------------
def _served(root, **kwargs):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    from _http_server import FileServer

    return FileServer(str(root), **kwargs)


def _remote_options(tmp_path, cache=False):
    # the test server is on loopback, which the guard refuses unless allowed; the workers get
    # these options with every task
    opts = {"allow_private_hosts": True, "cache": cache}
    if cache:
        opts["cache_dir"] = str(tmp_path / "remote-cache")
    return opts


def test_remote_table_urls_on_the_cluster(client, catalogs, astropy_frame, tmp_path):
    where = "mag < 21 AND flag >= 0"
    ref = astropy_frame[(astropy_frame.mag < np.float32(21)) & (astropy_frame.flag.fillna(-1) >= 0)]
    want = ref.groupby("band").agg({"ra": "sum", "mag": "count"})
    with _served(catalogs, listing=True) as srv:
        urls = [f"{srv.url}/cat{k:02d}.fits" for k in range(NFILES)]
        ddf = tfd.read_table(urls, columns=["ra", "mag", "band"], where=where,
                             storage_options=_remote_options(tmp_path), split_row_groups=1500)
        assert list(ddf.columns) == ["ra", "mag", "band"]
        assert ddf.npartitions == NFILES * 3  # no sidecar for URLs: plain 1500-row cuts
        srv.reset()  # from here on only the workers read the server
        client.run(_install_decode_counter)
        try:
            got = ddf.groupby("band").agg({"ra": "sum", "mag": "count"}).compute().sort_index()
        finally:
            seen = client.run(_collect_decode_counter)
        assert any(m == "GET" and "Range" in h for m, _, h in srv.requests)  # ranged reads by workers
        decoded = {c for calls in seen.values() for cols in calls for c in cols}
        assert decoded == {"ra", "mag", "band"}  # flag and mag filtered on raw rows, others never
        assert list(got.index) == list(want.index)
        np.testing.assert_allclose(got["ra"].to_numpy(), want["ra"].to_numpy(), rtol=1e-12)
        assert got["mag"].tolist() == want["mag"].tolist()
        # a glob works where the server lists the directory (an HTML index page)
        globbed = tfd.read_table(f"{srv.url}/cat*.fits", columns=["id"], where="id < 10",
                                 storage_options=_remote_options(tmp_path), split_row_groups=False)
        assert globbed.npartitions == NFILES
        assert sorted(globbed.compute()["id"].tolist()) == list(range(10))


def test_remote_glob_without_a_listing_names_the_workaround(catalogs, tmp_path):
    with _served(catalogs) as srv:
        with pytest.raises(FileNotFoundError, match="list of URLs"):
            tfd.read_table(f"{srv.url}/cat*.fits", storage_options=_remote_options(tmp_path))


def test_remote_images_on_the_cluster(client, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    arrays = _write_images(www, 4, (96, 70), fits)
    rng = np.random.default_rng(9)
    big = rng.normal(size=(300, 200)).astype(np.float32)
    fits.PrimaryHDU(big).writeto(str(www / "big.fits"))
    opts = _remote_options(tmp_path, cache=True)  # the workers' block cache, in tmp_path
    with _served(www, listing=True) as srv:
        arr = tfd.read_images(f"{srv.url}/big.fits", chunks=(100, 64), storage_options=opts)
        assert arr.shape == big.shape and arr.dtype == np.float32
        srv.reset()
        np.testing.assert_array_equal(arr.blocks[1, 2].compute(), big[100:200, 128:192])
        assert srv.requests  # the worker fetched the block's rows
        np.testing.assert_allclose(float(arr.sum().compute()), float(big.astype(np.float64).sum()), rtol=1e-6)
        urls = [f"{srv.url}/img{k}.fits" for k in range(4)]
        stack = tfd.read_images(urls, chunks=(2, 48, 70), storage_options=opts)
        ref = np.stack(arrays)
        assert stack.shape == (4, 96, 70) and stack.dtype == np.uint16
        assert int(stack.astype(np.int64).sum().compute()) == int(ref.astype(np.int64).sum())
        np.testing.assert_array_equal(stack[1:3, 40:60, ::3].compute(), ref[1:3, 40:60, ::3])
        globbed = tfd.read_images(f"{srv.url}/img*.fits", storage_options=opts)
        assert globbed.shape == (4, 96, 70)
        np.testing.assert_array_equal(globbed.compute(), ref)


def test_fragments_pickle_small_and_reopen_lazily(catalogs, monkeypatch):
    import pickle

    from torchfits.tables.source import TableSource

    ds = torchfits.dataset(str(catalogs))
    frag = next(iter(ds.get_fragments()))
    assert frag.stats is not None
    part = ds.split(1000)
    small = list(part.get_fragments())[1]
    payload = pickle.dumps(small)
    assert len(payload) < 4000  # path, HDU, rows, schema and one chunk's statistics
    assert len(small.stats.chunks) == 1 or len(payload) < len(pickle.dumps(frag))

    def refuse(*args, **kwargs):
        raise AssertionError("unpickling opened the file")

    monkeypatch.setattr(TableSource, "open", refuse)
    back = pickle.loads(payload)  # a worker unpickles without touching the file
    monkeypatch.undo()
    assert back.row_range == small.row_range and back.hdu_index == 1
    assert back.to_table(columns=["id"]).column("id").to_pylist() == list(range(1000, 2000))


def test_dask_partitions_of_remote_files_keep_their_options(catalogs, tmp_path):
    import pickle

    with _served(catalogs) as srv:
        opts = _remote_options(tmp_path)
        ddf = tfd.read_table([f"{srv.url}/cat00.fits"], storage_options=opts, split_row_groups=1000)
        assert ddf.npartitions == NROWS // 1000
        ds = torchfits.dataset([f"{srv.url}/cat00.fits"], storage_options=opts)
        frag = pickle.loads(pickle.dumps(list(ds.split(1000).get_fragments())[2]))
        assert frag.storage_options == opts
        assert frag.to_table(columns=["id"]).column("id").to_pylist()[0] == 2000


def _decode_threads_probe():
    """Record, in a worker, the decode threads asked for and whether the shared pool is used."""
    from torchfits.fits import threads as pool_module
    from torchfits.tables.source import TableSource

    original, original_pool = TableSource.decode, pool_module.get_pool
    seen: list = []

    def recording(self, *, options, **kwargs):
        seen.append(options.threads)
        return original(self, options=options, **kwargs)

    def pool_used():
        seen.append("pool")
        return original_pool()

    TableSource._threads_probe = (original, original_pool, seen)
    TableSource.decode = recording
    pool_module.get_pool = pool_used
    return True


def _decode_threads_seen():
    from torchfits.fits import threads as pool_module
    from torchfits.tables.source import TableSource

    original, original_pool, seen = TableSource._threads_probe
    TableSource.decode = original
    pool_module.get_pool = original_pool
    del TableSource._threads_probe
    return sorted(set(seen), key=str)


def _use_the_pool():
    from torchfits.fits.threads import run_parallel

    return run_parallel(abs, [1, -2])


def test_tasks_in_workers_decode_on_one_thread_unless_told(client, catalogs):
    from torchfits.tables.dask_frame import task_threads

    assert task_threads(None) is None  # not in a worker: the shared default
    assert client.submit(task_threads, None, pure=False).result() == 1
    assert client.submit(task_threads, 3, pure=False).result() == 3
    # by default the kernels get threads=1 and never touch the shared pool
    for threads, want in ((None, [1]), (2, [2])):
        client.run(_decode_threads_probe)
        try:
            tfd.read_table(str(catalogs), columns=["ra"], where="mag < 22", threads=threads).ra.sum().compute()
        finally:
            seen = client.run(_decode_threads_seen)
        assert sorted({t for v in seen.values() for t in v}, key=str) == want
    client.run(_decode_threads_probe)  # the probe does see the pool when it is used
    client.run(_use_the_pool)
    assert all("pool" in v for v in client.run(_decode_threads_seen).values())
    with pytest.raises(ValueError, match="threads"):
        tfd.read_table(str(catalogs), threads=0)
    with pytest.raises(ValueError, match="threads"):
        tfd.read_images(str(catalogs / "cat00.fits"), hdu=0, threads=0)


def _fail_on_partition_two(df):
    if len(df) and int(df["a"].iloc[0]) == 20:
        raise RuntimeError("partition 2 fails")
    return df


def test_to_fits_failed_partition_leaves_no_partial_file(client, tmp_path):
    df = pd.DataFrame({"a": np.arange(40, dtype=np.int64), "b": np.linspace(0, 1, 40)})
    ddf = dd.from_pandas(df, npartitions=4).map_partitions(_fail_on_partition_two, meta=df.iloc[:0])
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="partition 2 fails"):
        tfd.to_fits(ddf, str(out))
    # The error comes back while another worker may still be writing its partition (Dask does
    # not interrupt running tasks): that write completes or cleans up, and leaves no temporary.
    deadline = time.monotonic() + 30

    def temporaries():
        return [n for n in os.listdir(out) if n.startswith(".") or n.endswith(".tmp")]

    while temporaries() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not temporaries()
    left = sorted(os.listdir(out))
    assert INDEX_NAME not in left  # the sidecar is written only once every file is
    for name in left:  # whatever was written is whole
        with fits.open(out / name) as hdul:
            assert len(hdul[1].data) == 10


def test_to_fits_to_a_url_directory(client, tmp_path):
    df = pd.DataFrame({"a": np.arange(30, dtype=np.int64), "b": np.linspace(0, 1, 30)})
    ddf = dd.from_pandas(df, npartitions=3)
    # file:// is an fsspec URL every worker process can reach: the upload path on the cluster
    url = "file://" + str(tmp_path / "up")
    paths = tfd.to_fits(ddf, url)
    assert paths == [f"{url}/part-{i:05d}.fits" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "up")) == ["_torchfits_index.json"] + [f"part-{i:05d}.fits" for i in range(3)]
    got = pd.concat([torchfits.scan(p).to_pandas() for p in paths], ignore_index=True)
    pd.testing.assert_frame_equal(got, df)
    with pytest.raises(FitsFileExistsError, match="overwrite=True"):
        tfd.to_fits(ddf, url)
    with pytest.raises(ValueError, match="http"):
        tfd.to_fits(ddf, "http://127.0.0.1:9/out")
    # an object store (memory:// lives in this process: Dask's threaded scheduler)
    job = tfd.to_fits(ddf, "memory://to-fits/out", compute=False)
    written = job.compute(scheduler="threads")
    assert len(written) == 3
    back = tfd.read_table(written).compute(scheduler="threads")
    pd.testing.assert_frame_equal(back.reset_index(drop=True), df)


def test_remote_sidecar_skips_objects_and_goes_stale_on_rewrite(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    df = pd.DataFrame({"id": np.arange(60, dtype=np.int64), "v": np.linspace(0, 1, 60)})
    root = "memory://remote-sidecar/out"
    # memory:// lives in this process: Dask's threaded scheduler, no cluster
    written = tfd.to_fits(dd.from_pandas(df, npartitions=3), root, compute=False).compute(scheduler="threads")
    fs = fsspec.filesystem("memory")
    doc = json.loads(fs.cat_file("/remote-sidecar/out/_torchfits_index.json"))
    entry = doc["files"]["part-00001.fits"]
    assert entry["validator"] and "mtime_ns" not in entry and entry["nrows"] == 20

    ds = torchfits.dataset(root + "/")  # the directory's sidecar is found beside the objects
    assert ds.index_path == root + "/_torchfits_index.json"
    few = tfd.read_table(root + "/", where="id >= 25 AND id < 30", split_row_groups=False)
    assert few.npartitions == 1  # the statistics rule out the other two objects
    assert few.compute(scheduler="threads")["id"].tolist() == list(range(25, 30))

    # rewrite one object with other rows: its entry no longer matches, so it is scanned
    other = tmp_path / "other.fits"
    torchfits.write(str(other), pd.DataFrame({"id": np.arange(100, 120, dtype=np.int64),
                                              "v": np.zeros(20)}))
    fs.pipe_file("/remote-sidecar/out/part-00000.fits", other.read_bytes())
    torchfits.clear_file_cache()  # a URL's validator is re-checked at most every 5 s (docs/remote.md)
    late = tfd.read_table(root + "/", where="id >= 100", split_row_groups=False)
    assert late.npartitions == 1
    assert late.compute(scheduler="threads")["id"].tolist() == list(range(100, 120))
    assert sorted(written) == sorted(f"{root}/part-{i:05d}.fits" for i in range(3))


def test_to_fits_on_s3_writes_a_sidecar_of_etags(tmp_path, monkeypatch):
    from _s3_server import moto_s3, s3_filesystem

    with moto_s3(monkeypatch) as so:
        s3_filesystem(so).mkdir("sidecars")
        df = pd.DataFrame({"id": np.arange(90, dtype=np.int64), "mag": np.linspace(14, 26, 90)})
        job = tfd.to_fits(dd.from_pandas(df, npartitions=3), "s3://sidecars/run1", storage_options=so,
                          compute=False)
        job.compute(scheduler="threads")
        doc = json.loads(s3_filesystem(so).cat_file(f"sidecars/run1/{INDEX_NAME}"))
        assert sorted(doc["files"]) == [f"part-{i:05d}.fits" for i in range(3)]
        assert all("etag" in e["validator"] for e in doc["files"].values())
        ddf = tfd.read_table("s3://sidecars/run1/", where="id >= 65", storage_options=so,
                             split_row_groups=False)
        assert ddf.npartitions == 1  # the first two objects are ruled out by their statistics
        assert ddf.compute(scheduler="threads")["id"].tolist() == list(range(65, 90))


def test_build_index_over_urls_with_a_local_or_remote_sidecar(catalogs, tmp_path):
    from torchfits.tables.stats_index import build_index

    opts = _remote_options(tmp_path)
    with _served(catalogs) as srv:
        urls = [f"{srv.url}/cat{k:02d}.fits" for k in range(3)]
        local = build_index(urls, output=str(tmp_path / "idx.json"), chunk_rows=1000, storage_options=opts)
        with open(local, encoding="utf-8") as fh:
            doc = json.load(fh)
        assert set(doc["files"]) == set(urls)  # outside the sidecar's directory: full URLs
        assert all(e["validator"] for e in doc["files"].values())
        lo, hi = NROWS + 10, NROWS + 20  # in the second file only
        ds = torchfits.dataset(urls, index=local, storage_options=opts)
        assert [f.stats is not None for f in ds.get_fragments()] == [True, True, True]
        got = ds.to_table(filter=f"id >= {lo} AND id < {hi}", columns=["id"])
        assert got.column("id").to_pylist() == list(range(lo, hi))
        kept = tfd.read_table(urls, where=f"id >= {lo} AND id < {hi}", sidecar=local,
                              storage_options=opts, split_row_groups=False)
        assert kept.npartitions == 1
        # the sidecar served beside the files was built locally (sizes and mtimes, no
        # validators): found, but never trusted for URLs, so every file is scanned
        beside = torchfits.dataset(urls, storage_options=opts)
        assert beside.index_path == f"{srv.url}/{INDEX_NAME}"
        assert [f.stats for f in beside.get_fragments()] == [None, None, None]
        assert beside.to_table(filter=f"id >= {lo} AND id < {hi}").num_rows == hi - lo
    with pytest.raises(ValueError, match="http"):
        build_index(urls[:1], output="http://127.0.0.1:9/idx.json", storage_options=opts)


def _slow_identity(df):
    time.sleep(0.2)
    return df


def test_zz_killed_worker_is_retried_with_the_same_result(client, catalogs, astropy_frame):
    """Runs last (zz): SIGKILL one worker mid-computation; the nanny restarts it and the
    scheduler reruns the lost tasks elsewhere."""
    ddf = tfd.read_table(str(catalogs), where="mag < 22", split_row_groups=False)
    slow = ddf.map_partitions(_slow_identity, meta=ddf._meta)
    future = client.compute(slow.groupby("band").ra.sum())
    deadline = time.monotonic() + 30
    victim = None
    while time.monotonic() < deadline and victim is None:
        processing = client.processing()
        busy = [w for w, tasks in processing.items() if tasks]
        done = sum(1 for v in client.who_has().values() if v)
        if busy and done >= 2:
            victim = busy[0]
        else:
            time.sleep(0.05)
    if victim is None or future.done():
        pytest.skip("the computation finished before a worker could be killed mid-way")
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    got = future.result(timeout=120).sort_index()
    ref = astropy_frame[astropy_frame.mag < np.float32(22)].groupby("band").ra.sum()
    np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=1e-12)
    assert list(got.index) == list(ref.index)

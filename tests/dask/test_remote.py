"""torchfits.dask over URLs: HTTP on 127.0.0.1 read by the worker processes, fragments that
pickle small and reopen lazily with their storage_options, sidecars for URL catalogs.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
import torchfits.dask as tfd  # noqa: E402
from _daskhelpers import (  # noqa: E402
    NFILES,
    NROWS,
    collect_decode_counter,
    install_decode_counter,
    remote_options,
    served,
    write_images,
)
from torchfits.tables.stats_index import INDEX_NAME  # noqa: E402


def test_remote_table_urls_on_the_cluster(client, catalogs, astropy_frame, tmp_path):
    where = "mag < 21 AND flag >= 0"
    ref = astropy_frame[(astropy_frame.mag < np.float32(21)) & (astropy_frame.flag.fillna(-1) >= 0)]
    want = ref.groupby("band").agg({"ra": "sum", "mag": "count"})
    with served(catalogs, listing=True) as srv:
        urls = [f"{srv.url}/cat{k:02d}.fits" for k in range(NFILES)]
        ddf = tfd.read_table(urls, columns=["ra", "mag", "band"], where=where,
                             storage_options=remote_options(tmp_path), split_row_groups=1500)
        assert list(ddf.columns) == ["ra", "mag", "band"]
        assert ddf.npartitions == NFILES * 3  # no sidecar for URLs: plain 1500-row cuts
        srv.reset()  # from here on only the workers read the server
        client.run(install_decode_counter)
        try:
            got = ddf.groupby("band").agg({"ra": "sum", "mag": "count"}).compute().sort_index()
        finally:
            seen = client.run(collect_decode_counter)
        assert any(m == "GET" and "Range" in h for m, _, h in srv.requests)  # ranged reads by workers
        decoded = {c for calls in seen.values() for cols in calls for c in cols}
        assert decoded == {"ra", "mag", "band"}  # flag and mag filtered on raw rows, others never
        assert list(got.index) == list(want.index)
        np.testing.assert_allclose(got["ra"].to_numpy(), want["ra"].to_numpy(), rtol=1e-12)
        assert got["mag"].tolist() == want["mag"].tolist()
        # a glob works where the server lists the directory (an HTML index page)
        globbed = tfd.read_table(f"{srv.url}/cat*.fits", columns=["id"], where="id < 10",
                                 storage_options=remote_options(tmp_path), split_row_groups=False)
        assert globbed.npartitions == NFILES
        assert sorted(globbed.compute()["id"].tolist()) == list(range(10))


def test_remote_glob_without_a_listing_names_the_workaround(catalogs, tmp_path):
    with served(catalogs) as srv:
        with pytest.raises(FileNotFoundError, match="list of URLs"):
            tfd.read_table(f"{srv.url}/cat*.fits", storage_options=remote_options(tmp_path))


def test_remote_images_on_the_cluster(client, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    arrays = write_images(www, 4, (96, 70), fits)
    rng = np.random.default_rng(9)
    big = rng.normal(size=(300, 200)).astype(np.float32)
    fits.PrimaryHDU(big).writeto(str(www / "big.fits"))
    opts = remote_options(tmp_path, cache=True)  # the workers' block cache, in tmp_path
    with served(www, listing=True) as srv:
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

    with served(catalogs) as srv:
        opts = remote_options(tmp_path)
        ddf = tfd.read_table([f"{srv.url}/cat00.fits"], storage_options=opts, split_row_groups=1000)
        assert ddf.npartitions == NROWS // 1000
        ds = torchfits.dataset([f"{srv.url}/cat00.fits"], storage_options=opts)
        frag = pickle.loads(pickle.dumps(list(ds.split(1000).get_fragments())[2]))
        assert frag.storage_options == opts
        assert frag.to_table(columns=["id"]).column("id").to_pylist()[0] == 2000


def test_build_index_over_urls_with_a_local_or_remote_sidecar(catalogs, tmp_path):
    from torchfits.tables.stats_index import build_index

    opts = remote_options(tmp_path)
    with served(catalogs) as srv:
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

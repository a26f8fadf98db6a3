"""torchfits.dask.to_fits: one FITS file per partition, written by its worker, plus a sidecar.

Round trips through read_table (divisions from the written sidecar), deferred writes, a failed
partition leaving no partial file, URL directories (file://, memory://, S3 on moto) and their
sidecars of ETags and validators.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
import torchfits.dask as tfd  # noqa: E402
from torchfits.errors import FitsFileExistsError  # noqa: E402
from torchfits.tables.stats_index import INDEX_NAME  # noqa: E402


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
    assert sorted(os.listdir(tmp_path / "up")) == (["_torchfits_index.json"]
                                                   + [f"part-{i:05d}.fits" for i in range(3)])
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

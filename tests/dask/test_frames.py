"""torchfits.dask.read_table and FitsDataset.to_dask_dataframe: FITS tables as Dask DataFrames.

Meta and dtypes from the schema, projection and where pushed into every partition, partitions
cut on statistics chunks and gathered when small, divisions from the sidecar. Oracle: astropy
reads of the same catalogs (tests/dask/conftest.py), pandas for the aggregations; the cluster
tests run on the folder's LocalCluster.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
import torchfits.dask as tfd  # noqa: E402
from _daskhelpers import NFILES, NROWS, collect_decode_counter, install_decode_counter  # noqa: E402
from torchfits.errors import ColumnNotFoundError  # noqa: E402

# -- building the graph ---------------------------------------------------------------------------

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


def test_split_row_groups_and_stats_chunks(catalogs):
    ddf = tfd.read_table(str(catalogs), split_row_groups=1500)
    # cuts fall on the sidecar's 1000-row chunks: 2000 + 2000 rows per file
    assert ddf.npartitions == 2 * NFILES
    whole = tfd.read_table(str(catalogs), split_row_groups=False)
    assert whole.npartitions == NFILES
    assert len(ddf) == NFILES * NROWS


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
        assert ddf.dtypes[name] == object and got[name].dtype == object  # noqa: E721, (name, ddf.dtypes[name])
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


# -- on the cluster -------------------------------------------------------------------------------

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


def test_projection_decodes_only_requested_columns_in_workers(client, catalogs, astropy_frame):
    client.run(install_decode_counter)
    try:
        ddf = tfd.read_table(str(catalogs), where="mag < 20")
        got = ddf[["ra", "dec"]].sum().compute()
    finally:
        seen = client.run(collect_decode_counter)
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
    import torchfits.dask.partitions as partitions

    # files of 4000 rows x ~40 bytes: a 400 kB target gathers two or three files per partition
    monkeypatch.setattr(partitions, "TARGET_PARTITION_BYTES", 2 * NROWS * 45)
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


def test_dataset_to_dask_dataframe(client, catalogs, astropy_frame):
    ds = torchfits.dataset(str(catalogs), add_path_column=True).filter("band == 'g'")
    ddf = ds.to_dask_dataframe(columns=["mag", "filename"])
    assert list(ddf.columns) == ["mag", "filename"]
    counts = ddf.groupby("filename").mag.count().compute()
    ref = astropy_frame[astropy_frame.band == "g"]
    assert int(counts.sum()) == len(ref)
    assert len(counts) == NFILES

"""torchfits.hats: FITS tables → HATS catalogs that hats and lsdb open, with the rows of the FITS
input (astropy as oracle) and the partitions of hats-import's own FITS pipeline; the hats-import
reader plug-in inside that pipeline."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cdshealpix")
hats = pytest.importorskip("hats")
pq = pytest.importorskip("pyarrow.parquet")
from astropy.io import fits  # noqa: E402
from astropy.table import Table  # noqa: E402
from hats.io.skymap import read_skymap  # noqa: E402

import torchfits.hats as th  # noqa: E402
from torchfits.errors import FitsFileExistsError  # noqa: E402
from torchfits.hats.partitioning import choose_partitions, spatial_index  # noqa: E402

THRESHOLD = 300
ORDER = 6
# lsdb's own pandas calls (not ours) trip pandas' inplace deprecation
LSDB_WARNINGS = pytest.mark.filterwarnings("ignore:The inplace keyword")
COLUMNS = ["_healpix_29", "id", "ra", "dec", "mag", "count", "name", "good"]


def _catalog(first: int, n: int, rng: np.random.Generator) -> Table:
    ra = rng.uniform(0.0, 360.0, n)
    dec = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    # a cluster (several partitions of higher order), the poles, both sides of RA = 0
    ra[: n // 3] = rng.normal(45.0, 0.5, n // 3) % 360.0
    dec[: n // 3] = rng.normal(20.0, 0.5, n // 3)
    ra[-6:] = [0.0, 359.9999999, 360.0 - 1e-12, 12.0, 200.0, 0.0]
    dec[-6:] = [0.0, 0.0, -45.0, 90.0, -90.0, 89.9999]
    count = rng.integers(-5, 1000, n).astype(np.int32)
    mag = rng.normal(20.0, 1.0, n).astype(np.float32)
    mag[::17] = np.nan
    return Table({"id": np.arange(first, first + n, dtype=np.int64), "ra": ra, "dec": dec,
                  "mag": mag, "count": count,
                  "name": np.array([f"src{first + i}" for i in range(n)]), "good": count % 3 == 0},
                 masked=False)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Three FITS tables (int, float, string and bool columns; TNULL nulls and NaNs; the
    poles; RA both sides of 0) and the rows astropy reads from them."""
    folder = tmp_path_factory.mktemp("hats_in")
    rng = np.random.default_rng(26)
    paths, tables = [], []
    for k, (first, n) in enumerate(((0, 900), (900, 700), (1600, 500))):
        t = _catalog(first, n, rng)
        path = folder / f"cat_{k}.fits"
        hdu = fits.BinTableHDU(t)
        hdu.header["TNULL5"] = -5  # "count": -5 means null
        hdu.writeto(path)
        paths.append(str(path))
        tables.append(Table.read(path, character_as_bytes=False))
    return paths, tables


@pytest.fixture(scope="module")
def catalog(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("hats_out") / "cat"
    th.write(inputs[0], out, pixel_threshold=THRESHOLD, highest_order=ORDER)
    return out


def _oracle(tables) -> dict[str, np.ndarray]:
    """Every input row (astropy), sorted by id: ids, the masked values, and _healpix_29."""
    rows = {c: np.ma.concatenate([np.ma.asarray(t[c]) for t in tables]) for c in tables[0].colnames}
    order = np.argsort(rows["id"])
    rows = {c: v[order] for c, v in rows.items()}
    rows["_healpix_29"] = spatial_index(np.asarray(rows["ra"]), np.asarray(rows["dec"]))
    return rows


def _frame_rows(frame) -> dict[str, np.ndarray]:
    frame = frame.reset_index() if frame.index.name == "_healpix_29" else frame
    frame = frame.sort_values("id").reset_index(drop=True)
    return {c: frame[c].to_numpy() for c in frame.columns}


def _check_rows(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert len(got["id"]) == len(want["id"])
    np.testing.assert_array_equal(got["id"].astype(np.int64), want["id"])
    np.testing.assert_array_equal(got["_healpix_29"].astype(np.int64), want["_healpix_29"])
    for c in ("ra", "dec"):
        np.testing.assert_array_equal(got[c].astype(np.float64), np.asarray(want[c]))
    np.testing.assert_array_equal(np.asarray(got["mag"], dtype=np.float32),
                                  np.asarray(want["mag"], dtype=np.float32))
    count = want["count"]
    null = np.ma.getmaskarray(count)
    assert null.any()
    got_count = got["count"]
    assert [v is None or v is np.nan or v != v for v in got_count[null]] == [True] * int(null.sum())
    np.testing.assert_array_equal(np.asarray(got_count[~null], dtype=np.int64),
                                  np.asarray(count[~null], dtype=np.int64))
    assert list(got["name"]) == list(want["name"])
    np.testing.assert_array_equal(np.asarray(got["good"], dtype=bool), np.asarray(want["good"]))


def test_layout_and_properties(catalog, inputs):
    names = sorted(os.listdir(catalog))
    assert names == ["dataset", "hats.properties", "partition_info.csv", "point_map.fits",
                     "properties", "skymap.fits"]
    assert {"_common_metadata", "_metadata"} <= set(os.listdir(catalog / "dataset"))
    props = dict(line.split("=", 1) for line in (catalog / "hats.properties").read_text().splitlines()
                 if "=" in line)
    assert props["obs_collection"] == "cat"
    assert props["dataproduct_type"] == "object"
    assert int(props["hats_nrows"]) == 2100
    assert (props["hats_col_ra"], props["hats_col_dec"]) == ("ra", "dec")
    assert (props["hats_col_healpix"], props["hats_col_healpix_order"]) == ("_healpix_29", "29")
    assert int(props["hats_max_rows"]) == THRESHOLD
    assert int(props["hats_skymap_order"]) == ORDER
    assert (catalog / "properties").read_text() == (catalog / "hats.properties").read_text()
    from hats.io.validation import is_valid_catalog

    assert is_valid_catalog(str(catalog), strict=True)


def test_hats_reads_it(catalog, inputs):
    cat = hats.read_hats(catalog)
    pixels = cat.get_healpix_pixels()
    assert len(pixels) > 4 and len({p.order for p in pixels}) > 1  # adaptive orders
    assert cat.catalog_info.total_rows == 2100
    assert cat.schema.names == COLUMNS
    # every partition under the threshold, sorted by _healpix_29, inside its pixel
    total = 0
    for p in pixels:
        path = catalog / "dataset" / f"Norder={p.order}" / f"Dir={p.pixel // 10000 * 10000}" \
            / f"Npix={p.pixel}.parquet"
        index = pq.read_table(path, columns=["_healpix_29"])["_healpix_29"].to_numpy()
        assert 0 < len(index) <= THRESHOLD
        assert (np.diff(index) >= 0).all()
        assert ((index >> (2 * (29 - p.order))) == p.pixel).all()
        total += len(index)
    assert total == 2100
    skymap = read_skymap(cat, ORDER)
    assert skymap.sum() == 2100 and len(skymap) == 12 * 4 ** ORDER
    assert cat.moc is not None


@LSDB_WARNINGS
def test_lsdb_reads_the_fits_rows(catalog, inputs):
    lsdb = pytest.importorskip("lsdb")
    frame = lsdb.open_catalog(catalog).compute()
    _check_rows(_frame_rows(frame), _oracle(inputs[1]))


def test_rows_equal_the_fits_input(catalog, inputs):
    table = pq.read_table(catalog / "dataset", columns=COLUMNS)
    got = {c: np.asarray(table[c].to_pylist(), dtype=object) for c in COLUMNS}
    order = np.argsort(got["id"].astype(np.int64))
    _check_rows({c: v[order] for c, v in got.items()}, _oracle(inputs[1]))


def _hats_import(paths, out, reader):
    """hats-import's own pipeline on an in-process Dask client."""
    pytest.importorskip("hats_import")
    distributed = pytest.importorskip("distributed")
    from hats_import.catalog.arguments import ImportArguments
    from hats_import.pipeline import pipeline_with_client

    args = ImportArguments(output_artifact_name="cat", input_file_list=paths, file_reader=reader,
                           output_path=str(out), pixel_threshold=THRESHOLD,
                           highest_healpix_order=ORDER, progress_bar=False, resume=False,
                           tmp_dir=str(out / "tmp"))
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address="127.0.0.1:0") as client:
        pipeline_with_client(args, client)
    return out / "cat"


def _partitions_and_index(catalog) -> tuple[str, np.ndarray, np.ndarray]:
    table = pq.read_table(catalog / "dataset", columns=["_healpix_29", "id"]).sort_by("id")
    return ((catalog / "partition_info.csv").read_text(), table["id"].to_numpy(),
            table["_healpix_29"].to_numpy())


@pytest.fixture(scope="module")
def hats_import_fits(inputs, tmp_path_factory):
    return _hats_import(inputs[0], tmp_path_factory.mktemp("hats_import_fits"), "fits")


def test_partitions_equal_hats_import(catalog, hats_import_fits):
    info, ids, index = _partitions_and_index(catalog)
    want_info, want_ids, want_index = _partitions_and_index(hats_import_fits)
    assert info == want_info
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(index, want_index)
    ours, theirs = hats.read_hats(catalog), hats.read_hats(hats_import_fits)
    assert ours.schema == theirs.schema
    assert ours.catalog_info.hats_order == theirs.catalog_info.hats_order
    assert ours.catalog_info.moc_sky_fraction == theirs.catalog_info.moc_sky_fraction
    np.testing.assert_array_equal(read_skymap(ours, ORDER), read_skymap(theirs, ORDER))


def test_reader_plug_in_in_the_hats_import_pipeline(inputs, hats_import_fits, tmp_path):
    reader = th.hats_import_reader(chunksize=400)
    from hats_import.catalog.file_readers import InputReader

    assert isinstance(reader, InputReader)
    assert pickle.loads(pickle.dumps(reader)).chunksize == 400
    out = _hats_import(inputs[0], tmp_path, reader)
    info, ids, index = _partitions_and_index(out)
    want_info, want_ids, want_index = _partitions_and_index(hats_import_fits)
    assert info == want_info
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(index, want_index)
    table = pq.read_table(out / "dataset", columns=COLUMNS).sort_by("id")
    got = {c: np.asarray(table[c].to_pylist(), dtype=object) for c in COLUMNS}
    want = _oracle(inputs[1])
    np.testing.assert_array_equal(got["ra"].astype(np.float64), np.asarray(want["ra"]))
    assert list(got["name"]) == list(want["name"])


def test_reader_chunks_and_columns(inputs):
    reader = th.hats_import_reader(chunksize=250, columns=["id", "ra", "dec"])
    chunks = list(reader.read(inputs[0][0]))
    assert [len(c) for c in chunks] == [250, 250, 250, 150]
    assert chunks[0].column_names == ["id", "ra", "dec"]
    assert chunks[0].schema.metadata is None
    only = list(reader.read(inputs[0][1], read_columns=["dec"]))
    assert only[0].column_names == ["dec"]
    with pytest.raises(FileNotFoundError):
        list(reader.read(os.path.join(os.path.dirname(inputs[0][0]), "missing.fits")))
    with pytest.raises(ValueError, match="chunksize"):
        th.hats_import_reader(chunksize=0)


def test_import_stays_light():
    code = ("import sys, torchfits.hats; "
            "print(sorted(m for m in ('hats_import', 'hats', 'lsdb', 'cdshealpix', 'pyarrow') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_columns_projection_and_name(inputs, tmp_path):
    out = th.write(inputs[0][:2], tmp_path / "small", columns=["id", "name"], catalog_name="mine",
                   pixel_threshold=THRESHOLD, highest_order=ORDER)
    assert out == str(tmp_path / "small")
    cat = hats.read_hats(out)
    assert cat.schema.names == ["_healpix_29", "id", "name", "ra", "dec"]
    assert cat.catalog_name == "mine"
    assert cat.catalog_info.total_rows == 1600


def test_refuses_a_non_empty_out_dir_and_overwrites(inputs, tmp_path):
    out = tmp_path / "cat"
    out.mkdir()
    th.write(inputs[0][2], out, pixel_threshold=THRESHOLD, highest_order=ORDER)  # empty: fine
    with pytest.raises(FitsFileExistsError, match="overwrite=True"):
        th.write(inputs[0][2], out, pixel_threshold=THRESHOLD, highest_order=ORDER)
    th.write(inputs[0][1], out, pixel_threshold=THRESHOLD, highest_order=ORDER, overwrite=True)
    assert hats.read_hats(out).catalog_info.total_rows == 700
    assert sorted(p for p in os.listdir(tmp_path)) == ["cat"]  # no staging left behind


def test_failures_leave_nothing_behind(inputs, tmp_path):
    with pytest.raises(ValueError, match="more than pixel_threshold=10"):
        th.write(inputs[0], tmp_path / "x", pixel_threshold=10, highest_order=2)
    bad = tmp_path / "nan.fits"
    Table({"ra": [1.0, np.nan], "dec": [0.0, 1.0]}).write(bad)
    with pytest.raises(ValueError, match="NaN or infinite position"):
        th.write(str(bad), tmp_path / "y")
    worse = tmp_path / "dec.fits"
    Table({"ra": [1.0, 2.0], "dec": [0.0, 91.0]}).write(worse)
    with pytest.raises(ValueError, match="outside"):
        th.write(str(worse), tmp_path / "z")
    with pytest.raises(ValueError, match="no position column 'RA_X'"):
        th.write(inputs[0][0], tmp_path / "w", ra="RA_X")
    assert sorted(os.listdir(tmp_path)) == ["dec.fits", "nan.fits"]


@pytest.mark.parametrize("kwargs, match", [
    ({"highest_order": 20}, "highest_order"), ({"lowest_order": 7, "highest_order": 6}, "lowest_order"),
    ({"pixel_threshold": 0}, "pixel_threshold"), ({"catalog_name": "a\nb"}, "catalog_name"),
])
def test_argument_checks(inputs, tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        th.write(inputs[0], tmp_path / "x", **kwargs)


def test_partition_rule_equals_hats():
    """The threshold rule against hats' own alignment on random sparse and clustered maps."""
    from hats.pixel_math.partition_stats import generate_alignment

    rng = np.random.default_rng(5)
    for trial in range(30):
        high = int(rng.integers(1, 5))
        low = int(rng.integers(0, high + 1))
        npix = 12 * 4 ** high
        hist = np.zeros(npix, dtype=np.int64)
        chosen = rng.choice(npix, size=int(rng.integers(1, npix)), replace=False)
        if trial % 2:
            chosen = chosen[: max(1, chosen.size // 10)]
        hist[chosen] = rng.integers(1, 50, chosen.size)
        threshold = int(rng.integers(hist.max(), hist.max() * 20 + 1))
        alignment = generate_alignment(hist, highest_order=high, lowest_order=low,
                                       threshold=threshold, drop_empty_siblings=True,
                                       use_lower_order=True)
        want = sorted({(int(a[0]), int(a[1]), int(a[2])) for a in alignment
                       if a is not None and a[2] > 0})
        pixels = np.flatnonzero(hist)
        got = choose_partitions(pixels, hist[pixels], highest_order=high, lowest_order=low,
                                threshold=threshold)
        assert sorted(tuple(p) for p in got) == want
    # one order for all: every non-empty pixel, the threshold aside (hats-import's constant order)
    got = choose_partitions(np.array([3, 40]), np.array([500, 2]), highest_order=2, lowest_order=2,
                            threshold=10)
    assert [tuple(p) for p in got] == [(2, 3, 500), (2, 40, 2)]


def test_spatial_index_equals_hats():
    from hats.pixel_math.spatial_index import compute_spatial_index

    rng = np.random.default_rng(3)
    ra = np.concatenate([rng.uniform(-720, 720, 5000), [0.0, 360.0, -0.0, 359.999999999999]])
    dec = np.concatenate([np.degrees(np.arcsin(rng.uniform(-1, 1, 5000))), [90.0, -90.0, 0.0, 0.0]])
    np.testing.assert_array_equal(spatial_index(ra, dec), compute_spatial_index(ra, dec))

"""Table writes at the edges: what a read hands out (Arrow with its FITS field metadata, from
binary or ASCII tables) writes back to a file astropy and fitsio read equal; nulls of every
kind survive; astropy ``QTable`` masks, ``Time`` columns and pandas datetimes keep their
meaning.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits import table as tf_table  # noqa: E402

ASTROPY_DATA = Path(fits.__file__).parent / "tests" / "data"


def _astropy_rows(path, hdu=1):
    """(values, mask) per column as astropy's Table reads them (binary tables)."""
    from astropy.table import Table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # units such as 'pixels' that the FITS standard lacks
        t = Table.read(path, hdu=hdu)
    out = {}
    for name in t.colnames:
        col = t[name]
        mask = np.asarray(getattr(col, "mask", np.zeros(len(col), bool)))
        out[name] = (np.asarray(col), np.broadcast_to(mask, np.shape(col)))
    return out


# --------------------------------------------------------------------------------------------
# Item 11: metadata read from ASCII tables does not poison the binary writer (and back)
# --------------------------------------------------------------------------------------------

def test_scan_of_ascii_table_writes_back(tmp_path):
    src = ASTROPY_DATA / "ascii.fits"
    table = torchfits.scan(str(src), hdu=1).to_arrow()
    assert table.schema.field("b").metadata[b"fits_tnull"] == b"*"
    out = tmp_path / "back.fits"
    torchfits.write(str(out), table)
    got = _astropy_rows(out)
    a, amask = got["a"]
    b, bmask = got["b"]
    np.testing.assert_allclose(a[[0, 1, 2, 4]], [10.123, 5.2, 15.61, 345.0], rtol=1e-12)
    assert np.isnan(a[3]) or amask[3]
    assert list(bmask) == [False, False, False, True, False]
    assert list(b[~bmask]) == [37, 23, 17, 345]
    with fits.open(out) as hdul:
        assert hdul[1].columns["a"].unit == "pixels"
        assert hdul[1].columns["b"].unit == "counts"
    # torchfits reads back what it read first (a float null of an ASCII table is NaN in a
    # binary one, which has no other null for floats).
    back = torchfits.scan(str(out), hdu=1).to_arrow()
    assert back.column("b").to_pylist() == table.column("b").to_pylist()
    a_back = back.column("a").to_pylist()
    assert np.isnan(a_back[3]) and a_back[:3] == table.column("a").to_pylist()[:3]


def test_scan_of_wide_ascii_integers_writes_back(tmp_path):
    src = ASTROPY_DATA / "ascii_i4-i20.fits"
    table = torchfits.scan(str(src), hdu=1).to_arrow()
    out = tmp_path / "back.fits"
    torchfits.write(str(out), table)
    with fits.open(src) as ref, fits.open(out) as back:
        for name in ref[1].columns.names:
            np.testing.assert_array_equal(back[1].data[name], ref[1].data[name])
    fitsio = pytest.importorskip("fitsio")
    data = fitsio.read(str(out), ext=1)
    assert data["col3"][2] == -2**63


def test_binary_metadata_does_not_poison_the_ascii_writer(tmp_path):
    src = tmp_path / "bin.fits"
    c = fits.Column(name="n", format="J", null=-99, array=np.array([1, -99, 3], np.int32))
    f = fits.Column(name="x", format="E", array=np.array([1.5, np.nan, 2.5], np.float32))
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([c, f])]).writeto(src)
    table = torchfits.scan(str(src), hdu=1).to_arrow()
    assert table.column("n").null_count == 1
    out = tmp_path / "ascii.fits"
    tf_table.write(str(out), table, table_type="ascii")
    back = torchfits.scan(str(out), hdu=1).to_arrow()
    assert back.column("n").to_pylist() == [1, None, 3]
    assert back.column("x").to_pylist() == [1.5, None, 2.5]  # NaN has no ASCII form: null
    with fits.open(out) as hdul:
        assert hdul[1].header["XTENSION"] == "TABLE"
        assert list(hdul[1].data["n"][[0, 2]]) == [1, 3]
    fitsio = pytest.importorskip("fitsio")
    with fitsio.FITS(str(out)) as f:
        data = f[1].read()
    assert list(data["n"][[0, 2]]) == [1, 3]
    assert list(data["x"][[0, 2]]) == [1.5, 2.5]


def test_ascii_tform_hints_are_not_binary_hints():
    from torchfits.writing.table_plan import ColumnValues, plan_column

    sample = ColumnValues(np.array([1, 2], np.int32), np.array([False, True]))
    plan = plan_column("b", sample, meta={"fits_tform": "I5", "fits_tnull": "*",
                                          "fits_tscal": "2.0", "fits_tzero": "1.0"})
    assert plan.code == "J" and plan.tnull == -2**31 and plan.header_tscal is None
    # A binary TNULL the field cannot store is not used either.
    plan = plan_column("b", ColumnValues(np.array([1, 2], np.int16), np.array([False, True])),
                       meta={"fits_tform": "J", "fits_tnull": "-2147483648"})
    assert plan.code == "I" and plan.tnull == -32768


# --------------------------------------------------------------------------------------------
# Item 12: null elements of variable-length logical lists
# --------------------------------------------------------------------------------------------

def test_null_elements_of_logical_lists_are_written_as_fits_nulls(tmp_path):
    values = [[True, None, False], [None], None, [], [False, True]]
    table = pa.table({"f": pa.array(values, pa.list_(pa.bool_()))})
    out = tmp_path / "vla.fits"
    torchfits.write(str(out), table)
    back = torchfits.scan(str(out), hdu=1).to_arrow()
    # A null row is written as an empty list (a descriptor has no null).
    assert back.column("f").to_pylist() == [[True, None, False], [None], [], [], [False, True]]
    with fits.open(out, logical_as_bytes=True) as hdul:
        raw = [bytes(np.asarray(v).tobytes()) for v in hdul[1].data["f"]]
    assert raw == [b"T\x00F", b"\x00", b"", b"", b"FT"]
    # A slice of a larger array (offsets not starting at 0) keeps its nulls in place.
    sliced = pa.table({"f": pa.array(values, pa.list_(pa.bool_())).slice(1)})
    torchfits.write(str(out), sliced, overwrite=True)
    assert torchfits.scan(str(out), hdu=1).to_arrow().column("f").to_pylist() == \
        [[None], [], [], [False, True]]


def test_null_elements_of_integer_lists_are_refused(tmp_path):
    from torchfits.errors import FitsError

    out = tmp_path / "vla.fits"
    table = pa.table({"n": pa.array([[1, None, 3]], pa.list_(pa.int32()))})
    with pytest.raises(FitsError, match="'n'.*null elements"):
        torchfits.write(str(out), table)
    assert not out.exists()
    floats = pa.table({"x": pa.array([[1.0, None]], pa.list_(pa.float32()))})
    torchfits.write(str(out), floats)
    got = torchfits.scan(str(out), hdu=1).to_arrow().column("x").to_pylist()
    assert got[0][0] == 1.0 and np.isnan(got[0][1])


# --------------------------------------------------------------------------------------------
# Item 4: astropy masks with units, Time columns, datetimes
# --------------------------------------------------------------------------------------------

def _read_native(path):
    from astropy.table import Table

    return Table.read(path, hdu=1, astropy_native=True)


def _same_instants(got, expected):
    """Time columns equal to the nanosecond (the convention stores jd1 + jd2 exactly)."""
    from astropy.time import Time

    assert isinstance(got, Time)
    assert got.scale == expected.scale
    delta = np.abs((got - expected).to_value("s"))
    assert np.nanmax(np.where(np.asarray(getattr(got, "mask", False)), 0, delta)) < 1e-9


def test_masked_quantity_keeps_its_mask(tmp_path):
    u = pytest.importorskip("astropy.units")
    from astropy.table import QTable
    from astropy.utils.masked import Masked

    t = QTable()
    t["flux"] = Masked([1.0, 2.0, 3.0] * u.Jy, mask=[False, True, False])
    t["n"] = Masked(np.array([4, 5, 6]) * u.count, mask=[True, False, False])
    out = tmp_path / "q.fits"
    torchfits.write(str(out), t)
    back = QTable.read(out)
    assert list(back["flux"].mask) == [False, True, False]
    assert back["flux"].unit == u.Jy
    assert back["flux"].unmasked[0].value == 1.0 and back["flux"].unmasked[2].value == 3.0
    assert list(back["n"].mask) == [True, False, False]
    flux = torchfits.scan(str(out), hdu=1).to_arrow().column("flux").to_pylist()
    assert flux[0] == 1.0 and np.isnan(flux[1])
    # The table writer of the 1.x API takes the same route.
    tf_table.write(str(tmp_path / "q2.fits"), t)
    assert list(QTable.read(tmp_path / "q2.fits")["flux"].mask) == [False, True, False]


@pytest.mark.parametrize("writer", ["write", "table.write"])
def test_astropy_time_columns_read_back_as_time(tmp_path, writer):
    from astropy.coordinates import EarthLocation
    from astropy.table import QTable
    from astropy.time import Time

    t = QTable()
    t["tt"] = Time([58000.1, 58001.2, 58002.3], format="mjd", scale="tt")
    t["utc"] = Time(["2020-01-01T00:00:00.123456789", "2016-12-31T23:59:60.5",
                     "2021-06-01T12:00:00"], scale="utc", precision=9)
    masked = Time([59000.0, 59001.0, 59002.0], format="mjd", scale="tdb")
    masked[1] = np.ma.masked
    t["tdb"] = masked
    t["x"] = [1, 2, 3]
    out = tmp_path / "time.fits"
    if writer == "write":
        torchfits.write(str(out), t)
    else:
        tf_table.write(str(out), t)
    back = _read_native(out)
    for name in ("tt", "utc", "tdb"):
        _same_instants(back[name], t[name])
    assert list(back["tdb"].mask) == [False, True, False]
    assert back["utc"][1].isot == "2016-12-31T23:59:60.500"  # the leap second survives
    with fits.open(out) as hdul:
        h = hdul[1].header
        assert (h["TCTYP1"], h["TCUNI1"], h["TUNIT1"], h["TFORM1"]) == ("TT", "d", "d", "2D")
        assert (h["TIMESYS"], h["JDREF"], h["TREFPOS"]) == ("UTC", 0.0, "TOPOCENTER")
    # A location travels as OBSGEO-X/Y/Z and TRPOSn.
    site = EarthLocation.from_geodetic(-17.88, 28.76, 2300)
    t2 = QTable({"t": Time([60000.0, 60000.5], format="mjd", scale="utc", location=site)})
    torchfits.write(str(out), t2, overwrite=True)
    back = _read_native(out)
    _same_instants(back["t"], t2["t"])
    assert back["t"].location is not None
    np.testing.assert_allclose(back["t"].location.x.to_value("m"), site.x.to_value("m"))


def test_pandas_datetimes_read_back_as_time(tmp_path):
    pd = pytest.importorskip("pandas")
    from astropy.time import Time

    stamps = pd.to_datetime(["2020-01-01T00:00:00.123456789", None, "2001-03-04T05:06:07.000000001"],
                            format="ISO8601")
    df = pd.DataFrame({"t": stamps, "x": [1, 2, 3],
                       "tz": pd.to_datetime(["2020-01-01T01:00:00+01:00"] * 3)})
    out = tmp_path / "pd.fits"
    torchfits.write(str(out), df)
    back = _read_native(out)
    assert list(back["t"].mask) == [False, True, False]  # NaT is null
    expected = Time(stamps.to_numpy()[[0, 2]], scale="utc")
    _same_instants(back["t"][[0, 2]], expected)
    assert (back["t"][[0, 2]] - expected).to_value("ns").tolist() == [0.0, 0.0]
    assert list(back["tz"].isot) == ["2020-01-01T00:00:00.000"] * 3  # the instant, in UTC
    assert list(back["x"]) == [1, 2, 3]


@pytest.mark.parametrize("kind", ["numpy", "arrow", "reader", "date32"])
def test_other_datetimes_read_back_as_time(tmp_path, kind):
    from astropy.time import Time

    values = np.array(["2020-01-01T00:00:00.5", "NaT", "1999-02-03T04:05:06.789"], "datetime64[ms]")
    expected = Time(values[[0, 2]], scale="utc")
    if kind == "numpy":
        data = {"t": values}
    elif kind == "date32":
        values = values.astype("datetime64[D]")
        expected = Time(values[[0, 2]], scale="utc")
        data = pa.table({"t": pa.array(values, pa.date32())})
    else:
        data = pa.table({"t": pa.array(values, pa.timestamp("ms"))})
        if kind == "reader":
            data = pa.RecordBatchReader.from_batches(data.schema, data.to_batches())
    out = tmp_path / "t.fits"
    torchfits.write(str(out), data)
    back = _read_native(out)
    assert list(back["t"].mask) == [False, True, False]
    _same_instants(back["t"][[0, 2]], expected)


def test_astropy_table_as_ascii_table(tmp_path):
    from astropy.table import MaskedColumn, Table

    t = Table({"a": [1.5, 2.5, 3.5], "n": MaskedColumn([1, 2, 3], mask=[False, True, False]),
               "s": ["x", "yy", "z"]})
    out = tmp_path / "ascii.fits"
    tf_table.write(str(out), t, table_type="ascii")
    back = torchfits.scan(str(out), hdu=1).to_arrow()
    assert back.column("n").to_pylist() == [1, None, 3]
    assert back.column("a").to_pylist() == [1.5, 2.5, 3.5]
    assert back.column("s").to_pylist() == ["x", "yy", "z"]
    with fits.open(out) as hdul:
        assert hdul[1].header["XTENSION"] == "TABLE"


@pytest.mark.parametrize("cls_name", ["Table", "QTable"])
def test_astropy_real_time_table_round_trip(tmp_path, cls_name):
    """astropy's own Time test file, read by astropy, written by torchfits, read by astropy."""
    import astropy.table

    src = ASTROPY_DATA / "chandra_time.fits"
    cls = getattr(astropy.table, cls_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy warns about the file's TREFPOS
        t = cls.read(src, astropy_native=True)
    out = tmp_path / "chandra.fits"
    torchfits.write(str(out), t)
    back = _read_native(out)
    _same_instants(back["time"], t["time"])
    for name in t.colnames:
        if name == "time":
            continue
        want, got = t[name], back[name]
        np.testing.assert_array_equal(np.asarray(getattr(got, "value", got)),
                                      np.asarray(getattr(want, "value", want)))
        want_mask = np.broadcast_to(np.asarray(getattr(want, "mask", False)), np.shape(want))
        got_mask = np.broadcast_to(np.asarray(getattr(got, "mask", False)), np.shape(got))
        np.testing.assert_array_equal(got_mask, want_mask)


def test_scan_of_time_table_writes_back_with_its_time_meaning(tmp_path):
    """A table read by torchfits keeps, on a write, the keywords that make astropy read its
    time column as Time (MJDREF, TIMESYS, ...) and the column keywords it had, by name."""
    from astropy.table import Table

    src = ASTROPY_DATA / "chandra_time.fits"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = Table.read(src, astropy_native=True)
    for columns in (None, ["x", "energy", "time"]):
        out = tmp_path / "back.fits"
        torchfits.write(str(out), torchfits.scan(str(src), hdu=1, columns=columns).to_arrow(),
                        overwrite=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            back = Table.read(out, astropy_native=True)
        _same_instants(back["time"], expected["time"])
        np.testing.assert_array_equal(np.asarray(back["x"]), np.asarray(expected["x"]))
        with fits.open(src) as ref, fits.open(out) as hdul:
            h, r = hdul[1].header, ref[1].header
            n = hdul[1].columns.names.index("x") + 1
            assert (h[f"TCTYP{n}"], h[f"TCRVL{n}"], h[f"TLMAX{n}"]) == \
                (r["TCTYP11"], r["TCRVL11"], r["TLMAX11"])
            assert (h["MJDREF"], h["TIMESYS"], h["TIMEUNIT"]) == (r["MJDREF"], r["TIMESYS"], r["TIMEUNIT"])


def test_astropy_time_delta_is_written_in_seconds(tmp_path):
    from astropy.table import QTable
    from astropy.time import TimeDelta

    dt = TimeDelta([1.5, 2.25, 0.5], format="jd")
    dt[2] = np.ma.masked
    out = tmp_path / "dt.fits"
    torchfits.write(str(out), QTable({"dt": dt}))
    back = QTable.read(out)
    assert str(back["dt"].unit) == "s"
    np.testing.assert_allclose(back["dt"].unmasked[:2].value, [1.5 * 86400, 2.25 * 86400])
    assert list(back["dt"].mask) == [False, False, True]


def test_masked_elements_of_numpy_lists(tmp_path):
    out = tmp_path / "vla.fits"
    flags = [np.ma.MaskedArray([True, False, True], mask=[False, True, False]), np.array([False])]
    values = [np.ma.MaskedArray([1.0, 2.0], mask=[True, False]), np.array([3.0])]
    torchfits.write(str(out), {"f": flags, "x": values})
    back = torchfits.scan(str(out), hdu=1).to_arrow()
    assert back.column("f").to_pylist() == [[True, None, True], [False]]
    x = back.column("x").to_pylist()
    assert np.isnan(x[0][0]) and x[0][1:] == [2.0] and x[1] == [3.0]


def test_row_edits_keep_null_logical_elements(tmp_path):
    out = tmp_path / "vla.fits"
    torchfits.write(str(out), pa.table({"f": pa.array([[True]], pa.list_(pa.bool_())),
                                        "n": pa.array([1], pa.int32())}))
    tf_table.append_rows(str(out), {"f": [np.ma.MaskedArray([False, True], mask=[True, False])],
                                    "n": [2]})
    assert torchfits.scan(str(out), hdu=1).to_arrow().column("f").to_pylist() == \
        [[True], [None, True]]

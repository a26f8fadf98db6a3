"""Table writes at the edges: what a read hands out (Arrow with its FITS field metadata, from
binary or ASCII tables) writes back to a file astropy and fitsio read equal; nulls of every
kind survive; astropy ``QTable`` masks, ``Time`` columns and pandas datetimes keep their
meaning.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
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

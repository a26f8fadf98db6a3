"""Findings H8-F, H, I, J, K of the differential harness: writers and interop.

Each test states one finding; astropy (and fitsio where it can) is the oracle.
"""
from __future__ import annotations

import numpy as np
import pytest
from astropy.io import fits

import torchfits
from torchfits.errors import UInt64WriteError


# H8-F: uint64 images stay refused (the 1.x contract, and fitsio cannot read back values of
# 2**63 and above from BITPIX=64 + BZERO=2**63), but the refusal names the file, the HDU, the
# dtype and the ways out; nothing is left on disk.
def test_uint64_image_refusal_names_file_hdu_and_way_out(tmp_path):
    path = tmp_path / "u64.fits"
    with pytest.raises(UInt64WriteError) as info:
        torchfits.write(path, [np.zeros(2, np.float32), np.arange(3, dtype=np.uint64)])
    text = str(info.value)
    assert path.name in text and "HDU 1" in text
    assert "uint64" in text and "int64" in text and "float64" in text and "BZERO" in text
    assert isinstance(info.value, ValueError)
    assert list(tmp_path.iterdir()) == []


def test_uint64_refusal_keeps_the_old_file(tmp_path):
    path = tmp_path / "old.fits"
    torchfits.write(path, np.arange(4, dtype=np.int16))
    before = path.read_bytes()
    with pytest.raises(UInt64WriteError, match="old.fits"):
        torchfits.write(path, np.arange(3, dtype=np.uint64), overwrite=True)
    assert path.read_bytes() == before


def test_uint64_dict_column_refusal_names_the_file(tmp_path):
    path = tmp_path / "t.fits"
    with pytest.raises(UInt64WriteError) as info:
        torchfits.write(path, {"u": np.arange(3, dtype=np.uint64)})
    assert path.name in str(info.value) and "'u'" in str(info.value)


# H8-H: to_pandas keeps integer columns with nulls exact, as pandas' nullable integer dtypes.
def _int64_with_nulls(tmp_path):
    path = tmp_path / "k.fits"
    fits.BinTableHDU.from_columns([
        fits.Column(name="K", format="K", null=0,
                    array=np.array([2**63 - 1, 0, 2**53 + 1], np.int64)),
        fits.Column(name="J", format="J", array=np.array([1, 2, 3], np.int32)),
        fits.Column(name="E", format="E", array=np.array([1, np.nan, 3], np.float32)),
    ]).writeto(path)
    return path


def test_scan_to_pandas_keeps_int64_with_nulls_exact(tmp_path):
    pd = pytest.importorskip("pandas")
    df = torchfits.scan(_int64_with_nulls(tmp_path), 1).to_pandas()
    assert str(df["K"].dtype) == "Int64"
    got = df["K"].tolist()
    assert got[0] == 2**63 - 1 and got[1] is pd.NA and got[2] == 2**53 + 1
    # columns without nulls keep their NumPy dtypes; float nulls stay NaN
    assert df["J"].dtype == np.int32 and df["E"].dtype == np.float32
    assert list(df.columns) == ["K", "J", "E"]


def test_every_to_pandas_route_agrees_on_integer_nulls(tmp_path):
    pd = pytest.importorskip("pandas")
    path = _int64_with_nulls(tmp_path)
    frames = {
        "scan": torchfits.scan(path, 1).to_pandas(),
        "table.to_pandas": torchfits.table.to_pandas(str(path), hdu=1),
        "table.to_pandas(stream)": pd.concat(list(torchfits.table.to_pandas(str(path), hdu=1,
                                                                            stream=True))),
    }
    for route, df in frames.items():
        assert str(df["K"].dtype) == "Int64", route
        assert df["K"].tolist()[::2] == [2**63 - 1, 2**53 + 1], route
        assert df["K"].isna().tolist() == [False, True, False], route


def test_to_pandas_honours_a_types_mapper(tmp_path):
    pytest.importorskip("pandas")
    import pyarrow as pa

    df = torchfits.scan(_int64_with_nulls(tmp_path), 1).to_pandas(
        types_mapper={pa.int32(): __import__("pandas").Int32Dtype()}.get)
    assert str(df["J"].dtype) == "Int32" and str(df["K"].dtype) == "Int64"


# H8-I: a zero-row string column from a dict of NumPy arrays is written.
@pytest.mark.parametrize("strings", [np.array([], dtype="U3"), np.array([], dtype="S5"),
                                     np.empty((0, 2), dtype="U4")])
def test_zero_row_string_column_is_written(tmp_path, strings):
    path = tmp_path / "z.fits"
    torchfits.write(path, {"s": strings, "i": np.array([], np.int16)})
    table = torchfits.scan(path, 1).to_arrow()
    assert table.num_rows == 0 and table.column_names == ["s", "i"]
    with fits.open(path) as hdul:
        assert len(hdul[1].data) == 0 and hdul[1].columns.names == ["s", "i"]


# H8-J: a one-element list column keeps its list shape (TDIM), in torchfits and astropy.
def test_one_element_list_column_round_trips(tmp_path):
    import pyarrow as pa
    path = tmp_path / "l1.fits"
    torchfits.write(path, pa.table({"v": pa.array([[1], [2]], pa.list_(pa.int32(), 1)),
                                    "w": pa.array([[1.5], [2.5]], pa.list_(pa.float64(), 1))}))
    got = torchfits.scan(path, 1).to_arrow()
    assert got["v"].to_pylist() == [[1], [2]] and got["w"].to_pylist() == [[1.5], [2.5]]
    header = fits.getheader(path, 1)
    assert header["TFORM1"] == "1J" and header["TDIM1"] == "(1)"
    assert fits.getdata(path, 1)["v"].shape == (2, 1)


def test_one_element_numpy_vector_round_trips(tmp_path):
    path = tmp_path / "n1.fits"
    torchfits.write(path, {"v": np.array([[1], [2]], np.int16)})
    assert torchfits.scan(path, 1).to_arrow()["v"].to_pylist() == [[1], [2]]
    assert fits.getdata(path, 1)["v"].tolist() == [[1], [2]]


# H8-K: table.to_astropy masks what astropy's Table.read masks in vector columns too.
def test_to_astropy_masks_like_table_read_in_vector_columns(tmp_path):
    from astropy.table import Table

    path = tmp_path / "v.fits"
    fits.BinTableHDU.from_columns([
        fits.Column(name="F", format="2E", array=np.array([[np.nan, 1], [2, 3]], np.float32)),
        fits.Column(name="V", format="2J", null=-1, array=np.array([[-1, 1], [2, 3]], np.int32)),
    ]).writeto(path)
    want = Table.read(path)
    got = torchfits.table.to_astropy(str(path), hdu=1)
    for name in ("F", "V"):
        assert np.ma.getmaskarray(got[name]).tolist() == np.ma.getmaskarray(want[name]).tolist(), name
        assert got[name].dtype.kind == want[name].dtype.kind, name
    assert np.ma.getmaskarray(got["F"]).tolist() == [[True, False], [False, False]]
    assert got["V"].filled(0).tolist() == [[0, 1], [2, 3]]

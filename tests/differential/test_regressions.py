"""Findings of the differential harness, kept as explicit cases (files written by astropy at test
time). An open finding is a strict xfail naming it; fixed ones stay as plain tests."""
from __future__ import annotations

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")
torch = pytest.importorskip("torch")

import torchfits  # noqa: E402
from torchfits.errors import FitsError  # noqa: E402


@pytest.fixture
def table_path(tmp_path):
    """uint64 vector, integer with a null, string, bits, variable-length and float columns."""
    cols = [
        fits.Column(name="U", format="2K", bzero=2**63,
                    array=np.array([[1, 2], [3, 2**63 + 5]], dtype=np.uint64)),
        fits.Column(name="N", format="I", null=-1, array=np.array([-1, 5], dtype=np.int16)),
        fits.Column(name="S", format="4A", array=np.array(["ab", "c"])),
        fits.Column(name="X", format="3X", array=np.array([[1, 0, 1], [0, 0, 0]], dtype=np.uint8)),
        fits.Column(name="P", format="PJ()",
                    array=np.array([np.array([1], np.int32), np.array([], np.int32)], dtype=object)),
        fits.Column(name="E", format="E", array=np.array([1, 2], dtype=np.float32)),
        fits.Column(name="C", format="C", array=np.array([1 + 2j, 3], dtype=np.complex64)),
    ]
    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns(cols).writeto(path)
    return path


def _routes(path, columns, **kw):
    from torchfits.data import FitsTableDataset, FitsTableIterableDataset

    def rows():
        ds = FitsTableDataset(path, 1, columns=columns, **kw)
        return [ds[i][0] for i in range(len(ds))]
    yield "FitsTableDataset", rows
    yield "FitsTableIterableDataset", lambda: list(
        FitsTableIterableDataset(path, 1, columns=columns, **kw))
    yield "as_batches", lambda: list(
        FitsTableIterableDataset(path, 1, columns=columns, as_batches=True, **kw))


def test_torch_routes_refuse_integer_nulls(table_path):
    """One rule on every torch route (issue 23 item 3): integer nulls raise a FitsError naming
    the column and the options."""
    for route, read in _routes(table_path, ["N", "E"]):
        with pytest.raises(FitsError) as info:
            read()
        msg = str(info.value)
        assert "'N'" in msg and "null_value" in msg and table_path.name in msg, (route, msg)


# H8-A (fixed): torch row datasets raise a bare TypeError ('only 0-dimensional arrays can be
# converted') on uint64 vector columns
@pytest.mark.parametrize("route", ["FitsTableDataset", "FitsTableIterableDataset"])
def test_torch_rows_read_uint64_vectors(table_path, route):
    read = dict(_routes(table_path, ["U", "E"]))[route]
    rows = read()
    got = [r["U"].tolist() for r in rows]
    assert got == [[1, 2], [3, 2**63 + 5]] or got == [[1.0, 2.0], [3.0, float(2**63 + 5)]]


# H8-B (fixed): FitsTableIterableDataset(as_batches=True) silently drops requested bit, string and
# variable-length columns
@pytest.mark.parametrize("column", ["X", "S", "P"])
def test_as_batches_keeps_or_refuses_every_requested_column(table_path, column):
    from torchfits.data import FitsTableIterableDataset

    try:
        batches = list(FitsTableIterableDataset(table_path, 1, columns=[column, "E"],
                                                as_batches=True))
    except FitsError as exc:  # a clear refusal naming the column is fine too
        assert column in str(exc)
        return
    assert all(column in b for b in batches), f"{column!r} missing from {batches}"


# H8-C (fixed): an empty variable-length cell of a PJ column comes out of the torch row datasets
# as a float64 tensor, the others as int32
def test_empty_vla_cell_keeps_the_column_dtype(table_path):
    for route, read in list(_routes(table_path, ["P", "E"]))[:2]:
        rows = read()
        assert {r["P"].dtype for r in rows} == {torch.int32}, route


# H8-D (fixed): the 1.x refusal of complex columns (UnsupportedColumnError) names neither the file
# nor the HDU
def test_compat_complex_refusal_names_the_file(table_path):
    with pytest.raises(FitsError) as info:
        torchfits.table.read(table_path, 1, columns=["C"])
    assert table_path.name in str(info.value)


# H8-E: kept on purpose (docs/compatibility.md): the 1.x mapping gives a one-bit 1X column as
# scalar booleans, as 1.2.3 did; astropy and every native route give one-element lists
def test_one_bit_column_is_a_list_natively_and_a_scalar_in_1x(tmp_path):
    path = tmp_path / "x.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="B", format="1X",
                                               array=np.array([[1], [0]], dtype=np.uint8))]
                                  ).writeto(path)
    assert torchfits.scan(path, 1).to_arrow()["B"].to_pylist() == [[True], [False]]
    assert torchfits.table.read(path, 1)["B"].to_pylist() == [True, False]


# H8-F (fixed): the refusal of uint64 images (UInt64WriteError) names neither the file nor the
# dtype's way out through BZERO
def test_uint64_image_refusal_names_the_file(tmp_path):
    path = tmp_path / "u64.fits"
    with pytest.raises(FitsError) as info:
        torchfits.write(path, np.arange(3, dtype=np.uint64))
    assert path.name in str(info.value)



# H8-G: kept on purpose (docs/compatibility.md): the 1.x read/read_torch of a zero-row table give
# an empty dict, as 1.2.3 did; scan().to_torch() keeps the columns
def test_zero_row_table_in_1x_tensor_reads_and_natively(tmp_path):
    path = tmp_path / "e.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="c0", format="E",
                                               array=np.array([], np.float32))],
                                  nrows=0).writeto(path)
    for got in (torchfits.read(str(path), 1), torchfits.table.read_torch(str(path), 1)):
        assert got == {}
    native = torchfits.scan(path, 1).to_torch()
    assert list(native) == ["c0"] and len(native["c0"]) == 0


# H8-H (fixed): scan().to_pandas() gives an int64 column with nulls as float64, rounding values
# above 2**53 (dask.read_table keeps them exact as Int64 with <NA>)
def test_pandas_keeps_int64_with_nulls_exact(tmp_path):
    pytest.importorskip("pandas")
    path = tmp_path / "k.fits"
    fits.BinTableHDU.from_columns([fits.Column(
        name="K", format="K", null=0,
        array=np.array([2**63 - 1, 0, 2**53 + 1], np.int64))]).writeto(path)
    got = torchfits.scan(path, 1).to_pandas()["K"].tolist()
    assert got[0] == 2**63 - 1 and got[2] == 2**53 + 1


# H8-I (fixed): writing a zero-row string column from a dict of NumPy arrays fails inside the
# writer ('cannot reshape array of size 0 into shape (0,newaxis)'), naming no column
def test_zero_row_string_column_is_written(tmp_path):
    path = tmp_path / "z.fits"
    torchfits.write(path, {"s": np.array([], dtype="U3"), "i": np.array([], np.int16)})
    table = torchfits.scan(path, 1).to_arrow()
    assert table.num_rows == 0 and table.column_names == ["s", "i"]


# H8-J (fixed): a fixed_size_list<T>[1] column is written as TFORM 'J' without TDIM, so every
# reader gives it back as scalars, not lists
def test_one_element_list_column_round_trips(tmp_path):
    import pyarrow as pa
    path = tmp_path / "l1.fits"
    torchfits.write(path, pa.table({"v": pa.array([[1], [2]], pa.list_(pa.int32(), 1))}))
    assert torchfits.scan(path, 1).to_arrow()["v"].to_pylist() == [[1], [2]]


# H8-K (fixed): table.to_astropy masks NaN in scalar float columns only; astropy's Table.read
# (which docs/compatibility.md says it follows) masks the NaN elements of vector columns too
def test_to_astropy_masks_nan_elements_of_float_vectors(tmp_path):
    from astropy.table import Table

    path = tmp_path / "v.fits"
    fits.BinTableHDU.from_columns([fits.Column(
        name="V", format="2E", array=np.array([[np.nan, 1], [2, 3]], np.float32))]).writeto(path)
    want = np.ma.getmaskarray(Table.read(path)["V"]).tolist()
    got = np.ma.getmaskarray(torchfits.table.to_astropy(str(path), hdu=1)["V"]).tolist()
    assert got == want == [[True, False], [False, False]]


# H25-A (harness, not torchfits): the long profile drew a PE() cell holding NaN; the to_astropy
# rule expected it masked, torchfits kept NaN. Table.read masks NaN in float columns of fixed
# shape only (the check is on the column's element dtype: a variable-length column is an object
# column there), so torchfits was right and the rule now leaves variable-length columns alone.
@pytest.mark.parametrize("tform", ["PE()", "QD()"])
def test_to_astropy_keeps_nan_in_variable_length_cells_as_astropy_does(tmp_path, tform):
    from astropy.table import Table

    dtype = np.float32 if "E" in tform else np.float64
    cells = np.empty(3, dtype=object)
    cells[:] = [np.array([np.nan], dtype), np.array([], dtype), np.array([1, np.nan, np.inf], dtype)]
    path = tmp_path / "vla.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="V", format=tform, array=cells)]).writeto(path)

    def cell_values(table):
        col = table["V"]
        assert not getattr(col, "mask", np.False_).any()
        return [np.asarray(col[i]).tolist() for i in range(len(col))]

    want = cell_values(Table.read(path, hdu=1))
    got = cell_values(torchfits.table.to_astropy(str(path), hdu=1))
    np.testing.assert_equal(got, want)
    np.testing.assert_equal(got, [[np.nan], [], [1.0, np.nan, np.inf]])


def test_harness_to_astropy_rule_keeps_nan_in_variable_length_cells(tmp_path):
    """The drawn example of H25-A through the harness route itself."""
    from .routes import ROUTES, expected_for
    from .strategies import ColumnSpec, TableSpec, write_table_spec

    cells = np.empty(1, dtype=object)
    cells[:] = [np.array([np.nan], np.float32)]
    spec = TableSpec(1, [ColumnSpec("c0", "E", "PE()", [("NaN",)], "vla", array=cells,
                                    extra={"repeat": 1, "tdim": None, "heap": "P"})])
    route = "table.to_astropy (1.x)"
    path = write_table_spec(tmp_path / "t.fits", spec)
    columns, expected = expected_for(spec, route)
    assert expected == {"c0": [("NaN",)]}
    assert ROUTES[route][0](path, columns) == expected


# H25-B (in the oracle, astropy 8.0.2): a scaled integer image whose BLANK is 0 reads with its
# blank pixels as BZERO, not NaN: astropy's ImageHDU tests ``if self._blank:`` before applying
# BLANK, so the value 0 counts as none. FITS gives BLANK = 0 no special meaning: torchfits (and
# the harness's expected values) turn those pixels into NaN as for any other BLANK, and the image
# harness skips its astropy comparison for BLANK = 0.
def _blank_image(tmp_path, blank):
    path = tmp_path / f"blank{blank}.fits"
    hdu = fits.PrimaryHDU(np.array([blank, 7], np.uint8))
    hdu.header["BSCALE"], hdu.header["BZERO"], hdu.header["BLANK"] = 1.0, 1.0, blank
    hdu.writeto(path)
    return path


@pytest.mark.parametrize("blank", [0, 5])
def test_blank_zero_is_a_blank_like_any_other(tmp_path, blank):
    got = torchfits.read_numpy(_blank_image(tmp_path, blank), 0)
    np.testing.assert_equal(got, np.array([np.nan, 8.0], np.float32))


@pytest.mark.xfail(strict=True, reason="H25-B: astropy ignores BLANK = 0 (if self._blank:)")
def test_astropy_applies_blank_zero(tmp_path):
    """Passes once astropy applies BLANK = 0; then test_images.blank_is_zero can go."""
    np.testing.assert_equal(fits.getdata(_blank_image(tmp_path, 0)), [np.nan, 8.0])


# H25-C (fixed): writing an integer column with nulls and no TNULL hint (a polars frame, a plain
# Arrow table) reserved the type's minimum as TNULL even where a valid value equals it, so
# ``[None, -32768]`` read back as ``[None, None]``; found by the long profile through polars with
# a 3I column holding TNULL and -32768 elements
@pytest.mark.parametrize("values, arrow_type", [
    ([[None, -32768, -32768]], "fixed3_int16"),
    ([None, -32768, 5], "int16"),
    ([None, 0, 255], "uint8"),
    ([None, 2**16 - 1, 0], "uint16"),
    ([None, -128, 127], "int8"),
    ([None, -(2**63), 2**63 - 1], "int64"),
])
def test_writer_tnull_avoids_valid_values(tmp_path, values, arrow_type):
    import pyarrow as pa

    pa_type = pa.list_(pa.int16(), 3) if arrow_type == "fixed3_int16" else getattr(pa, arrow_type)()
    path = tmp_path / "n.fits"
    torchfits.write(path, pa.table({"v": pa.array(values, pa_type)}))
    assert torchfits.scan(path, 1).to_arrow()["v"].to_pylist() == values
    got = fits.getdata(path, 1)["v"].tolist()
    header = fits.getheader(path, 1)
    null = header["TNULL1"] + header.get("TZERO1", 0)  # TNULL is a stored value
    assert [None if x == null else x for x in np.ravel(got).tolist()] == \
        np.ravel(np.array(values, dtype=object)).tolist()


def test_writer_tnull_with_every_byte_value_used_is_refused(tmp_path):
    import pyarrow as pa

    with pytest.raises((FitsError, ValueError), match="'v'"):
        torchfits.write(tmp_path / "b.fits", pa.table({"v": pa.array([None, *range(256)],
                                                                    pa.uint8())}))


def test_writer_moves_a_hinted_tnull_off_valid_values(tmp_path):
    import pyarrow as pa

    field = pa.field("v", pa.int16(), metadata={"fits_tnull": "5"})
    path = tmp_path / "h.fits"
    torchfits.write(path, pa.table({"v": pa.array([None, 5, -32768], pa.int16())},
                                   schema=pa.schema([field])))
    assert torchfits.scan(path, 1).to_arrow()["v"].to_pylist() == [None, 5, -32768]

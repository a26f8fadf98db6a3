"""``torchfits.table``: the torchfits 1.2.3 table API (docs/compatibility.md).

Files are written with astropy (or as raw bytes under an astropy-formatted header) into
temporary directories; expected values come from what was written.
"""
from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import torchfits.table as table  # noqa: E402
from _tablehelpers import write_raw_bintable  # noqa: E402

N = 10
IDS = np.arange(N, dtype=np.int32)
MAGS = (10.0 + IDS).astype(np.float32)
NAMES = ["obj0", "obj1", "obj2", "obj3", "obj4", "obj5", "obj6", "obj7", "obj8", "obj9"]
NUL_STORED = np.where(IDS % 3 == 0, -99, IDS).astype(np.int32)  # TNULL -99 on rows 0, 3, 6, 9
FN = np.where(IDS == 4, np.nan, IDS * 1.5)


# ----------------------------------------------------------------------------- fixtures


def _write_catalog(path, fits):
    """Primary image; HDU 1 "CAT" (every common type); 2 "CPX" (complex); 3 "EMPTY" (0 rows);
    4 "ASC" (ASCII table); 5 "ODD" (bits, int8, scaled, uint64, TDIM, vector TNULL)."""
    cat = fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="J", array=IDS),
        fits.Column(name="MAG", format="E", unit="mag", array=MAGS),
        fits.Column(name="NAME", format="8A", array=np.array(NAMES)),
        fits.Column(name="FLAG", format="L", array=IDS % 2 == 0),
        fits.Column(name="NUL", format="J", null=-99, array=NUL_STORED),
        fits.Column(name="VEC", format="3D", array=np.arange(3 * N, dtype=np.float64).reshape(N, 3)),
        fits.Column(name="VLA", format="PJ()", array=[np.arange(i % 4, dtype=np.int32) for i in range(N)]),
        fits.Column(name="U16", format="I", bzero=32768, array=(IDS + 60000).astype(np.uint16)),
        fits.Column(name="FN", format="D", array=FN),
    ], name="CAT")
    cpx = fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="J", array=IDS[:4]),
        fits.Column(name="Z", format="C", array=np.arange(4) * (1 + 2j)),
        fits.Column(name="ZZ", format="M", array=np.arange(4) * (3 - 1j)),
    ], name="CPX")
    empty = fits.BinTableHDU.from_columns([
        fits.Column(name="A", format="J", array=np.zeros(0, np.int32)),
        fits.Column(name="S", format="4A", array=np.array([], dtype="S4")),
    ], name="EMPTY")
    asc = fits.TableHDU.from_columns([
        fits.Column(name="I", format="I6", array=np.arange(3)),
        fits.Column(name="F", format="F8.2", array=np.array([1.5, 2.25, -3.0])),
        fits.Column(name="E", format="E12.4", array=np.array([1.0, 2.0, 3.0])),
        fits.Column(name="S", format="A5", array=np.array(["ab", "cde", "f"])),
    ], name="ASC")
    odd = fits.BinTableHDU.from_columns([
        fits.Column(name="BITS", format="11X", array=np.tile(
            np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1], bool), (3, 1)) ^ np.eye(3, 11, dtype=bool)),
        fits.Column(name="BIT1", format="X", array=np.array([[1], [0], [1]], bool)),
        fits.Column(name="L3", format="3L", array=np.array([[1, 0, 1], [0, 0, 1], [1, 1, 1]], bool)),
        fits.Column(name="I8", format="B", bzero=-128, array=np.array([-1, 0, 5], np.int8)),
        fits.Column(name="U64", format="K", bzero=2**63, array=np.array([0, 1, 2**63], np.uint64)),
        fits.Column(name="SC", format="E", bscale=2.0, bzero=1.0, array=np.array([1, 3, 5], np.float32)),
        fits.Column(name="IMG", format="6J", dim="(3,2)",
                    array=np.arange(18, dtype=np.int32).reshape(3, 2, 3)),
        fits.Column(name="VN", format="2I", null=-1, array=np.array([[1, -1], [-1, 2], [3, 4]], np.int16)),
        fits.Column(name="UN", format="I", bzero=32768, null=0,
                    array=np.array([32768, 32769, 7], np.uint16)),
    ], name="ODD")
    fits.HDUList([fits.PrimaryHDU(np.zeros((2, 3), np.float32)), cat, cpx, empty, asc, odd]).writeto(
        path, overwrite=True)
    return str(path)


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    fits = pytest.importorskip("astropy.io.fits")
    return _write_catalog(tmp_path_factory.mktemp("cat") / "cat.fits", fits)


def _strings_file(path):
    """One ``6A`` column with chosen bytes (NUL and blank padding, leading blanks, non-ASCII)."""
    values = [b"ab  \0\0", b" c d  ", b"      ", b"xyz\0\0\0", b"\xe9t\xe9   ", b"ab\0\0\0\0"]
    return write_raw_bintable(path, [("TTYPE1", "S"), ("TFORM1", "6A")], b"".join(values),
                              len(values), 6), values


def _logical_file(path):
    """``L`` column with 'T', 'F' and a zero (undefined) byte, next to an int column."""
    rows = b"T\0\0\0\x01" + b"F\0\0\0\x02" + b"\0\0\0\0\x03" + b"T\0\0\0\x04"
    return write_raw_bintable(path, [("TTYPE1", "L"), ("TFORM1", "L"), ("TTYPE2", "K"), ("TFORM2", "J")],
                              rows, 4, 5)


# ----------------------------------------------------------------------------- module surface


def test_all_lists_exactly_the_contract_names():
    expected = {"TABLE_BACKENDS", "append_rows", "clear_cache", "FITSPolarsFrame", "dataset",
                "delete_rows", "drop_columns", "duckdb_query", "insert_column", "insert_rows",
                "read", "read_arrow", "read_astropy", "read_polars", "read_torch", "reader",
                "rename_columns", "replace_column", "scan", "scan_polars", "scan_torch",
                "scanner", "schema", "to_astropy", "to_duckdb", "to_pandas", "to_polars",
                "update_rows", "write", "write_csv", "write_ipc", "write_parquet"}
    assert set(table.__all__) == expected and len(table.__all__) == len(expected)
    for name in table.__all__:
        assert hasattr(table, name)
        assert not name.startswith("_")


def test_backends_and_read_arrow_alias():
    assert table.TABLE_BACKENDS == frozenset({"auto", "cpp", "torch"})
    assert table.read_arrow is table.read


def test_importing_table_does_not_import_torch():
    code = ("import sys, torchfits.table, torchfits.compat.open_table, torchfits.compat.table_hdu, "
            "torchfits.compat.interop; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_open_and_describe_tables_without_torch(cat):
    code = (f"import sys, torchfits.hdu as h; hl = h.open({cat!r}); "
            "print(hl[1].num_rows, hl[1].columns[0], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["10", "ID", "False"]


# ----------------------------------------------------------------------------- §8.2 type mapping


def test_arrow_types_follow_the_compat_mapping(cat):
    t = table.read(cat, columns=["ID", "MAG", "NAME", "FLAG", "NUL", "VEC", "VLA", "U16", "FN"])
    assert t.schema.types == [pa.int32(), pa.float32(), pa.string(), pa.bool_(), pa.int32(),
                              pa.list_(pa.float64(), 3), pa.list_(pa.int32()), pa.uint16(),
                              pa.float64()]
    assert t.num_rows == N
    assert t.column("ID").to_pylist() == IDS.tolist()
    assert t.column("NAME").to_pylist() == NAMES
    assert t.column("U16").to_pylist() == (IDS + 60000).tolist()
    assert t.column("VLA").to_pylist() == [list(range(i % 4)) for i in range(N)]


def test_odd_types(cat):
    t = table.read(cat, hdu="ODD")
    types_ = dict(zip(t.schema.names, t.schema.types))
    assert types_["BITS"] == pa.list_(pa.bool_(), 11)
    assert types_["BIT1"] == pa.bool_()
    assert types_["L3"] == pa.list_(pa.bool_(), 3)
    assert types_["I8"] == pa.float64()  # no int8 in 1.2.3 tables
    assert types_["U64"] == pa.float64()
    assert types_["SC"] == pa.float64()
    assert types_["IMG"] == pa.list_(pa.int32(), 6)  # TDIM not applied
    assert t.column("I8").to_pylist() == [-1.0, 0.0, 5.0]
    assert t.column("U64").to_pylist() == [0.0, 1.0, float(2**63)]
    assert t.column("SC").to_pylist() == [1.0, 3.0, 5.0]
    assert t.column("BIT1").to_pylist() == [True, False, True]
    expected_bits = (np.tile(np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1], bool), (3, 1))
                     ^ np.eye(3, 11, dtype=bool))
    assert t.column("BITS").to_pylist() == expected_bits.tolist()  # padding per row honoured
    assert t.column("IMG").to_pylist()[1] == list(range(6, 12))


def test_tnull_nulls_elementwise_and_on_stored_value(cat):
    t = table.read(cat, hdu="ODD", columns=["VN", "UN"])
    assert t.column("VN").to_pylist() == [[1, None], [None, 2], [3, 4]]
    # UN: TZERO=32768 with TNULL=0 on the stored value, so physical 32768 is null.
    assert t.column("UN").to_pylist() == [None, 32769, 7]
    raw = table.read(cat, hdu="ODD", columns=["VN", "UN"], apply_fits_nulls=False)
    assert raw.column("VN").to_pylist() == [[1, -1], [-1, 2], [3, 4]]
    assert raw.column("UN").to_pylist() == [32768, 32769, 7]


def test_tnull_and_nan(cat):
    t = table.read(cat, columns=["NUL", "FN"])
    assert t.column("NUL").to_pylist() == [None if i % 3 == 0 else i for i in range(N)]
    fn = t.column("FN")
    assert fn.null_count == 0 and math.isnan(fn[4].as_py())


def test_zero_logical_byte_reads_false(tmp_path):
    pytest.importorskip("astropy")
    path = _logical_file(tmp_path / "l.fits")
    t = table.read(path)
    assert t.column("L").to_pylist() == [True, False, False, True]
    assert t.column("L").null_count == 0
    assert table.read(path, where="L == False").column("K").to_pylist() == [2, 3]
    assert table.read_torch(path)["L"].tolist() == [True, False, False, True]


def test_zero_logical_byte_in_residual_predicate(tmp_path):
    pytest.importorskip("astropy")
    path = _logical_file(tmp_path / "l.fits")
    assert table.read(path, where="L == False OR K > 100").column("K").to_pylist() == [2, 3]


def test_complex_refused_only_when_touched(cat):
    with pytest.raises(NotImplementedError, match="Z"):
        table.read(cat, hdu="CPX")
    with pytest.raises(NotImplementedError, match="ZZ"):
        table.read(cat, hdu="CPX", columns=["ZZ"])
    with pytest.raises(NotImplementedError, match="Z"):
        table.read(cat, hdu="CPX", columns=["ID"], where="Z > 1")
    with pytest.raises(NotImplementedError):
        table.schema(cat, hdu="CPX")
    assert table.read(cat, hdu="CPX", columns=["ID"], where="ID > 1").column("ID").to_pylist() == [2, 3]
    assert table.schema(cat, hdu="CPX", columns=["ID"]).names == ["ID"]


def test_ascii_table_types(cat):
    t = table.read(cat, hdu="ASC")
    assert t.schema.types == [pa.int32(), pa.float64(), pa.float32(), pa.string()]
    assert t.column("I").to_pylist() == [0, 1, 2]
    assert t.column("F").to_pylist() == [1.5, 2.25, -3.0]
    assert t.column("S").to_pylist() == ["ab", "cde", "f"]


# ----------------------------------------------------------------------------- §8.4 strings


def test_strings_strip_decode_and_raw(tmp_path):
    pytest.importorskip("astropy")
    path, values = _strings_file(tmp_path / "s.fits")
    stripped = table.read(path).column("S").to_pylist()
    assert stripped[:4] == ["ab", " c d", "", "xyz"]
    assert stripped[5] == "ab"
    assert isinstance(stripped[4], str)  # non-ASCII under "ascii" never raises
    kept = table.read(path, strip=False).column("S").to_pylist()
    assert kept[:4] == ["ab  ", " c d  ", "      ", "xyz"]  # NULs always go
    raw = table.read(path, decode_bytes=False)
    assert raw.schema.field("S").type == pa.binary(6)
    assert raw.column("S").to_pylist() == values
    latin = table.read(path, encoding="latin-1").column("S").to_pylist()
    assert latin[4] == "\xe9t\xe9"


def test_where_compares_stripped_strings(tmp_path):
    pytest.importorskip("astropy")
    path, _ = _strings_file(tmp_path / "s.fits")
    assert table.read(path, where="S == 'ab'").num_rows == 2
    assert table.read(path, where="S == ''").num_rows == 1
    assert table.read(path, where="S == ' c d'").num_rows == 1


def test_unknown_encoding_is_a_value_error(cat):
    with pytest.raises(ValueError, match="encoding"):
        table.read(cat, columns=["NAME"], encoding="no-such-codec")


# ----------------------------------------------------------------------------- §8.2 metadata


def test_metadata_only_when_asked(cat):
    plain = table.read(cat, columns=["ID"])
    assert plain.schema.metadata is None and plain.schema.field("ID").metadata is None
    t = table.read(cat, columns=["MAG", "NUL", "U16"], include_fits_metadata=True)
    assert t.schema.metadata == {b"fits_hdu": b"1"}
    mag = t.schema.field("MAG").metadata
    assert mag[b"fits_tform"] == b"E" and mag[b"fits_tscal"] == b"1.0" and mag[b"fits_tzero"] == b"0.0"
    assert mag[b"fits_tunit"] == b"mag"
    assert t.schema.field("NUL").metadata[b"fits_tnull"] == b"-99"
    assert t.schema.field("U16").metadata[b"fits_tzero"] == b"32768.0"
    odd = table.schema(cat, hdu="ODD", columns=["IMG"], include_fits_metadata=True)
    assert odd.field("IMG").metadata[b"fits_tdim"] == b"(3,2)"
    assert odd.metadata == {b"fits_hdu": b"5"}


def test_reader_includes_metadata_by_default(cat):
    r = table.reader(cat, columns=["ID"])
    assert isinstance(r, pa.RecordBatchReader)
    assert r.schema.metadata == {b"fits_hdu": b"1"}
    assert r.schema.field("ID").metadata[b"fits_tform"] == b"J"
    assert r.read_all().num_rows == N
    assert table.reader(cat, columns=["ID"], include_fits_metadata=False).schema.metadata is None


# ----------------------------------------------------------------------------- §8.5 HDU selection


def test_hdu_by_index_and_case_insensitive_extname(cat):
    assert table.read(cat, 1, columns=["ID"]).equals(table.read(cat, "cat", columns=["ID"]))
    assert table.read(cat, hdu=True, columns=["ID"]).num_rows == N  # bool counts as int


def test_hdu_errors(cat, tmp_path):
    with pytest.raises(KeyError, match="Table HDU named 'NOPE' not found in"):
        table.read(cat, hdu="NOPE")
    with pytest.raises(RuntimeError, match="Failed to get table dimensions"):
        table.read(cat, hdu=0)
    with pytest.raises(OSError, match="(?i)could not move to HDU"):
        table.read(cat, hdu=42)
    for bad in (None, "auto", "AUTO"):
        with pytest.raises(ValueError, match="explicit table HDU"):
            table.read(cat, hdu=bad)
    with pytest.raises(ValueError, match="non-negative"):
        table.read(cat, hdu=-1)
    with pytest.raises(OSError, match="Could not open FITS file"):
        table.read(tmp_path / "missing.fits")


def test_pathlike_accepted(cat):
    from pathlib import Path

    assert table.read(Path(cat), columns=["ID"]).num_rows == N


# ----------------------------------------------------------------------------- columns


def test_columns_order_duplicates_all_and_single_string(cat):
    assert table.read(cat, columns=["NAME", "ID", "NAME"]).column_names == ["NAME", "ID"]
    assert table.read(cat, columns=("MAG",)).column_names == ["MAG"]
    # BUG-1.2.3: a bare string was iterated per character; it is one column.
    assert table.read(cat, columns="MAG").column_names == ["MAG"]
    everything = table.read(cat, columns=[]).column_names
    assert everything == ["ID", "MAG", "NAME", "FLAG", "NUL", "VEC", "VLA", "U16", "FN"]
    with pytest.raises(KeyError, match="Column 'NOPE' not found"):
        table.read(cat, columns=["ID", "NOPE"])
    with pytest.raises(KeyError, match="Column 'NOPE' not found"):
        table.schema(cat, columns=["NOPE"])


# ----------------------------------------------------------------------------- §8.1 row numbering


@pytest.mark.parametrize("bad, match", [
    (slice(0, 5, 2), "row_slice step must be 1"),
    ((-1, 3), "row_slice start must be >= 0"),
    (slice(-2, None), "row_slice start must be >= 0"),
    ((0, -1), "negative stop"),
    ((1, 2, 3), "2 items"),
    ([1, 2], r"row_slice must be a slice, \(start, stop\), or None"),
    (3, r"row_slice must be a slice, \(start, stop\), or None"),
])
def test_row_slice_validation(cat, bad, match):
    with pytest.raises(ValueError, match=match):
        table.read(cat, columns=["ID"], row_slice=bad)
    with pytest.raises(ValueError, match=match):
        table.scan(cat, columns=["ID"], row_slice=bad)
    with pytest.raises(ValueError, match=match):
        table.scan_torch(cat, columns=["ID"], row_slice=bad)


def test_row_slice_is_zero_based_half_open_and_clamps(cat):
    ids = lambda rs: table.read(cat, columns=["ID"], row_slice=rs).column("ID").to_pylist()  # noqa: E731
    assert ids((2, 5)) == [2, 3, 4]
    assert ids(slice(2, 5)) == [2, 3, 4]
    assert ids(slice(None, 2)) == [0, 1]
    assert ids((8, 100)) == [8, 9]
    for empty in ((50, 60), (5, 5), (6, 2)):
        t = table.read(cat, columns=["ID", "NAME"], row_slice=empty)
        assert t.num_rows == 0 and t.column_names == ["ID", "NAME"]


def test_rows_are_zero_based_indices(cat):
    got = table.read(cat, columns=["ID"], rows=np.array([7, 1, 1, 0])).column("ID").to_pylist()
    assert got == [7, 1, 1, 0]
    assert table.read(cat, columns=["ID"], rows=[]).num_rows == 0
    with pytest.raises(ValueError):
        table.read(cat, columns=["ID"], rows=[-1])
    with pytest.raises(IndexError, match="row 10 out of range for a 10-row table"):
        table.read(cat, columns=["ID"], rows=[1, 10])
    with pytest.raises(ValueError, match="Only one of rows or row_slice may be provided"):
        table.read(cat, columns=["ID"], rows=[1], row_slice=(0, 2))


def test_read_torch_is_one_based(cat):
    assert table.read_torch(cat, columns=["ID"])["ID"].tolist() == IDS.tolist()
    assert table.read_torch(cat, columns=["ID"], start_row=3, num_rows=2)["ID"].tolist() == [2, 3]
    assert table.read_torch(cat, columns=["ID"], start_row=9, num_rows=5)["ID"].tolist() == [8, 9]
    empty = table.read_torch(cat, columns=["ID", "VLA"], num_rows=0)
    assert list(empty) == ["ID", "VLA"] and empty["ID"].shape == (0,) and empty["VLA"] == []
    with pytest.raises(ValueError, match="FITS uses 1-based indexing"):
        table.read_torch(cat, start_row=0)
    for bad in (-2, -10):
        with pytest.raises(ValueError, match="num_rows must be > 0 or -1"):
            table.read_torch(cat, num_rows=bad)
    with pytest.raises(RuntimeError, match="Invalid start row"):
        table.read_torch(cat, start_row=11)


# ----------------------------------------------------------------------------- where


def test_where_filters_within_row_slice_and_rows(cat):
    got = table.read(cat, columns=["ID"], row_slice=(2, 8), where="ID > 4").column("ID").to_pylist()
    assert got == [5, 6, 7]
    got = table.read(cat, columns=["ID"], rows=[9, 2, 7, 2, 0], where="ID >= 2").column("ID").to_pylist()
    assert got == [9, 2, 7, 2]


def test_where_columns_are_not_returned_and_empty_keeps_schema(cat):
    t = table.read(cat, columns=["NAME"], where="MAG > 17.5")
    assert t.column_names == ["NAME"] and t.column("NAME").to_pylist() == ["obj8", "obj9"]
    empty = table.read(cat, columns=["ID", "VEC"], where="ID > 100")
    assert empty.num_rows == 0 and empty.schema.types == [pa.int32(), pa.list_(pa.float64(), 3)]


def test_where_three_valued_logic_with_tnull(cat):
    ids = lambda w: table.read(cat, columns=["ID"], where=w).column("ID").to_pylist()  # noqa: E731
    assert ids("NUL != 4") == [1, 2, 5, 7, 8]
    assert ids("NOT NUL > 3") == [1, 2]
    assert ids("NUL IS NULL") == [0, 3, 6, 9]
    assert ids("NUL == NULL") == [0, 3, 6, 9]
    assert ids("NUL IS NOT NULL") == [1, 2, 4, 5, 7, 8]
    assert ids("FN IS NULL") == []  # NaN is not NULL in table filters
    assert 4 not in ids("FN != 3")
    assert ids("U16 >= 60008") == [8, 9]
    assert ids("FLAG == True AND ID BETWEEN 2 AND 6") == [2, 4, 6]
    assert ids("ID IN ()") == []
    assert ids("NAME == obj3") == [3]  # a bare word is a string literal


@pytest.mark.parametrize("expr, match", [
    ("", "where must be a non-empty string expression"),
    ("   ", "where must be a non-empty string expression"),
    ("NOPE > 1", "where references unknown column 'NOPE'"),
    ("VEC > 1", "list/VLA column 'VEC'"),
    ("VLA > 1", "list/VLA column 'VLA'"),
    ("(ID > 1", "Unbalanced parentheses"),
    ("ID >", "Unexpected"),
    ("ID > 1 ID < 3", "Unexpected trailing tokens"),
    ("5 > ID", "where expects a column identifier before comparison operator"),
    ("ID + 1 > 5", "where expects a comparison operator"),
    ("ID > MAG", "where cannot compare column 'ID'"),
    ("NAME == 'open", "Unterminated quoted literal"),
    ("ID = 3", "="),
])
def test_where_errors(cat, expr, match):
    with pytest.raises(ValueError, match=match):
        table.read(cat, columns=["ID"], where=expr)


def test_where_must_be_a_string(cat):
    with pytest.raises(ValueError, match="non-empty string"):
        table.read(cat, columns=["ID"], where=5)


# ----------------------------------------------------------------------------- other arguments


def test_argument_validation(cat):
    for bad in (0, -3, True, 1.5):
        with pytest.raises(ValueError, match="batch_size must be > 0"):
            table.read(cat, columns=["ID"], batch_size=bad)
    with pytest.raises(ValueError, match="backend must be one of: auto, torch, cpp"):
        table.read(cat, backend="AUTO")
    with pytest.raises(ValueError, match="mmap must be bool or 'auto'"):
        table.read(cat, mmap="yes")
    with pytest.raises(ValueError, match="mmap must be bool or 'auto'"):
        table.read(cat, mmap=1)
    results = [table.read(cat, columns=["ID", "NAME"], backend=b, mmap=m)
               for b in ("auto", "cpp", "torch") for m in (True, False, "auto", "AUTO")]
    assert all(r.equals(results[0]) for r in results)


def test_batch_size_does_not_change_read(cat):
    full = table.read(cat, columns=["ID", "VLA"], where="ID > 2")
    assert table.read(cat, columns=["ID", "VLA"], where="ID > 2", batch_size=3).equals(full)


def test_zero_row_table(cat):
    t = table.read(cat, hdu="EMPTY")
    assert t.num_rows == 0 and t.schema.types == [pa.int32(), pa.string()]
    assert list(table.scan(cat, hdu="EMPTY")) == []
    assert list(table.scan_torch(cat, hdu="EMPTY")) == []
    assert table.read_torch(cat, hdu="EMPTY") == {}


# ----------------------------------------------------------------------------- §8.6 scan, reader, schema


def test_scan_is_a_generator_with_exact_batch_sizes(cat):
    gen = table.scan(cat, columns=["ID"], batch_size=3)
    assert inspect.isgenerator(gen) or hasattr(gen, "__next__")
    batches = list(gen)
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert sum((b.column(0).to_pylist() for b in batches), []) == IDS.tolist()


def test_scan_checks_arguments_eagerly(cat):
    with pytest.raises(ValueError):
        table.scan(cat, batch_size=0)
    with pytest.raises(KeyError):
        table.scan(cat, columns=["NOPE"])
    with pytest.raises(ValueError, match="unknown column"):
        table.scan(cat, columns=["ID"], where="NOPE > 1")
    with pytest.raises(NotImplementedError):
        table.scan(cat, hdu="CPX")
    with pytest.raises(OSError):
        table.scan("/no/such/file.fits")


def test_scan_with_where_filters_each_batch(cat):
    batches = list(table.scan(cat, columns=["ID"], where="ID < 2 OR ID > 7", batch_size=3))
    # Chunks [0-2] [3-5] [6-8] [9]: the empty middle one is skipped, the others shrink.
    assert [b.column(0).to_pylist() for b in batches] == [[0, 1], [8], [9]]
    nothing = list(table.scan(cat, columns=["ID", "NAME"], where="ID > 100", batch_size=3))
    assert len(nothing) == 1 and nothing[0].num_rows == 0
    assert nothing[0].schema.names == ["ID", "NAME"]


def test_scan_options_match_read(cat):
    kw = dict(columns=["NAME", "NUL"], row_slice=(1, 9), decode_bytes=False,
              apply_fits_nulls=False, include_fits_metadata=True)
    batches = list(table.scan(cat, batch_size=4, **kw))
    assert pa.Table.from_batches(batches).equals(table.read(cat, **kw))
    assert batches[0].schema.metadata == {b"fits_hdu": b"1"}


def test_reader_empty_result_keeps_schema(cat):
    r = table.reader(cat, columns=["ID", "MAG"], where="ID > 100")
    t = r.read_all()
    assert t.num_rows == 0 and t.column_names == ["ID", "MAG"]


def test_schema_defaults_and_where_validation(cat):
    s = table.schema(cat, columns=["NUL", "NAME"])
    assert s.types == [pa.int32(), pa.string()] and s.metadata is None
    assert table.schema(cat, columns=["NAME"], decode_bytes=False).field("NAME").type == pa.binary(8)
    assert inspect.signature(table.schema).parameters["apply_fits_nulls"].default is False
    with pytest.raises(ValueError, match="where references unknown column 'X'"):
        table.schema(cat, where="X > 1")
    with pytest.raises(ValueError, match="Unbalanced"):
        table.schema(cat, columns=["ID"], where="(ID > 1")


def test_schema_reads_the_header_only(tmp_path, cat):
    from pathlib import Path

    # Cut the file inside the data of the first table: rows are gone, cards are not.
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(cat) as hdul:
        start = hdul.fileinfo(1)["datLoc"]
    cut = tmp_path / "cut.fits"
    cut.write_bytes(Path(cat).read_bytes()[:start + 10])
    assert table.schema(cut, columns=["ID", "NAME"]).names == ["ID", "NAME"]
    with pytest.raises(RuntimeError, match="truncated"):
        table.read(cut, columns=["ID"])


def test_truncated_data(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="X", format="K", array=np.arange(2000))]).writeto(path)
    with fits.open(path) as hdul:
        start = hdul.fileinfo(1)["datLoc"]
    data = path.read_bytes()
    path.write_bytes(data[:start + 8 * 1000 + 3])
    with pytest.raises(RuntimeError, match="truncated"):
        table.read(path)
    with pytest.raises(RuntimeError, match="truncated"):
        table.read(path, where="X > 5")
    with pytest.raises(RuntimeError, match="truncated"):
        table.read_torch(path)
    assert table.read(path, row_slice=(0, 1000)).column("X").to_pylist() == list(range(1000))
    assert table.read_torch(path, num_rows=10)["X"].tolist() == list(range(10))


def test_dataset_and_scanner(cat):
    import pyarrow.dataset as ds

    d = table.dataset(cat, columns=["ID", "MAG"])
    assert isinstance(d, ds.Dataset) and d.to_table().num_rows == N
    assert d.schema.metadata == {b"fits_hdu": b"1"}  # built from reader()
    mem = table.dataset(table.read(cat, columns=["ID"]))
    assert mem.count_rows() == N

    sc = table.scanner(cat, columns=["ID"], where="ID > 2", filter=ds.field("MAG") < 16)
    assert isinstance(sc, ds.Scanner)
    assert sc.to_table().column("ID").to_pylist() == [3, 4, 5]
    assert table.scanner(cat, columns=["NAME"], where="ID < 2").to_table().column_names == ["NAME"]
    # BUG-1.2.3: where was ignored for in-memory inputs; it applies.
    arrow = table.read(cat, columns=["ID", "NUL"])
    got = table.scanner(arrow, where="NUL IS NULL", columns=["ID"]).to_table()
    assert got.column("ID").to_pylist() == [0, 3, 6, 9]
    got = table.scanner(arrow, where="ID > 5", filter=ds.field("ID") < 8).to_table()
    assert got.column("ID").to_pylist() == [6, 7]
    with pytest.raises(ValueError, match="batch_size"):
        table.scanner(cat, batch_size=0)


# ----------------------------------------------------------------------------- §8.7 torch


def test_read_torch_mapping(cat):
    torch = pytest.importorskip("torch")
    d = table.read_torch(cat)
    assert list(d) == ["ID", "MAG", "NAME", "FLAG", "NUL", "VEC", "VLA", "U16", "FN"]
    assert d["ID"].dtype == torch.int32 and d["ID"].shape == (N,)
    assert d["MAG"].dtype == torch.float32
    assert d["NAME"].dtype == torch.uint8 and d["NAME"].shape == (N, 8)
    assert bytes(d["NAME"][1].tolist()).rstrip(b"\0") == b"obj1"
    assert d["FLAG"].dtype == torch.bool
    assert d["NUL"].tolist() == NUL_STORED.tolist()  # TNULL never applied
    assert d["VEC"].shape == (N, 3) and d["VEC"].dtype == torch.float64
    assert isinstance(d["VLA"], list)
    assert [v.tolist() for v in d["VLA"]] == [list(range(i % 4)) for i in range(N)]
    assert d["U16"].dtype == torch.uint16
    assert math.isnan(d["FN"][4].item())
    odd = table.read_torch(cat, hdu="ODD")
    assert odd["I8"].dtype == torch.float64 and odd["U64"].dtype == torch.float64
    assert odd["BITS"].shape == (3, 11) and odd["BIT1"].shape == (3,)
    assert odd["IMG"].shape == (3, 6)  # TDIM not applied
    assert odd["VN"].tolist() == [[1, -1], [-1, 2], [3, 4]]
    cpx = table.read_torch(cat, hdu="CPX")
    assert cpx["Z"].dtype == torch.complex64 and cpx["ZZ"].dtype == torch.complex128
    assert cpx["Z"].tolist() == [complex(i, 2 * i) for i in range(4)]


def test_read_torch_tensors_are_writable_and_independent(cat):
    pytest.importorskip("torch")
    a = table.read_torch(cat, columns=["ID"])
    a["ID"][0] = 1234
    assert table.read_torch(cat, columns=["ID"])["ID"][0].item() == 0


def test_read_torch_arguments(cat):
    torch = pytest.importorskip("torch")
    d, header = table.read_torch(cat, "CAT", columns="ID", return_header=True, cache_capacity=1,
                                 handle_cache_capacity=2, fast_header=False, mmap=True)
    assert list(d) == ["ID"]
    assert header["NAXIS2"] == N and header["EXTNAME"] == "CAT"  # typed values
    for bad in (None, "auto"):
        with pytest.raises(ValueError, match="explicit table HDU"):
            table.read_torch(cat, hdu=bad)
    with pytest.raises(KeyError, match="Column 'NOPE' not found"):
        table.read_torch(cat, columns=["NOPE"])
    with pytest.raises(ValueError, match="device must be"):
        table.read_torch(cat, device="gpu")
    with pytest.raises(ValueError, match="mmap must be bool or 'auto'"):
        table.read_torch(cat, mmap="never")
    with pytest.raises(RuntimeError, match="Failed to get table dimensions"):
        table.read_torch(cat, hdu=0)
    assert table.read_torch(cat, columns=["ID"], device=torch.device("cpu"))["ID"].device.type == "cpu"


def test_read_torch_where(cat):
    pytest.importorskip("torch")
    d = table.read_torch(cat, columns=["ID", "NUL"], where="NUL >= 2 AND MAG < 18")
    assert d["ID"].tolist() == [2, 4, 5, 7]
    assert list(d) == ["ID", "NUL"]  # MAG (predicate only) dropped
    d = table.read_torch(cat, columns=["ID", "NUL", "FN"], where="FN > -1")
    assert 4 not in d["ID"].tolist()  # NaN never satisfies
    d = table.read_torch(cat, columns=["NUL"], where="ID BETWEEN 2 AND 4")
    assert d["NUL"].tolist() == [2, -99, 4]  # sentinel returned verbatim
    # The window first, then the filter.
    d = table.read_torch(cat, columns=["ID"], start_row=3, num_rows=4, where="ID != 3")
    assert d["ID"].tolist() == [2, 4, 5]
    d = table.read_torch(cat, columns=["ID", "VLA", "NAME"], where="ID > 100")
    assert list(d) == ["ID", "VLA", "NAME"] and d["ID"].numel() == 0 and d["VLA"] == []
    assert d["NAME"].shape == (0, 8)
    assert table.read_torch(cat, columns=["ID"], where="FLAG == True")["ID"].tolist() == [0, 2, 4, 6, 8]


@pytest.mark.parametrize("expr", ["ID > 1 OR ID < 0", "ID IN (1, 2)", "NOT ID > 1", "ID IS NULL",
                                  "NUL IS NOT NULL", "ID NOT BETWEEN 1 AND 3", "NUL == NULL"])
def test_read_torch_where_subset(cat, expr):
    with pytest.raises(ValueError, match="Unsupported where expression for read_torch"):
        table.read_torch(cat, where=expr)


def test_read_torch_where_errors(cat):
    with pytest.raises(TypeError):
        table.read_torch(cat, where="NAME == 'obj1'")
    with pytest.raises(ValueError, match="where references unknown column 'NOPE'"):
        table.read_torch(cat, where="NOPE > 1")
    with pytest.raises(ValueError, match="Unbalanced"):
        table.read_torch(cat, where="(ID > 1")


def test_torchfits_read_on_a_table_equals_read_torch(cat):
    torch = pytest.importorskip("torch")
    from torchfits import io

    a = io.read(cat, hdu=1, columns=["ID", "NAME", "VLA"], start_row=2, num_rows=3)
    b = table.read_torch(cat, 1, columns=["ID", "NAME", "VLA"], start_row=2, num_rows=3)
    assert list(a) == list(b)
    assert torch.equal(a["ID"], b["ID"]) and torch.equal(a["NAME"], b["NAME"])
    assert all(torch.equal(x, y) for x, y in zip(a["VLA"], b["VLA"]))
    data, header = io.read(cat, hdu="CAT", return_header=True)
    assert header["EXTNAME"] == "CAT" and data["ID"].tolist() == IDS.tolist()
    assert table.read_torch_for_read(cat, 3, device="cpu", opts={"columns": None}) == {}


def test_scan_torch(cat):
    torch = pytest.importorskip("torch")
    batches = list(table.scan_torch(cat, columns=["ID", "NAME", "VLA"], row_slice=(1, 9), batch_size=3))
    assert [b["ID"].tolist() for b in batches] == [[1, 2, 3], [4, 5, 6], [7, 8]]
    assert batches[0]["NAME"].shape == (3, 8) and isinstance(batches[0]["VLA"], list)
    cpx = next(table.scan_torch(cat, hdu="CPX"))
    assert cpx["Z"].dtype == torch.complex64
    for bad in (0, -1):
        with pytest.raises(ValueError):
            table.scan_torch(cat, batch_size=bad)
    with pytest.raises(ValueError, match="device"):
        table.scan_torch(cat, device="meta")
    with pytest.raises(KeyError):
        table.scan_torch(cat, columns=["NOPE"])
    assert "where" not in inspect.signature(table.scan_torch).parameters


def test_open_table_reader(cat):
    pytest.importorskip("torch")
    from torchfits.compat.open_table import TableReaderHandle, open_table_reader

    with open_table_reader(cat, "cat") as h:
        assert isinstance(h, TableReaderHandle)
        assert h.hdu == 1 and h.num_rows() == N
        assert h.read_torch(columns=["ID"], start_row=2, num_rows=2)["ID"].tolist() == [1, 2]
        with pytest.raises(TypeError):
            h.read_torch(where="ID > 1")
        with pytest.raises(ValueError, match="1-based"):
            h.read_torch(start_row=0)
    with pytest.raises(RuntimeError, match="TableReaderHandle is closed"):
        h.num_rows()
    with pytest.raises(RuntimeError, match="TableReaderHandle is closed"):
        h.read_torch()
    plain = open_table_reader(cat)
    assert plain.read_torch(columns=["NUL"])["NUL"].tolist() == NUL_STORED.tolist()
    plain.close()
    plain.close()
    with pytest.raises(RuntimeError, match="Failed to get table dimensions"):
        open_table_reader(cat, 0)
    assert open_table_reader(cat, "EMPTY").read_torch() == {}


# ----------------------------------------------------------------------------- §10.2 interop


def test_to_pandas(cat):
    pd = pytest.importorskip("pandas")
    df = table.to_pandas(cat, columns=["ID", "NAME", "VEC"], where="ID < 3")
    assert isinstance(df, pd.DataFrame) and df["ID"].tolist() == [0, 1, 2]
    assert list(df["VEC"][1]) == [3.0, 4.0, 5.0]
    frames = list(table.to_pandas(cat, stream=True, columns=["ID"], batch_size=4))
    assert [len(f) for f in frames] == [4, 4, 2]
    arrow = table.read(cat, columns=["ID", "MAG"])
    assert table.to_pandas(arrow)["MAG"].tolist() == MAGS.tolist()
    assert table.to_pandas(arrow.to_batches()[0], columns=["ID"]).columns.tolist() == ["ID"]
    assert len(table.to_pandas(table.reader(cat, columns=["ID"]))) == N
    assert len(list(table.to_pandas(iter(arrow.to_batches(max_chunksize=3)), stream=True))) == 4
    with pytest.raises(TypeError):
        table.to_pandas(arrow, decode_bytes=False)


def test_interop_accepts_arrow_stream_objects(cat):
    pl = pytest.importorskip("polars")
    pytest.importorskip("pandas")
    import torchfits.tables.scan as native

    frame = pl.DataFrame({"a": [1, 2, 3]})
    assert table.to_pandas(frame, where="a > 1")["a"].tolist() == [2, 3]
    assert table.to_pandas(native.scan(cat, columns=["ID"]))["ID"].tolist() == IDS.tolist()
    assert [len(f) for f in table.to_pandas(frame, stream=True)] == [3]


def test_to_polars_read_polars_scan_polars(cat):
    pl = pytest.importorskip("polars")
    df = table.to_polars(cat, columns=["ID", "VEC", "VLA"])
    assert isinstance(df, pl.DataFrame) and df.height == N
    assert isinstance(df.schema["VEC"], pl.Array) and isinstance(df.schema["VLA"], pl.List)
    assert [f.height for f in table.to_polars(cat, stream=True, columns=["ID"], batch_size=6)] == [6, 4]
    fp = table.read_polars(cat, columns=["ID", "NUL"])
    assert isinstance(fp, table.FITSPolarsFrame)
    assert fp.table_meta == {"fits_hdu": "1"}
    assert set(fp.field_meta) == {"ID", "NUL"}
    assert fp.field_meta["ID"]["fits_tform"] == "J" and fp.field_meta["ID"]["fits_tscal"] == "1.0"
    assert fp.field_meta["NUL"]["fits_tnull"] == "-99"
    assert len(fp) == N and fp["ID"].to_list() == IDS.tolist() and fp.height == N
    text = repr(fp)
    assert "FITSPolarsFrame" in text and "field_meta" in text and "table_meta" in text
    frames = list(table.scan_polars(cat, batch_size=4, columns=["ID"]))
    assert [f.height for f in frames] == [4, 4, 2] and all(isinstance(f, pl.DataFrame) for f in frames)
    with pytest.raises(ValueError):
        table.scan_polars(cat, batch_size=0)


def test_polars_missing_gives_import_error(cat, monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ImportError, match="polars is required"):
        table.read_polars(cat)
    with pytest.raises(ImportError, match="polars"):
        table.to_polars(cat)
    with pytest.raises(ImportError, match="polars"):
        next(table.scan_polars(cat, columns=["ID"]))


def test_to_astropy_and_read_astropy(cat):
    pytest.importorskip("astropy")
    from astropy.table import MaskedColumn, Table

    t = table.read_astropy(cat, columns=["ID", "MAG", "NUL", "VEC", "NAME"])
    assert isinstance(t, Table) and len(t) == N
    assert isinstance(t["NUL"], MaskedColumn)
    assert t["NUL"].mask.tolist() == [i % 3 == 0 for i in range(N)]
    assert str(t["MAG"].unit) == "mag"
    assert t["VEC"].shape == (N, 3)
    assert t["NAME"][2] == "obj2"
    t2 = table.to_astropy(cat, hdu="ODD", columns=["VN", "UN"])
    assert t2["VN"].shape == (3, 2)
    assert t2["VN"].mask.tolist() == [[False, True], [True, False], [False, False]]
    t3 = table.read_astropy(cat, columns=["ID"], where="ID >= 8")
    assert t3["ID"].tolist() == [8, 9]
    arrow = table.read(cat, columns=["ID", "NUL"])
    t4 = table.to_astropy(arrow, where="NUL IS NOT NULL", columns=["ID"])
    assert t4.colnames == ["ID"] and t4["ID"].tolist() == [1, 2, 4, 5, 7, 8]


def test_duckdb(cat):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    rel = table.to_duckdb(cat, relation_name="cat", connection=con, columns=["ID", "MAG"])
    assert isinstance(rel, duckdb.DuckDBPyRelation)
    assert con.sql("SELECT count(*) FROM cat").fetchall()[0][0] == N
    res = table.duckdb_query(cat, "SELECT sum(ID) AS s FROM fits_table WHERE ID > 5",
                             connection=con, columns=["ID"])
    res = res.read_all() if hasattr(res, "read_all") else res
    assert res.column("s").to_pylist() == [6 + 7 + 8 + 9]
    rel = table.duckdb_query(table.read(cat, columns=["ID"]), "SELECT * FROM t2", relation_name="t2",
                             connection=con, return_arrow=False)
    assert isinstance(rel, duckdb.DuckDBPyRelation) and len(rel.fetchall()) == N
    default = table.to_duckdb(cat, relation_name="tf_default_cat", columns=["ID"])
    assert len(default.fetchall()) == N


def test_duckdb_missing_gives_import_error(cat, monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ImportError, match="duckdb is required for to_duckdb conversion"):
        table.to_duckdb(cat)


def test_write_parquet_csv_ipc(cat, tmp_path):
    import pyarrow.parquet as pq
    expected = table.read(cat, columns=["ID", "MAG", "NAME", "NUL"])
    for stream in (False, True):
        dest = tmp_path / f"out{stream}.parquet"
        table.write_parquet(dest, cat, stream=stream, columns=["ID", "MAG", "NAME", "NUL"],
                            batch_size=3)
        assert pq.read_table(dest).equals(expected)
        ipc = tmp_path / f"out{stream}.arrow"
        table.write_ipc(ipc, cat, stream=stream, columns=["ID", "MAG", "NAME", "NUL"])
        with pa.ipc.open_file(ipc) as f:
            assert f.read_all().equals(expected)
    table.write_parquet(tmp_path / "mem.parquet", expected, compression=None, row_group_size=4)
    assert pq.ParquetFile(tmp_path / "mem.parquet").metadata.num_row_groups == 3
    table.write_ipc(tmp_path / "mem.arrow", expected, compression=None)

    csv = tmp_path / "out.csv"
    table.write_csv(csv, cat, columns=["ID", "NAME", "FLAG", "NUL"], row_slice=(0, 3))
    lines = csv.read_text().splitlines()
    assert lines[0] == '"ID","NAME","FLAG","NUL"'
    assert lines[1] == '0,"obj0",true,'  # null as an empty field
    assert lines[2] == '1,"obj1",false,1'
    table.write_csv(tmp_path / "s.csv", cat, stream=True, delimiter=";", columns=["ID", "NAME"],
                    batch_size=4)
    text = (tmp_path / "s.csv").read_text().splitlines()
    assert text[0] == '"ID";"NAME"' and len(text) == N + 1


def test_clear_cache(cat):
    table.read(cat, columns=["ID"])
    assert table.clear_cache() is None


# ----------------------------------------------------------------------------- §8.8 / §8.9


_MUTATIONS = {
    "write": "(path, data, *, schema=None, header=None, overwrite=False, extname=None, "
             "table_type='binary', quantize=None)",
    "append_rows": "(path, rows, hdu=1)",
    "insert_rows": "(path, rows, *, row, hdu=1)",
    "update_rows": "(path, rows, row_slice, hdu=1, *, mmap='auto')",
    "delete_rows": "(path, row_slice, *, hdu=1)",
    "insert_column": "(path, name, values, *, hdu=1, index=None, format=None, unit=None, dim=None, "
                     "tnull=None, tscal=None, tzero=None)",
    "replace_column": "(path, name, values, *, hdu=1, format=None, unit=None, dim=None, "
                      "tnull=None, tscal=None, tzero=None)",
    "rename_columns": "(path, mapping, hdu=1)",
    "drop_columns": "(path, columns, hdu=1)",
}


def _shape(signature):
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", sorted(_MUTATIONS))
def test_mutation_signatures(name):
    namespace: dict = {}
    exec(f"def reference{_MUTATIONS[name]}: pass", namespace)
    func = getattr(table, name)
    assert _shape(inspect.signature(func)) == _shape(inspect.signature(namespace["reference"]))
    assert func.__doc__


def test_mutations_delegate_to_table_edit(fake_edit):
    table.write("p.fits", {"a": [1]}, extname="X", overwrite=True)
    table.append_rows("p.fits", {"a": [2]})
    table.insert_rows("p.fits", {"a": [3]}, row=0, hdu=2)
    table.update_rows("p.fits", {"a": [4]}, (0, 1), mmap=True)
    table.delete_rows("p.fits", 0)
    table.insert_column("p.fits", "b", [1], index=0, unit="m")
    table.replace_column("p.fits", "b", [2], tnull=-1)
    table.rename_columns("p.fits", {"a": "c"})
    table.drop_columns("p.fits", ["c"], hdu="T")
    names = [c[0] for c in fake_edit]
    assert names == ["write", "append_rows", "insert_rows", "update_rows", "delete_rows",
                     "insert_column", "replace_column", "rename_columns", "drop_columns"]
    assert fake_edit[0][2]["extname"] == "X" and fake_edit[0][2]["overwrite"] is True
    assert fake_edit[2][2] == {"row": 0, "hdu": 2}
    assert fake_edit[3][1][2] == (0, 1) and fake_edit[3][2]["mmap"] is True
    assert fake_edit[5][2]["index"] == 0 and fake_edit[5][2]["unit"] == "m"
    assert fake_edit[8][2]["hdu"] == "T"


def test_table_module_keeps_no_state_between_calls(cat, tmp_path):
    # Rewriting a file is seen by the next read (the index cache validates by stat).
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "live.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(3))]).writeto(path)
    assert table.read(path).num_rows == 3
    os.remove(path)
    fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(5))]).writeto(path)
    assert table.read(path).column("A").to_pylist() == [0, 1, 2, 3, 4]


def test_where_compares_stripped_strings_without_strip(tmp_path):
    pytest.importorskip("astropy")
    path, _ = _strings_file(tmp_path / "s.fits")
    assert table.read(path, where="S == 'ab'", strip=False).column("S").to_pylist() == ["ab  ", "ab"]
    assert table.read(path, where="S == 'ab'", decode_bytes=False).num_rows == 2

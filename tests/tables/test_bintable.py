"""Binary and ASCII table decoding (torchfits.fits.columns, torchfits.tables.decode and the
_bintable/_asciitable kernels), checked bit for bit against astropy and fitsio on files both
write at test time."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from _tablehelpers import (  # noqa: E402
    arrow_to_numpy,
    arrow_valid,
    assert_batches_equal,
    assert_bits_equal,
    assert_values_equal,
    astropy_column,
    complex_from_pairs,
    decode,
    decode_numpy,
    fitsio_column,
    kind_of,
    raw_field_bytes,
    table_bytes,
    write_astropy,
    write_fitsio,
    write_raw_bintable,
)
from torchfits.errors import (  # noqa: E402
    ColumnNotFoundError,
    CorruptHeaderError,
    FitsError,
    TruncatedFileError,
    UnsupportedColumnError,
)
from torchfits.fits.columns import ColumnSpec, arrow_type, conversion, field_metadata, parse_columns  # noqa: E402
from torchfits.tables import column_plan as _column_plan  # noqa: E402
from torchfits.tables.arrow_assembly import arrow_schema  # noqa: E402
from torchfits.tables.ascii_decode import decode_ascii_table  # noqa: E402
from torchfits.tables.decode import decode_table  # noqa: E402
from torchfits.tables.decode_options import DecodeOptions  # noqa: E402
from torchfits.tables.selection import select_columns  # noqa: E402
from torchfits.tables.source import TableSource  # noqa: E402

fits = pytest.importorskip("astropy.io.fits")
fitsio = pytest.importorskip("fitsio")

N = 5


# --------------------------------------------------------------------------------------------
# Test data
# --------------------------------------------------------------------------------------------

def _f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def _f64(bits):
    return np.array(bits, dtype=np.uint64).view(np.float64)


def scalar_columns() -> dict[str, np.ndarray]:
    """One value set per numeric type, with every extreme the type has."""
    return {
        "b": np.array([0, 1, 127, 128, 255], np.uint8),
        "sb": np.array([-128, -1, 0, 1, 127], np.int8),
        "i": np.array([-32768, -1, 0, 1, 32767], np.int16),
        "u2": np.array([0, 1, 32767, 32768, 65535], np.uint16),
        "j": np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32),
        "u4": np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 1], np.uint32),
        "k": np.array([-2**63, -1, 0, 1, 2**63 - 1], np.int64),
        "u8": np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1], np.uint64),
        # quiet NaN with a payload, +inf, -inf, -0.0, the smallest denormal
        "e": _f32([0x7FC00123, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001]),
        "d": _f64([0x7FF8000000000ABC, 0x7FF0000000000000, 0xFFF0000000000000,
                   0x8000000000000000, 0x0000000000000001]),
        "c": np.array([1 + 2j, -0.0 - 1j, np.inf, np.nan * 1j, 3.5], np.complex64),
        "m": np.array([1 + 2j, -0.0 - 1j, np.inf, complex(np.nan, 1), 1e300], np.complex128),
    }


def vector_columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "v3": rng.integers(-2**31, 2**31, size=(N, 3), dtype=np.int32),
        "ev": rng.standard_normal((N, 2)),
        "t": rng.standard_normal((N, 2, 3)).astype(np.float32),   # TDIM (3,2)
        "ku": rng.integers(0, 2**64 - 1, size=(N, 2), dtype=np.uint64),
    }


STRINGS = np.array([b"", b"a", b"abc  d", b"seven77", b" lead"])
LOGICAL = np.array([True, False, True, False, True])

_ASTROPY_FORMAT = {"b": "B", "sb": "B", "i": "I", "u2": "I", "j": "J", "u4": "J", "k": "K",
                   "u8": "K", "e": "E", "d": "D", "c": "C", "m": "M"}
_ASTROPY_BZERO = {"sb": -128, "u2": 32768, "u4": 2**31, "u8": 2**63}


def astropy_all_types(path):
    cols = []
    for name, values in scalar_columns().items():
        cols.append(fits.Column(name=name, format=_ASTROPY_FORMAT[name], array=values,
                                bzero=_ASTROPY_BZERO.get(name)))
    vec = vector_columns()
    cols += [
        fits.Column(name="v3", format="3J", array=vec["v3"]),
        fits.Column(name="ev", format="2D", array=vec["ev"]),
        fits.Column(name="t", format="6E", dim="(3,2)", array=vec["t"]),
        fits.Column(name="ku", format="2K", bzero=2**63, array=vec["ku"]),
        fits.Column(name="s", format="7A", array=STRINGS),
        fits.Column(name="l", format="L", array=LOGICAL),
    ]
    return write_astropy(path, cols)


def fitsio_all_types(path):
    scal = scalar_columns()
    vec = vector_columns()
    dtype = [(k, v.dtype) for k, v in scal.items()]
    dtype += [(k, v.dtype, v.shape[1:]) for k, v in vec.items()]
    dtype += [("s", "S7"), ("l", "?")]
    arr = np.zeros(N, dtype)
    for k, v in {**scal, **vec}.items():
        arr[k] = v
    arr["s"] = STRINGS
    arr["l"] = LOGICAL
    return write_fitsio(path, arr)


WRITERS = {"astropy": astropy_all_types, "fitsio": fitsio_all_types}

NATIVE_DTYPES = {"b": np.uint8, "sb": np.int8, "i": np.int16, "u2": np.uint16, "j": np.int32,
                 "u4": np.uint32, "k": np.int64, "u8": np.uint64, "e": np.float32,
                 "d": np.float64, "v3": np.int32, "ev": np.float64, "t": np.float32,
                 "ku": np.uint64}


@pytest.fixture(params=sorted(WRITERS))
def all_types_file(request, tmp_path):
    return WRITERS[request.param](tmp_path / f"{request.param}.fits")


def _oracles(path, name):
    return [astropy_column(path, name), fitsio_column(path, name)]


def _check_against(got, expected):
    if got.dtype == native_dtype(expected):
        assert_bits_equal(got, expected)
    else:
        assert_values_equal(got, expected)


def native_dtype(a):
    return np.asarray(a).dtype.newbyteorder("=")


# --------------------------------------------------------------------------------------------
# Every type against both oracles
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(NATIVE_DTYPES))
def test_numeric_columns_match_oracles(all_types_file, name):
    batch = decode(all_types_file)
    got = arrow_to_numpy(batch.column(name))
    assert got.dtype == NATIVE_DTYPES[name]
    assert batch.column(name).null_count == 0
    for expected in _oracles(all_types_file, name):
        _check_against(got, expected)
    source = {**scalar_columns(), **vector_columns()}[name]
    assert_bits_equal(got, source)


@pytest.mark.parametrize("name", ["c", "m"])
def test_complex_columns_match_oracles(all_types_file, name):
    batch = decode(all_types_file)
    col = batch.column(name)
    half = pa.float32() if name == "c" else pa.float64()
    assert col.type == pa.list_(half, 2)
    got = complex_from_pairs(arrow_to_numpy(col))
    for expected in _oracles(all_types_file, name):
        assert_bits_equal(got, expected)


def test_tdim_nests_in_c_order(all_types_file):
    batch = decode(all_types_file, columns=["t"])
    assert batch.schema.field("t").type == pa.list_(pa.list_(pa.float32(), 3), 2)
    assert batch.schema.field("t").metadata[b"fits_tdim"].replace(b" ", b"") == b"(3,2)"
    got = arrow_to_numpy(batch.column("t"))
    assert got.shape == (N, 2, 3)
    for expected in _oracles(all_types_file, "t"):
        assert_bits_equal(got, expected)
    compat = decode(all_types_file, columns=["t"], mapping="compat")
    assert compat.schema.field("t").type == pa.list_(pa.float32(), 6)
    assert_bits_equal(arrow_to_numpy(compat.column("t")), got.reshape(N, 6))


def test_strings_strip_modes(all_types_file):
    stripped = decode(all_types_file, columns=["s"]).column("s").to_pylist()
    expected = [x.rstrip() for x in astropy_column(all_types_file, "s").tolist()]
    assert stripped == expected == [s.decode().rstrip(" ") for s in STRINGS]
    kept = decode(all_types_file, columns=["s"], strip=False).column("s").to_pylist()
    raw = raw_field_bytes(all_types_file, "s")
    assert kept == [bytes(r).rstrip(b"\0").decode() for r in raw]
    if all_types_file.endswith("fitsio.fits"):
        # cfitsio keeps trailing blanks on read and removes only the NUL padding.
        assert kept == [str(x) for x in fitsio_column(all_types_file, "s")]
    fixed = decode(all_types_file, columns=["s"], decode_bytes=False).column("s")
    assert fixed.type == pa.binary(7)
    assert fixed.to_pylist() == [bytes(r) for r in raw]
    binary = decode(all_types_file, columns=["s"], binary_strings=True).column("s")
    assert binary.type == pa.binary()
    assert binary.to_pylist() == [s.rstrip(b" \0") for s in STRINGS]


def test_logical_column(all_types_file):
    col = decode(all_types_file, columns=["l"]).column("l")
    assert col.type == pa.bool_()
    for expected in _oracles(all_types_file, "l"):
        assert col.to_pylist() == [bool(x) for x in expected]


def test_field_types_native_and_compat(all_types_file):
    native = decode(all_types_file).schema
    assert native.field("sb").type == pa.int8()
    assert native.field("u8").type == pa.uint64()
    assert native.field("ku").type == pa.list_(pa.uint64(), 2)
    compat = decode(all_types_file, mapping="compat",
                    columns=[n for n in native.names if n not in ("c", "m")]).schema
    assert compat.field("sb").type == pa.float64()
    assert compat.field("u8").type == pa.float64()
    assert compat.field("u2").type == pa.uint16()
    assert compat.field("u4").type == pa.uint32()
    assert compat.field("ku").type == pa.list_(pa.float64(), 2)
    compat_batch = decode(all_types_file, mapping="compat", columns=["sb", "u8"])
    assert_values_equal(arrow_to_numpy(compat_batch.column("sb")), scalar_columns()["sb"])
    assert_values_equal(arrow_to_numpy(compat_batch.column("u8")),
                        scalar_columns()["u8"].astype(np.float64))


def test_compat_refuses_complex_only_when_projected(all_types_file):
    with pytest.raises(UnsupportedColumnError, match="read_torch") as info:
        decode(all_types_file, mapping="compat")
    assert "'c'" in str(info.value) and "'m'" in str(info.value)
    assert isinstance(info.value, NotImplementedError)
    decode(all_types_file, mapping="compat", columns=["j"])   # fine without them
    with pytest.raises(UnsupportedColumnError):
        arrow_type(parse_columns(table_bytes(all_types_file)[0], "bintable")[10], "compat")


def test_field_metadata(all_types_file):
    schema = decode(all_types_file).schema
    meta = schema.field("u2").metadata
    assert meta[b"fits_tform"] == b"I"
    assert meta[b"fits_tzero"] == b"32768.0"
    assert meta[b"fits_tscal"] == b"1.0"
    assert schema.field("j").metadata[b"fits_tzero"] == b"0.0"
    assert decode(all_types_file, metadata=False).schema.field("j").metadata is None


# --------------------------------------------------------------------------------------------
# NumPy / tensor mapping
# --------------------------------------------------------------------------------------------

def test_numpy_mapping_matches_fitsio(all_types_file):
    got = decode_numpy(all_types_file)
    reference = fitsio.read(all_types_file, ext=1)
    for name in ("b", "i", "u2", "j", "u4", "k", "e", "d", "c", "m", "v3", "ev"):
        assert_bits_equal(got[name], reference[name])
    # Scaled conventions without a tensor type are float64 physical values.
    assert got["sb"].dtype == np.float64 and got["u8"].dtype == np.float64
    assert_values_equal(got["sb"], scalar_columns()["sb"])
    # TDIM is not applied; character columns are the stored byte matrix.
    assert got["t"].shape == (N, 6)
    assert_bits_equal(got["t"], reference["t"].reshape(N, 6))
    assert got["s"].dtype == np.uint8 and got["s"].shape == (N, 7)
    np.testing.assert_array_equal(got["s"], raw_field_bytes(all_types_file, "s"))
    assert got["l"].dtype == np.bool_ and got["l"].shape == (N,)
    np.testing.assert_array_equal(got["l"], LOGICAL)
    assert list(got) == [s.name for s in parse_columns(table_bytes(all_types_file)[0], "bintable")]


def test_numpy_mapping_tolerates_imprecise_unsigned_tzero(tmp_path):
    path = write_astropy(tmp_path / "t.fits",
                         [fits.Column(name="a", format="I", array=np.array([-32768, 0, 5], np.int16))],
                         extra={"TZERO1": 32767.999999999})
    got = decode_numpy(path)["a"]
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, [0, 32768, 32773])
    # The Arrow mappings take the header literally: a scaled float64 column.
    assert decode(path).schema.field("a").type == pa.float64()


# --------------------------------------------------------------------------------------------
# Bits, logicals, nulls, scaling
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nbits", [1, 3, 8, 13])
def test_bit_columns(tmp_path, nbits):
    rng = np.random.default_rng(nbits)
    bits = rng.integers(0, 2, size=(7, nbits)).astype(bool)
    path = write_astropy(tmp_path / "x.fits", [
        fits.Column(name="x", format=f"{nbits}X", array=bits),
        fits.Column(name="after", format="J", array=np.arange(7)),
    ])
    col = decode(path).column("x")
    assert col.type == pa.list_(pa.bool_(), nbits)
    got = arrow_to_numpy(col)
    np.testing.assert_array_equal(got, bits)
    np.testing.assert_array_equal(got, np.asarray(fitsio_column(path, "x")).reshape(7, nbits))
    np.testing.assert_array_equal(got, np.asarray(astropy_column(path, "x")).reshape(7, nbits))
    np.testing.assert_array_equal(arrow_to_numpy(decode(path).column("after")), np.arange(7))
    compat = decode(path, mapping="compat").column("x")
    if nbits == 1:
        assert compat.type == pa.bool_()
        assert compat.to_pylist() == bits[:, 0].tolist()
    else:
        np.testing.assert_array_equal(arrow_to_numpy(compat), bits)
    expected_numpy = bits[:, 0] if nbits == 1 else bits
    np.testing.assert_array_equal(decode_numpy(path)["x"], expected_numpy)


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _field_offset(path, name, row, hdu=1):
    with fits.open(path) as hdul:
        start = hdul.fileinfo(hdu)["datLoc"]
        header = dict(hdul[hdu].header)
    spec = {s.name: s for s in parse_columns(header, "bintable")}[name]
    return start + row * header["NAXIS1"] + spec.offset


def test_undefined_logical_is_null_natively_and_false_in_compat(tmp_path):
    values = np.array([[True, False], [False, True], [True, True]])
    path = write_astropy(tmp_path / "l.fits", [
        fits.Column(name="l", format="L", array=values[:, 0]),
        fits.Column(name="l2", format="2L", array=values),
    ])
    _patch(path, _field_offset(path, "l", 1), b"\0")
    _patch(path, _field_offset(path, "l2", 2) + 1, b"\0")
    native = decode(path)
    assert native.column("l").to_pylist() == [True, None, True]
    assert native.column("l2").to_pylist() == [[True, False], [False, True], [True, None]]
    compat = decode(path, mapping="compat")
    assert compat.column("l").to_pylist() == [True, False, True]
    assert compat.column("l2").to_pylist() == [[True, False], [False, True], [True, False]]
    # Both oracles read the undefined byte as False too (astropy warns that it does).
    with pytest.warns(UserWarning, match="NULL"):
        assert astropy_column(path, "l").tolist() == [True, False, True]
    assert fitsio_column(path, "l").tolist() == [True, False, True]
    assert decode(path, apply_nulls=False).column("l").null_count == 0
    np.testing.assert_array_equal(decode_numpy(path)["l"], [True, False, True])


def test_logical_bytes_other_than_t_f_read_as_the_oracles_read_them(tmp_path):
    # Bytes 0x01 (some old writers) are not 'T': astropy 8 and fitsio (CFITSIO) read them as
    # False, and so do we; only 'T' is true.
    path = write_astropy(tmp_path / "l01.fits", [
        fits.Column(name="l", format="L", array=np.array([True, True, True, True]))])
    for row, byte in enumerate((b"\x01", b"F", b"T", b"\x02")):
        _patch(path, _field_offset(path, "l", row), byte)
    expected = [False, False, True, False]
    assert astropy_column(path, "l").tolist() == expected
    assert fitsio_column(path, "l").tolist() == expected
    assert decode(path).column("l").to_pylist() == expected
    assert decode(path, mapping="compat").column("l").to_pylist() == expected
    np.testing.assert_array_equal(decode_numpy(path)["l"], expected)


def test_scaled_e_column_is_float64(tmp_path):
    # astropy's zerowidth.fits keeps Julian dates in E with TZERO=2450868.5: float32 would
    # round 2450868.6498 to 2450868.75.
    stored = np.array([0.0, 0.1498, 0.25, -0.4], np.float32)
    path = write_raw_bintable(tmp_path / "e.fits", [("TTYPE1", "date"), ("TFORM1", "E"),
                                                    ("TZERO1", 2450868.5)],
                              stored.astype(">f4").tobytes(), 4, 4)
    want = stored.astype(np.float64) + 2450868.5
    native = decode(path).column("date")
    assert str(native.type) == "double"
    np.testing.assert_array_equal(native.to_numpy(), want)
    with fits.open(path) as hdul:
        np.testing.assert_array_equal(hdul[1].data["date"], want)
    # fitsio keeps the storage width (float32) and so rounds; we follow astropy
    np.testing.assert_allclose(fitsio.read(path, 1)["date"], want, rtol=1e-7)
    import torchfits

    got = torchfits.scan(path, where="date > 2450868.6").to_arrow().column("date").to_pylist()
    assert got == [float(v) for v in want if v > 2450868.6]


def test_tnull_becomes_null(tmp_path):
    ints = np.array([5, -99, 7, -99, 0], np.int32)
    vec = np.array([[1, 255], [255, 2], [3, 4], [255, 255], [0, 0]], np.uint8)
    path = write_astropy(tmp_path / "n.fits", [
        fits.Column(name="a", format="J", null=-99, array=ints),
        fits.Column(name="v", format="2B", null=255, array=vec),
        fits.Column(name="k", format="K", null=2**63 - 1, array=np.array([2**63 - 1, 1, 2, 3, 4])),
        fits.Column(name="out", format="I", null=70000, array=np.arange(5, dtype=np.int16)),
    ])
    batch = decode(path)
    assert batch.column("a").to_pylist() == [5, None, 7, None, 0]
    assert batch.column("a").null_count == 2
    assert arrow_valid(batch.column("v")).tolist() == (vec != 255).tolist()
    assert batch.column("k").to_pylist()[0] is None
    # A TNULL outside the stored range can never match.
    assert batch.column("out").null_count == 0
    assert batch.schema.field("a").metadata[b"fits_tnull"] == b"-99"
    raw = decode(path, apply_nulls=False)
    assert raw.column("a").null_count == 0
    for expected in _oracles(path, "a"):
        assert_bits_equal(arrow_to_numpy(raw.column("a")), expected)
    assert_bits_equal(decode_numpy(path)["v"], vec)   # the tensor mapping never applies TNULL


def test_tnull_on_unsigned_column_compares_stored_value(tmp_path):
    path = write_fitsio(tmp_path / "u.fits", np.array([(0,), (1,), (65535,)], dtype=[("u", "u2")]),
                        header={"TNULL1": -32768})
    batch = decode(path)
    assert batch.column("u").type == pa.uint16()
    assert batch.column("u").to_pylist() == [None, 1, 65535]


def test_scaled_columns_match_astropy(tmp_path):
    stored_i = np.array([-32768, -1, 0, 1, 32767], np.int16)
    stored_e = np.array([1.5, -2.25, np.nan, np.inf, 0.0], np.float32)
    stored_j = np.array([10, -99, 30, 40, 50], np.int32)
    path = write_astropy(tmp_path / "s.fits", [
        fits.Column(name="i", format="I", array=stored_i),
        fits.Column(name="e", format="E", array=stored_e),
        fits.Column(name="j", format="2J", array=np.stack([stored_j, stored_j[::-1]], axis=1)),
        fits.Column(name="b", format="B", array=np.array([0, 1, 2, 3, 255], np.uint8)),
    ], extra={"TSCAL1": 0.5, "TZERO1": 3.0, "TSCAL2": 2.0, "TZERO2": -1.0,
              "TSCAL3": 0.1, "TZERO3": 1000.0, "TNULL3": -99, "TZERO4": 7})
    batch = decode(path)
    assert batch.schema.field("i").type == pa.float64()
    assert batch.schema.field("e").type == pa.float64()  # float32 would round the scaled value
    assert batch.schema.field("j").type == pa.list_(pa.float64(), 2)
    assert batch.schema.field("b").type == pa.float64()
    assert_bits_equal(arrow_to_numpy(batch.column("i")), stored_i * 0.5 + 3.0)
    assert_bits_equal(arrow_to_numpy(batch.column("i")), astropy_column(path, "i"))
    expected_e = stored_e.astype(np.float64) * 2.0 - 1.0
    assert_bits_equal(arrow_to_numpy(batch.column("e")), expected_e)
    assert_values_equal(arrow_to_numpy(batch.column("e")), astropy_column(path, "e"))
    got_j = arrow_to_numpy(batch.column("j"), fill=np.nan)
    assert np.isnan(got_j[1, 0]) and np.isnan(got_j[3, 1])
    assert arrow_valid(batch.column("j"))[1].tolist() == [False, True]
    ok = ~np.isnan(got_j)
    assert_bits_equal(got_j[ok], (astropy_column(path, "j") * 1.0)[ok])
    assert_bits_equal(arrow_to_numpy(batch.column("b")), astropy_column(path, "b"))
    compat = decode(path, mapping="compat")
    assert compat.schema.field("e").type == pa.float64()
    assert_bits_equal(arrow_to_numpy(compat.column("e")), stored_e.astype(np.float64) * 2.0 - 1.0)
    assert decode_numpy(path)["e"].dtype == np.float64


def test_nan_and_inf_stay_values_not_nulls(all_types_file):
    batch = decode(all_types_file, columns=["e", "d"])
    assert batch.column("e").null_count == 0
    assert np.isnan(arrow_to_numpy(batch.column("e"))[0])


# --------------------------------------------------------------------------------------------
# Layout: zero-width columns, empty tables, row padding, string TDIM
# --------------------------------------------------------------------------------------------

def test_zero_width_columns(tmp_path):
    a = np.array([3, -1, 2**31 - 1], np.int32)
    cards = [("TTYPE1", "z"), ("TFORM1", "0J"), ("TTYPE2", "a"), ("TFORM2", "J"),
             ("TTYPE3", "s"), ("TFORM3", "0A"), ("TTYPE4", "l"), ("TFORM4", "0L"),
             ("TTYPE5", "p"), ("TFORM5", "0PJ")]
    path = write_raw_bintable(tmp_path / "z.fits", cards, _be(a, "i4"), 3, 4)
    specs = parse_columns(table_bytes(path)[0], "bintable")
    assert [(s.width, s.offset) for s in specs] == [(0, 0), (4, 0), (0, 4), (0, 4), (0, 4)]
    batch = decode(path)
    assert batch.schema.field("z").type == pa.list_(pa.int32())  # no 0-size fixed_size_list
    assert batch.column("z").to_pylist() == [[], [], []]
    assert batch.column("s").to_pylist() == ["", "", ""]
    assert batch.column("l").to_pylist() == [[], [], []]
    assert batch.column("p").to_pylist() == [[], [], []]
    got = arrow_to_numpy(batch.column("a"))
    assert_bits_equal(got, a)
    # astropy misplaces columns behind 0L/0PJ fields; cfitsio reads this one right.
    assert_bits_equal(got, fitsio_column(path, "a"))
    got = decode_numpy(path)
    assert got["z"].shape == (3, 0)
    assert got["s"].shape == (3, 0)
    assert [v.shape for v in got["p"]] == [(0,)] * 3


@pytest.mark.parametrize("writer", ["astropy", "fitsio"])
def test_zero_row_table(tmp_path, writer):
    path = tmp_path / "empty.fits"
    if writer == "astropy":
        write_astropy(path, [fits.Column(name="a", format="J", array=np.zeros(0, np.int32)),
                             fits.Column(name="s", format="4A", array=np.zeros(0, "S4")),
                             fits.Column(name="v", format="PE()", array=[])])
    else:
        write_fitsio(path, np.zeros(0, dtype=[("a", "i4"), ("s", "S4"), ("x", "2f8")]))
    batch = decode(path)
    assert batch.num_rows == 0
    assert batch.schema.field("a").type == pa.int32()
    assert batch.schema.field("s").type == pa.string()
    got = decode_numpy(path)
    assert got["a"].shape == (0,)
    assert got["s"].shape == (0, 4)


def _be(values, dtype):
    return np.asarray(values, dtype=np.dtype(dtype).newbyteorder(">")).tobytes()


def test_row_padding_past_the_last_column(tmp_path):
    n, pad = 6, 5
    j = np.arange(n, dtype=np.int32) * -3
    d = np.linspace(-1, 1, n)
    rows = b"".join(_be([j[r]], "i4") + _be([d[r]], "f8") + b"\xAA" * pad for r in range(n))
    path = write_raw_bintable(tmp_path / "pad.fits",
                              [("TTYPE1", "j"), ("TFORM1", "J"), ("TTYPE2", "d"), ("TFORM2", "D")],
                              rows, n, 12 + pad)
    batch = decode(path)
    # No oracle here: cfitsio refuses a BINTABLE whose fields do not fill NAXIS1 (status 241)
    # and astropy steps through rows by the sum of the field widths. The rows are NAXIS1 apart
    # whatever the fields cover, so torchfits reads them where the header puts them.
    for name, expected in (("j", j), ("d", d)):
        assert_bits_equal(arrow_to_numpy(batch.column(name)), expected)
    assert_bits_equal(decode_numpy(path)["d"], d)
    assert decode(path, rows=[5, 0]).column("j").to_pylist() == [j[5], j[0]]


def test_string_tdim_is_an_array_of_strings(tmp_path):
    arr = np.zeros(3, dtype=[("sa", "S3", (2,))])
    arr["sa"] = [[b"a", b"bc"], [b"xyz", b""], [b"q ", b"rr"]]
    path = write_fitsio(tmp_path / "sa.fits", arr)
    batch = decode(path)
    assert batch.schema.field("sa").type == pa.list_(pa.string(), 2)
    assert batch.column("sa").to_pylist() == [["a", "bc"], ["xyz", ""], ["q", "rr"]]
    assert [list(r) for r in fitsio_column(path, "sa")] == [["a", "bc"], ["xyz", ""], ["q ", "rr"]]
    compat = decode(path, mapping="compat")
    assert compat.schema.field("sa").type == pa.string()
    raw = decode(path, decode_bytes=False).column("sa")
    assert raw.type == pa.list_(pa.binary(3), 2)
    assert raw.to_pylist()[0] == [b"a\0\0", b"bc\0"]


def test_non_ascii_bytes_are_replaced_not_raised(tmp_path):
    path = write_astropy(tmp_path / "u.fits",
                         [fits.Column(name="s", format="4A", array=np.array([b"ab", b"cd", b"ef"]))])
    _patch(path, _field_offset(path, "s", 1) + 1, b"\xff\xfe")
    col = decode(path).column("s")
    assert col.to_pylist() == ["ab", "c\ufffd\ufffd", "ef"]
    assert decode(path, encoding="latin-1").column("s").to_pylist()[1] == "c\xff\xfe"
    assert decode(path, binary_strings=True).column("s").to_pylist()[1] == b"c\xff\xfe"


# --------------------------------------------------------------------------------------------
# Variable-length arrays
# --------------------------------------------------------------------------------------------

def _vla_data():
    rng = np.random.default_rng(3)
    return {
        "pj": [rng.integers(-2**31, 2**31, size=k, dtype=np.int32) for k in (0, 3, 1, 5, 2)],
        "pe": [rng.standard_normal(k).astype(np.float32) for k in (4, 0, 2, 1, 3)],
        "qd": [rng.standard_normal(k) for k in (1, 2, 0, 3, 6)],
        "pi": [rng.integers(-2**15, 2**15, size=k, dtype=np.int16) for k in (2, 2, 0, 1, 4)],
        "pb": [rng.integers(0, 256, size=k, dtype=np.uint8) for k in (3, 0, 1, 2, 2)],
        "pa": ["abc", "", "x", "hello", "q z"],
    }


@pytest.fixture(params=["astropy", "fitsio"])
def vla_file(request, tmp_path):
    data = _vla_data()
    path = tmp_path / f"vla-{request.param}.fits"
    if request.param == "astropy":
        return write_astropy(path, [
            fits.Column(name="pj", format="PJ()", array=np.array(data["pj"], dtype=object)),
            fits.Column(name="pe", format="PE()", array=np.array(data["pe"], dtype=object)),
            fits.Column(name="qd", format="QD()", array=np.array(data["qd"], dtype=object)),
            fits.Column(name="pi", format="PI()", array=np.array(data["pi"], dtype=object)),
            fits.Column(name="pb", format="PB()", array=np.array(data["pb"], dtype=object)),
            fits.Column(name="pa", format="PA()", array=np.array(data["pa"], dtype=object)),
            fits.Column(name="id", format="J", array=np.arange(N)),
        ])
    arr = np.zeros(N, dtype=[(k, object) for k in data] + [("id", "i4")])
    for k, v in data.items():
        for r in range(N):
            arr[k][r] = v[r]
    arr["id"] = np.arange(N)
    return write_fitsio(path, arr)


def test_vla_columns_match_oracles(vla_file):
    batch = decode(vla_file)
    data = _vla_data()
    header = table_bytes(vla_file)[0]
    for name in ("pj", "pe", "qd", "pi", "pb"):
        col = batch.column(name)
        big = parse_columns(header, "bintable")[list(data).index(name)].descriptor == "Q"
        assert (pa.types.is_large_list if big else pa.types.is_list)(col.type)
        got = [np.asarray(v, dtype=col.type.value_type.to_pandas_dtype()) for v in col.to_pylist()]
        oracle_a = astropy_column(vla_file, name)
        oracle_f = fitsio_column(vla_file, name)
        for r in range(N):
            assert_bits_equal(got[r], data[name][r])
            assert_bits_equal(got[r], oracle_a[r])
            _check_against(got[r], oracle_f[r])   # fitsio types some empty rows int64
    strings = batch.column("pa")
    assert pa.types.is_string(strings.type)
    assert strings.to_pylist() == data["pa"]
    assert_bits_equal(arrow_to_numpy(batch.column("id")), np.arange(N, dtype=np.int32))
    compat = decode(vla_file, mapping="compat")
    assert compat.schema.field("qd").type == pa.list_(pa.float64())


def test_vla_numpy_mapping(vla_file):
    got = decode_numpy(vla_file)
    data = _vla_data()
    for name in ("pj", "pe", "qd", "pi", "pb"):
        assert isinstance(got[name], list) and len(got[name]) == N
        for r in range(N):
            assert_bits_equal(got[name][r], data[name][r])
    # Raw bytes, padding kept (fitsio stores an empty string as one NUL).
    assert [bytes(v).rstrip(b"\0").decode() for v in got["pa"]] == data["pa"]


def test_vla_heap_after_a_theap_gap(tmp_path):
    """THEAP past the end of the rows: the heap starts there, not right after the rows."""
    values = [np.array([1, -2, 3], np.int32), np.array([], np.int32), np.array([7], np.int32)]
    heap = b""
    rows = b""
    offsets = {}
    for r in (2, 0, 1):   # store the heap out of row order too
        offsets[r] = len(heap)
        heap += _be(values[r], "i4")
    for r, v in enumerate(values):
        rows += _be([len(v), offsets[r]], "i4") + _be([r * 1.5], "f8")
    path = write_raw_bintable(tmp_path / "theap.fits",
                              [("TTYPE1", "v"), ("TFORM1", "PJ(3)"), ("TTYPE2", "x"), ("TFORM2", "D")],
                              rows, 3, 16, heap=heap, gap=37)
    header, rows_view, heap_view = table_bytes(path)
    assert header["THEAP"] == 3 * 16 + 37
    assert len(heap_view) == len(heap)
    got = decode(path).column("v").to_pylist()
    assert got == [v.tolist() for v in values]
    for oracle in _oracles(path, "v"):
        assert [list(x) for x in oracle] == got


def _descriptor_offset(path, name, row):
    return _field_offset(path, name, row)


@pytest.mark.parametrize("count, offset", [(2, 10**6), (-1, 0), (2**31 - 1, 0), (1, -8)])
def test_hostile_p_descriptor_is_a_clear_error(tmp_path, count, offset):
    path = write_astropy(tmp_path / "h.fits", [
        fits.Column(name="ok", format="J", array=np.arange(4)),
        fits.Column(name="vla", format="PJ()",
                    array=np.array([np.arange(k, dtype=np.int32) for k in range(4)], dtype=object)),
    ])
    _patch(path, _descriptor_offset(path, "vla", 2), struct.pack(">ii", count, offset))
    with pytest.raises(CorruptHeaderError, match=r"'vla'.*row 2.*heap") as info:
        decode(path)
    assert isinstance(info.value, FitsError) and isinstance(info.value, ValueError)
    with pytest.raises(CorruptHeaderError, match="row 2"):
        decode_numpy(path)
    # Rows and columns that do not touch the bad descriptor still decode.
    assert decode(path, columns=["ok"]).num_rows == 4
    assert decode(path, rows=[0, 1, 3]).column("vla").to_pylist() == [[], [0], [0, 1, 2]]


def test_hostile_q_descriptor_is_a_clear_error(tmp_path):
    path = write_astropy(tmp_path / "q.fits", [
        fits.Column(name="q", format="QD()", array=np.array([np.ones(2), np.ones(3)], dtype=object)),
    ])
    _patch(path, _descriptor_offset(path, "q", 1), struct.pack(">qq", 2**62, 8))
    with pytest.raises(CorruptHeaderError, match=r"'q'.*row 1"):
        decode(path)


# --------------------------------------------------------------------------------------------
# Row selection and chunked (threaded) decoding
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row_range, expected", [
    ((1, 4), [1, 2, 3]), ((0, 99), [0, 1, 2, 3, 4]), ((3, 3), []), ((7, 9), []), ((2, None), [2, 3, 4]),
])
def test_row_ranges(all_types_file, row_range, expected):
    full = decode(all_types_file)
    part = decode(all_types_file, row_range=row_range)
    assert part.num_rows == len(expected)
    assert part.schema == full.schema
    assert_batches_equal(part, full.take(pa.array(expected, pa.int64())))


@pytest.mark.parametrize("rows", [[4, 0, 0, 2], [3], [1, 1, 1], list(range(N))[::-1], []])
def test_row_index_arrays(all_types_file, rows):
    full = decode(all_types_file)
    part = decode(all_types_file, rows=np.array(rows, dtype=np.int64))
    assert_batches_equal(part, full.take(pa.array(rows, pa.int64())))
    for name in ("k", "d", "t"):
        expected = astropy_column(all_types_file, name)[rows]
        assert_bits_equal(arrow_to_numpy(part.column(name)), expected)
    numpy_part = decode_numpy(all_types_file, rows=rows)
    assert_bits_equal(numpy_part["u4"], scalar_columns()["u4"][rows])


def test_row_selection_errors(all_types_file):
    with pytest.raises(IndexError, match="row 5 out of range for a 5-row table"):
        decode(all_types_file, rows=[0, 5])
    with pytest.raises(ValueError, match="negative"):
        decode(all_types_file, rows=[-1])
    with pytest.raises(ValueError, match="Only one of rows"):
        decode(all_types_file, rows=[0], row_range=(0, 1))
    with pytest.raises(ColumnNotFoundError, match="Column 'nope' not found"):
        decode(all_types_file, columns=["nope"])


def test_projection_order_duplicates_and_case(all_types_file):
    batch = decode(all_types_file, columns=["D", "j", "d", "s"])
    assert batch.schema.names == ["d", "j", "s"]
    assert decode(all_types_file, columns="j").schema.names == ["j"]
    assert decode(all_types_file, columns=[]).num_columns == 0
    assert decode(all_types_file, columns=[]).num_rows == N


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Make every decode above a few rows run in aligned chunks on the thread pool."""
    monkeypatch.setattr(_column_plan, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(_column_plan, "_CHUNK_ALIGN", 8)


def _chunky_table(path, n=203):
    rng = np.random.default_rng(11)
    words = np.array([b"", b"a", b"bb ", b"ccc", b"dddddd", b" e"])
    j = rng.integers(-5, 5, n).astype(np.int32)
    cols = [
        fits.Column(name="j", format="J", null=0, array=j),
        fits.Column(name="s", format="6A", array=words[rng.integers(0, len(words), n)]),
        fits.Column(name="x", format="5X", array=rng.integers(0, 2, (n, 5)).astype(bool)),
        fits.Column(name="l", format="3L", array=rng.integers(0, 2, (n, 3)).astype(bool)),
        fits.Column(name="e", format="2E", array=rng.standard_normal((n, 2)).astype(np.float32)),
        fits.Column(name="v", format="PI()", array=np.array(
            [np.arange(k % 4, dtype=np.int16) for k in range(n)], dtype=object)),
    ]
    return write_astropy(path, cols)


def test_chunked_decode_equals_single_thread(tmp_path, tiny_chunks):
    path = _chunky_table(tmp_path / "c.fits")
    serial = decode(path, threads=1)
    for threads in (2, 3):
        assert_batches_equal(decode(path, threads=threads), serial)
    assert serial.column("s").to_pylist() == [x.rstrip() for x in astropy_column(path, "s").tolist()]
    assert_bits_equal(arrow_to_numpy(serial.column("e")), astropy_column(path, "e"))
    rows = np.random.default_rng(1).integers(0, 203, 500)
    picked = decode(path, rows=rows, threads=3)
    assert_batches_equal(picked, serial.take(pa.array(rows)))
    np.testing.assert_array_equal(arrow_to_numpy(picked.column("x")), astropy_column(path, "x")[rows])
    assert_batches_equal(decode(path, row_range=(13, 190), threads=2), serial.slice(13, 177))
    assert_bits_equal(decode_numpy(path, threads=3)["j"], astropy_column(path, "j"))


# --------------------------------------------------------------------------------------------
# Headers: parsing and validation
# --------------------------------------------------------------------------------------------

def _header(*forms, naxis1=None, extra=None):
    h = {"TFIELDS": len(forms)}
    for i, f in enumerate(forms, 1):
        h[f"TFORM{i}"] = f
        h[f"TTYPE{i}"] = f"c{i}"
    h["NAXIS1"] = naxis1 if naxis1 is not None else 10_000
    h.update(extra or {})
    return h


def test_parse_columns_offsets_and_fields():
    specs = parse_columns(_header("3J", "13X", "PE(7)", "1QB", "10A", "C", "0D",
                                  extra={"TDIM5": "(5,2)", "TUNIT1": "deg", "TNULL1": -1}),
                          "bintable")
    assert [(s.code, s.repeat, s.width, s.offset) for s in specs] == [
        ("J", 3, 12, 0), ("X", 13, 2, 12), ("E", 1, 8, 14), ("B", 1, 16, 22),
        ("A", 10, 10, 38), ("C", 1, 8, 48), ("D", 0, 0, 56)]
    assert specs[2].is_vla and specs[2].descriptor == "P" and specs[2].max_elements == 7
    assert specs[3].descriptor == "Q"
    assert specs[4].tdim == (5, 2) and specs[4].shape == (2,) and specs[4].string_width == 5
    assert specs[0].tunit == "deg" and specs[0].tnull == -1
    assert field_metadata(specs[0])[b"fits_tunit"] == b"deg"


@pytest.mark.parametrize("forms, naxis1, match", [
    (("3J", "Z"), None, r"column 2 .*TFORM2"),
    (("J", "2PJ"), None, "repeat"),
    (("J", "PW"), None, "variable-length"),
    (("4J", "D"), 20, r"column 2 \('c2', TFORM2='D'\).*NAXIS1 = 20"),
])
def test_parse_columns_rejects_bad_headers(forms, naxis1, match):
    with pytest.raises(CorruptHeaderError, match=match):
        parse_columns(_header(*forms, naxis1=naxis1), "bintable")


def test_parse_columns_missing_keywords():
    with pytest.raises(CorruptHeaderError, match="TFORM2"):
        parse_columns({"TFIELDS": 2, "NAXIS1": 8, "TFORM1": "J"}, "bintable")
    with pytest.raises(CorruptHeaderError, match="TFIELDS"):
        parse_columns({"NAXIS1": 8}, "bintable")
    with pytest.raises(CorruptHeaderError, match="TBCOL1"):
        parse_columns({"TFIELDS": 1, "NAXIS1": 8, "TFORM1": "I8"}, "table")
    with pytest.raises(CorruptHeaderError, match=r"column 1 .*NAXIS1 = 8"):
        parse_columns({"TFIELDS": 1, "NAXIS1": 8, "TFORM1": "I8", "TBCOL1": 3}, "table")
    with pytest.raises(CorruptHeaderError, match="ASCII"):
        parse_columns({"TFIELDS": 1, "NAXIS1": 8, "TFORM1": "J8", "TBCOL1": 1}, "table")


def test_inconsistent_tdim():
    # Fewer elements than the repeat count is allowed by the standard: read as a flat vector.
    spec = parse_columns(_header("6E", extra={"TDIM1": "(2,2)"}), "bintable")[0]
    assert spec.shape is None
    assert arrow_type(spec) == pa.list_(pa.float32(), 6)
    assert parse_columns(_header("6E", extra={"TDIM1": "junk"}), "bintable")[0].tdim is None
    # More is a lie about the field's size (fitsio refuses it too).
    with pytest.raises(CorruptHeaderError, match=r"TDIM1 = '\(4,2\)' describes 8 elements, more than "
                                                 r"the repeat count 6 of TFORM1"):
        parse_columns(_header("6E", extra={"TDIM1": "(4,2)"}), "bintable")


def test_repeat_counts_beyond_32_bits_are_refused():
    with pytest.raises(CorruptHeaderError, match=r"TFORM1 = '2147483648I': repeat count 2147483648"):
        parse_columns({"TFIELDS": 1, "NAXIS1": 2**32, "TFORM1": "2147483648I"}, "bintable")


def test_conversion_kinds():
    def spec(form, **kw):
        return parse_columns(_header(form, extra=kw), "bintable")[0]

    assert conversion(spec("B", TZERO1=-128)).dtype == np.int8
    assert conversion(spec("B", TZERO1=-128), "compat").kind == "scale"
    assert conversion(spec("K", TZERO1=2**63)).dtype == np.uint64
    assert conversion(spec("I", TZERO1=32768, TSCAL1=2)).kind == "scale"
    assert conversion(spec("E", TSCAL1=2)).dtype == np.float64
    assert conversion(spec("E", TSCAL1=2), "compat").dtype == np.float64


def test_truncated_rows_raise_only_when_touched(all_types_file):
    header, rows, heap = table_bytes(all_types_file)
    specs = parse_columns(header, "bintable")
    short = rows[: header["NAXIS1"] * 3 + 5]
    ok = decode_table(short, heap, specs, header["NAXIS1"], header["NAXIS2"], row_range=(0, 3))
    assert ok.num_rows == 3
    with pytest.raises(TruncatedFileError, match="truncated"):
        decode_table(short, heap, specs, header["NAXIS1"], header["NAXIS2"])
    with pytest.raises(TruncatedFileError):
        decode_table(short, heap, specs, header["NAXIS1"], header["NAXIS2"], rows=[4])


def test_index_splits_rows_and_heap_at_theap(tmp_path):
    # 2 rows of 8 bytes, a 2-byte gap, then the heap: the index places both from THEAP.
    desc = np.array([(2, 0), (2, 2)], ">i4").tobytes()
    path = write_raw_bintable(tmp_path / "theap.fits", [("TTYPE1", "V"), ("TFORM1", "1PB(2)")],
                              desc, 2, 8, heap=bytes(range(10, 14)), gap=2)
    rows, heap = TableSource.open(path, 1).buffers()
    assert bytes(rows) == desc and bytes(heap) == bytes(range(10, 14))
    assert decode(path).column("V").to_pylist() == [[10, 11], [12, 13]]


def test_arrow_schema_matches_decode(all_types_file):
    header = table_bytes(all_types_file)[0]
    specs = parse_columns(header, "bintable")
    schema = arrow_schema(specs, columns=["t", "s", "u8"])
    assert schema == decode(all_types_file, columns=["t", "s", "u8"]).schema
    assert [s.name for s in select_columns(specs, ["T", 0])] == ["t", "b"]


def test_column_spec_is_frozen():
    spec = parse_columns(_header("J"), "bintable")[0]
    assert isinstance(spec, ColumnSpec)
    with pytest.raises(AttributeError):
        spec.width = 3  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# ASCII tables
# --------------------------------------------------------------------------------------------

ASCII_INTS = np.array([0, -1, 12345, -99999, 7], np.int64)
ASCII_REALS = np.array([1.5, -2.25e-10, 0.0, 123456.789, -1e300])


@pytest.fixture(params=["astropy", "fitsio"])
def ascii_file(request, tmp_path):
    path = tmp_path / f"ascii-{request.param}.fits"
    strings = np.array([b"ab", b"", b"cde", b" f", b"ghij"])
    if request.param == "astropy":
        return write_astropy(path, [
            fits.Column(name="i", format="I8", array=ASCII_INTS),
            fits.Column(name="wide", format="I20", array=ASCII_INTS * 10**12),
            fits.Column(name="d", format="D25.17", array=ASCII_REALS),
            fits.Column(name="e", format="E15.7", array=np.array([1.5, -2.5e-10, 0, 3e30, -7.25])),
            fits.Column(name="f", format="F12.4", array=np.array([1.5, -2.25, 0.0, 123456.789, 3.0])),
            fits.Column(name="s", format="A4", array=strings),
        ], ascii=True)
    # fitsio writes int32 as I12 and has no int64 ASCII format.
    arr = np.zeros(N, dtype=[("i", "i4"), ("wide", "i4"), ("d", "f8"), ("s", "S4")])
    arr["i"] = ASCII_INTS
    arr["wide"] = [0, -2**31, 2**31 - 1, 1, -1]
    arr["d"] = ASCII_REALS
    arr["s"] = strings
    return write_fitsio(path, arr, table_type="ascii")


def test_ascii_columns_match_oracles(ascii_file):
    header = table_bytes(ascii_file)[0]
    assert kind_of(header) == "table"
    batch = decode(ascii_file)
    assert batch.schema.field("wide").type == pa.int64()
    for name in [n for n in batch.schema.names if n != "s"]:
        got = arrow_to_numpy(batch.column(name))
        # Text is parsed correctly rounded, as astropy (Python's float) does.
        _check_against(got, astropy_column(ascii_file, name))
        reference = fitsio_column(ascii_file, name)
        if got.dtype.kind == "f":
            # cfitsio's own text-to-double conversion can be one unit in the last place off.
            np.testing.assert_array_max_ulp(got, reference.astype(got.dtype), maxulp=1)
        else:
            _check_against(got, reference)
    assert batch.column("s").to_pylist() == [x.rstrip() for x in astropy_column(ascii_file, "s").tolist()]
    compat = decode(ascii_file, mapping="compat", columns=[n for n in batch.schema.names if n != "wide"])
    assert compat.schema.field("i").type == pa.int32()
    wide = astropy_column(ascii_file, "wide")
    if np.abs(wide).max() > 2**31:
        # 1.2.3 read every Iw field as int32: values that do not fit are refused, not wrapped.
        with pytest.raises(UnsupportedColumnError, match=r"'wide'.*row 1.*int32"):
            decode(ascii_file, mapping="compat", columns=["wide"])
    else:
        compat_wide = decode(ascii_file, mapping="compat", columns=["wide"]).column("wide")
        assert compat_wide.type == pa.int32()
        np.testing.assert_array_equal(arrow_to_numpy(compat_wide), wide)
    if "e" in compat.schema.names:
        assert compat.schema.field("e").type == pa.float32()
    numpy_cols = decode_numpy(ascii_file, columns=["i", "d", "s"])  # tensor mapping: Iw is int32 too
    assert numpy_cols["s"].dtype == np.uint8 and numpy_cols["s"].shape == (N, 4)
    assert_bits_equal(numpy_cols["d"], astropy_column(ascii_file, "d"))
    np.testing.assert_array_equal(numpy_cols["i"], fitsio_column(ascii_file, "i"))


def _ascii_raw(tmp_path, fields, forms, tnull=None):
    """An ASCII table whose single row set is given as text (TBCOLs packed left to right)."""
    widths = [len(f) for f in fields[0]]
    cols = []
    pos = 1
    for i, (form, w) in enumerate(zip(forms, widths), 1):
        cols.append((f"TTYPE{i}", f"c{i}"))
        cols.append((f"TFORM{i}", form))
        cols.append((f"TBCOL{i}", pos))
        if tnull and i in tnull:
            cols.append((f"TNULL{i}", tnull[i]))
        pos += w
    data = "".join("".join(row) for row in fields).encode("ascii")
    header = fits.Header()
    for k, v in [("XTENSION", "TABLE"), ("BITPIX", 8), ("NAXIS", 2), ("NAXIS1", pos - 1),
                 ("NAXIS2", len(fields)), ("PCOUNT", 0), ("GCOUNT", 1), ("TFIELDS", len(forms))]:
        header[k] = v
    for k, v in cols:
        header[k] = v
    path = tmp_path / "raw-ascii.fits"
    with open(path, "wb") as f:
        f.write(fits.PrimaryHDU().header.tostring().encode("ascii"))
        f.write(header.tostring().encode("ascii"))
        f.write(data + b" " * (-len(data) % 2880))
    return str(path)


def test_ascii_fortran_reals_blanks_and_tnull(tmp_path):
    rows = [
        ("     12", "   1234", " 1.5D+02", "  **  ", "1.0-03  "),
        ("       ", "  -1.25", " 1.0E-03", "    7 ", " 2.5+100"),
        ("    -99", "       ", "  -5E2  ", "  **  ", "   -inf "),
    ]
    path = _ascii_raw(tmp_path, rows, ["I7", "F7.2", "D8.1", "I6", "E8.1"],
                      tnull={1: "-99", 4: "**"})
    batch = decode(path)
    assert batch.column("c1").to_pylist() == [12, None, None]
    # Without a decimal point the last d digits are the fraction, exponent or not (the
    # Fortran input rule the standard adopts; cfitsio reads them the same way).
    assert batch.column("c2").to_pylist() == [12.34, -1.25, None]
    assert batch.column("c3").to_pylist() == [150.0, 1.0e-3, -50.0]
    assert batch.column("c4").to_pylist() == [None, 7, None]
    assert_bits_equal(arrow_to_numpy(batch.column("c2"))[:2], fitsio_column(path, "c2")[:2])
    assert_bits_equal(arrow_to_numpy(batch.column("c3")), fitsio_column(path, "c3"))
    assert_bits_equal(arrow_to_numpy(batch.column("c1"))[:1], fitsio_column(path, "c1")[:1].astype(np.int32))
    # Fortran also writes exponents with a bare sign (neither oracle reads these).
    assert batch.column("c5").to_pylist() == [1.0e-3, 2.5e100, float("-inf")]
    raw = decode(path, apply_nulls=False)
    assert raw.column("c1").to_pylist() == [12, 0, -99]
    got = decode_numpy(path)
    np.testing.assert_array_equal(got["c1"], [12, 0, -99])   # blank → 0, as cfitsio reads it
    np.testing.assert_array_equal(got["c1"], fitsio_column(path, "c1"))
    assert np.isnan(got["c2"][2])


def test_ascii_garbage_field_is_a_clear_error(tmp_path):
    path = _ascii_raw(tmp_path, [("  12",), (" 1x3",)], ["I4"])
    with pytest.raises(CorruptHeaderError, match=r"'c1'.*row 1.*' 1x3'"):
        decode(path)
    header, rows, heap = table_bytes(path)
    specs = parse_columns(header, "table")
    assert decode_ascii_table(rows, specs, header["NAXIS1"], 2, rows=[0]).column("c1").to_pylist() == [12]


def test_ascii_chunked_equals_serial(ascii_file, tiny_chunks):
    header, rows, _ = table_bytes(ascii_file)
    specs = parse_columns(header, "table")
    many = np.random.default_rng(5).integers(0, N, 300)
    serial = decode_ascii_table(rows, specs, header["NAXIS1"], N, rows=many, options=DecodeOptions(threads=1))
    assert_batches_equal(decode_ascii_table(rows, specs, header["NAXIS1"], N, rows=many,
                                            options=DecodeOptions(threads=3)), serial)
    assert serial.column("s").to_pylist()[:3] == [
        x.rstrip() for x in np.asarray(astropy_column(ascii_file, "s"))[many[:3]].tolist()]


# --------------------------------------------------------------------------------------------
# More variable-length element types
# --------------------------------------------------------------------------------------------

def test_vla_complex_and_logical(tmp_path):
    pc = [np.array([1 + 2j, 3 - 4j], np.complex64), np.array([], np.complex64), np.array([5j], np.complex64)]
    qm = [np.array([1 + 2j]), np.array([7 + 8j, np.nan * 1j]), np.array([], np.complex128)]
    pl = [np.array([1, 0, 1], bool), np.array([], bool), np.ones(9, bool)]
    path = write_astropy(tmp_path / "vc.fits", [
        fits.Column(name="pc", format="PC()", array=np.array(pc, dtype=object)),
        fits.Column(name="qm", format="QM()", array=np.array(qm, dtype=object)),
        fits.Column(name="pl", format="PL()", array=np.array(pl, dtype=object)),
    ])
    batch = decode(path)
    assert batch.schema.field("pc").type == pa.list_(pa.list_(pa.float32(), 2))
    assert batch.schema.field("qm").type == pa.large_list(pa.list_(pa.float64(), 2))
    got = decode_numpy(path)
    for name, expected in (("pc", pc), ("qm", qm)):
        oracle_a, oracle_f = astropy_column(path, name), fitsio_column(path, name)
        for r in range(3):
            flat = batch.column(name)[r].values.flatten().to_numpy(zero_copy_only=False)
            pairs = flat.reshape(-1, 2).astype(expected[r].real.dtype)
            assert_bits_equal(complex_from_pairs(pairs), expected[r])
            assert_bits_equal(got[name][r], expected[r])
            assert_bits_equal(got[name][r], oracle_a[r])
            assert_bits_equal(got[name][r], oracle_f[r])
    assert batch.column("pl").to_pylist() == [v.tolist() for v in pl]
    assert [v.tolist() for v in got["pl"]] == [v.tolist() for v in pl]
    assert [v.astype(bool).tolist() for v in fitsio_column(path, "pl")] == [v.tolist() for v in pl]


def test_vla_bits(tmp_path):
    """PX: the descriptor counts bits, stored MSB first in ceil(n/8) heap bytes."""
    bits = [np.array([1, 0, 1], bool), np.array([], bool), np.array([1, 1, 0, 0, 1, 0, 1, 0, 1, 1], bool)]
    heap = b""
    rows = b""
    for b in bits:
        packed = np.packbits(b).tobytes()
        rows += _be([len(b), len(heap)], "i4")
        heap += packed
    path = write_raw_bintable(tmp_path / "px.fits", [("TTYPE1", "px"), ("TFORM1", "PX(10)")],
                              rows, 3, 8, heap=heap)
    assert decode(path).column("px").to_pylist() == [b.tolist() for b in bits]
    assert [v.tolist() for v in decode_numpy(path)["px"]] == [b.tolist() for b in bits]


@pytest.mark.parametrize("width", [1, 7, 8, 9, 16, 23])
def test_strip_rules_on_random_padding(tmp_path, width):
    """Trailing runs of spaces and NULs in any mixture, against Python's own rstrip."""
    rng = np.random.default_rng(width)
    alphabet = np.frombuffer(b"ab \0\xe9", dtype=np.uint8)
    cells = rng.choice(alphabet, size=(300, width), p=[0.2, 0.2, 0.3, 0.25, 0.05]).astype(np.uint8)
    path = write_raw_bintable(tmp_path / "pad.fits", [("TTYPE1", "s"), ("TFORM1", f"{width}A")],
                              cells.tobytes(), 300, width)
    raw = [bytes(r) for r in cells]
    blank = decode(path, binary_strings=True).column("s").to_pylist()
    assert blank == [r.rstrip(b" \0") for r in raw]
    nul = decode(path, binary_strings=True, strip=False).column("s").to_pylist()
    assert nul == [r.rstrip(b"\0") for r in raw]
    text = decode(path, encoding="latin-1").column("s").to_pylist()
    assert text == [r.rstrip(b" \0").decode("latin-1") for r in raw]
    assert decode(path, decode_bytes=False).column("s").to_pylist() == raw


# Fields the string kernel treats differently: one word (8A, one string a row), up to 8 bytes
# (overlapping 2- and 4-byte loads), longer (8-byte words, the padding in the last one).
EDGE_STRINGS = [b"ab\0cd", b"  lead", b"trail  ", b"", b" ", b"\0", b" \0 \0", b"x\0 y",
                b"\xe9t\xe9", b"full"]


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24])
def test_string_edges_against_astropy_and_fitsio(tmp_path, width):
    """Leading blanks kept, a NUL inside kept, trailing blanks and NULs dropped, all-blank
    fields empty, for every width class of the string kernel; astropy and fitsio see the same
    field bytes."""
    cells = [(v * (1 + width // max(len(v), 1)))[:width].ljust(width, b" ") if v.strip(b" \0") else
             v[:width].ljust(width, b"\0") for v in EDGE_STRINGS]
    cells += [b" " * width, b"\0" * width, (b"z" * width)]
    data = b"".join(b"\x01" + c + b"\x02" for c in cells)   # the field sits between other bytes
    path = write_raw_bintable(tmp_path / "edge.fits",
                              [("TTYPE1", "a"), ("TFORM1", "B"), ("TTYPE2", "s"), ("TFORM2", f"{width}A"),
                               ("TTYPE3", "b"), ("TFORM3", "B")], data, len(cells), width + 2)
    want = [c.rstrip(b" \0") for c in cells]
    assert decode(path, binary_strings=True).column("s").to_pylist() == want
    assert decode(path, encoding="latin-1").column("s").to_pylist() == [w.decode("latin-1") for w in want]
    # NumPy drops trailing NULs, astropy's text view trailing blanks; a mixed tail (" \0 ") is
    # dropped whole by torchfits only, so the oracles are compared after the same rstrip.
    by_astropy = np.asarray(fits.getdata(path, 1).base["s"])
    assert [bytes(v).rstrip(b" \0") for v in by_astropy] == want
    ascii_rows = [i for i, c in enumerate(cells) if max(c, default=0) < 0x80]
    by_fitsio = fitsio.read(path, ext=1, rows=ascii_rows)["s"]   # fitsio decodes text as ASCII
    assert [str(v).encode().rstrip(b" \0") for v in by_fitsio] == [want[i] for i in ascii_rows]
    picked = decode(path, binary_strings=True, rows=[len(cells) - 1, 0, 0, 3]).column("s").to_pylist()
    assert picked == [want[-1], want[0], want[0], want[3]]
    assert decode(path, binary_strings=True, row_range=(0, 0)).column("s").to_pylist() == []


def test_string_kernel_empty_table(tmp_path):
    path = write_raw_bintable(tmp_path / "empty.fits", [("TTYPE1", "s"), ("TFORM1", "8A")], b"", 0, 8)
    col = decode(path).column("s")
    assert col.type == pa.string() and len(col) == 0
    col.validate(full=True)


def test_string_kernel_matches_rstrip_property():
    """Random fixed-width character fields (several per row through TDIM, any width, any
    mixture of blanks, NULs, text and bytes >= 0x80), every row path (contiguous, gathered,
    parallel chunks): the Arrow strings are the fields with trailing blanks and NULs removed."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from unittest import mock

    from torchfits.fits.columns import parse_columns

    @st.composite
    def tables(draw):
        width = draw(st.integers(1, 20))
        per_row = draw(st.sampled_from([1, 1, 2, 3]))
        nrows = draw(st.integers(0, 60))
        pad = draw(st.integers(0, 5))
        byte = st.sampled_from(b"a Z\0 \0\xe9~")
        field = st.one_of(st.binary(min_size=width, max_size=width),
                          st.lists(byte, min_size=width, max_size=width).map(bytes),
                          st.sampled_from([b" " * width, b"\0" * width]))
        cells = draw(st.lists(field, min_size=nrows * per_row, max_size=nrows * per_row))
        rows = draw(st.none() | st.lists(st.integers(0, max(nrows - 1, 0)), max_size=40)
                    .filter(lambda r: nrows > 0 or not r))
        return width, per_row, nrows, pad, cells, rows

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(tables(), st.sampled_from([1, 2, 3]), st.booleans())
    def check(table, threads, strip):
        width, per_row, nrows, pad, cells, rows = table
        # A byte column of `pad` bytes before the strings moves their offset in the row.
        header = {"XTENSION": "BINTABLE", "NAXIS1": pad + width * per_row, "NAXIS2": nrows,
                  "TFIELDS": 2, "TTYPE1": "p", "TFORM1": f"{pad}B",
                  "TTYPE2": "s", "TFORM2": f"{width * per_row}A"}
        if per_row > 1:
            header["TDIM2"] = f"({width},{per_row})"
        specs = parse_columns(header, "bintable")
        data = b"".join(b"\x07" * pad + b"".join(cells[r * per_row:(r + 1) * per_row])
                        for r in range(nrows))
        with mock.patch.object(_column_plan, "_PARALLEL_MIN_BYTES", 0), \
                mock.patch.object(_column_plan, "_CHUNK_ALIGN", 8):
            got = decode_table(data, b"", specs, pad + width * per_row, nrows, rows=rows, columns=["s"],
                               options=DecodeOptions(binary_strings=True, strip=strip, threads=threads))
        col = got.column("s")
        col.validate(full=True)
        chosen = range(nrows) if rows is None else rows
        cut = (lambda c: c.rstrip(b" \0")) if strip else (lambda c: c.rstrip(b"\0"))
        want = [[cut(c) for c in cells[r * per_row:(r + 1) * per_row]] for r in chosen]
        flat = col.flatten().to_pylist() if per_row > 1 else col.to_pylist()
        assert flat == [v for row in want for v in row]

    check()


def test_numpy_path_needs_no_pyarrow(tmp_path):
    """`fits.columns` and the NumPy decode import neither pyarrow nor torch."""
    rows = np.ones((3, 2), dtype=">f4").tobytes()
    code = (
        "import sys\n"
        "sys.modules['pyarrow'] = None\n"
        "sys.modules['torch'] = None\n"
        "from torchfits.fits.columns import parse_columns\n"
        "from torchfits.tables.decode import decode_table_numpy\n"
        "h = {'TFIELDS': 1, 'NAXIS1': 8, 'TFORM1': '2E', 'TTYPE1': 'a'}\n"
        f"out = decode_table_numpy({rows!r}, b'', parse_columns(h, 'bintable'), 8, 3)\n"
        "assert out['a'].shape == (3, 2) and float(out['a'].sum()) == 6.0\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(tmp_path), env=env)


def test_ascii_scaled_fields(tmp_path):
    path = _ascii_raw(tmp_path, [("   10", " 1.50"), ("  -3 ", "-2.25"), ("     ", " 0.00")], ["I5", "F5.2"])
    fits.setval(path, "TSCAL1", value=0.5, ext=1)
    fits.setval(path, "TZERO1", value=100.0, ext=1)
    fits.setval(path, "TSCAL2", value=4.0, ext=1)
    batch = decode(path)
    assert batch.schema.field("c1").type == pa.float64()
    assert batch.column("c1").to_pylist() == [105.0, 98.5, None]
    assert batch.column("c2").to_pylist() == [6.0, -9.0, 0.0]
    assert_bits_equal(arrow_to_numpy(batch.column("c1"))[:2], fitsio_column(path, "c1")[:2])
    assert_bits_equal(arrow_to_numpy(batch.column("c2")), fitsio_column(path, "c2"))


def test_scalar_logical_bytes_any_alignment(tmp_path, tiny_chunks):
    """'T', 'F', zero and other bytes in a scalar L column, decoded whole, by ranges that
    start and stop off a byte of output bits, and by row indices; nulls only natively."""
    n = 3_001
    raw = np.random.default_rng(5).choice(np.frombuffer(b"TF\0x", np.uint8), n)
    rec = np.zeros(n, dtype=[("a", ">i2"), ("l", "u1"), ("b", ">f8")])
    rec["l"] = raw
    header = {"NAXIS1": 11, "NAXIS2": n, "TFIELDS": 3, "TFORM1": "I", "TTYPE1": "a",
              "TFORM2": "L", "TTYPE2": "l", "TFORM3": "D", "TTYPE3": "b"}
    specs = parse_columns(header, "bintable")
    data = rec.tobytes()
    truth = raw == ord("T")
    defined = raw != 0
    for kwargs, pick in [({}, slice(None)), ({"row_range": (3, 2_990)}, slice(3, 2_990)),
                         ({"row_range": (1_017, 1_031)}, slice(1_017, 1_031))]:
        for threads in (1, 3):
            got = decode_table(data, b"", specs, 11, n, columns=["l"],
                               options=DecodeOptions(threads=threads), **kwargs)
            col = got.column("l")
            want = [bool(t) if d else None for t, d in zip(truth[pick], defined[pick])]
            assert col.to_pylist() == want
            assert col.null_count == int((~defined[pick]).sum())
            compat = decode_table(data, b"", specs, 11, n, columns=["l"],
                                  options=DecodeOptions(mapping="compat", threads=threads),
                                  **kwargs).column("l")
            assert compat.null_count == 0 and compat.to_pylist() == truth[pick].tolist()
    rows = np.random.default_rng(6).integers(0, n, 2_500)
    got = decode_table(data, b"", specs, 11, n, columns=["l"], rows=rows).column("l")
    assert got.to_pylist() == [bool(truth[r]) if defined[r] else None for r in rows]

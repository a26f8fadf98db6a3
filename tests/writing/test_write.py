"""Writing FITS: images of every dtype, tables from dicts and Arrow, headers, safety."""
from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from _writecheck import check_image_roundtrip, check_table_columns, fitsverify_ok, leftovers
from torchfits.errors import UInt64WriteError
from torchfits.fits.header import Header
from torchfits.writing.api import write, write_tensor
from torchfits.writing.atomic import Sink

IMAGE_DTYPES = ["u1", "i1", "i2", "u2", "i4", "u4", "i8", "f4", "f8"]


def _image(dtype: str, shape=(5, 7)) -> np.ndarray:
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.normal(size=shape).astype(dt)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    a.flat[0], a.flat[1] = info.min, info.max
    return a


@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_image_dtypes_roundtrip(tmp_path, dtype):
    arr = _image(dtype)
    path = tmp_path / "img.fits"
    write(path, arr)
    check_image_roundtrip(path, arr)


def test_image_3d_and_multi_extension(tmp_path):
    cube = _image("f4", (3, 4, 5))
    path = tmp_path / "mef.fits"
    write(path, [cube, {"data": _image("i2"), "header": {"EXTNAME": "SCI"}}, _image("u2", (2, 2))])
    check_image_roundtrip(path, cube, 0)
    check_image_roundtrip(path, _image("i2"), 1)
    check_image_roundtrip(path, _image("u2", (2, 2)), 2)
    fitsverify_ok(path)


def test_tensor_images(tmp_path):
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.int16).reshape(3, 4)
    write_tensor(tmp_path / "t.fits", t)
    check_image_roundtrip(tmp_path / "t.fits", t.numpy())
    with pytest.raises(TypeError, match="torch.Tensor"):
        write_tensor(tmp_path / "n.fits", np.zeros(3))


def test_unsupported_image_types(tmp_path):
    with pytest.raises(UInt64WriteError, match="uint64"):
        write(tmp_path / "a.fits", np.zeros(3, np.uint64))
    with pytest.raises(RuntimeError, match="Unsupported tensor dtype"):
        write(tmp_path / "b.fits", np.zeros(3, np.float16))
    with pytest.raises(RuntimeError, match="Unsupported data type"):
        write(tmp_path / "c.fits", "not data")
    with pytest.raises(RuntimeError, match="At least one writable HDU"):
        write(tmp_path / "d.fits", [])
    assert leftovers(tmp_path) == []
    assert not any(p.endswith(".fits") for p in os.listdir(tmp_path))


def test_overwrite_refuses_and_keeps_mode(tmp_path):
    path = tmp_path / "x.fits"
    write(path, np.zeros(4, "f4"))
    os.chmod(path, 0o640)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write(path, np.ones(4, "f4"))
    write(path, np.ones(4, "f4"), overwrite=True)
    assert os.stat(path).st_mode & 0o777 == 0o640
    check_image_roundtrip(path, np.ones(4, "f4"))


def test_header_values_parse_identically(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    fitsio = pytest.importorskip("fitsio")
    long_text = "a long value with 'quotes' " * 5
    h = Header()
    h["INTV"] = (42, "an int")
    h["NEGF"] = -1.25e-30
    h["BIGF"] = 6.02214076e23
    h["FLAG"] = False
    h["NAME"] = "O'Brien"
    h["LONGSTR"] = long_text
    h["HIERARCH ESO DET CHIP NAME"] = "CCD-1"
    h["EMPTY"] = ""
    h.add_history("first step")
    h.add_comment("a comment line")
    h["NAXIS"] = 99  # structural: ignored
    path = tmp_path / "h.fits"
    write(path, np.zeros((2, 2), "f4"), header=h)
    a = fits.getheader(path)
    f = fitsio.read_header(str(path))
    import torchfits

    t = torchfits.read_header(str(path))
    for hdr in (a, f, t):
        assert hdr["INTV"] == 42
        assert hdr["NEGF"] == -1.25e-30
        assert hdr["BIGF"] == 6.02214076e23
        assert hdr["FLAG"] is False or hdr["FLAG"] == False  # noqa: E712 - fitsio gives bool
        assert hdr["NAME"] == "O'Brien"
        assert hdr["NAXIS"] == 2
    # Trailing blanks of a string value are not significant in FITS.
    assert a["LONGSTR"].rstrip() == long_text.rstrip()
    assert t["LONGSTR"].rstrip() == long_text.rstrip()
    assert a["ESO DET CHIP NAME"] == "CCD-1"
    assert list(a["HISTORY"]) == ["first step"]
    assert a.comments["INTV"] == "an int"
    fitsverify_ok(path)


def _columns() -> dict:
    n = 6
    rng = np.random.default_rng(2)
    return {
        "b": np.array([True, False, True, True, False, False]),
        "u1": np.arange(n, dtype="u1"),
        "i1": np.array([-128, -1, 0, 1, 2, 127], "i1"),
        "i2": rng.integers(-1000, 1000, n).astype("i2"),
        "u2": np.array([0, 1, 2, 3, 40000, 65535], "u2"),
        "i4": rng.integers(-10**9, 10**9, n).astype("i4"),
        "u4": np.array([0, 1, 2, 3, 2**31, 2**32 - 1], "u4"),
        "i8": rng.integers(-10**15, 10**15, n),
        "f4": rng.normal(size=n).astype("f4"),
        "f8": rng.normal(size=n),
        "c16": (rng.normal(size=n) + 1j * rng.normal(size=n)),
        "vec": rng.normal(size=(n, 3)).astype("f4"),
        "s": ["a", "bb", "", "dddd", "e e", "f"],
    }


def test_dict_table_roundtrip(tmp_path):
    cols = _columns()
    path = tmp_path / "t.fits"
    write(path, cols, header={"EXTNAME": "CAT"})
    expected = {k: v for k, v in cols.items() if k not in ("c16",)}
    check_table_columns(path, expected)
    fitsio = pytest.importorskip("fitsio")
    np.testing.assert_array_equal(fitsio.read(str(path), ext="CAT")["c16"], cols["c16"])
    fitsverify_ok(path)


def test_arrow_table_nulls_lists_and_metadata(tmp_path):
    import pyarrow as pa
    fits = pytest.importorskip("astropy.io.fits")
    import torchfits

    field = pa.field("flux", pa.float32(), metadata={"fits_tunit": "Jy", "fits_tucd": "phot.flux"})
    table = pa.table({
        "id": pa.array([1, None, 3, 4], pa.int32()),
        "flux": pa.array([1.5, None, 2.5, 3.0], pa.float32()),
        "ok": pa.array([True, None, False, True]),
        "name": pa.array(["a", "bbb", None, "cc"]),
        "spec": pa.array([[1.0, 2.0], [], None, [3.0]], pa.list_(pa.float64())),
        "m": pa.array([[1, 2, 3, 4, 5, 6]] * 4, pa.list_(pa.int16(), 6)),
        "u": pa.array([0, 1, 2**63, 2**64 - 1], pa.uint64()),
    }).cast(pa.schema([pa.field("id", pa.int32()), field, pa.field("ok", pa.bool_()),
                       pa.field("name", pa.string()), pa.field("spec", pa.list_(pa.float64())),
                       pa.field("m", pa.list_(pa.int16(), 6), metadata={"fits_tdim": "(3,2)"}),
                       pa.field("u", pa.uint64())]))
    path = tmp_path / "arrow.fits"
    write(path, table)
    back = torchfits.scan(str(path)).to_arrow()
    assert back.column("id").to_pylist() == [1, None, 3, 4]
    flux = back.column("flux").to_pylist()
    assert flux[0] == 1.5 and np.isnan(flux[1])
    assert back.column("ok").to_pylist() == [True, None, False, True]
    assert back.column("name").to_pylist() == ["a", "bbb", "", "cc"]
    assert back.column("spec").to_pylist() == [[1.0, 2.0], [], [], [3.0]]
    assert back.column("u").to_pylist() == [0, 1, 2**63, 2**64 - 1]
    assert back.schema.field("flux").metadata[b"fits_tunit"] == b"Jy"
    with fits.open(path) as h:
        cols = h[1].columns
        assert cols["flux"].unit == "Jy"
        assert cols["m"].dim == "(3,2)"
        assert h[1].header["TUCD2"] == "phot.flux"
        assert list(h[1].data["spec"][0]) == [1.0, 2.0]
    fitsverify_ok(path)


def test_arrow_roundtrip_keeps_reader_metadata(tmp_path):
    import torchfits

    src = tmp_path / "src.fits"
    write(src, {"a": np.arange(4, dtype="u2"), "v": np.ones((4, 2)), "i8": np.arange(4, dtype="i1")},
          header={"EXTNAME": "SRC"})
    table = torchfits.scan(str(src)).to_arrow()
    dst = tmp_path / "dst.fits"
    write(dst, table)
    again = torchfits.scan(str(dst)).to_arrow()
    assert again.equals(table.replace_schema_metadata(again.schema.metadata)) or \
        again.to_pylist() == table.to_pylist()
    assert torchfits.read_header(str(dst), 1)["EXTNAME"] == "SRC"


def test_streaming_reader_is_written_batch_by_batch(tmp_path):
    import pyarrow as pa

    import torchfits

    schema = pa.schema([("x", pa.int64()), ("y", pa.float64()), ("s", pa.string()),
                        ("l", pa.list_(pa.int32()))])
    seen = []

    def batches():
        for k in range(5):
            seen.append(k)
            n = 100 + k
            yield pa.record_batch([pa.array(np.arange(n) + 1000 * k), pa.array(np.full(n, k, float)),
                                   pa.array(["abcd"] * n),
                                   pa.array([[k] * (i % 4) for i in range(n)], pa.list_(pa.int32()))],
                                  schema=schema)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    path = tmp_path / "stream.fits"
    write(path, reader)
    assert seen == [0, 1, 2, 3, 4]
    back = torchfits.scan(str(path)).to_arrow()
    assert back.num_rows == sum(100 + k for k in range(5))
    assert back.column("x").to_pylist()[100:102] == [1000, 1001]
    assert back.column("l").to_pylist()[103] == [1, 1, 1]
    fitsverify_ok(path)


def test_pandas_and_polars(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5], "s": ["x", "yy", "zzz"]})
    write(tmp_path / "pd.fits", df)
    check_table_columns(tmp_path / "pd.fits", {"a": [1, 2, 3], "b": [0.5, 1.5, 2.5], "s": ["x", "yy", "zzz"]})
    pl = pytest.importorskip("polars")
    write(tmp_path / "pl.fits", pl.DataFrame({"a": [1, 2], "s": ["p", "q"]}))
    check_table_columns(tmp_path / "pl.fits", {"a": [1, 2], "s": ["p", "q"]})


def test_table_write_compat(tmp_path):
    from torchfits import table

    path = tmp_path / "c.fits"
    table.write(path, {"ra": np.arange(3.0), "n": np.arange(3)}, extname="OBJ",
                schema={"ra": {"unit": "deg"}, "n": {"format": "J", "tnull": -1}})
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path) as h:
        assert h[1].name == "OBJ"
        assert h[1].columns["ra"].unit == "deg"
        assert h[1].columns["n"].format == "J" and h[1].columns["n"].null == -1
    with pytest.raises(FileExistsError):
        table.write(path, {"a": [1]})
    with pytest.raises(ValueError, match="non-empty"):
        table.write(tmp_path / "e.fits", {})
    with pytest.raises(RuntimeError, match="Column row count mismatch"):
        table.write(tmp_path / "m.fits", {"a": [1, 2], "b": [1]})
    with pytest.raises(ValueError, match="table_type"):
        table.write(tmp_path / "t.fits", {"a": [1]}, table_type="csv")


def test_ascii_table(tmp_path):
    from torchfits import table

    path = tmp_path / "ascii.fits"
    cols = {"i": np.array([1, -20, 300]), "f": np.array([1.5, -2.25e-10, 3e20]), "s": ["ab", "c", "def"]}
    table.write(path, cols, table_type="ascii")
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path) as h:
        assert h[1].header["XTENSION"] == "TABLE"
        np.testing.assert_array_equal(h[1].data["i"], cols["i"])
        np.testing.assert_array_equal(h[1].data["f"], cols["f"])
        assert list(h[1].data["s"]) == cols["s"]
    fitsverify_ok(path)
    with pytest.raises(RuntimeError, match="logical"):
        table.write(tmp_path / "b.fits", {"b": np.array([True])}, table_type="ascii")


def test_quantize_image_and_table(tmp_path):
    rng = np.random.default_rng(3)
    img = rng.normal(size=(20, 20)).astype("f4")
    img[0, 0] = np.nan
    write(tmp_path / "q.fits", img, quantize=True)
    import torchfits

    back = torchfits.read_numpy(str(tmp_path / "q.fits"))
    assert np.isnan(back[0, 0])
    inner = np.isfinite(img) & (np.abs(img) < 2.5)
    assert np.abs(back[inner] - img[inner]).max() < 1e-3
    from torchfits import table
    from torchfits.errors import QuantizeError

    table.write(tmp_path / "qt.fits", {"f": img.ravel(), "i": np.arange(400)}, quantize="robust")
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(tmp_path / "qt.fits") as h:
        assert h[1].columns["f"].format == "I"
        assert h[1].columns["i"].format == "K"
    with pytest.raises(QuantizeError):
        write(tmp_path / "qi.fits", np.arange(4), quantize=True)


# ------------------------------------------------------------------------------ safety


def _boom_after(limit: int):
    real = Sink.write
    state = {"n": 0}

    def write(self, data):
        state["n"] += memoryview(data).nbytes
        if state["n"] > limit:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)
    return write


@pytest.mark.parametrize("limit", [0, 2880, 5000])
def test_full_disk_leaves_original_intact(tmp_path, monkeypatch, limit):
    path = tmp_path / "keep.fits"
    write(path, np.arange(10, dtype="i4"))
    before = path.read_bytes()
    monkeypatch.setattr(Sink, "write", _boom_after(limit))
    with pytest.raises(RuntimeError, match="No space left"):
        write(path, np.zeros((100, 100), "f8"), overwrite=True)
    with pytest.raises(RuntimeError, match="No space left"):
        write(tmp_path / "fresh.fits", np.zeros((100, 100), "f8"))
    assert path.read_bytes() == before
    assert not (tmp_path / "fresh.fits").exists()
    assert leftovers(tmp_path) == []


def test_exception_inside_stream_leaves_original_intact(tmp_path):
    import pyarrow as pa
    path = tmp_path / "keep.fits"
    write(path, {"a": np.arange(3)})
    before = path.read_bytes()
    schema = pa.schema([("a", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array([1, 2])], schema=schema)
        raise ValueError("source failed midway")

    with pytest.raises(Exception, match="source failed midway"):
        write(path, pa.RecordBatchReader.from_batches(schema, batches()), overwrite=True)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_roundtrip_property(tmp_path_factory):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    import torchfits

    dtypes = st.sampled_from(["u1", "i1", "i2", "u2", "i4", "u4", "i8", "f4", "f8"])

    @settings(max_examples=25, deadline=None)
    @given(data=st.data())
    def check(data):
        dt = np.dtype(data.draw(dtypes))
        n = data.draw(st.integers(0, 8))
        elements = None if dt.kind != "f" else st.floats(allow_nan=False, width=dt.itemsize * 8)
        col = data.draw(hnp.arrays(dt, (n,), elements=elements))
        img = data.draw(hnp.arrays(dt, (2, 3), elements=elements))
        path = tmp_path_factory.mktemp("prop") / "p.fits"
        write(path, [img, {"c": col}])
        np.testing.assert_array_equal(torchfits.read_numpy(str(path)), img)
        got = torchfits.scan(str(path), hdu=1).to_arrow().column("c").to_numpy()
        np.testing.assert_array_equal(got, col)

    assert hypothesis
    check()


def test_compressed_image_write(tmp_path):
    import torchfits

    arr = _image("i2", (20, 30))
    path = tmp_path / "z.fits"
    write(path, arr, header={"OBJECT": "Z"}, compress="GZIP_1", checksum=True)
    check_image_roundtrip(path, arr, 1)
    assert torchfits.read_header(str(path), 1)["OBJECT"] == "Z"
    fitsverify_ok(path)
    with pytest.raises(RuntimeError, match="Unsupported compression algorithm"):
        write(tmp_path / "n.fits", arr, compress="NOCOMPRESS")


def test_stream_string_wider_than_first_batch_is_refused(tmp_path):
    import pyarrow as pa
    schema = pa.schema([("s", pa.string())])
    batches = [pa.record_batch([pa.array(["ab"])], schema=schema),
               pa.record_batch([pa.array(["much longer"])], schema=schema)]
    with pytest.raises(RuntimeError, match="does not fit"):
        write(tmp_path / "s.fits", pa.RecordBatchReader.from_batches(schema, iter(batches)))
    assert leftovers(tmp_path) == [] and not (tmp_path / "s.fits").exists()
    # a width declared in the field metadata is honoured
    wide = pa.schema([pa.field("s", pa.string(), metadata={"fits_tform": "16A"})])
    batches = [pa.record_batch([pa.array(["ab"])], schema=wide),
               pa.record_batch([pa.array(["much longer"])], schema=wide)]
    write(tmp_path / "w.fits", pa.RecordBatchReader.from_batches(wide, iter(batches)))
    check_table_columns(tmp_path / "w.fits", {"s": ["ab", "much longer"]})


@pytest.mark.parametrize("key,value", [
    ("F2", 1.0000000000000002), ("F3", -0.0), ("F7", 2.5e-300), ("I1", -9223372036854775808),
    ("S3", "ends'"), ("S5", "b" * 67 + "'"), ("HIERARCH ESO LONG STRING", "z" * 90),
])
def test_header_edge_values(tmp_path, key, value):
    fits = pytest.importorskip("astropy.io.fits")
    fitsio = pytest.importorskip("fitsio")
    import torchfits

    path = tmp_path / "e.fits"
    write(path, np.zeros(2, "f4"), header={key: value})
    name = key[9:] if key.startswith("HIERARCH ") else key
    for got in (fits.getheader(path)[name], fitsio.read_header(str(path))[name],
                torchfits.read_header(str(path))[name]):
        assert got == value and type(got) is type(value)
    fitsverify_ok(path)


def test_uint64_dict_column_error_is_unwrapped(tmp_path):
    from torchfits import table

    with pytest.raises(UInt64WriteError):
        table.write(tmp_path / "u.fits", {"u": np.arange(3, dtype=np.uint64)})


def test_arrow_nullable_roundtrip_property(tmp_path_factory):
    pytest.importorskip("hypothesis")
    import pyarrow as pa
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import torchfits

    ints = st.lists(st.one_of(st.none(), st.integers(-2**31 + 1, 2**31 - 1)), max_size=6)
    texts = st.lists(st.one_of(st.none(), st.text(st.characters(min_codepoint=33, max_codepoint=126),
                                                  max_size=5)), max_size=6)
    lists = st.lists(st.one_of(st.none(), st.lists(st.integers(-100, 100), max_size=3)), max_size=6)

    @settings(max_examples=25, deadline=None)
    @given(i=ints, s=texts, v=lists)
    def check(i, s, v):
        n = min(len(i), len(s), len(v))
        table = pa.table({"i": pa.array(i[:n], pa.int32()), "s": pa.array(s[:n], pa.string()),
                          "v": pa.array(v[:n], pa.list_(pa.int64()))})
        path = tmp_path_factory.mktemp("arrow") / "a.fits"
        write(path, table)
        back = torchfits.scan(str(path)).to_arrow()
        assert back.column("i").to_pylist() == i[:n]
        assert back.column("s").to_pylist() == [x or "" for x in s[:n]]
        assert back.column("v").to_pylist() == [x or [] for x in v[:n]]

    check()


def test_scaled_column_written_back_as_scaled(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    import torchfits
    from torchfits import table as tftable

    src = tmp_path / "scaled.fits"
    # stored codes 0, 3, null, 20 → physical 10, 11.5, null, 20
    tftable.write(src, {"t": np.array([0, 3, -32768, 20], "i2")},
                  schema={"t": {"tscal": 0.5, "tzero": 10, "tnull": -32768}})
    table = torchfits.scan(str(src)).to_arrow()
    dst = tmp_path / "back.fits"
    write(dst, table)
    with fits.open(dst) as h:
        c = h[1].columns["t"]
        assert c.format == "I" and c.bscale == 0.5 and c.bzero == 10.0
    again = torchfits.scan(str(dst)).to_arrow().column("t").to_pylist()
    want = table.column("t").to_pylist()
    assert again[:2] == want[:2] and again[3] == want[3]
    assert (again[2] is None or np.isnan(again[2])) and (want[2] is None or np.isnan(want[2]))


# -- inputs as astropy and fitsio users hold them ----------------------------------------------
def test_astropy_table_units_meta_masks_roundtrip(tmp_path):
    pytest.importorskip("astropy")
    import astropy.units as u
    from astropy.table import MaskedColumn, QTable, Table

    import torchfits

    t = Table({"a": [1, 2, 3], "b": MaskedColumn([1.5, 2.5, 3.5], mask=[0, 1, 0]),
               "c": ["x", "yy", "z"], "m": MaskedColumn([1, 2, 3], mask=[1, 0, 0]),
               "ms": MaskedColumn(["p", "q", "r"], mask=[0, 0, 1])})
    t["a"].unit = "deg"
    t.meta.update({"EXTNAME": "CAT", "OBSERVER": "me", "comments": ["c1", "c2"]})
    path = tmp_path / "t.fits"
    write(path, t)
    h = torchfits.read_header(str(path), "cat")
    assert (h["TUNIT1"], h["EXTNAME"], h["OBSERVER"]) == ("deg", "CAT", "me")
    assert h.get_comment() == ["c1", "c2"]
    for back in (Table.read(path), torchfits.table.to_astropy(str(path))):
        assert back["a"].unit == u.deg
        for name in t.colnames:
            np.testing.assert_array_equal(np.ma.getmaskarray(back[name]), np.ma.getmaskarray(t[name]))
            assert back[name][~np.ma.getmaskarray(t[name])].tolist() == \
                t[name][~np.ma.getmaskarray(t[name])].tolist()
        assert {k: back.meta[k] for k in ("EXTNAME", "OBSERVER", "comments")} == \
            {"EXTNAME": "CAT", "OBSERVER": "me", "comments": ["c1", "c2"]}
    q = QTable({"v": [1.0, 2.0] * u.km / u.s})
    write(tmp_path / "q.fits", q)
    back = QTable.read(tmp_path / "q.fits")
    assert back["v"].unit == u.km / u.s and back["v"].value.tolist() == [1.0, 2.0]
    assert write(tmp_path / "hdr.fits", t, header={"OBSERVER": "you"}) is None
    assert torchfits.read_header(str(tmp_path / "hdr.fits"), 1)["OBSERVER"] == "you"


def test_structured_arrays_and_recarrays_are_tables(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    fitsio = pytest.importorskip("fitsio")
    s = np.array([(1, 2.0, b"ab", [1, 2]), (3, 4.0, b"cd", [3, 4])],
                 dtype=[("i", ">i4"), ("f", "f8"), ("s", "S2"), ("v", "i2", (2,))])
    for k, data in enumerate((s, s.view(np.recarray))):
        path = tmp_path / f"s{k}.fits"
        write(path, data)
        got = fitsio.read(str(path), 1)
        assert got.dtype.names == s.dtype.names
        for name in s.dtype.names:
            want = s[name].astype(str) if name == "s" else s[name]  # fitsio gives str
            np.testing.assert_array_equal(got[name], want)
    # astropy's .data (FITS_rec, with TSCAL/TZERO and units) and fitsio.read output
    src = tmp_path / "src.fits"
    fits.BinTableHDU.from_columns([fits.Column("u", "I", bzero=32768, array=np.array([0, 65535], ">u2")),
                                   fits.Column("x", "E", unit="mag", array=[1.5, 2.5])]).writeto(src)
    for data in (fits.getdata(src, 1), fitsio.read(str(src), 1)):
        path = tmp_path / "again.fits"
        write(path, data, overwrite=True)
        back = fits.getdata(path, 1)
        assert back["u"].tolist() == [0, 65535] and back["x"].tolist() == [1.5, 2.5]
    write(path, fits.getdata(src, 1), overwrite=True)
    assert fits.getheader(path, 1)["TUNIT2"] == "mag"


def test_lists_mix_images_and_tables(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    s = np.array([(1,), (2,)], dtype=[("k", "i8")])
    path = tmp_path / "mix.fits"
    write(path, [np.ones((2, 3), "f4"), {"x": np.arange(3)}, s, np.zeros(4, "i2")])
    with fits.open(path) as hdul:
        assert [type(h).__name__ for h in hdul] == ["PrimaryHDU", "BinTableHDU", "BinTableHDU", "ImageHDU"]
        assert hdul[2].data["k"].tolist() == [1, 2]
    path2 = tmp_path / "mix2.fits"
    write(path2, [s, np.ones(2, "f4")])  # a table first gets an empty primary
    with fits.open(path2) as hdul:
        assert [type(h).__name__ for h in hdul] == ["PrimaryHDU", "BinTableHDU", "ImageHDU"]
        assert hdul[0].data is None


def test_object_columns_are_refused(tmp_path):
    with pytest.raises(Exception, match="object values of type dict have no FITS column type") as info:
        write(tmp_path / "o.fits", {"o": np.array([{"a": 1}, None], dtype=object)})
    assert "'o'" in str(info.value)
    assert not (tmp_path / "o.fits").exists()
    with pytest.raises(Exception, match="object values of type int"):
        write(tmp_path / "o.fits", {"o": np.array([1, "x"], dtype=object)})
    write(tmp_path / "ok.fits", {"o": np.array(["a", None, b"c"], dtype=object)})  # strings are fine


def test_compress_keeps_tables_plain_and_checksums_every_hdu(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    import torchfits

    path = tmp_path / "t.fits"
    write(path, {"x": np.arange(3)}, compress=True, checksum=True)
    with fits.open(path, checksum=True) as hdul:
        assert [type(h).__name__ for h in hdul] == ["PrimaryHDU", "BinTableHDU"]
    assert [torchfits.verify_checksums(str(path), k)["status"] for k in range(2)] == ["ok", "ok"]
    img = np.arange(12, dtype="i2").reshape(3, 4)
    mixed = tmp_path / "m.fits"
    write(mixed, [img, {"x": np.arange(3)}], compress="GZIP_2", checksum=True)
    with fits.open(mixed, checksum=True) as hdul:
        assert [type(h).__name__ for h in hdul] == ["PrimaryHDU", "CompImageHDU", "BinTableHDU"]
        np.testing.assert_array_equal(hdul[1].data, img)
        assert hdul[2].data["x"].tolist() == [0, 1, 2]
    assert {torchfits.verify_checksums(str(mixed), k)["status"] for k in range(3)} == {"ok"}


@pytest.mark.parametrize("codec", ["GZIP_1", "GZIP_2"])
def test_gzip_float_images_are_lossless_without_quantize(tmp_path, codec):
    fitsio = pytest.importorskip("fitsio")
    data = np.random.default_rng(1).normal(size=(20, 30)).astype("f4")
    path = tmp_path / "g.fits"
    write(path, data, compress=codec)
    np.testing.assert_array_equal(fitsio.read(str(path), 1), data)
    write(path, data, compress="RICE_1", overwrite=True)  # RICE quantises, as CFITSIO
    assert not np.array_equal(fitsio.read(str(path), 1), data)


def test_compression_errors_keep_1x_keywords(tmp_path):
    with pytest.raises(RuntimeError, match="HCOMPRESS.*2D"):
        write(tmp_path / "h.fits", np.zeros(5, "i2"), compress="HCOMPRESS_1")
    with pytest.raises(RuntimeError, match="PLIO.*compressed image"):
        write(tmp_path / "p.fits", np.full((3, 3), -1, "i4"), compress="PLIO_1")

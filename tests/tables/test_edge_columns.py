"""Table columns at the edges, read from files nobody here wrote (astropy's and fitsio's test
data) and from small files made at test time: zero-width and empty fixed-size columns, TDIM
with a 0 axis, 0-row tables, and logical variable-length columns (standard, with nulls, and
the 0x00/0x01 bytes older astropy wrote).

Every Arrow array handed out must pass ``validate(full=True)`` and survive Polars and a
Parquet round trip.
"""
from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from _tablehelpers import decode_numpy, write_raw_bintable  # noqa: E402


def _data_dirs() -> list[Path]:
    dirs = []
    for module in ("astropy.io.fits", "fitsio"):
        try:
            mod = __import__(module, fromlist=["__file__"])
        except ImportError:
            continue
        root = Path(mod.__file__).parent
        for sub in ("tests/data", "test_images"):
            if (root / sub).is_dir():
                dirs.append(root / sub)
    return dirs


def _table_hdus() -> list[tuple[str, int]]:
    """(path, hdu) of every table HDU astropy opens in the oracles' own test files."""
    out = []
    for folder in _data_dirs():
        for path in sorted(folder.glob("*.fits")):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with fits.open(path) as hdul:
                        kinds = [isinstance(h, (fits.BinTableHDU, fits.TableHDU))
                                 and not isinstance(h, fits.CompImageHDU) for h in hdul]
            except Exception:  # astropy itself refuses the file
                continue
            out += [(str(path), k) for k, is_table in enumerate(kinds) if is_table]
    return out


TABLE_HDUS = _table_hdus()
ASTROPY_DATA = Path(fits.__file__).parent / "tests" / "data"


def _id(case: tuple[str, int]) -> str:
    return f"{Path(case[0]).name}[{case[1]}]"


def _check_arrow(table: pa.Table, what: str) -> None:
    for name, column in zip(table.column_names, table.columns):
        for chunk in column.chunks:
            try:
                chunk.validate(full=True)
            except pa.ArrowInvalid as exc:  # pragma: no cover - the failure message is the point
                raise AssertionError(f"{what}: column {name!r} ({chunk.type}) is malformed: {exc}") from exc


@pytest.mark.parametrize("case", TABLE_HDUS, ids=_id)
def test_every_column_of_real_files_is_valid_arrow(case, tmp_path):
    path, hdu = case
    table = torchfits.scan(path, hdu=hdu).to_arrow()
    _check_arrow(table, _id(case))
    for batch in torchfits.scan(path, hdu=hdu, batch_size=7).to_batches():
        _check_arrow(pa.Table.from_batches([batch]), _id(case) + " in batches")
    try:
        compat = torchfits.table.read(path, hdu=hdu)  # the 1.x mapping
    except torchfits.FitsError:  # complex columns have no 1.x Arrow form
        compat = None
    if compat is not None:
        _check_arrow(compat, _id(case) + " (1.x)")
    # Parquet must read back what it wrote (a 0-size fixed_size_list does not).
    buf = io.BytesIO()
    pq.write_table(table, buf)
    back = pq.read_table(io.BytesIO(buf.getvalue()))
    assert back.num_rows == table.num_rows
    assert back.column_names == table.column_names


@pytest.mark.parametrize("case", TABLE_HDUS, ids=_id)
def test_every_real_table_goes_through_polars(case):
    pl = pytest.importorskip("polars")
    path, hdu = case
    table = torchfits.scan(path, hdu=hdu).to_arrow()
    frame = pl.from_arrow(table)
    assert frame.height == table.num_rows
    lazy = torchfits.scan_polars(path, hdu=hdu).collect()
    assert lazy.height == table.num_rows


# --------------------------------------------------------------------------------------------
# Zero-width and empty cells
# --------------------------------------------------------------------------------------------

def test_zerowidth_column_matches_astropy():
    path = ASTROPY_DATA / "zerowidth.fits"
    with fits.open(path) as hdul:
        expected = hdul[2].data["ORBPARM"]
        nrows = len(hdul[2].data)
    assert expected.shape == (nrows, 0)
    table = torchfits.scan(path, hdu=2).to_arrow()
    column = table.column("ORBPARM").combine_chunks()
    column.validate(full=True)
    assert column.to_pylist() == [[] for _ in range(nrows)]
    # NumPy and torch take it as the fixed-width column it is, of astropy's shape.
    arrays = torchfits.scan(str(path), hdu=2, columns=["ORBPARM", "NOSTA"]).to_numpy()
    assert arrays["ORBPARM"].shape == expected.shape and arrays["ORBPARM"].dtype == np.float64
    pytest.importorskip("torch")
    tensors = torchfits.scan(str(path), hdu=2, columns=["ORBPARM", "NOSTA"]).to_torch()
    assert tuple(tensors["ORBPARM"].shape) == expected.shape


def _raw_table(path: Path, tform: str, tdim, nrows: int) -> str:
    """A table of a column ``x`` that takes no bytes and an int32 column ``n`` (0, 1, ...)."""
    cards = [("TTYPE1", "x"), ("TFORM1", tform), ("TTYPE2", "n"), ("TFORM2", "J")]
    if tdim:
        cards.append(("TDIM1", tdim))
    rows = np.arange(nrows, dtype=">i4").tobytes()
    return write_raw_bintable(path, cards, rows, nrows, 4)


@pytest.mark.parametrize("tform,tdim", [("0E", None), ("0J", None), ("0L", None), ("0X", None),
                                         ("0E", "(0,3)"), ("0E", "(3,0)"), ("0A", None),
                                         ("0D", "(2,0,2)")])
@pytest.mark.parametrize("nrows", [0, 1, 4])
def test_empty_cells_and_empty_tables_are_valid_everywhere(tmp_path, tform, tdim, nrows):
    pl = pytest.importorskip("polars")
    path = _raw_table(tmp_path / "t.fits", tform, tdim, nrows)
    table = torchfits.scan(path, hdu=1).to_arrow()
    _check_arrow(table, f"{tform} {tdim} x{nrows}")
    assert table.num_rows == nrows
    assert table.column("n").to_pylist() == list(range(nrows))
    got = table.column("x").to_pylist()
    if tform == "0A":
        assert got == [""] * nrows
    else:
        assert got == [[] for _ in range(nrows)]
    if tform[1] in "EJD":  # astropy reads 0L, 0X and 0A columns its own way
        with fits.open(path) as hdul:
            expected = hdul[1].data["x"]
            assert [np.asarray(e).size for e in expected] == [0] * nrows
    if tform != "0A":
        cell = tuple(int(d) for d in reversed(tdim[1:-1].split(","))) if tdim else (0,)
        assert torchfits.scan(path, hdu=1).to_numpy()["x"].shape == (nrows,) + cell
    assert pl.from_arrow(table).height == nrows
    buf = io.BytesIO()
    pq.write_table(table, buf)
    assert pq.read_table(io.BytesIO(buf.getvalue())).num_rows == nrows
    assert torchfits.scan_polars(path, hdu=1).collect().height == nrows


def test_zero_width_column_writes_back_as_zero_width(tmp_path):
    path = ASTROPY_DATA / "zerowidth.fits"
    table = torchfits.scan(path, hdu=2).to_arrow()
    out = tmp_path / "back.fits"
    torchfits.write(str(out), table)
    with fits.open(out) as hdul:
        assert hdul[1].columns["ORBPARM"].format == "0D"
        assert hdul[1].data["ORBPARM"].shape == (table.num_rows, 0)
        with fits.open(path) as ref:
            np.testing.assert_array_equal(hdul[1].data["STABXYZ"], ref[2].data["STABXYZ"])


def test_to_arrow_of_empty_cells_is_valid():
    pl = pytest.importorskip("polars")
    table = torchfits.to_arrow({"x": np.zeros((3, 0)), "y": np.zeros((3, 2, 0), np.int16)})
    _check_arrow(table, "to_arrow")
    assert table.column("x").to_pylist() == [[], [], []]
    assert pl.from_arrow(table).height == 3


# --------------------------------------------------------------------------------------------
# Logical variable-length columns: the standard bytes, nulls, and old astropy's 0x00/0x01
# --------------------------------------------------------------------------------------------

def _astropy_logical_rows(path: Path) -> list:
    """astropy's reading, with nulls kept: its bool read where it says the file holds old
    0x00/0x01 bytes, else its raw-byte read (b'T' True, b'F' False, b'\\x00' null)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fits.open(path) as hdul:
            booleans = [[bool(x) for x in row] for row in hdul[1].data["flag"]]
    if any("older astropy" in str(w.message) for w in caught):
        return booleans
    meaning = {b"T": True, b"F": False, b"": None}
    with fits.open(path, logical_as_bytes=True) as hdul:
        return [[meaning[bytes(x)] for x in row] for row in hdul[1].data["flag"]]


@pytest.mark.parametrize("name", ["vla_logical_pre_fix.fits", "vla_logical_null.fits",
                                  "vla_logical_all_zero.fits"])
def test_logical_vla_files_match_astropy(name):
    path = ASTROPY_DATA / name
    if not path.exists():
        pytest.skip(f"this astropy has no {name}")
    expected = _astropy_logical_rows(path)
    got = torchfits.scan(str(path), hdu=1).to_arrow().column("flag").to_pylist()
    assert got == expected
    # One row a batch decides as the whole column does.
    batches = torchfits.scan(str(path), hdu=1, batch_size=1).to_batches()
    assert [r for b in batches for r in b.column("flag").to_pylist()] == expected
    rows = list(range(len(expected)))[::-1]
    got = torchfits.scan(str(path), hdu=1, rows=rows).to_arrow().column("flag").to_pylist()
    assert got == [expected[k] for k in rows]
    # The 1.x route reads a null logical as False, as 1.x did.
    compat = torchfits.table.read(str(path), hdu=1).column("flag").to_pylist()
    assert compat == [[bool(x) for x in row] for row in expected]


def test_legacy_logical_vla_numpy_route():
    path = ASTROPY_DATA / "vla_logical_pre_fix.fits"
    if not path.exists():
        pytest.skip("this astropy has no vla_logical_pre_fix.fits")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(path) as hdul:
            expected = [list(map(bool, row)) for row in hdul[1].data["flag"]]
        got = decode_numpy(path)["flag"]
    assert [list(map(bool, row)) for row in got] == expected


def test_legacy_logical_vla_is_decided_over_the_whole_column(tmp_path):
    # Row 0 alone (zeros) would be all-null; row 2's 0x01 makes the column old astropy's.
    heap = bytes([0, 0, 1, 0])
    desc = [(2, 0), (0, 2), (2, 2)]
    rows = b"".join(np.array(d, ">i4").tobytes() for d in desc)
    path = write_raw_bintable(tmp_path / "old.fits", [("TTYPE1", "flag"), ("TFORM1", "PL(2)")],
                              rows, 3, 8, heap=heap)
    expected = _astropy_logical_rows(Path(path))
    assert expected == [[False, False], [], [True, False]]
    for batch_size in (1, 2, 100):
        batches = torchfits.scan(path, hdu=1, batch_size=batch_size).to_batches()
        assert [r for b in batches for r in b.column("flag").to_pylist()] == expected
    # A standard column with a 0x00 keeps it as null, whatever the other rows hold.
    heap = b"T\x00F" + b"\x00"
    rows = b"".join(np.array(d, ">i4").tobytes() for d in [(3, 0), (1, 3)])
    path = write_raw_bintable(tmp_path / "std.fits", [("TTYPE1", "flag"), ("TFORM1", "PL(3)")],
                              rows, 2, 8, heap=heap)
    assert torchfits.scan(path, hdu=1).to_arrow().column("flag").to_pylist() == \
        [[True, None, False], [None]]
    assert _astropy_logical_rows(Path(path)) == [[True, None, False], [None]]


def _old_logical_file(path, nrows: int, far: int = 2) -> str:
    """``nrows`` rows of a PL(2) column in old astropy's 0x00/0x01 bytes: every row's cell
    [0, 0], except the last one's [1, 0], which lies ``far`` bytes into the heap."""
    heap = bytearray(far + 2)
    heap[far] = 1
    desc = [(2, 0)] * (nrows - 1) + [(2, far)]
    rows = b"".join(np.array(d, ">i4").tobytes() for d in desc)
    return write_raw_bintable(path, [("TTYPE1", "flag"), ("TFORM1", "PL(2)")], rows, nrows, 8,
                              heap=bytes(heap))


def test_legacy_logical_vla_is_judged_once_per_column(tmp_path, monkeypatch):
    """The whole-column judgement runs once per file version and column, not once per batch
    (which made a scan quadratic in its batches)."""
    from torchfits.tables import variable_length as _vla  # imported by the source when needed

    calls = []
    real = _vla.legacy_logical_vla
    monkeypatch.setattr(_vla, "legacy_logical_vla", lambda *a, **k: calls.append(1) or real(*a, **k))
    path = _old_logical_file(tmp_path / "old.fits", 200)
    expected = [[False, False]] * 199 + [[True, False]]
    batches = list(torchfits.scan(path, hdu=1, batch_size=3).to_batches())
    assert len(batches) == 67
    assert [r for b in batches for r in b.column("flag").to_pylist()] == expected
    assert len(calls) == 1
    # Another scan, other rows, a dataset: the same file version, judged already.
    assert torchfits.scan(path, hdu=1, rows=[0, 199], batch_size=1).to_arrow().column("flag").to_pylist() == \
        [[False, False], [True, False]]
    assert torchfits.dataset(path).to_table().column("flag").to_pylist() == expected
    assert len(calls) == 1


def test_legacy_logical_vla_is_judged_once_per_column_on_the_1x_routes(tmp_path, monkeypatch):
    """The 1.x tensor routes (``scan_torch``, ``read_torch``, ``torchfits.read``) share the
    engine's per-file-version judgement: not once per batch, nor again on every call."""
    from torchfits.tables import variable_length as _variable_length

    calls = []
    real = _variable_length.legacy_logical_vla

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_variable_length, "legacy_logical_vla", counted)
    path = _old_logical_file(tmp_path / "old.fits", 200)
    expected = [[False, False]] * 199 + [[True, False]]
    batches = list(torchfits.table.scan_torch(path, hdu=1, batch_size=3))
    assert len(batches) == 67
    assert [row.tolist() for b in batches for row in b["flag"]] == expected
    assert len(calls) == 1
    assert [row.tolist() for row in torchfits.table.read_torch(path, hdu=1)["flag"]] == expected
    assert [row.tolist() for row in torchfits.read(path, hdu=1)["flag"]] == expected
    assert len(calls) == 1


def test_legacy_logical_vla_is_judged_from_fetched_bytes(tmp_path):
    """A lazily fetched source (a file object read range by range) fetches the rows and heap
    cells it judges: the 0x01 far into the heap, never fetched for row 0 alone, still counts."""
    path = _old_logical_file(tmp_path / "far.fits", 3, far=1 << 20)
    with open(path, "rb") as f:
        got = torchfits.scan(f, hdu=1, rows=[0]).to_arrow().column("flag").to_pylist()
    assert got == [[False, False]]
    assert torchfits.scan(path, hdu=1).to_arrow().column("flag").to_pylist() == \
        [[False, False], [False, False], [True, False]]

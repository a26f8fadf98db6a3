"""Writers under the harness: tables read from astropy-written files through each route (Arrow,
pandas, Polars, astropy, dict of arrays) are written back with ``torchfits.write``; hostile header
values go through ``write(header=)`` and ``update_header``; the in-place table editors run against
astropy doing the same edit. Every write must give a file that fitsverify accepts and astropy
reads back equal, or be refused with a FitsError naming the column or keyword while the file
already at the target keeps its bytes."""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

pytest.importorskip("hypothesis")
fits = pytest.importorskip("astropy.io.fits")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import torchfits  # noqa: E402
from _writecheck import fitsverify_ok  # noqa: E402
from torchfits.errors import FitsError  # noqa: E402

from ._profile import diff_settings  # noqa: E402
from .routes import astropy_oracle, fitsio_oracle  # noqa: E402
from .strategies import NAN, TableSpec, table_specs, write_table_spec  # noqa: E402
from .test_tables import diff  # noqa: E402

OLD = np.arange(6, dtype=np.int16).reshape(2, 3)


def _previous(path: Path) -> bytes:
    """Put a small valid file at ``path`` (the user's data a failed write must not touch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits.PrimaryHDU(OLD).writeto(path, overwrite=True)
    return path.read_bytes()


def write_or_refuse(path: Path, action: Callable[[], Any], names: list[str]) -> bool:
    """Run ``action``; True when it wrote a file fitsverify accepts, False when it refused with a
    FitsError naming one of ``names`` and left the bytes at ``path`` as they were."""
    before = path.read_bytes()
    try:
        action()
    except FitsError as exc:
        assert path.read_bytes() == before, f"a refused write changed {path.name}: {exc}"
        assert any(n in str(exc) for n in names), f"the refusal names none of {names}: {exc}"
        return False
    fitsverify_ok(path)
    return True


# --- every input kind, from routes over generated files -------------------------------------

def _inputs(path: Path, spec: TableSpec) -> dict[str, Any]:
    from torchfits.tables.scan import scan

    arrow = scan(path, 1).to_arrow()
    out: dict[str, Any] = {"pyarrow.Table": arrow}
    out["pandas"] = scan(path, 1).to_pandas()
    out["polars"] = torchfits.scan_polars(path, 1).collect()
    out["dict of NumPy"] = {c.name: c.array for c in spec.columns if c.kind != "vla"}
    return out


#: kinds each input cannot carry exactly (rules of the input library, not of torchfits)
def _comparable(kind: str, col: Any) -> bool:
    if kind == "pandas" and col.kind == "int" and col.tnull is not None:
        return False  # NumPy-backed pandas turned the nulls into float NaN already
    if kind == "dict of NumPy" and col.kind in ("int", "bits", "scaled", "vla"):
        # the arrays hold stored values (sentinels, scaled integers) without their metadata
        return col.kind == "int" and col.tnull is None
    return True


@pytest.mark.parametrize("kind", ["pyarrow.Table", "pandas", "polars", "dict of NumPy"])
def test_tables_written_back_read_equal_in_astropy(kind):
    @diff_settings(15)
    @given(spec=table_specs(max_columns=4))
    def run(spec):
        with tempfile.TemporaryDirectory() as d:
            src = write_table_spec(Path(d) / "src.fits", spec)
            data = _inputs(src, spec)[kind]
            if isinstance(data, dict) and not data:
                return  # every column was left out of the dict above
            target = Path(d) / "out.fits"
            _previous(target)
            names = [c.name for c in spec.columns]
            if not write_or_refuse(target, lambda: torchfits.write(target, data, overwrite=True),
                                   names):
                return
            want = {c.name: c.values for c in spec.columns if _comparable(kind, c)
                    and (kind != "dict of NumPy" or c.name in data)}
            try:
                got = astropy_oracle(target)
            except UnboundLocalError:
                # astropy 7 cannot read some uint64 vector columns ("bzero64"): fitsio reads
                # them, without TNULL and bits handling
                got = fitsio_oracle(target)
                want = {c.name: c.values for c in spec.columns if c.name in want
                        and c.kind not in ("bits", "scaled", "int")}
            problem = diff(f"write({kind}) → astropy", want, got)
            assert problem is None, f"{problem}\n{spec}"

    run()


# --- hostile header values ------------------------------------------------------------------

HOSTILE = [
    ("OBJECT", "M31\nM32"),          # a control character (issue 23 item 2)
    ("OBJECT", "tab\there"),
    ("OBJECT", "Andromède"),          # non-ASCII
    ("OBJECT", "x" * 200),            # a long string (CONTINUE cards)
    ("VERYLONGKEYWORD", 1),          # a keyword longer than 8 characters
    ("BADKEY!", 1),                  # a character no keyword may hold
    ("NANVAL", float("nan")),         # NaN has no FITS form
    ("INFVAL", float("inf")),
    ("COMMENT", ["first", "second"]),  # a commentary list: one card each
    ("HISTORY", "line1\nline2"),
]


def _header_reads_back(path: Path, hdu: int, key: str, value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        header = fits.getheader(path, hdu)
    if key in ("COMMENT", "HISTORY"):
        lines = list(header[key])
        # a newline in a commentary value starts a new card (as astropy's header does)
        want = value if isinstance(value, list) else value.split("\n")
        assert lines == want, f"{key}: astropy reads {lines}, written {want}"
        return
    assert key.upper() in header or f"HIERARCH {key}" in header, f"{key} missing"
    assert header[key] == value, f"{key}: astropy reads {header[key]!r}, written {value!r}"


@pytest.mark.parametrize("key,value", HOSTILE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOSTILE)])
@pytest.mark.parametrize("how", ["write(header=)", "update_header"])
def test_hostile_header_values_are_written_or_refused(tmp_path, key, value, how):
    path = tmp_path / "h.fits"
    _previous(path)
    if how == "write(header=)":
        def action() -> None:
            torchfits.write(path, OLD + 1, header={key: value}, overwrite=True)
    else:
        def action() -> None:
            torchfits.update_header(path, 0, set={key: value})
    if write_or_refuse(path, action, [key]):
        _header_reads_back(path, 0, key, value)


# --- in-place table editors against astropy -------------------------------------------------

@pytest.fixture
def table_file(tmp_path):
    cols = [fits.Column(name="A", format="J", array=np.array([1, 2, 3], np.int32)),
            fits.Column(name="F", format="D", array=np.array([0.5, np.nan, np.inf])),
            fits.Column(name="S", format="6A", array=np.array(["x", "", "long"]))]
    path = tmp_path / "t.fits"
    fits.BinTableHDU.from_columns(cols).writeto(path)
    return path


EDITS: dict[str, tuple[Callable[[Path], Any], dict[str, list[Any]]]] = {
    "update_rows": (lambda p: torchfits.table.update_rows(p, {"A": [7], "S": ["new"]}, (1, 2)),
                    {"A": [1, 7, 3], "S": ["x", "new", "long"]}),
    "append_rows": (lambda p: torchfits.table.append_rows(
        p, {"A": np.array([4], np.int32), "F": np.array([-1.0]), "S": np.array(["app"])}),
        {"A": [1, 2, 3, 4], "F": [0.5, NAN, float("inf"), -1.0], "S": ["x", "", "long", "app"]}),
    "replace_column": (lambda p: torchfits.table.replace_column(p, "F", np.array([1.0, 2.0, 3.0])),
                       {"F": [1.0, 2.0, 3.0]}),
    "insert_column": (lambda p: torchfits.table.insert_column(p, "N", np.array([9, 8, 7], np.int16)),
                      {"A": [1, 2, 3], "N": [9, 8, 7]}),
    "write_checksums": (lambda p: torchfits.write_checksums(p, 1), {"A": [1, 2, 3]}),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_in_place_editors_give_valid_files_astropy_reads(table_file, edit):
    action, want = EDITS[edit]
    if write_or_refuse(table_file, lambda: action(table_file), list(want)):
        problem = diff(edit, want, astropy_oracle(table_file))
        assert problem is None, problem
        if edit == "write_checksums":
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with fits.open(table_file, checksum=True) as h:
                    h[1].data  # noqa: B018 - astropy warns on a wrong checksum


# --- every other input kind, with their masks, units and times ------------------------------

def _read_table(path: Path, **kw: Any) -> Any:
    from astropy.table import Table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Table.read(path, hdu=1, **kw)


def _masked_list(col: Any) -> list[Any]:
    mask = np.ma.getmaskarray(col)
    return [None if m else (v.decode() if isinstance(v, bytes) else v)
            for v, m in zip(np.asarray(col).tolist(), mask.tolist())]


def _input_structured() -> tuple[Any, Callable[[Path], None]]:
    data = np.array([(1, 2.5, b"ab"), (-4, np.nan, b"")],
                    dtype=[("a", "i4"), ("b", "f8"), ("c", "S3")])

    def check(path: Path) -> None:
        t = _read_table(path, mask_invalid=False)
        assert t["a"].tolist() == [1, -4] and t["c"].tolist() == ["ab", ""]
        assert t["b"][0] == 2.5 and np.isnan(t["b"][1])
    return data, check


def _input_masked_table() -> tuple[Any, Callable[[Path], None]]:
    from astropy.table import MaskedColumn, Table

    data = Table({"a": MaskedColumn([1, 2, 3], mask=[0, 1, 0]),
                  "s": MaskedColumn(["x", "y", "z"], mask=[0, 0, 1])})

    def check(path: Path) -> None:
        t = _read_table(path)
        assert _masked_list(t["a"]) == [1, None, 3]
        assert _masked_list(t["s"]) == ["x", "y", None]
    return data, check


def _input_qtable_unit() -> tuple[Any, Callable[[Path], None]]:
    import astropy.units as u
    from astropy.table import QTable

    data = QTable({"f": [1.0, 2.0] * u.m, "v": [[1, 2], [3, 4]] * u.km / u.s})

    def check(path: Path) -> None:
        t = _read_table(path)
        assert t["f"].unit == u.m and t["f"].tolist() == [1.0, 2.0]
        assert t["v"].unit == u.km / u.s and np.asarray(t["v"]).tolist() == [[1, 2], [3, 4]]
    return data, check


def _input_masked_quantity() -> tuple[Any, Callable[[Path], None]]:
    import astropy.units as u
    from astropy.table import QTable
    from astropy.utils.masked import Masked

    # Masked(...) makes a MaskedQuantity; a MaskedArray times a unit drops its mask in astropy
    data = QTable({"f": Masked([1.0, 2.0, 3.0] * u.m, mask=[False, True, False])})

    def check(path: Path) -> None:
        t = _read_table(path)
        assert t["f"].unit == u.m
        assert _masked_list(t["f"]) == [1.0, None, 3.0], "the mask was lost"
    return data, check


def _input_time() -> tuple[Any, Callable[[Path], None]]:
    from astropy.table import Table
    from astropy.time import Time

    times = Time(["2020-01-01T00:00:00", "2021-06-01T12:00:00.5"], scale="utc")
    data = Table({"t": times})

    def check(path: Path) -> None:
        t = _read_table(path, astropy_native=True)
        assert isinstance(t["t"], Time), f"astropy reads {type(t['t']).__name__}, not Time"
        assert np.all(np.abs((t["t"] - times).sec) < 1e-6)
    return data, check


def _input_pandas_nullable() -> tuple[Any, Callable[[Path], None]]:
    import pandas as pd

    data = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int64"),
                         "b": pd.array([True, None, False], dtype="boolean"),
                         "s": pd.array(["x", None, "z"], dtype="string")})

    def check(path: Path) -> None:
        t = _read_table(path)
        assert _masked_list(t["a"]) == [1, None, 3]
        assert _masked_list(t["s"]) == ["x", None, "z"]
        # astropy reads a null logical (zero byte) as False: the bytes are checked through the
        # native reader, whose rule is that a zero byte is null
        assert torchfits.scan(path, 1, columns=["b"]).to_arrow()["b"].to_pylist() == [
            True, None, False]
    return data, check


def _input_pandas_datetime() -> tuple[Any, Callable[[Path], None]]:
    import pandas as pd
    from astropy.time import Time

    stamps = pd.to_datetime(["2020-01-01", "2021-06-01 12:00:00.5", None], format="ISO8601")
    data = pd.DataFrame({"t": stamps})

    def check(path: Path) -> None:
        t = _read_table(path, astropy_native=True)
        assert isinstance(t["t"], Time), f"astropy reads {type(t['t']).__name__}, not Time"
        want = Time(stamps[:2].to_pydatetime(), scale="utc")
        assert np.all(np.abs((t["t"][:2] - want).sec) < 1e-6)
        assert np.asarray(t["t"].mask).tolist() == [False, False, True], "NaT is not null"
    return data, check


def _input_torch() -> tuple[Any, Callable[[Path], None]]:
    torch = pytest.importorskip("torch")
    data = torch.arange(-3, 3, dtype=torch.float32).reshape(2, 3)

    def check(path: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fits.getdata(path)
        assert got.dtype.kind == "f" and got.tolist() == data.tolist()
    return data, check


INPUTS: dict[str, Any] = {
    "structured array": _input_structured,
    "astropy Table with masks": _input_masked_table,
    "QTable with units": _input_qtable_unit,
    "QTable MaskedQuantity": _input_masked_quantity,
    "astropy Time": _input_time,
    "pandas nullable": _input_pandas_nullable,
    "pandas datetime": _input_pandas_datetime,
    "torch tensor": _input_torch,
}


@pytest.mark.parametrize("make", list(INPUTS.values()), ids=list(INPUTS))
def test_input_kinds_read_back_in_astropy(tmp_path, make):
    data, check = make()
    path = tmp_path / "w.fits"
    _previous(path)
    names = list(getattr(data, "colnames", None) or [])
    if not names and hasattr(data, "columns"):
        names = list(data.columns)
    names = names or list(getattr(getattr(data, "dtype", None), "names", None) or ["data"])
    if write_or_refuse(path, lambda: torchfits.write(path, data, overwrite=True),
                       [str(n) for n in names]):
        check(path)


@diff_settings(30)
@given(bitpix_dtype=st.sampled_from(["u1", "i1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 999))
def test_numpy_images_written_read_equal_in_astropy_and_fitsio(bitpix_dtype, shape, seed):
    from _oracles import make_stored

    dt = np.dtype(bitpix_dtype)
    rng = np.random.default_rng(seed)
    if dt.kind == "f":
        data = make_stored(-32 if dt.itemsize == 4 else -64, tuple(shape), seed)
    else:
        info = np.iinfo(dt)
        data = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
        data.ravel()[0] = info.min
        data.ravel()[-1] = info.max
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "i.fits"
        _previous(path)
        wrote = write_or_refuse(path, lambda: torchfits.write(path, data, overwrite=True),
                                ["uint64"])
        # uint64 images are refused on purpose (docs/writing.md); every other dtype is written
        assert wrote or dt == np.uint64
        if not wrote:
            return
        import fitsio

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = fits.getdata(path)
        for name, got in (("astropy", a), ("fitsio", fitsio.read(str(path)))):
            got = np.asarray(got)
            assert got.shape == data.shape, name
            assert got.dtype.newbyteorder("=") == dt, f"{name}: {got.dtype} != {dt}"
            assert got.tobytes() == data.astype(got.dtype).tobytes() or (
                dt.kind == "f" and np.array_equal(got, data, equal_nan=True)), name


def test_arrow_nulls_round_trip_through_the_writer(tmp_path):
    """Nulls of every kind the Arrow mapping carries come back as nulls (issue 23 item 12 for
    the elements of variable-length logical arrays)."""
    import pyarrow as pa

    table = pa.table({
        "vl": pa.array([[True, None, False], [], [None]], pa.list_(pa.bool_())),
        "l": pa.array([True, None, False]),
        "i": pa.array([1, None, 3], pa.int32()),
        "s": pa.array(["a", None, ""]),
    })
    path = tmp_path / "n.fits"
    _previous(path)
    assert write_or_refuse(path, lambda: torchfits.write(path, table, overwrite=True),
                           table.column_names)
    got = torchfits.scan(path, 1).to_arrow()
    for name in ("vl", "l", "i"):
        assert got[name].to_pylist() == table[name].to_pylist(), name

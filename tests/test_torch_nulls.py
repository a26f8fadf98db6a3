"""One null rule on every torch route.

Native routes (``scan().to_torch()``, ``to_torch_batches()``, the table datasets in rows and
``as_batches`` mode, ``make_loader`` over them): an integer or logical null raises
`NullValueError` naming the file, HDU and column, unless ``null_value=`` fills it or
``masks=True`` adds a ``<column>_mask`` tensor (True where a value is present); float nulls
are NaN. The 1.x routes (``table.read_torch``, ``scan_torch``, ``torchfits.read`` on a table,
``open(...)[k]``) keep 1.2.3's answer: the stored TNULL value, False for a logical null.
Oracle: astropy's view of the same bytes.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits import table as compat_table  # noqa: E402
from torchfits.data import FitsTableDataset, FitsTableIterableDataset, make_loader  # noqa: E402
from torchfits.errors import ColumnNotFoundError, FitsError, NullValueError  # noqa: E402

# astropy warns that it reads the zero logical byte as False; that is its business here
pytestmark = pytest.mark.filterwarnings("ignore:Column 'b' contains NULL")

I_NULL, V_NULL, U_NULL = -99, -1, 7
ROWS = 6
NULL_ROWS = (1, 4)  # rows holding a null in i, b, v[1] and u


def _write(path, *, nulls: bool = True, offset: int = 0) -> None:
    """Integer (J, TNULL), float (E with NaN), logical (L with zero bytes), int vector (2I,
    TNULL), unsigned (uint16 via TZERO, TNULL), a clean K column and a string column."""
    i = np.arange(ROWS, dtype="i4") + 10 + offset
    f = np.linspace(0.5, 3, ROWS).astype("f4")
    v = np.arange(2 * ROWS, dtype="i2").reshape(ROWS, 2) + 1
    u = np.arange(ROWS, dtype="u2") + 100
    if nulls:
        for r in NULL_ROWS:
            i[r], f[r], v[r, 1], u[r] = I_NULL, np.nan, V_NULL, U_NULL + 32768  # TNULL: stored
    cols = [
        fits.Column("i", "J", null=I_NULL, array=i),
        fits.Column("f", "E", array=f),
        fits.Column("b", "L", array=np.array([r % 2 == 0 for r in range(ROWS)])),
        fits.Column("v", "2I", null=V_NULL, array=v),
        fits.Column("u", "I", bzero=32768, null=U_NULL, array=u),
        fits.Column("k", "K", array=np.arange(ROWS, dtype="i8") + offset),
        fits.Column("s", "3A", array=np.array(["ab", "c", "", "def", "g", "h"])),
    ]
    hdu = fits.BinTableHDU.from_columns(cols, name="CAT")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=True)
    if nulls:  # a zero byte in an L field is the FITS logical null
        with fits.open(path) as hdul:
            start, row_bytes = hdul[1]._data_offset, hdul[1].header["NAXIS1"]
            b_offset = hdul[1].data.dtype.fields["b"][1]
        with open(path, "r+b") as fh:
            for r in NULL_ROWS:
                fh.seek(start + r * row_bytes + b_offset)
                fh.write(b"\0")


@pytest.fixture
def table(tmp_path):
    path = str(tmp_path / "nulls.fits")
    _write(path)
    return path


@pytest.fixture
def clean(tmp_path):
    path = str(tmp_path / "clean.fits")
    _write(path, nulls=False)
    return path


NUMERIC = ["i", "f", "b", "v", "u", "k"]
VALID = np.array([r not in NULL_ROWS for r in range(ROWS)])


def _check_error(info, path, column):
    text = str(info.value)
    assert path in text and "HDU 1" in text and repr(column) in text, text
    assert "null_value=" in text and "masks=True" in text, text
    assert isinstance(info.value, FitsError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, TypeError)  # what scan().to_torch() raised before


def _stack(rows, name):
    return torch.stack([r[name] for r in rows])


def _gather(items, keys, as_batches):
    """An iterable dataset's items (row dicts, or batch dicts with ``as_batches``) as one
    tensor per key."""
    return ({k: torch.cat([b[k] for b in items]) for k in keys} if as_batches
            else {k: _stack(items, k) for k in keys})


# -- native routes: nulls raise ----------------------------------------------------------------------
def test_scan_to_torch_raises_naming_file_hdu_column(table):
    with pytest.raises(NullValueError) as info:
        torchfits.scan(table, columns=NUMERIC).to_torch()
    _check_error(info, table, "i")
    with pytest.raises(NullValueError) as info:
        torchfits.scan(table, columns=["b"]).to_torch()
    _check_error(info, table, "b")
    assert "logical" in str(info.value)


def test_to_torch_batches_raise(table):
    with pytest.raises(NullValueError) as info:
        list(torchfits.scan(table, columns=["f", "u"]).to_torch_batches(4, stack=False))
    _check_error(info, table, "u")
    with pytest.raises(NullValueError) as info:
        list(torchfits.scan(table, columns=["f", "i"]).to_torch_batches(4))
    _check_error(info, table, "i")


def test_map_dataset_raises_at_construction(table):
    with pytest.raises(NullValueError) as info:
        FitsTableDataset(table, columns=["f", "i"])
    _check_error(info, table, "i")
    with pytest.raises(NullValueError) as info:
        FitsTableDataset(table, columns=["f", "b"])
    _check_error(info, table, "b")


@pytest.mark.parametrize("as_batches", [False, True])
def test_iterable_dataset_raises(table, as_batches):
    ds = FitsTableIterableDataset(table, columns=["f", "v"], batch_size=4, as_batches=as_batches)
    with pytest.raises(NullValueError) as info:
        list(ds)
    _check_error(info, table, "v")


def test_make_loader_raises(table):
    ds = FitsTableIterableDataset(table, columns=["k", "i"], batch_size=4, as_batches=True)
    with pytest.raises(NullValueError):
        list(make_loader(ds, batch_size=None))


def test_several_files_name_the_file_with_the_null(clean, table):
    with pytest.raises(NullValueError) as info:
        torchfits.scan([clean, table], columns=["i"]).to_torch()
    assert table in str(info.value) and clean not in str(info.value)


def test_rows_without_nulls_need_no_option(table):
    got = torchfits.scan(table, columns=["i", "k"], where="i IS NOT NULL").to_torch()
    assert got["i"].tolist() == [10, 12, 13, 15]


# -- native routes: null_value= ----------------------------------------------------------------------
def _astropy(path):
    with fits.open(path) as hdul:
        data = hdul[1].data
        return {n: np.array(data[n]) for n in NUMERIC}


def _filled(ref, fills):
    out = {n: ref[n].copy() for n in NUMERIC}
    bad = ~VALID
    out["i"][bad] = fills["i"]
    out["u"][bad] = fills["u"]
    out["v"][bad, 1] = fills["v"]
    out["b"] = np.where(bad, fills["b"], ref["b"])
    return out


FILLS = {"i": -1, "u": 0, "v": 0, "b": False}


def _check_filled(got, path, fills=FILLS):
    want = _filled(_astropy(path), fills)
    for n in ("i", "u", "v", "b", "k"):
        assert np.array_equal(np.asarray(got[n]), want[n]), n
    f = np.asarray(got["f"])
    assert np.isnan(f[~VALID]).all() and np.array_equal(f[VALID], want["f"][VALID])
    assert got["u"].dtype == torch.uint16 and got["b"].dtype == torch.bool


def test_scan_to_torch_null_value(table):
    _check_filled(torchfits.scan(table, columns=NUMERIC).to_torch(null_value=FILLS), table)
    scalar = torchfits.scan(table, columns=NUMERIC).to_torch(null_value=0)
    _check_filled(scalar, table, {"i": 0, "u": 0, "v": 0, "b": False})
    batches = list(torchfits.scan(table, columns=NUMERIC).to_torch_batches(4, stack=False,
                                                                          null_value=FILLS))
    _check_filled({n: torch.cat([b[n] for b in batches]) for n in NUMERIC}, table)
    feats = torch.cat(list(torchfits.scan(table, columns=["i", "k"]).to_torch_batches(
        4, null_value=-1)))
    assert feats[:, 0].tolist() == [10, -1, 12, 13, -1, 15] and feats.dtype == torch.float32


def test_map_dataset_null_value(table):
    ds = FitsTableDataset(table, columns=NUMERIC, null_value=FILLS)
    rows = [ds[r][0] for r in range(len(ds))]
    _check_filled({n: _stack(rows, n) for n in NUMERIC}, table)
    batch, labels = make_loader(ds, batch_size=ROWS, shuffle=False).__iter__().__next__()
    _check_filled(batch, table)


@pytest.mark.parametrize("as_batches", [False, True])
def test_iterable_dataset_null_value(table, as_batches):
    ds = FitsTableIterableDataset(table, columns=NUMERIC, batch_size=4, as_batches=as_batches,
                                  null_value=FILLS)
    _check_filled(_gather(list(ds), NUMERIC, as_batches), table)
    loader = make_loader(ds, batch_size=None if as_batches else ROWS)
    got = next(iter(loader))
    assert got["i"][:4].tolist() == [10, -1, 12, 13]


def test_null_value_checks(table):
    with pytest.raises(NullValueError, match=r"'b'.*-1"):  # a scalar that a logical cannot take
        torchfits.scan(table, columns=["i", "b"]).to_torch(null_value=-1)
    with pytest.raises(NullValueError, match=r"'u'.*uint16"):
        torchfits.scan(table, columns=["u"]).to_torch(null_value=-5)
    with pytest.raises(NullValueError, match=r"'i'.*1\.5"):
        torchfits.scan(table, columns=["i"]).to_torch(null_value=1.5)
    with pytest.raises(ColumnNotFoundError, match="nope"):
        torchfits.scan(table, columns=["i"]).to_torch(null_value={"i": 0, "nope": 1})
    with pytest.raises(TypeError, match="null_value"):
        FitsTableDataset(table, columns=["i"], null_value="zero")
    with pytest.raises(NullValueError) as info:  # a dict fills only what it names
        torchfits.scan(table, columns=["i", "b"]).to_torch(null_value={"i": 0})
    _check_error(info, table, "b")


# -- native routes: masks=True -----------------------------------------------------------------------
def _check_masked(got, path):
    for n in ("i", "u", "b"):
        assert got[f"{n}_mask"].dtype == torch.bool and got[f"{n}_mask"].tolist() == VALID.tolist(), n
    vmask = got["v_mask"]
    assert vmask.shape == (ROWS, 2) and vmask[:, 0].all() and vmask[:, 1].tolist() == VALID.tolist()
    assert "f_mask" not in got and "k_mask" not in got  # floats show NaN; k has no TNULL
    _check_filled(got, path, {"i": 0, "u": 0, "v": 0, "b": False})  # values under the mask: 0


def test_scan_masks(table, clean):
    _check_masked(torchfits.scan(table, columns=NUMERIC).to_torch(masks=True), table)
    batches = list(torchfits.scan(table, columns=NUMERIC).to_torch_batches(4, stack=False, masks=True))
    keys = sorted(batches[0])
    assert all(sorted(b) == keys for b in batches)
    _check_masked({k: torch.cat([b[k] for b in batches]) for k in keys}, table)
    # the mask columns come from the header: a file without nulls has them too, all True
    same = torchfits.scan(clean, columns=NUMERIC).to_torch(masks=True)
    assert sorted(same) == keys and all(same[k].all() for k in keys if k.endswith("_mask"))
    with pytest.raises(ValueError, match="stack=False"):
        torchfits.scan(table, columns=["i"]).to_torch_batches(4, masks=True)
    fill = torchfits.scan(table, columns=["i"]).to_torch(masks=True, null_value=-7)
    assert fill["i"].tolist() == [10, -7, 12, 13, -7, 15]


def test_map_dataset_masks(table):
    ds = FitsTableDataset(table, columns=NUMERIC, masks=True)
    row, label = ds[1]
    assert row["i_mask"].item() is False and row["i"].item() == 0 and row["b_mask"].item() is False
    rows = [ds[r][0] for r in range(len(ds))]
    _check_masked({k: _stack(rows, k) for k in rows[0]}, table)
    batch, labels = next(iter(make_loader(ds, batch_size=ROWS, shuffle=False)))
    _check_masked(batch, table)


@pytest.mark.parametrize("as_batches", [False, True])
def test_iterable_dataset_masks(table, as_batches):
    ds = FitsTableIterableDataset(table, columns=NUMERIC, batch_size=4, as_batches=as_batches,
                                  masks=True)
    items = list(ds)
    _check_masked(_gather(items, sorted(items[0]), as_batches), table)
    batch = next(iter(make_loader(ds, batch_size=None if as_batches else ROWS)))
    assert batch["i_mask"][:4].tolist() == [True, False, True, True]


def test_iterable_batches_masks_over_files_with_and_without_tnull(tmp_path):
    """A file whose integer column has no TNULL (plain numbers: the fast batch path) still
    carries the mask key another file of the stream has, all True."""
    a, b = str(tmp_path / "a.fits"), str(tmp_path / "b.fits")
    fits.BinTableHDU.from_columns([fits.Column("i", "J", null=-1, array=np.array([1, -1, 3]))]
                                  ).writeto(a)
    fits.BinTableHDU.from_columns([fits.Column("i", "J", array=np.array([4, 5, 6]))]).writeto(b)
    for paths, values, valid in (([a, b], [1, 0, 3, 4, 5, 6], [1, 0, 1, 1, 1, 1]),
                                 ([b, a], [4, 5, 6, 1, 0, 3], [1, 1, 1, 1, 0, 1])):
        ds = FitsTableIterableDataset(paths, columns=["i"], batch_size=2, as_batches=True,
                                      masks=True)
        batches = list(ds)
        assert all(sorted(batch) == ["i", "i_mask"] for batch in batches), paths
        assert torch.cat([batch["i"] for batch in batches]).tolist() == values
        assert torch.cat([batch["i_mask"] for batch in batches]).tolist() == \
            [bool(v) for v in valid]


def test_mask_name_taken_by_a_column(tmp_path):
    path = str(tmp_path / "taken.fits")
    fits.BinTableHDU.from_columns([fits.Column("i", "J", null=-1, array=np.array([1, -1])),
                                   fits.Column("i_mask", "J", array=np.array([0, 0]))]).writeto(path)
    with pytest.raises(ValueError, match="i_mask"):
        torchfits.scan(path).to_torch(masks=True)


# -- other null kinds: variable-length arrays and ASCII tables ---------------------------------------
@pytest.fixture
def vla(tmp_path):
    path = str(tmp_path / "vla.fits")
    fits.BinTableHDU.from_columns([
        fits.Column("v", "PJ()", null=-9, array=np.array([np.array([1, -9], "i4"), np.array([3], "i4")],
                                                         dtype=object)),
        fits.Column("x", "D", array=np.array([1.0, 2.0])),
    ]).writeto(path)
    return path


def test_variable_length_nulls(vla):
    with pytest.raises(NullValueError) as info:
        FitsTableDataset(vla)
    _check_error(info, vla, "v")
    ds = FitsTableDataset(vla, null_value=0)
    assert ds[0][0]["v"].tolist() == [1, 0] and ds[1][0]["v"].tolist() == [3]
    ds = FitsTableDataset(vla, masks=True)
    assert ds[0][0]["v_mask"].tolist() == [True, False] and ds[1][0]["v_mask"].tolist() == [True]
    rows = list(FitsTableIterableDataset(vla, masks=True))
    assert rows[0]["v"].tolist() == [1, 0] and rows[0]["v_mask"].tolist() == [True, False]


def test_ascii_table_integer_nulls(tmp_path):
    path = str(tmp_path / "ascii.fits")
    fits.TableHDU.from_columns([fits.Column("n", "I5", null="*", array=np.array([1, 2, 3])),
                                fits.Column("x", "F8.2", array=np.array([1.5, 2, 3]))]).writeto(path)
    with fits.open(path) as hdul:
        start, row_bytes = hdul[1]._data_offset, hdul[1].header["NAXIS1"]
    with open(path, "r+b") as fh:  # row 1 of n: the null string
        fh.seek(start + row_bytes)
        fh.write(b"    *")
    with pytest.raises(NullValueError) as info:
        FitsTableDataset(path)
    _check_error(info, path, "n")
    got = torchfits.scan(path).to_torch(masks=True)
    assert got["n"].tolist() == [1, 0, 3] and got["n_mask"].tolist() == [True, False, True]
    # the 1.x route: what 1.2.3 gave, a zero
    assert compat_table.read_torch(path)["n"].tolist() == [1, 0, 3]


# -- the 1.x routes keep 1.x behaviour ---------------------------------------------------------------
def _check_compat(got, path):
    ref = _astropy(path)  # astropy's raw view: the TNULL sentinels, False for a logical null
    for n in ("i", "v", "u", "k"):
        assert np.array_equal(np.asarray(got[n]), ref[n]), n
    assert got["b"].tolist() == [r % 2 == 0 and r not in NULL_ROWS for r in range(ROWS)]
    f = np.asarray(got["f"])
    assert np.isnan(f[~VALID]).all()


def test_compat_routes_return_the_stored_values(table):
    _check_compat(compat_table.read_torch(table, columns=NUMERIC), table)
    _check_compat(torchfits.read(table, hdu=1, columns=NUMERIC), table)
    chunks = list(compat_table.scan_torch(table, columns=NUMERIC, batch_size=4))
    _check_compat({n: torch.cat([c[n] for c in chunks]) for n in NUMERIC}, table)
    with torchfits.open(table) as hdul:
        _check_compat({n: hdul[1].data[n] for n in NUMERIC}, table)
        _check_compat({n: hdul[1][n] for n in NUMERIC}, table)

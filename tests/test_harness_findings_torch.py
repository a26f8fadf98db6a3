"""The torch datasets and the 1.x table routes on the columns the differential harness found
them wrong on (findings H8-A to H8-G): uint64 vectors, bit/string/variable-length columns in
batches, empty variable-length cells, the 1.x complex refusal, one-bit columns, zero-row tables."""
from __future__ import annotations

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")
torch = pytest.importorskip("torch")

import torchfits  # noqa: E402
from torchfits.data import FitsTableDataset, FitsTableIterableDataset  # noqa: E402
from torchfits.errors import FitsError, UnsupportedColumnError  # noqa: E402

BIG = 2**63 + 7


@pytest.fixture
def catalog(tmp_path):
    """Three rows: an unsigned 64-bit pair, bits, a string, a PJ column with an empty cell, a
    PK column with TZERO 2**63, a float and a complex column."""
    path = tmp_path / "catalog.fits"
    cols = [
        fits.Column(name="U2", format="2K", bzero=2**63,
                    array=np.array([[0, 9], [BIG, 4], [1, 2]], dtype=np.uint64)),
        fits.Column(name="BITS", format="5X",
                    array=np.array([[1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [0, 1, 0, 1, 0]], np.uint8)),
        fits.Column(name="NAME", format="6A", array=np.array(["m31", "", "ngc224"])),
        fits.Column(name="SPANS", format="PJ()",
                    array=np.array([np.array([], np.int32), np.array([4, -5], np.int32),
                                    np.array([], np.int32)], dtype=object)),
        fits.Column(name="F", format="E", array=np.array([0.5, 1.5, 2.5], np.float32)),
        fits.Column(name="Z", format="M", array=np.array([1j, 2, 3], np.complex128)),
    ]
    fits.BinTableHDU.from_columns(cols, name="CAT").writeto(path)
    return path


def _rows(path, columns, route):
    if route == "map":
        ds = FitsTableDataset(path, 1, columns=columns)
        return [ds[i][0] for i in range(len(ds))]
    if route == "map-batch":  # the DataLoader's __getitems__ gather
        ds = FitsTableDataset(path, 1, columns=columns)
        return [row for row, _ in ds.__getitems__([0, 1, 2])]
    return list(FitsTableIterableDataset(path, 1, columns=columns, batch_size=2))


@pytest.mark.parametrize("route", ["map", "map-batch", "iterable"])
def test_row_datasets_give_uint64_vectors_as_float64(catalog, route):
    rows = _rows(catalog, ["U2", "F"], route)
    assert {r["U2"].dtype for r in rows} == {torch.float64}
    assert [r["U2"].tolist() for r in rows] == [[0.0, 9.0], [float(BIG), 4.0], [1.0, 2.0]]


def test_row_datasets_give_uint64_variable_length_cells_as_float64(tmp_path):
    path = tmp_path / "pk.fits"
    stored = [np.array([BIG - 2**63, 1 - 2**63], np.int64), np.array([], np.int64)]
    fits.BinTableHDU.from_columns([fits.Column(name="V", format="PK()",
                                               array=np.array(stored, dtype=object))]).writeto(path)
    fits.setval(path, "TZERO1", value=2**63, ext=1)  # astropy cannot write this column itself
    for route in ("map", "iterable"):
        ds = FitsTableDataset(path, 1) if route == "map" else None
        rows = [ds[i][0] for i in range(2)] if ds else list(FitsTableIterableDataset(path, 1))
        assert [r["V"].dtype for r in rows] == [torch.float64, torch.float64], route
        assert rows[0]["V"].tolist() == [float(BIG), 1.0] and rows[1]["V"].numel() == 0, route


@pytest.mark.parametrize("route", ["map", "iterable"])
def test_empty_variable_length_cells_keep_the_column_dtype(catalog, route):
    rows = _rows(catalog, ["SPANS"], route)
    assert [r["SPANS"].dtype for r in rows] == [torch.int32] * 3
    assert [r["SPANS"].tolist() for r in rows] == [[], [4, -5], []]


def test_batches_deliver_bit_string_and_variable_length_columns(catalog):
    columns = ["BITS", "NAME", "SPANS", "F"]
    batches = list(FitsTableIterableDataset(catalog, 1, columns=columns, batch_size=2,
                                            as_batches=True))
    assert [list(b) for b in batches] == [columns, columns]
    rows = _rows(catalog, columns, "iterable")
    bits = torch.cat([b["BITS"] for b in batches])
    assert bits.dtype == torch.bool and bits.shape == (3, 5)
    assert bits.tolist() == [r["BITS"].tolist() for r in rows]
    names = torch.cat([b["NAME"] for b in batches])
    assert names.dtype == torch.uint8 and names.shape == (3, 6)
    assert [bytes(n.tolist()).rstrip(b"\0 ").decode() for n in names] == ["m31", "", "ngc224"]
    cells = [c for b in batches for c in b["SPANS"]]
    assert [c.dtype for c in cells] == [torch.int32] * 3
    assert [c.tolist() for c in cells] == [[], [4, -5], []]


def test_batches_of_every_column(catalog):
    """Named, every column is in the batches; without columns= batches keep torchfits 1.x's
    columns (no strings, bits or variable lengths), as docs/training.md says."""
    named = ["U2", "BITS", "NAME", "SPANS", "F", "Z"]
    batch = next(iter(FitsTableIterableDataset(catalog, 1, columns=named, as_batches=True)))
    row = next(iter(FitsTableIterableDataset(catalog, 1)))
    assert list(batch) == list(row) == named
    default = next(iter(FitsTableIterableDataset(catalog, 1, as_batches=True)))
    assert list(default) == ["U2", "F", "Z"]
    assert batch["Z"].tolist()[0] == row["Z"].tolist() == [0.0, 1.0]  # (real, imaginary)
    assert batch["U2"][0].tolist() == row["U2"].tolist() == [0, 9]


def test_string_rows_have_the_field_width_in_every_chunk(catalog):
    """Rows of one string column stack across chunks: each is as wide as the field."""
    rows = list(FitsTableIterableDataset(catalog, 1, columns=["NAME"], batch_size=2))
    assert [tuple(r["NAME"].shape) for r in rows] == [(6,)] * 3
    assert torch.stack([r["NAME"] for r in rows]).dtype == torch.uint8


def test_compat_complex_refusal_names_file_hdu_and_column(catalog):
    for call in (lambda: torchfits.table.read(str(catalog), 1, columns=["Z"]),
                 lambda: torchfits.table.read(str(catalog), "CAT", where="F > 0")):
        with pytest.raises(UnsupportedColumnError) as info:
            call()
        msg = str(info.value)
        assert isinstance(info.value, FitsError)
        assert str(catalog) in msg and "HDU 1" in msg and "'Z'" in msg and "read_torch" in msg


def test_compat_one_bit_column_stays_scalar_as_documented(tmp_path):
    """Part of the 1.x type mapping (docs/compatibility.md): ``1X`` is a bool scalar there,
    a one-element list natively (as astropy gives it)."""
    path = tmp_path / "x.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="B", format="1X",
                                               array=np.array([[1], [0]], np.uint8))]).writeto(path)
    assert torchfits.table.read(str(path), 1)["B"].to_pylist() == [True, False]
    assert torchfits.scan(path, 1).to_arrow()["B"].to_pylist() == [[True], [False]]


def test_compat_zero_row_table_reads_as_documented(tmp_path):
    """The 1.x tensor reads give ``{}`` for a zero-row table (docs/compatibility.md); the Arrow
    read and the native route keep the columns."""
    path = tmp_path / "e.fits"
    fits.BinTableHDU.from_columns([fits.Column(name="c0", format="E",
                                               array=np.array([], np.float32))]).writeto(path)
    assert torchfits.read(str(path), 1) == {} and torchfits.table.read_torch(str(path), 1) == {}
    assert torchfits.table.read(str(path), 1).column_names == ["c0"]
    got = torchfits.scan(path, 1).to_torch()
    assert list(got) == ["c0"] and got["c0"].dtype == torch.float32 and len(got["c0"]) == 0


def test_batches_of_a_variable_length_column_with_nulls_follow_the_null_rule(tmp_path):
    path = tmp_path / "pj.fits"
    fits.BinTableHDU.from_columns([fits.Column(
        name="N", format="PJ()", null=-9,
        array=np.array([np.array([1, -9], np.int32), np.array([], np.int32)], dtype=object))]
    ).writeto(path)
    with pytest.raises(FitsError, match="'N'"):
        list(FitsTableIterableDataset(path, 1, columns=["N"], as_batches=True))
    batch, = FitsTableIterableDataset(path, 1, columns=["N"], as_batches=True, masks=True)
    assert [c.tolist() for c in batch["N"]] == [[1, 0], []]
    assert [c.tolist() for c in batch["N_mask"]] == [[True, False], []]
    assert [c.dtype for c in batch["N"]] == [torch.int32, torch.int32]

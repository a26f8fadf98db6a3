"""ASCII-table Iw columns through the 1.x routes: int32 for every width, as CFITSIO reads them
(TLONG) and torchfits 1.x returned them; a value outside int32 is refused, never wrapped. The
native routes keep int32 for w <= 9 and int64 for wider fields (issue #25)."""
import numpy as np
import pyarrow as pa
import pytest

import torchfits
from torchfits import table
from torchfits.errors import UnsupportedColumnError


@pytest.fixture
def ascii_ints(tmp_path, fits):
    path = tmp_path / "asc.fits"
    fits.TableHDU.from_columns([
        fits.Column(name="I9", format="I9", array=np.array([1, -2, 3])),
        fits.Column(name="I10", format="I10", array=np.array([1, 2**31 - 1, -999999999])),
        fits.Column(name="I20", format="I20", array=np.array([5, -6, 7])),
    ]).writeto(path)
    return str(path)


@pytest.fixture
def ascii_overflow(tmp_path, fits):
    path = tmp_path / "big.fits"
    fits.TableHDU.from_columns([
        fits.Column(name="BIG", format="I11", array=np.array([1, 3_000_000_000])),
    ]).writeto(path)
    return str(path)


def test_tensor_routes_give_int32(ascii_ints, torch):
    expect = {"I9": [1, -2, 3], "I10": [1, 2**31 - 1, -999999999], "I20": [5, -6, 7]}
    routes = {
        "read": torchfits.read(ascii_ints, hdu=1),
        "read_torch": table.read_torch(ascii_ints, hdu=1),
    }
    with torchfits.open(ascii_ints) as hdul:
        routes["open"] = {k: hdul[1].data[k] for k in expect}
    for name, cols in routes.items():
        for col, values in expect.items():
            assert cols[col].dtype == torch.int32, (name, col)
            assert cols[col].tolist() == values, (name, col)
    assert all(table.read(ascii_ints).schema.field(c).type == pa.int32() for c in expect)


def test_native_routes_keep_their_types(ascii_ints):
    schema = torchfits.scan(ascii_ints).to_arrow().schema
    assert schema.field("I9").type == pa.int32()
    assert schema.field("I10").type == pa.int64()
    assert schema.field("I20").type == pa.int64()


def test_values_beyond_int32_refused_on_1x_routes(ascii_overflow, torch):
    for call in (lambda: torchfits.read(ascii_overflow, hdu=1),
                 lambda: table.read_torch(ascii_overflow, hdu=1),
                 lambda: table.read(ascii_overflow)):
        with pytest.raises(UnsupportedColumnError, match=r"'BIG'.*3000000000.*int32"):
            call()
    assert torchfits.scan(ascii_overflow).to_arrow().column("BIG").to_pylist() == [1, 3_000_000_000]

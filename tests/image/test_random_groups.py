"""Random-groups HDUs: parameters (PSCALn/PZEROn) and data (BSCALE/BZERO) read as astropy reads
them, on astropy's own test files and on generated ones; never an empty result."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import torchfits
from _oracles import assert_bits_equal, native_array
from torchfits.errors import HDUTypeError

fits = pytest.importorskip("astropy.io.fits")

_DATA = os.path.join(os.path.dirname(fits.__file__), "tests", "data")
ASTROPY_FILES = ["random_groups.fits", "group.fits"]


@pytest.fixture(params=ASTROPY_FILES)
def astropy_groups(request):
    path = os.path.join(_DATA, request.param)
    if not os.path.exists(path):
        pytest.skip(f"{request.param} not shipped with this astropy")
    return path


def test_read_numpy_gives_the_group_data(astropy_groups):
    with fits.open(astropy_groups) as hdul:
        want = hdul[0].data["DATA"]
        gcount = hdul[0].header["GCOUNT"]
    got = torchfits.read_numpy(astropy_groups)
    assert got.size and got.shape[0] == gcount
    assert_bits_equal(got, want)
    assert_bits_equal(torchfits.read_numpy(astropy_groups, 0), want)


def test_read_groups_parameters_equal_astropy(astropy_groups):
    groups = torchfits.read_groups(astropy_groups)
    with fits.open(astropy_groups) as hdul:
        gd = hdul[0].data
        assert list(groups.names) == [str(n) for n in gd.parnames]
        assert groups.gcount == len(gd) and groups.pcount == len(gd.parnames)
        for i, name in enumerate(gd.parnames):
            assert_bits_equal(groups.par(i), gd.par(i))
            assert_bits_equal(groups.par(name), gd.par(name))      # repeated names add up, as in astropy
            assert_bits_equal(groups.par(name.lower()), gd.par(name))
        assert_bits_equal(groups.data, gd["DATA"])
    assert groups.header["GROUPS"] is True


def test_info_says_groups(astropy_groups):
    [primary] = torchfits.info(astropy_groups)
    with fits.open(astropy_groups) as hdul:
        gcount, pcount = hdul[0].header["GCOUNT"], hdul[0].header["PCOUNT"]
        shape = hdul[0].data["DATA"].shape
    assert primary.type == "GROUPS" and primary.kind == "groups"
    assert primary.shape == shape and primary.dtype == "float32"
    assert primary.gcount == gcount and primary.pcount == pcount
    row = torchfits.info(astropy_groups).rows()[0]
    assert row[2] == "GROUPS" and f"{gcount} groups" in row[4] and f"{pcount} parameters" in row[4]


def test_slices_and_pickling(astropy_groups):
    full = torchfits.read_numpy(astropy_groups)
    img = torchfits.open_image(astropy_groups)
    assert img.shape == full.shape and img.dtype == full.dtype
    np.testing.assert_array_equal(img[1], full[1])
    np.testing.assert_array_equal(img[::2, ..., -1], full[::2, ..., -1])
    np.testing.assert_array_equal(img[-1:, 0], full[-1:, 0])
    np.testing.assert_array_equal(img[::-1, ..., ::-1], full[::-1, ..., ::-1])
    np.testing.assert_array_equal(img[::-2, ..., ::-2, :], full[::-2, ..., ::-2, :])
    np.testing.assert_array_equal(img[1:1], full[1:1])
    np.testing.assert_array_equal(img.read(dtype="float64"), full.astype(np.float64))
    out = np.empty_like(full)
    assert img.read(out=out) is out and np.array_equal(out, full)
    again = pickle.loads(pickle.dumps(img))
    np.testing.assert_array_equal(again.read(), full)


def _write_groups(path, bitpix_dtype, *, bscale=None, bzero=None, pscal=None, pzero=None):
    rng = np.random.default_rng(7)
    info = np.iinfo(bitpix_dtype) if np.dtype(bitpix_dtype).kind == "i" else None
    def draw(shape):
        if info is None:
            return rng.normal(size=shape).astype(bitpix_dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape).astype(bitpix_dtype)
    data = draw((6, 2, 3, 4))
    params = [draw(6) for _ in range(3)]
    gd = fits.GroupData(data, parnames=["U", "V", "U"], pardata=params,
                        bitpix={np.dtype(np.int16): 16, np.dtype(np.int32): 32,
                                np.dtype(np.float32): -32, np.dtype(np.float64): -64}[np.dtype(bitpix_dtype)])
    hdu = fits.GroupsHDU(gd)
    if pscal is not None:
        hdu.header["PSCAL2"] = pscal
    if pzero is not None:
        hdu.header["PZERO2"] = pzero
    if bscale is not None:
        hdu.header["BSCALE"] = bscale
    if bzero is not None:
        hdu.header["BZERO"] = bzero
    hdu.writeto(path, overwrite=True)
    return path


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float32, np.float64])
def test_generated_groups_every_bitpix(tmp_path, dtype):
    path = _write_groups(tmp_path / "g.fits", dtype, pscal=0.5, pzero=3.0, bscale=2.0, bzero=1.0)
    groups = torchfits.read_groups(path)
    with fits.open(path) as hdul:
        gd = hdul[0].data
        for i in range(3):
            np.testing.assert_array_equal(groups.par(i), native_array(gd.par(i)))
        np.testing.assert_array_equal(groups.par("U"), native_array(gd.par("U")))
    # The stored arrays from the bytes themselves, scaled as the standard says (BSCALE and
    # BZERO): astropy 7 applies BSCALE only to group data (it looks BZERO up as "BZEROS").
    stored = np.fromfile(path, np.dtype(dtype).newbyteorder(">"), count=6 * 27, offset=2880)
    want = stored.reshape(6, 27)[:, 3:].astype(np.float64) * 2.0 + 1.0
    np.testing.assert_allclose(groups.data.reshape(6, 24), want, rtol=1e-6)
    assert groups.data.shape == (6, 2, 3, 4)
    np.testing.assert_array_equal(torchfits.read_numpy(path), groups.data)
    raw = torchfits.read_numpy(path, raw_scale=True)
    assert raw.dtype == np.dtype(dtype)


def test_to_arrow_one_column_per_parameter_and_data(astropy_groups):
    import pyarrow as pa
    groups = torchfits.read_groups(astropy_groups)
    table = groups.to_arrow()
    table.validate(full=True)
    with fits.open(astropy_groups) as hdul:
        gd = hdul[0].data
        assert table.column_names == list(gd.dtype.names)   # repeated names: astropy's spelling
        for i, name in enumerate(gd.dtype.names[:-1]):
            np.testing.assert_array_equal(table.column(name).to_numpy(), native_array(gd.field(i)))
        data = _flatten(table.column("DATA"))
        np.testing.assert_array_equal(data.reshape(gd["DATA"].shape), native_array(gd["DATA"]))
    assert pa.types.is_fixed_size_list(table.schema.field("DATA").type)


def _flatten(column):
    arr = column.combine_chunks()
    while hasattr(arr, "flatten") and hasattr(arr.type, "list_size"):
        arr = arr.flatten()
    return arr.to_numpy()


def test_read_groups_refuses_other_hdus(tmp_path):
    path = tmp_path / "img.fits"
    fits.PrimaryHDU(np.zeros((2, 2), np.float32)).writeto(path)
    with pytest.raises(HDUTypeError, match="random-groups"):
        torchfits.read_groups(path)

"""The FITS-keyword transforms against files written by astropy: BSCALE/BZERO and BITPIX for
images (oracle: torchfits' own physical read, itself checked against astropy and fitsio in
tests/image/test_image.py), TSCALn/TZEROn and TNULLn for table columns (oracle: astropy's scaled column)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from _oracles import write_image  # noqa: E402
from torchfits import transforms as T  # noqa: E402
from torchfits.errors import FitsFileNotFoundError, TransformError  # noqa: E402


@pytest.mark.parametrize("bitpix,bscale,bzero", [(16, 0.5, 3.0), (32, 2.0, -7.0), (8, 1.5, 0.0),
                                                 (16, 1.0, 32768.0)])
def test_header_scale_from_path_matches_physical_read(tmp_path, bitpix, bscale, bzero):
    dtype = {8: np.uint8, 16: np.int16, 32: np.int32}[bitpix]
    stored = (np.arange(12 * 9) * 37 % 250).astype(dtype).reshape(12, 9)
    path = write_image(tmp_path / "img.fits", stored, bitpix=bitpix, bscale=bscale, bzero=bzero,
                       extension=True)
    raw = torchfits.read(str(path), 1, raw_scale=True)
    physical = torchfits.read(str(path), 1)
    with fits.open(path) as hdul:
        expected = hdul[1].data.astype(np.float64)
    t = T.FITSHeaderScale.from_path(str(path), 1)
    assert (t.bscale, t.bzero) == (bscale, bzero)
    scaled = t(raw)
    assert scaled.dtype.is_floating_point
    np.testing.assert_allclose(scaled.double().numpy(), expected, rtol=1e-7)
    np.testing.assert_allclose(scaled.double().numpy(), physical.double().numpy(), rtol=1e-7)
    back = t.inverse(scaled)
    np.testing.assert_array_equal(np.rint(back.double().numpy()), stored.astype(np.float64))
    same = T.FITSHeaderScale.from_header(torchfits.read_header(str(path), 1))
    assert (same.bscale, same.bzero) == (bscale, bzero)


def test_header_scale_identity_and_batch():
    x = torch.arange(6, dtype=torch.int16).reshape(2, 3)
    t = T.FITSHeaderScale()
    assert t(x) is x and t.inverse(x) is x
    batch = torch.arange(24, dtype=torch.int16).reshape(2, 3, 4)
    y = T.FITSHeaderScale(0.5, 10)(batch)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, batch.float() * 0.5 + 10)
    assert T.FITSHeaderScale(2, 1)(batch.to(torch.int64)).dtype == torch.float64
    assert T.FITSHeaderScale(2, 1)(batch.half()).dtype == torch.float16
    with pytest.raises(FitsFileNotFoundError):
        T.FITSHeaderScale.from_path("/nonexistent/x.fits")
    with pytest.raises(TransformError, match="BSCALE"):
        T.FITSHeaderScale.from_header({"BSCALE": "two"})


@pytest.mark.parametrize("bitpix,bzero,lo,hi", [(8, 0.0, 0, 255), (16, 0.0, -32768, 32767),
                                                (16, 32768.0, 0, 65535),
                                                (32, 0.0, -2 ** 31, 2 ** 31 - 1)])
def test_header_normalize_integer_ranges(tmp_path, bitpix, bzero, lo, hi):
    dtype = {8: np.uint8, 16: np.int16, 32: np.int32}[bitpix]
    info = np.iinfo(dtype)
    stored = np.array([[info.min, 0, info.max], [1, 2, 3]], dtype=dtype)
    path = write_image(tmp_path / "n.fits", stored, bitpix=bitpix, bzero=bzero)
    physical = torchfits.read(str(path))
    t = T.FITSHeaderNormalize.from_path(str(path))
    y = t(physical)
    expected = (stored.astype(np.float64) + bzero - lo) / (hi - lo)
    np.testing.assert_allclose(y.double().numpy(), expected, rtol=1e-7, atol=1e-9)
    assert float(y.min()) == 0.0 and float(y.max()) == 1.0
    back = t.inverse(y)
    np.testing.assert_allclose(back.double().numpy(), stored.astype(np.float64) + bzero,
                               rtol=1e-6, atol=1e-3)
    # the storage minimum maps to 0 and the maximum to 1, whatever the sign of BSCALE
    neg = T.FITSHeaderNormalize({"BITPIX": 16, "BSCALE": -2.0})(torch.tensor([-65534.0, 65536.0]))
    torch.testing.assert_close(neg, torch.tensor([1.0, 0.0]))


def test_header_normalize_floats():
    x = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    ident = T.FITSHeaderNormalize({"BITPIX": -32})
    assert ident(x) is x and ident.inverse(x) is x
    t = T.FITSHeaderNormalize({"BITPIX": -64}, scale_floats=True)
    y = t(x)
    torch.testing.assert_close(y, (x - 1) / 4)
    torch.testing.assert_close(t.inverse(y), x)
    payload = t({"flux": x, "ivar": torch.ones_like(x)})
    torch.testing.assert_close(payload["ivar"], torch.full_like(x, 16.0))


def _table(tmp_path):
    stored_a = np.array([-5, 0, 7, 100, 2 ** 20], dtype=np.int32)
    stored_b = np.array([1, -999, 3, -999, 5], dtype=np.int32)
    cols = [
        fits.Column(name="A", format="J", array=stored_a),
        fits.Column(name="B", format="J", array=stored_b, null=-999),
        fits.Column(name="C", format="E", array=np.array([1, 2, 3, 4, 5], dtype=np.float32)),
    ]
    path = tmp_path / "tab.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path)
    # scaling cards added to the stored integers afterwards, so the bytes are stored_a
    fits.setval(path, "TSCAL1", value=0.25, ext=1)
    fits.setval(path, "TZERO1", value=1000.0, ext=1)
    return path, stored_a, stored_b


def test_scale_columns_and_tnull_from_header(tmp_path):
    path, stored_a, stored_b = _table(tmp_path)
    header = torchfits.read_header(str(path), 1)
    scale = T.FITSScaleColumns.from_header(header)
    assert scale.scales == {"A": (0.25, 1000.0)}
    columns = {"A": torch.from_numpy(stored_a), "B": torch.from_numpy(stored_b),
               "C": torch.arange(5.0), "names": ["v", "w", "x", "y", "z"]}
    out = scale(columns)
    with fits.open(path) as hdul:
        physical_a = np.asarray(hdul[1].data["A"], dtype=np.float64)
    assert out["A"].dtype == torch.float64
    np.testing.assert_array_equal(out["A"].numpy(), physical_a)
    assert out["B"] is columns["B"] and out["names"] is columns["names"]
    np.testing.assert_array_equal(scale.inverse(out)["A"].numpy(), stored_a.astype(np.float64))
    # the native scan delivers the same physical values
    np.testing.assert_array_equal(torchfits.scan(str(path), hdu=1).to_numpy()["A"], physical_a)

    nulls = T.TNullToNan.from_header(header)
    assert nulls.nulls == {"B": -999}
    got = nulls(columns)["B"]
    assert got.dtype == torch.float64
    expected = np.where(stored_b == -999, np.nan, stored_b.astype(np.float64))
    np.testing.assert_array_equal(got.numpy(), expected)
    assert T.Compose([nulls, scale])(columns)["A"].dtype == torch.float64


def test_tnull_dtypes_and_errors():
    t = T.TNullToNan({"f": 2.5, "i": 300, "k": 7, "frac": 1.5, "flag": 1})
    flag = torch.tensor([True, False])
    assert t({"flag": flag})["flag"] is flag
    out = t({"f": torch.tensor([2.5, 1.0], dtype=torch.float32),
             "i": torch.tensor([1, 2], dtype=torch.int8),  # sentinel outside int8: no match
             "k": torch.tensor([7, 8], dtype=torch.int64),
             "frac": torch.tensor([1, 2], dtype=torch.int16)})
    assert out["f"].dtype == torch.float32 and torch.isnan(out["f"][0])
    assert out["i"].tolist() == [1.0, 2.0] and out["i"].dtype == torch.float64
    assert torch.isnan(out["k"][0]) and out["k"][1] == 8
    assert out["frac"].tolist() == [1.0, 2.0]
    with pytest.raises(TransformError, match="dict"):
        t(torch.zeros(3))
    with pytest.raises(TransformError, match="not a tensor"):
        t({"k": [7, 8]})
    with pytest.raises(TransformError, match="TFIELDS"):
        T.TNullToNan.from_header({"BITPIX": 8})

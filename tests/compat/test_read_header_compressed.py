"""1.x ``read(..., return_header=True)`` on a tile-compressed HDU gives the header as stored
(the binary table with ZIMAGE, ZCMPTYPE, ...), as 1.x and our ``read_header`` do."""
import numpy as np
import pytest

import torchfits
from torchfits.image import open_image

astropy_fits = pytest.importorskip("astropy.io.fits")
torch = pytest.importorskip("torch")


@pytest.fixture
def compressed_file(tmp_path):
    data = np.arange(300, dtype=np.int16).reshape(15, 20)
    path = str(tmp_path / "comp.fits")
    astropy_fits.HDUList([
        astropy_fits.PrimaryHDU(),
        astropy_fits.CompImageHDU(data, name="SCI", compression_type="RICE_1"),
        astropy_fits.CompImageHDU(data.astype(np.float32), name="FLT", compression_type="GZIP_1"),
    ]).writeto(path)
    return path, data


def _stored(path, k):
    with astropy_fits.open(path, disable_image_compression=True) as hdul:
        return hdul[k].header


@pytest.mark.parametrize("hdu", [1, "SCI", 2])
def test_read_return_header_is_stored_header(compressed_file, hdu):
    path, data = compressed_file
    k = hdu if isinstance(hdu, int) else 1
    tensor, header = torchfits.read(path, hdu=hdu, return_header=True)
    stored = _stored(path, k)
    assert header["ZIMAGE"] is True
    assert header["ZCMPTYPE"] == stored["ZCMPTYPE"]
    assert header["XTENSION"] == "BINTABLE"
    assert header["BITPIX"] == 8
    for key in ("ZBITPIX", "ZNAXIS", "ZNAXIS1", "ZNAXIS2", "ZTILE1", "ZTILE2", "NAXIS1", "NAXIS2"):
        assert header[key] == stored[key], key
    assert set(k for k in stored.keys() if k) <= set(header.keys())
    # the data is still the decompressed image
    assert tuple(tensor.shape) == data.shape
    if k == 1:
        assert np.array_equal(tensor.numpy(), data)
    # the same header read_header gives
    assert dict(header.items()) == dict(torchfits.read_header(path, k).items())


def test_read_tensor_and_read_hdus_give_stored_header(compressed_file):
    path, _ = compressed_file
    _, header = torchfits.read_tensor(path, 1, return_header=True)
    assert header["ZIMAGE"] is True and header["ZCMPTYPE"] == "RICE_1"
    _, headers = torchfits.read_hdus(path, [1, "FLT"], return_header=True)
    assert [h["ZCMPTYPE"] for h in headers] == ["RICE_1", "GZIP_1"]
    assert all(h["XTENSION"] == "BINTABLE" for h in headers)


def test_read_auto_hdu_gives_stored_header(compressed_file):
    path, data = compressed_file
    tensor, header = torchfits.read(path, hdu="auto", return_header=True)
    assert header["ZIMAGE"] is True and header["EXTNAME"] == "SCI"
    assert tuple(tensor.shape) == data.shape


def test_path_list_gives_stored_headers(compressed_file):
    path, _ = compressed_file
    out = torchfits.read([path + "[1]", path + "[2]"], return_header=True)
    assert [h["ZCMPTYPE"] for _, h in out] == ["RICE_1", "GZIP_1"]


def test_uncompressed_header_unchanged(tmp_path):
    path = str(tmp_path / "plain.fits")
    astropy_fits.PrimaryHDU(np.ones((3, 4), np.float32)).writeto(path)
    _, header = torchfits.read(path, return_header=True)
    assert header["NAXIS1"] == 4 and "ZIMAGE" not in header


def test_native_image_header_stays_decompressed(compressed_file):
    path, data = compressed_file
    header = open_image(path, 1).header
    assert "ZIMAGE" not in header
    assert header["BITPIX"] == 16 and header["NAXIS1"] == data.shape[1]

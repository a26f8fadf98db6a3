"""torchfits.dask.read_images: FITS images as Dask arrays whose blocks decode their own region.

Stacks of same-shaped files, one large image in blocks, tile-compressed images in whole tiles.
Oracle: the NumPy arrays the files were written from; the cluster tests run on the folder's
LocalCluster.
"""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
fits = pytest.importorskip("astropy.io.fits")

import torchfits.dask as tfd  # noqa: E402
from _daskhelpers import write_images  # noqa: E402


def test_image_stack_sum_and_blocks(client, tmp_path):
    arrays = write_images(tmp_path, 6, (64, 80), fits)
    stack = tfd.read_images(str(tmp_path))
    assert stack.shape == (6, 64, 80) and stack.dtype == np.uint16
    assert int(stack.astype(np.int64).sum().compute()) == int(sum(a.astype(np.int64).sum() for a in arrays))
    ref = np.stack(arrays)
    small = tfd.read_images([str(tmp_path / f"img{k}.fits") for k in range(6)], chunks=(2, 32, 40))
    assert small.numblocks == (3, 2, 2)
    np.testing.assert_array_equal(small.blocks[1, 1, 0].compute(), ref[2:4, 32:64, 0:40])
    np.testing.assert_array_equal(small[:, 5, ::7].compute(), ref[:, 5, ::7])


def test_large_image_blocks_decode_their_region(client, tmp_path):
    rng = np.random.default_rng(3)
    img = rng.normal(size=(900, 700)).astype(np.float32)
    fits.PrimaryHDU(img).writeto(str(tmp_path / "big.fits"))
    arr = tfd.read_images(str(tmp_path / "big.fits"), chunks=(256, 300))
    assert arr.chunks == ((256, 256, 256, 132), (300, 300, 100))
    np.testing.assert_array_equal(arr.blocks[1, 1].compute(), img[256:512, 300:600])
    np.testing.assert_allclose(float(arr.sum().compute()), float(img.astype(np.float64).sum()), rtol=1e-6)
    auto = tfd.read_images(str(tmp_path / "big.fits"))
    assert auto.chunks[1] == (700,)  # whole rows: every block is one contiguous byte range


def test_compressed_image_blocks_are_whole_tiles(client, tmp_path):
    rng = np.random.default_rng(5)
    img = rng.integers(-2000, 2000, (500, 400)).astype(np.int32)
    hdu = fits.CompImageHDU(img, compression_type="RICE_1", tile_shape=(50, 40))
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(str(tmp_path / "c.fits"))
    import dask

    with dask.config.set({"array.chunk-size": "64KiB"}):
        arr = tfd.read_images(str(tmp_path / "c.fits"), hdu=1)
    assert arr.dtype == np.int32
    assert all(c % 50 == 0 for c in arr.chunks[0][:-1]) and all(c % 40 == 0 for c in arr.chunks[1][:-1])
    assert arr.npartitions > 1
    np.testing.assert_array_equal(arr.compute(), img)
    np.testing.assert_array_equal(arr[123:321, 17:390].compute(), img[123:321, 17:390])


def test_read_images_refuses_mixed_shapes(tmp_path):
    fits.PrimaryHDU(np.zeros((4, 5), np.float32)).writeto(str(tmp_path / "a.fits"))
    fits.PrimaryHDU(np.zeros((4, 6), np.float32)).writeto(str(tmp_path / "b.fits"))
    with pytest.raises(ValueError, match="same-shaped"):
        tfd.read_images(str(tmp_path))


def test_images_pickle_small():
    import pickle

    blocks = tfd.ImageBlocks(["/data/a.fits"] * 3, 0, (10, 10), np.float32, stack=True)
    payload = pickle.dumps(blocks)
    assert len(payload) < 400
    back = pickle.loads(payload)
    assert back.shape == (3, 10, 10) and back.dtype == np.float32

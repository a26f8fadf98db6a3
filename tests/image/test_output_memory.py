"""Whole-image outputs from the recycled pool (``_image.output_array``): a read of the size of
a dropped output writes into its memory, every pixel of it (nothing of the last image shows
through), a read of another size frees what is kept, and the pool is bounded and cleared."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import torchfits
from torchfits._kernels import _image

SHAPE = (800, 700)  # 1.1 MB as int16, 2.2 MB as int32/float32: above the pool's 1 MiB threshold


@pytest.fixture(autouse=True)
def _empty_pool():
    gc.collect()
    _image.release_output_memory()
    yield
    gc.collect()
    _image.release_output_memory()


def _address(array):
    return array.__array_interface__["data"][0]


def _mask(seed, fill):
    """An int32 mask of runs: ``fill`` of the pixels set, the rest zero runs."""
    rng = np.random.default_rng(seed)
    out = np.zeros(SHAPE, np.int32)
    rows = rng.random(SHAPE[0]) < fill
    out[rows, 40:400] = rng.integers(1, 1 << 20, (int(rows.sum()), 1))
    return out


def _pair(kind):
    """Two different images of one shape, and the compression to write them with."""
    rng = np.random.default_rng(31)
    if kind == "PLIO_1":
        return _mask(1, 0.9), _mask(2, 0.1), "PLIO_1"
    if kind == "RICE_1":
        return (rng.integers(-3000, 3000, SHAPE).astype(np.int16),
                rng.integers(-30, 30, SHAPE).astype(np.int16), "RICE_1")
    if kind == "GZIP_2":
        return (rng.standard_normal(SHAPE).astype(np.float32),
                np.zeros(SHAPE, np.float32), "GZIP_2")
    if kind == "uint16":  # BZERO 32768: a scaled read through the recycled scratch
        return (rng.integers(0, 65535, SHAPE).astype(np.uint16),
                rng.integers(0, 9, SHAPE).astype(np.uint16), "RICE_1")
    return (rng.standard_normal(SHAPE).astype(np.float32),
            rng.standard_normal(SHAPE).astype(np.float32), None)


@pytest.mark.parametrize("kind", ["plain", "PLIO_1", "RICE_1", "GZIP_2", "uint16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_read_of_a_dropped_size_reuses_it_and_writes_every_pixel(tmp_path, fitsio, kind, threads):
    first, second, codec = _pair(kind)
    paths = []
    for name, data in (("a.fits", first), ("b.fits", second)):
        p = tmp_path / name
        fitsio.write(str(p), data, compress=codec, qlevel=0 if codec == "GZIP_2" else None)
        paths.append(p)
    ext = 1 if codec else 0
    a = torchfits.read_numpy(paths[0], ext, threads=threads)
    np.testing.assert_array_equal(a, fitsio.read(str(paths[0]), ext=ext))
    where = _address(a)
    del a
    assert _image.output_memory_kept() >= first.nbytes
    b = torchfits.read_numpy(paths[1], ext, threads=threads)
    assert _address(b) == where  # the dropped output's memory ...
    np.testing.assert_array_equal(b, fitsio.read(str(paths[1]), ext=ext))  # ... all rewritten
    assert b.flags.writeable and b.flags.c_contiguous


def test_kept_outputs_and_their_views_are_never_reused(tmp_path, fits):
    data = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    path = tmp_path / "a.fits"
    fits.PrimaryHDU(data).writeto(path)
    kept = torchfits.read_numpy(path)
    view = torchfits.read_numpy(path)[10:20]  # the array dies, its view holds the memory
    others = [torchfits.read_numpy(path) for _ in range(3)]
    addresses = {_address(a) for a in [kept, *others]} | {_address(view.base)}
    assert len(addresses) == 5
    del others
    np.testing.assert_array_equal(kept, data)
    np.testing.assert_array_equal(view, data[10:20])


def test_a_new_size_frees_what_is_kept_and_small_outputs_are_plain(tmp_path, fits):
    big = np.ones(SHAPE, np.float32)
    other = np.ones((SHAPE[0] + 1, SHAPE[1]), np.float32)
    small = np.ones((100, 100), np.float32)
    for name, data in (("big.fits", big), ("other.fits", other), ("small.fits", small)):
        fits.PrimaryHDU(data).writeto(tmp_path / name)
    a = torchfits.read_numpy(tmp_path / "big.fits")
    del a
    assert _image.output_memory_kept() == big.nbytes
    b = torchfits.read_numpy(tmp_path / "other.fits")
    assert _image.output_memory_kept() == 0  # freed before the new block: no added peak
    del b
    assert _image.output_memory_kept() == other.nbytes
    c = torchfits.read_numpy(tmp_path / "small.fits")
    del c
    assert _image.output_memory_kept() == other.nbytes  # under 1 MiB: malloc's, not kept


def test_the_pool_is_bounded_and_cleared():
    # Untouched blocks: their pages are never faulted in, so this costs address space only.
    blocks = [_image.output_array((100 << 20,), np.uint8) for _ in range(3)]
    huge = _image.output_array((300 << 20,), np.uint8)
    del blocks, huge
    assert _image.output_memory_kept() == 200 << 20  # at most 256 MiB; a 300 MiB block is freed
    torchfits.cache.clear_cache()
    assert _image.output_memory_kept() == 0
    kept = _image.output_array((2 << 20,), np.uint8)
    del kept
    assert _image.output_memory_kept() == 2 << 20
    torchfits.clear_file_cache(data=True)
    assert _image.output_memory_kept() == 0
    assert _image.output_array((3, 0), np.float32).shape == (3, 0)
    assert _image.output_array((2 << 20,), ">f4").dtype == np.dtype(">f4")  # NumPy's own


def test_torch_tensors_hold_recycled_memory(tmp_path, fits, torch):
    data = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    path = tmp_path / "a.fits"
    fits.PrimaryHDU(data).writeto(path)
    tensor = torch.from_numpy(torchfits.read_numpy(path))
    gc.collect()
    assert _image.output_memory_kept() == 0
    again = torchfits.read_numpy(path)
    assert _address(again) != tensor.data_ptr()
    np.testing.assert_array_equal(tensor.numpy(), data)

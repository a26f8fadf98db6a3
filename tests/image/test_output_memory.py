"""Read outputs from the recycled pool (``image.plain.output_array``): a read of the size of a
dropped output writes into its memory, every pixel of it (nothing of the last image shows
through), on every path that fills one (plain, banded, threaded, cubes, BLANK, regions, and
the tile paths: direct, scaled through a scratch of another size, tiles scattered into place);
a read of another size frees what is kept; the pool is bounded, configurable, cleared, and
empty in a forked child."""
from __future__ import annotations

import gc
import multiprocessing

import numpy as np
import pytest

import torchfits
from torchfits._kernels import _image
from torchfits.fits.sources import residency

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


def _mask(seed, fill, shape=SHAPE):
    """An int32 mask of runs: ``fill`` of the rows set, the rest zero runs."""
    rng = np.random.default_rng(seed)
    out = np.zeros(shape, np.int32)
    rows = rng.random(shape[0]) < fill
    out[rows, 40:400] = rng.integers(1, 1 << 20, (int(rows.sum()), 1))
    return out


# name: (first image, second image, write options); the two differ in every way that matters
def _cases():
    rng = np.random.default_rng(31)
    ints = rng.integers(-3000, 3000, SHAPE).astype(np.int16)
    small = rng.integers(-30, 30, SHAPE).astype(np.int16)
    floats = rng.standard_normal(SHAPE).astype(np.float32)
    big = rng.standard_normal((1100, 1000)).astype(np.float32)  # 4.4 MB: split over threads
    cube = rng.standard_normal((3, 400, 500)).astype(np.float32)
    u16 = rng.integers(0, 65535, SHAPE).astype(np.uint16)
    return {
        "plain": (floats, -floats, {}),
        "plain-threaded": (big, big * 0 + 1, {}),
        "plain-cube": (cube, cube[::-1].copy(), {}),
        "plain-blank": (ints, small, {"header": {"BLANK": -30}}),  # BLANK → NaN in float32
        "PLIO_1": (_mask(1, 0.9), _mask(2, 0.1), {"compress": "PLIO_1"}),
        "RICE_1": (ints, small, {"compress": "RICE_1"}),
        "GZIP_2": (floats, np.zeros(SHAPE, np.float32), {"compress": "GZIP_2", "qlevel": 0}),
        # BZERO 32768 and square tiles: decoded into a scratch, scattered tile by tile
        "tiles-uint16": (u16, u16 // 7, {"compress": "RICE_1", "tile_dims": [100, 100]}),
        # BSCALE: a float32 output (2.2 MB) from an int16 scratch (1.1 MB), two sizes
        "scaled": (ints, small, {"compress": "RICE_1", "header": {"BSCALE": 0.5, "BZERO": 3.0}}),
    }


CASES = _cases()


def _write(fitsio, path, data, options):
    """Write with fitsio (header cards as given: stored integers keep their BSCALE/BZERO/BLANK);
    return the HDU to read."""
    options = dict(options)
    fitsio.write(str(path), data, header=options.pop("header", None), **options)
    return 1 if "compress" in options else 0


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_a_read_of_a_dropped_size_reuses_it_and_writes_every_pixel(tmp_path, fitsio, fits, name,
                                                                    threads):
    first, second, options = CASES[name]
    paths = [tmp_path / "a.fits", tmp_path / "b.fits"]
    ext = _write(fitsio, paths[0], first, options)
    _write(fitsio, paths[1], second, options)

    def want(p):
        with fits.open(p) as hl:  # astropy applies BLANK, BSCALE and BZERO
            return np.asarray(hl[ext].data)

    a = torchfits.read_numpy(paths[0], ext, threads=threads)
    np.testing.assert_array_equal(a, want(paths[0]))
    where = _address(a)
    del a
    assert _image.output_memory_kept() >= first.size * 2  # the output, and a scratch if any
    b = torchfits.read_numpy(paths[1], ext, threads=threads)
    assert _address(b) == where  # the dropped output's memory ...
    np.testing.assert_array_equal(b, want(paths[1]))  # ... all rewritten
    assert b.flags.writeable and b.flags.c_contiguous and _image.owns(b)


def test_banded_reads_and_regions_recycle_too(tmp_path, fits, monkeypatch):
    rng = np.random.default_rng(4)
    first = rng.standard_normal((2200, 1000)).astype(np.float32)  # 8.8 MB: past a band of 8 MiB
    second = rng.standard_normal((2200, 1000)).astype(np.float32)
    for name, data in (("a.fits", first), ("b.fits", second)):
        fits.PrimaryHDU(data).writeto(tmp_path / name)
    monkeypatch.setenv("TORCHFITS_RESIDENT_MB", "1")  # whole reads of 1 MiB and more go in bands
    assert residency.budget() == 1 << 20
    a = torchfits.read_numpy(tmp_path / "a.fits")
    where = _address(a)
    del a
    b = torchfits.read_numpy(tmp_path / "b.fits")
    assert _address(b) == where
    np.testing.assert_array_equal(b, second)
    del b
    region = torchfits.open_image(tmp_path / "a.fits")[100:1100:2, 5:905]  # 1.8 MB, strided
    np.testing.assert_array_equal(region, first[100:1100:2, 5:905])
    where = _address(region)
    del region
    again = torchfits.open_image(tmp_path / "b.fits")[0:1000:2, 0:900]
    assert _address(again) == where
    np.testing.assert_array_equal(again, second[0:1000:2, 0:900])


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
    assert c.flags.owndata  # under 1 MiB: malloc's, not kept
    del c
    assert _image.output_memory_kept() == other.nbytes


def test_the_pool_is_bounded_and_cleared():
    old = _image.set_output_memory_limit(8 << 20)
    try:
        blocks = [_image.output_array((3 << 20,), np.uint8) for _ in range(3)]
        larger = _image.output_array((9 << 20,), np.uint8)
        del blocks, larger
        assert _image.output_memory_kept() == 6 << 20  # two of three; the 9 MiB block freed
        assert _image.set_output_memory_limit(4 << 20) == 8 << 20
        assert _image.output_memory_kept() == 0  # over the new limit: freed at once
    finally:
        _image.set_output_memory_limit(old)
    kept = _image.output_array((2 << 20,), np.uint8)
    del kept
    assert _image.output_memory_kept() == 2 << 20
    torchfits.cache.clear_cache()
    assert _image.output_memory_kept() == 0
    kept = _image.output_array((2 << 20,), np.uint8)
    del kept
    torchfits.clear_file_cache(data=True)
    assert _image.output_memory_kept() == 0
    assert _image.output_array((3, 0), np.float32).shape == (3, 0)
    for dtype in (">f4", "S4", "M8[s]", object):  # NumPy's own, as asked
        array = _image.output_array((1 << 20,), dtype)
        assert array.dtype == np.dtype(dtype) and array.flags.owndata


def test_the_environment_sets_the_bound(tmp_path, fits, monkeypatch):
    path = tmp_path / "a.fits"
    fits.PrimaryHDU(np.ones(SHAPE, np.float32)).writeto(path)
    try:
        monkeypatch.setenv("TORCHFITS_OUTPUT_POOL_MB", "0")
        a = torchfits.read_numpy(path)
        del a
        assert _image.output_memory_kept() == 0
        monkeypatch.setenv("TORCHFITS_OUTPUT_POOL_MB", "16")
        a = torchfits.read_numpy(path)
        del a
        assert _image.output_memory_kept() == 4 * np.prod(SHAPE)
        monkeypatch.setenv("TORCHFITS_OUTPUT_POOL_MB", "lots")
        with pytest.raises(ValueError, match="TORCHFITS_OUTPUT_POOL_MB"):
            torchfits.read_numpy(path)
    finally:
        monkeypatch.delenv("TORCHFITS_OUTPUT_POOL_MB")
        torchfits.read_numpy(path)  # back to the default
    assert _image.OUTPUT_MEMORY_DEFAULT == 256 << 20
    assert _image.set_output_memory_limit(256 << 20) == 256 << 20


def _kept_in_child(queue):
    queue.put(_image.output_memory_kept())


def test_a_forked_child_starts_with_an_empty_pool():
    kept = _image.output_array((2 << 20,), np.uint8)
    del kept
    assert _image.output_memory_kept() == 2 << 20
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_kept_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert got == 0 and child.exitcode == 0
    assert _image.output_memory_kept() == 2 << 20  # the parent keeps its own


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

"""The codec kernels and their registry: round trips, the convention's random sequence, and
GIL-free many-tile kernels agreeing with the one-tile ones."""
from __future__ import annotations

import numpy as np
import pytest

from torchfits._kernels import _gziptiles, _hcompress, _plio, _quantize, _rice
from torchfits.image.codec_registry import (
    REGISTRY,
    CodecError,
    Gzip1,
    Gzip2,
    Hcompress1,
    NoCompress,
    Plio1,
    Rice1,
    get_codec,
)


def test_registry_contract():
    for name in ("RICE_1", "GZIP_1", "GZIP_2", "PLIO_1", "HCOMPRESS_1", "BZIP2_1", "NOCOMPRESS"):
        cls = REGISTRY[name]
        assert cls.codec_id == name
        for method in ("decode", "encode", "get_config"):
            assert callable(getattr(cls, method))
    c = get_codec("rice_1", blocksize=16, bytepix=2)
    assert c.get_config() == {"id": "RICE_1", "blocksize": 16, "bytepix": 2}
    assert get_codec(c.get_config()).get_config() == c.get_config()
    with pytest.raises(ValueError):
        get_codec("LZMA_1")


def test_random_sequence():
    r = _quantize.random_sequence()
    assert r.shape == (10000,) and 0 < r.min() and r.max() < 1
    # the generator's documented check value: the 10,000th seed is 1043618065
    assert abs(r[-1] * 2147483647.0 - 1043618065) < 200
    assert _quantize.dither_seed(0, 1) == 0 and _quantize.dither_seed(9999, 2) == 0


@pytest.mark.parametrize("bytepix,dtype", [(1, np.uint8), (2, np.int16), (4, np.int32), (8, np.int64)])
@pytest.mark.parametrize("blocksize", [16, 32])
def test_rice_roundtrip(bytepix, dtype, blocksize):
    rng = np.random.default_rng(bytepix)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 777, dtype=dtype, endpoint=True)
    a[100:200] = 5  # low-entropy blocks
    a[300:400] = np.arange(100, dtype=dtype)  # small differences
    codec = Rice1(blocksize, bytepix)
    out = np.empty_like(a)
    codec.decode(codec.encode(a), out)
    assert np.array_equal(out, a)
    with pytest.raises(CodecError):
        codec.decode(codec.encode(a)[:20], np.empty_like(a))


@pytest.mark.parametrize("bytepix,dtype", [(1, np.uint8), (2, np.int16), (4, np.int32), (8, np.int64)])
def test_rice_long_codes_and_stream_ends(bytepix, dtype):
    """Codes the 8-byte fast path leaves to the careful loop: unary runs longer than its
    buffer (a spike in a quiet block), and every code of the last 8 bytes of a tile."""
    rng = np.random.default_rng(40 + bytepix)
    info = np.iinfo(dtype)
    for trial in range(20):
        n = int(rng.integers(1, 3000))
        a = rng.integers(-3, 4, n).cumsum().astype(np.int64)
        spikes = rng.integers(0, n, max(1, n // 200))
        a[spikes] += rng.integers(info.max // 4, info.max // 2, len(spikes)) if bytepix < 8 \
            else rng.integers(1 << 40, 1 << 50, len(spikes))
        a = np.clip(a, info.min, info.max).astype(dtype)
        for blocksize in (16, 32):
            codec = Rice1(blocksize, bytepix)
            out = np.empty_like(a)
            codec.decode(codec.encode(a), out)
            assert np.array_equal(out, a), (trial, blocksize)


@pytest.mark.parametrize("lzcnt", [True, False])
@pytest.mark.parametrize("bytepix,dtype", [(2, np.int16), (4, np.int32)])
def test_rice_every_split_code_width(bytepix, dtype, lzcnt):
    """Blocks at every split-code width fs (0 .. fsmax - 1) next to zero blocks and raw blocks,
    in tiles whose length is not a multiple of the block, through both split-code loops (LZCNT
    and portable); and a file written by CFITSIO (fitsio) with the same pixels."""
    fsmax = 14 if bytepix == 2 else 25
    rng = np.random.default_rng(7 + bytepix)
    parts = []
    for fs in range(fsmax + 1):
        step = rng.integers(-(1 << fs), (1 << fs) + 1, 45)  # mapped differences near 2^fs
        parts += [step, np.zeros(37, np.int64)]
    parts.append(rng.integers(-(1 << (8 * bytepix - 2)), 1 << (8 * bytepix - 2), 50))  # raw blocks
    a = np.concatenate(parts).cumsum()
    info = np.iinfo(dtype)
    a = ((a - info.min) % (1 << (8 * bytepix)) + info.min).astype(dtype)
    was = _rice.use_lzcnt(lzcnt)
    try:
        for n in (len(a), len(a) - 1, 33, 31, 9):
            for blocksize in (16, 32):
                codec = Rice1(blocksize, bytepix)
                out = np.empty(n, dtype)
                codec.decode(codec.encode(a[:n]), out)
                assert np.array_equal(out, a[:n]), (n, blocksize)
    finally:
        _rice.use_lzcnt(was)


def test_rice_split_loops_match_cfitsio(tmp_path):
    """Both split-code loops read a CFITSIO-written RICE_1 image (quiet and busy rows) as
    fitsio does."""
    fitsio = pytest.importorskip("fitsio")
    rng = np.random.default_rng(3)
    img = (1000 + rng.normal(0, 1, (64, 300)) * np.logspace(0, 3.5, 64)[:, None]).astype(np.int16)
    img[5] = 7
    path = tmp_path / "rice.fits"
    fitsio.write(str(path), img, compress="RICE_1")
    want = fitsio.read(str(path), ext=1)
    import torchfits

    for lzcnt in (True, False):
        was = _rice.use_lzcnt(lzcnt)
        try:
            assert np.array_equal(torchfits.read_numpy(path, 1), want)
        finally:
            _rice.use_lzcnt(was)


def test_gzip_and_shuffle():
    a = np.arange(1000, dtype=">i4")
    raw = Gzip1().decode(Gzip1().encode(a))
    assert raw == a.tobytes()
    out = np.empty(1000, ">i4")
    Gzip2(4).decode(Gzip2(4).encode(a), out)
    assert np.array_equal(out, a)
    assert _quantize.shuffle(np.frombuffer(b"abcdABCD", np.uint8), 4) == b"aAbBcCdD"
    with pytest.raises(CodecError):
        Gzip1().decode(b"not gzip")
    assert NoCompress().decode(NoCompress().encode(a)) == a.tobytes()


def _plio_heap(tiles):
    """PLIO_1-encode ``tiles`` into one heap: the bytes, each tile's offset and size, its pixel
    count and where it lands in the flat output (what `_plio.decode_many` takes)."""
    blobs = [_plio.encode(t) for t in tiles]
    sizes = np.array([len(b) for b in blobs], np.int64)
    npix = np.array([len(t) for t in tiles], np.int64)
    return (np.frombuffer(b"".join(blobs), np.uint8), np.cumsum(sizes) - sizes, sizes, npix,
            np.cumsum(npix) - npix)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64])
def test_plio_many_tile_kernel(dtype):
    """The batched PLIO kernel writes each tile at its place in an output of any integer width
    (int32, its own type, decoded in place; the others through its scratch), marks the tiles it
    cannot decode MISMATCH and goes on, and stops at a raised stop flag."""
    rng = np.random.default_rng(21)
    tiles = [np.zeros(n, np.int32) for n in (300, 1, 0, 4100, 77)]
    for t in tiles:
        if len(t):
            t[rng.integers(0, len(t), max(1, len(t) // 5))] = rng.integers(1, 100, max(1, len(t) // 5))
    buf, offsets, sizes, npix, dest = _plio_heap(tiles)
    out = np.full(int(npix.sum()), 99, dtype)  # overwritten everywhere, zeros included
    status = np.full(5, 9, np.uint8)
    go = np.zeros(1, np.uint8)
    assert _plio.decode_many(buf, offsets, sizes, npix, dest, out, status, go) == 0
    assert (status == _plio.OK).all()
    assert np.array_equal(out, np.concatenate(tiles).astype(dtype))
    sizes[3] = 4  # cut tile 3 short
    assert _plio.decode_many(buf, offsets, sizes, npix, dest, out, status, go) == 1
    assert status.tolist() == [_plio.OK] * 3 + [_plio.MISMATCH, _plio.OK]
    assert _plio.decode_many(buf, offsets, sizes, npix, dest, out, status, np.ones(1, np.uint8)) == 5
    assert (status == _plio.STOPPED).all()


def test_plio_roundtrip():
    m = np.zeros(9000, np.int32)
    m[10:20] = 3
    m[4000:] = 7000000
    m[30] = 1
    m[31] = 4097
    m[8000:8500] = 0
    out = np.empty_like(m)
    Plio1().decode(Plio1().encode(m), out)
    assert np.array_equal(out, m)
    with pytest.raises(ValueError):
        Plio1().encode(np.array([-1, 2]))


@pytest.mark.parametrize("shape", [(16, 20), (17, 33), (1, 40), (5, 5), (64, 64), (3, 1)])
def test_hcompress_roundtrip(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.normal(0, 300, shape).astype(np.int64)
    codec = Hcompress1(shape)
    assert np.array_equal(codec.decode(codec.encode(a)), a)


def test_hcompress_lossy_scale():
    y, x = np.mgrid[:32, :32]
    a = (1000 + 100 * np.sin(x / 4.0) + 100 * np.cos(y / 5.0)).astype(np.int64)
    codec = Hcompress1(a.shape, scale=8)
    back = codec.decode(codec.encode(a))
    assert np.abs(back - a).max() <= 16


def test_many_tile_kernels_agree():
    rng = np.random.default_rng(7)
    tiles = [rng.integers(-500, 500, 300).astype(np.int32) for _ in range(5)]
    blobs = [_rice.encode(t, 4, 32) for t in tiles]
    buf = np.frombuffer(b"".join(blobs), np.uint8)
    sizes = np.array([len(b) for b in blobs], np.int64)
    offsets = np.cumsum(sizes) - sizes
    npix = np.full(5, 300, np.int64)
    dest = np.arange(5, dtype=np.int64) * 300
    out = np.empty(1500, np.int32)
    status = np.full(5, 9, np.uint8)
    go = np.zeros(1, np.uint8)
    assert _rice.decode_many(buf, offsets, sizes, npix, dest, out, 4, 32, status, go) == 0
    assert (status == _rice.OK).all()
    assert np.array_equal(out, np.concatenate(tiles))
    bad = offsets.copy()
    bad[3] = len(buf)  # past the end: reported, never read
    assert _rice.decode_many(buf, bad, sizes, npix, dest, out, 4, 32, status, go) == 1
    assert status.tolist() == [_rice.OK] * 3 + [_rice.MISMATCH, _rice.OK]
    assert _rice.decode_many(buf, offsets, sizes, npix, dest, out, 4, 32, status,
                             np.ones(1, np.uint8)) == 5
    assert (status == _rice.STOPPED).all()
    with pytest.raises(ValueError):
        _rice.decode_many(buf, offsets, sizes, npix, dest, out, 4, 32, status[:2], go)
    ints = out.copy()
    floats = np.empty(1500, np.float32)
    _quantize.dequantize_many(ints, floats, dest, npix, np.full(5, 0.5), np.zeros(5),
                              np.arange(5, dtype=np.int64), 1, 3, False, 0)
    single = np.empty(300, np.float32)
    _quantize.dequantize(ints[600:900], single, 0.5, 0.0, 1, _quantize.dither_seed(2, 3), False, 0)
    assert np.array_equal(single, floats[600:900])



@pytest.mark.parametrize("method", [0, 1, 2])
@pytest.mark.parametrize("ftype", [np.float32, np.float64])
def test_rice_fused_dequantise_agrees(method, ftype):
    """`_rice.decode_many_dequant` gives the pixels of `decode_many` then `dequantize_many`:
    tiles of odd lengths (1 pixel, not a multiple of the block, a short last tile) put at
    unaligned offsets, null and zero codes, dither runs that wrap the sequence, bad and
    stopped tiles reported as `decode_many` reports them."""
    rng = np.random.default_rng(11)
    lengths = [1, 37, 4096, 300, 10001, 33]
    tiles = [rng.integers(-5000, 5000, n).astype(np.int32) for n in lengths]
    tiles[1][[0, 5]] = _quantize.NULL_VALUE
    tiles[3][[2, 9]] = _quantize.ZERO_VALUE
    blobs = [_rice.encode(t, 4, 32) for t in tiles]
    buf = np.frombuffer(b"".join(blobs), np.uint8)
    sizes = np.array([len(b) for b in blobs], np.int64)
    offsets = np.cumsum(sizes) - sizes
    npix = np.array(lengths, np.int64)
    dest = np.cumsum(npix) - npix + 3  # not at the start of the output
    n = len(lengths)
    total = int(npix.sum()) + 5
    zs = rng.uniform(0.1, 2.0, n)
    zz = rng.uniform(-10, 10, n)
    ks = np.array([0, 9998, 5, 9999, 17, 2], np.int64)  # dither seeds across the wrap
    ints = np.zeros(total, np.int32)
    for t, d in zip(tiles, dest):
        ints[d:d + len(t)] = t
    want = np.full(total, -1, ftype)
    _quantize.dequantize_many(ints, want, dest, npix, zs, zz, ks, method, 7, True,
                              _quantize.NULL_VALUE)
    got = np.full(total, -1, ftype)
    status = np.full(n, 9, np.uint8)
    go = np.zeros(1, np.uint8)
    rand = _quantize.random_table()
    assert np.array_equal(rand, _quantize.random_sequence().astype(np.float32))
    assert _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, got, 32, status, go, zs, zz,
                                     ks, method, 7, True, _quantize.NULL_VALUE, rand) == 0
    assert (status == _rice.OK).all()
    assert got.tobytes() == want.tobytes()
    assert np.isnan(got[dest[1]]) and got[0] == -1 and got[-1] == -1
    bad = offsets.copy()
    bad[2] = len(buf)  # past the end: reported, never read
    torn = sizes.copy()
    torn[4] = 3  # a truncated tile: the decode fails
    assert _rice.decode_many_dequant(buf, bad, torn, npix, dest, got, 32, status, go, zs, zz, ks,
                                     method, 7, False, 0, rand) == 2
    assert status.tolist() == [_rice.OK] * 2 + [_rice.MISMATCH, _rice.OK, _rice.MISMATCH, _rice.OK]
    assert _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, got, 32, status,
                                     np.ones(1, np.uint8), zs, zz, ks, method, 7, False, 0,
                                     rand) == n
    assert (status == _rice.STOPPED).all()
    with pytest.raises(ValueError):
        _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, got, 32, status, go, zs[:2], zz,
                                  ks, method, 7, False, 0, rand)
    with pytest.raises(ValueError):
        _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, np.zeros(total, np.int32), 32, status,
                                  go, zs, zz, ks, method, 7, False, 0, rand)
    with pytest.raises(ValueError):
        _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, got, 32, status, go, zs, zz,
                                  ks, method, 7, False, 0, rand[:10])



@pytest.mark.parametrize("method", [1, 2])
@pytest.mark.parametrize("ftype", [np.float32, np.float64])
def test_dithered_dequantise_against_formula(method, ftype):
    """The dithered dequantisation (a vector loop on CPUs with AVX2, a scalar loop for the
    rest) equals the convention's formula evaluated by NumPy in double precision, bit for bit:
    tiles whose lengths are not a multiple of the vector width, a run crossing the end of the
    random sequence, null and zero codes."""
    rng = np.random.default_rng(5)
    lengths = np.array([1, 2, 3, 5, 4099, 10003], np.int64)
    dest = np.cumsum(lengths) - lengths
    ints = rng.integers(-2**30, 2**30, int(lengths.sum())).astype(np.int32)
    ints[::97] = _quantize.NULL_VALUE
    ints[3::89] = _quantize.ZERO_VALUE
    zs = rng.uniform(1e-3, 3.0, len(lengths))
    zz = rng.uniform(-100, 100, len(lengths))
    ks = np.array([3, 9999, 0, 41, 9990, 123], np.int64)
    got = np.empty(ints.size, ftype)
    _quantize.dequantize_many(ints, got, dest, lengths, zs, zz, ks, method, 2, True,
                              _quantize.NULL_VALUE)
    rand = _quantize.random_sequence()
    want = np.empty(ints.size, ftype)
    for d, n, s, z, k in zip(dest, lengths, zs, zz, ks):
        seed = _quantize.dither_seed(int(k), 2)
        r = np.empty(n)
        done = 0
        while done < n:  # the sequence restarts at a new offset every 10,000 - offset values
            start = int(rand[seed] * 500)
            run = min(n - done, 10000 - start)
            r[done:done + run] = rand[start:start + run]
            done += run
            seed = (seed + 1) % 10000
        i = ints[d:d + n]
        v = ((i.astype(np.float64) - r) + 0.5) * s + z
        if method == 2:
            v[i == _quantize.ZERO_VALUE] = 0.0
        v = v.astype(ftype)
        v[i == _quantize.NULL_VALUE] = np.nan
        want[d:d + n] = v
    assert got.tobytes() == want.tobytes()


def _hc_tiles(shapes, seed=0, scale=0):
    rng = np.random.default_rng(seed)
    tiles = []
    for i, shape in enumerate(shapes):
        y, x = np.mgrid[:shape[0], :shape[1]]
        smooth = 1000 + 50 * np.sin(x / 5.0 + i) * np.cos(y / 7.0)
        tiles.append((smooth + rng.normal(0, 20 * (i + 1), shape)).astype(np.int64))
    blobs = [_hcompress.encode(t, scale) for t in tiles]
    buf = np.frombuffer(b"".join(blobs), np.uint8).copy()
    sizes = np.array([len(b) for b in blobs], np.int64)
    offsets = np.cumsum(sizes) - sizes
    npix = np.array([t.size for t in tiles], np.int64)
    dest = np.cumsum(npix) - npix
    rows = np.array([s[0] for s in shapes], np.int64)
    cols = np.array([s[1] for s in shapes], np.int64)
    return tiles, buf, offsets, sizes, rows, cols, dest


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("scale, smooth", [(0, False), (4, False), (4, True)])
def test_hcompress_many_tiles_agree_with_one_tile(dtype, scale, smooth):
    """decode_many (one GIL-free loop, per-tile status) equals decode tile by tile, in 32- and
    64-bit arithmetic, for tiles of different shapes in one call (odd sizes, single rows and
    columns, edge tiles)."""
    shapes = [(16, 40), (16, 13), (7, 33), (1, 50), (50, 1), (1, 1), (64, 64), (3, 5)]
    tiles, buf, offsets, sizes, rows, cols, dest = _hc_tiles(shapes, scale=scale)
    for narrow in (False, True):
        want = []
        for t, off, size in zip(tiles, offsets, sizes):
            one = np.empty(t.size, np.int64)
            assert _hcompress.decode(buf[off:off + size], one, t.shape[0], t.shape[1], smooth,
                                     narrow) == 0
            if scale == 0:
                assert np.array_equal(one, t.reshape(-1))  # lossless
            want.append(one)
        out = np.zeros(int(rows @ cols), dtype)
        status = np.full(len(shapes), 9, np.uint8)
        assert _hcompress.decode_many(buf, offsets, sizes, rows, cols, dest, out, smooth, narrow,
                                      status, np.zeros(1, np.uint8)) == 0
        assert (status == _hcompress.OK).all()
        # cast as CFITSIO casts to the tile type: truncated
        assert np.array_equal(out, np.concatenate(want).astype(dtype))


def test_hcompress_many_tiles_status():
    """A bad tile is reported in its status (the others still decode); bad bounds are never
    read; a raised stop flag marks the tiles not attempted."""
    assert (_hcompress.OK, _hcompress.MISMATCH, _hcompress.STOPPED) == \
        (_gziptiles.OK, _gziptiles.MISMATCH, _gziptiles.STOPPED)
    shapes = [(16, 20)] * 6
    tiles, buf, offsets, sizes, rows, cols, dest = _hc_tiles(shapes, seed=3)
    buf[offsets[2]] = 0  # not the magic: corrupt
    buf[offsets[4] + 30:offsets[4] + sizes[4]] = 0xFF  # garbage planes
    bad_sizes = sizes.copy()
    bad_sizes[5] = len(buf)  # runs past the buffer
    out = np.zeros(6 * 320, np.int16)
    status = np.empty(6, np.uint8)
    n = _hcompress.decode_many(buf, offsets, bad_sizes, rows, cols, dest, out, False, True, status,
                               np.zeros(1, np.uint8))
    assert n == 3 and list(status) == [0, 0, 1, 0, 1, 1]
    for k in (0, 1, 3):
        assert np.array_equal(out[dest[k]:dest[k] + 320], tiles[k].reshape(-1))
    status[:] = 9
    assert _hcompress.decode_many(buf, offsets, sizes, rows, cols, dest, out, False, True, status,
                                  np.ones(1, np.uint8)) == 6
    assert (status == _hcompress.STOPPED).all()
    with pytest.raises(ValueError):
        _hcompress.decode_many(buf, offsets, sizes, rows, cols, dest, np.zeros(6 * 320, np.float32),
                               False, True, status, np.zeros(1, np.uint8))
    # a destination past the end of out, or a tile of no pixels: reported, not written
    rows0 = rows.copy()
    rows0[1] = 0
    dest1 = dest.copy()
    dest1[3] = out.size - 10
    n = _hcompress.decode_many(buf, offsets, sizes, rows0, cols, dest1, out, False, True, status,
                               np.zeros(1, np.uint8))
    assert n == 4 and list(status) == [0, 1, 1, 1, 1, 0]


def test_hcompress_truncated_and_flipped_streams():
    """Every prefix of a stream and single flipped bytes: an error code or pixels, never a crash;
    a prefix that cuts the planes or the signs is an error."""
    rng = np.random.default_rng(11)
    for shape in [(16, 24), (5, 7), (1, 33), (33, 1)]:
        t = rng.normal(0, 400, shape).astype(np.int64)
        enc = _hcompress.encode(t, 0)
        out = np.empty(t.size, np.int64)
        for cut in range(1, len(enc)):
            rc = _hcompress.decode(np.frombuffer(enc[:cut], np.uint8), out, shape[0], shape[1], False)
            assert rc in (_hcompress.ERR_TRUNCATED, _hcompress.ERR_CORRUPT)
        for narrow in (False, True):
            for _ in range(100):
                e = bytearray(enc)
                e[int(rng.integers(25, len(e)))] ^= int(rng.integers(1, 256))
                rc = _hcompress.decode(bytes(e), out, shape[0], shape[1], True, narrow)
                assert rc in (0, _hcompress.ERR_TRUNCATED, _hcompress.ERR_CORRUPT)


def test_hostile_streams_do_not_crash():
    rng = np.random.default_rng(8)
    for _ in range(200):
        junk = rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8)
        assert _rice.decode(junk, np.empty(100, np.int16), 2, 32) <= 0
        assert _plio.decode(junk, np.empty(100, np.int32)) <= 0
        head = np.frombuffer(b"\xdd\x99" + np.array([4, 4, 0], ">i4").tobytes() + bytes(8), np.uint8)
        _hcompress.decode(np.concatenate([head, junk]), np.empty(16, np.int64), 4, 4, False)


def test_gzip_inflate_is_bounded():
    bomb = Gzip1().encode(bytes(10**7))
    with pytest.raises(CodecError, match="more than"):
        Gzip1().decode(bomb, max_size=1000)
    with pytest.raises(CodecError):
        Gzip2(4).decode(bomb, np.empty(10, np.int32))


@pytest.mark.parametrize("backend", ["zlib", "isal"])
def test_gzip_inflate_backends_agree(backend, monkeypatch):
    """GZIP tiles inflate to the same bytes through ISA-L (when installed) and through zlib,
    with the same errors for corrupt, truncated and oversized tiles."""
    import zlib

    from torchfits.image import codec_registry

    module = zlib if backend == "zlib" else pytest.importorskip("isal.isal_zlib")
    monkeypatch.setattr(codec_registry, "inflate_backend", lambda: module)
    a = np.random.default_rng(3).normal(1000, 1, 5000).astype(">f4")
    for wbits in (31, 15):  # gzip and zlib framing
        c = zlib.compressobj(6, zlib.DEFLATED, wbits)
        blob = c.compress(a.tobytes()) + c.flush()
        assert Gzip1().decode(blob) == a.tobytes()
        out = np.empty(5000, ">f4")
        assert np.array_equal(Gzip1().decode(blob, out), a)
        with pytest.raises(CodecError):
            Gzip1().decode(blob[:len(blob) // 2], np.empty(5000, ">f4"))
    shuffled = Gzip2(4).encode(a)
    out = np.empty(5000, ">f4")
    assert np.array_equal(Gzip2(4).decode(shuffled, out), a)
    with pytest.raises(CodecError):
        Gzip1().decode(b"not gzip at all")
    with pytest.raises(CodecError, match="more than"):
        Gzip1().decode(Gzip1().encode(bytes(10**6)), max_size=1000)


def test_inflate_backend_prefers_isal():
    from torchfits.image.codec_registry import inflate_backend

    try:
        from isal import isal_zlib
    except ImportError:
        import zlib

        assert inflate_backend() is zlib
    else:
        assert inflate_backend() is isal_zlib


def _gzip_tiles(tiles, shuffled, wbits):
    """Deflate big-endian tiles (byte-shuffled for GZIP_2) with gzip (31) or zlib (15) framing."""
    import zlib

    blobs = []
    for t in tiles:
        raw = t.astype(t.dtype.newbyteorder(">")).view(np.uint8)
        if shuffled:
            raw = np.frombuffer(_quantize.shuffle(raw, t.dtype.itemsize), np.uint8)
        c = zlib.compressobj(6, zlib.DEFLATED, wbits)
        blobs.append(c.compress(raw.tobytes()) + c.flush())
    buf = np.frombuffer(b"".join(blobs), np.uint8)
    sizes = np.array([len(b) for b in blobs], np.int64)
    return buf, np.cumsum(sizes) - sizes, sizes


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("wbits", [31, 15])
def test_gzip_many_tile_kernel(dtype, shuffled, wbits, inflater):
    """The batched GZIP kernel gives the native values of every tile, tiles of any size."""
    rng = np.random.default_rng(11)
    sizes_px = [300, 1, 77, 300, 0, 512]
    tiles = [(rng.normal(0, 1000, n) if np.dtype(dtype).kind == "f"
              else rng.integers(0, 200, n)).astype(dtype) for n in sizes_px]
    buf, offsets, sizes = _gzip_tiles(tiles, shuffled, wbits)
    npix = np.array(sizes_px, np.int64)
    dest = np.cumsum(npix) - npix
    out = np.empty(int(npix.sum()), dtype)
    status = np.full(len(tiles), 9, np.uint8)
    bad = _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, out.itemsize, shuffled,
                                 status, np.zeros(1, np.uint8))
    assert bad == 0 and (status == _gziptiles.OK).all()
    assert np.array_equal(out.view(np.uint8), np.concatenate(tiles).view(np.uint8))


def test_gzip_many_tile_kernel_reports_bad_tiles(inflater):
    """Corrupt, truncated, out-of-bounds and wrongly sized tiles are reported one by one (the
    others still decode); a raised stop flag skips the rest."""
    rng = np.random.default_rng(12)
    tiles = [rng.normal(0, 1, 200).astype(np.float32) for _ in range(6)]
    buf, offsets, sizes = _gzip_tiles(tiles, True, 31)
    buf = buf.copy()
    buf[offsets[1] + 12:offsets[1] + 40] ^= 0x5A  # corrupt deflate data
    sizes = sizes.copy()
    sizes[2] -= 9  # truncated stream
    offsets = offsets.copy()
    offsets[3] = len(buf) - 4  # past the end of the buffer
    npix = np.full(6, 200, np.int64)
    npix[4] = 150  # inflates to more bytes than the tile holds
    dest = np.arange(6, dtype=np.int64) * 200
    out = np.zeros(1200, np.float32)
    status = np.empty(6, np.uint8)
    bad = _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, 4, True, status,
                                 np.zeros(1, np.uint8))
    assert list(status) == [_gziptiles.OK, _gziptiles.MISMATCH, _gziptiles.MISMATCH,
                            _gziptiles.MISMATCH, _gziptiles.MISMATCH, _gziptiles.OK]
    assert bad == 4
    assert np.array_equal(out[:200], tiles[0]) and np.array_equal(out[1000:], tiles[5])
    stopped = np.empty(6, np.uint8)
    assert _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, 4, True, stopped,
                                  np.ones(1, np.uint8)) == 6
    assert (stopped == _gziptiles.STOPPED).all()
    with pytest.raises(ValueError):
        _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, 2, True, status,
                               np.zeros(1, np.uint8))
    with pytest.raises(ValueError):  # arrays of different lengths
        _gziptiles.decode_many(buf, offsets, sizes[:3], npix, dest, out, 4, True, status,
                               np.zeros(1, np.uint8))
    assert _gziptiles.zlib_version()


def test_gzip_tile_with_trailing_bytes(inflater):
    """Bytes after a tile's stream are ignored by either inflater, as zlib always did."""
    tile = np.arange(500, dtype=np.int32)
    buf, offsets, sizes = _gzip_tiles([tile], False, 31)
    buf = np.concatenate([buf, np.frombuffer(b"padding!", np.uint8)])
    sizes = sizes + 8
    out = np.empty(500, np.int32)
    status = np.empty(1, np.uint8)
    assert _gziptiles.decode_many(buf, offsets, sizes, np.array([500]), np.array([0]), out, 4,
                                  False, status, np.zeros(1, np.uint8)) == 0
    assert np.array_equal(out, tile)


def test_gzip_load_libdeflate_refuses_what_is_not_libdeflate(inflater):
    """A path that does not load, or a library without libdeflate's entry points, changes
    nothing: the kernel keeps inflating through what it had."""
    before = _gziptiles.inflater()
    assert not _gziptiles.load_libdeflate("/nonexistent/libdeflate.so", "x")
    assert not _gziptiles.load_libdeflate(_plio.__file__, "x")  # a library, not libdeflate
    assert _gziptiles.inflater() == before


_LOAD_AND_DECODE = """
import sys, zlib
import numpy as np
from torchfits._kernels import _gziptiles
assert _gziptiles.load_libdeflate(sys.argv[1], "from the test")
assert _gziptiles.inflater() == "libdeflate from the test", _gziptiles.inflater()
tile = (np.arange(5000, dtype=np.float32) * 1.37).astype(np.float32)
planes = tile.astype(">f4").view(np.uint8).reshape(-1, 4).T.copy()  # GZIP_2: byte planes
for shuffled, raw in ((True, planes.tobytes()), (False, tile.astype(">f4").tobytes())):
    buf = np.frombuffer(zlib.compress(raw), np.uint8)
    out = np.empty(5000, np.float32)
    status = np.empty(1, np.uint8)
    assert _gziptiles.decode_many(buf, np.array([0]), np.array([len(buf)]), np.array([5000]),
                                  np.array([0]), out, 4, shuffled, status,
                                  np.zeros(1, np.uint8)) == 0
    assert np.array_equal(out, tile)
print("ok")
"""


def test_gzip_load_libdeflate_switches_inflater():
    """Another copy of libdeflate (here the system's, in a fresh process) takes over the tiles
    and decodes them the same."""
    import ctypes.util
    import subprocess
    import sys

    name = ctypes.util.find_library("deflate")
    if name is None:
        pytest.skip("no libdeflate shared library on this system")
    # dlopen finds a bare soname on the loader's path
    done = subprocess.run([sys.executable, "-c", _LOAD_AND_DECODE, name], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_plio_many_tile_kernel_writes_every_pixel():
    """The PLIO kernel writes every pixel of its tiles, zeros included: full reads decode into
    recycled memory that holds the last read's values. Other widths than int32 go through its
    scratch and are written whole too."""
    rng = np.random.default_rng(22)
    tiles = [np.zeros(n, np.int32) for n in (300, 4100, 77)]
    for t in tiles:
        t[rng.integers(0, len(t), len(t) // 4)] = rng.integers(1, 1 << 20, len(t) // 4)
    buf, offsets, sizes, npix, dest = _plio_heap(tiles)
    want = np.concatenate(tiles)
    status = np.empty(3, np.uint8)
    go = np.zeros(1, np.uint8)
    for dtype in (np.int32, np.int64):
        marked = np.full(int(npix.sum()), 99, dtype)  # a zero left unwritten would show as 99
        assert _plio.decode_many(buf, offsets, sizes, npix, dest, marked, status, go) == 0
        assert np.array_equal(marked, want)


def _line_list(words):
    """A PLIO_1 tile from line-list words (after the 7-word header), big-endian."""
    ll = np.array([0, 7, -100, 7 + len(words), 0, 0, 0] + list(words), np.int64)
    return (ll & 0xFFFF).astype(">u2").tobytes()


def test_plio_runs_of_every_length():
    """Runs of every length from 0 to 70 pixels (the kernel fills a run in groups of eight, the
    last group overlapping) land exactly on their pixels: nothing before or after a run, nor
    outside the tile, is written. A run longer than what is left of the tile stops at its end."""
    words, want = [], []
    for n in range(71):
        value = 100 + n
        words += [0x1000 | (value & 4095), value >> 12, 0x4000 | n, 0x0000 | (n % 5)]  # SH, HN n, ZN
        want += [value] * n + [0] * (n % 5)
    words += [0x4000 | 4095]  # HN of 4095 pixels, 3 of them left in the tile: clipped there
    want += [170] * 3
    npix = len(want)
    tile = np.frombuffer(_line_list(words), np.uint8)
    lead, tail = 5, 9
    out = np.full(lead + npix + tail, -7, np.int32)
    status = np.empty(1, np.uint8)
    bad = _plio.decode_many(tile, np.zeros(1, np.int64), np.array([tile.size], np.int64),
                            np.array([npix], np.int64), np.array([lead], np.int64), out, status,
                            np.zeros(1, np.uint8))
    assert bad == 0 and status[0] == _plio.OK
    assert (out[:lead] == -7).all() and (out[lead + npix:] == -7).all()
    assert np.array_equal(out[lead:lead + npix], np.array(want, np.int32))
    one = np.full(npix, -7, np.int32)  # the one-tile decoder agrees
    assert _plio.decode(tile, one) == 0
    assert np.array_equal(one, np.array(want, np.int32))


@pytest.mark.parametrize("itemsize", [2, 4, 8])
@pytest.mark.parametrize("stream", [False, True])
def test_gzip2_unshuffle_of_every_tile_length(itemsize, stream):
    """GZIP_2 tiles of every length from 0 to 49 elements and a few past 4096 (the kernel
    interleaves 16 elements a step, then one at a time; with streaming stores, one at a time up
    to a 16-byte boundary too, which the tiles' places here start at every offset from) unshuffle
    to their values, and nothing outside a tile's place in the output is written."""
    import zlib

    rng = np.random.default_rng(itemsize)
    dtype = np.dtype(f"i{itemsize}")
    lengths = list(range(50)) + [4095, 4096, 4097, 4111]
    tiles = [rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
             for n in lengths]
    blobs = [zlib.compress(_quantize.shuffle(t.astype(dtype.newbyteorder(">")).view(np.uint8), itemsize))
             for t in tiles]
    sizes = np.array([len(b) for b in blobs], np.int64)
    npix = np.array(lengths, np.int64)
    gap = 3  # untouched elements between tiles
    dest = np.cumsum(npix + gap) - npix
    out = np.full(int(dest[-1] + npix[-1] + gap), -5, dtype)
    status = np.empty(len(tiles), np.uint8)
    bad = _gziptiles.decode_many(np.frombuffer(b"".join(blobs), np.uint8), np.cumsum(sizes) - sizes,
                                 sizes, npix, dest, out, itemsize, True, status, np.zeros(1, np.uint8),
                                 stream)
    assert bad == 0 and (status == _gziptiles.OK).all()
    mask = np.ones(out.size, bool)
    for t, d in zip(tiles, dest):
        assert np.array_equal(out[d:d + t.size], t)
        mask[d:d + t.size] = False
    assert (out[mask] == -5).all()


def test_gzip_newer_libdeflate_from_the_deflate_package():
    """With the optional ``deflate`` package installed, the kernel inflates through the
    libdeflate it ships (found without importing it), and the tiles decode the same."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("deflate") is None:
        pytest.skip("the deflate package is not installed")
    code = ("from torchfits.image.codec_registry import newer_libdeflate\n"
            "import sys\n"
            "print(newer_libdeflate(), 'deflate' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("libdeflate from deflate") and done.stdout.split()[-1] == "False"


@pytest.mark.parametrize("kernel", ["rice", "rice_dequant", "plio", "gzip", "hcompress"])
def test_many_tile_kernels_reject_bounds_whose_sums_overflow(kernel):
    """An offset + size or a destination + pixel count past 2**63 (a corrupt descriptor) is
    MISMATCH in every batched kernel (one shared check), never a read or write out of bounds;
    the other tiles decode, and a raised stop flag marks every tile STOPPED."""
    rng = np.random.default_rng(29)
    tiles = [rng.integers(0, 50, 120).astype(np.int32) for _ in range(4)]
    npix = np.full(4, 120, np.int64)
    dest = np.arange(4, dtype=np.int64) * 120
    ncols = None
    if kernel.startswith("rice"):
        blobs = [_rice.encode(t, 4, 32) for t in tiles]
        buf = np.frombuffer(b"".join(blobs), np.uint8)
        sizes = np.array([len(b) for b in blobs], np.int64)
        offsets = np.cumsum(sizes) - sizes
    elif kernel == "plio":
        buf, offsets, sizes, npix, dest = _plio_heap(tiles)
    elif kernel == "gzip":
        buf, offsets, sizes = _gzip_tiles(tiles, True, 31)
    else:
        shapes = [(10, 12)] * 4
        hc, buf, offsets, sizes, rows, ncols, dest = _hc_tiles(shapes, seed=4)
        tiles = [t.reshape(-1).astype(np.int32) for t in hc]
    offsets, dest = offsets.copy(), dest.copy()
    offsets[1] = 2**63 - 8  # + size wraps past 2**63
    dest[2] = 2**63 - 8  # + pixel count wraps past 2**63
    out = np.full(480, -1, np.float32 if kernel == "rice_dequant" else np.int32)

    def run(stop):
        status = np.full(4, 9, np.uint8)
        if kernel == "rice":
            bad = _rice.decode_many(buf, offsets, sizes, npix, dest, out, 4, 32, status, stop)
        elif kernel == "rice_dequant":
            ones = np.ones(4)
            bad = _rice.decode_many_dequant(buf, offsets, sizes, npix, dest, out, 32, status, stop,
                                            ones, np.zeros(4), np.arange(4, dtype=np.int64), 0, 1,
                                            False, 0, _quantize.random_table())
        elif kernel == "plio":
            bad = _plio.decode_many(buf, offsets, sizes, npix, dest, out, status, stop)
        elif kernel == "gzip":
            bad = _gziptiles.decode_many(buf, offsets, sizes, npix, dest, out, 4, True, status, stop)
        else:
            bad = _hcompress.decode_many(buf, offsets, sizes, rows, ncols, dest, out, False, False,
                                         status, stop)
        return bad, status.tolist()

    assert run(np.zeros(1, np.uint8)) == (2, [_rice.OK, _rice.MISMATCH, _rice.MISMATCH, _rice.OK])
    for k in (0, 3):
        want = tiles[k] + (0.0 if kernel == "rice_dequant" else 0)
        assert np.array_equal(out[k * 120:(k + 1) * 120], want)
    assert (out[120:360] == -1).all()
    assert run(np.ones(1, np.uint8)) == (4, [_rice.STOPPED] * 4)
    assert not _quantize.random_table().flags.writeable

"""BZIP2_1 tile compression (outside the FITS standard): files laid out by hand from CFITSIO's
facts (the tile's big-endian integers at ZBITPIX's width, 4 bytes for 32-bit and quantised
images, one bzip2 stream per tile, no ZNAMEn) read exactly; our writes round-trip bit for bit
through every writer that offers a codec; cutouts decode only what they touch; a bad tile names
the file, the HDU and the tile.

No oracle writes BZIP2_1 (public CFITSIO releases compile the bzip2 calls out, so fitsio and
fpack refuse it; astropy does not know the name), so the reference files are built here with
the standard library's ``bz2`` and nothing of torchfits."""
from __future__ import annotations

import bz2

import numpy as np
import pytest

import torchfits
from torchfits.image.codec_registry import REGISTRY, Bzip2, CodecError, writer_names
from torchfits.image.compressed import CompressedImage, CompressedTileError
from torchfits.image.plain import open_image, read_numpy
from torchfits.writing.compress_write import normalize_compress, write_compressed

# dtype → (ZBITPIX, BZERO, stored big-endian type)
_LAYOUT = {np.dtype(np.uint8): (8, None, "u1"), np.dtype(np.int16): (16, None, ">i2"),
           np.dtype(np.uint16): (16, 32768, ">i2"), np.dtype(np.int32): (32, None, ">i4"),
           np.dtype(np.uint32): (32, 2147483648, ">i4")}
INT_DTYPES = [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32]


def _card(key: str, value: object) -> bytes:
    if isinstance(value, bool):
        text = "T" if value else "F"
    elif isinstance(value, str):
        text = f"'{value:<8}'"
    else:
        text = str(value)
    return (f"{key:<8}= " + (text if isinstance(value, str) else text.rjust(20))).ljust(80).encode()


def _block(cards: list[bytes]) -> bytes:
    raw = b"".join(cards) + b"END".ljust(80)
    return raw + b" " * (-len(raw) % 2880)


def _tiles(shape: tuple[int, ...], tile: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """Tile slices in FITS row order (the first FITS axis, the last C axis, fastest)."""
    grid = [range(0, n, t) for n, t in zip(shape, tile)]
    out = []
    for start in np.ndindex(*[len(g) for g in grid]):
        out.append(tuple(slice(g[i], g[i] + t) for g, i, t in zip(grid, start, tile)))
    return out


def _hand_built(stored: np.ndarray, tile: tuple[int, ...], zbitpix: int, *, bzero: int | None = None,
                quant: tuple[np.ndarray, np.ndarray] | None = None) -> bytes:
    """A file of an empty primary and one BZIP2_1 HDU whose tiles hold ``stored`` (big-endian
    integers), each tile one bzip2 stream; ``quant`` = per-tile (ZSCALE, ZZERO) columns of a
    NO_DITHER float image."""
    slices = _tiles(stored.shape, tile)
    heap, rows, longest = b"", [], 0
    for k, sl in enumerate(slices):
        data = bz2.compress(np.ascontiguousarray(stored[sl]).tobytes(), 9)
        longest = max(longest, len(data))
        row = np.array([len(data), len(heap)], ">i4").tobytes()
        if quant is not None:
            row += np.array([quant[0][k], quant[1][k]], ">f8").tobytes()
        rows.append(row)
        heap += data
    table = b"".join(rows)
    ncols = 1 if quant is None else 3
    cards = [_card("XTENSION", "BINTABLE"), _card("BITPIX", 8), _card("NAXIS", 2),
             _card("NAXIS1", len(rows[0])), _card("NAXIS2", len(rows)), _card("PCOUNT", len(heap)),
             _card("GCOUNT", 1), _card("TFIELDS", ncols), _card("TTYPE1", "COMPRESSED_DATA"),
             _card("TFORM1", f"1PB({longest})")]
    if quant is not None:
        cards += [_card("TTYPE2", "ZSCALE"), _card("TFORM2", "1D"),
                  _card("TTYPE3", "ZZERO"), _card("TFORM3", "1D"), _card("ZQUANTIZ", "NO_DITHER")]
    cards += [_card("ZIMAGE", True), _card("ZCMPTYPE", "BZIP2_1"), _card("ZBITPIX", zbitpix),
              _card("ZNAXIS", stored.ndim)]
    cards += [_card(f"ZNAXIS{i + 1}", n) for i, n in enumerate(reversed(stored.shape))]
    cards += [_card(f"ZTILE{i + 1}", t) for i, t in enumerate(reversed(tile))]
    if bzero is not None:
        cards += [_card("BSCALE", 1), _card("BZERO", bzero)]
    primary = _block([_card("SIMPLE", True), _card("BITPIX", 8), _card("NAXIS", 0),
                      _card("EXTEND", True)])
    data = table + heap
    return primary + _block(cards) + data + b"\0" * (-len(data) % 2880)


def _values(dtype, shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    a[..., :4] = info.min
    a[..., 4:7] = info.max
    a[..., 7:12] = 3  # a flat run
    return a


@pytest.mark.parametrize("dtype", list(_LAYOUT))
@pytest.mark.parametrize("tile", [(1, 45), (7, 10)])  # row tiles; partial edge tiles on both axes
def test_hand_built_file_reads_exactly(tmp_path, dtype, tile):
    data = _values(dtype, (23, 45), seed=1)
    zbitpix, bzero, stored_type = _LAYOUT[np.dtype(dtype)]
    stored = data if bzero is None else (data.astype(np.int64) - bzero)
    p = tmp_path / "hand.fits"
    p.write_bytes(_hand_built(stored.astype(stored_type), tile, zbitpix, bzero=bzero))
    img = open_image(p, 1)
    assert img.codec == "BZIP2_1" and img.dtype == np.dtype(dtype)
    got = img.read()
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, data)
    assert np.array_equal(img[3:20, 11:38], data[3:20, 11:38])
    assert np.array_equal(read_numpy(p, 1, threads=1), data)
    cut = torchfits.read_subset(str(p), 1, 11, 3, 38, 20)
    assert np.array_equal(cut.numpy(), data[3:20, 11:38])


def test_hand_built_quantized_float(tmp_path):
    """Float images are stored as quantised 4-byte integers (here NO_DITHER: value = code ×
    ZSCALE + ZZERO, per tile)."""
    rng = np.random.default_rng(2)
    codes = rng.integers(-5000, 5000, (12, 30)).astype(">i4")
    tile = (4, 30)
    scale = np.array([0.5, 0.25, 2.0])
    zero = np.array([10.0, -3.0, 0.0])
    p = tmp_path / "float.fits"
    p.write_bytes(_hand_built(codes, tile, -32, quant=(scale, zero)))
    expect = np.concatenate([codes[4 * k:4 * k + 4] * scale[k] + zero[k] for k in range(3)])
    got = read_numpy(p, 1)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expect.astype(np.float32))
    np.testing.assert_array_equal(open_image(p, 1)[5:11, 3:9], expect[5:11, 3:9].astype(np.float32))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("tile", [None, (16, 20)])
@pytest.mark.parametrize("threads", [1, 2])
def test_write_round_trip(tmp_path, dtype, tile, threads):
    data = _values(dtype, (50, 67), seed=3)
    p = tmp_path / "rt.fits"
    write_compressed(p, data, compress="BZIP2_1", tile=tile, overwrite=True)
    assert torchfits.read_header(str(p), 1)["ZCMPTYPE"] == "BZIP2_1"
    assert "ZNAME1" not in torchfits.read_header(str(p), 1)
    got = read_numpy(p, 1, threads=threads)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, data)
    img = open_image(p, 1)
    assert np.array_equal(img[9:41, 13:60], data[9:41, 13:60])
    assert np.array_equal(img[::7, 1:-1:3], data[::7, 1:-1:3])


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_tile_bytes_are_cfitsio_layout(tmp_path, dtype):
    """Each tile we write is one bzip2 stream of the stored values, big-endian, at ZBITPIX's
    width (unsigned types offset by BZERO)."""
    data = _values(dtype, (6, 9), seed=4)
    p = tmp_path / "layout.fits"
    torchfits.write(str(p), data, compress="BZIP2", overwrite=True)
    zbitpix, bzero, stored_type = _LAYOUT[np.dtype(dtype)]
    assert torchfits.read_header(str(p), 1)["ZBITPIX"] == zbitpix
    dec = CompressedImage(p, 1)._tiles()
    count, offset = (int(v) for v in dec.descriptors["COMPRESSED_DATA"][2])
    raw = bytes(dec.buf[dec.heap_start + offset:dec.heap_start + offset + count])
    row = data[2].astype(np.int64) - (bzero or 0)
    assert bz2.decompress(raw) == row.astype(stored_type).tobytes()


def test_many_tile_path_used_and_agrees(tmp_path, monkeypatch):
    data = _values(np.int16, (64, 40), seed=5)
    p = tmp_path / "many.fits"
    write_compressed(p, data, compress="BZIP2_1", tile=(4, 40))
    calls = []
    original = Bzip2.decode_many

    def counting(self, *args, **kwargs):
        calls.append(len(args[1]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Bzip2, "decode_many", counting)
    assert np.array_equal(read_numpy(p, 1, threads=2), data)
    assert sum(calls) == 16


def test_float_images_are_quantized_and_lossless_refused(tmp_path):
    rng = np.random.default_rng(6)
    sci = rng.normal(100.0, 5.0, (40, 40)).astype(np.float32)
    p = tmp_path / "f.fits"
    torchfits.write(str(p), sci, compress="BZIP2_1", overwrite=True)
    h = torchfits.read_header(str(p), 1)
    assert h["ZBITPIX"] == -32 and h["ZQUANTIZ"].startswith("SUBTRACTIVE_DITHER")
    got = read_numpy(p, 1)
    assert np.abs(got - sci).max() < 0.5 * sci.std()
    with pytest.raises(ValueError, match="lossless float compression needs GZIP_1"):
        write_compressed(tmp_path / "x.fits", sci, compress="BZIP2_1", quantize=False)
    with pytest.raises(ValueError, match="64-bit"):
        write_compressed(tmp_path / "x.fits", np.zeros((4, 4), np.int64), compress="BZIP2_1")


def test_offered_wherever_codecs_are(tmp_path, capsys):
    from _cli import run
    from torchfits.writing.recompress import compress_file

    assert writer_names()["BZIP2"] == "BZIP2_1" and normalize_compress("bzip2_1") == "BZIP2_1"
    assert not REGISTRY["BZIP2_1"].cfitsio_reads  # public CFITSIO releases refuse it
    data = _values(np.uint16, (20, 30), seed=7)
    p = tmp_path / "ins.fits"
    torchfits.write(str(p), np.zeros(3, np.float32), overwrite=True)
    torchfits.insert_hdu(str(p), data, index=1, compress="BZIP2")  # the file is re-encoded
    assert [h.codec for h in torchfits.info(str(p))] == [None, "BZIP2_1", "BZIP2_1"]
    assert np.array_equal(read_numpy(p, 2), data)
    src = tmp_path / "plain.fits"
    torchfits.write(str(src), data, overwrite=True)
    assert compress_file(str(src), str(tmp_path / "c.fits.fz"), algorithm="BZIP2") == 1
    assert np.array_equal(read_numpy(tmp_path / "c.fits.fz", 1), data)
    code, _, _ = run(capsys, "compress", src, tmp_path / "cli.fits.fz", "--algorithm", "BZIP2_1")
    assert code == 0 and torchfits.info(str(tmp_path / "cli.fits.fz"))[1].codec == "BZIP2_1"
    assert np.array_equal(read_numpy(tmp_path / "cli.fits.fz", 1), data)
    t = torchfits.read(str(tmp_path / "cli.fits.fz"), hdu=1)
    assert np.array_equal(t.numpy().astype(np.int64), data.astype(np.int64))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong size"])
def test_bad_tile_names_file_hdu_tile(tmp_path, threads, damage):
    data = _values(np.int32, (40, 30), seed=8)
    stored = data.astype(">i4")
    tiles = _tiles(stored.shape, (1, 30))
    p = tmp_path / "bad.fits"
    p.write_bytes(_hand_built(stored, (1, 30), 32))
    raw = bytearray(p.read_bytes())
    dec = CompressedImage(p, 1)._tiles()
    count, offset = (int(v) for v in dec.descriptors["COMPRESSED_DATA"][21])
    start = dec.heap_start + offset
    if damage == "garbage":
        raw[start + 10:start + count] = b"\x5a" * (count - 10)
    elif damage == "truncated":
        short = bz2.compress(np.ascontiguousarray(stored[tiles[21]]).tobytes(), 9)[:count // 2]
        raw[start:start + count] = short.ljust(count, b"\0")
    else:
        # a valid stream holding one pixel too few
        smaller = bz2.compress(np.ascontiguousarray(stored[21, :-1]).tobytes(), 9)
        assert len(smaller) <= count
        raw[start:start + count] = smaller.ljust(count, b"\0")
    p.write_bytes(bytes(raw))
    with pytest.raises(CompressedTileError) as err:
        read_numpy(p, 1, threads=threads)
    message = str(err.value)
    assert str(p) in message and "HDU 1" in message and "tile 21" in message and "BZIP2_1" in message
    assert np.array_equal(open_image(p, 1)[:20], data[:20])  # tiles before it still read


def test_codec_unit():
    a = np.arange(1000, dtype=">i2")
    codec = Bzip2(width=2)
    stream = codec.encode(a)
    assert stream == bz2.compress(a.tobytes(), 9)  # CFITSIO's block size (900 kB)
    assert np.array_equal(codec.decode_tile(stream, (1000,)), a)
    assert codec.decode(stream + b"trailing") == a.tobytes()  # bytes after the stream ignored
    out = np.empty(1000, ">i2")
    assert np.array_equal(codec.decode(stream, out), a)
    with pytest.raises(CodecError, match="more than"):
        codec.decode(stream, max_size=100)
    with pytest.raises(CodecError, match="truncated"):
        codec.decode(stream[:len(stream) // 2])
    with pytest.raises(CodecError, match="corrupt"):
        codec.decode(b"BZh9" + b"\x00" * 40)
    with pytest.raises(CodecError, match="expected"):
        codec.decode_tile(stream, (1001,))
    assert Bzip2.from_zparams({}, 8).width == 1 and Bzip2.from_zparams({}, -64).width == 4

"""Uncompressed image reads (native API: read_numpy, open_image) against astropy and fitsio.

Every BITPIX × scaling convention × shape × writer, compared bit for bit with fitsio (which,
like torchfits, computes scaled values in double precision and rounds once) and with astropy
(exact for integers and unscaled data; within its float32 error bound for scaled float32).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import torchfits
from _oracles import (
    BITPIX_STORAGE,
    OFFSET_BZERO,
    assert_bits_equal,
    assert_fits_error,
    assert_matches,
    astropy_data,
    check_matches_oracles,
    expected_image,
    fitsio_data,
    make_stored,
    native_dtype,
    result_rule,
    torch_dtype_of,
    write_image,
)
from torchfits._kernels import _image
from torchfits.errors import (
    FitsFileNotFoundError,
    HDUNotFoundError,
    HDUTypeError,
)

BLANK_STORED = {8: 255, 16: -32768, 32: -(2**31), 64: -(2**63)}


def conventions(bitpix: int):
    """(name, keyword dict) of every scaling convention that applies to ``bitpix``."""
    out = [("none", {})]
    if bitpix > 0:
        out.append(("offset", {"bzero": OFFSET_BZERO[bitpix]}))
        out.append(("scaled", {"bscale": 0.37, "bzero": -12.5}))
        out.append(("blank", {"blank": BLANK_STORED[bitpix]}))
        out.append(("blank+scaled", {"bscale": 2.5e-3, "bzero": 100.25, "blank": BLANK_STORED[bitpix]}))
        if bitpix != 64:
            out.append(("blank+offset", {"bzero": OFFSET_BZERO[bitpix], "blank": BLANK_STORED[bitpix]}))
    else:
        out.append(("scaled", {"bscale": 0.37, "bzero": -12.5}))
    return out


SHAPES = [(11,), (7, 13), (2, 3, 5), (1, 1), (13, 7)]
WRITERS = ["astropy", "fitsio"]

MATRIX = [
    pytest.param(bitpix, conv, kw, shape, id=f"bitpix{bitpix}-{conv}-{'x'.join(map(str, shape))}")
    for bitpix in (8, 16, 32, 64, -32, -64)
    for conv, kw in conventions(bitpix)
    for shape in SHAPES
]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("bitpix,conv,kw,shape", MATRIX)
def test_read_numpy_matches_oracles(tmp_path, bitpix, conv, kw, shape, writer):
    stored = make_stored(bitpix, shape)
    path = write_image(tmp_path / "img.fits", stored, bitpix=bitpix, writer=writer, **kw)
    arr = check_matches_oracles(path, 0)
    dtype, _ = result_rule(bitpix, kw.get("bscale", 1.0), kw.get("bzero", 0), kw.get("blank"))
    assert arr.dtype == dtype
    assert arr.shape == shape


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    "bitpix,conv,kw",
    [pytest.param(b, c, k, id=f"bitpix{b}-{c}") for b in (8, 16, 32, 64, -32, -64)
     for c, k in conventions(b) if c != "none"],
)
def test_read_numpy_raw_scale(tmp_path, bitpix, conv, kw, writer):
    stored = make_stored(bitpix, (7, 13))
    path = write_image(tmp_path / "img.fits", stored, bitpix=bitpix, writer=writer, **kw)
    arr = check_matches_oracles(path, 0, raw_scale=True)
    assert arr.dtype == native_dtype(BITPIX_STORAGE[bitpix])
    assert_bits_equal(arr, stored, what="raw_scale vs the values written")


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("bitpix", [8, 16, 32, 64, -32, -64])
def test_image_extension_by_index_and_name(tmp_path, bitpix, writer):
    stored = make_stored(bitpix, (5, 6))
    path = write_image(tmp_path / "ext.fits", stored, bitpix=bitpix, writer=writer,
                       extension=True, extname="SCI")
    by_index = check_matches_oracles(path, 1)
    for sel in ("SCI", "sci", "Sci"):
        assert_bits_equal(torchfits.read_numpy(path, sel), by_index, what=f"hdu={sel!r}")
    assert_bits_equal(torchfits.read_numpy(str(path), 1), by_index, what="str path")


def test_imprecise_unsigned_bzero_is_exact(tmp_path):
    """API §3: BZERO = 32767.99999999 counts as 32768 (tolerance 1e-5); values exactly stored+32768."""
    stored = make_stored(16, (7, 13))
    path = write_image(tmp_path / "u.fits", stored, bitpix=16, bzero=32767.99999999)
    arr = torchfits.read_numpy(path)
    assert arr.dtype == np.uint16
    assert np.array_equal(arr, (stored.astype(np.int64) + 32768).astype(np.uint16))
    check_matches_oracles(path, 0)


def test_explicit_bscale_one_keeps_unsigned(tmp_path):
    stored = make_stored(32, (4, 9))
    path = write_image(tmp_path / "u.fits", stored, bitpix=32, bscale=1.0, bzero=2**31)
    arr = check_matches_oracles(path, 0)
    assert arr.dtype == np.uint32


@pytest.mark.parametrize(
    "bitpix,bzero,dtype",
    [(16, -128, np.float32), (32, 32768, np.float64), (8, 128, np.float32), (16, 32768.5, np.float32)],
)
def test_near_conventions_are_ordinary_scaling(tmp_path, bitpix, bzero, dtype):
    """API §3 notes: BITPIX=16 with BZERO=-128 or BITPIX=32 with BZERO=32768 are just scaled."""
    stored = make_stored(bitpix, (6, 5))
    path = write_image(tmp_path / "s.fits", stored, bitpix=bitpix, bzero=bzero)
    arr = check_matches_oracles(path, 0)
    assert arr.dtype == dtype


def test_blank_alone_gives_float_with_nan(tmp_path):
    stored = np.array([[1, 2, -999], [-999, 5, 6]], dtype=np.int16)
    path = write_image(tmp_path / "b.fits", stored, bitpix=16, blank=-999)
    arr = torchfits.read_numpy(path)
    assert arr.dtype == np.float32
    assert np.array_equal(np.isnan(arr), stored == -999)
    assert np.array_equal(arr[stored != -999], stored[stored != -999].astype(np.float32))
    raw = torchfits.read_numpy(path, raw_scale=True)
    assert raw.dtype == np.int16 and np.array_equal(raw, stored)


def test_blank_with_unsigned_convention_is_ignored(tmp_path):
    stored = np.array([[-32768, 0, 5]], dtype=np.int16)
    path = write_image(tmp_path / "b.fits", stored, bitpix=16, bzero=32768, blank=-32768)
    arr = torchfits.read_numpy(path)
    assert arr.dtype == np.uint16
    assert arr.tolist() == [[0, 32768, 32773]]


def test_uint64_convention_native(tmp_path):
    stored = np.array([-(2**63), -1, 0, 1, 2**63 - 1], dtype=np.int64)
    path = write_image(tmp_path / "u64.fits", stored, bitpix=64, bzero=2**63)
    arr = torchfits.read_numpy(path)
    assert arr.dtype == np.uint64
    assert arr.tolist() == [0, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1]
    assert arr.tolist() == astropy_data(path).tolist()


# ------------------------------------------------------------------------------------------
# empty data
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("writer", WRITERS)
def test_empty_primary(tmp_path, writer):
    path = write_image(tmp_path / "e.fits", None, writer=writer)
    arr = torchfits.read_numpy(path)
    assert isinstance(arr, np.ndarray)
    assert arr.size == 0
    img = torchfits.open_image(path)
    assert math.prod(img.shape) == 0
    assert img.read().size == 0


def test_zero_length_axis(tmp_path):
    from _oracles import header_bytes, image_header_cards, write_raw

    path = write_raw(tmp_path / "z.fits", header_bytes(image_header_cards(16, (0, 5))))
    arr = torchfits.read_numpy(path)
    assert arr.shape == (0, 5)
    assert arr.dtype == np.int16
    assert torchfits.open_image(path).shape == (0, 5)


# ------------------------------------------------------------------------------------------
# open_image and slicing
# ------------------------------------------------------------------------------------------

SLICES_2D = [
    np.s_[...], np.s_[:], np.s_[2], np.s_[-1], np.s_[1:5], np.s_[::2], np.s_[1:-1:3],
    np.s_[::-1], np.s_[5:1:-2], np.s_[2, 3], np.s_[-1, -1], np.s_[:, 4], np.s_[:, ::3],
    np.s_[3:4, 2:9:2], np.s_[..., 1], np.s_[100:200], np.s_[-100:3], np.s_[:, -5:],
    np.s_[::-3, ::-4], np.s_[0:0], np.s_[6, 12], np.s_[-7, -13], np.s_[1:6, 3],
    (np.int64(3), slice(np.int32(1), np.int64(9), np.int16(2))),
]
SLICES_3D = [
    np.s_[1], np.s_[:, 2], np.s_[..., ::2], np.s_[1, 2, 3], np.s_[-1, :, ::-2],
    np.s_[::2, 1:3, -4:], np.s_[:, :, 5], np.s_[0, ...], np.s_[..., 2, 1], np.s_[:, -1, :],
    np.s_[2:0:-1, ::3, 1:12:5],
]


def _idx_id(idx):
    return repr(idx).replace(" ", "")


def _image_files(tmp_path):
    """(path, hdu) of a few images of different dtypes and conventions."""
    files = []
    specs = [
        ("i16blank", 16, {"bscale": 0.5, "bzero": 3.0, "blank": -32768}),
        ("u16", 16, {"bzero": 32768}),
        ("f32", -32, {}),
        ("i8", 8, {"bzero": -128}),
        ("f64", -64, {"bscale": 2.0, "bzero": 1.0}),
        ("u8", 8, {}),
    ]
    for name, bitpix, kw in specs:
        stored = make_stored(bitpix, (7, 13), seed=3)
        files.append(write_image(tmp_path / f"{name}.fits", stored, bitpix=bitpix, **kw))
    return files


@pytest.fixture
def image_files(tmp_path):
    return _image_files(tmp_path)


def test_open_image_attributes(image_files):
    for path in image_files:
        expected, mode, _ = expected_image(path, 0)
        img = torchfits.open_image(path)
        assert img.shape == expected.shape
        assert np.dtype(img.dtype) == expected.dtype
        assert_matches(img.read(), expected, mode, what=f"{path.name} read()")
        assert_matches(img[...], expected, mode, what=f"{path.name} [...]")
        hdr = img.header
        assert isinstance(hdr, torchfits.Header)
        assert [tuple(c) for c in hdr.cards] == [tuple(c) for c in torchfits.read_header(path).cards]
        assert hdr["NAXIS1"] == 13 and hdr["NAXIS2"] == 7


@pytest.mark.parametrize("idx", SLICES_2D, ids=_idx_id)
def test_open_image_slicing_2d(image_files, idx):
    for path in image_files:
        expected, mode, _ = expected_image(path, 0)
        img = torchfits.open_image(path)
        got = img[idx]
        want = np.asarray(expected[idx])
        assert isinstance(got, (np.ndarray, np.generic))
        assert_matches(np.asarray(got), want, mode, what=f"{path.name}{idx!r}")


@pytest.mark.parametrize("idx", SLICES_3D, ids=_idx_id)
@pytest.mark.parametrize("writer", WRITERS)
def test_open_image_slicing_3d(tmp_path, idx, writer):
    for bitpix, kw in ((32, {"bzero": 2**31}), (-32, {}), (16, {"bscale": 0.1, "bzero": -3.0})):
        stored = make_stored(bitpix, (3, 7, 13), seed=5)
        path = write_image(tmp_path / f"cube{bitpix}.fits", stored, bitpix=bitpix,
                           writer=writer, extension=True, **kw)
        expected, mode, _ = expected_image(path, 1)
        got = torchfits.open_image(path, 1)[idx]
        assert_matches(np.asarray(got), np.asarray(expected[idx]), mode, what=f"{path.name}{idx!r}")


@pytest.mark.parametrize("idx", [np.s_[7], np.s_[-8], np.s_[0, 13], np.s_[0, -14], np.s_[1, 2, 3]],
                         ids=_idx_id)
def test_open_image_bad_index(image_files, idx):
    img = torchfits.open_image(image_files[0])
    with pytest.raises(IndexError):
        img[idx]


def test_slicing_1d(tmp_path):
    stored = make_stored(-64, (29,))
    path = write_image(tmp_path / "v.fits", stored, bitpix=-64)
    img = torchfits.open_image(path)
    for idx in (np.s_[3], np.s_[-1], np.s_[2:20:3], np.s_[::-1], np.s_[...], np.s_[40:]):
        assert_bits_equal(np.asarray(img[idx]), np.asarray(stored[idx]), what=repr(idx))


def test_slice_results_independent_of_file(image_files):
    """Mutating a returned slice never changes a later read (API §13)."""
    path = image_files[1]
    img = torchfits.open_image(path)
    first = img[1:3, 2:5].copy()
    a = img[1:3, 2:5]
    if a.flags.writeable:
        a[...] = 0
    assert np.array_equal(torchfits.open_image(path)[1:3, 2:5], first)
    b = torchfits.read_numpy(path)
    if b.flags.writeable:
        b[...] = 0
    assert np.array_equal(torchfits.read_numpy(path)[1:3, 2:5], first)


# ------------------------------------------------------------------------------------------
# zero-copy uint8 and out= buffers
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(40, 50), (1100, 1000)], ids=["malloc", "pooled"])
def test_bitpix8_unscaled_is_owned_unless_copy_false(tmp_path, shape):
    # 1.1 MB and more come from the recycled pool: owned all the same (`_image.owns`)
    stored = make_stored(8, shape)
    path = write_image(tmp_path / "u8.fits", stored, bitpix=8)
    owned = torchfits.read_numpy(path)
    assert_bits_equal(owned, stored)
    assert owned.flags.writeable and _image.owns(owned)
    assert owned.flags.owndata == (shape == (40, 50))
    owned[0, 0] ^= 1
    piece = torchfits.open_image(path)[1:3]
    assert _image.owns(piece) or _image.owns(piece.base)
    arr = torchfits.read_numpy(path, copy=False)
    assert_bits_equal(arr, stored)
    assert not arr.flags.writeable
    assert not _image.owns(arr)
    with pytest.raises(ValueError):
        arr[0, 0] = 1
    assert_bits_equal(torchfits.read_numpy(path), stored)


@pytest.mark.parametrize("bitpix,kw", [(8, {}), (16, {"bzero": 32768}), (16, {"bscale": 0.5}),
                                       (-32, {}), (64, {"bzero": 2**63}), (32, {"blank": 7})])
def test_read_numpy_out(tmp_path, bitpix, kw):
    stored = make_stored(bitpix, (9, 11))
    path = write_image(tmp_path / "o.fits", stored, bitpix=bitpix, **kw)
    expected, mode, _ = expected_image(path, 0)
    out = np.full(expected.shape, 77, dtype=expected.dtype)
    res = torchfits.read_numpy(path, out=out)
    assert res is out
    assert_matches(out, expected, mode)
    out2 = np.zeros(expected.shape, dtype=expected.dtype)
    res2 = torchfits.open_image(path).read(out=out2)
    assert res2 is out2
    assert_matches(out2, expected, mode)


def test_read_numpy_out_raw_scale(tmp_path):
    stored = make_stored(16, (9, 11))
    path = write_image(tmp_path / "o.fits", stored, bitpix=16, bzero=32768)
    out = np.zeros((9, 11), dtype=np.int16)
    assert torchfits.read_numpy(path, raw_scale=True, out=out) is out
    assert_bits_equal(out, stored)


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: np.zeros((9, 11), dtype=np.float64), id="wrong-dtype"),
    pytest.param(lambda: np.zeros((11, 9), dtype=np.float32), id="wrong-shape"),
    pytest.param(lambda: np.zeros((9 * 11,), dtype=np.float32), id="flat"),
])
def test_read_numpy_out_rejected(tmp_path, bad):
    stored = make_stored(-32, (9, 11))
    path = write_image(tmp_path / "o.fits", stored, bitpix=-32)
    out = bad()
    before = out.copy()
    with pytest.raises((ValueError, TypeError)):
        torchfits.read_numpy(path, out=out)
    if out.flags.c_contiguous:
        assert_bits_equal(out, before)


def test_read_numpy_out_non_contiguous(tmp_path):
    """A strided ``out`` of the right dtype and shape is either filled correctly or refused."""
    stored = make_stored(-32, (9, 11))
    path = write_image(tmp_path / "o.fits", stored, bitpix=-32)
    base = np.zeros((9, 22), dtype=np.float32)
    out = base[:, ::2]
    try:
        res = torchfits.read_numpy(path, out=out)
    except (ValueError, TypeError):
        assert not base.any()
        return
    assert res is out
    assert_bits_equal(out, stored)
    assert not base[:, 1::2].any()


# ------------------------------------------------------------------------------------------
# large images: the multi-threaded band decode
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bitpix,kw", [(-32, {}), (16, {"bscale": 0.01, "bzero": 7.5, "blank": -32768}),
                                       (16, {"bzero": 32768}), (-64, {})],
                         ids=["f32", "i16-scaled-blank", "u16", "f64"])
def test_big_image(tmp_path, bitpix, kw):
    shape = (2048, 2048) if abs(bitpix) <= 32 else (1024, 1536)
    rng = np.random.default_rng(7)
    dt = native_dtype(BITPIX_STORAGE[bitpix])
    if dt.kind == "f":
        stored = rng.standard_normal(shape).astype(dt)
        stored[::97, ::89] = np.nan
        stored[5, :] = -0.0
    else:
        stored = rng.integers(-32768, 32767, size=shape, endpoint=True, dtype=dt)
    path = write_image(tmp_path / "big.fits", stored, bitpix=bitpix, writer="fitsio", **kw)
    arr = check_matches_oracles(path, 0)
    expected, mode, _ = expected_image(path, 0, use_oracles=False)
    img = torchfits.open_image(path)
    for idx in (np.s_[1000:1100, ::7], np.s_[::-5, 3], np.s_[-1], np.s_[17:2000:13, 5:2040:11]):
        assert_matches(np.asarray(img[idx]), np.asarray(expected[idx]), mode, what=repr(idx))
    out = np.empty_like(arr)
    torchfits.read_numpy(path, out=out)
    assert_matches(out, expected, mode)


# ------------------------------------------------------------------------------------------
# torch from the native Image
# ------------------------------------------------------------------------------------------

def test_image_to_torch(image_files, torch):
    for path in image_files:
        expected, mode, _ = expected_image(path, 0)
        t = torchfits.open_image(path).to_torch()
        assert isinstance(t, torch.Tensor)
        assert t.dtype == torch_dtype_of(expected.dtype)
        assert t.device.type == "cpu"
        assert_matches(t, expected, mode, what=path.name)
    with pytest.raises(ValueError, match="device must be"):
        torchfits.open_image(image_files[0]).to_torch(device="gpu")


# ------------------------------------------------------------------------------------------
# errors of the native readers
# ------------------------------------------------------------------------------------------

@pytest.fixture
def mixed_file(tmp_path, fits):
    hdus = fits.HDUList([
        fits.PrimaryHDU(np.arange(6, dtype=np.int16).reshape(2, 3)),
        fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(3))],
                                      name="TAB"),
        fits.ImageHDU(np.ones((2, 2), np.float32), name="SCI"),
    ])
    path = tmp_path / "mixed.fits"
    hdus.writeto(path)
    return path


def test_native_errors(tmp_path, mixed_file):
    missing = tmp_path / "nope.fits"
    for call in (lambda: torchfits.read_numpy(missing), lambda: torchfits.open_image(missing)):
        with pytest.raises(FitsFileNotFoundError) as ei:
            call()
        assert_fits_error(ei.value, missing, FileNotFoundError)

    with pytest.raises(HDUTypeError) as ei:
        torchfits.read_numpy(mixed_file, 1)
    assert_fits_error(ei.value, mixed_file)
    assert "HDU" in str(ei.value) and "1" in str(ei.value).replace(str(mixed_file), "")
    with pytest.raises(HDUTypeError):
        torchfits.open_image(mixed_file, "TAB")

    for sel in (3, 99, "NOPE"):
        with pytest.raises(HDUNotFoundError) as ei:
            torchfits.read_numpy(mixed_file, sel)
        assert_fits_error(ei.value, mixed_file, KeyError, IndexError)
        assert str(sel) in str(ei.value).replace(str(mixed_file), "")
    with pytest.raises(ValueError, match="non-negative"):
        torchfits.read_numpy(mixed_file, -1)


def test_native_reads_accept_pathlike_and_str(mixed_file):
    a = torchfits.read_numpy(mixed_file, "SCI")
    b = torchfits.read_numpy(str(mixed_file), 2)
    assert_bits_equal(a, b)
    assert_bits_equal(a, np.ones((2, 2), np.float32))


def test_fitsio_oracle_agrees_with_bytes(tmp_path, fitsio):
    """Sanity of the oracles themselves: fitsio's offsets equal the bytes-level walker's."""
    from _oracles import hdu_offsets

    path = write_image(tmp_path / "w.fits", make_stored(16, (3, 4)), bitpix=16, extension=True)
    with fitsio.FITS(str(path)) as f:
        offs = [h.get_offsets() for h in f]
    mine = hdu_offsets(path)
    assert [o["data_start"] for o in offs] == [o["data_start"] for o in mine]
    assert [o["header_start"] for o in offs] == [o["header_start"] for o in mine]
    assert fitsio_data(path, 1).tolist() == make_stored(16, (3, 4)).tolist()


def test_read_numpy_and_open_image_honour_cfitsio_suffixes(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    data = np.arange(20 * 30, dtype=np.int16).reshape(20, 30)
    path = tmp_path / "mef.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(data, name="SCI")]).writeto(path)
    np.testing.assert_array_equal(torchfits.read_numpy(f"{path}[1]"), data)
    np.testing.assert_array_equal(torchfits.read_numpy(f"{path}[sci]"), data)
    np.testing.assert_array_equal(torchfits.read_numpy(f"{path}[1][3:10,4:8]"), data[3:8, 2:10])
    np.testing.assert_array_equal(torchfits.read_numpy(f"{path}[1][1:30:3,2:20:5]"), data[1:20:5, 0:30:3])
    np.testing.assert_array_equal(torchfits.open_image(f"{path}[SCI]")[2:4, 5], data[2:4, 5])
    assert torchfits.read_numpy(f"{path}[1]", 1).shape == (20, 30)
    with pytest.raises(ValueError, match="selects HDU 1 and hdu=0|selects HDU 'SCI'"):
        torchfits.read_numpy(f"{path}[SCI]", 2)
    with pytest.raises(ValueError, match="no image section"):
        torchfits.open_image(f"{path}[1][1:2,1:2]")

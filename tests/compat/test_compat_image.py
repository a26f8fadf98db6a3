"""The torchfits 1.2.3 image API (docs/compatibility.md): read, read_tensor, read_hdus,
read_batch, read_subset, open_subset_reader, open/HDUList/TensorHDU/DataView, dtype table §3."""
from __future__ import annotations

import io
import re

import numpy as np
import pytest

import torchfits
from _oracles import (
    OFFSET_BZERO,
    astropy_data,
    check_matches_oracles,
    make_stored,
    result_rule,
    torch_dtype_of,
    write_image,
)

torch = pytest.importorskip("torch")

DEVICE_MSG = "device must be 'cpu', 'cuda', 'mps' or 'cuda:N'"
DATA_20x30 = np.arange(20 * 30, dtype=np.int16).reshape(20, 30)


@pytest.fixture
def img(tmp_path, fits):
    """20×30 int16 primary + 2×3×4 float32 cube "CUBE" + 1-D "VEC" + table "TAB" + 5×6 "SCI"."""
    path = tmp_path / "img.fits"
    fits.HDUList([
        fits.PrimaryHDU(DATA_20x30),
        fits.ImageHDU(np.arange(24, dtype=np.float32).reshape(2, 3, 4), name="CUBE"),
        fits.ImageHDU(np.arange(4, dtype=np.int32), name="VEC"),
        fits.BinTableHDU.from_columns([fits.Column(name="A", format="J", array=np.arange(5))], name="TAB"),
        fits.ImageHDU(np.arange(30, dtype=np.float32).reshape(5, 6), name="SCI"),
    ]).writeto(path)
    return path


@pytest.fixture
def empty(tmp_path, fits):
    path = tmp_path / "empty.fits"
    fits.PrimaryHDU().writeto(path)
    return path


def np_of(t):
    assert isinstance(t, torch.Tensor), type(t)
    return t.numpy()


# ------------------------------------------------------------------------------------------
# §3 dtype mapping through the tensor entry points
# ------------------------------------------------------------------------------------------

def _conventions():
    out = []
    for bitpix in (8, 16, 32, 64):
        out += [(bitpix, "none", {}), (bitpix, "offset", {"bzero": OFFSET_BZERO[bitpix]}),
                (bitpix, "scaled", {"bscale": 0.37, "bzero": -12.5}),
                (bitpix, "blank", {"blank": 3}),
                (bitpix, "blank+scaled", {"bscale": 2.0, "bzero": 0.5, "blank": 3})]
        if bitpix != 64:
            out.append((bitpix, "blank+offset", {"bzero": OFFSET_BZERO[bitpix], "blank": 3}))
    out += [(-32, "none", {}), (-32, "scaled", {"bscale": 0.37, "bzero": -12.5}),
            (-64, "none", {}), (-64, "scaled", {"bscale": 0.37, "bzero": -12.5})]
    return [pytest.param(b, c, k, id=f"bitpix{b}-{c}") for b, c, k in out]


def _stored(bitpix, shape=(7, 13)):
    a = make_stored(bitpix, shape, seed=11)
    if bitpix > 0:
        a.flat[-3:] = 3  # BLANK sentinel present
    return a


@pytest.mark.parametrize("raw_scale", [False, True], ids=["scaled", "raw"])
@pytest.mark.parametrize("writer", ["astropy", "fitsio"])
@pytest.mark.parametrize("bitpix,conv,kw", _conventions())
def test_dtype_table(tmp_path, bitpix, conv, kw, writer, raw_scale):
    path = write_image(tmp_path / "d.fits", _stored(bitpix), bitpix=bitpix, writer=writer, **kw)
    t = torchfits.read(path, raw_scale=raw_scale)
    dtype, kind = result_rule(bitpix, kw.get("bscale", 1.0), kw.get("bzero", 0), kw.get("blank"),
                              api="compat", raw_scale=raw_scale)
    assert t.dtype == torch_dtype_of(dtype)
    check_matches_oracles(path, 0, result=t, api="compat", raw_scale=raw_scale)
    t2 = torchfits.read_tensor(path, 0, raw_scale=raw_scale)
    assert t2.dtype == t.dtype
    check_matches_oracles(path, 0, result=t2, api="compat", raw_scale=raw_scale)


def test_uint64_convention_is_float64(tmp_path):
    stored = np.array([-(2**63), -1, 0, 1, 2**63 - 1], dtype=np.int64)
    path = write_image(tmp_path / "u64.fits", stored, bitpix=64, bzero=2**63)
    t = torchfits.read(path)
    assert t.dtype == torch.float64
    np.testing.assert_allclose(t.numpy(), [0.0, 2.0**63, 2.0**63, 2.0**63, 2.0**64], rtol=1e-15)
    assert torchfits.read(path, raw_scale=True).dtype == torch.int64


def test_imprecise_bzero_exact_on_every_mmap_path(tmp_path):
    """BUG-1.2.3 not to replicate: BZERO=32767.99999999 must give exactly stored+32768."""
    stored = np.array([[-32768, -1, 0, 1, 32767]], dtype=np.int16)
    path = write_image(tmp_path / "u.fits", stored, bitpix=16, bzero=32767.99999999)
    for mmap in (True, False, "auto"):
        t = torchfits.read(path, mmap=mmap)
        assert t.dtype == torch.uint16
        assert t.numpy().tolist() == [[0, 32767, 32768, 32769, 65535]]
        assert torchfits.read_tensor(path, mmap=mmap).numpy().tolist() == [[0, 32767, 32768, 32769, 65535]]


@pytest.mark.parametrize("flag", ["fp16", "bf16"])
def test_half_precision_after_scaling(tmp_path, flag):
    stored = np.array([[1, 2, 3], [4, -5, 6]], dtype=np.int16)
    path = write_image(tmp_path / "h.fits", stored, bitpix=16, bscale=0.5, bzero=1.0, blank=-5)
    want = torch.float16 if flag == "fp16" else torch.bfloat16
    physical = torch.from_numpy(np.where(stored == -5, np.nan, stored * 0.5 + 1.0).astype(np.float32))
    expected = physical.to(want)
    for t in (torchfits.read(path, **{flag: True}), torchfits.read_tensor(path, **{flag: True}),
              *torchfits.read([path, path], **{flag: True})):
        assert t.dtype == want
        assert torch.equal(torch.nan_to_num(t.float()), torch.nan_to_num(expected.float()))
    # both given: bf16 wins, as 1.2.3 resolves it
    assert torchfits.read(path, fp16=True, bf16=True).dtype == torch.bfloat16
    assert torchfits.read_tensor(path, fp16=True, bf16=True).dtype == torch.bfloat16


def test_empty_primary(empty):
    for t in (torchfits.read(empty, 0), torchfits.read_tensor(empty)):
        assert t.dtype == torch.uint8 and tuple(t.shape) == (0,)


# ------------------------------------------------------------------------------------------
# §2.1 read
# ------------------------------------------------------------------------------------------

def test_read_image_and_pathlike(img):
    assert np.array_equal(np_of(torchfits.read(img)), DATA_20x30)
    assert np.array_equal(np_of(torchfits.read(str(img), "sci")),
                          np.arange(30, dtype=np.float32).reshape(5, 6))


def test_read_list_of_paths(img, tmp_path, fits):
    other = tmp_path / "other.fits"
    fits.PrimaryHDU(np.ones((2, 2), np.float64)).writeto(other)
    for paths in ([img, other], (str(other), str(img))):
        out = torchfits.read(paths)
        assert isinstance(out, list) and len(out) == 2
        by = {str(img): DATA_20x30, str(other): np.ones((2, 2))}
        for p, t in zip(paths, out):
            assert np.array_equal(np_of(t), by[str(p)])
    with_h = torchfits.read([img, other], return_header=True)
    assert isinstance(with_h, list) and all(isinstance(x, tuple) and len(x) == 2 for x in with_h)
    assert with_h[1][1]["NAXIS1"] == 2


def test_read_path_validation(img):
    with pytest.raises(ValueError, match="Path must be a non-empty string"):
        torchfits.read("")
    with pytest.raises(ValueError, match="Path must be a string or list of strings"):
        torchfits.read(123)
    with pytest.raises(ValueError, match="Batch read requires a single integer HDU"):
        torchfits.read([img, img], hdu=[0, 1])


def test_read_hdu_list(img):
    out = torchfits.read(img, hdu=[0, "SCI", 1])
    assert isinstance(out, list) and len(out) == 3
    assert np.array_equal(np_of(out[0]), DATA_20x30)
    assert tuple(out[1].shape) == (5, 6) and tuple(out[2].shape) == (2, 3, 4)
    out2 = torchfits.read(img, hdu=(4,))
    assert isinstance(out2, list) and tuple(out2[0].shape) == (5, 6)


def test_read_return_header(img):
    t, h = torchfits.read(img, "SCI", return_header=True)
    assert isinstance(h, torchfits.Header)
    assert h["NAXIS"] == 2 and h["EXTNAME"] == "SCI"  # typed values, not raw strings
    assert tuple(t.shape) == (5, 6)
    t2, h2 = torchfits.read_tensor(img, 1, return_header=True)
    assert h2["NAXIS3"] == 2 and tuple(t2.shape) == (2, 3, 4)


def test_read_mode(img):
    assert tuple(torchfits.read(img, 4, mode="image").shape) == (5, 6)
    with pytest.raises(ValueError):
        torchfits.read(img, 0, mode="cube")
    with pytest.raises(ValueError, match="mode='image'"):
        torchfits.read(img, 0, mode="image", columns=["A"])
    with pytest.raises(ValueError, match="mode='image'"):
        torchfits.read(img, 0, mode="image", start_row=2)
    with pytest.raises(RuntimeError, match="Could not read image parameters"):
        torchfits.read(img, "TAB", mode="image")
    with pytest.raises(RuntimeError, match="Failed to get table dimensions"):
        torchfits.read(img, 0, mode="table")


def test_read_kwargs(img):
    ref = np_of(torchfits.read(img, 4))
    same = torchfits.read(img, 4, scale_on_device=True, use_cache=None, cache_capacity=10, fast_header=True)
    assert np.array_equal(np_of(same), ref)
    with pytest.raises(TypeError, match="unexpected keyword"):
        torchfits.read(img, 4, bogus_option=1)
    assert torchfits.read(img, 4, options={"fp16": True}).dtype == torch.float16
    with pytest.raises(TypeError):
        torchfits.read(img, 4, options={"fp16": True}, fp16=True)
    with pytest.warns(Warning):
        t = torchfits.read(img, 4, handle_cache_capacity=5)
    assert np.array_equal(np_of(t), ref)


def test_read_errors(img, tmp_path):
    missing = tmp_path / "missing.fits"
    with pytest.raises(RuntimeError, match="Could not open FITS file") as ei:
        torchfits.read(missing)
    assert str(missing) in str(ei.value)
    assert isinstance(ei.value, FileNotFoundError)
    with pytest.raises(RuntimeError, match="Could not move to HDU"):
        torchfits.read(img, 9)
    with pytest.raises(RuntimeError, match="Could not resolve HDU name 'NOPE'"):
        torchfits.read(img, "NOPE")
    with pytest.raises(ValueError, match="non-negative"):
        torchfits.read(img, -1)


@pytest.mark.parametrize("device", ["gpu", "meta", "cuda:x", "tpu", ""])
def test_device_validation(img, device):
    calls = [
        lambda: torchfits.read(img, 0, device=device),
        lambda: torchfits.read_tensor(img, 0, device=device),
        lambda: torchfits.read_hdus(img, [0], device=device),
        lambda: torchfits.read_batch([img], 0, device=device),
        lambda: torchfits.open_subset_reader(img, 0, device=device),
    ]
    for call in calls:
        with pytest.raises(ValueError) as ei:
            call()
        assert str(ei.value) == DEVICE_MSG or DEVICE_MSG in str(ei.value)


def test_device_cpu_forms(img):
    for dev in ("cpu", torch.device("cpu")):
        t = torchfits.read(img, 4, device=dev)
        assert t.device.type == "cpu"


@pytest.mark.parametrize("bad", ["yes", "", None, 1.5, "mmap"], ids=repr)
def test_mmap_validation(img, bad):
    with pytest.raises(ValueError, match=re.escape("mmap must be bool or 'auto'")):
        torchfits.read(img, 0, mmap=bad)
    with pytest.raises(ValueError, match=re.escape("mmap must be bool or 'auto'")):
        torchfits.read_tensor(img, 0, mmap=bad)


def test_mmap_values_give_identical_results(img):
    ref = np_of(torchfits.read(img, 1))
    for m in (True, False, "auto", "AUTO", "Auto"):
        assert np.array_equal(np_of(torchfits.read(img, 1, mmap=m)), ref)
    for m in (True, False, "auto"):
        assert np.array_equal(np_of(torchfits.read_tensor(img, 1, mmap=m)), ref)
        assert np.array_equal(np_of(torchfits.read_hdus(img, [1], mmap=m)[0]), ref)


# ------------------------------------------------------------------------------------------
# CFITSIO extended filename syntax
# ------------------------------------------------------------------------------------------

def test_extended_syntax_hdu(img):
    sci = np.arange(30, dtype=np.float32).reshape(5, 6)
    assert np.array_equal(np_of(torchfits.read(f"{img}[4]")), sci)
    assert np.array_equal(np_of(torchfits.read(f"{img}[SCI]")), sci)
    assert np.array_equal(np_of(torchfits.read_tensor(f"{img}[SCI]")), sci)
    assert np.array_equal(np_of(torchfits.read(f"{img}[CUBE]")),
                          np.arange(24, dtype=np.float32).reshape(2, 3, 4))


def test_extended_syntax_section(img):
    t = torchfits.read_tensor(f"{img}[3:10,4:8]")
    assert tuple(t.shape) == (5, 8)
    assert np.array_equal(np_of(t), DATA_20x30[3:8, 2:10])
    assert np.array_equal(np_of(torchfits.read(f"{img}[3:10,4:8]")), DATA_20x30[3:8, 2:10])
    t2 = torchfits.read(f"{img}[1:10:2,1:5]")
    assert np.array_equal(np_of(t2), DATA_20x30[0:5, 0:10:2])
    t3 = torchfits.read(f"{img}[30:30,20:20]")
    assert np.array_equal(np_of(t3), DATA_20x30[19:20, 29:30])


def test_brackets_in_directory_names(tmp_path, fits):
    d = tmp_path / "run[1]"
    d.mkdir()
    p = d / "f.fits"
    fits.PrimaryHDU(np.arange(6, dtype=np.int16).reshape(2, 3)).writeto(p)
    assert np.array_equal(np_of(torchfits.read(str(p))), np.arange(6).reshape(2, 3))
    assert np.array_equal(np_of(torchfits.read(f"{p}[1:2,1:2]")), np.array([[0, 1], [3, 4]]))


# ------------------------------------------------------------------------------------------
# §2.2 read_tensor
# ------------------------------------------------------------------------------------------

def test_read_tensor_hdu_validation(img, tmp_path):
    with pytest.raises(ValueError, match="non-negative integer") as ei:
        torchfits.read_tensor(img, "auto")
    assert "read(" in str(ei.value)
    for bad in (None, 1.0):
        with pytest.raises(ValueError, match="hdu must be an integer or string"):
            torchfits.read_tensor(img, bad)
    with pytest.raises(ValueError, match="HDU index must be a non-negative integer"):
        torchfits.read_tensor(img, -1)
    with pytest.raises(RuntimeError, match="Could not read image parameters"):
        torchfits.read_tensor(img, 3)
    with pytest.raises(RuntimeError, match="Could not open FITS file"):
        torchfits.read_tensor(tmp_path / "missing.fits")
    with pytest.raises(RuntimeError, match="Could not resolve HDU name 'NOPE'"):
        torchfits.read_tensor(img, "NOPE")


def test_read_tensor_fallback_header_hook_ignored(img):
    calls = []
    t = torchfits.read_tensor(img, 4, fallback_get_header=lambda *a, **k: calls.append(a))
    assert tuple(t.shape) == (5, 6)


# ------------------------------------------------------------------------------------------
# §2.3 read_hdus
# ------------------------------------------------------------------------------------------

def test_read_hdus(img):
    ts = torchfits.read_hdus(img, [0, "SCI", "cube"])
    assert isinstance(ts, list) and [tuple(t.shape) for t in ts] == [(20, 30), (5, 6), (2, 3, 4)]
    ts2, hs = torchfits.read_hdus(img, (4, 0), return_header=True)
    assert [h["NAXIS1"] for h in hs] == [6, 30]
    assert all(isinstance(h, torchfits.Header) for h in hs)
    assert np.array_equal(np_of(ts2[1]), DATA_20x30)


@pytest.mark.parametrize("bad", [[], (), "SCI", 0, None], ids=repr)
def test_read_hdus_rejects(img, bad):
    with pytest.raises(ValueError, match="hdus must be a non-empty list/tuple"):
        torchfits.read_hdus(img, bad)


def test_read_hdus_errors(img):
    with pytest.raises(RuntimeError) as ei:
        torchfits.read_hdus(img, [0, 3])
    assert img.name in str(ei.value) and "3" in str(ei.value).replace(str(img), "")
    with pytest.raises(RuntimeError) as ei:
        torchfits.read_hdus(img, [0, 12])
    assert img.name in str(ei.value)
    with pytest.raises(RuntimeError, match="Could not resolve HDU name 'NOPE'"):
        torchfits.read_hdus(img, ["NOPE"])


# ------------------------------------------------------------------------------------------
# §2.4 read_batch / read_batch_info
# ------------------------------------------------------------------------------------------

@pytest.fixture
def batch(tmp_path, fits):
    paths = []
    for i in range(3):
        p = tmp_path / f"b{i}.fits"
        fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.full((2, 3), i, np.int32), name="SCI")]).writeto(p)
        paths.append(p)
    return paths


def test_read_batch(batch):
    out = torchfits.read_batch(batch, 1)
    assert isinstance(out, list) and len(out) == 3
    for i, t in enumerate(out):
        assert np.array_equal(np_of(t), np.full((2, 3), i))
    assert [int(t[0, 0]) for t in torchfits.read_batch(list(reversed(batch)), "SCI")] == [2, 1, 0]
    assert torchfits.read_batch([]) == []


def test_read_batch_failures(batch, tmp_path):
    bad = tmp_path / "absent.fits"
    paths = [batch[0], bad, batch[1]]
    with pytest.raises(RuntimeError) as ei:
        torchfits.read_batch(paths, 1)
    assert str(ei.value).startswith(
        f"read_batch: failed to read '{bad}' (1 of 3 files read before the failure)")
    with pytest.raises(RuntimeError, match=re.escape(f"Error reading {bad}")):
        torchfits.read_batch(paths, 1, strict=True)


def test_read_batch_info(batch, tmp_path):
    junk = tmp_path / "junk.fits"
    junk.write_text("not fits at all")  # exists; read_batch_info does not open files
    paths = [str(batch[0]), f"{batch[1]}[1]", str(tmp_path / "nope.fits"), "https://example.com/x.fits",
             str(junk), f"{tmp_path / 'nope2.fits'}[SCI]"]
    assert torchfits.read_batch_info(paths) == {"num_files": 6, "existing_files": 3}
    assert torchfits.read_batch_info([]) == {"num_files": 0, "existing_files": 0}


# ------------------------------------------------------------------------------------------
# §2.5 read_subset, §2.6 open_subset_reader
# ------------------------------------------------------------------------------------------

def test_read_subset_cube_and_plane(img):
    cube = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = torchfits.read_subset(img, 1, 1, 0, 3, 2)
    assert tuple(t.shape) == (2, 2, 2)
    assert np.array_equal(np_of(t), cube[:, 0:2, 1:3])
    t2 = torchfits.read_subset(img, 0, 2, 3, 10, 8)
    assert np.array_equal(np_of(t2), DATA_20x30[3:8, 2:10])
    assert np.array_equal(np_of(torchfits.read_subset(img, "SCI", 0, 0, 6, 5)),
                          np.arange(30, dtype=np.float32).reshape(5, 6))


@pytest.mark.parametrize("coords,shape,window", [
    ((-5, -3, 4, 2), (2, 4), np.s_[0:2, 0:4]),
    ((25, 15, 100, 100), (5, 5), np.s_[15:20, 25:30]),
    ((5, 0, 5, 10), (10, 0), np.s_[0:10, 5:5]),
    ((0, 5, 10, 5), (0, 10), np.s_[5:5, 0:10]),
    ((8, 3, 2, 9), (6, 0), np.s_[3:9, 8:8]),
    ((0, 0, 30, 20), (20, 30), np.s_[:, :]),
], ids=["neg-starts", "past-edge", "x-empty", "y-empty", "x-reversed", "full"])
def test_read_subset_clamping(img, coords, shape, window):
    t = torchfits.read_subset(img, 0, *coords)
    assert tuple(t.shape) == shape
    assert t.dtype == torch.int16
    assert np.array_equal(np_of(t), DATA_20x30[window])


@pytest.mark.parametrize("kw", [{"bzero": 32768}, {"bscale": 0.5, "bzero": 2.0, "blank": 7}, {"blank": 7},
                                {"bzero": -128}], ids=["uint16", "scaled-blank", "blank", "bzero-128"])
def test_read_subset_dtype_matches_full_read(tmp_path, kw):
    stored = (np.arange(8 * 9) % 50).astype(np.int16).reshape(8, 9)
    path = write_image(tmp_path / "s.fits", stored, bitpix=16, **kw)
    full = torchfits.read(path)
    for x1, y1, x2, y2 in ((1, 2, 7, 6), (0, 0, 9, 8), (-1, 5, 3, 40)):
        t = torchfits.read_subset(path, 0, x1, y1, x2, y2)
        assert t.dtype == full.dtype
        want = full[..., max(y1, 0):y2, max(x1, 0):x2]
        np.testing.assert_array_equal(t.numpy(), want.numpy())
    with torchfits.open_subset_reader(path) as r:
        t = r(1, 1, 4, 4)
        assert t.dtype == full.dtype
        np.testing.assert_array_equal(t.numpy(), full[1:4, 1:4].numpy())


def test_read_subset_compressed(mixed_fits):
    t = torchfits.read_subset(mixed_fits, 4, 3, 2, 10, 20)
    expected = astropy_data(mixed_fits, 4)[2:20, 3:10]
    assert t.dtype == torch.int16
    assert np.array_equal(np_of(t), expected)


def test_read_subset_errors(img, tmp_path):
    with pytest.raises(RuntimeError, match="SubsetReader requires at least 2D image HDU"):
        torchfits.read_subset(img, 2, 0, 0, 1, 1)
    with pytest.raises(RuntimeError, match="Could not read image parameters"):
        torchfits.read_subset(img, 3, 0, 0, 1, 1)
    with pytest.raises(RuntimeError, match="Could not open FITS file"):
        torchfits.read_subset(tmp_path / "missing.fits", 0, 0, 0, 1, 1)


def test_open_subset_reader(img):
    r = torchfits.open_subset_reader(img, "SCI")
    assert r.hdu == 4
    assert tuple(r.shape) == (5, 6)
    sci = np.arange(30, dtype=np.float32).reshape(5, 6)
    assert np.array_equal(np_of(r.read_subset(1, 2, 4, 5)), sci[2:5, 1:4])
    assert np.array_equal(np_of(r(0, 0, 2, 1)), sci[0:1, 0:2])
    assert tuple(r(3, 3, 3, 5).shape) == (2, 0)
    r.close()
    with pytest.raises(RuntimeError, match="SubsetReader is closed"):
        r.read_subset(0, 0, 1, 1)
    with pytest.raises(RuntimeError, match="SubsetReader is closed"):
        r(0, 0, 1, 1)
    with torchfits.open_subset_reader(img, 1, device="cpu") as r2:
        assert r2.hdu == 1 and tuple(r2.shape) == (2, 3, 4)
        assert tuple(r2(1, 0, 3, 2).shape) == (2, 2, 2)
    with pytest.raises(RuntimeError, match="SubsetReader is closed"):
        r2(0, 0, 1, 1)
    r3 = torchfits.open_subset_reader(img)
    assert r3.hdu == 0 and tuple(r3.shape) == (20, 30)
    r3.close()


def test_open_subset_reader_errors(img, tmp_path):
    with pytest.raises(RuntimeError, match="SubsetReader requires at least 2D image HDU"):
        torchfits.open_subset_reader(img, "VEC")
    with pytest.raises(RuntimeError, match="Could not read image parameters"):
        torchfits.open_subset_reader(img, "TAB")
    with pytest.raises(RuntimeError, match="Could not open FITS file"):
        torchfits.open_subset_reader(tmp_path / "missing.fits")


def test_read_subset_out(img):
    out = torch.zeros((5, 8), dtype=torch.int16)
    res = torchfits.read_subset(img, 0, 2, 3, 10, 8, out=out)
    assert res is out
    assert np.array_equal(out.numpy(), DATA_20x30[3:8, 2:10])


# ------------------------------------------------------------------------------------------
# §4.1–§4.4 open(), HDUList, TensorHDU, DataView
# ------------------------------------------------------------------------------------------

def test_open_errors(img, tmp_path):
    with pytest.raises(RuntimeError, match="supports mode='r' only"):
        torchfits.open(img, mode="w")
    missing = tmp_path / "missing.fits"
    with pytest.raises(FileNotFoundError, match="FITS file not found") as ei:
        torchfits.open(missing)
    assert str(missing) in str(ei.value)
    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"garbage" * 1000)
    with pytest.raises(RuntimeError, match=re.escape(f"Failed to open FITS file '{junk}'")):
        torchfits.open(junk)


def test_open_hdu_classes_and_raw_header_values(img, mixed_fits):
    with torchfits.open(img) as hdul:
        assert len(hdul) == 5
        kinds = [type(h).__name__ for h in hdul]
        assert kinds == ["TensorHDU", "TensorHDU", "TensorHDU", "TableHDURef", "TensorHDU"]
        h0 = hdul[0].header
        assert isinstance(h0, torchfits.Header)
        assert h0["NAXIS"] == "2"  # QUIRK: raw card strings
        assert h0["SIMPLE"] == "T"
    with torchfits.open(mixed_fits) as hdul:
        assert isinstance(hdul[4], torchfits.TensorHDU)  # compressed image
        assert hdul[4].header["ZCMPTYPE"] in ("RICE_1", "'RICE_1'")
        assert isinstance(hdul[2], torchfits.TableHDURef)


def test_open_raw_float_value(tmp_path, fits):
    p = tmp_path / "f.fits"
    h = fits.PrimaryHDU(np.zeros((2, 2), np.float32))
    h.header["EXPTIME"] = 12.5
    h.writeto(p)
    with torchfits.open(p) as hdul:
        assert hdul[0].header["EXPTIME"] == "12.5"


def test_hdulist_indexing(img):
    with torchfits.open(img) as hdul:
        assert hdul[-1].header["EXTNAME"] == "SCI"
        assert hdul[4] is hdul[-1] or hdul[4].header["EXTNAME"] == "SCI"
        with pytest.raises(IndexError):
            hdul[5]
        with pytest.raises(IndexError):
            hdul[-6]
        assert hdul["CUBE"].header["EXTNAME"] == "CUBE"
        # names are case-insensitive (an exact match wins), as everywhere else
        assert hdul["cube"] is hdul["CUBE"] and hdul[" Sci "] is hdul[4]
        with pytest.raises(KeyError, match="HDU 'NOPE' not found"):
            hdul["NOPE"]
        assert "SCI" in hdul and "sci" in hdul and "NOPE" not in hdul
        assert 4 in hdul and -5 in hdul and 5 not in hdul and hdul[1] in hdul
        for bad in (1.0, slice(0, 2)):
            with pytest.raises(TypeError, match="HDUList indices must be int or EXTNAME str"):
                hdul[bad]
        assert len(list(iter(hdul))) == 5


def test_hdulist_info_and_repr(img):
    with torchfits.open(img) as hdul:
        buf = io.StringIO()
        hdul.info(output=buf)
        text = buf.getvalue()
        assert re.search(r"No\.\s+Name\s+Type\s+Cards\s+Dimensions\s+Format", text), text
        lines = [ln for ln in text.splitlines() if re.match(r"\s*\d+\s", ln)]
        assert len(lines) == 5, text
        assert "PrimaryHDU" in lines[0]
        assert all("ImageHDU" in lines[i] for i in (1, 2, 4))
        assert "TableHDU" in lines[3] and re.search(r"5R x 1C", lines[3]), lines[3]
        assert "CUBE" in lines[1] and "SCI" in lines[4]
        assert repr(hdul).strip() == text.strip()
        html = hdul._repr_html_()
        assert html.count("<tr>") == 6 and "<td>SCI</td>" in html and "5R x 1C" in html
        assert hdul.validate() is True
    assert hdul.validate() is False
    after = repr(hdul)  # after close: no error, images say so
    assert "(closed)" in after and "5R x 1C" in after
    assert repr(hdul[4]) == "TensorHDU(name='SCI', closed)"


def test_dataview_array_protocol(img, fits):
    with torchfits.open(img) as hdul:
        arr = np.asarray(hdul["SCI"].data)
        assert arr.shape == (5, 6) and arr.dtype == np.float32
        np.testing.assert_array_equal(arr, fits.getdata(img, "SCI"))
        assert np.asarray(hdul["SCI"].data, dtype=np.float64).dtype == np.float64
        assert len(hdul["SCI"].data) == 5 and hdul["SCI"].data.ndim == 2
        np.testing.assert_array_equal(np.asarray(hdul["CUBE"].data), fits.getdata(img, "CUBE"))


def test_hdulist_in_memory():
    hl = torchfits.HDUList()
    assert len(hl) == 0
    hl.append(torchfits.TensorHDU(data=torch.zeros(2, 3)))
    assert len(hl) == 1


def test_tensorhdu_close_semantics(img):
    hdul = torchfits.open(img)
    hdu = hdul[4]
    assert np.array_equal(np_of(hdu.to_tensor()), np.arange(30, dtype=np.float32).reshape(5, 6))
    hdul.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = hdu.data
    with pytest.raises(RuntimeError):
        hdu.to_tensor()


def test_tensorhdu_members(img, tmp_path):
    with torchfits.open(img) as hdul:
        sci, cube, vec, prim = hdul[4], hdul[1], hdul[2], hdul[0]
        assert sci.shape_str == "(5, 6)"
        assert vec.shape_str == "(4)"
        assert "float32" in sci.dtype_str
        assert repr(sci) == "TensorHDU(name='SCI', shape=(5, 6), dtype=float32)"
        chunks = list(prim.chunks((6,)))
        assert [tuple(c.shape) for c in chunks] == [(6, 30), (6, 30), (6, 30), (2, 30)]
        assert np.array_equal(torch.cat(chunks).numpy(), DATA_20x30)
        assert np.array_equal(torch.cat(list(prim.chunks(()))).numpy(), DATA_20x30)
        assert len(list(prim.chunks(()))) == 1  # default height 64 > 20 rows
        cchunks = list(cube.chunks((1,)))
        assert len(cchunks) == 2 and np.array_equal(torch.cat(cchunks).numpy(), np_of(cube.to_tensor()))
    u16 = write_image(tmp_path / "u16.fits", np.zeros((2, 3), np.int16), bitpix=16, bzero=32768)
    with torchfits.open(u16) as hdul:
        assert "int16" in hdul[0].dtype_str and "uint16" not in hdul[0].dtype_str  # storage dtype
        assert str(hdul[0].data.dtype).replace("torch.", "") == "uint16"  # result dtype


def test_tensorhdu_in_memory():
    t = torch.arange(6.0).reshape(2, 3)
    hdu = torchfits.TensorHDU(data=t)
    with pytest.raises(ValueError, match="No file handle available"):
        _ = hdu.data
    assert torch.equal(hdu.to_tensor(), t)


@pytest.fixture
def sci_view(img):
    hdul = torchfits.open(img)
    yield hdul[4].data, np.arange(30, dtype=np.float32).reshape(5, 6)
    hdul.close()


@pytest.mark.parametrize("key,window", [
    (np.s_[1:3, 2:5], np.s_[1:3, 2:5]),
    (np.s_[-2:, :-1], np.s_[-2:, :-1]),
    (np.s_[:, :], np.s_[:, :]),
    (np.s_[10:20, 0:2], np.s_[5:5, 0:2]),
    (np.s_[1], np.s_[1:2, :]),
    (np.s_[:, 2], np.s_[:, 2:3]),
    (np.s_[-1, -1], np.s_[4:5, 5:6]),
    (np.s_[1:4], np.s_[1:4, :]),
    (np.s_[-100:2, 4:100], np.s_[0:2, 4:6]),
], ids=lambda x: repr(x).replace(" ", ""))
def test_dataview_slicing(sci_view, key, window):
    dv, data = sci_view
    t = dv[key]
    assert np.array_equal(np_of(t), data[window])
    assert t.ndim == 2


def test_dataview_rules(sci_view, img):
    dv, data = sci_view
    assert tuple(dv.shape) == (5, 6)
    assert str(dv.dtype).replace("torch.", "") == "float32"
    assert np.array_equal(np_of(dv[...]), data)
    for bad in (np.s_[5], np.s_[-6], np.s_[:, 6]):
        with pytest.raises(IndexError):
            dv[bad]
    with pytest.raises(ValueError, match="Only step=1 slices are supported"):
        dv[::2, :]
    with pytest.raises(ValueError, match="exactly 2 dimensions"):
        dv[0:1, 0:1, 0:1]
    with torchfits.open(img) as hdul:
        with pytest.raises(ValueError, match="Subset reading requires at least 2D data"):
            hdul["VEC"].data[0:1]
        cube = hdul["CUBE"].data
        t = cube[1:3, 2:4]
        assert tuple(t.shape) == (2, 2, 2)
        assert np.array_equal(np_of(t), np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, 1:3, 2:4])

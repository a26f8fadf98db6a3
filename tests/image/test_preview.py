"""Pictures of images: `torchfits.preview`, `torchfits preview`, notebook thumbnails.

Limits and stretches against astropy.visualization (ZScaleInterval, PercentileInterval,
MinMaxInterval, AsinhStretch, SqrtStretch, LogStretch through ImageNormalize); PNGs decoded
with Pillow and compared level for level; a huge image drawn from a strided sample only.
"""
from __future__ import annotations

import io
import os
import sys

import numpy as np
import pytest

import torchfits
from _cli import run
from torchfits.errors import FitsFileExistsError, HDUTypeError
from torchfits.image import plain
from torchfits.image.thumbnail import display_limits, picture_key, stretched

torch = pytest.importorskip("torch")
PIL = pytest.importorskip("PIL.Image")
viz = pytest.importorskip("astropy.visualization")
fits = pytest.importorskip("astropy.io.fits")


def _rng(seed=0):
    return np.random.default_rng(seed)


def _sky(shape=(120, 90), seed=0):
    """Noise around 100 with a few bright sources and a hot column: a picture with a tail."""
    a = _rng(seed).normal(100.0, 5.0, shape)
    a[10:14, 20:24] += 3000.0
    a[60:62, 40:70] += 400.0
    a[:, 5] += 50.0
    return a


ARRAYS = {
    "sky": _sky(),
    "with_nan": np.where(_rng(1).random((64, 80)) < 0.1, np.nan, _sky((64, 80), 2)),
    "float32": _sky((50, 70), 3).astype(np.float32),
    "integers": _rng(4).poisson(30, (40, 40)).astype(np.int16),
    "large": _rng(5).standard_cauchy((300, 400)),  # more than 1000 samples: a stride
    "tiny": np.array([[1.0, 5.0], [2.0, 9.0]]),  # fewer pixels than the fit needs
    "small": np.arange(12.0).reshape(3, 4) ** 2,
}


def _astropy_norm(values, vmin, vmax, stretch):
    """astropy's ImageNormalize(vmin, vmax, stretch, clip=True) without matplotlib: the interval
    maps to [0, 1] and clips, then the stretch (clipped again)."""
    y = viz.ManualInterval(vmin, vmax)(np.asarray(values, np.float64), clip=True)
    return stretch(y, clip=True)


def _finite(a):
    a = np.asarray(a, dtype=np.float64)
    return a[np.isfinite(a)]


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_zscale_limits_equal_astropy(name):
    a = ARRAYS[name]
    lo, hi = display_limits(np.asarray(a, np.float64), "zscale")
    want = viz.ZScaleInterval().get_limits(_finite(a))
    assert lo == pytest.approx(want[0], rel=1e-9, abs=1e-9)
    assert hi == pytest.approx(want[1], rel=1e-9, abs=1e-9)


def test_zscale_of_a_constant_array_and_contrast():
    lo, hi = display_limits(np.full((8, 8), 7.5), "zscale")
    want = viz.ZScaleInterval().get_limits(np.full(64, 7.5))
    assert lo == pytest.approx(want[0], rel=1e-12) and hi == pytest.approx(want[1], abs=1e-5)  # hi > lo kept
    a = ARRAYS["sky"]
    for contrast in (0.1, 0.5):
        got = display_limits(a, "zscale", contrast=contrast)
        assert got == pytest.approx(viz.ZScaleInterval(contrast=contrast).get_limits(_finite(a)),
                                    rel=1e-9)


@pytest.mark.parametrize("interval, oracle", [
    ("minmax", viz.MinMaxInterval()),
    ("99.5", viz.PercentileInterval(99.5)),
    (95, viz.PercentileInterval(95)),
    ("percentile", viz.PercentileInterval(99.5)),
])
@pytest.mark.parametrize("name", ["sky", "with_nan", "integers", "tiny"])
def test_other_intervals_equal_astropy(interval, oracle, name):
    a = ARRAYS[name]
    got = display_limits(np.asarray(a, np.float64), interval)
    assert got == pytest.approx(oracle.get_limits(_finite(a)), rel=1e-12, abs=1e-12)


STRETCHES = [
    ("asinh", None, viz.AsinhStretch()),  # our default a=10 is astropy's a=0.1
    ("asinh", 2.0, viz.AsinhStretch(a=0.5)),
    ("sqrt", None, viz.SqrtStretch()),
    ("log", None, viz.LogStretch()),
    ("log", 50.0, viz.LogStretch(a=50.0)),
    ("linear", None, viz.LinearStretch()),
]


@pytest.mark.parametrize("stretch, a, oracle", STRETCHES)
def test_stretches_equal_astropy(stretch, a, oracle):
    values = ARRAYS["with_nan"]
    vmin, vmax = 90.0, 160.0
    got = stretched(values, vmin, vmax, stretch, a)
    want = _astropy_norm(values, vmin, vmax, oracle)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6, equal_nan=True)
    assert np.isnan(got[np.isnan(values)]).all()


def _expected_levels(values, interval, oracle_stretch):
    limits = {"zscale": viz.ZScaleInterval(), "minmax": viz.MinMaxInterval()}[interval]
    vmin, vmax = limits.get_limits(_finite(values))
    y = _astropy_norm(values, vmin, vmax, oracle_stretch)
    y = np.where(np.isnan(values), 0.0, y)
    return np.flipud(np.rint(y * 255).astype(np.uint8))


def _decode(png):
    im = PIL.open(io.BytesIO(png))
    return im, np.asarray(im)


@pytest.mark.parametrize("stretch, oracle, interval", [
    ("asinh", viz.AsinhStretch(), "zscale"), ("sqrt", viz.SqrtStretch(), "minmax"),
    ("log", viz.LogStretch(), "zscale"), ("linear", viz.LinearStretch(), "minmax")])
def test_png_levels_are_the_stretched_pixels(stretch, oracle, interval):
    values = ARRAYS["with_nan"]
    png = torchfits.preview(values, stretch=stretch, interval=interval)
    im, levels = _decode(png)
    assert im.format == "PNG" and im.mode == "L" and im.size == (80, 64)
    np.testing.assert_array_equal(levels, _expected_levels(values, interval, oracle))


def test_size_fits_the_longest_side_and_never_enlarges():
    values = _sky((600, 400))
    im, _ = _decode(torchfits.preview(values, size=256))
    assert im.size == (171, 256)
    im, _ = _decode(torchfits.preview(values, size=5000))
    assert im.size == (400, 600)
    # a step that divides the image exactly needs no resample: levels of the sampled pixels
    im, levels = _decode(torchfits.preview(values, size=200, interval="minmax"))
    assert im.size == (134, 200)  # every 3rd pixel: 200 x ceil(400 / 3)
    _, levels = _decode(torchfits.preview(_sky((512, 256)), size=256, interval="minmax"))
    sampled = _sky((512, 256))[::2, ::2]
    np.testing.assert_array_equal(levels, _expected_levels(sampled, "minmax", viz.AsinhStretch()))


def test_picture_key_takes_the_first_plane_and_drops_unit_axes():
    assert picture_key((5, 100, 200), 50) == ((0, slice(None, None, 4), slice(None, None, 4)), 4)
    assert picture_key((1, 100, 1, 200), None)[0] == (0, slice(None, None, 1), 0, slice(None, None, 1))
    assert picture_key((100,), None) is None and picture_key((1, 1, 100), 10) is None


@pytest.fixture
def image_file(tmp_path):
    path = str(tmp_path / "img.fits")
    cols = [fits.Column(name="a", format="J", array=np.arange(3))]
    cube = np.stack([ARRAYS["sky"], ARRAYS["sky"] * 2 + 7]).astype(np.float32)
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(ARRAYS["sky"].astype(np.float32), name="SCI"),
                  fits.BinTableHDU.from_columns(cols, name="CAT"),
                  fits.ImageHDU(np.arange(10.0), name="SPEC"),
                  fits.ImageHDU(cube, name="CUBE")]).writeto(path)
    return path


def test_sources_agree_path_suffix_image_array_tensor(image_file):
    data = torchfits.read_numpy(image_file, "SCI")
    png = torchfits.preview(image_file, hdu="SCI")
    assert torchfits.preview(f"{image_file}[SCI]") == png
    assert torchfits.preview(f"{image_file}[1]") == png
    assert torchfits.preview(image_file) == png  # the first HDU with data
    assert torchfits.preview(torchfits.open_image(image_file, 1)) == png
    assert torchfits.preview(data) == png
    assert torchfits.preview(torch.from_numpy(data)) == png
    np.testing.assert_array_equal(_decode(png)[1], _expected_levels(data, "zscale", viz.AsinhStretch()))
    # a cube draws its first plane; a CFITSIO section draws the section
    assert torchfits.preview(image_file, hdu="CUBE") == png
    section = torchfits.preview(f"{image_file}[SCI][11:40,21:50]")
    assert section == torchfits.preview(data[20:50, 10:40])


def test_errors_name_the_file_and_hdu(image_file):
    with pytest.raises(HDUTypeError, match=r"img\.fits: HDU 2 is a bintable"):
        torchfits.preview(image_file, hdu="CAT")
    with pytest.raises(HDUTypeError, match=r"img\.fits: HDU 3 has shape \(10,\)"):
        torchfits.preview(f"{image_file}[SPEC]")
    with pytest.raises(KeyError, match="NOPE"):
        torchfits.preview(image_file, hdu="NOPE")
    with pytest.raises(ValueError, match="no two axes"):
        torchfits.preview(np.arange(5.0))
    with pytest.raises(ValueError, match="no pixels"):
        torchfits.preview(np.zeros((4, 0, 5)))
    with pytest.raises(ValueError, match="stretch"):
        torchfits.preview(ARRAYS["sky"], stretch="cubic")
    with pytest.raises(ValueError, match="interval"):
        torchfits.preview(ARRAYS["sky"], interval="ds9")
    with pytest.raises(ValueError, match="hdu="):
        torchfits.preview(ARRAYS["sky"], hdu=1)


def test_out_is_written_atomically(image_file, tmp_path, monkeypatch):
    out = tmp_path / "pic.png"
    png = torchfits.preview(image_file, out)
    assert out.read_bytes() == png
    with pytest.raises(FitsFileExistsError):
        torchfits.preview(image_file, out, stretch="linear")
    from torchfits.writing import atomic

    def disk_full(self, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.Sink, "write", disk_full)
    with pytest.raises(OSError):
        torchfits.preview(image_file, out, stretch="linear", overwrite=True)
    assert out.read_bytes() == png  # the old picture, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".torchfits-")] == []
    monkeypatch.undo()
    torchfits.preview(image_file, out, stretch="linear", overwrite=True)
    assert out.read_bytes() != png


def test_a_huge_image_is_drawn_from_a_strided_sample(tmp_path, monkeypatch):
    """20000 x 20000 float32 (1.6 GB, a sparse file): the thumbnail decodes about 257 x 257."""
    path = str(tmp_path / "huge.fits")
    n = 20000
    header = fits.Header({"SIMPLE": True, "BITPIX": -32, "NAXIS": 2, "NAXIS1": n, "NAXIS2": n})
    with open(path, "wb") as fh:
        fh.write(header.tostring().encode("ascii"))
        data_start = fh.tell()
        fh.truncate(data_start + 4 * n * n)
        fh.seek(data_start + 4 * (5000 * n + 5000))  # one bright pixel row segment
        fh.write(np.full(4000, 1000.0, ">f4").tobytes())
    decoded = []
    real = plain.decode_region

    def counting(index, entry, plan, region, out, **kw):
        decoded.append(int(np.prod(kw.get("out_shape") or out.shape)))
        return real(index, entry, plan, region, out, **kw)

    monkeypatch.setattr(plain, "decode_region", counting)
    monkeypatch.setattr(plain.Image, "read", lambda *a, **k: pytest.fail("whole image read"))
    img = torchfits.open_image(path)
    png = img._repr_png_()
    assert png is not None and _decode(png)[0].size == (256, 256)
    assert sum(decoded) == 257 * 257
    assert img._repr_png_() is png and len(decoded) == 1  # drawn once per Image
    assert "data:image/png;base64," in img._repr_html_()
    im, _ = _decode(torchfits.preview(path, size=300))
    assert im.size == (300, 300) and sum(decoded) == 257 * 257 + 304 * 304


def test_notebook_reprs(image_file, monkeypatch):
    img = torchfits.open_image(image_file, "SCI")
    png = img._repr_png_()
    assert png == torchfits.preview(img, size=256)
    assert "data:image/png;base64," in img._repr_html_()
    assert torchfits.open_image(image_file, "SPEC")._repr_png_() is None
    cube = torchfits.open_image(image_file, "CUBE")._repr_png_()
    assert cube == png  # the first plane
    with torchfits.open(image_file) as hdul:
        assert hdul[1]._repr_png_() == png and "data:image/png" in hdul[1]._repr_html_()
    memory = torchfits.TensorHDU(data=torch.from_numpy(ARRAYS["sky"]))
    assert memory._repr_png_() == torchfits.preview(ARRAYS["sky"], size=256)
    assert torchfits.TensorHDU(data=torch.zeros(5))._repr_png_() is None
    nan = torchfits.TensorHDU(data=torch.full((4, 4), float("nan")))
    assert nan._repr_png_() is None
    # without Pillow: no PNG, the HTML summary alone, and a clear error from preview
    monkeypatch.setitem(sys.modules, "PIL", None)
    fresh = torchfits.open_image(image_file, "SCI")
    assert fresh._repr_png_() is None
    html = fresh._repr_html_()
    assert "<strong>Image</strong>" in html and "<img" not in html
    with pytest.raises(ImportError, match=r"pip install 'torchfits\[preview\]'"):
        torchfits.preview(image_file)


def test_import_torchfits_imports_neither_pillow_nor_torch():
    import subprocess

    code = ("import sys, torchfits; torchfits.preview; torchfits.open_image; "
            "print(any(m in sys.modules for m in ('PIL', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# -- the command line -------------------------------------------------------------------------------
def test_cli_writes_the_png(image_file, tmp_path, capsys):
    out = tmp_path / "a.png"
    code, _, err = run(capsys, "preview", f"{image_file}[SCI]", out)
    assert code == 0, err
    assert out.read_bytes() == torchfits.preview(image_file, hdu="SCI")
    out2 = tmp_path / "b.png"
    code, _, err = run(capsys, "preview", image_file, out2, "-e", "CUBE", "--stretch", "sqrt",
                       "--percentile", "99", "--size", "50")
    assert code == 0, err
    assert out2.read_bytes() == torchfits.preview(image_file, hdu="CUBE", stretch="sqrt",
                                                  interval=99.0, size=50)
    assert _decode(out2.read_bytes())[0].size == (38, 50)
    code, _, err = run(capsys, "preview", image_file, tmp_path / "c.png", "--minmax")
    assert code == 0 and (tmp_path / "c.png").read_bytes() == torchfits.preview(image_file,
                                                                                interval="minmax")
    code, _, err = run(capsys, "preview", image_file, out)
    assert code == 2 and "output exists" in err
    code, _, err = run(capsys, "preview", image_file, out, "--overwrite", "--stretch", "log")
    assert code == 0 and out.read_bytes() == torchfits.preview(image_file, stretch="log")


def test_cli_to_stdout(image_file, capsysbinary):
    from torchfits.cli.main import main

    assert main(["preview", image_file, "-"]) == 0
    assert capsysbinary.readouterr().out == torchfits.preview(image_file)


def test_cli_refuses_what_is_not_a_picture(image_file, tmp_path, capsys):
    out = tmp_path / "x.png"
    code, _, err = run(capsys, "preview", f"{image_file}[CAT]", out)
    assert code == 2 and "HDU 2 (CAT) is a table; preview draws images" in err and "img.fits" in err
    code, _, err = run(capsys, "preview", image_file, out, "-e", "SPEC")
    assert code == 2 and "HDU 3 (SPEC) has shape (10,)" in err
    code, _, err = run(capsys, "preview", f"{image_file}[7]", out)
    assert code == 2 and "HDU 7 out of range" in err
    code, _, err = run(capsys, "preview", image_file, out, "--percentile", "0")
    assert code == 2 and "--percentile" in err
    code, _, err = run(capsys, "preview", image_file, out, "--minmax", "--zscale")
    assert code == 2
    assert not os.path.exists(out)


def test_cli_without_pillow(image_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    code, _, err = run(capsys, "preview", image_file, tmp_path / "x.png")
    assert code == 3 and "pip install 'torchfits[preview]'" in err


@pytest.mark.parametrize("tile", [(1, 1, 50), (1, 3, 50), (2, 50)])
def test_strided_reads_of_row_tiled_compressed_images(tmp_path, monkeypatch, tile):
    """A thumbnail's stride decodes only the row tiles holding a sampled row, and reads equal
    the whole image's pixels (cubes of (1, rows, width) tiles included)."""
    from torchfits.image import compressed

    shape = (3, 100, 50) if len(tile) == 3 else (100, 50)
    data = _rng(7).normal(100.0, 5.0, shape).astype(np.float32)
    path = str(tmp_path / "c.fits")
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1",
                                                       tile_shape=tile)]).writeto(path)
    fetched = []
    real = compressed.CompressedImage._fetch
    monkeypatch.setattr(compressed.CompressedImage, "_fetch",
                        lambda self, ks: fetched.extend(ks) or real(self, ks))
    img = torchfits.open_image(path)
    full = torchfits.read_numpy(path)
    lead = (0,) if len(shape) == 3 else ()
    for key in [lead + (slice(None, None, 7), slice(None, None, 7)),
                lead + (slice(2, 90, 9), slice(None, None, -3)),
                (Ellipsis, slice(1, None, 2), slice(3, 40)),
                lead + (slice(None, None, 7),)]:
        fetched.clear()
        np.testing.assert_array_equal(img[key], full[key])
        rows = np.arange(100)[key[len(lead)]]
        if key[0] is not Ellipsis:
            assert len(set(fetched)) == len(set(rows // tile[-2]))
    fetched.clear()
    assert img._repr_png_() == torchfits.preview(full[lead], size=256)

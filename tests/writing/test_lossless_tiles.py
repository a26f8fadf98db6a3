"""Float tiles whose noise estimate is zero (ramps, constants, any smooth run) are stored
losslessly, never quantised: CFITSIO's rule (the minimum of its 2nd, 3rd and 5th order MAD
noise estimates, zero when the 3rd order one is), so every reader gets the input bit for bit."""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

import torchfits
from _writecheck import fitsverify_ok
from torchfits.writing.api import write
from torchfits.writing.compress_write import _noise, write_compressed


def _ramp(dtype="f4") -> np.ndarray:
    return np.arange(64, dtype=dtype).reshape(8, 8) * 1.5 + 0.25


def _columns(path, hdu=1) -> list[str]:
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path, disable_image_compression=True) as h:
        return [c.name for c in h[hdu].columns]


def _readers_equal(path, expected, hdu=1) -> None:
    """torchfits, astropy, fitsio and funpack (when installed) give ``expected`` bit for bit."""
    fits = pytest.importorskip("astropy.io.fits")
    fitsio = pytest.importorskip("fitsio")
    got = [torchfits.read_numpy(path, hdu=hdu)]
    with fits.open(path) as h:
        got.append(np.array(h[hdu].data))
    got.append(fitsio.read(str(path), ext=hdu))
    for g in got:
        assert g.dtype == expected.dtype
        assert g.shape == expected.shape
        assert g.tobytes() == expected.tobytes()  # bit for bit, NaN payloads included
    fitsverify_ok(path)


def _funpack_equal(path, expected, tmp_path) -> None:
    exe = shutil.which("funpack")
    if exe is None:
        pytest.skip("funpack is not installed")
    out = tmp_path / "unpacked.fits"
    run = subprocess.run([exe, "-O", str(out), str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(out) as h:
        data = next(hdu.data for hdu in h if hdu.data is not None)
        assert np.array(data).astype(expected.dtype).tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_compress_true_keeps_a_ramp_exact(tmp_path, dtype):
    ramp = _ramp(dtype)
    path = tmp_path / "ramp.fits"
    write(path, ramp, compress=True)
    _readers_equal(path, ramp)
    _funpack_equal(path, ramp, tmp_path)
    assert "GZIP_COMPRESSED_DATA" in _columns(path)


@pytest.mark.parametrize("route", ["compress_file", "insert_hdu"])
def test_other_compressing_routes_keep_a_ramp_exact(tmp_path, route):
    """Compressing an existing file and inserting a compressed HDU follow the same rule."""
    from torchfits.writing.recompress import compress_file

    ramp = _ramp()
    path = tmp_path / "ramp.fits"
    if route == "compress_file":
        plain = tmp_path / "plain.fits"
        write(plain, ramp)
        compress_file(str(plain), str(path))
        hdu = 1
    else:
        write(path, np.zeros((2, 2), np.float32))
        torchfits.insert_hdu(path, ramp, index=1, compress=True)
        with torchfits.open(path) as hdul:
            hdu = next(i for i, h in enumerate(hdul) if tuple(h.shape) == (8, 8))
    _readers_equal(path, ramp, hdu=hdu)
    assert "GZIP_COMPRESSED_DATA" in _columns(path, hdu)


@pytest.mark.parametrize("codec,quantize", [("RICE_1", None), ("RICE_1", 16), ("GZIP_1", 4),
                                            ("GZIP_2", (4, "SUBTRACTIVE_DITHER_2")),
                                            ("HCOMPRESS_1", None)])
def test_explicit_quantizing_codecs_keep_noise_free_tiles_exact(tmp_path, codec, quantize):
    image = np.concatenate([_ramp(), np.full((8, 8), 7.125, np.float32)])
    path = tmp_path / "q.fits"
    write_compressed(path, image, compress=codec, quantize=quantize, tile=(8, 8))
    _readers_equal(path, image)


def test_noisy_tiles_are_still_quantised_and_noise_free_ones_not(tmp_path):
    rng = np.random.default_rng(5)
    image = np.empty((4, 64), np.float32)
    image[0] = np.arange(64) * 0.25 - 3              # exact ramp: lossless
    image[1] = rng.normal(100, 5, 64)               # noise: quantised
    image[2] = 3.0                                  # constant: lossless
    image[3] = -0.0                                 # constant (negative zero)
    path = tmp_path / "mixed.fits"
    write_compressed(path, image, compress="RICE_1")
    back = torchfits.read_numpy(path, hdu=1)
    assert back[[0, 2, 3]].tobytes() == image[[0, 2, 3]].tobytes()
    assert not np.array_equal(back[1], image[1])     # quantised ...
    assert np.abs(back[1] - image[1]).max() < 5.0    # ... within a step of noise 5 / level 4
    _readers_equal(path, back)
    cols = _columns(path)
    assert "ZSCALE" in cols and "GZIP_COMPRESSED_DATA" in cols


def test_ramp_with_nan_holes_is_exact(tmp_path):
    ramp = np.arange(256, dtype=np.float32).reshape(4, 64) * 0.5
    ramp[1, 10] = ramp[2, 3] = ramp[3, 40] = np.nan
    path = tmp_path / "holes.fits"
    write(path, ramp, compress="RICE_1")
    _readers_equal(path, ramp)


def _reference_noise(tile: np.ndarray) -> float:
    """CFITSIO's estimate written out pixel by pixel: per row (NaNs skipped), the low median of
    the 2nd, 3rd and 5th order absolute differences over windows that are not constant; the
    median of those over rows; scaled; the 3rd order one unless a non-zero other is smaller."""
    nx = tile.shape[-1]
    rows = tile.reshape(-1, nx) if nx >= 9 else tile.reshape(1, -1)
    if rows.shape[1] < 9:
        return 0.0
    per2, per3, per5 = [], [], []
    for row in rows:
        v = [float(x) for x in row if not math.isnan(x)]
        d2, d3, d5 = [], [], []
        for i in range(len(v) - 8):
            w = v[i:i + 9]
            if not (w[4] == w[5] == w[6]):
                d2.append(abs(w[4] - w[6]))
            if not (w[2] == w[3] == w[4] == w[5] == w[6]):
                d3.append(abs(2 * w[4] - w[2] - w[6]))
                d5.append(abs(6 * w[4] - 4 * w[2] - 4 * w[6] + w[0] + w[8]))
        if not d3:
            continue
        low = lambda d: sorted(d)[(len(d) - 1) // 2]  # noqa: E731
        per3.append(low(d3))
        per5.append(low(d5))
        if len(d2) > 1 or (len(d2) == 1 and len(d3) == 1):
            per2.append(low(d2))

    def mid(d):
        if not d:
            return 0.0
        d = sorted(d)
        return (d[(len(d) - 1) // 2] + d[len(d) // 2]) / 2

    n2, n3, n5 = 1.0483579 * mid(per2), 0.6052697 * mid(per3), 0.1772048 * mid(per5)
    best = n3
    if n2 != 0 and n2 < best:
        best = n2
    if n5 != 0 and n5 < best:
        best = n5
    return best


@pytest.mark.parametrize("seed", range(6))
def test_noise_estimate_matches_the_reference_with_nans(seed):
    rng = np.random.default_rng(seed)
    shape = [(8, 8), (3, 100), (1, 50), (5, 7), (2, 3), (6, 40)][seed]
    tile = rng.normal(10, 2, shape)
    if seed % 2:
        tile = np.round(tile)                        # ties and constant runs
    tile[rng.random(shape) < 0.15] = np.nan
    tile[0, : min(12, shape[1])] = 4.0               # a constant run
    for dtype in ("f4", "f8"):
        t = tile.astype(dtype)
        assert _noise(t) == pytest.approx(_reference_noise(t.astype(np.float64)), rel=1e-12, abs=0)


def test_noise_estimate_of_smooth_and_tiny_tiles_is_zero():
    assert _noise(_ramp()) == 0.0
    assert _noise(np.full((4, 16), 2.5)) == 0.0
    assert _noise(np.array([[1.0, 5.0, 2.0]])) == 0.0     # fewer than 9 pixels
    assert _noise(np.full((3, 20), np.nan)) == 0.0

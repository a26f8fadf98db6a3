"""Helpers for writer tests: read a written file back with astropy, fitsio and torchfits."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def leftovers(directory: Path) -> list[str]:
    """Temporary files a writer left behind."""
    return [p for p in os.listdir(directory) if p.startswith(".torchfits-")]


def astropy_image(path: Path, hdu: int = 0) -> np.ndarray:
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path, checksum=True) as h:
        return np.array(h[hdu].data)


def fitsio_image(path: Path, hdu: int = 0) -> np.ndarray:
    fitsio = pytest.importorskip("fitsio")
    return fitsio.read(str(path), ext=hdu)


def check_image_roundtrip(path: Path, expected: np.ndarray, hdu: int = 0) -> None:
    """The image at ``hdu`` equals ``expected`` (values and dtype kind) in every reader."""
    import torchfits

    for got in (astropy_image(path, hdu), fitsio_image(path, hdu), torchfits.read_numpy(path, hdu=hdu)):
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        assert got.dtype.kind == expected.dtype.kind or expected.dtype.kind == "b"


def astropy_table(path: Path, hdu: int = 1) -> Any:
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path, checksum=True) as h:
        return h[hdu].data.copy(), h[hdu].columns


def check_table_columns(path: Path, expected: dict, hdu: int = 1) -> None:
    """Each expected numeric/string column equals what astropy, fitsio and torchfits read."""
    import torchfits

    fitsio = pytest.importorskip("fitsio")
    data, _ = astropy_table(path, hdu)
    fdata = fitsio.read(str(path), ext=hdu)
    arrow = torchfits.scan(str(path), hdu=hdu).to_arrow()
    for name, want in expected.items():
        want = np.asarray(want)
        for got in (np.asarray(data[name]), np.asarray(fdata[name])):
            if want.dtype.kind in "US":
                got = np.char.rstrip(got.astype(str))
                want_s = np.asarray(want).astype(str)
                np.testing.assert_array_equal(got, want_s)
            else:
                np.testing.assert_array_equal(got.reshape(want.shape), want)
        col = arrow.column(name).to_pylist()
        if want.dtype.kind in "US":
            assert col == [str(v) for v in want.astype(str)]
        else:
            np.testing.assert_array_equal(np.asarray(col).reshape(want.shape), want)


def fitsverify_ok(path: Path) -> None:
    """fitsverify reports no errors (skips when the binary is not installed)."""
    exe = shutil.which("fitsverify")
    if exe is None:
        pytest.skip("fitsverify is not installed")
    out = subprocess.run([exe, "-q", "-e", str(path)], capture_output=True, text=True)
    assert "verification OK" in out.stdout, out.stdout + out.stderr

"""CHECKSUM / DATASUM: the kernel, the encoding, writing and verifying against astropy."""
from __future__ import annotations

import numpy as np
import pytest

from torchfits._kernels import _checksum
from torchfits.writing.api import write
from torchfits.writing.checksum import encode_checksum, ones_sum, verify_checksums, write_checksums


def _reference_sum(data: bytes) -> int:
    """Plain-Python ones'-complement sum of big-endian 32-bit words."""
    total = 0
    for i in range(0, len(data), 4):
        total += int.from_bytes(data[i:i + 4], "big")
        total = (total & 0xFFFFFFFF) + (total >> 32)
    return total


@pytest.mark.parametrize("seed", range(5))
def test_kernel_matches_reference(seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=4 * int(rng.integers(1, 3000)), dtype=np.uint8)
    assert _checksum.ones_sum32(raw) == _reference_sum(raw.tobytes())
    # Chaining two halves equals one pass.
    half = (raw.size // 8) * 4
    assert _checksum.ones_sum32(raw[half:], _checksum.ones_sum32(raw[:half])) == ones_sum(raw)
    with pytest.raises(ValueError):
        _checksum.ones_sum32(raw[:3])


def test_encoding_matches_astropy():
    fits = pytest.importorskip("astropy.io.fits")
    hdu = fits.PrimaryHDU()
    for value in (0, 1, 0x12345678, 0xDEADBEEF, 0xFFFFFFFF, 0x80000000):
        assert encode_checksum(value, complement=False) == hdu._char_encode(value)


def _astropy_verifies(path, n):
    fits = pytest.importorskip("astropy.io.fits")
    # astropy warns on a wrong checksum; pytest turns the warning into an error.
    with fits.open(path, checksum=True) as h:
        for i in range(n):
            assert h[i].header["CHECKSUM"]
            _ = h[i].data


def test_write_with_checksums_verified_by_astropy(tmp_path):
    import pyarrow as pa
    path = tmp_path / "c.fits"
    write(path, [np.arange(100, dtype="f4").reshape(10, 10), {"a": np.arange(7), "s": ["x"] * 7}],
          checksum=True)
    _astropy_verifies(path, 2)
    for i in range(2):
        assert verify_checksums(path, i) == {"datastatus": 1, "hdustatus": 1, "present": True,
                                             "ok": True, "status": "ok"}
    stream = tmp_path / "s.fits"
    t = pa.table({"l": pa.array([[1.0], [2.0, 3.0]]), "x": [1, 2]})
    write(stream, t, checksum=True)
    _astropy_verifies(stream, 2)


def test_write_checksums_on_astropy_file(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "a.fits"
    fits.HDUList([fits.PrimaryHDU(np.arange(12, dtype="i2")),
                  fits.BinTableHDU.from_columns([fits.Column("x", "E", array=np.ones(5))])]).writeto(path)
    assert verify_checksums(path, 1)["status"] == "no_checksums"
    write_checksums(path, 1)
    write_checksums(path, 0)
    _astropy_verifies(path, 2)
    assert verify_checksums(path, 1)["ok"]
    # astropy's own checksums verify with ours.
    other = tmp_path / "b.fits"
    fits.PrimaryHDU(np.arange(50, dtype="f8")).writeto(other, checksum=True)
    assert verify_checksums(other)["status"] == "ok"


def test_corruption_is_detected(tmp_path):
    path = tmp_path / "c.fits"
    write(path, np.arange(1000, dtype="i4"), header={"OBJECT": "ABC"}, checksum=True)
    raw = bytearray(path.read_bytes())
    header_only = raw.replace(b"'ABC", b"'ABD")
    p1 = tmp_path / "h.fits"
    p1.write_bytes(bytes(header_only))
    assert verify_checksums(p1) == {"datastatus": 1, "hdustatus": -1, "present": True,
                                    "ok": False, "status": "fail"}
    raw[2880 + 5] ^= 0xFF
    p2 = tmp_path / "d.fits"
    p2.write_bytes(bytes(raw))
    st = verify_checksums(p2)
    assert st["datastatus"] == -1 and st["status"] == "fail"


def test_verify_errors(tmp_path):
    path = tmp_path / "x.fits"
    write(path, np.zeros(3, "f4"))
    with pytest.raises(ValueError):
        verify_checksums(path, -1)
    with pytest.raises(TypeError):
        verify_checksums(path, "0")
    with pytest.raises(RuntimeError, match="Could not move to HDU"):
        verify_checksums(path, 5)
    with pytest.raises(RuntimeError, match="Could not open FITS file for checksum verification"):
        verify_checksums(tmp_path / "missing.fits")
    with pytest.raises(RuntimeError, match="Could not move to HDU"):
        write_checksums(path, 3)


def test_cli_verify_exit_codes(tmp_path, capsys):
    import argparse

    from torchfits.cli.edit_commands import add_parsers

    parser = argparse.ArgumentParser()
    commands: dict = {}
    add_parsers(parser.add_subparsers(dest="command"), commands)
    good = tmp_path / "g.fits"
    write(good, np.arange(10, dtype="f4"), checksum=True)
    plain = tmp_path / "p.fits"
    write(plain, np.arange(10, dtype="f4"))
    assert commands["verify"](parser.parse_args(["verify", str(good), str(plain)])) == 0
    out = capsys.readouterr().out
    assert "OK (CHECKSUM and DATASUM verify)" in out and "OK (no CHECKSUM or DATASUM card)" in out
    raw = bytearray(good.read_bytes())
    raw[2880] ^= 1
    bad = tmp_path / "b.fits"
    bad.write_bytes(bytes(raw))
    assert commands["verify"](parser.parse_args(["verify", str(bad), "--json"])) == 4
    assert '"status": "fail"' in capsys.readouterr().out

"""Rebuild the regression files in tests/data/ from the fuzzing findings they reproduce.

``python -m tests.fuzz.make_regressions`` rewrites them (deterministic bytes); each one is a
small valid file with the one mutation the campaign found, so the tests that read them stay
readable. tests/test_fuzz_regressions.py says what each must give.
"""
from __future__ import annotations

import os

import numpy as np

from tests._fitsbytes import fits_bytes, set_card

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _add_card(raw: bytearray, card: bytes) -> None:
    """Insert a card in place of the first END (the header block has room in these files)."""
    pos = raw.find(b"END" + b" " * 77)
    raw[pos:pos + 160] = card.ljust(80) + b"END".ljust(80)


def build() -> dict[str, str]:
    from astropy.io import fits

    os.makedirs(DATA, exist_ok=True)
    rng = np.random.default_rng(16)
    out: dict[str, str] = {}

    def emit(name: str, raw: bytes, why: str) -> None:
        with open(os.path.join(DATA, name), "wb") as fh:
            fh.write(bytes(raw))
        out[name] = why

    img16 = fits_bytes([fits.PrimaryHDU(rng.integers(-99, 99, (20, 30)).astype(np.int16))])
    raw = bytearray(img16)
    _add_card(raw, b"BLANK   =                1E400 / overflows a double")
    emit("reg_blank_1e400.fits", raw, "a value overflowing a double blocked str(header)")

    raw = bytearray(img16)
    set_card(raw, b"NAXIS1", b"4294967297")
    emit("reg_naxis1_huge.fits", raw, "read_numpy allocated 320 GiB before checking the file")

    raw = bytearray(img16)
    _add_card(raw, b"BZERO   =                 10.0")
    _add_card(raw, b"BZERO   =                 20.0")
    emit("reg_duplicate_bzero.fits", raw, "the first BZERO was applied; CFITSIO/astropy use the last")

    tab = fits_bytes([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="ID", format="K", array=np.arange(10))])])
    raw = bytearray(tab)
    set_card(raw, b"TFIELDS", b"4294967297")
    emit("reg_tfields_huge.fits", raw, "a loop over TFIELDS allocated without bound")

    raw = fits_bytes([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="ID", format="K", array=np.arange(10)),
         fits.Column(name="FLUX", format="E", array=np.arange(10, dtype=np.float32)),
         fits.Column(name="MAG", format="E", array=np.arange(10, dtype=np.float32))])])
    set_card(raw, b"TTYPE1", b"4294967297")
    set_card(raw, b"TTYPE3", b"4294967297")
    emit("reg_ttype_numeric.fits", raw,
         "numeric TTYPEs named two columns alike: a where raised a bare KeyError from pyarrow")

    img = rng.integers(0, 1000, (64, 64)).astype(np.int32)
    comp = fits_bytes([fits.PrimaryHDU(), fits.CompImageHDU(img, compression_type="RICE_1",
                                                            tile_shape=(16, 64))])
    for name, edits, why in [
        ("reg_znaxis_huge.fits", [(b"ZNAXIS", b"2147483648")],
         "read_header looped over 2^31 ZNAXISn keywords (hang)"),
        ("reg_rice_bytepix.fits", [(b"ZVAL2", b"2147483647"), (b"ZBITPIX", b"64")],
         "a bare ValueError for an absurd BYTEPIX"),
        ("reg_zval_inf.fits", [(b"ZVAL1", b"-1E400")], "a bare OverflowError for an infinite BLOCKSIZE"),
        ("reg_ztile_huge.fits", [(b"ZNAXIS1", b"67108864"), (b"ZTILE1", b"67108864")],
         "tiles of 2^30 pixels: a 16 GiB output from an 11 kB file"),
    ]:
        raw = bytearray(comp)
        for key, value in edits:
            set_card(raw, key, value)
        emit(name, raw, why)

    flt = (rng.standard_normal((64, 64)) * 10 + 50).astype(np.float32)
    q = fits_bytes([fits.PrimaryHDU(), fits.CompImageHDU(flt, compression_type="RICE_1",
                                                         tile_shape=(16, 64), quantize_level=16)])
    raw = bytearray(q)
    set_card(raw, b"ZBITPIX", b"32")
    emit("reg_quantized_zbitpix32.fits", raw,
         "raw quantised integers returned where CFITSIO readers apply ZSCALE/ZZERO")

    raw = bytearray(q)
    pos = raw.find(b"'ZSCALE ")
    raw[pos + 6:pos + 7] = b"f"
    emit("reg_zscale_garbled.fits", raw, "integer bits reinterpreted as float32 (4.1e-44)")
    return out


if __name__ == "__main__":
    for name, why in build().items():
        print(f"{name}: {why}")

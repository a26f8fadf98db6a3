"""Repeated structural cards in tile-compressed headers: torchfits reads what both oracles read.

CFITSIO (fitsio) and astropy take the FIRST of repeated ZBITPIX, ZNAXISn, ZTILEn, ZCMPTYPE,
ZQUANTIZ, ZDITHER0, ZSCALE/ZZERO keywords and (in a compressed header) BSCALE/BZERO cards; for
plain images both take the last BZERO (tests/test_fuzz_regressions.py). Each case writes a
compressed image with astropy, turns spare COMMENT cards into the repeated cards, and compares
the three readers' values.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import torchfits

fits = pytest.importorskip("astropy.io.fits")

_RNG = np.random.default_rng(16)
_INT = _RNG.integers(0, 1000, (64, 64)).astype(np.int16)
_FLT = (_RNG.standard_normal((64, 64)) * 10 + 50).astype(np.float32)


def _file(kind: str) -> bytearray:
    if kind == "int":
        hdu = fits.CompImageHDU(_INT, compression_type="RICE_1", tile_shape=(16, 64))
    elif kind == "quantised":
        hdu = fits.CompImageHDU(_FLT, compression_type="RICE_1", tile_shape=(16, 64),
                                quantize_level=16)
    else:
        hdu = fits.CompImageHDU(_FLT, compression_type="GZIP_1", tile_shape=(16, 64),
                                quantize_level=0)
    for _ in range(6):
        hdu.header.add_comment("spare")
    buf = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(buf)
    return bytearray(buf.getvalue())


def _with_cards(raw: bytearray, cards: list[bytes]) -> bytearray:
    pos = 2880
    for card in cards:
        pos = raw.find(b"COMMENT spare", pos)
        while pos % 80:
            pos = raw.find(b"COMMENT spare", pos + 1)
        assert pos > 0, "no spare card left"
        raw[pos:pos + 80] = card.ljust(80)
    return raw


def _card(key: str, value: str) -> bytes:
    return (key.ljust(8) + "= " + value.rjust(20)).encode()


CASES = {
    "zbitpix": ("int", [_card("ZBITPIX", "32")]),
    "zbitpix_float": ("int", [_card("ZBITPIX", "-32")]),
    "znaxis1": ("int", [_card("ZNAXIS1", "32")]),
    "ztile1": ("int", [_card("ZTILE1", "32")]),
    "zcmptype": ("int", [_card("ZCMPTYPE", "'GZIP_1  '")]),
    "bzero": ("int", [_card("BZERO", "10.0"), _card("BZERO", "20.0")]),
    "bscale": ("int", [_card("BSCALE", "2.0"), _card("BSCALE", "3.0")]),
    "zscale_keyword": ("quantised", [_card("ZSCALE", "2.0"), _card("ZSCALE", "3.0")]),
    "zzero_keyword": ("quantised", [_card("ZZERO", "2.0"), _card("ZZERO", "3.0")]),
    "zquantiz": ("quantised", [_card("ZQUANTIZ", "'NO_DITHER'")]),
    "zdither0": ("quantised", [_card("ZDITHER0", "77")]),
    "quantised_bzero": ("quantised", [_card("BZERO", "10.0"), _card("BZERO", "20.0")]),
    "lossless_zbitpix": ("lossless", [_card("ZBITPIX", "-64")]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_repeated_compressed_cards_match_both_oracles(tmp_path, fitsio, name):
    kind, cards = CASES[name]
    path = str(tmp_path / f"{name}.fits")
    with open(path, "wb") as fh:
        fh.write(bytes(_with_cards(_file(kind), cards)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(path) as hl:
            theirs_astropy = np.array(hl[1].data)
    theirs_fitsio = fitsio.read(path, ext=1)
    ours = torchfits.read_numpy(path, 1)
    # The oracles agree on the values (fitsio reads scaled integers as int32, astropy as
    # float32, as torchfits does; with a BZERO on quantised floats CFITSIO rounds once in
    # double precision, astropy and torchfits in two float32 steps: 1 ulp apart).
    np.testing.assert_allclose(theirs_astropy, theirs_fitsio.astype(theirs_astropy.dtype),
                               rtol=2e-7, atol=0)
    assert ours.dtype == theirs_astropy.dtype
    np.testing.assert_array_equal(ours, theirs_astropy)
    np.testing.assert_array_equal(torchfits.open_image(path, 1)[5:40, 3:9], theirs_astropy[5:40, 3:9])

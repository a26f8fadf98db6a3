"""FITS files as bytes to edit: HDUs written by astropy into memory, then one card changed, for
the tests (and the fuzzing regression files) that need a header that lies."""
from __future__ import annotations

import io
import warnings


def fits_bytes(hdus: list) -> bytearray:
    """The bytes astropy writes for ``hdus`` (its warnings silenced: the lies come later)."""
    from astropy.io import fits

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits.HDUList(hdus).writeto(buf)
    return bytearray(buf.getvalue())


def set_card(raw: bytearray, key: bytes, value: bytes, nth: int = 0) -> bytearray:
    """Replace the value of the ``nth`` card ``key`` (80-byte records, value right-aligned) and
    return ``raw``; KeyError when there is no such card."""
    pos = -1
    for _ in range(nth + 1):
        pos = raw.find(key.ljust(8) + b"=", pos + 1)
        while pos >= 0 and pos % 80:
            pos = raw.find(key.ljust(8) + b"=", pos + 1)
        if pos < 0:
            raise KeyError(key)
    raw[pos:pos + 80] = (key.ljust(8) + b"= " + value.rjust(20)).ljust(80)
    return raw

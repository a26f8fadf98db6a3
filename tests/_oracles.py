"""Conformance helpers: write FITS files with independent writers and check torchfits reads
against independent readers (astropy, fitsio, and a bytes-level walker written here).

Every helper that needs astropy or fitsio imports it lazily and skips the calling test when it is
missing, so the suite still runs with only the core installed.
"""
from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BLOCK = 2880
CARD = 80

#: storage dtype (big-endian) of each BITPIX
BITPIX_STORAGE = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
#: BZERO of the offset conventions that keep an integer type (signed byte, unsigned 16/32/64)
OFFSET_BZERO = {8: -128, 16: 2**15, 32: 2**31, 64: 2**63}
OFFSET_DTYPE = {8: np.int8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _astropy():
    return pytest.importorskip("astropy.io.fits")


def _fitsio():
    return pytest.importorskip("fitsio")


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def storage_array(values: Any, bitpix: int) -> np.ndarray:
    """``values`` as an array of the native-order storage dtype of ``bitpix``."""
    return np.asarray(values).astype(np.dtype(BITPIX_STORAGE[bitpix]).newbyteorder("="))


def write_image(
    path: str | os.PathLike,
    stored: np.ndarray | None,
    *,
    bitpix: int | None = None,
    bscale: float | None = None,
    bzero: float | int | None = None,
    blank: int | None = None,
    writer: str = "astropy",
    extname: str | None = None,
    extension: bool = False,
    cards: Sequence[tuple[str, Any]] = (),
) -> Path:
    """Write ``stored`` verbatim (the *stored* values, no scaling applied by the writer) as an
    image HDU and add BSCALE/BZERO/BLANK/EXTNAME cards afterwards.

    ``extension=True`` writes an empty primary first and the image as HDU 1.
    ``stored=None`` (or a 0-d array) writes a data-less HDU.  Returns the path.  The bytes on disk
    are checked against ``stored`` with the bytes-level walker, so a writer that silently
    rescales would fail here rather than make a test vacuous.
    """
    path = Path(path)
    if stored is not None:
        stored = np.asarray(stored)
        if stored.ndim == 0:
            stored = None
    if stored is not None and bitpix is not None:
        stored = storage_array(stored, bitpix)
    if stored is not None:
        stored = stored.astype(stored.dtype.newbyteorder("="))
    keys: list[tuple[str, Any]] = []
    if bscale is not None:
        keys.append(("BSCALE", bscale))
    if bzero is not None:
        keys.append(("BZERO", bzero))
    if blank is not None:
        keys.append(("BLANK", blank))
    if extname is not None:
        keys.append(("EXTNAME", extname))
    keys.extend(cards)

    if writer == "astropy":
        fits = _astropy()
        hdus = []
        if extension:
            hdus.append(fits.PrimaryHDU())
            hdu = fits.ImageHDU(stored)
        else:
            hdu = fits.PrimaryHDU(stored)
        for k, v in keys:
            hdu.header[k] = v
        hdus.append(hdu)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.HDUList(hdus).writeto(path, overwrite=True)
    elif writer == "fitsio":
        fitsio = _fitsio()
        if path.exists():
            path.unlink()
        with fitsio.FITS(str(path), "rw", clobber=True) as f:
            if extension:
                f.write(None)
            if stored is None:
                if not extension:
                    f.write(None)
            elif stored.dtype == np.int64 and bzero is not None and int(bzero) == 2**63:
                # write_key cannot take 2**63: let fitsio write the uint64 convention itself
                f.write(stored.view(np.uint64) ^ np.uint64(1 << 63))
                keys = [(k, v) for k, v in keys if k != "BZERO"]
            else:
                f.write(stored)
            for k, v in keys:
                f[-1].write_key(k, v)
        if stored is not None and stored.dtype.kind == "f" and not np.isfinite(stored).all():
            # CFITSIO turns every non-finite float into its own NaN pattern (0xFF...) on write;
            # put the intended bits back in place so Inf/-Inf/NaN payloads reach the readers.
            off = hdu_offsets(path)[-1]["data_start"]
            with open(path, "r+b") as fh:
                fh.seek(off)
                fh.write(stored.astype(stored.dtype.newbyteorder(">")).tobytes())
    else:  # pragma: no cover - programming error in a test
        raise ValueError(writer)

    if stored is not None:
        got = raw_stored(path, 1 if extension else 0)
        assert got.dtype == stored.dtype.newbyteorder(">") or stored.dtype.itemsize == 1
        assert got.shape == stored.shape
        assert got.tobytes() == stored.astype(got.dtype).tobytes(), "writer rescaled the data"
    return path


def pad_block(b: bytes, fill: bytes = b"\0") -> bytes:
    return b + fill * (-len(b) % BLOCK)


def card(text: str) -> bytes:
    """One 80-byte card from ``text`` (padded with blanks)."""
    assert len(text) <= CARD, text
    return text.ljust(CARD).encode("ascii")


def value_card(key: str, value: str, comment: str | None = None) -> bytes:
    """A fixed-format card ``KEY     = value / comment`` with ``value`` written as given."""
    text = f"{key:<8}= {value:>20}"
    if comment is not None:
        text += f" / {comment}"
    return card(text)


def header_bytes(cards: Iterable[bytes | str], end: bool = True) -> bytes:
    raw = b"".join(c if isinstance(c, bytes) else card(c) for c in cards)
    if end:
        raw += card("END")
    return pad_block(raw, b" ")


def image_header_cards(bitpix: int, shape: Sequence[int], primary: bool = True,
                       extra: Iterable[bytes | str] = ()) -> list[bytes]:
    """Structural cards of an image HDU; ``shape`` in NumPy (C) order."""
    cards = [value_card("SIMPLE", "T") if primary else value_card("XTENSION", "'IMAGE   '")]
    cards.append(value_card("BITPIX", str(bitpix)))
    cards.append(value_card("NAXIS", str(len(shape))))
    for i, n in enumerate(reversed(list(shape)), 1):
        cards.append(value_card(f"NAXIS{i}", str(n)))
    if not primary:
        cards += [value_card("PCOUNT", "0"), value_card("GCOUNT", "1")]
    cards.extend(c if isinstance(c, bytes) else card(c) for c in extra)
    return cards


def write_raw(path: str | os.PathLike, *parts: bytes) -> Path:
    """Write hand-made bytes (header blocks and data) exactly as given."""
    path = Path(path)
    path.write_bytes(b"".join(parts))
    return path


# --------------------------------------------------------------------------------------------
# A bytes-level oracle independent of both libraries
# --------------------------------------------------------------------------------------------

def _card_int(raw: bytes, key: str) -> int | None:
    for i in range(0, len(raw), CARD):
        c = raw[i:i + CARD].decode("ascii")
        if c[:8].rstrip() == key and c[8:10] == "= ":
            return int(c[10:].split("/")[0].strip())
    return None


def hdu_offsets(path: str | os.PathLike) -> list[dict[str, int]]:
    """Walk the header blocks of a well-formed file: for each HDU ``header_start``,
    ``data_start``, ``data_size`` (unpadded bytes) and ``data_end`` (padded)."""
    data = Path(path).read_bytes()
    out = []
    pos = 0
    while pos + BLOCK <= len(data):
        start = pos
        end_card = None
        while end_card is None:
            block = data[pos:pos + BLOCK]
            if len(block) < BLOCK:
                raise ValueError("header runs past end of file")
            for i in range(0, BLOCK, CARD):
                if block[i:i + CARD].rstrip(b" ") == b"END":
                    end_card = pos + i
                    break
            pos += BLOCK
        raw = data[start:pos]
        bitpix = _card_int(raw, "BITPIX")
        naxis = _card_int(raw, "NAXIS")
        dims = [_card_int(raw, f"NAXIS{i}") for i in range(1, naxis + 1)]
        pcount = _card_int(raw, "PCOUNT") or 0
        gcount = _card_int(raw, "GCOUNT") or 1
        size = 0 if naxis == 0 else abs(bitpix) // 8 * gcount * (pcount + math.prod(dims))
        padded = size + (-size % BLOCK)
        out.append({"header_start": start, "end_card": end_card, "data_start": pos, "data_size": size,
                    "data_end": pos + padded, "bitpix": bitpix,
                    "shape": tuple(reversed(dims))})
        pos += padded
    return out


def raw_stored(path: str | os.PathLike, hdu: int = 0) -> np.ndarray:
    """The stored pixel values of image HDU ``hdu`` straight from the file bytes,
    as a big-endian array of the storage dtype."""
    info = hdu_offsets(path)[hdu]
    dt = np.dtype(BITPIX_STORAGE[info["bitpix"]])
    n = math.prod(info["shape"]) if info["shape"] else 0
    with open(path, "rb") as f:
        f.seek(info["data_start"])
        buf = f.read(n * dt.itemsize)
    return np.frombuffer(buf, dtype=dt, count=n).reshape(info["shape"] if n else (0,))


def make_stored(bitpix: int, shape, seed: int = 0) -> np.ndarray:
    """Stored values of ``bitpix`` with the type's extremes (and, for floats, NaN with payloads,
    ±Inf, -0.0, subnormals) first, random values after."""
    rng = np.random.default_rng(seed + 1000 * abs(bitpix) + len(shape))
    dt = native_dtype(BITPIX_STORAGE[bitpix])
    n = math.prod(shape)
    if dt.kind in "iu":
        ii = np.iinfo(dt)
        a = rng.integers(ii.min, ii.max, size=n, endpoint=True, dtype=dt)
        specials = [ii.min, ii.max, 0, 1, ii.max - 1, ii.min + 1]
        if ii.min < 0:
            specials.append(-1)
        for i, v in enumerate(specials[:n]):
            a[i] = v
    else:
        fi = np.finfo(dt)
        a = (rng.standard_normal(n) * 1e3).astype(dt)
        specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, fi.max, -fi.max, fi.tiny,
                    fi.smallest_subnormal, -fi.smallest_subnormal, 1.0, -1.5]
        for i, v in enumerate(specials[:n]):
            a[i] = v
        u = a.view(np.uint32 if dt.itemsize == 4 else np.uint64)
        if n > len(specials) + 1:
            # NaNs with payloads and the sign bit set must survive unscaled reads bit for bit
            if dt.itemsize == 4:
                u[len(specials)] = 0x7FC00001
                u[len(specials) + 1] = 0xFFC12345
            else:
                u[len(specials)] = 0x7FF8000000000001
                u[len(specials) + 1] = 0xFFF8000000ABCDEF
    return a.reshape(shape)


# --------------------------------------------------------------------------------------------
# Reading with the oracles
# --------------------------------------------------------------------------------------------

def astropy_header(path, hdu=0):
    fits = _astropy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fits.getheader(path, hdu)


def astropy_data(path, hdu=0, raw=False):
    fits = _astropy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(path, do_not_scale_image_data=raw, memmap=False) as hl:
            d = hl[hdu].data
            return None if d is None else np.array(d)


def fitsio_data(path, hdu=0):
    """fitsio's scaled read, or ``None`` where this fitsio cannot read the file at all
    (its CFITSIO fails on BITPIX=64 with BZERO=2**63, even on files it wrote itself)."""
    fitsio = _fitsio()
    try:
        with fitsio.FITS(str(path)) as f:
            return f[hdu].read()
    except OSError:
        return None


def scaling_of(path, hdu=0) -> dict[str, Any]:
    h = astropy_header(path, hdu)
    return {
        "bitpix": int(h["BITPIX"]),
        "bscale": float(h.get("BSCALE", 1.0)),
        "bzero": h.get("BZERO", 0),
        "blank": h.get("BLANK"),
    }


def native_dtype(dt) -> np.dtype:
    """``dt`` in native byte order."""
    return np.dtype(dt).newbyteorder("=")


def native_array(a) -> np.ndarray:
    """``a`` in native byte order (a copy only when it is not)."""
    a = np.asarray(a)
    return a.astype(native_dtype(a.dtype)) if a.dtype.byteorder not in ("=", "|") else a


def result_rule(bitpix, bscale=1.0, bzero=0, blank=None, *, api="native", raw_scale=False):
    """(result dtype, kind) per docs/images.md (api="native") or docs/compatibility.md (api="compat").

    kind: "raw" (stored values), "offset" (integer offset convention), "uint64-float"
    (compat: uint64 convention as float64), "scaled" (physical float, BLANK → NaN).
    """
    storage = native_dtype(BITPIX_STORAGE[bitpix])
    if raw_scale:
        return storage, "raw"
    bscale = float(bscale)
    if bitpix > 0 and abs(bscale - 1.0) < 1e-5 and abs(float(bzero) - OFFSET_BZERO[bitpix]) < 1e-5 \
            and (bitpix != 64 or int(bzero) == 2**63):
        if bitpix == 64 and api == "compat":
            return np.dtype(np.float64), "uint64-float"
        return np.dtype(OFFSET_DTYPE[bitpix]), "offset"
    scaled = bscale != 1.0 or float(bzero) != 0.0
    if bitpix < 0:
        return storage, ("scaled" if scaled else "raw")
    if scaled or blank is not None:
        return np.dtype(np.float32 if bitpix in (8, 16) else np.float64), "scaled"
    return storage, "raw"


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------

def _uint_view(a: np.ndarray) -> np.ndarray:
    """The bits of ``a`` as unsigned integers (a complex value as two)."""
    a = np.ascontiguousarray(a)
    width = a.dtype.itemsize // 2 if a.dtype.kind == "c" else a.dtype.itemsize
    return a.view(f"u{width}")


def assert_bits_equal(actual, expected, *, nan_aware=False, what=""):
    """Same dtype (``actual`` in native byte order), shape and bits: floats and complex values
    compare as unsigned integers, so NaN payloads and -0.0 count. ``nan_aware``: any NaN matches
    any NaN."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == native_dtype(expected.dtype), \
        f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    expected = native_array(expected)
    if actual.dtype.kind not in "fciub":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    if nan_aware and actual.dtype.kind in "fc":
        en = np.isnan(expected)
        an = np.isnan(actual)
        bad = np.flatnonzero((en != an).ravel())
        assert bad.size == 0, f"{what}: NaN mismatch at flat index {bad[:5]}"
        a = np.where(en, 0, actual).astype(actual.dtype)
        e = np.where(en, 0, expected).astype(actual.dtype)
    else:
        a, e = actual, expected
    per_value = 2 if a.dtype.kind == "c" else 1  # a complex value is two words
    differs = (_uint_view(a) != _uint_view(e)).reshape(a.size, per_value)
    diff = np.flatnonzero(differs.any(axis=1))
    assert diff.size == 0, (
        f"{what}: {diff.size} values differ; first at flat {diff[0]}: "
        f"{a.ravel()[diff[0]]!r} != {e.ravel()[diff[0]]!r}")


def assert_close_f32(actual, expected, raw, bscale, bzero, what=""):
    """astropy scales in float32 (two roundings, bscale/bzero rounded to float32): allow its
    worst-case error, 2 eps32 × (|stored × BSCALE| + |BZERO|) + 1 ulp."""
    actual = np.asarray(actual, dtype=np.float32)
    expected = np.asarray(expected, dtype=np.float32)
    en = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), en), f"{what}: NaN positions differ"
    with np.errstate(all="ignore"):
        fin = np.isfinite(expected) & np.isfinite(actual)
        assert np.array_equal(actual[~fin & ~en], expected[~fin & ~en]), f"{what}: infinities differ"
        mag = np.abs(raw.astype(np.float64) * bscale) + abs(float(bzero))
        tol = 2 * np.finfo(np.float32).eps * mag + np.spacing(np.abs(expected).astype(np.float32))
        err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        ok = ~fin | (err <= tol)
    assert ok.all(), f"{what}: astropy differs beyond its float32 error bound"


def to_numpy(result) -> np.ndarray:
    """A torch tensor or NumPy array as a NumPy array (CPU)."""
    if isinstance(result, np.ndarray):
        return result
    return result.detach().cpu().numpy()


def expected_image(path, hdu=0, *, api="native", raw_scale=False, use_oracles=True):
    with np.errstate(all="ignore"):
        return _expected_image(path, hdu, api=api, raw_scale=raw_scale, use_oracles=use_oracles)


def _expected_image(path, hdu=0, *, api="native", raw_scale=False, use_oracles=True):
    """The expected full-image result of torchfits for image HDU ``hdu``.

    Returns ``(expected, mode, astropy_check)``: ``expected`` is built from fitsio's read
    (bit-exact reference for scaled values, computed in double and rounded once) or from the
    stored bytes where fitsio cannot serve; ``mode`` is "bits", "bits-nan" (any NaN matches any
    NaN) or "ulp" (compat uint64 → float64, precision loss accepted: 1 ulp of 2**63);
    ``astropy_check(actual)`` compares with astropy's read of the same file (exact, or within
    astropy's float32 error bound).
    """
    sc = scaling_of(path, hdu)
    bitpix, bscale, bzero, blank = sc["bitpix"], sc["bscale"], sc["bzero"], sc["blank"]
    dtype, kind = result_rule(bitpix, bscale, bzero, blank, api=api, raw_scale=raw_scale)
    raw = raw_stored(path, hdu)
    raw_n = raw.astype(native_dtype(raw.dtype))
    checks = []

    if kind == "raw":
        expected = raw_n.astype(dtype)
        if use_oracles:
            araw = astropy_data(path, hdu, raw=True)
            assert_bits_equal(araw.astype(native_dtype(araw.dtype)), expected, what="oracle self-check")
            if raw_scale:
                checks.append(("astropy raw", araw, "bits"))
            else:
                checks.append(("astropy", astropy_data(path, hdu), "bits"))
                fio = fitsio_data(path, hdu)
                assert fio is not None
                assert_bits_equal(fio.astype(native_dtype(fio.dtype)), expected, what="fitsio vs bytes")
        mode = "bits"
    elif kind in ("offset", "uint64-float"):
        if bitpix == 64:
            as_uint = raw_n.view(np.uint64) ^ np.uint64(1 << 63)
        else:
            as_uint = (raw_n.astype(np.int64) + OFFSET_BZERO[bitpix]).astype(OFFSET_DTYPE[bitpix])
        expected = as_uint.astype(dtype)
        if use_oracles:
            try:
                a = astropy_data(path, hdu)
            except ValueError:
                a = None  # astropy cannot put BLANK's NaN into the int8 of a signed-byte image
            for name, o in (("astropy", a), ("fitsio", fitsio_data(path, hdu))):
                if o is None:
                    continue
                if o.dtype.kind == "f":
                    # oracle did not recognise an imprecise BZERO: its rounded values must agree
                    o = np.rint(o.astype(np.float64)).astype(as_uint.dtype)
                checks.append((name, o, "uint-float" if kind == "uint64-float" else "bits"))
        mode = "ulp" if kind == "uint64-float" else "bits"
    else:  # scaled
        fio = fitsio_data(path, hdu) if use_oracles else None
        if fio is not None and fio.dtype.kind in "iu" and (
                float(bscale) != int(bscale) or float(bzero) != int(float(bzero)) or bitpix == 64):
            # CFITSIO's "equivalent type" of a scaled BITPIX=64 image is int64: fitsio truncates
            # the physical values.  Fall back to the defining double-precision computation.
            fio = None
        if fio is not None:
            expected = fio.astype(dtype)
        else:
            phys = raw_n.astype(np.float64) * float(bscale) + float(bzero)
            expected = phys.astype(dtype)
        if blank is not None and bitpix > 0:
            expected = np.where(raw_n == int(blank), np.nan, expected).astype(dtype)
        # the double-precision, round-once definition must agree with fitsio
        phys = (raw_n.astype(np.float64) * float(bscale) + float(bzero)).astype(dtype)
        if blank is not None and bitpix > 0:
            phys = np.where(raw_n == int(blank), np.nan, phys).astype(dtype)
        assert_bits_equal(phys, expected, nan_aware=True, what="double-precision oracle vs fitsio")
        if use_oracles:
            a = astropy_data(path, hdu)
            checks.append(("astropy", a, "f32tol" if dtype == np.float32 else "f64tol"))
        mode = "bits-nan"

    def astropy_check(actual):
        actual = np.asarray(actual)
        for name, o, how in checks:
            what = f"{Path(path).name}[{hdu}] vs {name}"
            if how == "bits":
                o = o.astype(native_dtype(o.dtype))
                if o.dtype != actual.dtype:
                    o = o.astype(actual.dtype)
                assert_bits_equal(actual, o, nan_aware=(mode == "bits-nan"), what=what)
            elif how == "uint-float":
                o = o.astype(np.uint64).astype(np.float64)
                np.testing.assert_allclose(actual, o, rtol=2.0**-52, atol=2.0**11, err_msg=what)
            elif how == "f32tol":
                assert_close_f32(actual, o, raw_n, bscale, bzero, what=what)
            else:
                o = o.astype(np.float64)
                assert np.array_equal(np.isnan(actual), np.isnan(o)), f"{what}: NaN positions"
                fin = ~np.isnan(o)
                with np.errstate(all="ignore"):
                    np.testing.assert_allclose(actual[fin], o[fin], rtol=2.0**-51, atol=0,
                                               err_msg=what)

    return expected, mode, astropy_check


def assert_matches(actual, expected, mode, what=""):
    """Compare ``actual`` with an :func:`expected_image` result under its ``mode``."""
    actual = to_numpy(actual)
    if mode == "ulp":
        # uint64 → float64 (API §3: "precision loss accepted"): BZERO + stored in double rounds
        # twice; allow 1 ulp of 2**63 absolute plus 1 ulp relative
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
        np.testing.assert_allclose(actual, expected, rtol=2.0**-52, atol=2.0**11, err_msg=what)
    else:
        assert_bits_equal(actual, expected, nan_aware=(mode == "bits-nan"), what=what)


def check_matches_oracles(path, hdu=0, *, result=None, api="native", raw_scale=False):
    """Assert that torchfits' full read of image HDU ``hdu`` matches the oracles.

    ``result`` defaults to ``torchfits.read_numpy(path, hdu, raw_scale=raw_scale)`` (native) or
    ``torchfits.read(path, hdu, raw_scale=raw_scale)`` (compat).  Returns the result as NumPy.
    """
    import torchfits

    if result is None:
        if api == "native":
            result = torchfits.read_numpy(path, hdu, raw_scale=raw_scale)
        else:
            result = torchfits.read(path, hdu, raw_scale=raw_scale)
    arr = to_numpy(result)
    expected, mode, astropy_check = expected_image(path, hdu, api=api, raw_scale=raw_scale)
    assert_matches(arr, expected, mode, what=f"{Path(path).name}[{hdu}] vs fitsio")
    astropy_check(arr)
    if raw_scale:
        assert arr.dtype.byteorder in ("=", "|"), "raw_scale must return native byte order"
    return arr


def torch_dtype_of(np_dtype):
    torch = pytest.importorskip("torch")
    return {
        np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8,
        np.dtype(np.int16): torch.int16, np.dtype(np.uint16): torch.uint16,
        np.dtype(np.int32): torch.int32, np.dtype(np.uint32): torch.uint32,
        np.dtype(np.int64): torch.int64, np.dtype(np.uint64): torch.uint64,
        np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
    }[np.dtype(np_dtype)]


def assert_fits_error(exc: BaseException, path, *builtins: type) -> None:
    """``exc`` is a torchfits FitsError (and each of ``builtins``) whose message names the file."""
    from torchfits.errors import FitsError

    assert isinstance(exc, FitsError), f"{type(exc).__mro__} is not a FitsError: {exc}"
    for b in builtins:
        assert isinstance(exc, b), f"{type(exc).__name__} is not a {b.__name__}"
    assert Path(path).name in str(exc), f"message does not name the file: {exc}"

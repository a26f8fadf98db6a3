"""The kernel's walk over all headers (``HduRows.walk``) against the careful per-HDU Python path
and astropy: same entries, same errors, same tail errors, on ordinary, unusual and mutated files."""
from __future__ import annotations

import random

import numpy as np
import pytest

import torchfits
from fuzz.harness import build_corpus
from fuzz.mutators import mutate
from torchfits.errors import FitsError
from torchfits.fits import hdu_index
from torchfits.fits.hdu_index import HduIndex, get_index

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")
HealthCheck, given, settings = hypothesis.HealthCheck, hypothesis.given, hypothesis.settings

BLOCK = 2880
CARD = 80
FIELDS = [f for f in hdu_index.HduEntry.field_names() if f != "structural"]


def _describe(data: bytes, walk: bool) -> tuple:
    """Everything indexing ``data`` gives: the entries and the tail, or the error."""
    saved = HduIndex.kernel_walk
    HduIndex.kernel_walk = walk
    try:
        idx = get_index(bytes(data))
    except FitsError as exc:
        return ("error", type(exc).__name__, str(exc))
    finally:
        HduIndex.kernel_walk = saved
    entries = [tuple(getattr(e, f) for f in FIELDS) for e in idx.entries]
    return (entries, idx.tail_error, idx.tail_exception.__name__)


def assert_same_as_careful(data: bytes) -> tuple:
    fast, careful = _describe(data, True), _describe(data, False)
    assert fast == careful
    return fast


def _set_card(raw: bytearray, hdu: int, key: str, card: str, nth: int = 0) -> None:
    """Overwrite the ``nth`` card whose keyword is ``key`` in header ``hdu`` with ``card``."""
    starts = [o["header_start"] for o in _offsets(raw)]
    pos, seen = starts[hdu], 0
    while True:
        if raw[pos:pos + 8].decode().rstrip() == key:
            if seen == nth:
                raw[pos:pos + CARD] = card.ljust(CARD).encode()
                return
            seen += 1
        assert raw[pos:pos + 8] != b"END     ", f"no card {key} in HDU {hdu}"
        pos += CARD


def _offsets(raw: bytes) -> list[dict]:
    import os
    import tempfile

    from _oracles import hdu_offsets

    fd, path = tempfile.mkstemp(suffix=".fits")
    try:
        os.write(fd, bytes(raw))
        os.close(fd)
        return hdu_offsets(path)
    finally:
        os.unlink(path)


def _mixed(fits, n: int = 100) -> bytes:
    """``n`` HDUs of every kind: images of each BITPIX, zero-size data, tables with and without a
    heap, ASCII tables, a tile-compressed image, EXTNAMEs spread over CONTINUE cards."""
    import io

    rng = np.random.default_rng(3)
    hdus = [fits.PrimaryHDU(np.arange(6, dtype=np.int16).reshape(2, 3))]
    dtypes = [np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64]
    for i in range(1, n):
        k = i % 9
        if k < 6:
            hdu = fits.ImageHDU(rng.integers(0, 100, (i % 4 + 1, 5)).astype(dtypes[k]), name=f"IM{i}")
        elif k == 6:
            vla = np.array([np.arange(j % 5, dtype=np.float32) for j in range(7)], dtype=object)
            hdu = fits.BinTableHDU.from_columns(
                [fits.Column(name="A", format="J", array=np.arange(7)),
                 fits.Column(name="V", format="PE()", array=vla)], name=f"TB{i}")
        elif k == 7:
            hdu = fits.TableHDU.from_columns(
                [fits.Column(name="X", format="I6", array=np.arange(4))], name=f"AT{i}")
        else:
            hdu = fits.ImageHDU(None, name=f"EMPTY{i}")  # NAXIS = 0
        hdu.header["EXTVER"] = i % 3 + 1
        hdus.append(hdu)
    hdus.append(fits.ImageHDU(np.zeros((0, 4), np.float32), name="ZERO_ROWS"))
    hdus.append(fits.CompImageHDU(rng.integers(0, 100, (16, 16)).astype(np.int16), name="COMP"))
    long_name = "L" * 90  # longer than one card: CONTINUE
    hdus.append(fits.ImageHDU(np.ones((2, 2), np.float32), name=long_name))
    buf = io.BytesIO()
    fits.HDUList(hdus).writeto(buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    fits = pytest.importorskip("astropy.io.fits")
    data = _mixed(fits)
    path = tmp_path_factory.mktemp("walk") / "mixed.fits"
    path.write_bytes(data)
    return path


def test_mixed_file_matches_astropy_and_careful_path(mixed, fits):
    data = mixed.read_bytes()
    entries, tail, _ = assert_same_as_careful(data)
    assert tail is None
    torchfits.clear_file_cache()
    idx = get_index(str(mixed))
    with fits.open(mixed) as hdul:
        assert len(idx) == len(hdul)
        for e, h in zip(idx.entries, hdul):
            info = h.fileinfo()
            assert e.header_offset == info["hdrLoc"]
            assert e.data_offset == info["datLoc"]
            hdr = h._header if hasattr(h, "_header") else h.header
            if e.kind == "compressed_image":
                continue  # astropy shows the image header; the stored table is checked below
            assert e.bitpix == hdr["BITPIX"]
            assert e.naxes == tuple(hdr.get(f"NAXIS{k}") for k in range(1, hdr["NAXIS"] + 1))
            assert e.pcount == hdr.get("PCOUNT", 0) and e.gcount == hdr.get("GCOUNT", 1)
            assert e.extver == hdr.get("EXTVER")
            if "CONTINUE" not in hdr.tostring():
                assert e.extname == hdr.get("EXTNAME")
                assert e.ncards == len(hdr)
            assert e.data_size == info["datSpan"] - (-e.data_size % BLOCK)
    # Every ordinary HDU went through the kernel; the tile-compressed one through Python.
    assert len(idx.entries._rows) == len(idx) - 1
    assert idx.resolve("COMP").kind == "compressed_image"
    assert idx.resolve("zero_rows").naxes == (4, 0)
    assert idx.resolve("tb6").heap_size > 0 and idx.resolve("TB6").tfields == 2


def test_entries_built_on_demand(mixed):
    torchfits.clear_file_cache()
    idx = get_index(str(mixed))
    items = idx.entries._items
    assert sum(type(x) is int for x in items) == len(items) - 1
    e = idx.entries[-1]
    assert idx.entries[len(idx) - 1] is e and idx.entries[-1] is e
    assert [x.index for x in idx.entries[2:5]] == [2, 3, 4]
    assert [x.index for x in idx.entries] == list(range(len(idx)))


def test_header_of_hdu_99_cold_matches_astropy(mixed, fits):
    with fits.open(mixed) as hdul:
        wants = {k: hdul[k].header for k in (99, len(hdul) - 1)}
    for k, want in wants.items():
        for _ in range(2):
            torchfits.clear_file_cache()
            got = torchfits.read_header(str(mixed), k)
            assert list(got.keys()) == list(want.keys())
            for key in want.keys():
                if key not in ("COMMENT", "HISTORY", ""):
                    assert got[key] == want[key], (k, key)
    assert got["EXTNAME"] == "L" * 90


def _simple(fits, *hdus) -> bytearray:
    import io

    buf = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU(np.zeros((2, 2), np.int16)), *hdus]).writeto(buf)
    return bytearray(buf.getvalue())


def _with_spare_cards(fits, n: int = 6) -> bytearray:
    """Primary + 3 image extensions, each header holding ``n`` spare COMMENT cards to overwrite."""
    hdus = []
    for i in range(3):
        h = fits.ImageHDU(np.full((3, 4), i, np.float32), name=f"X{i}")
        for k in range(n):
            h.header.add_comment(f"spare {k}")
        hdus.append(h)
    return _simple(fits, *hdus)


EDITS = [
    # (what, HDU, keyword to overwrite, new card, nth)
    ("duplicate BITPIX (first wins)", 2, "COMMENT", "BITPIX  =                  -64", 0),
    ("duplicate NAXIS1", 2, "COMMENT", "NAXIS1  =                   99", 0),
    ("duplicate NAXIS", 1, "COMMENT", "NAXIS   =                    3", 0),
    ("duplicate EXTNAME", 3, "COMMENT", "EXTNAME = 'OTHER'", 0),
    ("duplicate EXTVER", 3, "COMMENT", "EXTVER  =                    7", 0),
    ("EXTVER float", 1, "COMMENT", "EXTVER  =                  2.0", 0),
    ("EXTVER string", 1, "COMMENT", "EXTVER  = 'two'", 0),
    ("EXTNAME number", 1, "EXTNAME", "EXTNAME =                   12", 0),
    ("EXTNAME unquoted", 1, "EXTNAME", "EXTNAME = SCI", 0),
    ("EXTNAME blank padded", 1, "EXTNAME", "EXTNAME = '  SCI   '", 0),
    ("EXTNAME CONTINUE", 1, "EXTNAME", "EXTNAME = 'ABC&'", 0),
    ("CONTINUE card", 1, "COMMENT", "CONTINUE  'DEF'", 0),
    ("xtension lower case", 2, "XTENSION", "XTENSION= 'image   '", 0),
    ("xtension unquoted", 2, "XTENSION", "XTENSION= IMAGE", 0),
    ("xtension escaped quote", 2, "XTENSION", "XTENSION= 'IM''AGE'", 0),
    ("xtension unknown", 2, "XTENSION", "XTENSION= 'FOO     '", 0),
    ("xtension IUEIMAGE", 2, "XTENSION", "XTENSION= 'IUEIMAGE'", 0),
    ("BITPIX 12", 2, "BITPIX", "BITPIX  =                   12", 0),
    ("BITPIX float", 2, "BITPIX", "BITPIX  =                -32.0", 0),
    ("BITPIX bool", 2, "BITPIX", "BITPIX  =                    T", 0),
    ("NAXIS 1000", 2, "NAXIS", "NAXIS   =                 1000", 0),
    ("NAXIS negative", 2, "NAXIS", "NAXIS   =                   -1", 0),
    ("NAXIS2 negative", 2, "NAXIS2", "NAXIS2  =                   -3", 0),
    ("NAXIS2 huge", 2, "NAXIS2", "NAXIS2  =  9000000000000000000", 0),
    ("NAXIS2 19 digits", 2, "NAXIS2", "NAXIS2  = 0000000000000000003", 0),
    ("NAXIS2 plus sign", 2, "NAXIS2", "NAXIS2  =                   +3", 0),
    ("NAXIS2 missing", 2, "NAXIS2", "COMMENT gone", 0),
    ("NAXIS2 with comment", 2, "NAXIS2", "NAXIS2  =                    3 / rows", 0),
    ("NAXIS2 zero", 2, "NAXIS2", "NAXIS2  =                    0", 0),
    ("NAXIS01 not an axis", 2, "COMMENT", "NAXIS01 =                    5", 0),
    ("NAXIS3 beyond NAXIS", 2, "COMMENT", "NAXIS3  =                    5", 0),
    ("PCOUNT negative", 2, "PCOUNT", "PCOUNT  =                   -1", 0),
    ("GCOUNT 2", 2, "GCOUNT", "GCOUNT  =                    2", 0),
    ("GCOUNT 0", 2, "GCOUNT", "GCOUNT  =                    0", 0),
    ("GROUPS in an image", 0, "EXTEND", "GROUPS  =                    T", 0),
    ("ZIMAGE in an image", 2, "COMMENT", "ZIMAGE  =                    T", 0),
    ("SIMPLE missing", 0, "SIMPLE", "SIMPLEX =                    T", 0),
    ("END lost in HDU 3", 3, "END", "COMMENT no end", 0),
    ("END lost in primary", 0, "END", "COMMENT no end", 0),
    ("no value indicator", 2, "BITPIX", "BITPIX                      -32", 0),
]


@pytest.mark.parametrize("what,hdu,key,card,nth", EDITS, ids=[e[0] for e in EDITS])
def test_edited_headers_match_careful_path(fits, what, hdu, key, card, nth):
    raw = _with_spare_cards(fits)
    _set_card(raw, hdu, key, card, nth)
    assert_same_as_careful(raw)


def test_duplicate_cards_first_one_wins(fits):
    raw = _with_spare_cards(fits)
    _set_card(raw, 3, "COMMENT", "EXTNAME = 'OTHER'")
    _set_card(raw, 2, "COMMENT", "NAXIS1  =                   99")
    entries, _, _ = assert_same_as_careful(raw)
    idx = get_index(bytes(raw))
    assert idx.entries[3].extname == "X2" and idx.entries[2].naxes == (4, 3)


def test_zero_size_and_table_hdus(fits):
    cols = [fits.Column(name="A", format="E", array=np.zeros(0, np.float32))]
    raw = _simple(fits, fits.ImageHDU(None, name="NOTHING"), fits.BinTableHDU.from_columns(cols, name="T0"),
                  fits.ImageHDU(np.zeros((0, 3), np.int16), name="Z"))
    entries, tail, _ = assert_same_as_careful(raw)
    assert tail is None and [e[FIELDS.index("data_size")] for e in entries] == [8, 0, 0, 0]
    _set_card(raw, 2, "TFIELDS", "TFIELDS =                 1000")
    assert assert_same_as_careful(raw)[1] is not None


def test_theap_and_heap(fits):
    vla = np.array([np.arange(k, dtype=np.int32) for k in range(5)], dtype=object)
    raw = _simple(fits, fits.BinTableHDU.from_columns([fits.Column(name="V", format="PJ()", array=vla)]))
    entries, _, _ = assert_same_as_careful(raw)
    row_bytes = 8 * 5
    e = get_index(bytes(raw)).entries[1]
    assert e.heap_offset == e.data_offset + row_bytes and e.heap_size == e.pcount
    for card in ("THEAP   =                    8", "THEAP   =                   80",
                 "THEAP   = 'x'", "THEAP   =                   -8", "THEAP   =                   40"):
        edited = bytearray(raw)
        _set_card(edited, 1, "TTYPE1", card)
        assert_same_as_careful(edited)


def test_trailing_bytes_and_truncation(fits):
    raw = _with_spare_cards(fits)
    for tail in (b"\0" * BLOCK, b"garbage!" * 10, b"XTENSION= 'IMAGE   '" + b"\0" * 60,
                 b"XTENSION= 'IMAGE   '" + b" " * 60, b"XTENSION"):
        assert_same_as_careful(bytes(raw) + tail)
    for cut in (BLOCK - 1, BLOCK, 2 * BLOCK + 7, len(raw) - BLOCK, len(raw) - 1, len(raw) - 3000):
        assert_same_as_careful(bytes(raw[:cut]))


def test_random_groups_primary(fits, tmp_path):
    data = fits.GroupData(np.arange(12, dtype=np.float32).reshape(3, 1, 4), parnames=["a"],
                          pardata=[np.arange(3, dtype=np.float32)], bitpix=-32)
    path = tmp_path / "groups.fits"
    fits.HDUList([fits.GroupsHDU(data), fits.ImageHDU(np.ones(3, np.int16))]).writeto(path)
    entries, tail, _ = assert_same_as_careful(path.read_bytes())
    assert len(entries) == 2 and tail is None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    pytest.importorskip("astropy.io.fits")
    from pathlib import Path

    return [Path(p).read_bytes() for p in build_corpus(str(tmp_path_factory.mktemp("walk_corpus")))]


def test_corpus_matches_careful_path(corpus):
    for data in corpus:
        assert_same_as_careful(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_mutated_files_match_careful_path(corpus, which, seed, rounds):
    data, _ = mutate(corpus[which % len(corpus)], random.Random(seed), rounds)
    assert_same_as_careful(data)

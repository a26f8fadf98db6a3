"""Headers (read_header, Header, Card, read_keys) and the §5 metadata helpers, against astropy."""
from __future__ import annotations

import re
import string
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import torchfits
from _oracles import (
    assert_fits_error,
    astropy_header,
    header_bytes,
    image_header_cards,
    pad_block,
    write_image,
    write_raw,
)
from torchfits.errors import FitsError

# Hand-made cards covering the value grammar; the oracle is astropy's parse of the same bytes.
TRICKY_CARDS = [
    "STRKEY  = 'O''Hara  '           / with escaped quote",
    "EMPTYSTR= ''",
    "BLANKSTR= '    '",
    "LEADSP  = '  lead  '",
    "QUOTES  = '''quoted'''",
    "BOOLT   =                    T",
    "BOOLF   =                    F / false",
    "INTK    =                  -42",
    "ZERO    =                  007",
    "INTPLUS =                   +7",
    "FLT     =               1.5E-3",
    "FLTD    =              2.5D+02",
    "FLTNOEXP=                   3.",
    "FLT2    =                   .5",
    "NEGZERO =                 -0.0",
    "BIGFLT  =   1.7976931348623E+308",
    "CPLXI   =               (1, 2)",
    "CPLXF   =        (1.5, -2.5E1)",
    "UNDEF   =",
    "UNDEF2  =                      / comment only",
    "COMMENT this is a comment",
    "HISTORY step 1",
    "HISTORY   step 2 indented",
    "",
    "        text under a blank keyword",
    "HIERARCH ESO DET CHIP ID = 'CCD-44'  / chip",
    "HIERARCH ESO TEL ALT = 45.5",
    "LONGSTRN= 'OGIP 1.0'",
    "LONGSTR = 'This is a long &'",
    "CONTINUE  'string value that &'",
    "CONTINUE  'continues here' / long comment",
    "AMPER   = 'ends with &'",
    "LQ      = 'it''s a &'",
    "CONTINUE  'long ''quoted'' &'",
    "CONTINUE  'value'",
    "SLASH   = 'a/b'                / real comment",
    "FREE    =          42      / free",
    "DUP     =                    1 / first",
    "DUP     =                    2 / second",
    "COMMENT second comment",
]


def _norm(v):
    """astropy's Undefined (a value-less card) is None in torchfits."""
    from astropy.io.fits.card import Undefined

    return None if isinstance(v, Undefined) else v


def astropy_cards(path, hdu=0):
    return [(c.keyword, _norm(c.value), c.comment) for c in astropy_header(path, hdu).cards]


def our_cards(h):
    return [(c.key, c.value, c.comment) for c in h.cards]


def assert_same_cards(ours, theirs):
    assert len(ours) == len(theirs), (ours, theirs)
    for o, t in zip(ours, theirs):
        assert o[0] == t[0], (o, t)
        assert type(o[1]) is type(t[1]) or (o[1] is None and t[1] is None), (o, t)
        if isinstance(t[1], float) and np.isnan(t[1]):
            assert np.isnan(o[1])
        else:
            assert o[1] == t[1], (o, t)
        assert o[2] == t[2], (o, t)


@pytest.fixture
def tricky_file(tmp_path):
    cards = image_header_cards(16, (2, 3), extra=TRICKY_CARDS)
    return write_raw(tmp_path / "tricky.fits", header_bytes(cards),
                     pad_block(np.arange(6, dtype=">i2").tobytes()))


def test_read_header_matches_astropy_cards(tricky_file, fits):
    h = torchfits.read_header(tricky_file)
    assert isinstance(h, torchfits.Header)
    assert isinstance(h, dict)
    assert_same_cards(our_cards(h), astropy_cards(tricky_file))


def test_read_header_typed_values(tricky_file, fits):
    h = torchfits.read_header(tricky_file)
    assert h["STRKEY"] == "O'Hara"
    assert h["EMPTYSTR"] == "" and h["BLANKSTR"] == ""
    assert h["LEADSP"] == "  lead"
    assert h["QUOTES"] == "'quoted'"
    assert h["BOOLT"] is True and h["BOOLF"] is False
    assert type(h["INTK"]) is int and h["INTK"] == -42
    assert h["ZERO"] == 7 and h["INTPLUS"] == 7
    assert type(h["FLT"]) is float and h["FLT"] == 1.5e-3
    assert h["FLTD"] == 250.0 and type(h["FLTD"]) is float
    assert h["FLTNOEXP"] == 3.0 and type(h["FLTNOEXP"]) is float
    assert h["FLT2"] == 0.5
    assert str(h["NEGZERO"]) == "-0.0"
    assert h["CPLXI"] == complex(1, 2) and type(h["CPLXI"]) is complex
    assert h["CPLXF"] == complex(1.5, -25.0)
    assert h["UNDEF"] is None and h["UNDEF2"] is None
    assert h["ESO DET CHIP ID"] == "CCD-44"
    assert h["ESO TEL ALT"] == 45.5
    assert h["LONGSTR"] == "This is a long string value that continues here"
    assert h["AMPER"] == "ends with &"
    assert h["LQ"] == "it's a long 'quoted' value"
    assert h["SLASH"] == "a/b"
    assert h["FREE"] == 42
    # mapping view: value keywords → first occurrence, HISTORY/COMMENT → every line (astropy)
    assert h["DUP"] == 1
    assert h["COMMENT"] == ["this is a comment", "second comment"]
    assert h["HISTORY"] == ["step 1", "  step 2 indented"]
    assert str(h["HISTORY"]) == "step 1\n  step 2 indented"
    assert list(h["HISTORY"]) == list(fits.getheader(tricky_file)["HISTORY"])
    assert h.comments("DUP") == ["first", "second"]
    assert h.comments("STRKEY") == ["with escaped quote"]
    assert h.get_history() == ["step 1", "  step 2 indented"]
    assert h.get_comment() == ["this is a comment", "second comment"]
    assert h.card("DUP") == ("DUP", 1, "first")


def test_escaped_quote_before_slash(tmp_path, fitsio):
    """``'x''/y'`` is the string x'/y (the FITS rule, and CFITSIO's reading; astropy gets it wrong)."""
    cards = image_header_cards(8, (), extra=["SLASHQ  = 'x''/y'              / c",
                                             "SLASHQ2 = '''/'"])
    path = write_raw(tmp_path / "sq.fits", header_bytes(cards))
    h = torchfits.read_header(path)
    assert h["SLASHQ"] == "x'/y" and h.comments("SLASHQ") == ["c"]
    assert h["SLASHQ2"] == "'/"
    f = fitsio.read_header(str(path))
    assert (f["SLASHQ"], f["SLASHQ2"]) == (h["SLASHQ"], h["SLASHQ2"])


def test_big_integer_value_is_exact(tmp_path, fits):
    cards = image_header_cards(8, (), extra=[
        "BIGINT  = 123456789012345678901234567890",
        "U64     =  9223372036854775808",
        "I64MIN  = -9223372036854775808",
    ])
    path = write_raw(tmp_path / "big.fits", header_bytes(cards))
    h = torchfits.read_header(path)
    assert h["BIGINT"] == 123456789012345678901234567890 and type(h["BIGINT"]) is int
    assert h["U64"] == 2**63 and type(h["U64"]) is int
    assert h["I64MIN"] == -(2**63)
    assert_same_cards(our_cards(h), astropy_cards(path))


def test_case_insensitive_access(tricky_file):
    h = torchfits.read_header(tricky_file)
    assert h["naxis"] == 2 == h["NAXIS"]
    assert h["Naxis1"] == 3
    assert "naxis2" in h and "NAXIS2" in h
    assert h.get("bitpix") == 16
    assert "nosuchkey" not in h
    with pytest.raises(KeyError):
        h["nosuchkey"]
    assert h.get("nosuchkey", "dflt") == "dflt"


def standard_string_cards(path) -> bool:
    """False when a string card of the file is malformed by the FITS rules: astropy splits an
    escaped quote ('') across a CONTINUE boundary, which astropy reads back but CFITSIO (and
    torchfits) read by the standard; such files are not valid oracles."""
    raw = Path(path).read_bytes()[:2880 * 8].decode("ascii", "replace")
    for i in range(0, len(raw), 80):
        c = raw[i:i + 80]
        if c[:8] == "END     ":
            break
        if c[8:10] == "= ":
            body = c[10:]
        elif c[:8] == "CONTINUE":
            body = c[8:]
        else:
            continue
        stripped = body.lstrip(" ")
        if not stripped.startswith("'"):
            continue
        j = 1
        while j < len(stripped):
            if stripped[j] == "'":
                if j + 1 < len(stripped) and stripped[j + 1] == "'":
                    j += 2
                    continue
                break
            j += 1
        rest = stripped[j + 1:].strip(" ")
        if rest and not rest.startswith("/"):
            return False
        if "'" in rest:
            # astropy's card regex lets a quote in the comment extend the string value
            # (`'' / '` reads as "' /"); the standard ends the string at the first lone quote.
            return False
    return True


def _write_astropy_header(path, fits, items, history=(), comments=()):
    hdu = fits.PrimaryHDU(np.zeros((2, 2), np.int16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # HIERARCH creation and long values warn
        for k, v in items:
            hdu.header[k] = v
        for line in history:
            hdu.header.add_history(line)
        for line in comments:
            hdu.header.add_comment(line)
        hdu.writeto(path, overwrite=True)
    return path


def test_astropy_written_long_strings_and_hierarch(tmp_path, fits):
    long_value = "".join(string.ascii_letters[i % 52] for i in range(230)) + " it's"
    path = _write_astropy_header(tmp_path / "long.fits", fits, [
        ("LONGVAL", (long_value, "a comment for a long value")),
        ("LONGQ", "'" * 25),
        ("HIERARCH ESO DET CHIP ID", ("CCD-44", "chip id")),
        ("HIERARCH ESO INS FILT1 NAME", "r_SDSS"),
        ("HIERARCH ESO TEL AIRM START", 1.234),
        ("SHORT", "abc   "),
    ], history=["first history", "second " + "h" * 100], comments=["c1", ""])
    h = torchfits.read_header(path)
    assert standard_string_cards(path)
    assert h["LONGVAL"] == long_value
    assert h["LONGQ"] == "'" * 25
    assert h["ESO DET CHIP ID"] == "CCD-44"
    assert h["ESO INS FILT1 NAME"] == "r_SDSS"
    assert h["ESO TEL AIRM START"] == 1.234
    assert h["SHORT"] == "abc"
    assert_same_cards(our_cards(h), astropy_cards(path))


def test_fitsio_written_header(tmp_path, fitsio, fits):
    path = str(tmp_path / "fio.fits")
    fitsio.write(path, np.zeros((2, 3), np.float32), header=[
        {"name": "STR", "value": "it's", "comment": "quote"},
        {"name": "LONGSTR", "value": "x" * 150},
        {"name": "FLT", "value": 1.0e-30},
        {"name": "INT", "value": -7},
        {"name": "BOOL", "value": True},
        {"name": "HISTORY", "value": "fitsio history"},
    ], clobber=True)
    h = torchfits.read_header(path)
    assert h["STR"] == "it's" and h["INT"] == -7 and h["BOOL"] is True
    assert h["LONGSTR"] == "x" * 150
    assert h["FLT"] == 1.0e-30
    assert_same_cards(our_cards(h), astropy_cards(path))


def test_extension_header_by_name(mixed_fits, fits):
    for sel, idx in (("SCI", 3), ("sci", 3), ("tab", 1), (3, 3), (2, 2)):
        h = torchfits.read_header(mixed_fits, sel)
        assert_same_cards(our_cards(h), astropy_cards(mixed_fits, idx))


def test_tostring_reparses_with_astropy(tricky_file, fits):
    h = torchfits.read_header(tricky_file)
    s = h.tostring()
    assert isinstance(s, str)
    assert len(s) % 80 == 0
    lines = [s[i:i + 80] for i in range(0, len(s), 80)]
    assert all(len(line) == 80 for line in lines)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = fits.Header.fromstring(s)
    theirs = [(c.keyword, _norm(c.value)) for c in back.cards]
    assert theirs == [(k, v) for k, v, _ in astropy_cards(tricky_file)]
    assert [c.comment for c in back.cards] == [c for _, _, c in astropy_cards(tricky_file)]


def test_tostring_long_values(tmp_path, fits):
    path = _write_astropy_header(tmp_path / "long.fits", fits, [
        ("LONGVAL", "y" * 200), ("HIERARCH ESO A B", 3)])
    h = torchfits.read_header(path)
    back = fits.Header.fromstring(h.tostring())
    assert back["LONGVAL"] == "y" * 200
    assert back["ESO A B"] == 3


def test_to_and_from_astropy(tricky_file, fits):
    h = torchfits.read_header(tricky_file)
    ah = h.to_astropy()
    assert isinstance(ah, fits.Header)
    got = [(c.keyword, _norm(c.value), c.comment) for c in ah.cards]
    assert got == astropy_cards(tricky_file)
    back = torchfits.Header.from_astropy(astropy_header(tricky_file))
    assert isinstance(back, torchfits.Header)
    assert_same_cards(our_cards(back), our_cards(h))
    assert back == h


# ------------------------------------------------------------------------------------------
# Header construction and mapping semantics (API §4.7)
# ------------------------------------------------------------------------------------------

Card = torchfits.Card
Header = torchfits.Header


def test_card_namedtuple():
    c = Card("K", 1, "c")
    assert c == ("K", 1, "c")
    assert tuple(c) == ("K", 1, "c")
    assert c.key == "K" == c.keyword
    assert c.value == 1 and c.comment == "c"
    assert repr(c) == "Card(key='K', value=1, comment='c')"
    d = Card("X")
    assert d.value is None and d.comment == ""
    k, v, cm = Card("A", "b", "z")
    assert (k, v, cm) == ("A", "b", "z")


def test_header_construction():
    assert len(Header()) == 0 and Header().cards == ()
    assert len(Header(None)) == 0
    h = Header({"A": 1, "B": ("x", "comment b")})
    assert h["A"] == 1 and h["B"] == "x"
    assert h.comments("B") == ["comment b"]
    h2 = Header([Card("A", 1, "ca"), ("B", 2), ("C", 3, "cc"), ("HISTORY", "h1"), ("HISTORY", "h2")])
    assert [c.key for c in h2.cards] == ["A", "B", "C", "HISTORY", "HISTORY"]
    assert h2.cards[0] == ("A", 1, "ca") and h2.cards[1] == ("B", 2, "")
    assert all(isinstance(c, Card) for c in h2.cards)
    assert isinstance(h2.cards, tuple)
    h3 = Header(h2)
    assert h3.cards == h2.cards
    assert h3.get_history() == ["h1", "h2"]
    h3["A"] = 99
    assert h2["A"] == 1  # a copy, not a view
    h4 = Header((("A", 1),))
    assert h4["A"] == 1


@pytest.mark.parametrize("bad", ["SIMPLE = T", (x for x in [("A", 1)]), 5, 3.5],
                         ids=["str", "generator", "int", "float"])
def test_header_construction_rejects(bad):
    with pytest.raises(TypeError, match="cannot build a Header from"):
        Header(bad)


def test_header_setitem_semantics():
    h = Header([("A", 1), ("B", 2), ("A", 3)])
    assert h["A"] == 1
    h["A"] = 10
    assert [tuple(c) for c in h.cards] == [("A", 10, ""), ("B", 2, ""), ("A", 3, "")]
    h["B"] = (20, "new comment")
    assert h.cards[1] == ("B", 20, "new comment")
    h["NEW"] = "v"
    assert h.cards[-1] == ("NEW", "v", "")
    h["HISTORY"] = "one"
    h["HISTORY"] = "two"
    assert h.get_history() == ["one", "two"] and h["HISTORY"] == ["one", "two"]
    h["COMMENT"] = ["c1", "c2", "c3"]
    assert h.get_comment() == ["c1", "c2", "c3"]
    assert h["COMMENT"] == ["c1", "c2", "c3"]
    copy = Header(h)
    copy["COMMENT"] = "c4"  # a copy has its own lines
    assert h["COMMENT"] == ["c1", "c2", "c3"] and copy["COMMENT"][-1] == "c4"
    lines = h["COMMENT"]
    lines.append("not in the header")
    assert h.get_comment() == ["c1", "c2", "c3"]
    h["I"] = np.int64(3)
    h["F"] = np.float32(1.5)
    h["BL"] = np.bool_(True)
    assert type(h["I"]) is int and h["I"] == 3
    assert type(h["F"]) is float and h["F"] == 1.5
    assert h["BL"] is True
    assert type(h.card("I").value) is int


def test_header_delete_and_pop():
    h = Header([("A", 1), ("B", 2), ("A", 3), ("HISTORY", "x"), ("HISTORY", "y")])
    del h["A"]
    assert "A" not in h
    assert [c.key for c in h.cards] == ["B", "HISTORY", "HISTORY"]
    assert h.pop("HISTORY") == ["x", "y"]
    assert h.get_history() == [] and [c.key for c in h.cards] == ["B"]
    assert h.pop("MISSING", "d") == "d"
    with pytest.raises(KeyError):
        h.pop("MISSING")
    with pytest.raises(KeyError):
        del h["MISSING"]
    h["C"] = 3
    k, v = h.popitem()
    assert (k, v) in (("B", 2), ("C", 3))
    assert k not in h and all(c.key != k for c in h.cards)


def test_header_setdefault_update_clear():
    h = Header([("A", 1)])
    assert h.setdefault("A", 5) == 1
    assert h.setdefault("B", 7) == 7
    assert h.cards[-1] == ("B", 7, "")
    h.update({"A": 2, "C": 3})
    assert h["A"] == 2 and h["C"] == 3
    other = Header([("HISTORY", "h1"), ("HISTORY", "h2"), ("D", 4, "dc")])
    h.update(other)
    assert h.get_history() == ["h1", "h2"]
    assert h.card("D") == ("D", 4, "dc")
    h.update(E=5)
    assert h["E"] == 5
    h.clear()
    assert len(h) == 0 and h.cards == ()


def test_header_card_api():
    h = Header()
    h.append(Card("A", 1, "a"))
    h.append(Card("B", 2))
    h.insert(0, Card("Z", 0))
    assert [c.key for c in h.cards] == ["Z", "A", "B"]
    h.insert(1, Card("A", 5, "second a"))
    assert h["A"] == 5  # the first card of A is now the inserted one
    assert h.comments("A") == ["second a", "a"]
    h.remove("A")
    assert [c.key for c in h.cards] == ["Z", "A", "B"] and h["A"] == 1
    h.append(Card("A", 9))
    h.remove("A", remove_all=True)
    assert "A" not in h and [c.key for c in h.cards] == ["Z", "B"]
    with pytest.raises(KeyError):
        h.remove("A")
    h.remove("A", ignore_missing=True)
    assert h.card("B") == ("B", 2, "")
    with pytest.raises(KeyError):
        h.card("A")
    h.add_history("hist 1")
    h.add_comment("com 1")
    h.add_history("hist 2")
    assert h.get_history() == ["hist 1", "hist 2"]
    assert h.get_comment() == ["com 1"]
    assert h["HISTORY"] == ["hist 1", "hist 2"]
    assert [c.key for c in h.cards] == ["Z", "B", "HISTORY", "COMMENT", "HISTORY"]


# ------------------------------------------------------------------------------------------
# read_keys
# ------------------------------------------------------------------------------------------

def test_read_keys(tricky_file):
    got = torchfits.read_keys(tricky_file, ["NAXIS2", "STRKEY", "BOOLT", "FLT", "NAXIS1"])
    assert list(got) == ["NAXIS2", "STRKEY", "BOOLT", "FLT", "NAXIS1"]
    assert got == {"NAXIS2": 2, "STRKEY": "O'Hara", "BOOLT": True, "FLT": 1.5e-3, "NAXIS1": 3}
    assert torchfits.read_keys(tricky_file, ("DUP",)) == {"DUP": 1}
    # QUIRK: long strings are not re-joined: the first segment, trailing '&' included
    assert torchfits.read_keys(tricky_file, ["LONGSTR"]) == {"LONGSTR": "This is a long &"}
    # a bare str is one key, not a sequence of characters
    assert torchfits.read_keys(tricky_file, "NAXIS") == {"NAXIS": 2}


def test_read_keys_missing(tricky_file):
    with pytest.raises(RuntimeError, match="read_keys: keyword not found: NOPE"):
        torchfits.read_keys(tricky_file, ["NAXIS", "NOPE"])


def test_read_keys_extension(mixed_fits):
    assert torchfits.read_keys(mixed_fits, ["EXTNAME", "NAXIS2"], hdu="TAB") == \
        {"EXTNAME": "TAB", "NAXIS2": 5}
    assert torchfits.read_keys(mixed_fits, ["EXTNAME"], 3) == {"EXTNAME": "SCI"}


# ------------------------------------------------------------------------------------------
# read_header errors
# ------------------------------------------------------------------------------------------

def test_read_header_errors(tmp_path, mixed_fits):
    missing = tmp_path / "missing.fits"
    with pytest.raises(OSError, match="Could not open FITS file") as ei:
        torchfits.read_header(missing)
    assert_fits_error(ei.value, missing)
    with pytest.raises(OSError, match="(?i)could not move to HDU") as ei:
        torchfits.read_header(mixed_fits, 17)
    assert_fits_error(ei.value, mixed_fits)
    with pytest.raises(ValueError, match="HDU 'NOPE' not found") as ei:
        torchfits.read_header(mixed_fits, "NOPE")
    assert isinstance(ei.value, FitsError)
    with pytest.raises(ValueError, match="non-negative"):
        torchfits.read_header(mixed_fits, -1)
    notfits = tmp_path / "text.fits"
    notfits.write_text("hello\n" * 1000)
    with pytest.raises(OSError) as ei:
        torchfits.read_header(notfits)
    assert_fits_error(ei.value, notfits)


# ------------------------------------------------------------------------------------------
# §5 metadata helpers
# ------------------------------------------------------------------------------------------

def test_read_num_hdus(mixed_fits):
    assert torchfits.read_num_hdus(mixed_fits) == 5
    assert torchfits.read_num_hdus(str(mixed_fits)) == 5


def test_read_hdu_type(mixed_fits):
    types = [torchfits.read_hdu_type(mixed_fits, i) for i in range(5)]
    assert types == ["IMAGE", "BINARY_TABLE", "ASCII_TABLE", "IMAGE", "IMAGE"]
    assert torchfits.read_hdu_type(mixed_fits, "asc") == "ASCII_TABLE"
    assert torchfits.read_hdu_type(mixed_fits) == "IMAGE"
    with pytest.raises(RuntimeError):
        torchfits.read_hdu_type(mixed_fits, 5)


def test_read_shape(mixed_fits, tmp_path):
    assert torchfits.read_shape(mixed_fits, 0) == (8, ())
    assert torchfits.read_shape(mixed_fits, "SCI") == (-32, (3, 4))
    assert torchfits.read_shape(mixed_fits, 4) == (16, (24, 25))
    u16 = write_image(tmp_path / "u16.fits", np.zeros((5, 7, 2), np.int16), bitpix=16, bzero=32768)
    assert torchfits.read_shape(u16) == (16, (5, 7, 2))
    for sel in (1, "ASC"):
        with pytest.raises(RuntimeError, match="Could not read image parameters"):
            torchfits.read_shape(mixed_fits, sel)


def test_read_nrows(mixed_fits):
    assert torchfits.read_nrows(mixed_fits) == 5
    assert torchfits.read_nrows(mixed_fits, 1) == 5
    assert torchfits.read_nrows(mixed_fits, "ASC") == 4
    with pytest.raises(RuntimeError, match=r"read_nrows \(HDU must be a table\)"):
        torchfits.read_nrows(mixed_fits, 3)


def test_read_colnames(mixed_fits):
    assert torchfits.read_colnames(mixed_fits) == ["ID", "NAME", "VLA", "BITS"]
    assert torchfits.read_colnames(mixed_fits, "asc") == ["X", "S"]
    with pytest.raises(RuntimeError):
        torchfits.read_colnames(mixed_fits, 3)


def test_read_extname(mixed_fits, tmp_path):
    assert torchfits.read_extname(mixed_fits) is None
    assert [torchfits.read_extname(mixed_fits, i) for i in range(1, 5)] == ["TAB", "ASC", "SCI", "COMP"]
    assert torchfits.read_extname(mixed_fits, "sci") == "SCI"
    # QUIRK: None, not an error, for an out-of-range index or a missing file
    assert torchfits.read_extname(mixed_fits, 5) is None
    assert torchfits.read_extname(tmp_path / "missing.fits", 1) is None
    with pytest.raises(ValueError):
        torchfits.read_extname(mixed_fits, "NOPE")


def test_read_table_info(mixed_fits):
    info = torchfits.read_table_info(mixed_fits)
    hdr = astropy_header(mixed_fits, 1)
    assert info == {"nrows": 5, "colnames": ["ID", "NAME", "VLA", "BITS"],
                    "tforms": [hdr[f"TFORM{i}"] for i in range(1, 5)]}
    assert info["tforms"][1:] == ["8A", "PE(5)", "12X"]
    asc = torchfits.read_table_info(mixed_fits, "ASC")
    assert asc["nrows"] == 4 and asc["colnames"] == ["X", "S"] and asc["tforms"] == ["I6", "A5"]
    with pytest.raises(RuntimeError):
        torchfits.read_table_info(mixed_fits, 3)


HELPERS_MISSING_RUNTIME = [
    ("read_num_hdus", lambda p: torchfits.read_num_hdus(p)),
    ("read_shape", lambda p: torchfits.read_shape(p)),
    ("read_nrows", lambda p: torchfits.read_nrows(p)),
    ("read_keys", lambda p: torchfits.read_keys(p, ["NAXIS"])),
    ("read_colnames", lambda p: torchfits.read_colnames(p)),
    ("read_hdu_type", lambda p: torchfits.read_hdu_type(p)),
    ("read_table_info", lambda p: torchfits.read_table_info(p)),
]


@pytest.mark.parametrize("name,call", HELPERS_MISSING_RUNTIME, ids=[n for n, _ in HELPERS_MISSING_RUNTIME])
def test_helpers_missing_file(tmp_path, name, call):
    missing = tmp_path / "absent.fits"
    with pytest.raises(RuntimeError, match="Could not open FITS file") as ei:
        call(missing)
    assert_fits_error(ei.value, missing)


@pytest.mark.parametrize("name,call", [
    ("read_shape", lambda p, h: torchfits.read_shape(p, h)),
    ("read_nrows", lambda p, h: torchfits.read_nrows(p, h)),
    ("read_colnames", lambda p, h: torchfits.read_colnames(p, h)),
    ("read_hdu_type", lambda p, h: torchfits.read_hdu_type(p, h)),
    ("read_keys", lambda p, h: torchfits.read_keys(p, ["NAXIS"], h)),
    ("read_table_info", lambda p, h: torchfits.read_table_info(p, h)),
    ("read_header", lambda p, h: torchfits.read_header(p, h)),
], ids=lambda x: x if isinstance(x, str) else "")
def test_helpers_unknown_name_and_negative(mixed_fits, name, call):
    with pytest.raises(ValueError, match="HDU 'NOPE' not found"):
        call(mixed_fits, "NOPE")
    with pytest.raises(ValueError, match="non-negative"):
        call(mixed_fits, -2)


# ------------------------------------------------------------------------------------------
# property test: astropy writes random headers, read_header reads what astropy reads
# ------------------------------------------------------------------------------------------

try:
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    st = None

if st is None:  # pragma: no cover
    def test_header_roundtrip_property():
        pytest.skip("hypothesis is not installed")
else:
    RESERVED = {"SIMPLE", "BITPIX", "NAXIS", "EXTEND", "END", "COMMENT", "HISTORY", "CONTINUE",
                "XTENSION", "PCOUNT", "GCOUNT", "BSCALE", "BZERO", "BLANK", "LONGSTRN", "GROUPS",
                "HIERARCH", "INHERIT", "CHECKSUM", "DATASUM", "EXTNAME", "EXTVER", "BUNIT"}

    keywords = st.text(alphabet=string.ascii_uppercase + string.digits + "_-", min_size=1,
                       max_size=8).filter(
        lambda k: k not in RESERVED and not k.startswith("NAXIS") and not k.startswith("TFORM"))
    # astropy misreads a quote followed by '/' inside a string (it takes the '/' as the comment
    # separator; fitsio and the FITS standard do not): keep those out of the astropy-oracle test
    printable = st.text(alphabet=[chr(c) for c in range(32, 127)], max_size=120).filter(
        lambda v: not re.search(r"'\s*/", v))
    values = st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        printable,
        st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=1e300),
    )
    comments = st.text(alphabet=[chr(c) for c in range(32, 127)], max_size=30)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.dictionaries(keywords, st.tuples(values, comments), min_size=1, max_size=12),
           st.lists(printable, max_size=3))
    def test_header_roundtrip_property(items, history):
        """Random keyword dicts written by astropy: read_header reads exactly what astropy reads
        (floats are compared with astropy's parse, since astropy may shorten them on write)."""
        fits = pytest.importorskip("astropy.io.fits")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "prop.fits"
            hdu = fits.PrimaryHDU()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for k, (v, c) in items.items():
                    hdu.header[k] = (v, c)
                for line in history:
                    hdu.header.add_history(line)
                hdu.writeto(path)
            assume(standard_string_cards(path))
            h = torchfits.read_header(path)
            assert_same_cards(our_cards(h), astropy_cards(path))
            for k, (v, _) in items.items():
                if isinstance(v, (bool, int)):
                    assert h[k] == v and type(h[k]) is type(v)
                elif isinstance(v, str):
                    assert h[k] == v.rstrip(" ")
            assert h.get_history() == [c.value for c in astropy_header(path).cards
                                       if c.keyword == "HISTORY"]

"""Header hygiene on every writer: a card FITS cannot hold (a byte outside printable ASCII, NaN
or infinity, a container value, a malformed or too long keyword) is refused with
`HeaderCardError` naming the keyword and the file, before anything on disk changes; a list of
COMMENT/HISTORY values (or one joined with newlines, as ``dict(read_header(f))`` gives) is
written as one card per line."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import torchfits
from _writecheck import fitsverify_ok, leftovers
from torchfits.errors import FitsError, HeaderCardError
from torchfits.fits.header import Header
from torchfits.writing.api import write
from torchfits.writing.compress_write import write_compressed
from torchfits.writing.hdu_edit import insert_hdu, replace_hdu
from torchfits.writing.header_edit import update_header

# (keyword, value, comment) that FITS cannot hold, and the keyword the error must name.
BAD = [
    pytest.param("OBJECT", "M31\nM32", "", "OBJECT", id="newline-value"),
    pytest.param("OBJECT", "M31\tM32", "", "OBJECT", id="tab-value"),
    pytest.param("OBJECT", "M31\x00", "", "OBJECT", id="nul-value"),
    pytest.param("OBJECT", "caf\u00e9", "", "OBJECT", id="non-ascii-value"),
    pytest.param("OBJECT", "x" * 100 + "\u2013", "", "OBJECT", id="non-ascii-long-value"),
    pytest.param("OBJECT", "M31", "a\tcomment", "OBJECT", id="tab-comment"),
    pytest.param("OBJECT", "M31", "na\u00efve", "OBJECT", id="non-ascii-comment"),
    pytest.param("K\u00c9Y", 1, "", "K\u00c9Y", id="non-ascii-keyword"),
    pytest.param("KEY\tX", 1, "", "KEY\tX", id="tab-keyword"),
    pytest.param("HISTORY", "step\tone", "", "HISTORY", id="tab-history"),
    pytest.param("COMMENT", ["fine", "caf\u00e9"], "", "COMMENT", id="non-ascii-comment-list"),
    pytest.param("EXPTIME", float("nan"), "", "EXPTIME", id="nan"),
    pytest.param("EXPTIME", float("inf"), "", "EXPTIME", id="inf"),
    pytest.param("EXPTIME", np.float32("-inf"), "", "EXPTIME", id="numpy-minus-inf"),
    pytest.param("CPLX", complex(1, float("nan")), "", "CPLX", id="complex-nan"),
    pytest.param("VALUES", [1, 2], "", "VALUES", id="list-value"),
    pytest.param("RAW", b"bytes", "", "RAW", id="bytes-value"),
    pytest.param("KEY=X", 1, "", "KEY=X", id="equals-in-hierarch-keyword"),
    pytest.param("K" * 75, "value", "", "K" * 75, id="hierarch-keyword-too-long"),
    pytest.param(" PADDED", 1, "", " PADDED", id="blank-padded-keyword"),
]


def _header(key, value, comment):
    return {key: (value, comment) if comment else value}


def _original(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "orig.fits"
    write(path, np.arange(6, dtype=np.int16).reshape(2, 3), header={"OBJECT": "kept", "EXPTIME": 3.0})
    return path, path.read_bytes()


def _refused(excinfo, keyword: str, path: Path) -> None:
    err = excinfo.value
    assert isinstance(err, FitsError) and isinstance(err, ValueError)
    text = str(err)
    assert repr(keyword) in text or keyword in text, text
    assert str(path) in text or os.path.basename(str(path)) in text, text


def _unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before
    assert leftovers(path.parent) == []


# -- torchfits.write(header=) ------------------------------------------------------------------
@pytest.mark.parametrize("key,value,comment,named", BAD)
def test_write_image_refuses_and_keeps_the_original(tmp_path, key, value, comment, named):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        write(path, np.zeros((2, 2), "f4"), header=_header(key, value, comment), overwrite=True)
    _refused(excinfo, named, path)
    _unchanged(path, before)
    new = tmp_path / "new.fits"
    with pytest.raises(HeaderCardError):
        write(new, np.zeros((2, 2), "f4"), header=_header(key, value, comment))
    assert not new.exists()


@pytest.mark.parametrize("key,value,comment,named", BAD)
def test_header_object_is_refused_too(tmp_path, key, value, comment, named):
    """A `Header` built by hand goes through the same check as a dict."""
    h = Header()
    h.append((key, value, comment))
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        write(path, np.zeros(3, "i4"), header=h, overwrite=True)
    _refused(excinfo, named, path)
    _unchanged(path, before)


@pytest.mark.parametrize("make", ["dict", "arrow", "table.write"])
def test_table_writes_refuse(tmp_path, make):
    path, before = _original(tmp_path)
    columns = {"a": np.arange(3), "b": np.ones(3)}
    header = {"OBSERVER": "Ed\nHubble"}
    with pytest.raises(HeaderCardError) as excinfo:
        if make == "dict":
            write(path, columns, header=header, overwrite=True)
        elif make == "arrow":
            import pyarrow as pa
            write(path, pa.table(columns), header=header, overwrite=True)
        else:
            torchfits.table.write(path, columns, header=header, overwrite=True)
    _refused(excinfo, "OBSERVER", path)
    _unchanged(path, before)


def test_non_ascii_column_name_is_refused_naming_its_keyword(tmp_path):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        write(path, {"fl\u00fcx": np.arange(3)}, overwrite=True)
    _refused(excinfo, "TTYPE1", path)
    assert "HDU 1" in str(excinfo.value)
    _unchanged(path, before)


def test_compressed_writes_refuse(tmp_path):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        write(path, np.zeros((4, 4), "f4"), header={"FILTER": "r\x1b[0m"}, compress=True, overwrite=True)
    _refused(excinfo, "FILTER", path)
    with pytest.raises(HeaderCardError) as excinfo:
        write_compressed(path, np.zeros((4, 4), "i2"), header={"GAIN": float("nan")}, overwrite=True)
    _refused(excinfo, "GAIN", path)
    _unchanged(path, before)


def test_hdulist_write_refuses(tmp_path):
    torch = pytest.importorskip("torch")
    path, before = _original(tmp_path)
    hdus = torchfits.HDUList([torchfits.TensorHDU(torch.zeros(2, 2), header={"OBJECT": "ok"}),
                              torchfits.TensorHDU(torch.ones(2, 2), header={"OBJECT": "M31\nM32"})])
    with pytest.raises(HeaderCardError) as excinfo:
        hdus.write(str(path), overwrite=True)
    _refused(excinfo, "OBJECT", path)
    assert "HDU 1" in str(excinfo.value)
    _unchanged(path, before)


def test_hdulist_commentary_lists_are_one_card_each(tmp_path):
    torch = pytest.importorskip("torch")
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "hl.fits"
    hdus = torchfits.HDUList([torchfits.TensorHDU(torch.zeros(2, 2),
                                                  header={"HISTORY": ["one", "two"], "OBJECT": "x"})])
    hdus.write(str(path))
    assert list(fits.getheader(path)["HISTORY"]) == ["one", "two"]
    fitsverify_ok(path)


# -- insert_hdu / replace_hdu ---------------------------------------------------------------------
@pytest.mark.parametrize("index", [1, -1, 0])
def test_insert_hdu_refuses(tmp_path, index):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        insert_hdu(str(path), np.zeros(3, "f4"), index=index, header={"EXTNAME": "S\u00c9"})
    _refused(excinfo, "EXTNAME", path)
    _unchanged(path, before)


def test_replace_hdu_refuses(tmp_path):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        replace_hdu(str(path), 0, np.zeros(3, "f4"), header={"BAD": float("-inf")})
    _refused(excinfo, "BAD", path)
    with pytest.raises(HeaderCardError):
        replace_hdu(str(path), 0, np.zeros(3, "f4"), header={"BAD": float("nan")}, compress=True)
    _unchanged(path, before)


def test_insert_hdu_writes_commentary_lists_as_cards(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path, _ = _original(tmp_path)
    insert_hdu(str(path), np.zeros(3, "f4"), index=-1,
               header={"EXTNAME": "NEW", "COMMENT": ("first", "second")})
    assert list(fits.getheader(path, "NEW")["COMMENT"]) == ["first", "second"]
    fitsverify_ok(path)


# -- update_header and setkey --------------------------------------------------------------------
# update_header strips the keyword it is given (setkey -k ' PADDED' sets PADDED)
@pytest.mark.parametrize("key,value,comment,named",
                         [b for b in BAD if b.values[0] == b.values[0].strip()])
def test_update_header_refuses_in_place(tmp_path, key, value, comment, named):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        update_header(str(path), 0, set=_header(key, value, comment))
    _refused(excinfo, named, path)
    assert "HDU 0" in str(excinfo.value)
    _unchanged(path, before)


def test_update_header_refuses_on_the_rewrite_path(tmp_path):
    """Enough new cards to need a bigger header (the atomic rewrite), one of them bad."""
    path, before = _original(tmp_path)
    cards = {f"KEY{i}": i for i in range(60)}
    cards["KEY59"] = "bad\u00a0space"
    with pytest.raises(HeaderCardError) as excinfo:
        update_header(str(path), 0, set=cards)
    _refused(excinfo, "KEY59", path)
    _unchanged(path, before)


def test_update_header_rename_to_a_bad_keyword_is_refused(tmp_path):
    path, before = _original(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        update_header(str(path), 0, rename={"OBJECT": "OBJ=ECT"})
    _refused(excinfo, "OBJ=ECT", path)
    _unchanged(path, before)


def test_update_header_commentary_list_is_one_card_each(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path, _ = _original(tmp_path)
    update_header(str(path), 0, set={"HISTORY": ["a", "b"], "COMMENT": "x\ny"})
    h = fits.getheader(path)
    assert list(h["HISTORY"]) == ["a", "b"]
    assert list(h["COMMENT"]) == ["x", "y"]
    fitsverify_ok(path)


def test_setkey_cli_refuses_a_tab(tmp_path, capsys):
    from torchfits.cli.main import main

    path, before = _original(tmp_path)
    code = main(["setkey", str(path), "-k", "OBJECT", "--value", "M31\tM32"])
    assert code == 2
    err = capsys.readouterr().err
    assert "OBJECT" in err and "tab" in err
    _unchanged(path, before)


# -- table in-place editors ----------------------------------------------------------------------------
def _table_file(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "cat.fits"
    write(path, {"a": np.arange(3), "b": np.ones(3)})
    return path, path.read_bytes()


@pytest.mark.parametrize("edit", ["rename", "insert", "unit"])
def test_table_editors_refuse_non_ascii_names_and_units(tmp_path, edit):
    path, before = _table_file(tmp_path)
    with pytest.raises(HeaderCardError) as excinfo:
        if edit == "rename":
            torchfits.table.rename_columns(str(path), {"a": "\u00e5"})
        elif edit == "insert":
            torchfits.table.insert_column(str(path), "fl\u00fcx", np.zeros(3))
        else:
            torchfits.table.insert_column(str(path), "c", np.zeros(3), unit="\u00b5m")
    assert "TTYPE" in str(excinfo.value) or "TUNIT" in str(excinfo.value)
    _unchanged(path, before)


# -- commentary round trips -------------------------------------------------------------------------
def _astropy_source(tmp_path: Path) -> Path:
    fits = pytest.importorskip("astropy.io.fits")
    h = fits.Header()
    h["OBJECT"] = "M31"
    h.add_history("bias subtracted")
    h.add_history("flat fielded with a very long explanation that needs more than one card to hold it all")
    h.add_comment("first comment")
    h.add_comment("second comment")
    h.add_history("")
    path = tmp_path / "src.fits"
    fits.PrimaryHDU(np.arange(4, dtype="f4"), header=h).writeto(path)
    return path


def test_dict_of_read_header_round_trips_commentary(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    src = _astropy_source(tmp_path)
    out = tmp_path / "out.fits"
    write(out, np.arange(4, dtype="f4"), header=dict(torchfits.read_header(src)))
    a, b = fits.getheader(src), fits.getheader(out)
    assert list(b["HISTORY"]) == list(a["HISTORY"])
    assert list(b["COMMENT"]) == list(a["COMMENT"])
    assert b["OBJECT"] == "M31"
    torchfits.info(out)  # our own reader takes it
    fitsverify_ok(out)


def test_header_object_round_trips_commentary_and_blank_cards(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    src = tmp_path / "blank.fits"
    h = fits.Header()
    h.append(("", "a blank-keyword card"), bottom=True)
    h.append(("", "another one"), bottom=True)
    h.add_history("done")
    fits.PrimaryHDU(np.zeros(2, "i2"), header=h).writeto(src)
    out = tmp_path / "out.fits"
    write(out, np.zeros(2, "i2"), header=torchfits.read_header(src))
    got = fits.getheader(out)
    assert list(got[""]) == ["a blank-keyword card", "another one"]
    assert list(got["HISTORY"]) == ["done"]
    fitsverify_ok(out)


def test_joined_commentary_value_becomes_separate_cards(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    src = _astropy_source(tmp_path)
    history = torchfits.read_header(src)["HISTORY"]
    out = tmp_path / "joined.fits"
    write(out, np.zeros(2, "f4"), header={"HISTORY": str(history), "COMMENT": ("c1", "c2")})
    got = fits.getheader(out)
    assert list(got["HISTORY"]) == list(history)
    assert list(got["COMMENT"]) == ["c1", "c2"]
    fitsverify_ok(out)


def test_long_commentary_value_splits_over_cards(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    text = "".join(chr(ord("a") + i % 26) for i in range(160))
    out = tmp_path / "long.fits"
    write(out, np.zeros(2, "f4"), header={"HISTORY": text})
    got = list(fits.getheader(out)["HISTORY"])
    assert len(got) == 3 and "".join(got) == text
    fitsverify_ok(out)


# -- keywords -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["ESO DET CHIP NAME", "VERYLONGKEYWORD", "lowercase_long_key"])
def test_long_keywords_are_hierarch_cards_that_read_back(tmp_path, key):
    fits = pytest.importorskip("astropy.io.fits")
    out = tmp_path / "hier.fits"
    write(out, np.zeros(2, "f4"), header={key: "v"})
    assert fits.getheader(out)[key] == "v"
    assert torchfits.read_header(out)[key] == "v"
    fitsverify_ok(out)


def test_astropy_refuses_nan_too():
    """The refusal matches astropy, which has no way to write NaN in a header either."""
    fits = pytest.importorskip("astropy.io.fits")
    with pytest.raises(ValueError):
        fits.Header()["X"] = float("nan")


def test_error_is_catchable_as_before():
    """Non-ASCII used to fail as ``FitsWriteError`` (RuntimeError/ValueError): still caught."""
    assert issubclass(HeaderCardError, (RuntimeError,)) and issubclass(HeaderCardError, ValueError)


# -- every header of astropy's and fitsio's test files, written back ----------------------------------
def _oracle_files() -> list[str]:
    import glob

    import astropy.io.fits.tests as atests
    files = sorted(glob.glob(os.path.join(os.path.dirname(atests.__file__), "data", "*.fits")))
    try:
        import fitsio

        files += sorted(glob.glob(os.path.join(os.path.dirname(fitsio.__file__), "test_images", "*")))
    except ImportError:
        pass
    return files


@pytest.mark.parametrize("kind", ["image", "table"])
def test_headers_of_oracle_files_write_back_valid(tmp_path, kind):
    """``header=dict(read_header(f))`` of every HDU of the oracles' own test files: the file
    written passes fitsverify (keywords of another HDU kind -- table columns on an image,
    DATAMIN on a table, compression and random-groups keywords -- are dropped) and its
    COMMENT/HISTORY cards are the source's, one per card."""
    pytest.importorskip("astropy")
    fits = pytest.importorskip("astropy.io.fits")
    import shutil
    import subprocess
    import warnings

    verify = shutil.which("fitsverify")
    data = np.zeros(2, "f4") if kind == "image" else {"x": np.zeros(2, "i4"), "s": ["a", "b"]}
    out = tmp_path / "back.fits"
    checked = 0
    for f in _oracle_files():
        try:
            n = torchfits.read_num_hdus(f)
        except FitsError:
            continue
        for k in range(n):
            try:
                header = torchfits.read_header(f, k)
            except FitsError:
                continue
            write(out, data, header=dict(header), overwrite=True)
            if verify:
                run = subprocess.run([verify, "-q", "-e", str(out)], capture_output=True, text=True)
                assert "verification OK" in run.stdout, (f, k, run.stdout)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    source = fits.getheader(f, k)
                except Exception:  # noqa: BLE001 - a file astropy cannot read is no oracle
                    continue
                written = fits.getheader(out, 0 if kind == "image" else 1)
            for key in ("HISTORY", "COMMENT"):
                want = [str(v).rstrip() for v in source[key]] if key in source else []
                got = [str(v).rstrip() for v in written[key]] if key in written else []
                assert got == want, (f, k, key)
            checked += 1
    assert checked > 40

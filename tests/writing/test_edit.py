"""In-file edits: HDU insert/replace/delete, table rows and columns, header keywords."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import torchfits
from _writecheck import check_image_roundtrip, check_table_columns, fitsverify_ok, leftovers
from torchfits import table
from torchfits.writing.api import write
from torchfits.writing.hdu_edit import delete_hdu, insert_hdu, replace_hdu, update_header


def _names(path):
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path) as h:
        return [(type(x).__name__, x.name) for x in h]


@pytest.fixture
def mef(tmp_path):
    path = tmp_path / "mef.fits"
    write(path, [{"data": np.arange(6, dtype="i2").reshape(2, 3),
                  "header": {"KEEPME": 1, "F": 1.5, "B": True}},
                 {"data": np.ones((2, 2), "f4"), "header": {"EXTNAME": "SCI"}}])
    return path


def test_insert_hdu_positions(mef):
    torch = pytest.importorskip("torch")
    insert_hdu(mef, {"x": np.arange(3)}, index=2)
    assert [n for _, n in _names(mef)] == ["PRIMARY", "SCI", ""]
    insert_hdu(mef, torch.full((2, 2), 7.0), index=0)
    assert _names(mef)[0][0] == "PrimaryHDU" and _names(mef)[1][0] == "ImageHDU"
    check_image_roundtrip(mef, np.full((2, 2), 7.0, "f4"), 0)
    check_image_roundtrip(mef, np.arange(6, dtype="i2").reshape(2, 3), 1)
    import torchfits

    # typed values of the demoted primary survive (no stringification)
    h = torchfits.read_header(str(mef), 1)
    assert h["KEEPME"] == 1 and h["F"] == 1.5 and h["B"] is True
    fitsverify_ok(mef)
    with pytest.raises(IndexError, match="index 99 out of range for 4 HDUs"):
        insert_hdu(mef, torch.zeros(2), index=99)
    insert_hdu(mef, np.full(3, 5, "i4"), index=-1)  # -1 appends
    assert len(_names(mef)) == 5
    check_image_roundtrip(mef, np.full(3, 5, "i4"), 4)
    insert_hdu(mef, np.full(2, 6, "i4"), index=-2)  # before the last
    check_image_roundtrip(mef, np.full(2, 6, "i4"), 4)
    check_image_roundtrip(mef, np.full(3, 5, "i4"), 5)
    with pytest.raises(IndexError, match="index -8 out of range for 6 HDUs"):
        insert_hdu(mef, torch.zeros(2), index=-8)
    with pytest.raises(FileNotFoundError):
        insert_hdu(mef.parent / "none.fits", torch.zeros(2))


def test_replace_hdu_keeps_or_replaces_header(mef):
    import torchfits

    replace_hdu(mef, "SCI", np.zeros((3, 3), "u2"))
    h = torchfits.read_header(str(mef), 1)
    assert h["EXTNAME"] == "SCI" and h["BZERO"] == 32768
    check_image_roundtrip(mef, np.zeros((3, 3), "u2"), 1)
    replace_hdu(mef, 1, np.ones(2, "f4"), header={"NEW": 1})
    h = torchfits.read_header(str(mef), 1)
    assert "EXTNAME" not in h and h["NEW"] == 1 and "BZERO" not in h
    replace_hdu(mef, 0, {"t": np.arange(4)})
    assert [k for k, _ in _names(mef)] == ["PrimaryHDU", "BinTableHDU", "ImageHDU"]
    with pytest.raises(KeyError, match="HDU 'NOPE' not found"):
        replace_hdu(mef, "NOPE", np.zeros(2))
    with pytest.raises(IndexError):
        replace_hdu(mef, 9, np.zeros(2))
    fitsverify_ok(mef)


def test_delete_hdu(mef):
    delete_hdu(mef, 0)
    assert _names(mef) == [("PrimaryHDU", "SCI")]
    check_image_roundtrip(mef, np.ones((2, 2), "f4"), 0)
    with pytest.raises(ValueError, match="Cannot delete the last HDU"):
        delete_hdu(mef, 0)
    fitsverify_ok(mef)


@pytest.fixture
def tab(tmp_path):
    path = tmp_path / "t.fits"
    table.write(path, {"id": np.arange(4), "x": np.arange(4, dtype="f4") / 2, "s": ["a", "bb", "c", "d"],
                       "u": np.arange(4, dtype="u2"), "v": np.ones((4, 2), "i4")},
                schema={"id": {"tnull": -99}})
    return path


def test_append_in_place_and_defaults(tab):
    inode = os.stat(tab).st_ino
    table.append_rows(tab, {"id": [10, 11], "s": ["zz", "toolongvalue"]})
    assert os.stat(tab).st_ino == inode  # appended without rewriting the file
    check_table_columns(tab, {"id": [0, 1, 2, 3, 10, 11], "s": ["a", "bb", "c", "d", "zz", "to"],
                              "u": [0, 1, 2, 3, 0, 0], "x": [0, .5, 1, 1.5, 0, 0]})
    table.append_rows(tab, {"x": [9.0]})
    import torchfits

    assert torchfits.scan(str(tab)).to_arrow().column("id").to_pylist()[-1] is None  # TNULL default
    with pytest.raises(KeyError, match=r"extra=\['nope'\]"):
        table.append_rows(tab, {"nope": [1]})
    with pytest.raises(ValueError, match="Column 'x' has 1 rows, expected 2"):
        table.append_rows(tab, {"id": [1, 2], "x": [1.0]})
    with pytest.raises(ValueError, match="non-empty"):
        table.append_rows(tab, {})
    with pytest.raises(RuntimeError, match="repeat mismatch"):
        table.append_rows(tab, {"v": np.ones((1, 3))})
    fitsverify_ok(tab)


def test_insert_update_delete_rows(tab):
    table.insert_rows(tab, {"id": [-1], "u": np.array([65535], "u2")}, row=0)
    table.update_rows(tab, {"x": [7.5, 8.5]}, slice(1, 3))
    table.delete_rows(tab, (3, 4))
    check_table_columns(tab, {"id": [-1, 0, 1, 3], "x": [0, 7.5, 8.5, 1.5], "u": [65535, 0, 1, 3]})
    with pytest.raises(ValueError, match="out of range for insert"):
        table.insert_rows(tab, {"id": [1]}, row=10)
    with pytest.raises(ValueError, match="non-negative"):
        table.insert_rows(tab, {"id": [1]}, row=-1)
    with pytest.raises(ValueError, match="row_slice expects 2 rows, but update payload has 1"):
        table.update_rows(tab, {"x": [1.0]}, (0, 2))
    with pytest.raises(ValueError, match="append_rows"):
        table.update_rows(tab, {"x": [1.0]}, (4, 5))
    with pytest.raises(ValueError, match="start is out of range"):
        table.delete_rows(tab, 10)
    table.delete_rows(tab, slice(0, 0))
    table.delete_rows(tab, slice(0, None))
    check_table_columns(tab, {"id": np.zeros(0, int)})
    fitsverify_ok(tab)
    with pytest.raises(ValueError, match="HDU 0 is not a table"):
        table.append_rows(tab, {"id": [1]}, hdu=0)


def test_column_edits(tab):
    fits = pytest.importorskip("astropy.io.fits")
    table.insert_column(tab, "flag", np.array([1, 0, 1, 0], "i2"), index=1, unit="bool",
                        tscal=0.5, tzero=1)
    table.rename_columns(tab, {"x": "X2"})
    table.drop_columns(tab, ["v"])
    table.replace_column(tab, "s", ["long text", "b", "c", "d"])
    with fits.open(tab) as h:
        cols = h[1].columns
        assert cols.names == ["id", "flag", "X2", "s", "u"]
        assert cols["flag"].unit == "bool"
        np.testing.assert_array_equal(h[1].data["flag"], [1.5, 1, 1.5, 1])
        assert h[1].data["s"][0] == "long text"
        assert cols["id"].null == -99  # metadata moved with its column
    with pytest.raises(ValueError, match="Column 'id' already exists"):
        table.insert_column(tab, "id", np.arange(4))
    with pytest.raises(KeyError, match="Column 'zz' not found"):
        table.replace_column(tab, "zz", np.arange(4))
    with pytest.raises(TypeError):
        table.replace_column(tab, "id", ["a", "b", "c", "d"])
    with pytest.raises(KeyError, match="not found for rename_columns"):
        table.rename_columns(tab, {"zz": "y"})
    with pytest.raises(ValueError):
        table.rename_columns(tab, {"id": "u"})
    with pytest.raises(KeyError, match="not found for drop_columns"):
        table.drop_columns(tab, ["zz"])
    fitsverify_ok(tab)
    table.drop_columns(tab, ["id", "flag", "X2", "s", "u"])
    with fits.open(tab) as h:
        assert h[1].header["TFIELDS"] == 0 and h[1].header["NAXIS2"] == 4


def test_vla_edits_and_checksums_kept(tmp_path):
    path = tmp_path / "v.fits"
    write(path, {"l": [np.arange(2.0), np.arange(3.0)], "i": np.arange(2)}, checksum=True)
    table.append_rows(path, {"l": [np.arange(5.0)], "i": [7]})
    table.delete_rows(path, 0)
    fits = pytest.importorskip("astropy.io.fits")
    with fits.open(path, checksum=True) as h:
        assert [list(x) for x in h[1].data["l"]] == [[0, 1, 2], [0, 1, 2, 3, 4]]
    from torchfits.writing.checksum import verify_checksums

    assert verify_checksums(path, 1)["status"] == "ok"
    fitsverify_ok(path)


def test_update_header_in_place_and_rewrite(mef):
    import torchfits

    inode = os.stat(mef).st_ino
    update_header(mef, 0, set={"OBSERVER": ("me", "who"), "KEEPME": 2}, delete=["F"], rename={"B": "BB"})
    assert os.stat(mef).st_ino == inode  # fitted the header blocks: edited in place
    h = torchfits.read_header(str(mef))
    assert h["OBSERVER"] == "me" and h["KEEPME"] == 2 and "F" not in h and h["BB"] is True
    many = {f"KEY{i:04d}": i for i in range(60)}
    update_header(mef, "SCI", set=many)
    assert torchfits.read_header(str(mef), 1)["KEY0059"] == 59
    check_image_roundtrip(mef, np.ones((2, 2), "f4"), 1)
    with pytest.raises(KeyError):
        update_header(mef, 0, delete=["MISSING"])
    with pytest.raises(ValueError):
        update_header(mef, 0, set={"NAXIS": 3})
    assert leftovers(mef.parent) == []
    fitsverify_ok(mef)


def test_cli_setkey(mef, tmp_path, capsys):
    import argparse

    import torchfits
    from torchfits.cli.edit_commands import add_parsers

    parser = argparse.ArgumentParser()
    commands: dict = {}
    add_parsers(parser.add_subparsers(dest="command"), commands)

    def run(*argv):
        return commands["setkey"](parser.parse_args(["setkey", *argv]))

    assert run(str(mef), "-k", "EXPTIME", "--value", "12") == 0
    assert run(str(mef), "-k", "HIERARCH ESO TEL AIRM", "--value", "1.5", "-e", "all") == 0
    out = tmp_path / "copy.fits"
    assert run(str(mef), "--rename", "EXPTIME=EXPOSURE", "-o", str(out)) == 0
    assert torchfits.read_header(str(mef))["EXPTIME"] == 12
    assert torchfits.read_header(str(out))["EXPOSURE"] == 12
    assert torchfits.read_header(str(mef), 1)["ESO TEL AIRM"] == 1.5
    assert run(str(mef), "--delete", "NOPE") == 2  # reported per file, exit 2
    assert "missing keyword NOPE" in capsys.readouterr().err


def test_failed_in_place_append_restores_file(tab, monkeypatch):
    before = tab.read_bytes()
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd):
        calls["n"] += 1
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        table.append_rows(tab, {"id": [5]})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert calls["n"] == 1
    assert tab.read_bytes() == before


def test_failed_rewrite_edit_leaves_original(tab, monkeypatch):
    from torchfits.writing.atomic import Sink

    before = tab.read_bytes()

    def boom(self, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Sink, "write", boom)
    with pytest.raises(OSError):
        table.insert_rows(tab, {"id": [5]}, row=0)
    with pytest.raises(OSError):
        delete_hdu(tab, 1)
    assert tab.read_bytes() == before
    assert leftovers(tab.parent) == []


def test_edits_with_compress_reencode_images(tmp_path):
    """§6.3: compress= re-encodes the output with tile compression; the spec's example gives an
    empty primary, the new image, then the old image."""
    import torch

    path = str(tmp_path / "c.fits")
    old = np.arange(30 * 20, dtype=np.int16).reshape(30, 20)
    new = (np.arange(10 * 12, dtype=np.int32) * 7).reshape(10, 12)
    torchfits.write(path, old, compress=True)
    assert torchfits.read_num_hdus(path) == 2
    torchfits.insert_hdu(path, torch.from_numpy(new), index=1, compress=True)
    kinds = [h.kind for h in torchfits.info(path)]
    assert kinds == ["primary", "compressed_image", "compressed_image"]
    np.testing.assert_array_equal(torchfits.read_numpy(path, 1), new)
    np.testing.assert_array_equal(torchfits.read_numpy(path, 2), old)
    torchfits.delete_hdu(path, 1, compress="GZIP_2")
    np.testing.assert_array_equal(torchfits.read_numpy(path, 1), old)
    before = Path(path).read_bytes()
    with pytest.raises(RuntimeError, match="Unsupported compression"):
        torchfits.replace_hdu(path, 1, torch.from_numpy(new), compress="GZIP2")
    assert Path(path).read_bytes() == before


def test_plain_edit_then_compress_keeps_tables(tmp_path):
    path = str(tmp_path / "t.fits")
    img = np.arange(64, dtype=np.float32).reshape(8, 8)
    torchfits.write(path, [img, {"data": img * 2}])
    torchfits.insert_hdu(path, {"a": np.arange(5)}, index=2, compress="RICE_1")
    kinds = [h.kind for h in torchfits.info(path)]
    # the image primary moves behind an empty primary; the table is copied as it is
    assert kinds == ["primary", "compressed_image", "compressed_image", "bintable"]
    assert torchfits.scan(path, 3).to_arrow().column("a").to_pylist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(torchfits.read_numpy(path, 2), img * 2, atol=0.5)


def test_ascii_table_row_edits(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    from torchfits import table

    path = tmp_path / "asc.fits"
    fits.TableHDU.from_columns([fits.Column("a", "I5", array=[1, 2]),
                                fits.Column("s", "A4", array=["ab", "cd"]),
                                fits.Column("f", "F8.3", array=[1.5, 2.25]),
                                fits.Column("e", "E12.4", array=[1e5, -2.5])]).writeto(path)
    table.append_rows(path, {"a": [3, 44], "s": ["ef", "g"], "f": [3.125, -7.0], "e": [6.02e23, 0.0]})
    table.update_rows(path, {"a": [9], "s": ["zz"]}, row_slice=(0, 1))
    table.insert_rows(path, {"a": [7], "s": ["new"]}, row=1)
    with fits.open(path) as hdul:
        assert type(hdul[1]).__name__ == "TableHDU"
        d = hdul[1].data
        assert d["a"].tolist() == [9, 7, 2, 3, 44]
        assert [v.rstrip() for v in d["s"].tolist()] == ["zz", "new", "cd", "ef", "g"]
        assert d["f"].tolist()[2:] == [2.25, 3.125, -7.0] and d["e"].tolist()[3:] == [6.02e23, 0.0]
    fitsverify_ok(path)
    table.delete_rows(path, (1, 2))
    assert fits.getdata(path, 1)["a"].tolist() == [9, 2, 3, 44]
    with pytest.raises(ValueError, match="123456 needs 6 characters, more than the field's 5"):
        table.append_rows(path, {"a": [123456]})
    with pytest.raises(ValueError, match="does not fit A4"):
        table.update_rows(path, {"s": ["toolong"]}, row_slice=(0, 1))
    assert fits.getdata(path, 1)["a"].tolist() == [9, 2, 3, 44]  # failed edits change nothing

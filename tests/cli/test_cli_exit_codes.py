"""Every exit code docs/cli.md documents, each from the situation it names; and the friction that
misled: a table given to `cutout`, `header -k` of a missing keyword, what `verify` says, an HDU
suffix on an output, positionals after options, random-groups HDUs and long type names in `info`."""
import json
from pathlib import Path

import numpy as np
import pytest

import torchfits
from _cli import run


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- the table of docs/cli.md, row by row ---------------------------------------------------------
def test_exit_0_success(samples, capsys):
    _, image, catalog = samples
    assert run(capsys, "info", image, catalog)[0] == 0


def test_exit_1_diff_found_differences(samples, capsys, tmp_path):
    _, image, _ = samples
    other = tmp_path / "o.fits"
    torchfits.write(str(other), np.zeros((2, 2), np.float32))
    assert run(capsys, "diff", image, other)[0] == 1


def bad_arguments(image, catalog, tmp_path):
    exists = tmp_path / "exists.parquet"
    return {
        "unknown option": ("info", "--bogus", image),
        "unknown command": ("nosuchcommand",),
        "invalid -e": ("info", "-e", "x,", image),
        "missing HDU": ("info", "-e", "NOPE", image),
        "HDU out of range": ("stats", "-e", "9", image),
        "missing column": ("convert", catalog, tmp_path / "c.parquet", "-c", "nope"),
        "bad where": ("convert", catalog, tmp_path / "w.parquet", "-w", "mag_r <"),
        "bad SQL": ("sql", "SELEC 1"),
        "existing output": ("convert", catalog, exists, "-c", "id"),
        "undeterminable format": ("convert", catalog, tmp_path / "out.xyz"),
        "table to an image command": ("cutout", catalog, tmp_path / "cut.fits", "--box", "0,0,2,2"),
        "table to stats": ("stats", "-e", "1", catalog),
        "image to a table command": ("table", "-e", "1", image),
        "image to convert": ("convert", "-e", "1", image, tmp_path / "i.parquet"),
        "missing keyword": ("header", "-k", "NOPE", image),
        "suffix on an output": ("copy", image, f"{tmp_path / 'out.fits'}[1]"),
        "box outside the image": ("cutout", image, tmp_path / "far.fits", "-e", "1",
                                  "--box", "300,300,310,310"),
        "table to compress -e": ("compress", "-e", "1", catalog, tmp_path / "z.fits"),
        "plain image to decompress -e": ("decompress", "-e", "1", image, tmp_path / "d.fits"),
    }


CASES = list(bad_arguments("i", "c", Path("unused")))  # names only: nothing is written


@pytest.mark.parametrize("case", CASES)
def test_exit_2_bad_arguments(case, samples, capsys, tmp_path):
    _, image, catalog = samples
    argv = bad_arguments(image, catalog, tmp_path)[case]
    (tmp_path / "exists.parquet").write_bytes(b"x")
    code, out, err = run(capsys, *argv)
    assert code == 2, (case, err)
    one_line(err)
    assert not (tmp_path / "out.fits[1]").exists() and not (tmp_path / "far.fits").exists()


@pytest.mark.parametrize("what", ["missing", "corrupt", "truncated"])
def test_exit_3_unreadable_files(what, samples, capsys, tmp_path):
    _, image, _ = samples
    path = tmp_path / f"{what}.fits"
    if what == "corrupt":
        path.write_bytes(b"not a fits file at all" * 200)
    elif what == "truncated":
        path.write_bytes(Path(image).read_bytes()[:2880 * 3])
    command = ("stats", "-e", "1") if what == "truncated" else ("info",)
    code, _, err = run(capsys, *command, path)
    assert code == 3 and str(path) in one_line(err)


def checksummed_and_data_flipped(tmp_path):
    """A file with CHECKSUM/DATASUM, and a copy with one data bit flipped."""
    good = tmp_path / "g.fits"
    torchfits.write(str(good), np.arange(10, dtype="f4"), checksum=True)
    raw = bytearray(good.read_bytes())
    raw[2880] ^= 1
    bad = tmp_path / "data.fits"
    bad.write_bytes(bytes(raw))
    return good, bad


def test_exit_4_checksum_failure(samples, capsys, tmp_path):
    good, bad = checksummed_and_data_flipped(tmp_path)
    assert run(capsys, "verify", good)[0] == 0
    assert run(capsys, "verify", bad)[0] == 4


def test_exit_5_internal_error_with_traceback(samples, capsys, monkeypatch):
    from torchfits.cli import main as cli_main

    _, image, _ = samples

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli_main, "cmd_info", broken)
    code, _, err = run(capsys, "info", image)
    assert code == 5 and "Traceback" in err and "a bug" in err


def test_exit_130_interrupted(samples, capsys, monkeypatch):
    from torchfits.cli import main as cli_main

    _, image, _ = samples

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "cmd_info", interrupted)
    assert run(capsys, "info", image)[0] == 130


# -- the friction of issue 23 -----------------------------------------------------------------------
def test_cutout_of_a_table_is_a_usage_error_naming_the_hdu(samples, capsys, tmp_path):
    _, _, catalog = samples
    code, _, err = run(capsys, "cutout", catalog, tmp_path / "c.fits", "--box", "0,0,2,2")
    assert code == 2
    assert one_line(err) == (f"torchfits cutout: {catalog}: HDU 1 (CATALOG) is a table; "
                             "cutout cuts images")
    assert not (tmp_path / "c.fits").exists()


def test_cutout_of_random_groups_is_a_usage_error(capsys, tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    groups = tmp_path / "groups.fits"
    data = fits.GroupData(np.arange(24, dtype=np.float32).reshape(3, 2, 4), parnames=["U"],
                          pardata=[np.arange(3.0)], bitpix=-32)
    fits.GroupsHDU(data).writeto(groups)
    code, _, err = run(capsys, "cutout", groups, tmp_path / "c.fits", "--hdu", "0",
                       "--box", "0,0,2,2")
    assert code == 2
    assert one_line(err) == (f"torchfits cutout: {groups}: HDU 0 (PRIMARY) is a random-groups "
                             "HDU; cutout cuts images")
    assert not (tmp_path / "c.fits").exists()


def test_header_of_a_missing_keyword_names_keyword_file_and_hdu(samples, capsys):
    _, image, catalog = samples
    code, out, err = run(capsys, "header", "-e", "SCI", "-k", "NOPE", image)
    assert code == 2 and out == ""
    assert one_line(err) == f"torchfits header: {image}: no keyword 'NOPE' in HDU 1 (SCI)"
    code, _, err = run(capsys, "header", "-k", "NOPE*", image)
    assert code == 2 and "no keyword matches 'NOPE*' in any of HDUs 0 (PRIMARY), 1 (SCI), 2 (MASK)" in err
    # a keyword some HDUs have is not an error (the others just lack it)
    code, out, _ = run(capsys, "header", "-k", "EXPTIME", image)
    assert code == 0 and "EXPTIME" in out
    code, out, _ = run(capsys, "header", "-k", "EXTNAME", "--keyword-table", image)
    assert code == 0
    # in a keyword table a file without the keyword is a row of `-`; no file with it, an error
    code, out, _ = run(capsys, "header", "-e", "1", "-k", "NAXIS", "-k", "EXPTIME",
                       "--keyword-table", "--json", image, catalog)
    assert code == 0 and [r["EXPTIME"] for r in json.loads(out)] == [30.0, None]
    code, out, err = run(capsys, "header", "-k", "NOPE", "--keyword-table", image, catalog)
    assert code == 2 and out == ""
    assert one_line(err) == (f"torchfits header: no keyword 'NOPE' in any HDU shown of {image}, "
                             f"{catalog}")


def test_verify_says_which_card_failed(samples, capsys, tmp_path):
    _, image, _ = samples
    good, data = checksummed_and_data_flipped(tmp_path)
    raw = bytearray(good.read_bytes())
    at = raw.index(b"BITPIX")  # change a comment byte: the header no longer sums to zero
    raw[at + 79] = ord("x") if raw[at + 79] != ord("x") else ord("y")
    head = tmp_path / "head.fits"
    head.write_bytes(bytes(raw))
    code, out, _ = run(capsys, "verify", good, data, head, image)
    lines = out.splitlines()
    assert code == 4
    assert lines[0] == f"{good}[0] PRIMARY: OK (CHECKSUM and DATASUM verify)"
    assert lines[1].startswith(f"{data}[0] PRIMARY: FAIL: DATASUM '")
    assert "does not match the data" in lines[1] and "data=-1" not in lines[1]
    assert lines[2].startswith(f"{head}[0] PRIMARY: FAIL: CHECKSUM '")
    assert lines[2].endswith("the header changed after it was written (DATASUM verifies)")
    assert f"{image}[1] SCI: OK (no CHECKSUM or DATASUM card)" in lines
    code, out, _ = run(capsys, "verify", "--json", data)
    record = json.loads(out)[0]
    assert record["datastatus"] == -1 and record["message"].startswith("FAIL: DATASUM")


@pytest.mark.parametrize("command", ["copy", "cutout", "convert", "compress", "setkey", "sql"])
def test_an_hdu_suffix_on_an_output_is_refused(command, samples, capsys, tmp_path):
    _, image, catalog = samples
    out = tmp_path / "out.fits"
    argv = {
        "copy": ("copy", image, f"{out}[1]"),
        "cutout": ("cutout", image, f"{out}[SCI]", "-e", "1", "--box", "0,0,2,2"),
        "convert": ("convert", catalog, f"{tmp_path / 'o.parquet'}[1]"),
        "compress": ("compress", image, f"{out}[1]"),
        "setkey": ("setkey", image, "-k", "A", "--value", "1", "-o", f"{out}[0]"),
        "sql": ("sql", "SELECT 1 AS x", "-o", f"{out}[1]"),
    }[command]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "an output is a whole file" in one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_positionals_may_follow_options(samples, capsys, tmp_path):
    _, image, _ = samples
    cut = tmp_path / "cut.fits"
    code, _, err = run(capsys, "cutout", image, "-e", "SCI", "--box", "0,0,3,2", cut)
    assert code == 0, err
    assert torchfits.read_numpy(str(cut)).shape == (2, 3)
    code, out, _ = run(capsys, "info", "--json", image, "-e", "2", Path(image))
    assert code == 0 and len(json.loads(out)) == 2


def test_info_shows_random_groups_and_aligns_long_type_names(capsys, tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    groups = tmp_path / "groups.fits"
    data = fits.GroupData(np.arange(24, dtype=np.float32).reshape(3, 2, 4), parnames=["U", "V"],
                          pardata=[np.arange(3.0), np.arange(3.0)], bitpix=-32)
    fits.GroupsHDU(data).writeto(groups)
    comp = tmp_path / "comp.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(np.zeros((4, 5), np.int16), name="X")]
                 ).writeto(comp)
    code, out, _ = run(capsys, "info", groups, comp)
    lines = out.splitlines()
    assert code == 0
    header = lines[0].split()
    assert header == ["file", "hdu", "name", "type", "shape", "dtype", "codec", "groups", "params"]
    row = dict(zip(header, lines[1].split()))
    assert row["type"] == "GROUPS" and row["groups"] == "3" and row["params"] == "2"
    assert row["shape"] == "3x2x4" and row["dtype"] == "float32"
    assert lines[3].split()[3] == "COMPRESSED_IMAGE"
    # every column starts at the same offset on every line, whatever the length of the type
    for name in ("shape", "dtype", "codec"):
        at = lines[0].index(name)
        assert all(line[at - 2:at] == "  " for line in lines), name
    code, out, _ = run(capsys, "info", "--json", groups)
    assert json.loads(out)[0]["groups"] == 3 and json.loads(out)[0]["shape"] == [3, 2, 4]


@pytest.mark.parametrize("command", ["verify", "copy", "diff", "info"])
def test_a_truncated_file_is_unreadable_not_ok(command, samples, capsys, tmp_path):
    _, image, _ = samples
    cut = tmp_path / "cut.fits"
    cut.write_bytes(Path(image).read_bytes()[:5000])
    argv = {"verify": ("verify", cut), "copy": ("copy", cut, tmp_path / "copy.fits"),
            "diff": ("diff", image, cut), "info": ("info", "--json", cut)}[command]
    code, out, err = run(capsys, *argv)
    assert code == 3 and "truncated" in one_line(err)
    assert not (tmp_path / "copy.fits").exists()
    if command == "info":  # the HDUs whose headers are there are still listed
        assert [r["name"] for r in json.loads(out)] == ["PRIMARY", "SCI"]


def test_setkey_refuses_before_changing_anything(samples, capsys, tmp_path):
    _, image, _ = samples
    out = tmp_path / "edited.fits"
    # renaming onto a keyword that exists would hide a card (astropy refuses it too)
    code, _, err = run(capsys, "setkey", image, "-e", "SCI", "--rename", "EXPTIME=OBJECT", "-o", out)
    assert code == 2 and "cannot rename EXPTIME to OBJECT: OBJECT exists" in one_line(err)
    # a keyword missing from the second HDU: neither HDU is edited, no copy is left behind
    code, _, err = run(capsys, "setkey", image, "-e", "1,2", "--delete", "EXPTIME", "-o", out)
    assert code == 2 and one_line(err).endswith("[2]: missing keyword EXPTIME")
    assert list(tmp_path.iterdir()) == []
    work = tmp_path / "work.fits"
    work.write_bytes(Path(image).read_bytes())
    before = work.read_bytes()
    assert run(capsys, "setkey", work, "-e", "1,2", "--delete", "EXPTIME")[0] == 2
    assert work.read_bytes() == before
    code, _, _ = run(capsys, "setkey", image, "-e", "SCI", "--rename", "EXPTIME=OBJECT",
                     "--delete", "OBJECT", "-o", out)
    assert code == 0 and torchfits.read_header(str(out), 1)["OBJECT"] == 30.0

"""The ``torchfits`` command line: one grammar for every command (HDU selection, CFITSIO
suffixes, --overwrite, ``-`` for stdout, exit codes, batch errors, typed JSON), and each
command's output."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchfits
from _cli import run


def one_line_error(err):
    lines = err.strip().splitlines()
    assert lines and "Traceback" not in err, err
    return lines


# -- info -------------------------------------------------------------------------------------
def test_info_text_is_an_aligned_table_in_a_readable_order(samples, capsys):
    _, image, catalog = samples
    code, out, _ = run(capsys, "info", image, catalog)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["file", "hdu", "name", "type", "shape", "dtype", "nrows", "ncols"]
    assert len(lines) == 1 + 3 + 2
    assert lines[1].split()[2:4] == ["PRIMARY", "EMPTY"]  # an empty primary is not "UNKNOWN"
    assert lines[2].split()[2:6] == ["SCI", "IMAGE", "256x256", "float32"]
    assert lines[5].split()[2:] == ["CATALOG", "BINTABLE", "-", "-", "10000", "8"]
    # columns line up: every row has the same width up to its last field
    assert len({line.index("hdu") if k == 0 else None for k, line in enumerate(lines)} - {None}) == 1


def test_info_json_values_are_typed(samples, capsys):
    _, image, catalog = samples
    code, out, _ = run(capsys, "info", "--json", catalog, image)
    records = json.loads(out)
    assert records[1] == {"file": catalog, "hdu": 1, "name": "CATALOG", "type": "BINTABLE",
                          "nrows": 10000, "ncols": 8}
    sci = records[3]
    assert sci["shape"] == [256, 256] and sci["dtype"] == "float32" and sci["hdu"] == 1
    code, out, _ = run(capsys, "info", "-f", "jsonl", "-e", "2", image)
    assert json.loads(out)["name"] == "MASK"


def test_hdu_selection_by_extname_and_suffix(samples, capsys):
    _, image, _ = samples
    code, out, _ = run(capsys, "info", "--json", "-e", "SCI,2", image)
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["SCI", "MASK"]
    code, out, _ = run(capsys, "info", "--json", "-e", "mask", image)  # EXTNAMEs are case-blind
    assert [r["hdu"] for r in json.loads(out)] == [2]
    for suffix in ("[1]", "[SCI]"):
        code, out, _ = run(capsys, "info", "--json", image + suffix)
        assert code == 0 and [r["name"] for r in json.loads(out)] == ["SCI"]
        code, out, _ = run(capsys, "stats", "--json", image + suffix)
        assert code == 0 and [r["name"] for r in json.loads(out)] == ["SCI"]
        code, out, _ = run(capsys, "header", "--json", "-k", "EXTNAME", image + suffix)
        assert code == 0 and [r["value"] for r in json.loads(out)] == ["SCI"]
    code, _, err = run(capsys, "info", "-e", "2", image + "[1]")
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "info", "-e", "NOPE", image)
    assert code == 2 and "no HDU named 'NOPE'" in err
    code, _, err = run(capsys, "info", image + "[1:5,1:5]")
    assert code == 2 and "cutout" in one_line_error(err)[0]


def test_exit_codes_and_one_line_errors(samples, capsys, tmp_path):
    _, image, _ = samples
    code, _, err = run(capsys, "info", tmp_path / "missing.fits")
    assert code == 3 and "missing.fits" in one_line_error(err)[0]
    for argv in (("info", "-e", "9", image), ("info", "-e", "x,", image), ("info", "-e", "-1", image),
                 ("nosuchcommand",), ("info", "--bogus", image), ("sql",),
                 ("convert", image, "x", "--to", "xml"), ()):
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        one_line_error(err) if argv else None
    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"not a fits file at all" * 200)
    code, _, err = run(capsys, "info", junk)
    assert code == 3 and str(junk) in one_line_error(err)[0]


def test_batch_reports_bad_files_and_processes_the_rest(samples, capsys, tmp_path):
    _, image, catalog = samples
    missing = tmp_path / "missing.fits"
    for command in ("info", "header", "verify"):
        code, out, err = run(capsys, command, image, missing, catalog)
        assert code == 3, command
        assert image in out and catalog in out, command
        assert len(one_line_error(err)) == 1 and "missing.fits" in err
    code, out, err = run(capsys, "stats", "--json", image, missing)
    assert code == 3 and [r["name"] for r in json.loads(out)] == ["SCI", "MASK"]
    # a bad argument for one file (an HDU it lacks) is exit 2, the others still done
    code, out, err = run(capsys, "info", "--json", "-e", "2", catalog, image)
    assert code == 2 and [r["name"] for r in json.loads(out)] == ["MASK"]
    assert "out of range" in err


def test_paths_from_a_list_file_and_stdin(samples, capsys, tmp_path, monkeypatch):
    _, image, catalog = samples
    listing = tmp_path / "list.txt"
    listing.write_text(f"# my files\n{image}\n\n{catalog}\n")
    code, out, _ = run(capsys, "info", "--json", f"@{listing}")
    assert code == 0 and {r["file"] for r in json.loads(out)} == {image, catalog}
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{catalog}\n"))
    code, out, _ = run(capsys, "info", "--json", "--stdin")
    assert {r["file"] for r in json.loads(out)} == {catalog}


# -- header -----------------------------------------------------------------------------------
def test_header_command(samples, capsys):
    _, image, _ = samples
    code, out, _ = run(capsys, "header", "-e", "SCI", image)
    assert code == 0
    assert out.startswith(f"# HDU 1 (SCI) in {image}:")
    assert "EXPTIME =                 30.0" in out
    code, out, _ = run(capsys, "header", "-k", "NAXIS*", "--json", "-e", "1", image)
    rows = json.loads(out)
    assert [r["keyword"] for r in rows] == ["NAXIS", "NAXIS1", "NAXIS2"]
    assert rows[1]["value"] == 256 and isinstance(rows[1]["value"], int)  # typed, not "256"
    code, out, _ = run(capsys, "header", "-k", "EXPTIME", "-k", "SIMPLE", "--json", image)
    values = {r["keyword"]: r["value"] for r in json.loads(out)}
    assert values == {"SIMPLE": True, "EXPTIME": 30.0}
    code, out, _ = run(capsys, "header", "--keyword-table", "-k", "EXTNAME", "-k", "NAXIS", image)
    lines = out.splitlines()
    assert lines[0].split() == ["file", "hdu", "name", "EXTNAME", "NAXIS"]
    assert lines[2].split()[-2:] == ["SCI", "2"] and lines[1].split()[-2:] == ["-", "0"]
    code, out, _ = run(capsys, "header", "--keyword-table", "-k", "NAXIS", "--json", image)
    assert [r["NAXIS"] for r in json.loads(out)] == [0, 2, 2]
    code, _, err = run(capsys, "header", "--keyword-table", image)
    assert code == 2 and "requires -k" in err


# -- stats, table, diff -----------------------------------------------------------------------
def test_stats(samples, capsys):
    _, image, catalog = samples
    code, out, _ = run(capsys, "stats", "--json", image)
    records = json.loads(out)
    assert [r["name"] for r in records] == ["SCI", "MASK"]
    sci = torchfits.read_numpy(image, "SCI")
    assert records[0]["shape"] == [256, 256]
    assert records[0]["max"] == pytest.approx(float(sci.max()))
    assert records[0]["mean"] == pytest.approx(float(sci.mean(dtype=np.float64)))
    assert records[0]["std"] == pytest.approx(float(sci.std(dtype=np.float64)))
    assert records[0]["median"] == pytest.approx(float(np.sort(sci.ravel())[(sci.size - 1) // 2]))
    assert isinstance(records[1]["max"], int)
    code, out, _ = run(capsys, "stats", image)
    assert out.splitlines()[0].split() == ["file", "hdu", "name", "shape", "dtype", "min", "max",
                                           "mean", "std", "median"]
    code, out, err = run(capsys, "stats", catalog)  # a table-only file is not silently empty
    assert code == 2 and out == "" and "no image HDU" in err
    code, _, err = run(capsys, "stats", "-e", "CATALOG", catalog)
    assert code == 2 and "not an image" in err


def test_table_preview(samples, capsys):
    _, image, catalog = samples
    code, out, _ = run(capsys, "table", "-n", "2", catalog)
    assert code == 0
    assert "mag_r: float" in out and "name: string" in out
    preview = out.split("\n\n", 1)[1].splitlines()
    assert preview[0].split() == ["id", "ra", "dec", "mag_g", "mag_r", "flags", "star", "name"]
    assert [line.split()[0] for line in preview[1:]] == ["0", "1"]
    code, out, _ = run(capsys, "table", "-n", "0", catalog)
    assert "\n\n" not in out
    code, out, _ = run(capsys, "table", "-n", "1", "--json", catalog)
    (rec,) = json.loads(out)
    assert rec["nrows"] == 10000 and rec["schema"]["star"] == "bool"
    assert rec["rows"][0]["id"] == 0 and rec["rows"][0]["star"] in (True, False)
    code, out, err = run(capsys, "table", image)
    assert code == 2 and out == "" and "no table HDU" in err
    assert run(capsys, "table", "-n", "-1", catalog)[0] == 2


def test_diff(samples, capsys, tmp_path):
    _, image, _ = samples
    assert run(capsys, "diff", image, image)[0] == 0
    other = tmp_path / "other.fits"
    data = torchfits.read_numpy(image, "SCI").copy()
    data[0, 0] += 1e5
    torchfits.write(str(other), [np.empty(0, np.uint8), data], overwrite=True)
    code, out, _ = run(capsys, "diff", image, other)
    assert code == 1 and "HDU count: 3 vs 2" in out
    assert "HDU 1 (SCI/HDU1) pixel [0, 0]: " in out  # every pixel is compared (tests/cli/test_cli_diff.py)
    assert run(capsys, "diff", image, tmp_path / "nope.fits")[0] == 3
    assert run(capsys, "diff", f"{image}[SCI]", image)[0] == 2


# -- outputs: copy, cutout, convert --------------------------------------------------------------
def test_copy_refuses_existing_outputs_without_overwrite(samples, capsys, tmp_path):
    _, image, catalog = samples
    dst = tmp_path / "copy.fits"
    assert run(capsys, "copy", image, dst)[0] == 0
    assert dst.read_bytes() == Path(image).read_bytes()
    code, _, err = run(capsys, "copy", catalog, dst)
    assert code == 2 and "--overwrite" in one_line_error(err)[0]
    assert dst.read_bytes() == Path(image).read_bytes()
    assert run(capsys, "copy", catalog, dst, "--overwrite")[0] == 0
    assert dst.read_bytes() == Path(catalog).read_bytes()
    out_dir = tmp_path / "many"
    assert run(capsys, "copy", image, catalog, "--out-dir", out_dir)[0] == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["sample_catalog.fits", "sample_image.fits"]
    assert run(capsys, "copy", image, catalog, "--out-dir", out_dir)[0] == 2
    assert run(capsys, "copy", image, "-")[0] == 2  # FITS never goes to stdout
    code, _, err = run(capsys, "copy", f"{image}[1]", tmp_path / "part.fits")
    assert code == 2 and "whole files" in one_line_error(err)[0]


def test_cutout(samples, capsys, tmp_path):
    _, image, _ = samples
    sci = torchfits.read_numpy(image, "SCI")
    cut = tmp_path / "cut.fits"
    assert run(capsys, "cutout", "-e", "SCI", "--box", "10,20,30,25", image, cut)[0] == 0
    np.testing.assert_array_equal(torchfits.read_numpy(str(cut)), sci[20:25, 10:30])
    assert torchfits.read_header(str(cut))["EXPTIME"] == 30.0
    code, _, err = run(capsys, "cutout", "-e", "1", "--box", "0,0,5,5", image, cut)
    assert code == 2 and "--overwrite" in err
    assert run(capsys, "cutout", "-e", "1", "--box", "0,0,5,5", image, cut, "--overwrite")[0] == 0
    assert torchfits.read_numpy(str(cut)).shape == (5, 5)

    cut2 = tmp_path / "cut2.fits"
    assert run(capsys, "cutout", f"{image}[SCI][11:30,21:25]", cut2)[0] == 0
    np.testing.assert_array_equal(torchfits.read_numpy(str(cut2)), sci[20:25, 10:30])
    assert run(capsys, "cutout", image, tmp_path / "c3.fits")[0] == 2  # neither box nor section
    assert run(capsys, "cutout", f"{image}[1][1:2,1:2]", "--box", "0,0,1,1", tmp_path / "c4.fits")[0] == 2
    assert run(capsys, "cutout", "--box", "5,5,1,1", image, tmp_path / "c5.fits")[0] == 2


def test_convert(samples, capsys, tmp_path):
    import pyarrow.parquet as pq
    _, _, catalog = samples
    out = tmp_path / "bright.parquet"
    assert run(capsys, "convert", catalog, out, "-w", "mag_r < 15", "-c", "id,mag_r")[0] == 0
    got = pq.read_table(out)
    want = torchfits.scan(catalog, columns=["id", "mag_r"], where="mag_r < 15").to_arrow()
    assert got.column_names == ["id", "mag_r"] and got.num_rows == want.num_rows
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    code, _, err = run(capsys, "convert", catalog, out, "-c", "id")
    assert code == 2 and "--overwrite" in err
    assert run(capsys, "convert", catalog, "-o", out, "-c", "id", "--overwrite")[0] == 0
    assert pq.read_table(out).column_names == ["id"]

    csv = tmp_path / "bright.txt"
    assert run(capsys, "convert", catalog, csv, "--to", "csv", "-c", "id")[0] == 0
    assert csv.read_text().splitlines()[0].strip('"') == "id"
    assert run(capsys, "convert", catalog, tmp_path / "x.unknown")[0] == 2

    js = tmp_path / "b.json"
    assert run(capsys, "convert", f"{catalog}[CATALOG]", js, "-w", "mag_r < 14", "-c", "id,star,name")[0] == 0
    rows = json.loads(js.read_text())
    assert rows and set(rows[0]) == {"id", "star", "name"}
    assert isinstance(rows[0]["id"], int) and isinstance(rows[0]["star"], bool)


def test_convert_bad_arguments_are_one_line_exit_2(samples, capsys, tmp_path):
    _, image, catalog = samples
    for extra in (("-w", "magr<16"), ("-w", "mag_r <<< 3"), ("-c", "id,nope")):
        code, _, err = run(capsys, "convert", catalog, tmp_path / "o.parquet", *extra)
        assert code == 2, extra
        assert catalog in one_line_error(err)[0]
    assert not (tmp_path / "o.parquet").exists()
    arrays = tmp_path / "arrays.fits"
    torchfits.write(str(arrays), {"v": np.ones((4, 3)), "x": np.arange(4)}, overwrite=True)
    code, _, err = run(capsys, "convert", arrays, tmp_path / "a.csv")
    assert code == 2 and "array columns (v)" in one_line_error(err)[0]
    assert not (tmp_path / "a.csv").exists()
    assert run(capsys, "convert", arrays, tmp_path / "a.csv", "-c", "x")[0] == 0
    code, _, err = run(capsys, "convert", image, tmp_path / "i.parquet")
    assert code == 2 and "table" in err


def test_convert_to_stdout(samples, capsys, tmp_path):
    _, _, catalog = samples
    code, out, _ = run(capsys, "convert", catalog, "-", "-w", "mag_r < 13", "-c", "id,name")
    assert code == 0 and not (Path.cwd() / "-").exists()
    lines = out.splitlines()
    want = torchfits.scan(catalog, columns=["id"], where="mag_r < 13").to_arrow().column("id").to_pylist()
    assert lines[0] == '"id","name"' and [int(line.split(",")[0]) for line in lines[1:]] == want
    code, out, _ = run(capsys, "convert", catalog, "-o", "-", "--to", "jsonl", "-c", "id,mag_r",
                       "-w", "mag_r < 13")
    assert [json.loads(line)["id"] for line in out.splitlines()] == want
    import pyarrow as pa
    result = subprocess.run([sys.executable, "-m", "torchfits.cli", "convert", catalog, "-", "--to",
                             "arrow", "-c", "id", "-w", "mag_r < 13"], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    table = pa.ipc.open_stream(result.stdout).read_all()
    assert table.column("id").to_pylist() == want
    assert run(capsys, "convert", catalog, "-", "--to", "fits")[0] == 2


# -- verify, setkey, compress, index ------------------------------------------------------------
def test_verify(samples, capsys, tmp_path):
    _, image, _ = samples
    good = tmp_path / "g.fits"
    torchfits.write(str(good), np.arange(10, dtype="f4"), checksum=True)
    code, out, _ = run(capsys, "verify", "--json", good, image)
    records = json.loads(out)
    assert code == 0 and records[0]["ok"] is True and records[0]["status"] == "ok"
    raw = bytearray(good.read_bytes())
    raw[2880] ^= 1
    bad = tmp_path / "b.fits"
    bad.write_bytes(bytes(raw))
    code, out, _ = run(capsys, "verify", bad, image)
    assert code == 4 and "FAIL" in out and f"{image}[1] SCI: OK (no CHECKSUM or DATASUM card)" in out


def test_setkey(samples, capsys, tmp_path):
    _, image, _ = samples
    work = tmp_path / "w.fits"
    work.write_bytes(Path(image).read_bytes())
    assert run(capsys, "setkey", work, "-e", "SCI", "-k", "GAIN", "--value", "2.5")[0] == 0
    assert torchfits.read_header(str(work), "SCI")["GAIN"] == 2.5
    assert run(capsys, "setkey", f"{work}[MASK]", "-k", "GAIN", "--value", "3")[0] == 0
    assert torchfits.read_header(str(work), "MASK")["GAIN"] == 3
    copy = tmp_path / "copy.fits"
    assert run(capsys, "setkey", work, "-k", "OBSERVER", "--value", "me", "-o", copy)[0] == 0
    assert torchfits.read_header(str(copy))["OBSERVER"] == "me"
    assert "OBSERVER" not in torchfits.read_header(str(work))
    code, _, err = run(capsys, "setkey", work, "-k", "OBSERVER", "--value", "you", "-o", copy)
    assert code == 2 and "--overwrite" in err
    assert run(capsys, "setkey", work, "-k", "OBSERVER", "--value", "you", "-o", copy, "--overwrite")[0] == 0
    assert torchfits.read_header(str(copy))["OBSERVER"] == "you"
    code, _, err = run(capsys, "setkey", work, "--delete", "NOPE")
    assert code == 2 and "missing keyword" in one_line_error(err)[0]
    code, _, err = run(capsys, "setkey", work, tmp_path / "missing.fits", "-k", "A", "--value", "1")
    assert code == 3 and torchfits.read_header(str(work))["A"] == 1


def test_compress_and_decompress(samples, capsys, tmp_path):
    _, image, _ = samples
    src = tmp_path / "img.fits"
    src.write_bytes(Path(image).read_bytes())
    code, out, _ = run(capsys, "compress", src, "--json")
    assert code == 0 and json.loads(out) == [{"file": str(src), "output": f"{src}.fz", "hdus": 2}]
    code, _, err = run(capsys, "compress", src)
    assert code == 2 and "--overwrite" in err
    assert run(capsys, "compress", src, "--overwrite", "--algorithm", "GZIP_2", "-e", "SCI")[0] == 0
    hdus = torchfits.info(f"{src}.fz")
    assert [h.type for h in hdus] == ["EMPTY", "COMPRESSED_IMAGE", "IMAGE"]
    assert hdus[1].dtype == "float32" and hdus[1].name == "SCI" and hdus[1].codec == "GZIP_2"
    back = tmp_path / "back.fits"
    assert run(capsys, "decompress", f"{src}.fz", back)[0] == 0
    np.testing.assert_array_equal(torchfits.read_numpy(str(back), "SCI"),
                                  torchfits.read_numpy(f"{src}.fz", "SCI"))  # float: quantised
    assert run(capsys, "decompress", f"{src}.fz", back)[0] == 2
    code, _, err = run(capsys, "compress", src, tmp_path / "missing.fits", tmp_path / "x.fits",
                       "--out-dir", tmp_path / "out")
    assert code == 3 and (tmp_path / "out" / "img.fits.fz").exists()


def test_index_build(samples, capsys, tmp_path):
    _, _, catalog = samples
    cats = tmp_path / "cats"
    cats.mkdir()
    for k in range(2):
        (cats / f"c{k}.fits").write_bytes(Path(catalog).read_bytes())
    code, _, err = run(capsys, "index", "build", cats, "-c", "ra,nope")
    assert code == 2 and "'nope'" in one_line_error(err)[0]
    assert not (cats / "_torchfits_index.json").exists()
    code, out, _ = run(capsys, "index", "build", cats, "-c", "ra,mag_r", "--json")
    (rec,) = json.loads(out)
    assert code == 0 and rec["files"] == 2 and rec["columns"] == ["mag_r", "ra"]
    assert run(capsys, "index", "build", cats)[0] == 2
    assert run(capsys, "index", "build", cats, "--overwrite")[0] == 0
    assert run(capsys, "index", "build", cats, "-e", "CATALOG", "--overwrite")[0] == 0


def test_index_build_over_urls_writes_beside_them(samples, capsys):
    fsspec = pytest.importorskip("fsspec")
    _, _, catalog = samples
    fs = fsspec.filesystem("memory")
    for k in range(2):
        fs.pipe_file(f"/clicats/c{k}.fits", Path(catalog).read_bytes())
    code, out, _ = run(capsys, "index", "build", "memory://clicats/*.fits", "-c", "ra", "--json")
    (rec,) = json.loads(out)
    assert code == 0 and rec["index"] == "memory://clicats/_torchfits_index.json" and rec["files"] == 2
    code, _, err = run(capsys, "index", "build", "memory://clicats/*.fits")
    assert code == 2 and "--overwrite" in one_line_error(err)[0]
    assert run(capsys, "index", "build", "memory://clicats/*.fits", "--overwrite")[0] == 0
    ds = torchfits.dataset("memory://clicats/*.fits")
    assert all(f.stats is not None for f in ds.get_fragments())


# -- sql ----------------------------------------------------------------------------------------
@pytest.fixture
def cats(samples, tmp_path):
    pytest.importorskip("duckdb")
    _, _, catalog = samples
    d = tmp_path / "cats"
    d.mkdir()
    for k in range(2):
        (d / f"c{k}.fits").write_bytes(Path(catalog).read_bytes())
    return d


def test_sql_prints_an_aligned_table(cats, capsys, monkeypatch):
    monkeypatch.chdir(cats.parent)
    code, out, err = run(capsys, "sql", "SELECT count(*) AS n, min(id) AS lo FROM 'cats/*.fits' "
                                        "WHERE mag_r < 16")
    want = torchfits.scan(str(cats / "c0.fits"), columns=["id"], where="mag_r < 16").count_rows()
    assert code == 0 and out.splitlines()[0].split() == ["n", "lo"]
    second = out.splitlines()[1].split()
    assert second == [str(2 * want), "0"] or second[0] == str(2 * want)
    assert "(1 row)" in err
    code, out, _ = run(capsys, "sql", "SELECT id, star, ra FROM 'cats/c0.fits' ORDER BY id LIMIT 2",
                       "--json")
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [0, 1] and isinstance(rows[0]["star"], bool)
    assert isinstance(rows[0]["ra"], float)


def test_sql_writes_outputs(cats, capsys, monkeypatch):
    import pyarrow.parquet as pq
    monkeypatch.chdir(cats.parent)
    query = "SELECT id, mag_r FROM 'cats/*.fits' WHERE mag_r < 14 ORDER BY id"
    want = torchfits.scan(str(cats / "c0.fits"), columns=["id"], where="mag_r < 14").to_arrow()
    assert run(capsys, "sql", query, "-o", "out.parquet")[0] == 0
    assert pq.read_table("out.parquet").num_rows == 2 * want.num_rows
    code, _, err = run(capsys, "sql", query, "-o", "out.parquet")
    assert code == 2 and "--overwrite" in err
    assert run(capsys, "sql", query, "-o", "out.parquet", "--overwrite")[0] == 0
    assert run(capsys, "sql", query, "-o", "out.fits")[0] == 0
    assert torchfits.read_nrows("out.fits") == 2 * want.num_rows
    assert run(capsys, "sql", query, "-o", "out.json")[0] == 0
    assert len(json.loads(Path("out.json").read_text())) == 2 * want.num_rows
    code, out, _ = run(capsys, "sql", query, "-o", "-")
    assert out.splitlines()[0] == '"id","mag_r"' and len(out.splitlines()) == 1 + 2 * want.num_rows
    code, _, err = run(capsys, "sql", "SELECT idx FROM 'cats/*.fits'")
    assert code == 2 and "idx" in one_line_error(err)[0]
    code, _, err = run(capsys, "sql", "SELEKT 1")
    assert code == 2 and one_line_error(err)
    code, _, err = run(capsys, "sql", "SELECT * FROM 'nothing/*.fits'")
    assert code in (2, 3) and one_line_error(err)
    assert run(capsys, "sql", "SELECT 1", "--to", "csv")[0] == 2


def test_sql_in_a_fresh_process_never_imports_pandas(cats):
    """A fresh ``torchfits sql`` reports pandas absent to DuckDB (which imports it on registering
    any Python object): every output format still comes out right, and a process that has
    pandas already keeps it."""
    query = "SELECT id, mag_r FROM 'cats/*.fits' WHERE mag_r < 14 ORDER BY id"
    want = 2 * torchfits.scan(str(cats / "c0.fits"), columns=["id"], where="mag_r < 14").count_rows()
    script = f"""
import contextlib, io, json, sys
from torchfits.cli.main import main
query = {query!r}
for out in ("out.parquet", "out.fits", "out.json", "out.csv", "out.arrow"):
    assert main(["sql", query, "-o", out]) == 0, out
with contextlib.redirect_stdout(io.StringIO()) as text:
    assert main(["sql", query]) == 0
assert "pandas" not in sys.modules and len(text.getvalue().splitlines()) == 1 + {want}
import pyarrow.csv, pyarrow.ipc, pyarrow.parquet, torchfits
assert pyarrow.parquet.read_table("out.parquet").num_rows == {want}
assert pyarrow.csv.read_csv("out.csv").num_rows == {want}
assert pyarrow.ipc.open_stream("out.arrow").read_all().num_rows == {want}
assert torchfits.read_nrows("out.fits") == {want} and len(json.load(open("out.json"))) == {want}
import pandas
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["sql", query]) == 0
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=cats.parent, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr


# -- progress, demo ------------------------------------------------------------------------------
def test_progress_bars_only_when_asked_or_on_a_terminal(samples, tmp_path):
    pytest.importorskip("tqdm")
    _, image, _ = samples
    paths = []
    for k in range(3):
        p = tmp_path / f"i{k}.fits"
        p.write_bytes(Path(image).read_bytes())
        paths.append(str(p))
    base = [sys.executable, "-m", "torchfits.cli", "compress", *paths, "--out-dir"]
    quiet = subprocess.run(base + [str(tmp_path / "a")], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == ""  # stderr is a pipe: no bar
    loud = subprocess.run(base + [str(tmp_path / "b"), "--progress"], capture_output=True, text=True,
                          timeout=120)
    # the bar redraws at most every 0.1 s, so which counts appear depends on speed
    assert loud.returncode == 0 and "compress" in loud.stderr and "/3 [" in loud.stderr


def test_python_progress_option(tmp_path, samples, capsys):
    pytest.importorskip("tqdm")
    from torchfits._progress import progress_bar

    with progress_bar(total=2, desc="work", enabled=True) as bar:
        bar.update(2)
    assert "work" in capsys.readouterr().err
    with progress_bar(total=2, desc="work", enabled=False) as bar:
        bar.update(2)
    with progress_bar(total=2, desc="work", enabled=None) as bar:  # not a terminal here
        bar.update(2)
    assert capsys.readouterr().err == ""
    _, image, catalog = samples
    table = torchfits.scan([catalog, catalog], columns=["id"]).to_arrow(progress=True)
    assert table.num_rows == 20000 and "scan" in capsys.readouterr().err
    assert torchfits.scan(catalog, columns=["id"]).to_arrow().num_rows == 10000
    assert capsys.readouterr().err == ""  # off by default
    from torchfits.writing.recompress import compress_file

    assert compress_file(image, str(tmp_path / "p.fits.fz"), progress=True) == 2
    assert "compress" in capsys.readouterr().err
    from torchfits.tables.stats_index import build_index

    build_index(catalog, output=str(tmp_path / "idx.json"), progress=True)
    assert "index build" in capsys.readouterr().err


def test_demo_runs_as_a_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "torchfits.cli", "demo", "--dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "where 'mag_r < 16 AND ra BETWEEN 10 AND 100'" in result.stdout
    assert "sample_catalog.fits[1] CATALOG" in result.stdout
    # a directory the user names is theirs: the sample files stay there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sample_catalog.fits", "sample_image.fits"]


def test_every_command_is_tested():
    """A new subcommand needs a test here: this list is the CLI's command table."""
    from torchfits.cli.main import COMMANDS, build_parser

    build_parser()
    assert sorted(COMMANDS) == sorted(["info", "header", "demo", "stats", "table", "diff", "copy",
                                       "cutout", "convert", "sql", "index", "verify", "setkey",
                                       "compress", "decompress", "sort",
                                       "preview"])  # preview: tests/image/test_preview.py

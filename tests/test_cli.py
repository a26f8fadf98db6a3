"""The ``torchfits`` command line: output formats, every command, exit codes."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchfits
from torchfits.cli.demo import make_sample_files
from torchfits.cli.main import main


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    image, catalog = make_sample_files(str(d))
    return d, image, catalog


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_info_text_and_json(samples, capsys):
    _, image, catalog = samples
    code, out, _ = run(capsys, "info", image)
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 3
    assert "name='SCI'" in lines[1] and "shape='(256, 256)'" in lines[1] and "dtype='float32'" in lines[1]
    assert "type='UNKNOWN'" in lines[0]  # empty primary
    code, out, _ = run(capsys, "info", "--json", catalog)
    records = json.loads(out)
    assert records[1] == {"file": catalog, "hdu": 1, "name": "CATALOG", "type": "TABLE",
                          "nrows": 10000, "ncols": 8}
    code, out, _ = run(capsys, "info", "-f", "jsonl", "-e", "2", image)
    assert json.loads(out)["name"] == "MASK"


def test_header_command(samples, capsys):
    _, image, _ = samples
    code, out, _ = run(capsys, "header", "-e", "1", image)
    assert code == 0
    assert out.startswith(f"# HDU 1 (SCI) in {image}:")
    assert "EXPTIME =                 30.0" in out
    code, out, _ = run(capsys, "header", "-k", "NAXIS*", "--json", "-e", "1", image)
    rows = json.loads(out)
    assert [r["keyword"] for r in rows] == ["NAXIS", "NAXIS1", "NAXIS2"]
    assert rows[1]["value"] == "256"  # raw card text, as in 1.x
    code, out, _ = run(capsys, "header", "--keyword-table", "-k", "EXTNAME", image)
    assert "SCI" in out and "MASK" in out
    code, _, err = run(capsys, "header", "--keyword-table", image)
    assert code == 2 and "requires -k" in err


def test_exit_codes(samples, capsys, tmp_path):
    _, image, _ = samples
    assert run(capsys, "info", str(tmp_path / "missing.fits"))[0] == 3
    assert run(capsys, "info", "-e", "9", image)[0] == 2
    assert run(capsys, "info", "-e", "x", image)[0] == 2
    assert run(capsys, "nosuchcommand")[0] == 2
    assert run(capsys)[0] == 2
    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"not a fits file at all" * 200)
    code, _, err = run(capsys, "info", str(junk))
    assert code == 3 and str(junk) in err


def test_stats(samples, capsys):
    _, image, _ = samples
    code, out, _ = run(capsys, "stats", "--json", image)
    records = json.loads(out)
    assert [r["name"] for r in records] == ["SCI", "MASK"]
    sci = torchfits.read_numpy(image, "SCI")
    assert records[0]["max"] == pytest.approx(float(sci.max()))
    assert records[0]["mean"] == pytest.approx(float(sci.mean(dtype=np.float64)))
    assert records[0]["std"] == pytest.approx(float(sci.std(dtype=np.float64)))
    assert records[0]["median"] == pytest.approx(float(np.sort(sci.ravel())[(sci.size - 1) // 2]))


def test_table_preview(samples, capsys):
    _, _, catalog = samples
    code, out, _ = run(capsys, "table", "-n", "2", catalog)
    assert code == 0
    assert "mag_r: float" in out and "name: string" in out
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["id"] for r in rows] == [0, 1]
    code, out, _ = run(capsys, "table", "-n", "0", catalog)
    assert not any(line.startswith("{") for line in out.splitlines())


def test_diff(samples, capsys, tmp_path):
    _, image, _ = samples
    assert run(capsys, "diff", image, image)[0] == 0
    other = tmp_path / "other.fits"
    data = torchfits.read_numpy(image, "SCI").copy()
    data[0, 0] += 1e5
    torchfits.write(str(other), [np.empty(0, np.uint8), data], overwrite=True)
    code, out, _ = run(capsys, "diff", image, str(other))
    assert code == 1 and "HDU count: 3 vs 2" in out and "HDU 1 max" in out


def test_copy_and_cutout(samples, capsys, tmp_path):
    _, image, _ = samples
    dst = tmp_path / "copy.fits"
    assert run(capsys, "copy", image, str(dst))[0] == 0
    assert dst.read_bytes() == Path(image).read_bytes()

    cut = tmp_path / "cut.fits"
    assert run(capsys, "cutout", "-e", "1", "--box", "10,20,30,25", image, str(cut))[0] == 0
    sci = torchfits.read_numpy(image, "SCI")
    np.testing.assert_array_equal(torchfits.read_numpy(str(cut)), sci[20:25, 10:30])
    assert torchfits.read_header(str(cut))["EXPTIME"] == 30.0

    cut2 = tmp_path / "cut2.fits"
    assert run(capsys, "cutout", f"{image}[1][11:30,21:25]", str(cut2))[0] == 0
    np.testing.assert_array_equal(torchfits.read_numpy(str(cut2)), sci[20:25, 10:30])
    assert run(capsys, "cutout", image, str(cut2))[0] == 2  # neither box nor section
    assert run(capsys, "cutout", f"{image}[1][1:2,1:2]", "--box", "0,0,1,1", str(cut2))[0] == 2


def test_convert(samples, capsys, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    _, _, catalog = samples
    out = tmp_path / "bright.parquet"
    assert run(capsys, "convert", catalog, str(out), "-w", "mag_r < 15", "-c", "id,mag_r")[0] == 0
    got = pq.read_table(out)
    want = torchfits.scan(catalog, columns=["id", "mag_r"], where="mag_r < 15").to_arrow()
    assert got.column_names == ["id", "mag_r"] and got.num_rows == want.num_rows
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    csv = tmp_path / "bright.txt"
    assert run(capsys, "convert", catalog, str(csv), "--to", "csv", "-c", "id")[0] == 0
    assert csv.read_text().splitlines()[0].strip('"') == "id"
    assert run(capsys, "convert", catalog, str(tmp_path / "x.unknown"))[0] == 2


def test_demo_runs_as_a_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "torchfits.cli", "demo", "--dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "where 'mag_r < 16 AND ra BETWEEN 10 AND 100'" in result.stdout
    assert "sample_catalog.fits[1] CATALOG" in result.stdout
    # a directory the user names is theirs: the sample files stay there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sample_catalog.fits", "sample_image.fits"]

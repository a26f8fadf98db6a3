"""``torchfits index build --sky RA DEC [--sky-order K]`` and ``torchfits sort --healpix ORDER IN OUT``."""
from __future__ import annotations

import json

import numpy as np
import pytest

import torchfits
from _cli import run

pytest.importorskip("cdshealpix")
fits = pytest.importorskip("astropy.io.fits")


@pytest.fixture
def cats(tmp_path):
    rng = np.random.default_rng(9)
    d = tmp_path / "cats"
    d.mkdir()
    for k in range(2):
        n = 3000
        ra, dec = rng.uniform(0, 360, n), np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
        cols = [fits.Column("RA", "D", array=ra), fits.Column("DEC", "D", array=dec),
                fits.Column("ID", "K", array=np.arange(n))]
        fits.BinTableHDU.from_columns(cols, name="CAT").writeto(d / f"c{k}.fits")
    return d


def _error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_index_build_sky(cats, capsys):
    code, out, _ = run(capsys, "index", "build", cats, "--sky", "ra", "dec", "--sky-order", "7",
                       "--chunk-rows", "1000", "--json")
    (rec,) = json.loads(out)
    assert code == 0 and rec["files"] == 2 and rec["sky"] == ["ra", "dec"]
    entry = json.loads((cats / "_torchfits_index.json").read_text())["files"]["c0.fits"]["sky"]
    assert entry["ra"] == "RA" and entry["order"] == 7 and not entry["sorted"]
    assert entry["rows"] == [0, 1000, 2000, 3000]
    code, _, err = run(capsys, "index", "build", cats, "--sky", "ra", "glat", "--overwrite")
    assert code == 2 and "'glat'" in _error(err)
    code, _, err = run(capsys, "index", "build", cats, "--sky-order", "5", "--overwrite")
    assert code == 2 and "--sky" in _error(err)
    code, _, err = run(capsys, "index", "build", cats, "--sky", "ra", "dec", "--sky-order", "30",
                       "--overwrite")
    assert code == 2 and "0..29" in _error(err)


def test_sort_healpix(cats, capsys, tmp_path):
    src, out = cats / "c0.fits", tmp_path / "sorted" / "c0.fits"
    out.parent.mkdir()
    code, stdout, _ = run(capsys, "sort", "--healpix", "8", src, out, "-e", "CAT", "--json")
    (rec,) = json.loads(stdout)
    assert code == 0 and rec["order"] == 8 and rec["output"] == str(out)
    sidecar = json.loads((out.parent / "_torchfits_index.json").read_text())
    assert sidecar["files"]["c0.fits"]["sky"]["sorted"]
    with fits.open(src) as a, fits.open(out) as b:
        assert sorted(a[1].data["ID"]) == sorted(b[1].data["ID"])
        assert list(a[1].data["ID"]) != list(b[1].data["ID"])
    ds = torchfits.dataset(str(out.parent), "CAT")
    where = "cone(ra, dec, 10.0, 20.0, 5.0)"
    assert ds.to_table(filter=where).num_rows == torchfits.dataset(str(src), "CAT", index=False).to_table(
        filter=where).num_rows
    # refusals: an existing output, a missing order or column, a bad order
    assert run(capsys, "sort", "--healpix", "8", src, out, "-e", "CAT")[0] == 2
    code, _, err = run(capsys, "sort", src, tmp_path / "x.fits")
    assert code == 2 and "--healpix" in _error(err)
    code, _, err = run(capsys, "sort", "--healpix", "31", src, tmp_path / "x.fits")
    assert code == 2 and "0..29" in _error(err)
    code, _, err = run(capsys, "sort", "--healpix", "5", "--ra", "glon", src, tmp_path / "x.fits")
    assert code == 2 and "'glon'" in _error(err)
    # --no-index, in place with --overwrite
    code, stdout, _ = run(capsys, "sort", "--healpix", "3", src, src, "--overwrite", "--no-index", "--json")
    assert code == 0 and "index" not in json.loads(stdout)[0]
    assert not (cats / "_torchfits_index.json").exists()

"""`setkey -o`: the edited copy goes through the writers' atomic output (temp name, rename, cache
invalidation, `.gz` compression), and a failed edit leaves neither the output nor a temporary."""
import gzip
import os

import numpy as np
import pytest

import torchfits
from _cli import run


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "in.fits"
    torchfits.write(str(path), np.arange(12, dtype="i2").reshape(3, 4), header={"EXPTIME": 1.0})
    return path


def test_gz_output_is_compressed_and_edited(image, capsys, tmp_path):
    out = tmp_path / "out.fits.gz"
    assert run(capsys, "setkey", image, "-k", "GAIN", "--value", "2", "-o", out)[0] == 0
    assert gzip.decompress(out.read_bytes())[:6] == b"SIMPLE"
    assert torchfits.read_header(str(out))["GAIN"] == 2
    assert np.array_equal(torchfits.read_numpy(str(out)), np.arange(12).reshape(3, 4))
    assert "GAIN" not in torchfits.read_header(str(image))


def test_failed_edit_leaves_no_output_and_no_temporary(image, capsys, tmp_path, monkeypatch):
    import torchfits.writing.header_edit as header_edit

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(header_edit, "update_header", broken)
    out = tmp_path / "out.fits"
    code, _, err = run(capsys, "setkey", image, "-k", "GAIN", "--value", "2", "-o", out)
    assert code != 0 and "disk full" in err
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["in.fits"]


def test_overwritten_output_is_read_fresh(image, capsys, tmp_path):
    out = tmp_path / "out.fits"
    assert run(capsys, "setkey", image, "-k", "GAIN", "--value", "2", "-o", out)[0] == 0
    assert torchfits.read_header(str(out))["GAIN"] == 2  # now in the index cache
    assert run(capsys, "setkey", image, "-k", "GAIN", "--value", "5", "-o", out, "--overwrite")[0] == 0
    assert torchfits.read_header(str(out))["GAIN"] == 5

"""How an HDU is named: the first HDU with data when none is given (native reads), EXTNAME with
EXTVER (``("SCI", 2)``, ``[SCI,2]``), "not found" messages that list the HDUs, and one rule for
duplicate EXTNAME cards (the first, as astropy's ``Header['EXTNAME']``) on every route."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import torchfits
from torchfits.errors import HDUNotFoundError, HDUTypeError
from torchfits.fits import hdu_index

fits = pytest.importorskip("astropy.io.fits")


def _native(a):
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("="))


# -- the first HDU with data ----------------------------------------------------------------------
@pytest.fixture
def empty_primary_image(tmp_path):
    path = tmp_path / "ext.fits"
    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(data, name="SCI")]).writeto(path)
    return path


@pytest.fixture
def fz_file(tmp_path):
    path = tmp_path / "img.fits.fz"
    data = np.arange(64 * 32, dtype=np.int32).reshape(64, 32)
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1")]).writeto(path)
    return path


def test_read_numpy_without_hdu_takes_the_first_hdu_with_data(empty_primary_image, fz_file):
    for path in (empty_primary_image, fz_file):
        want = _native(fits.getdata(path))
        got = torchfits.read_numpy(path)
        assert got.shape == want.shape != (0,)
        np.testing.assert_array_equal(got, want)
        img = torchfits.open_image(path)
        assert img.hdu == 1 and img.shape == want.shape
        np.testing.assert_array_equal(img[1:3], want[1:3])
    # An explicit hdu still names exactly that HDU.
    assert torchfits.read_numpy(empty_primary_image, 0).shape == (0,)
    assert torchfits.open_image(fz_file, 0).shape == (0,)


def test_dask_images_without_hdu_take_the_first_hdu_with_data(empty_primary_image, fz_file):
    pytest.importorskip("dask.array")
    import torchfits.dask

    for path in (empty_primary_image, fz_file):
        np.testing.assert_array_equal(torchfits.dask.read_images(str(path)).compute(),
                                      _native(fits.getdata(path)))


def test_first_hdu_with_data_matches_fitsio_past_an_empty_extension(tmp_path):
    fitsio = pytest.importorskip("fitsio")
    path = tmp_path / "skip.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(name="EMPTY"),
                  fits.ImageHDU(np.ones((2, 2), np.float32), name="SCI")]).writeto(path)
    np.testing.assert_array_equal(torchfits.read_numpy(path), fitsio.read(str(path)))
    assert torchfits.open_image(path).hdu == 2


def test_primary_with_data_is_still_the_default(tmp_path):
    path = tmp_path / "p.fits"
    fits.HDUList([fits.PrimaryHDU(np.ones(3, np.float32)),
                  fits.ImageHDU(np.zeros(4, np.float32))]).writeto(path)
    assert torchfits.read_numpy(path).shape == (3,)


def test_first_hdu_with_data_a_table_is_refused_by_name(tmp_path):
    path = tmp_path / "cat.fits"
    t = fits.BinTableHDU.from_columns([fits.Column("x", "E", array=np.arange(3.0))], name="CAT")
    fits.HDUList([fits.PrimaryHDU(), t]).writeto(path)
    with pytest.raises(HDUTypeError, match=r"HDU 1 \(CAT\).*table"):
        torchfits.read_numpy(path)
    with pytest.raises(HDUTypeError, match="cat.fits"):
        torchfits.open_image(path)


def test_file_without_data_reads_its_empty_primary(tmp_path):
    path = tmp_path / "nothing.fits"
    fits.PrimaryHDU().writeto(path)
    assert torchfits.read_numpy(path).shape == (0,)


def test_1x_read_keeps_the_1x_default(empty_primary_image):
    pytest.importorskip("torch")
    assert tuple(torchfits.read(str(empty_primary_image)).shape) == (0,)      # hdu=0, as 1.x
    assert tuple(torchfits.read(str(empty_primary_image), hdu=None).shape) == (3, 4)


# -- EXTVER ---------------------------------------------------------------------------------------
@pytest.fixture
def versions(tmp_path):
    path = tmp_path / "ver.fits"
    hdus = [fits.PrimaryHDU()]
    for ver in (1, 2, 3):
        hdus.append(fits.ImageHDU(np.full((2, 3), ver, np.int16), name="SCI", ver=ver))
        hdus.append(fits.ImageHDU(np.full((2, 3), 10 * ver, np.int16), name="ERR", ver=ver))
    hdus.append(fits.ImageHDU(np.full((2, 3), 99, np.int16), name="NOVER"))
    fits.HDUList(hdus).writeto(path)
    with fits.open(path) as hdul:   # EXTVER absent means 1 (astropy's rule)
        assert "EXTVER" not in hdul[-1].header
    return path


def test_extver_tuple_and_suffix(versions):
    with fits.open(versions) as hdul:
        for name, ver in [("SCI", 1), ("SCI", 2), ("err", 3), ("NOVER", 1)]:
            k = hdul.index_of((name, ver))
            want = _native(hdul[k].data)
            np.testing.assert_array_equal(torchfits.read_numpy(versions, (name, ver)), want)
            np.testing.assert_array_equal(torchfits.read_numpy(f"{versions}[{name},{ver}]"), want)
            np.testing.assert_array_equal(torchfits.read_numpy(versions, f"{name},{ver}"), want)
            assert torchfits.open_image(versions, (name, ver)).hdu == k
            assert torchfits.open_image(f"{versions}[{name}, {ver}]").hdu == k
            assert torchfits.read_header(versions, (name, ver))["EXTNAME"] == name.upper()
            assert torchfits.read_header(f"{versions}[{name},{ver}]")["EXTNAME"] == name.upper()
        # A name alone is its first HDU, as in astropy.
        assert torchfits.open_image(versions, "SCI").hdu == hdul.index_of("SCI") == 1


def test_extver_on_tables_and_1x_reads(tmp_path):
    path = tmp_path / "tabs.fits"
    cols = lambda v: [fits.Column("x", "J", array=np.arange(3) + v)]  # noqa: E731
    fits.HDUList([fits.PrimaryHDU()] + [fits.BinTableHDU.from_columns(cols(v), name="CAT", ver=v)
                                        for v in (1, 2)]).writeto(path)
    assert torchfits.scan(path, ("CAT", 2)).to_arrow().column("x").to_pylist() == [2, 3, 4]
    assert torchfits.scan(f"{path}[CAT,2]").to_arrow().column("x").to_pylist() == [2, 3, 4]
    assert torchfits.read_nrows(path, ("CAT", 2)) == 3
    pytest.importorskip("torch")
    # In 1.x ``read`` a tuple is a list of HDUs: the version goes in the string or suffix.
    assert torchfits.read(str(path), hdu="CAT,2")["x"].tolist() == [2, 3, 4]
    assert torchfits.read(f"{path}[CAT,2]")["x"].tolist() == [2, 3, 4]
    assert [t["x"].tolist() for t in torchfits.read(str(path), hdu=("CAT", 2))] == [[1, 2, 3], [2, 3, 4]]


def test_extver_in_hdu_edits(versions):
    torch = pytest.importorskip("torch")
    torchfits.replace_hdu(str(versions), ("SCI", 2), torch.full((2, 3), 7, dtype=torch.int16))
    with fits.open(versions) as hdul:
        k = hdul.index_of(("SCI", 2))
        assert hdul[k].data.tolist() == [[7] * 3] * 2 and hdul[k].header["EXTVER"] == 2
    torchfits.delete_hdu(str(versions), "ERR,3")
    with fits.open(versions) as hdul:
        assert ("ERR", 3) not in [(h.name, h.ver) for h in hdul]
    with pytest.raises(KeyError, match=r"HDU \('ERR', 3\) not found; the file has: 0 PRIMARY"):
        torchfits.delete_hdu(str(versions), ("ERR", 3))


def test_extver_in_the_cli(versions):
    run = subprocess.run([sys.executable, "-m", "torchfits.cli", "header", f"{versions}[SCI,2]"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "EXTVER  =                    2" in run.stdout


def test_not_found_lists_the_hdus(versions):
    with pytest.raises(HDUNotFoundError) as info:
        torchfits.read_numpy(versions, ("SCI", 4))
    message = str(info.value)
    assert str(versions) in message and "('SCI', 4)" in message
    for part in ("0 PRIMARY", "1 SCI,1", "3 SCI,2", "6 ERR,3", "7 NOVER"):
        assert part in message, message
    with pytest.raises(HDUNotFoundError, match=r"Could not move to HDU 12.*6 ERR,3"):
        torchfits.read_numpy(versions, 12)
    with pytest.raises(HDUNotFoundError, match="7 NOVER"):
        torchfits.read_header(versions, "MISSING")


def test_not_found_listing_is_bounded(tmp_path):
    path = tmp_path / "many.fits"
    fits.HDUList([fits.PrimaryHDU()] + [fits.ImageHDU(np.zeros(1), name=f"E{i}")
                                        for i in range(60)]).writeto(path)
    with pytest.raises(HDUNotFoundError) as info:
        torchfits.read_numpy(path, "NOPE")
    message = str(info.value)
    assert "0 PRIMARY" in message and "60 E59" in message and "more" in message
    assert len(message) < 800


def test_primary_by_name(versions):
    assert torchfits.read_header(versions, "PRIMARY")["SIMPLE"] is True
    assert torchfits.read_header(versions, "primary")["SIMPLE"] is True


def test_bad_extver_types_are_refused(versions):
    with pytest.raises(TypeError):
        torchfits.read_numpy(versions, ("SCI", "two"))
    with pytest.raises(TypeError):
        torchfits.read_numpy(versions, ("SCI", 1, 2))


# -- duplicate EXTNAME cards ----------------------------------------------------------------------
def _duplicate_extname(path, *, compressed=False):
    data = np.arange(6, dtype=np.int16).reshape(2, 3)
    hdu = (fits.CompImageHDU(data, name="FIRST") if compressed
           else fits.ImageHDU(data, name="FIRST"))
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    raw = bytearray(path.read_bytes())
    # Put a second EXTNAME card in the blank space before END of HDU 1's header.
    start = 2880
    end = raw.index(b"END" + b" " * 77, start)
    card = b"EXTNAME = 'SECOND  '".ljust(80)
    raw[end:end + 80] = card
    raw[end + 80:end + 160] = b"END".ljust(80)
    assert raw[end + 160:end + 240].strip() == b"" or end + 160 >= 5760
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("walk", [True, False])
def test_duplicate_extname_first_card_everywhere(tmp_path, monkeypatch, compressed, walk):
    path = _duplicate_extname(tmp_path / "dup.fits", compressed=compressed)
    with fits.open(path) as hdul:
        assert hdul[1].header["EXTNAME"] == "FIRST"   # the oracle's rule
    monkeypatch.setattr(hdu_index.HduIndex, "kernel_walk", walk)
    hdu_index.clear_index_cache()
    for source in (path, path.read_bytes()):
        assert torchfits.info(source)[1].name == "FIRST"
        assert torchfits.read_extname(source, 1) == "FIRST"
        assert torchfits.read_header(source, 1)["EXTNAME"] == "FIRST"
        assert torchfits.read_header(source, "FIRST")["EXTNAME"] == "FIRST"
        assert torchfits.read_numpy(source, "first").shape == (2, 3)
        with pytest.raises(HDUNotFoundError):
            torchfits.read_numpy(source, "SECOND")

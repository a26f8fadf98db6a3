"""Cutout headers: every cutout path keeps the parent's sky coordinates (astropy.wcs is the oracle)."""
import warnings

import numpy as np
import pytest

import torchfits
from torchfits.cli.main import main
from torchfits.fits.header import Header
from torchfits.fits.section_header import section_header

fits = pytest.importorskip("astropy.io.fits")
wcs_mod = pytest.importorskip("astropy.wcs")

H, W = 60, 80


def _wcs_cards(kind: str) -> dict:
    base = {"CTYPE1": "RA---TAN", "CTYPE2": "DEC--TAN", "CRVAL1": 150.1, "CRVAL2": 2.2,
            "CRPIX1": 40.5, "CRPIX2": 30.25, "CUNIT1": "deg", "CUNIT2": "deg"}
    if kind == "cd":
        base.update(CD1_1=-1.1e-4, CD1_2=2.0e-5, CD2_1=1.5e-5, CD2_2=1.2e-4)
    elif kind == "pc":
        base.update(CDELT1=-1.0e-4, CDELT2=1.1e-4, PC1_1=0.96, PC1_2=0.2, PC2_1=-0.25, PC2_2=0.97)
    elif kind == "cdelt":
        base.update(CDELT1=-1.0e-4, CDELT2=1.1e-4)
    elif kind == "sip":
        base.update(CTYPE1="RA---TAN-SIP", CTYPE2="DEC--TAN-SIP", CD1_1=-1.1e-4, CD1_2=0.0,
                    CD2_1=0.0, CD2_2=1.1e-4, A_ORDER=2, B_ORDER=2, A_2_0=2e-6, A_1_1=-1e-6,
                    A_0_2=3e-6, B_2_0=-2e-6, B_1_1=1e-6, B_0_2=4e-6)
    elif kind == "alt":
        base.update(CDELT1=-1.0e-4, CDELT2=1.1e-4, WCSNAMEA="PHYS", CTYPE1A="X", CTYPE2A="Y",
                    CRPIX1A=1.0, CRPIX2A=1.0, CRVAL1A=100.0, CRVAL2A=200.0, CDELT1A=0.5,
                    CDELT2A=0.5, LTV1=-3.0, LTV2=-4.0, LTM1_1=1.0, LTM2_2=1.0)
    return base


@pytest.fixture(params=["cd", "pc", "cdelt", "sip", "alt"])
def parent(request, tmp_path):
    hdr = fits.Header(_wcs_cards(request.param))
    data = np.arange(H * W, dtype=np.float32).reshape(H, W)
    path = tmp_path / f"wcs_{request.param}.fits"
    fits.PrimaryHDU(data, header=hdr).writeto(path)
    return str(path), request.param


def _world(header, key=" "):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy notes about fixed-up cards
        if isinstance(header, Header):
            header = header.to_astropy()
        return wcs_mod.WCS(header, key=key)


def _check(parent_hdr, cut_hdr, x0, y0, step=(1, 1), shape=None, key=" "):
    """Pixel (x, y) of the cutout and (x0 + x*sx, y0 + y*sy) of the parent are the same sky point."""
    pw, cw = _world(parent_hdr, key), _world(cut_hdr, key)
    ny, nx = shape
    xs, ys = np.meshgrid(np.arange(0, nx, max(1, nx // 4)), np.arange(0, ny, max(1, ny // 4)))
    xs, ys = xs.ravel().astype(float), ys.ravel().astype(float)
    a = cw.wcs_pix2world(xs, ys, 0) if cw.sip is None else cw.all_pix2world(xs, ys, 0)
    b = (pw.wcs_pix2world if pw.sip is None else pw.all_pix2world)(x0 + xs * step[0],
                                                                    y0 + ys * step[1], 0)
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=0, atol=1e-10)
    if cw.wcs.ctype[0].startswith("RA"):
        sa = cw.pixel_to_world(xs, ys)
        sb = pw.pixel_to_world(x0 + xs * step[0], y0 + ys * step[1])
        assert np.all(sa.separation(sb).arcsec < 1e-6)


def test_read_section_suffix(parent):
    path, kind = parent
    ph = fits.getheader(path)
    t, hdr = torchfits.read(f"{path}[0][11:50,21:44]", return_header=True)
    assert tuple(t.shape) == (24, 40) and hdr["NAXIS1"] == 40 and hdr["NAXIS2"] == 24
    _check(ph, hdr, 10, 20, shape=t.shape)
    t2, hdr2 = torchfits.read_tensor(f"{path}[11:50,21:44]", return_header=True)
    assert hdr2 == hdr
    if kind == "alt":
        _check(ph, hdr, 10, 20, shape=t.shape, key="A")
        assert hdr["LTV1"] == -13.0 and hdr["LTV2"] == -24.0


def test_strided_section(parent):
    path, kind = parent
    ph = fits.getheader(path)
    t, hdr = torchfits.read(f"{path}[3:79:2,5:60:3]", return_header=True)
    np.testing.assert_array_equal(t.numpy(), fits.getdata(path)[4:60:3, 2:79:2])
    _check(ph, hdr, 2, 4, step=(2, 3), shape=t.shape)
    t, hdr = torchfits.read(f"{path}[3:79:2,5:60:2]", return_header=True)  # one step: CDELT
    _check(ph, hdr, 2, 4, step=(2, 2), shape=t.shape)
    if kind == "alt":
        _check(ph, hdr, 2, 4, step=(2, 2), shape=t.shape, key="A")


def test_cli_cutout_box_and_section(parent, tmp_path, capsys):
    path, kind = parent
    ph = fits.getheader(path)
    out = tmp_path / "box.fits"
    assert main(["cutout", "--box", "10,20,74,54", path, str(out)]) == 0
    with fits.open(out) as hdul:
        np.testing.assert_array_equal(hdul[0].data, fits.getdata(path)[20:54, 10:74])
        _check(ph, hdul[0].header, 10, 20, shape=hdul[0].data.shape)
    out2 = tmp_path / "sec.fits"
    assert main(["cutout", f"{path}[0][1:80:4,7:60:5]", str(out2)]) == 0
    with fits.open(out2) as hdul:
        _check(ph, hdul[0].header, 0, 6, step=(4, 5), shape=hdul[0].data.shape)


def test_cube_section_keeps_spectral_axis(tmp_path):
    hdr = fits.Header({"CTYPE1": "RA---TAN", "CTYPE2": "DEC--TAN", "CTYPE3": "FREQ",
                       "CRVAL1": 10.0, "CRVAL2": -5.0, "CRVAL3": 1.4e9, "CRPIX1": 5.0,
                       "CRPIX2": 6.0, "CRPIX3": 1.0, "CDELT1": -1e-3, "CDELT2": 1e-3,
                       "CDELT3": 1e6, "CUNIT3": "Hz"})
    path = tmp_path / "cube.fits"
    fits.PrimaryHDU(np.zeros((6, 20, 30), np.float32), header=hdr).writeto(path)
    t, got = torchfits.read(f"{path}[4:20,3:15,2:6]", return_header=True)
    assert tuple(t.shape) == (5, 13, 17)
    pw, cw = _world(fits.getheader(path)), _world(got)
    np.testing.assert_allclose(cw.wcs_pix2world([[0, 0, 0], [16, 12, 4]], 0),
                               pw.wcs_pix2world([[3, 2, 1], [19, 14, 5]], 0), atol=1e-9)


def test_section_header_drops_checksums_and_keeps_other_cards():
    h = Header({"NAXIS": 2, "NAXIS1": 10, "NAXIS2": 8, "CRPIX1": 5.0, "OBJECT": "M31",
                "DATASUM": "1", "CHECKSUM": "x"})
    got = section_header(h, (2, 3), (1, 1), (4, 5))
    assert got["NAXIS1"] == 5 and got["NAXIS2"] == 4 and got["CRPIX1"] == 2.0
    assert got["OBJECT"] == "M31" and "DATASUM" not in got and "CHECKSUM" not in got
    with pytest.raises(ValueError, match="positive steps"):
        section_header(h, (0, 0), (1, -1), (4, 5))

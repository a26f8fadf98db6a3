"""Cutout WCS: every pixel-offset convention astropy's WCS reads follows a cutout.

For each convention (CRPIX, alternate CRPIXia, DSS plate solutions with CNPIX1/2, SIP, IRAF
LTV/LTM, lookup-table distortions in WCSDVARR/D2IMARR extensions), the world coordinates of
pixels of the cutout, read by astropy.wcs from our cutout header, equal those of the same pixels
of the full image to 1e-9 deg, and equal astropy's ``Cutout2D`` where it applies.
"""
import warnings

import numpy as np
import pytest

import torchfits
from _skyheaders import dss_cards as _dss_cards
from _skyheaders import sip_cards as _sip_cards
from torchfits.fits.header import Header
from torchfits.fits.section_header import section_header, section_lookup_table

fits = pytest.importorskip("astropy.io.fits")
wcs_mod = pytest.importorskip("astropy.wcs")
nddata = pytest.importorskip("astropy.nddata")

H, W = 250, 300
TOL = 1e-9  # degrees


def _alt_cards() -> dict:
    return {"CTYPE1": "RA---TAN", "CTYPE2": "DEC--TAN", "CRVAL1": 10.0, "CRVAL2": -30.0,
            "CRPIX1": 100.0, "CRPIX2": 90.0, "CDELT1": -2e-4, "CDELT2": 2e-4,
            "WCSNAMEB": "SKYB", "CTYPE1B": "RA---SIN", "CTYPE2B": "DEC--SIN",
            "CRPIX1B": 12.5, "CRPIX2B": -40.0, "CRVAL1B": 10.01, "CRVAL2B": -30.02,
            "CD1_1B": -2e-4, "CD1_2B": 1e-5, "CD2_1B": 1.2e-5, "CD2_2B": 2e-4,
            "WCSNAMEP": "PHYSICAL", "CTYPE1P": "X", "CTYPE2P": "Y", "CRPIX1P": 1.0,
            "CRPIX2P": 1.0, "CRVAL1P": 1024.0, "CRVAL2P": 2048.0, "CDELT1P": 2.0, "CDELT2P": 2.0}


KINDS = {"dss": lambda: _dss_cards(False), "dss_with_linear_wcs": lambda: _dss_cards(True),
         "sip": _sip_cards, "alt": _alt_cards}


def _wcs(header, key=" ", fobj=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy's notes about fixed-up cards
        if isinstance(header, Header):
            header = header.to_astropy()
        return wcs_mod.WCS(header, fobj, key=key)


def _world(w, xs, ys):
    return np.array(w.all_pix2world(xs, ys, 0))


def _parent(tmp_path, kind):
    hdr = fits.Header(KINDS[kind]())
    path = tmp_path / f"{kind}.fits"
    fits.PrimaryHDU(np.arange(H * W, dtype=np.float32).reshape(H, W), header=hdr).writeto(path)
    return str(path)


XS = np.array([0.0, 3.0, 17.0, 40.0, 63.0])
YS = np.array([0.0, 9.0, 22.0, 35.0, 49.0])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cutout_header_keeps_world_coordinates_and_matches_cutout2d(tmp_path, kind):
    path = _parent(tmp_path, kind)
    parent = fits.getheader(path)
    x0, y0 = 37, 55
    # FITS section [x1:x2, y1:y2], 1-based inclusive: 0-based columns 37..100, rows 55..104.
    t, hdr = torchfits.read(f"{path}[{x0 + 1}:{x0 + 64},{y0 + 1}:{y0 + 50}]", return_header=True)
    assert tuple(t.shape) == (50, 64)
    keys = [" "] + (["B", "P"] if kind == "alt" else [])
    for key in keys:
        pw, cw = _wcs(parent, key), _wcs(hdr, key)
        np.testing.assert_allclose(_world(cw, XS, YS), _world(pw, XS + x0, YS + y0),
                                   rtol=0, atol=TOL)
        # astropy's Cutout2D of the same box (center and size in its conventions)
        cut = nddata.Cutout2D(np.zeros((H, W)), (x0 + 32, y0 + 25), (50, 64), wcs=pw)
        assert cut.origin_original == (x0, y0)
        np.testing.assert_allclose(_world(cw, XS, YS), _world(cut.wcs, XS, YS), rtol=0, atol=TOL)


@pytest.mark.parametrize("kind", ["dss", "dss_with_linear_wcs", "sip"])
@pytest.mark.parametrize("steps", [(2, 2), (3, 2), (1, 4)])
def test_strided_cutout_keeps_world_coordinates(tmp_path, kind, steps):
    path = _parent(tmp_path, kind)
    parent = fits.getheader(path)
    sx, sy = steps
    x0, y0 = 5, 8
    t, hdr = torchfits.read(f"{path}[{x0 + 1}:{W}:{sx},{y0 + 1}:{H}:{sy}]", return_header=True)
    np.testing.assert_array_equal(t.numpy(), fits.getdata(path)[y0::sy, x0::sx])
    xs, ys = XS[XS < t.shape[1]], YS[: len(XS[XS < t.shape[1]])]
    ys = np.minimum(ys, t.shape[0] - 1)
    np.testing.assert_allclose(_world(_wcs(hdr), xs, ys),
                               _world(_wcs(parent), x0 + xs * sx, y0 + ys * sy), rtol=0, atol=TOL)


def test_dss_cutout_moves_cnpix():
    h = Header(_dss_cards(True))
    got = section_header(h, (55, 37), (1, 1), (50, 64))
    assert got["CNPIX1"] == 6011 + 37 and got["CNPIX2"] == 7023 + 55
    assert isinstance(got["CNPIX1"], int)
    assert got["XPIXELSZ"] == h["XPIXELSZ"]
    strided = section_header(h, (55, 37), (3, 2), (50, 64))
    assert strided["XPIXELSZ"] == pytest.approx(2 * h["XPIXELSZ"])
    assert strided["YPIXELSZ"] == pytest.approx(3 * h["YPIXELSZ"])


@pytest.mark.parametrize("steps", [(1, 1), (2, 2), (2, 3)])
def test_crota_rotation_under_unequal_steps(steps):
    """CROTA scales with one step on both axes; unequal steps write it out as a PC matrix."""
    h = fits.Header({"NAXIS": 2, "NAXIS1": W, "NAXIS2": H, "CTYPE1": "RA---TAN",
                     "CTYPE2": "DEC--TAN", "CRVAL1": 10.0, "CRVAL2": 20.0, "CRPIX1": 150.0,
                     "CRPIX2": 40.0, "CDELT1": -1e-3, "CDELT2": 1.2e-3, "CROTA2": 30.0})
    got = section_header(Header.from_astropy(h), (5, 7), steps, (40, 40))
    sy, sx = steps
    np.testing.assert_allclose(_world(_wcs(got), XS, YS),
                               _world(_wcs(h), 7 + XS * sx, 5 + YS * sy), rtol=0, atol=TOL)


def test_iraf_physical_follows_the_cutout():
    """IRAF's logical = LTM * physical + LTV: a cutout writes the LTV/LTM it needs, and the
    parent's physical coordinate of every cutout pixel is kept."""
    h = Header({"NAXIS": 2, "NAXIS1": W, "NAXIS2": H, "LTV1": -10.0, "LTM1_1": 0.5,
                "LTM2_2": 0.5})
    got = section_header(h, (20, 30), (1, 3), (40, 50))

    def physical(hdr, x, y):
        ltv = [hdr.get("LTV1", 0.0), hdr.get("LTV2", 0.0)]
        ltm = np.array([[hdr.get("LTM1_1", 1.0), hdr.get("LTM1_2", 0.0)],
                        [hdr.get("LTM2_1", 0.0), hdr.get("LTM2_2", 1.0)]])
        return np.linalg.solve(ltm, np.array([x, y], float) - ltv)

    for x, y in [(1, 1), (5, 7), (40, 50)]:  # 1-based cutout pixels
        np.testing.assert_allclose(physical(got, x, y),
                                   physical(h, 30 + 1 + (x - 1) * 3, 20 + 1 + (y - 1)),
                                   rtol=0, atol=1e-12)
    assert "LTV2" in got and "LTM1_1" in got


def _lookup_hdul():
    """An image with lookup-table distortions (CPDISj, D2IMDISj) in WCSDVARR/D2IMARR HDUs."""
    hdr = fits.Header(_sip_cards())
    for j in (1, 2):
        hdr[f"CPDIS{j}"] = "LOOKUP"
        for record in (f"EXTVER: {j}", "NAXES: 2", "AXIS.1: 1", "AXIS.2: 2"):
            hdr.append((f"DP{j}", record))  # record-valued cards: DPj.EXTVER etc.
    hdr["D2IMDIS1"] = "LOOKUP"
    for record in ("EXTVER: 1", "NAXES: 2", "AXIS.1: 1", "AXIS.2: 2"):
        hdr.append(("D2IM1", record))
    prim = fits.PrimaryHDU(np.zeros((H, W), np.float32), header=hdr)
    rng = np.random.default_rng(3)
    tables = []
    for extname, ver in (("WCSDVARR", 1), ("WCSDVARR", 2), ("D2IMARR", 1)):
        table = fits.ImageHDU(rng.normal(0, 0.2, (17, 21)).astype(np.float32))
        table.header.update({"EXTNAME": extname, "EXTVER": ver, "CRPIX1": 1.0, "CRPIX2": 1.0,
                             "CRVAL1": 0.0, "CRVAL2": 0.0, "CDELT1": 16.0, "CDELT2": 16.0})
        tables.append(table)
    return fits.HDUList([prim] + tables)


@pytest.mark.parametrize("steps", [(1, 1), (2, 3)])
def test_lookup_table_distortions_follow_the_cutout(tmp_path, steps):
    hdul = _lookup_hdul()
    pw = _wcs(hdul[0].header, fobj=hdul)
    assert pw.cpdis1 is not None and pw.det2im1 is not None
    starts, counts = (41, 29), (60, 70)
    cut_hdr = section_header(Header.from_astropy(hdul[0].header), starts, steps, counts)
    tables = []
    for hdu in hdul[1:]:
        # WCSDVARR version j corrects axis j (CPDISj); the D2IMARR table corrects axis 1.
        th, tdata = section_lookup_table(Header.from_astropy(hdu.header), hdu.data, starts,
                                         steps, axis=hdu.header["EXTVER"])
        tables.append(fits.ImageHDU(tdata, header=th.to_astropy()))
    cut = fits.HDUList([fits.PrimaryHDU(np.zeros(counts, np.float32), header=cut_hdr.to_astropy())]
                       + tables)
    cw = _wcs(cut[0].header, fobj=cut)
    sy, sx = steps
    xs, ys = np.array([0.0, 5, 19, 33, 59]), np.array([0.0, 7, 21, 44, 69])
    np.testing.assert_allclose(_world(cw, xs, ys),
                               _world(pw, starts[1] + xs * sx, starts[0] + ys * sy),
                               rtol=0, atol=TOL)


@pytest.mark.parametrize("kind", ["dss_with_linear_wcs", "alt"])
def test_cli_cutout_keeps_world_coordinates(tmp_path, kind):
    from torchfits.cli.main import main

    path = _parent(tmp_path, kind)
    out = tmp_path / "cut.fits"
    assert main(["cutout", "--box", "37,55,101,105", path, str(out)]) == 0
    with fits.open(out) as hdul:
        assert hdul[0].data.shape == (50, 64)
        for key in [" "] + (["B", "P"] if kind == "alt" else []):
            np.testing.assert_allclose(_world(_wcs(hdul[0].header, key), XS, YS),
                                       _world(_wcs(fits.getheader(path), key), XS + 37, YS + 55),
                                       rtol=0, atol=TOL)

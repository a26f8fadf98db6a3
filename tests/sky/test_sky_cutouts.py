"""Sky cutouts (`torchfits.cutouts`): stamps equal astropy's `Cutout2D` of the same position
and size (odd and even sizes, near the edges under each edge policy, float32, int16, scaled and
tile-compressed images), and each stamp's header gives the WCS of `Cutout2D(...).wcs` to 1e-9 deg
for TAN, TAN-SIP, TPV, ZPN and a DSS plate solution."""
import warnings

import numpy as np
import pytest

import torchfits
from _skyheaders import SKY_KINDS, dss_cards
from torchfits.errors import CutoutEdgeError
from torchfits.fits.header import Header
from torchfits.fits.section_header import SectionHeaders, section_header

fits = pytest.importorskip("astropy.io.fits")
wcs_mod = pytest.importorskip("astropy.wcs")
nddata = pytest.importorskip("astropy.nddata")
coords = pytest.importorskip("astropy.coordinates")

H, W = 250, 300
TOL = 1e-9  # degrees
MODES = {"raise": "strict", "pad": "partial", "clamp": "trim"}


def _wcs(header):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy's notes about fixed-up cards
        if isinstance(header, Header):
            header = header.to_astropy()
        return wcs_mod.WCS(header)


def _image(tmp_path, kind="sip", dtype=np.float32, cards=(), name=None):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "f":
        data = rng.normal(0, 10, (H, W)).astype(dtype)
    else:
        data = rng.integers(-3000, 3000, (H, W)).astype(dtype)
    hdr = fits.Header(SKY_KINDS[kind]())
    for card in cards:
        hdr[card[0]] = card[1]
    path = tmp_path / (name or f"{kind}-{np.dtype(dtype).name}.fits")
    fits.PrimaryHDU(data, header=hdr).writeto(path)
    return str(path)


def _positions(path, n=40, margin=0.0, seed=0, ext=0):
    """World positions of random pixels (``margin`` pixels beyond each edge allowed)."""
    w = _wcs(fits.getheader(path, ext))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-margin, W - 1 + margin, n)
    y = rng.uniform(-margin, H - 1 + margin, n)
    ra, dec = w.all_pix2world(x, y, 0)
    return np.asarray(ra), np.asarray(dec)


def _cutout2d(data, wcs, ra, dec, size, mode, fill_value=np.nan):
    pos = coords.SkyCoord(ra, dec, unit="deg", frame=wcs_mod.utils.wcs_to_celestial_frame(wcs))
    return nddata.Cutout2D(data, pos, size, wcs=wcs, mode=mode, fill_value=fill_value)


def _check_wcs(header, cut, shape):
    h, w = shape
    xs = np.array([0.0, w / 3, w - 1.0, 0.5 * w])
    ys = np.array([0.0, h - 1.0, h / 4, 0.5 * h])
    np.testing.assert_allclose(np.array(_wcs(header).all_pix2world(xs, ys, 0)),
                               np.array(cut.wcs.all_pix2world(xs, ys, 0)), rtol=0, atol=TOL)


@pytest.mark.parametrize("kind", sorted(SKY_KINDS))
@pytest.mark.parametrize("size", [15, 16, (9, 14)])
def test_stamps_and_wcs_equal_cutout2d(tmp_path, kind, size):
    path = _image(tmp_path, kind)
    data, parent = fits.getdata(path), _wcs(fits.getheader(path))
    ra, dec = _positions(path, n=25, seed=hash(kind) % 100)
    stamps, headers = torchfits.cutouts(path, ra=ra, dec=dec, size=size, edge="pad")
    hw = (size, size) if isinstance(size, int) else size
    assert isinstance(stamps, np.ndarray) and stamps.shape == (25,) + hw
    assert len(headers) == 25
    for i in range(25):
        cut = _cutout2d(data, parent, ra[i], dec[i], size, "partial")
        np.testing.assert_array_equal(stamps[i], cut.data)
        assert headers[i]["NAXIS1"] == hw[1] and headers[i]["NAXIS2"] == hw[0]
        _check_wcs(headers[i], cut, hw)


@pytest.mark.parametrize("edge", ["raise", "pad", "clamp"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_edges_follow_each_policy(tmp_path, edge, dtype):
    path = _image(tmp_path, "tan", dtype)
    data, parent = fits.getdata(path), _wcs(fits.getheader(path))
    ra, dec = _positions(path, n=30, margin=6.0, seed=3)
    size = 21
    if edge == "raise":
        with pytest.raises(CutoutEdgeError, match="outside the 250x300 image"):
            torchfits.cutouts(path, ra=ra, dec=dec, size=size)
        inside = []
        for i in range(len(ra)):
            try:
                _cutout2d(data, parent, ra[i], dec[i], size, "strict")
                inside.append(i)
            except nddata.utils.PartialOverlapError:
                pass
        ra, dec = ra[inside], dec[inside]
    fill = np.nan if dtype == np.float32 else 0
    stamps, headers = torchfits.cutouts(path, ra=ra, dec=dec, size=size, edge=edge)
    cut_shapes = set()
    for i in range(len(ra)):
        cut = _cutout2d(data, parent, ra[i], dec[i], size, MODES[edge], fill_value=fill)
        cut_shapes.add(cut.data.shape)
        np.testing.assert_array_equal(stamps[i], cut.data)
        assert stamps[i].dtype == data.dtype.newbyteorder("=")
        _check_wcs(headers[i], cut, cut.data.shape)
    if edge == "clamp" and len(cut_shapes) > 1:
        assert isinstance(stamps, list)


def test_pad_value_and_integer_fill(tmp_path):
    path = _image(tmp_path, "tan", np.int16)
    ra, dec = _positions(path, n=1, seed=1)
    w = _wcs(fits.getheader(path))
    ra0, dec0 = w.all_pix2world([1.0], [1.0], 0)
    stamps, _ = torchfits.cutouts(path, ra=ra0, dec=dec0, size=5, edge="pad", pad_value=-7)
    assert (stamps[0][:1] == -7).all() and stamps.dtype == np.int16
    with pytest.raises(CutoutEdgeError, match="pad_value"):
        torchfits.cutouts(path, ra=ra0, dec=dec0, size=5, edge="pad", pad_value=0.5)
    with pytest.raises(ValueError, match="edge='pad' only"):
        torchfits.cutouts(path, ra=ra, dec=dec, size=5, pad_value=1)


def test_scaled_image(tmp_path):
    path = tmp_path / "scaled.fits"
    raw = np.random.default_rng(2).integers(-500, 500, (H, W)).astype(np.int16)
    hdr = fits.Header(SKY_KINDS["sip"]())
    hdu = fits.PrimaryHDU(raw, header=hdr)
    hdu.header["BSCALE"], hdu.header["BZERO"] = 0.25, 100.0
    hdu.writeto(path)
    data, parent = fits.getdata(path), _wcs(fits.getheader(path))
    assert data.dtype == np.float32
    ra, dec = _positions(str(path), n=12, seed=5)
    stamps, headers = torchfits.cutouts(path, ra=ra, dec=dec, size=12, edge="pad")
    assert stamps.dtype == np.float32
    for i in range(12):
        cut = _cutout2d(data, parent, ra[i], dec[i], 12, "partial")
        np.testing.assert_array_equal(stamps[i], cut.data)
        assert "BSCALE" in headers[i]


def test_tile_compressed_image(tmp_path):
    path = tmp_path / "comp.fits"
    data = np.random.default_rng(4).integers(-2000, 2000, (H, W)).astype(np.int16)
    comp = fits.CompImageHDU(data, header=fits.Header(SKY_KINDS["tpv"]()),
                             compression_type="RICE_1", tile_shape=(32, 32))
    fits.HDUList([fits.PrimaryHDU(), comp]).writeto(path)
    with fits.open(path) as hdul:
        parent = _wcs(hdul[1].header)
    ra, dec = _positions(str(path), n=20, margin=3.0, seed=8, ext=1)
    stamps, headers = torchfits.cutouts(path, ra=ra, dec=dec, size=17, edge="pad")
    for i in range(20):
        cut = _cutout2d(data, parent, ra[i], dec[i], 17, "partial", fill_value=0)
        np.testing.assert_array_equal(stamps[i], cut.data)
        _check_wcs(headers[i], cut, (17, 17))


def test_headers_off_and_scalar_position(tmp_path):
    path = _image(tmp_path, "zpn")
    ra, dec = _positions(path, n=1, seed=9)
    stamps, headers = torchfits.cutouts(path, 0, ra=float(ra[0]), dec=float(dec[0]), size=8,
                                        edge="pad", headers=False)
    assert headers is None and stamps.shape == (1, 8, 8)
    empty, hs = torchfits.cutouts(path, ra=[], dec=[], size=8)
    assert empty.shape == (0, 8, 8) and len(hs) == 0


def test_bad_arguments(tmp_path):
    path = _image(tmp_path, "tan")
    ra, dec = _positions(path, n=2)
    for size in (0, (3,), 2.5, True):
        with pytest.raises(ValueError, match="size"):
            torchfits.cutouts(path, ra=ra, dec=dec, size=size)
    with pytest.raises(ValueError, match="one length"):
        torchfits.cutouts(path, ra=ra, dec=dec[:1], size=4)
    with pytest.raises(ValueError, match="finite"):
        torchfits.cutouts(path, ra=[np.nan], dec=[0.0], size=4)
    with pytest.raises(ValueError, match="edge must be"):
        torchfits.cutouts(path, ra=ra, dec=dec, size=4, edge="wrap")
    cube = tmp_path / "cube.fits"
    fits.PrimaryHDU(np.zeros((2, 5, 5), np.float32)).writeto(cube)
    with pytest.raises(ValueError, match="2-D image"):
        torchfits.cutouts(cube, ra=ra, dec=dec, size=4)


def _iraf_parent():
    return Header({"NAXIS": 2, "NAXIS1": W, "NAXIS2": H, "LTV1": -10.0, "LTM1_1": 0.5,
                   "LTM2_2": 0.5, **SKY_KINDS["tan"]()})


@pytest.mark.parametrize("parent", [lambda: Header(dss_cards(True)), _iraf_parent,
                                    lambda: Header(SKY_KINDS["sip"]())])
def test_section_headers_equal_section_header(parent):
    header = parent()
    starts = np.array([[0, 0], [5, 7], [-3, 12], [200, -4]])
    counts = np.array([[10, 12], [10, 12], [8, 8], [10, 12]])
    got = SectionHeaders(header, starts, counts)
    assert len(got) == 4
    for i in range(4):
        want = section_header(header, starts[i], (1, 1), counts[i])
        assert got[i] == want
        assert got[i - 4] == want
    assert list(got) == got[:]
    with pytest.raises(IndexError):
        got[4]

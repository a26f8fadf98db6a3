"""`FitsSkyCutoutDataset`: each position goes to the overlapping image where it lies farthest
from the edge, and its stamp equals `Cutout2D` on that image; footprint sidecars round-trip and
a changed file's entry is computed again."""
import os
import warnings

import numpy as np
import pytest
import torch

from _skyheaders import sip_cards, tan_cards
from torchfits.data import FitsSkyCutoutDataset, fits_collate_fn
from torchfits.errors import CutoutEdgeError
from torchfits.sky import footprints

fits = pytest.importorskip("astropy.io.fits")
wcs_mod = pytest.importorskip("astropy.wcs")
nddata = pytest.importorskip("astropy.nddata")
coords = pytest.importorskip("astropy.coordinates")

H, W = 120, 160


def _wcs(header):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wcs_mod.WCS(header)


def _mosaic(tmp_path):
    """Three images on one tangent plane, offset by 70 and 140 pixels in x (overlapping)."""
    rng = np.random.default_rng(5)
    paths = []
    for k in range(3):
        cards = sip_cards() if k == 1 else tan_cards()
        cards.update(CRVAL1=210.5, CRVAL2=-12.25, CRPIX1=80.0 - 70 * k, CRPIX2=60.0)
        path = tmp_path / f"tile{k}.fits"
        fits.PrimaryHDU(rng.normal(size=(H, W)).astype(np.float32),
                        header=fits.Header(cards)).writeto(path)
        paths.append(str(path))
    return paths


def _sky(paths, n, seed=0):
    """Positions spread over the mosaic (pixels of the first image, x in [0, 300))."""
    rng = np.random.default_rng(seed)
    w = _wcs(fits.getheader(paths[0]))
    x, y = rng.uniform(2, 295, n), rng.uniform(2, H - 3, n)
    ra, dec = w.all_pix2world(x, y, 0)
    return np.asarray(ra), np.asarray(dec)


def _best(paths, ra, dec):
    """The expected image of each position: largest distance to the edge, first on ties."""
    best, margin = np.full(len(ra), -1), np.full(len(ra), -np.inf)
    for k, p in enumerate(paths):
        x, y = _wcs(fits.getheader(p)).all_world2pix(ra, dec, 0)
        m = np.minimum(np.minimum(x + 0.5, W - 0.5 - x), np.minimum(y + 0.5, H - 0.5 - y))
        take = (m >= 0) & (m > margin)
        best[take], margin[take] = k, m[take]
    return best


@pytest.mark.parametrize("edge", ["pad", "clamp"])
def test_picks_the_best_image_and_equals_cutout2d(tmp_path, edge):
    paths = _mosaic(tmp_path)
    ra, dec = _sky(paths, 60)
    ds = FitsSkyCutoutDataset(str(tmp_path / "tile*.fits"), (ra, dec), 11, edge=edge)
    want = _best(paths, ra, dec)
    np.testing.assert_array_equal(ds.image_index, want)
    assert set(want.tolist()) == {0, 1, 2}
    mode = "partial" if edge == "pad" else "trim"
    for i in range(len(ds)):
        path = paths[want[i]]
        w = _wcs(fits.getheader(path))
        cut = nddata.Cutout2D(fits.getdata(path), coords.SkyCoord(ra[i], dec[i], unit="deg"), 11,
                              wcs=w, mode=mode)
        item = ds[i]
        assert item.shape[0] == 1
        np.testing.assert_array_equal(item[0].numpy(), cut.data)
        if edge == "pad":
            xs, ys = np.array([0.0, 5, 10]), np.array([0.0, 3, 10])
            np.testing.assert_allclose(np.array(_wcs(ds.header(i).to_astropy()).all_pix2world(xs, ys, 0)),
                                       np.array(cut.wcs.all_pix2world(xs, ys, 0)), rtol=0,
                                       atol=1e-9)


def test_batches_equal_items_and_tables_give_positions(tmp_path):
    paths = _mosaic(tmp_path)
    ra, dec = _sky(paths, 24, seed=2)
    keep = np.flatnonzero(_best(paths, ra, dec) >= 0)
    table = {"RA": ra[keep], "DEC": dec[keep]}
    ds = FitsSkyCutoutDataset(paths, table, (6, 8), columns=("RA", "DEC"), edge="pad")
    batch = fits_collate_fn(ds.__getitems__(list(range(len(ds)))))
    assert tuple(batch.shape) == (len(ds), 1, 6, 8)
    torch.testing.assert_close(batch, torch.stack([ds[i] for i in range(len(ds))]),
                               equal_nan=True, rtol=0, atol=0)
    pairs = np.stack([ra[keep], dec[keep]], axis=1)
    np.testing.assert_array_equal(FitsSkyCutoutDataset(paths, pairs, (6, 8), edge="pad").image_index,
                                  ds.image_index)


def test_edges_raise_by_default_and_outside_positions_are_refused(tmp_path):
    paths = _mosaic(tmp_path)
    w = _wcs(fits.getheader(paths[0]))
    ra, dec = w.all_pix2world([1.0, 100.0], [1.0, 50.0], 0)
    ds = FitsSkyCutoutDataset(paths, (ra, dec), 9)
    with pytest.raises(CutoutEdgeError):
        ds[0]
    assert tuple(ds[1].shape) == (1, 9, 9)
    far_ra, far_dec = w.all_pix2world([100.0], [400.0], 0)
    with pytest.raises(ValueError, match="lie in none of the 3 images"):
        FitsSkyCutoutDataset(paths, (far_ra, far_dec), 9)


def test_footprint_sidecar(tmp_path):
    paths = _mosaic(tmp_path)
    side = tmp_path / "footprints.json"
    built = footprints.build(paths, out=side)
    loaded = footprints.load(side)
    assert [fp.path for fp in loaded] == paths
    assert loaded == built
    for fp, p in zip(loaded, paths):
        w = _wcs(fits.getheader(p))
        ra, dec = w.all_pix2world([-0.5, W - 0.5, W - 0.5, -0.5], [-0.5, -0.5, H - 0.5, H - 0.5], 0)
        np.testing.assert_allclose(np.array(fp.corners), np.stack([ra, dec], axis=1), atol=1e-12)
        assert fp.shape == (H, W) and fp.hdu == 0
    ra, dec = _sky(paths, 30, seed=4)
    ds = FitsSkyCutoutDataset(paths, (ra, dec), 7, footprints=side, edge="pad")
    assert ds.footprints == loaded
    # a rewritten file's entry is stale: computed again from the new header
    cards = tan_cards()
    cards.update(CRVAL1=0.5, CRVAL2=40.0)
    fits.PrimaryHDU(np.zeros((H, W), np.float32), header=fits.Header(cards)).writeto(paths[2],
                                                                                      overwrite=True)
    os.utime(paths[2], ns=(1, 1))
    again = footprints.for_images(paths, sidecar=side)
    assert again[:2] == loaded[:2] and again[2].center[1] == pytest.approx(40.0, abs=0.1)
    side.write_text("{}")
    with pytest.raises(ValueError, match="not a torchfits footprint sidecar"):
        footprints.load(side)

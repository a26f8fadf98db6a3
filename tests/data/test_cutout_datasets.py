"""Cutout datasets at the image edges: a box that leaves the image fails clearly by default
(naming the file, HDU, box and image shape), ``edge="pad"`` fills the outside with ``pad_value``
(NaN for floats, 0 for integers) so every item has the box's shape and batches collate, and a
glob matching nothing fails at construction."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

from torchfits.data import (  # noqa: E402
    FitsCutoutDataset,
    FitsImageDataset,
    FitsStagedCutoutIterableDataset,
    fits_collate_fn,
    make_loader,
)
from torchfits.errors import FitsError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

H, W = 30, 40


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges")
    rng = np.random.default_rng(7)
    out = {}
    f32 = rng.normal(10, 2, (H, W)).astype(np.float32)
    path = root / "f32.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(f32, name="SCI"),
                  fits.ImageHDU((rng.random((H, W)) > 0.9).astype(np.int16), name="DQ"),
                  fits.ImageHDU(np.full((H, W), 4.0, np.float32), name="IVAR")]).writeto(path)
    out["f32"] = (str(path), f32)
    i16 = rng.integers(-500, 500, (H, W)).astype(np.int16)
    path = root / "i16.fits"
    fits.PrimaryHDU(i16).writeto(path)
    out["i16"] = (str(path), i16)
    u16 = rng.integers(0, 65535, (H, W)).astype(np.uint16)  # BZERO=32768
    path = root / "u16.fits"
    fits.PrimaryHDU(u16).writeto(path)
    out["u16"] = (str(path), u16)
    cube = rng.normal(size=(2, H, W))
    path = root / "cube.fits"
    fits.PrimaryHDU(cube).writeto(path)
    out["cube"] = (str(path), cube)
    return out


def _padded(full: np.ndarray, box, fill) -> np.ndarray:
    """The reference: the box of ``full`` with everything outside the image set to ``fill``."""
    x1, y1, x2, y2 = box
    lead = full.shape[:-2]
    out = np.full(lead + (y2 - y1, x2 - x1), fill, dtype=full.dtype)
    h, w = full.shape[-2:]
    cx1, cy1, cx2, cy2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
    if cx2 > cx1 and cy2 > cy1:
        out[..., cy1 - y1:cy2 - y1, cx1 - x1:cx2 - x1] = full[..., cy1:cy2, cx1:cx2]
    return out


EDGE_BOXES = [(-3, 5, 5, 13), (35, 25, 43, 33), (10, -8, 18, 0), (-20, -20, -12, -12),
              (38, 2, 46, 10), (0, 0, 40, 30)]


@pytest.mark.parametrize("box", EDGE_BOXES[:5])
def test_box_leaving_the_image_raises_by_default(images, box):
    path, _ = images["f32"]
    ds = FitsCutoutDataset([(path, "SCI") + box])
    with pytest.raises(FitsError) as err:
        ds[0]
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert path in msg and "SCI" in msg and str(box) in msg and f"{H}x{W}" in msg.replace(" ", "")
    assert "edge='pad'" in msg
    # The same through the batch path and a DataLoader: the clear error, not a collation one.
    inside = (path, "SCI", 0, 0, box[2] - box[0])
    ds2 = FitsCutoutDataset([inside, (path, "SCI") + box])
    with pytest.raises(FitsError, match="outside"):
        ds2.__getitems__([0, 1])
    with pytest.raises(FitsError, match="outside"):
        list(torch.utils.data.DataLoader(ds2, batch_size=2, collate_fn=fits_collate_fn))


@pytest.mark.parametrize("kind, fill", [("f32", np.nan), ("i16", 0), ("u16", 0), ("cube", np.nan)])
def test_pad_fills_outside_with_nan_or_zero(images, kind, fill):
    path, full = images[kind]
    specs = [(path, 0 if kind != "f32" else "SCI") + b for b in EDGE_BOXES]
    ds = FitsCutoutDataset(specs, edge="pad")
    for spec, box in zip(specs, EDGE_BOXES):
        got = ds[specs.index(spec)]
        want = _padded(full, box, fill)
        if want.ndim == 2:
            want = want[None]
        assert tuple(got.shape) == want.shape
        assert got.dtype == torch.from_numpy(want).dtype
        np.testing.assert_array_equal(got.numpy(), want)
    batch = fits_collate_fn(ds.__getitems__(list(range(len(specs) - 1))))
    assert tuple(batch.shape[-2:]) == (8, 8) and batch.shape[0] == len(specs) - 1
    loader = make_loader(FitsCutoutDataset(specs[:-1], edge="pad"), batch_size=5)
    assert [tuple(b.shape[-2:]) for b in loader] == [(8, 8)]


def test_pad_value_and_its_checks(images):
    path, full = images["f32"]
    got = FitsCutoutDataset([(path, "SCI", -2, -2, 4)], edge="pad", pad_value=-1.5)[0]
    np.testing.assert_array_equal(got[0].numpy(), _padded(full, (-2, -2, 2, 2), -1.5))
    ipath, ifull = images["i16"]
    got = FitsCutoutDataset([(ipath, 0, 38, 28, 4)], edge="pad", pad_value=-7)[0]
    np.testing.assert_array_equal(got[0].numpy(), _padded(ifull, (38, 28, 42, 32), -7))
    # A float dtype asked of an integer image pads with NaN (the result type decides).
    got = FitsCutoutDataset([(ipath, 0, 38, 28, 4)], edge="pad", dtype=torch.float32)[0]
    assert torch.isnan(got[0, 3, 3]) and got[0, 0, 0] == float(ifull[28, 38])
    with pytest.raises(FitsError, match="pad_value") as err:
        FitsCutoutDataset([(ipath, 0, 38, 28, 4)], edge="pad", pad_value=float("nan"))[0]
    assert ipath in str(err.value) and isinstance(err.value, ValueError)
    with pytest.raises(FitsError, match="pad_value"):
        FitsCutoutDataset([(ipath, 0, 38, 28, 4)], edge="pad", pad_value=1e6)[0]
    with pytest.raises(ValueError, match="edge"):
        FitsCutoutDataset([(path, "SCI", 0, 0, 4)], edge="wrap")
    with pytest.raises(ValueError, match="pad_value"):
        FitsCutoutDataset([(path, "SCI", 0, 0, 4)], pad_value=0.0)  # only with edge="pad"


def test_empty_box_fails_at_construction(images):
    path, _ = images["f32"]
    for spec in [(path, "SCI", 5, 5, 5, 9), (path, "SCI", 5, 5, 9, 2)]:
        with pytest.raises(ValueError, match="empty"):
            FitsCutoutDataset([spec])


def test_clamp_keeps_the_old_behaviour(images):
    path, full = images["f32"]
    ds = FitsCutoutDataset([(path, "SCI", 35, 25, 8)], edge="clamp")
    np.testing.assert_array_equal(ds[0][0].numpy(), full[25:, 35:])


def test_staged_stamps_follow_the_edge_rule(images):
    path, full = images["f32"]
    # A stamp larger than the image cannot be drawn inside it.
    with pytest.raises(FitsError, match="outside"):
        list(FitsStagedCutoutIterableDataset([path], cutouts_per_file=2, cutout_size=(8, 50),
                                             hdu="SCI"))
    boxes = [(36, 26, 44, 34), (0, 0, 8, 8)]
    queue = list(boxes)
    stamps = list(FitsStagedCutoutIterableDataset(
        [path], cutouts_per_file=2, cutout_size=8, hdu="SCI", edge="pad",
        cutout_generator=lambda *_: queue.pop(0)))
    for got, box in zip(stamps, boxes):
        np.testing.assert_array_equal(got[0].numpy(), _padded(full, box, np.nan))
    # With companions: flux NaN, ivar 0 and the validity mask False outside the image.
    queue = list(boxes)
    items = list(FitsStagedCutoutIterableDataset(
        [path], cutouts_per_file=2, cutout_size=8, hdu="SCI", ivar_hdu="IVAR", mask_hdu="DQ",
        mask_is_dq=True, edge="pad", cutout_generator=lambda *_: queue.pop(0)))
    first = items[0]
    assert first["flux"].shape == first["ivar"].shape == first["mask"].shape == (1, 8, 8)
    assert torch.isnan(first["flux"][0, 7, 7]) and first["ivar"][0, 7, 7] == 0
    assert not bool(first["mask"][0, 7, 7]) and first["ivar"][0, 0, 0] == 4.0
    queue = [(36, 26, 44, 34)]
    with pytest.raises(FitsError, match="outside"):
        list(FitsStagedCutoutIterableDataset([path], cutouts_per_file=1, cutout_size=8,
                                             hdu="SCI", cutout_generator=lambda *_: queue.pop(0)))


def test_glob_matching_nothing_fails_at_construction(tmp_path):
    pattern = str(tmp_path / "nothing*.fits")
    for make in (lambda: FitsStagedCutoutIterableDataset(pattern),
                 lambda: FitsImageDataset(pattern)):
        with pytest.raises(FileNotFoundError, match="no files match") as err:
            make()
        assert isinstance(err.value, FitsError) and pattern in str(err.value)

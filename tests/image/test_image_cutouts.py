"""`Image.cutouts`: many boxes in one call equal NumPy slicing of the image, for plain, scaled,
cube and tile-compressed images, under each edge policy."""
import numpy as np
import pytest

import torchfits
from torchfits.errors import CutoutEdgeError

fits = pytest.importorskip("astropy.io.fits")

H, W = 60, 75


def _boxes(rng, n, h, w, size=None, margin=0):
    out = []
    for _ in range(n):
        bh, bw = size or (int(rng.integers(1, 12)), int(rng.integers(1, 12)))
        x1 = int(rng.integers(-margin, w - bw + 1 + margin))
        y1 = int(rng.integers(-margin, h - bh + 1 + margin))
        out.append((x1, y1, x1 + bw, y1 + bh))
    return np.array(out)


def _sliced(data, box, edge, fill):
    x1, y1, x2, y2 = box
    h, w = data.shape[-2:]
    cx1, cy1, cx2, cy2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
    part = data[..., cy1:cy2, cx1:cx2]
    if edge == "clamp":
        return part
    out = np.full(data.shape[:-2] + (y2 - y1, x2 - x1), fill, data.dtype.newbyteorder("="))
    out[..., cy1 - y1:cy2 - y1, cx1 - x1:cx2 - x1] = part
    return out


def _write(tmp_path, kind):
    rng = np.random.default_rng(11)
    path = tmp_path / f"{kind}.fits"
    if kind == "float32":
        data = rng.normal(size=(H, W)).astype(np.float32)
        fits.PrimaryHDU(data).writeto(path)
    elif kind == "int16":
        data = rng.integers(-9000, 9000, (H, W)).astype(np.int16)
        fits.PrimaryHDU(data).writeto(path)
    elif kind == "scaled":
        hdu = fits.PrimaryHDU(rng.integers(-9000, 9000, (H, W)).astype(np.int16))
        hdu.header["BSCALE"], hdu.header["BZERO"] = 0.5, -3.0
        hdu.writeto(path)
    elif kind == "cube":
        fits.PrimaryHDU(rng.normal(size=(3, H, W)).astype(np.float64)).writeto(path)
    elif kind == "compressed":
        data = rng.integers(-9000, 9000, (H, W)).astype(np.int32)
        fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1",
                                                            tile_shape=(16, 16))]).writeto(path)
    with fits.open(path) as hdul:
        data = next(h.data for h in hdul if h.data is not None)
    return str(path), np.asarray(data)


KINDS = ["float32", "int16", "scaled", "cube", "compressed"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_size_boxes_equal_slicing(tmp_path, kind):
    path, data = _write(tmp_path, kind)
    img = torchfits.open_image(path)
    boxes = _boxes(np.random.default_rng(1), 40, H, W, size=(7, 10))
    got = img.cutouts(boxes)
    assert isinstance(got, np.ndarray)
    assert got.shape == (40,) + data.shape[:-2] + (7, 10)
    assert got.dtype == img.dtype
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        np.testing.assert_array_equal(got[i], data[..., y1:y2, x1:x2])
        np.testing.assert_array_equal(got[i], img[..., y1:y2, x1:x2])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("edge", ["pad", "clamp"])
def test_edges_equal_slicing(tmp_path, kind, edge):
    path, data = _write(tmp_path, kind)
    img = torchfits.open_image(path)
    boxes = _boxes(np.random.default_rng(2), 30, H, W, size=(9, 9), margin=6)
    fill = np.nan if data.dtype.kind == "f" or kind == "scaled" else 0
    got = img.cutouts(boxes, edge=edge)
    for i, box in enumerate(boxes):
        np.testing.assert_array_equal(got[i], _sliced(np.asarray(img.read()), box, edge, fill))
    if edge == "clamp":
        assert isinstance(got, list)
    else:
        assert got.shape == (30,) + data.shape[:-2] + (9, 9)
    with pytest.raises(CutoutEdgeError, match=r"cutout box .* is outside"):
        img.cutouts(boxes)


def test_mixed_sizes_give_a_list(tmp_path):
    path, data = _write(tmp_path, "float32")
    img = torchfits.open_image(path)
    boxes = _boxes(np.random.default_rng(3), 20, H, W)
    got = img.cutouts(boxes)
    assert isinstance(got, list) and len(got) == 20
    for part, (x1, y1, x2, y2) in zip(got, boxes):
        np.testing.assert_array_equal(part, data[y1:y2, x1:x2])


def test_pad_value_astype_and_empty(tmp_path):
    path, data = _write(tmp_path, "int16")
    img = torchfits.open_image(path)
    got = img.cutouts([[-2, -1, 3, 4]], edge="pad", pad_value=5)
    assert got.dtype == np.int16 and got[0, 0, 0] == 5
    np.testing.assert_array_equal(got[0, 1:, 2:], data[:4, :3])
    wide = img.astype(np.float64).cutouts([[0, 0, 4, 4], [10, 10, 14, 14]])
    assert wide.dtype == np.float64
    np.testing.assert_array_equal(wide[1], data[10:14, 10:14])
    assert img.cutouts(np.empty((0, 4), np.int64)).shape[0] == 0


def test_bad_boxes(tmp_path):
    path, _ = _write(tmp_path, "float32")
    img = torchfits.open_image(path)
    with pytest.raises(ValueError, match="wrap one box"):
        img.cutouts([0, 0, 3, 3])
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        img.cutouts([[0, 0, 3]])
    with pytest.raises(ValueError, match="is empty"):
        img.cutouts([[0, 0, 3, 3], [5, 5, 5, 9]])
    with pytest.raises(TypeError, match="integers"):
        img.cutouts([[0, 0, 3.5, 3]])
    with pytest.raises(ValueError, match="edge must be"):
        img.cutouts([[0, 0, 3, 3]], edge="wrap")


@pytest.mark.parametrize("kind", ["float32", "scaled", "cube"])
@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_large_batches_split_among_threads(tmp_path, monkeypatch, kind, threads):
    """A batch large enough to split among the pool's threads (each writing its own slots, some
    boxes at the edge cut on the caller) gives what one thread and NumPy slicing give."""
    monkeypatch.setenv("TORCHFITS_THREADS", threads)
    path, data = _write(tmp_path, kind)
    rng = np.random.default_rng(5)
    boxes = _boxes(rng, 700, H, W, size=(5, 7), margin=2)
    img = torchfits.open_image(path, 0)
    got = img.cutouts(boxes, edge="pad", pad_value=0)
    assert got.shape == (700,) + data.shape[:-2] + (5, 7)
    for box, cut in zip(boxes, got):
        np.testing.assert_array_equal(cut, _sliced(data, box, "pad", 0))

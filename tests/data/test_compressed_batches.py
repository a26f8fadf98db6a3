"""The batch path of tile-compressed stamps (`torchfits.data.tiled`): every codec and
quantisation written by astropy (CFITSIO's conventions) and by torchfits decodes to what
``torchfits.read(path, hdu=1)`` gives, bit for bit, through ``__getitems__`` and ``__getitem__``;
files of one layout share it, odd files fall back to the general reader with the same result
or the same error, and errors name the file and the HDU."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits.data import (  # noqa: E402
    FitsImageDataset,
    make_loader,
    tiled,
)
from torchfits.data.readers import batch_images, clear_readers, image_reader  # noqa: E402
from torchfits.fits.hdu_index import get_index  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
HERE = Path(__file__).resolve().parent


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bits (NaN where the other has NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
                    or np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)))
    return bool(np.array_equal(a, b))


def _comp(path: Path, data: np.ndarray, header: dict | None = None, **kw) -> str:
    hdu = fits.CompImageHDU(data, header=fits.Header(list((header or {}).items())), **kw)
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=True)
    return str(path)


def _stamps(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, dict, dict]]:
    i16 = rng.integers(-2000, 4000, (40, 48)).astype(np.int16)
    f32 = rng.normal(100, 5, (40, 48)).astype(np.float32)
    nan = f32.copy()
    nan[3, 5] = np.nan
    nan[10, :4] = np.nan
    u16 = rng.integers(0, 65535, (40, 48)).astype(np.uint16)
    mask = rng.integers(0, 300, (40, 48)).astype(np.int32)
    return {
        "rice_i16": (i16, {}, {"compression_type": "RICE_1"}),
        "rice_i32": (i16.astype(np.int32) * 1000, {}, {"compression_type": "RICE_1"}),
        "rice_u8": (rng.integers(0, 255, (40, 48)).astype(np.uint8), {}, {"compression_type": "RICE_1"}),
        "rice_u16": (u16, {}, {"compression_type": "RICE_1"}),
        "rice_tiles2d": (i16, {}, {"compression_type": "RICE_1", "tile_shape": (16, 16)}),
        "rice_one_tile": (i16, {}, {"compression_type": "RICE_1", "tile_shape": (40, 48)}),
        "gzip1_i16": (i16, {}, {"compression_type": "GZIP_1"}),
        "gzip2_i32": (i16.astype(np.int32) * 7, {}, {"compression_type": "GZIP_2"}),
        "gzip1_f32_lossless": (f32, {}, {"compression_type": "GZIP_1", "quantize_level": 0.0}),
        "gzip2_f64_lossless": (f32.astype(np.float64) / 3, {},
                               {"compression_type": "GZIP_2", "quantize_level": 0.0}),
        "hcompress": (i16, {}, {"compression_type": "HCOMPRESS_1", "tile_shape": (16, 48)}),
        "hcompress_smooth": (i16, {}, {"compression_type": "HCOMPRESS_1", "tile_shape": (40, 48),
                                       "hcomp_scale": 2.5, "hcomp_smooth": True}),
        "plio": (mask, {}, {"compression_type": "PLIO_1"}),
        "rice_f32_dither1": (f32, {}, {"compression_type": "RICE_1", "quantize_method": 1}),
        "rice_f32_dither2": (nan, {}, {"compression_type": "RICE_1", "quantize_method": 2}),
        "rice_f32_nodither": (f32, {}, {"compression_type": "RICE_1", "quantize_method": -1}),
        "gzip1_f32_nan": (nan, {}, {"compression_type": "GZIP_1", "quantize_method": 1}),
        "hcompress_f32": (f32, {}, {"compression_type": "HCOMPRESS_1", "tile_shape": (20, 48)}),
        "rice_bscale": (i16, {"BSCALE": 0.25, "BZERO": 12.0}, {"compression_type": "RICE_1"}),
        "rice_blank": (i16, {"BSCALE": 1.5, "BZERO": -3.0, "BLANK": int(i16[0, 0])},
                       {"compression_type": "RICE_1"}),
    }


@pytest.fixture(scope="module")
def codec_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiled")
    rng = np.random.default_rng(11)
    out = {}
    for name, (data, header, kw) in _stamps(rng).items():
        paths = []
        for i in range(3):  # files of one layout with different pixels (and heap sizes)
            scale = 1 if data.dtype.kind == "f" else 1
            varied = data if i == 0 else np.roll(data, i, axis=1) * scale
            paths.append(_comp(root / f"{name}_{i}.fits", varied, header, **kw))
        out[name] = paths
    return out


@pytest.fixture(autouse=True)
def _fresh():
    tiled.clear_layouts()
    clear_readers()
    yield
    tiled.clear_layouts()
    clear_readers()


def _reference(path: str) -> np.ndarray:
    return torchfits.read(path, hdu=1).numpy()


@pytest.mark.parametrize("name", list(_stamps(np.random.default_rng(0))))
def test_batch_equals_read(codec_files, name):
    paths = codec_files[name]
    arr = batch_images(paths, 1)
    assert arr is not None
    for slot, p in enumerate(paths):
        assert _equal(arr[slot], _reference(p)), (name, p)
    ds = FitsImageDataset(paths, hdu=1)
    got = ds.__getitems__([2, 0, 1])
    for k, i in enumerate([2, 0, 1]):
        ref = torch.from_numpy(_reference(paths[i])).unsqueeze(0)
        assert _equal(got[k][0].numpy(), ref.numpy())
        assert _equal(ds[i][0].numpy(), ref.numpy())


LOSSLESS = ["rice_i16", "rice_i32", "rice_u8", "rice_u16", "rice_tiles2d", "gzip1_i16", "gzip2_i32",
            "gzip1_f32_lossless", "gzip2_f64_lossless", "hcompress", "plio", "rice_bscale"]


@pytest.mark.parametrize("name", LOSSLESS)
def test_lossless_equals_astropy(codec_files, name):
    for p in codec_files[name]:
        with fits.open(p) as hdul:
            want = hdul[1].data
        got = batch_images([p], 1)[0]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["rice_i16", "rice_one_tile", "gzip1_i16", "gzip2_i32", "hcompress",
                                  "plio", "rice_u16", "rice_bscale", "gzip1_f32_lossless"])
def test_fast_layouts_take_the_kernel(codec_files, name):
    """Layouts without per-tile columns or quantisation go through one many-tile kernel call,
    and files of the layout share one cached layout."""
    paths = codec_files[name]
    stamps = [tiled.open_stamp(p, 1, image_reader) for p in paths]
    assert all(s is not None for s in stamps)
    assert stamps[0].known is stamps[1].known is stamps[2].known
    assert stamps[0].known.codec is not None
    out = np.empty(stamps[0].shape, stamps[0].dtype)
    for s, p in zip(stamps, paths):
        values = out.reshape(-1) if out.dtype == s.known.storage else \
            np.empty(out.size, s.known.storage)
        assert s._decode_many(values)
        s.decode_into(out)
        assert _equal(out, _reference(p))


def test_quantised_layouts_use_the_tile_decoder(codec_files):
    s = tiled.open_stamp(codec_files["rice_f32_dither2"][0], 1, image_reader)
    assert s is not None and s.known.codec is None  # ZSCALE/ZZERO columns: the tile decoder


def test_non_contiguous_tiles_fall_back(codec_files):
    assert tiled.open_stamp(codec_files["rice_tiles2d"][0], 1, image_reader) is None


def test_torchfits_written_stamps(tmp_path):
    rng = np.random.default_rng(5)
    paths = []
    for i, codec in enumerate(["RICE_1", "GZIP_1", "GZIP_2", "HCOMPRESS_1", "PLIO_1", "BZIP2_1"] * 2):
        p = str(tmp_path / f"t{i}.fits")
        torchfits.write(p, [np.empty(0, np.uint8), rng.integers(0, 4000, (64, 64)).astype(np.int16)],
                        compress=codec, overwrite=True)
        paths.append(p)
    arr = batch_images(paths, 1)
    for slot, p in enumerate(paths):
        assert _equal(arr[slot], _reference(p))


def test_mixed_shapes_and_plain_files_take_the_item_path(codec_files, tmp_path):
    plain = str(tmp_path / "plain.fits")
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.ones((40, 48), np.int16))]).writeto(plain)
    paths = [codec_files["rice_i16"][0], plain, codec_files["gzip1_i16"][1]]
    arr = batch_images(paths, 1)
    for slot, p in enumerate(paths):
        assert _equal(arr[slot], _reference(p))
    assert tiled._files[(plain, 1)][1] is None  # this version is left to the general reader
    assert tiled.open_stamp(plain, 1, image_reader) is None
    assert _equal(batch_images(paths, 1)[1], _reference(plain))
    other = _comp(tmp_path / "other.fits", np.zeros((8, 8), np.int16), compression_type="RICE_1")
    assert batch_images([codec_files["rice_i16"][0], other], 1) is None  # shapes differ
    ds = FitsImageDataset([codec_files["rice_i16"][0], other], hdu=1)
    got = ds.__getitems__([0, 1])
    assert tuple(got[1][0].shape) == (1, 8, 8)


def test_stamps_after_hdus_with_data(tmp_path):
    """The stamp scan steps over earlier HDUs by the HDU index's own size rule: a primary
    with data, an image extension and a table with a heap before the stamp; random groups
    are left to the general reader."""
    rng = np.random.default_rng(11)
    stamp = rng.integers(0, 4000, (40, 48)).astype(np.int16)
    heap = fits.Column("V", "PJ()", array=np.array([np.arange(n, dtype=np.int32) for n in (3, 0, 7)],
                                                   dtype=object))
    before = [fits.PrimaryHDU(rng.integers(0, 9, (7, 5)).astype(np.int16)),
              fits.ImageHDU(rng.normal(size=(3, 11))),
              fits.BinTableHDU.from_columns([heap])]
    paths = []
    for i in range(3):
        p = tmp_path / f"deep{i}.fits"
        fits.HDUList(before + [fits.CompImageHDU(stamp + i, compression_type="RICE_1")]).writeto(p)
        paths.append(str(p))
    s = tiled.open_stamp(paths[0], 3, image_reader)
    assert s is not None and s.data_offset == get_index(paths[0]).entries[3].data_offset
    arr = batch_images(paths, 3)
    for slot, p in enumerate(paths):
        assert _equal(arr[slot], torchfits.read(p, hdu=3).numpy())
    groups = tmp_path / "groups.fits"
    g = fits.GroupsHDU(fits.GroupData(np.zeros((2, 1, 3), np.float32), parnames=["a"],
                                      pardata=[np.zeros(2, np.float32)], bitpix=-32))
    fits.HDUList([g, fits.CompImageHDU(stamp, compression_type="RICE_1")]).writeto(groups)
    assert tiled.open_stamp(str(groups), 1, image_reader) is None
    assert _equal(batch_images([str(groups)], 1)[0], torchfits.read(str(groups), hdu=1).numpy())


def test_rewritten_file_is_read_again(tmp_path):
    p = tmp_path / "s.fits"
    _comp(p, np.arange(64, dtype=np.int16).reshape(8, 8), compression_type="RICE_1")
    assert _equal(batch_images([str(p)], 1)[0], _reference(str(p)))
    _comp(p, np.arange(100, dtype=np.int32).reshape(10, 10), compression_type="GZIP_2")
    clear_readers()
    assert _equal(batch_images([str(p)], 1)[0], _reference(str(p)))


def test_loader_with_workers(codec_files):
    paths = [p for name in ("rice_i16", "gzip1_i16", "hcompress", "rice_u16") for p in codec_files[name]]
    paths = [p for p in paths if _reference(p).dtype == np.int16]
    ds = FitsImageDataset(paths, hdu=1)
    want = sum(float(_reference(p).astype(np.float64).sum()) for p in paths)
    for workers in (0, 2):
        loader = make_loader(ds, batch_size=4, shuffle=True, num_workers=workers)
        got = sum(float(x.double().sum()) for x, _ in loader)
        assert got == want


def _corrupt(src: str, dst: Path, what: str) -> str:
    shutil.copy(src, dst)
    raw = bytearray(dst.read_bytes())
    h = raw.index(b"XTENSION")
    end = raw.index(b"END" + b" " * 77, h)
    data = h + -(-(end + 80 - h) // 2880) * 2880
    if what == "tile":  # garble the heap: RICE streams decode to nonsense or fail
        heap = data + 8 * 40
        raw[heap:heap + 200] = b"\xff" * 200
    elif what == "descriptor":  # first tile's offset points past the heap
        raw[data + 4:data + 8] = (10 ** 8).to_bytes(4, "big")
    elif what == "truncated":
        raw = raw[:data + 100]
    dst.write_bytes(bytes(raw))
    return str(dst)


@pytest.mark.parametrize("what", ["tile", "descriptor", "truncated"])
def test_bad_files_raise_like_the_general_reader(codec_files, tmp_path, what):
    bad = _corrupt(codec_files["rice_i16"][0], tmp_path / f"bad_{what}.fits", what)
    try:
        want = _reference(bad)
    except Exception as exc:  # noqa: BLE001 - the general reader's verdict is the reference
        with pytest.raises(type(exc)) as info:
            batch_images([codec_files["rice_i16"][1], bad], 1)
        assert bad in str(info.value) and "HDU 1" in str(info.value)
    else:
        assert _equal(batch_images([bad], 1)[0], want)


@pytest.mark.parametrize("path", sorted(str(p) for p in HERE.glob("reg_*.fits")))
def test_odd_files_agree_with_the_general_reader(path):
    """Regression files with odd headers: the batch path gives the general reader's values or
    raises its error."""
    try:
        n = len(get_index(path).entries)
    except Exception:  # noqa: BLE001 - a file the index refuses: its first extension
        n = 2
    for hdu in range(1, n):
        try:
            want = torchfits.read(path, hdu=hdu)
        except Exception as exc:  # noqa: BLE001
            tiled.clear_layouts()
            clear_readers()
            with pytest.raises(type(exc)):
                batch_images([path], hdu)
            continue
        tiled.clear_layouts()
        clear_readers()
        if not torch.is_tensor(want):
            continue
        got = batch_images([path], hdu)
        assert got is not None and _equal(got[0], want.numpy())

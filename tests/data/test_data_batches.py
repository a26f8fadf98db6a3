"""Batched reads of the map-style datasets (``__getitems__``): the batch cutout kernel and the
small-file image fast path give exactly what the per-item path gives (values, dtypes, labels,
transforms, edge clamping), fall back item by item where they must, and DataLoaders with 0/2/4
workers under fork and spawn still deliver every sample once per epoch."""
from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

from _stamps import write_stamp  # noqa: E402
from torchfits._kernels import _image  # noqa: E402
from torchfits.data import (  # noqa: E402
    FitsCubeDataset,
    FitsCutoutDataset,
    FitsImageDataset,
    fits_collate_fn,
    make_loader,
)
from torchfits.data.loader import FitsBatch  # noqa: E402
from torchfits.data.readers import clear_readers  # noqa: E402
from torchfits.transforms import ArcsinhStretch, Compose, SqrtStretch, ZScaleNormalize  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
HAS_FORK = "fork" in mp.get_all_start_methods()


def _same(a, b) -> bool:
    """Equal values, dtypes and shapes (NaN equal to NaN), tensors or nested payloads."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        torch.nan_to_num(a.float() if a.dtype == torch.bfloat16 else a, nan=-12345.0),
        torch.nan_to_num(b.float() if b.dtype == torch.bfloat16 else b, nan=-12345.0))


def _batch_equals_items(ds, indices) -> FitsBatch:
    got = ds.__getitems__(list(indices))
    items = [ds[i] for i in indices]
    assert len(got) == len(items) and all(_same(a, b) for a, b in zip(got, items))
    assert _same(fits_collate_fn(got), fits_collate_fn(items))
    return got


@pytest.fixture(scope="module")
def mosaics(tmp_path_factory):
    root = tmp_path_factory.mktemp("mosaics")
    rng = np.random.default_rng(3)
    f32 = rng.normal(100, 5, (70, 90)).astype(np.float32)
    raw = rng.integers(-3000, 3000, (50, 60)).astype(np.int16)
    raw[3, 4] = -32768
    arrays = {"f32": (f32, ()), "f32b": (f32[::-1].copy(), ()),
              "scaled": (raw, [("BSCALE", 0.5), ("BZERO", 10.0), ("BLANK", -32768)]),
              "u16": (rng.integers(0, 65535, (40, 40)).astype(np.uint16), ()),
              "cube": (rng.normal(size=(3, 30, 40)).astype(np.float64), ()),
              "u64": (rng.integers(0, 2**62, (20, 20), dtype=np.uint64), ())}
    return {name: write_stamp(root / f"{name}.fits", data, cards=cards)
            for name, (data, cards) in arrays.items()}


# -- cutouts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["f32", "scaled", "u16", "cube"])
@pytest.mark.parametrize("dtype", [None, torch.float64, torch.bfloat16, torch.float16])
def test_cutout_batches_equal_items_by_kind_and_dtype(mosaics, kind, dtype):
    specs = [(mosaics[kind], 0, x, y, 8) for x, y in [(0, 0), (3, 2), (20, 11), (31, 21), (3, 2)]]
    ds = FitsCutoutDataset(specs, dtype=dtype)
    got = _batch_equals_items(ds, range(len(specs)))
    assert isinstance(got, FitsBatch)  # the kernel path, not the item-by-item fallback
    want_dtype = {None: {"f32": torch.float32, "scaled": torch.float32, "u16": torch.uint16,
                         "cube": torch.float64}[kind]}.get(dtype, dtype)
    assert fits_collate_fn(got).dtype == want_dtype
    ref = fits.getdata(mosaics[kind])
    expect = ref[..., 2:10, 3:11].astype(np.float64)
    assert np.allclose(got[1].double().numpy().reshape(expect.shape), expect, equal_nan=True,
                       rtol=1e-2 if dtype in (torch.bfloat16, torch.float16) else 0)


def test_cutout_batches_several_files_shuffled_and_channel_dim(mosaics):
    specs = [(mosaics["f32" if k % 2 else "f32b"], 0, k, 2 * k, 16) for k in range(12)]
    for add in (True, False):
        ds = FitsCutoutDataset(specs, add_channel_dim=add)
        got = _batch_equals_items(ds, [5, 0, 11, 3, 3, -1])
        assert isinstance(got, FitsBatch)
        assert fits_collate_fn(got).shape == ((6, 1, 16, 16) if add else (6, 16, 16))


def test_cutout_batches_fall_back_at_edges_and_for_mixed_sizes(mosaics):
    # A box an edge clamps has another shape: the batch is read item by item (and collating
    # mixed shapes fails exactly as it did per item).
    edge = FitsCutoutDataset([(mosaics["f32"], 0, 0, 0, 8), (mosaics["f32"], 0, 85, 66, 8)],
                             edge="clamp")
    got = _batch_equals_items(edge, [1])
    assert not isinstance(got, FitsBatch) and got[0].shape == (1, 4, 5)
    with pytest.raises(RuntimeError):
        fits_collate_fn(edge.__getitems__([0, 1]))
    negative = FitsCutoutDataset([(mosaics["f32"], 0, -2, 5, 8), (mosaics["f32"], 0, 1, 5, 8)],
                                 edge="clamp")
    assert not isinstance(_batch_equals_items(negative, [0]), FitsBatch)
    mixed = FitsCutoutDataset([(mosaics["f32"], 0, 0, 0, 8), (mosaics["f32"], 0, 0, 0, 9)])
    assert not isinstance(mixed.__getitems__([0, 1]), FitsBatch)
    types = FitsCutoutDataset([(mosaics["f32"], 0, 0, 0, 8), (mosaics["u16"], 0, 0, 0, 8)])
    assert not isinstance(_batch_equals_items(types, [0, 1]), FitsBatch)
    with pytest.raises(IndexError):
        edge.__getitems__([0, 2])
    with pytest.raises(TypeError):
        edge.__getitems__([0, "1"])


def test_cutout_batch_transforms(mosaics):
    specs = [(mosaics["f32"], 0, x, x, 10) for x in range(0, 50, 7)]
    for transform in (ArcsinhStretch(0.3), Compose([SqrtStretch(), ArcsinhStretch()])):
        assert transform.batchable
        got = _batch_equals_items(FitsCutoutDataset(specs, transform=transform), range(len(specs)))
        assert isinstance(got, FitsBatch)  # applied once to the whole batch
    calls = []

    def per_item(t):
        calls.append(tuple(t.shape))
        return t * 2

    for transform in (ZScaleNormalize(), per_item):
        assert not getattr(transform, "batchable", False)
        _batch_equals_items(FitsCutoutDataset(specs, transform=transform), range(len(specs)))
    assert calls and all(c == (1, 10, 10) for c in calls)  # never given the batch
    assert not Compose([ArcsinhStretch(), ZScaleNormalize()]).batchable


def test_cutout_batch_kernel_checks(mosaics):
    clear_readers()
    ds = FitsCutoutDataset([(mosaics["f32"], 0, 0, 0, 4)])
    ds.__getitems__([0])
    from torchfits.data.readers import cutout_reader

    reader = cutout_reader(mosaics["f32"], 0)
    out = np.zeros((2, 4, 4), np.float32)
    _image.cutout_batch(reader, np.array([[1, 3, 2]], np.int64), 4, 4, out)
    assert np.array_equal(out[1], fits.getdata(mosaics["f32"])[2:6, 3:7]) and not out[0].any()
    with pytest.raises(ValueError, match="outside"):
        _image.cutout_batch(reader, np.array([[0, 87, 0]], np.int64), 4, 4, out)
    with pytest.raises(ValueError, match="outside"):
        _image.cutout_batch(reader, np.array([[2, 0, 0]], np.int64), 4, 4, out)
    with pytest.raises(ValueError, match="dtype"):
        _image.cutout_batch(reader, np.array([[0, 0, 0]], np.int64), 4, 4, out.astype(np.float64))
    with pytest.raises(ValueError, match="shape"):
        _image.cutout_batch(reader, np.array([[0, 0, 0]], np.int64), 4, 5, out)
    with pytest.raises(ValueError, match="writable"):
        ro = out.copy()
        ro.flags.writeable = False
        _image.cutout_batch(reader, np.array([[0, 0, 0]], np.int64), 4, 4, ro)


@pytest.mark.parametrize("kind", ["u16", "scaled", "cube"])
def test_cutout_batch_boxes_of_whole_rows(mosaics, kind):
    # Boxes as wide as the image (up to the whole frame) one after another: each box decodes
    # from the image's own geometry, whatever the box before it was.
    from torchfits.data.readers import cutout_reader

    clear_readers()
    reader = cutout_reader(mosaics[kind], 0)
    ref = fits.getdata(mosaics[kind])
    height, width = ref.shape[-2:]
    for h in (height, 5):
        rows = np.array([[0, 0, 0], [1, 0, height - h], [2, 0, 0]], np.int64)
        out = np.zeros((3,) + ref.shape[:-2] + (h, width), reader.cutout(0, 0, 1, 1).dtype)
        _image.cutout_batch(reader, rows, h, width, out)
        for slot, _, y in rows.tolist():
            assert np.array_equal(out[slot], ref[..., y:y + h, :].astype(out.dtype), equal_nan=True)
    if kind == "u16":
        whole = FitsCutoutDataset([(mosaics[kind], 0, 0, 0, width)] * 3)
        assert isinstance(_batch_equals_items(whole, [0, 1, 2]), FitsBatch)


# -- whole files -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stamps(tmp_path_factory):
    root = tmp_path_factory.mktemp("stamps_batch")
    rng = np.random.default_rng(8)
    kinds = {}

    def put(name, data, **kw):
        kinds.setdefault(name.split("_")[0], []).append(write_stamp(root / f"{name}.fits", data, **kw))

    for k in range(5):
        f = rng.normal(size=(12, 10)).astype(np.float32)
        put(f"f32_{k}", f, cards=[("CLASS", k),
                                  ("OBJECT", "BZERO is mentioned in a comment" if k == 3 else "x")],
            extensions=[("R", f * 3)])
        raw = rng.integers(-100, 100, (12, 10)).astype(np.int16)
        raw[k, k] = -999
        put(f"i16_{k}", raw, cards=[("BSCALE", 0.25), ("BZERO", -3.0), ("BLANK", -999)])
        put(f"u16_{k}", rng.integers(0, 65535, (12, 10)).astype(np.uint16))
        put(f"u8_{k}", rng.integers(0, 255, (12, 10)).astype(np.uint8))
        put(f"u64_{k}", rng.integers(0, 2**62, (12, 10), dtype=np.uint64))
        put(f"f64_{k}", rng.normal(size=(12, 10)))
    # A repeated BZERO: the last card applies (the general reader's rule), so the fast path
    # must step aside.
    put("dup_0", np.arange(120, dtype=np.int16).reshape(12, 10), cards=[("BZERO", 5), ("BZERO", 7)])
    return kinds


@pytest.mark.parametrize("kind", ["f32", "i16", "u16", "u8", "u64", "f64"])
def test_image_batches_equal_items_and_astropy(stamps, kind):
    files = stamps[kind]
    ds = FitsImageDataset(files, labels=list(range(10, 10 + len(files))))
    got = _batch_equals_items(ds, [4, 0, 2, 2])
    assert isinstance(got, FitsBatch)
    x, y = fits_collate_fn(got)
    assert y.tolist() == [14, 10, 12, 12]
    for row, k in zip(x, [4, 0, 2, 2]):
        ref = fits.getdata(files[k])
        assert np.array_equal(row[0].numpy(), ref.astype(np.float64) if kind == "u64" else ref,
                              equal_nan=True)


def test_image_batches_dtype_labels_hdus_and_transforms(stamps):
    files = stamps["f32"]
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32):
        _batch_equals_items(FitsImageDataset(files, dtype=dtype), range(5))
    assert isinstance(_batch_equals_items(FitsImageDataset(stamps["i16"], dtype=torch.float64), range(5)),
                      FitsBatch)
    got = _batch_equals_items(FitsImageDataset(files, label_key="CLASS"), [3, 1])
    assert fits_collate_fn(got)[1].tolist() == [3, 1]
    by_name = _batch_equals_items(FitsImageDataset(files, hdu="R"), range(5))  # the general reader
    assert isinstance(by_name, FitsBatch)
    assert isinstance(_batch_equals_items(FitsImageDataset(files, add_channel_dim=False), range(5)),
                      FitsBatch)
    stretched = _batch_equals_items(FitsImageDataset(files, transform=ArcsinhStretch()), range(5))
    assert isinstance(stretched, FitsBatch)
    per_item = _batch_equals_items(FitsImageDataset(files, transform=ZScaleNormalize()), range(5))
    assert not isinstance(per_item, FitsBatch) and isinstance(per_item[0], tuple)
    # Companions, several HDUs and plane selections keep the item-by-item path.
    assert not isinstance(_batch_equals_items(FitsImageDataset(files, ivar_hdu="R"), range(3)), FitsBatch)
    assert not isinstance(_batch_equals_items(FitsImageDataset(files, hdu=[0, "R"]), range(3)), FitsBatch)


def test_image_batches_fall_back_for_odd_files(stamps, tmp_path):
    dup = stamps["dup"][0]
    ds = FitsImageDataset([dup, stamps["i16"][0]])
    got = _batch_equals_items(ds, [0])
    assert np.array_equal(got[0][0][0].numpy(), np.arange(120).reshape(12, 10) + 7.0)
    mixed = FitsImageDataset([stamps["f32"][0], stamps["f64"][0]])
    assert not isinstance(_batch_equals_items(mixed, [0, 1]), FitsBatch)
    small = tmp_path / "small.fits"
    fits.PrimaryHDU(np.ones((3, 3), np.float32)).writeto(small)
    shapes = FitsImageDataset([stamps["f32"][0], str(small)])
    assert not isinstance(shapes.__getitems__([0, 1]), FitsBatch)
    with pytest.raises(RuntimeError):
        fits_collate_fn(shapes.__getitems__([0, 1]))
    # A file cut short: the general reader's error, batched or not.
    cut = tmp_path / "cut.fits"
    with open(stamps["f32"][0], "rb") as fh:
        cut.write_bytes(fh.read()[:2880 + 100])
    short = FitsImageDataset([str(cut)])
    with pytest.raises(Exception) as per_item:
        short[0]
    with pytest.raises(type(per_item.value)):
        short.__getitems__([0])
    planes = FitsCubeDataset([stamps["f32"][0]] * 2, slice_index=3)  # plane selections: per item
    assert not isinstance(_batch_equals_items(planes, [0, 1]), FitsBatch)


# -- loaders: every sample once, with workers ----------------------------------------------------
def _cutout_ids(mosaics):
    # Stamp k's top-left pixel is pixel (k, k) of the mosaic: identifies the sample.
    return [(mosaics["f32"], 0, k, k, 5) for k in range(23)]


def _check_cutouts_once(loader, specs, mosaics):
    full = fits.getdata(mosaics["f32"])
    seen = []
    for batch in loader:
        assert batch.shape[1:] == (1, 5, 5)
        for t in batch:
            k = int(np.argwhere(np.diag(full)[:40] == float(t[0, 0, 0]))[0, 0])
            assert np.array_equal(t[0].numpy(), full[k:k + 5, k:k + 5])
            seen.append(k)
    assert sorted(seen) == list(range(len(specs)))
    return seen


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_cutout_loader_workers_fork(mosaics, workers):
    specs = _cutout_ids(mosaics)
    kw = {"multiprocessing_context": "fork"} if workers else {}
    loader = make_loader(FitsCutoutDataset(specs), batch_size=4, num_workers=workers, **kw)
    torch.manual_seed(0)
    first = _check_cutouts_once(loader, specs, mosaics)
    second = _check_cutouts_once(loader, specs, mosaics)
    assert first != second  # shuffled per epoch


def test_loader_workers_spawn_batches(mosaics, stamps):
    specs = _cutout_ids(mosaics)
    loader = make_loader(FitsCutoutDataset(specs), batch_size=5, num_workers=2,
                         multiprocessing_context="spawn", shuffle=False)
    assert _check_cutouts_once(loader, specs, mosaics) == list(range(len(specs)))
    files = stamps["f32"]
    got = {}
    for x, y in make_loader(FitsImageDataset(files, label_key="CLASS"), batch_size=2,
                            num_workers=2, multiprocessing_context="spawn"):
        for img, label in zip(x, y):
            got[int(label)] = img
    assert sorted(got) == list(range(len(files)))
    assert all(np.array_equal(got[k][0].numpy(), fits.getdata(files[k])) for k in got)


def test_custom_collate_gets_items(mosaics):
    specs = _cutout_ids(mosaics)
    loader = make_loader(FitsCutoutDataset(specs), batch_size=4, shuffle=False,
                         collate_fn=lambda items: [tuple(t.shape) for t in items])
    assert next(iter(loader)) == [(1, 5, 5)] * 4
    loader = torch.utils.data.DataLoader(FitsCutoutDataset(specs), batch_size=10)
    assert [b.shape[0] for b in loader] == [10, 10, 3]


# -- catalog batches -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    n = 2503
    rng = np.random.default_rng(4)
    path = str(tmp_path_factory.mktemp("batch_cat") / "cat.fits")
    fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="K", array=np.arange(n, dtype=np.int64)),
        fits.Column(name="MAG", format="E", array=rng.normal(18, 2, n).astype(np.float32)),
        fits.Column(name="RA", format="D", array=rng.uniform(0, 360, n)),
        fits.Column(name="FLAG", format="J", array=rng.integers(-9, 9, n).astype(np.int32)),
        fits.Column(name="B", format="B", array=rng.integers(0, 255, n).astype(np.uint8)),
        fits.Column(name="NULLED", format="J", null=-9, array=rng.integers(-9, 9, n).astype(np.int32)),
        fits.Column(name="U16", format="I", bzero=32768, array=rng.integers(0, 65535, n).astype(np.uint16)),
        fits.Column(name="NAME", format="4A", array=np.array(["ab"] * n))]).writeto(path)
    return path


def _table_batches(path, generic, monkeypatch=None, **kw):
    from torchfits.data import FitsTableIterableDataset

    ds = FitsTableIterableDataset(path, as_batches=True, **kw)
    if generic:
        ds._direct_batches = lambda *a: None  # the scanner + Arrow path
    return list(ds)


@pytest.mark.parametrize("columns", [["ID", "MAG", "RA", "FLAG", "B"], ["MAG", "U16", "ID"]])
@pytest.mark.parametrize("chunk", [64, 32 << 20])
def test_table_batches_equal_the_scanner(table_path, columns, chunk, monkeypatch):
    import torchfits.data.tables as tables

    monkeypatch.setattr(tables, "_CHUNK_BYTES", chunk)  # small: many chunks, each sliced
    for world in (1, 3):
        for rank in range(world):
            kw = dict(columns=columns, batch_size=300, rank=rank, world_size=world)
            fast, ref = _table_batches(table_path, False, **kw), _table_batches(table_path, True, **kw)
            assert len(fast) == len(ref) and all(
                a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k])
                                             for k in a) for a, b in zip(fast, ref))
    for generic in (False, True):  # TNULL columns: nulls have no tensor form on either path
        with pytest.raises(TypeError, match="NULLED"):
            _table_batches(table_path, generic, columns=["MAG", "NULLED"], batch_size=300)
    direct = tables.FitsTableIterableDataset(table_path, columns=["ID", "MAG"], as_batches=True)
    assert direct._direct_batches(table_path, 0, 10) is not None
    for cols, where in ((["MAG", "NULLED"], None), (["MAG", "U16"], None), (["MAG"], "MAG > 18")):
        other = tables.FitsTableIterableDataset(table_path, columns=cols, where=where, as_batches=True)
        assert other._direct_batches(table_path, 0, 10) is None


def test_table_batches_come_from_arrows_pool(table_path, monkeypatch):
    """The direct path decodes its chunks into Arrow's memory pool (freed chunks serve the next
    ones instead of fresh pages), each after the first ahead on a background thread: the
    batches held account for pool bytes, their values are astropy's, and writing into a batch
    works (the memory is the caller's)."""
    import gc
    import threading

    import pyarrow as pa

    import torchfits.data.tables as tables

    monkeypatch.setattr(tables, "_CHUNK_BYTES", 35 * 700)  # chunks of 700 rows (35 bytes), 2 batches
    decoded_on = []
    real = tables.decode_table_numpy

    def spy(*args, **kw):
        decoded_on.append(threading.current_thread().name)
        return real(*args, **kw)

    monkeypatch.setattr(tables, "decode_table_numpy", spy)
    gc.collect()  # Arrow memory of earlier tests freed now, not while this one counts
    before = pa.total_allocated_bytes()
    ds = tables.FitsTableIterableDataset(table_path, columns=["ID", "MAG"], as_batches=True, batch_size=350)
    batches = list(ds)
    # the first chunk on the caller's thread, each later one ahead on a background thread
    assert len(decoded_on) == 4 and decoded_on[0] == threading.current_thread().name
    assert all(name.startswith("torchfits-ahead") for name in decoded_on[1:])
    assert pa.total_allocated_bytes() - before >= 2503 * 12  # every chunk's two columns
    with fits.open(table_path) as hdul:
        want = {k: np.asarray(hdul[1].data[k]) for k in ("ID", "MAG")}
    for k in want:
        got = torch.cat([b[k] for b in batches]).numpy()
        assert got.dtype == want[k].dtype.newbyteorder("=") and np.array_equal(got, want[k])
    batches[0]["MAG"][0] = -1.0
    assert float(batches[0]["MAG"][0]) == -1.0
    del batches
    assert pa.total_allocated_bytes() - before < 2503 * 12  # given back once dropped


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [2, 4])
def test_table_batches_workers_every_row_once(table_path, workers):
    from torchfits.data import FitsTableIterableDataset

    ds = FitsTableIterableDataset(table_path, columns=["ID", "MAG"], batch_size=128, as_batches=True)
    for _ in range(2):
        ids = [b["ID"] for b in make_loader(ds, batch_size=None, num_workers=workers,
                                            multiprocessing_context="fork")]
        assert torch.equal(torch.sort(torch.cat(ids)).values, torch.arange(2503))


@pytest.mark.parametrize("kind", ["f32", "scaled"])
def test_staged_cutouts_decode_each_file_at_once(mosaics, kind, monkeypatch):
    """The stamps of one mosaic decode in one batch call; equal to reading each box alone
    (FitsCutoutDataset items), also when an edge clamps some boxes (stamp by stamp)."""
    import torchfits.data.cutouts as cutouts
    from torchfits.data import FitsStagedCutoutIterableDataset

    calls = []
    real = cutouts.batch_cutouts
    monkeypatch.setattr(cutouts, "batch_cutouts", lambda *a: calls.append(len(a[2])) or real(*a))
    path = str(mosaics[kind])
    kw = dict(cutouts_per_file=9, cutout_size=(8, 12), seed=5)
    got = list(FitsStagedCutoutIterableDataset([path], **kw))
    assert calls == [9]
    h, w = fits.getdata(path).shape
    rng = np.random.default_rng([5, 0, 0, 0, 0])  # epoch_rng(seed, epoch=0, rank=0, worker=0, file=0)
    boxes = []
    for _ in range(9):
        x, y = int(rng.integers(0, w - 12 + 1)), int(rng.integers(0, h - 8 + 1))
        boxes.append((path, 0, x, y, x + 12, y + 8))
    ref = FitsCutoutDataset(boxes)
    assert len(got) == 9 and all(_same(a, ref[i]) for i, a in enumerate(got))
    assert all(np.array_equal(a[0].numpy(), fits.getdata(path)[b[3]:b[5], b[2]:b[4]],
                              equal_nan=True) for a, b in zip(got, boxes))
    half = [(w - 6, h - 4, w + 6, h + 4), (0, 0, 12, 8)]  # the first box is cut by the corner
    clamped = list(FitsStagedCutoutIterableDataset(
        [path], cutouts_per_file=2, cutout_size=(8, 12), dtype=torch.float64, edge="clamp",
        cutout_generator=lambda *_: half.pop(0)))
    assert clamped[0].shape == (1, 4, 6) and clamped[1].shape == (1, 8, 12)
    assert clamped[0].dtype == torch.float64
    assert np.array_equal(clamped[1][0].numpy(), fits.getdata(path)[:8, :12], equal_nan=True)


def _old_logical_table(path, nrows: int) -> str:
    """Columns ``flag`` (PL(2), old astropy's 0x00/0x01 bytes: every cell [0, 0] but the last
    row's [1, 0], so judged over the whole column they are booleans) and ``n`` (J, the row)."""
    from _tablehelpers import write_raw_bintable

    rows = b"".join(np.array([2, 0 if k < nrows - 1 else 2, k], ">i4").tobytes() for k in range(nrows))
    return write_raw_bintable(path, [("TTYPE1", "flag"), ("TFORM1", "PL(2)"), ("TTYPE2", "n"),
                                     ("TFORM2", "J")], rows, nrows, 12, heap=bytes([0, 0, 1, 0]))


def test_table_datasets_judge_old_logical_columns_once(tmp_path, monkeypatch):
    """The table datasets decode old astropy's 0x00/0x01 logical heaps as booleans and judge
    each such column once per file version, not once per batch or row range."""
    from torchfits.data import FitsTableDataset, FitsTableIterableDataset
    from torchfits.tables import variable_length as _variable_length

    calls = []
    # the cached judgement (the source imports it when first needed) and the per-call one
    real = _variable_length.legacy_logical_vla
    monkeypatch.setattr(_variable_length, "legacy_logical_vla",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    path = _old_logical_table(tmp_path / "old.fits", 200)
    expected = [[False, False]] * 199 + [[True, False]]
    rows = list(FitsTableIterableDataset(path, batch_size=3))
    assert [r["flag"].tolist() for r in rows] == expected
    assert [int(r["n"]) for r in rows] == list(range(200))
    batches = list(FitsTableIterableDataset(path, columns=["flag", "n"], batch_size=7,
                                            as_batches=True))
    assert [c.tolist() for b in batches for c in b["flag"]] == expected
    for world in (1, 3):  # each slot's row range
        got = [list(FitsTableIterableDataset(path, columns=["n"], batch_size=5, as_batches=True,
                                             rank=rank, world_size=world)) for rank in range(world)]
        assert sum(len(b["n"]) for part in got for b in part) == 200
    ds = FitsTableDataset(path)
    assert [ds[i][0]["flag"].tolist() for i in (0, 199)] == [[False, False], [True, False]]
    assert len(calls) == 1

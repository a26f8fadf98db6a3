"""torchfits.data: datasets equal direct reads (astropy oracle), DataLoaders with 0/2/4 workers
under fork and spawn deliver every sample once per epoch, rank x worker sharding, seeded
per-epoch shuffles, 1.x errors; pickling of Image/Scanner/fragments into spawned processes."""
from __future__ import annotations

import multiprocessing as mp
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from _oracles import write_image  # noqa: E402
from _stamps import write_stamp  # noqa: E402
from torchfits.data import (  # noqa: E402
    BandInfo,
    FitsCubeDataset,
    FitsCubeIterableDataset,
    FitsCutoutDataset,
    FitsImageDataset,
    FitsImageIterableDataset,
    FitsSpectrumDataset,
    FitsStagedCutoutIterableDataset,
    FitsTableDataset,
    FitsTableIterableDataset,
    FitsTensorDataset,
    discover_bands,
    fits_collate_fn,
    make_loader,
)

# 4 workers on a 2-core machine is what the tests ask for; torch warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

NFILES = 7
HAS_FORK = "fork" in mp.get_all_start_methods()


def _image(k: int) -> np.ndarray:
    # Every file is distinguishable: pixel (0, 0) holds the file number.
    a = np.random.default_rng(k).normal(size=(6, 8)).astype(np.float32)
    a[0, 0] = k
    return a


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("stamps")
    for k in range(NFILES):
        write_stamp(root / f"img{k:02d}.fits", _image(k),
                    cards=[("CLASS", k % 3), ("ZP", 22.5), ("EXPTIME", 10.0), ("EXTNAME", "G")],
                    extensions=[("G_IVAR", np.full((6, 8), k + 1, np.float32)),
                                ("G_DQ", (np.arange(48).reshape(6, 8) % 8).astype(np.int16)),
                                ("R", _image(k) * 2),
                                ("R_IVAR", np.ones((6, 8), np.float32)),
                                ("R_DQ", np.zeros((6, 8), np.int16))])
    return root


@pytest.fixture(scope="module")
def files(folder):
    return sorted(str(p) for p in folder.glob("img*.fits"))


def _file_id(t) -> int:
    return int(round(float(t.reshape(-1)[0])))


# -- map-style image datasets ----------------------------------------------------------------------
def test_image_dataset_matches_astropy(files):
    ds = FitsImageDataset(files[0].rsplit("/", 1)[0] + "/img*.fits", label_key="CLASS")
    assert ds.files == files and len(ds) == NFILES
    assert repr(ds) == f"FitsImageDataset(n={NFILES}, files=[{files[0]!r}, ...], hdu=0, device='cpu')"
    for i in (0, 3, -1):
        x, y = ds[i]
        k = i % NFILES
        assert x.shape == (1, 6, 8) and x.dtype == torch.float32
        assert np.array_equal(x[0].numpy(), fits.getdata(files[k]))
        assert y.dtype == torch.int64 and y.dim() == 0 and int(y) == k % 3
    with pytest.raises(IndexError):
        ds[NFILES]
    plain = FitsTensorDataset(files[:1])
    assert repr(plain) == f"FitsTensorDataset(n=1, files=[{files[0]!r}], hdu=0, device='cpu')"
    x, y = plain[0]
    assert x.shape == (6, 8) and int(y) == 0


def test_image_dataset_errors(files, tmp_path):
    with pytest.raises(ValueError, match="paths must be non-empty"):
        FitsImageDataset([])
    with pytest.raises(ValueError, match="labels length 2 != files length 7"):
        FitsImageDataset(files, labels=[1, 2])
    with pytest.raises(RuntimeError, match="NOPE"):
        FitsImageDataset(files, label_key="NOPE")
    # A label card that is not an integer: a FitsError naming the file (still a ValueError).
    from torchfits.errors import CorruptHeaderError

    bad = str(tmp_path / "badlabel.fits")
    fits.writeto(bad, np.zeros((6, 8), np.float32), fits.Header([("CLASS", "cat")]))
    with pytest.raises(CorruptHeaderError, match=r"badlabel\.fits: HDU 0: label keyword CLASS = 'cat'"):
        FitsImageDataset([bad], label_key="CLASS")
    with pytest.raises(ValueError):
        FitsImageDataset([bad], label_key="CLASS")
    with pytest.raises(FileNotFoundError, match="no files match"):  # at construction
        FitsImageDataset(str(tmp_path / "none*.fits"))
    with pytest.raises(ValueError, match="device"):
        FitsImageDataset(files, device="gpu")
    with pytest.raises(ValueError, match="mmap"):
        FitsImageDataset(files, mmap="yes")
    with pytest.raises(ValueError, match="non-negative"):
        FitsImageDataset(files, hdu=-1)
    bad = tmp_path / "bad.fits"
    fits.HDUList([fits.PrimaryHDU(np.zeros((6, 8), np.float32)),
                  fits.ImageHDU(np.zeros((5, 8), np.float32), name="IVAR")]).writeto(bad)
    with pytest.raises(ValueError, match=r"\(5, 8\).*\(6, 8\)"):
        FitsImageDataset([str(bad)], ivar_hdu="IVAR")[0]


def test_companions_and_dq(files):
    ds = FitsImageDataset(files, hdu="G", ivar_hdu="G_IVAR", mask_hdu="G_DQ", mask_is_dq=True,
                          bad_bits=[1])
    p, _ = ds[2]
    dq = fits.getdata(files[2], "G_DQ")
    assert set(p) == {"flux", "ivar", "mask"}
    assert p["mask"].dtype == torch.bool and p["mask"].shape == (1, 6, 8)
    assert np.array_equal(p["mask"][0].numpy(), (dq & 2) == 0)
    assert np.array_equal(p["ivar"][0].numpy(), fits.getdata(files[2], "G_IVAR"))
    anybit = FitsImageDataset(files, hdu="G", mask_hdu="G_DQ", mask_is_dq=True)[2][0]["mask"]
    assert np.array_equal(anybit[0].numpy(), dq == 0)
    plain = FitsImageDataset(files, hdu="G", mask_hdu="G_DQ")[2][0]["mask"]
    assert np.array_equal(plain[0].numpy(), dq.astype(bool))


def test_multi_hdu_and_bands(files):
    ds = FitsImageDataset(files, hdu=["G", "R"], ivar_hdu="G_IVAR")
    p, _ = ds[1]
    assert p["flux"].shape == (2, 6, 8) and p["ivar"].shape == (2, 6, 8)
    assert np.array_equal(p["flux"][1].numpy(), fits.getdata(files[1], "R"))
    bands = discover_bands(files[0])
    assert [b.name for b in bands] == ["G", "G_IVAR", "G_DQ", "R", "R_IVAR", "R_DQ"]
    assert [b.role for b in bands] == ["flux", "ivar", "mask", "flux", "ivar", "mask"]
    g = bands[0]
    assert isinstance(g, BandInfo) and g.zeropoint == 22.5 and g.dtype == "float32"
    assert g.flux_scale() == pytest.approx(10 ** (-0.4 * 22.5))
    assert g.flux_scale(exptime_normalized=False) == pytest.approx(10 ** (-0.4 * 22.5) / 10)
    assert g.to_dict()["shape"] == (6, 8)
    fb = FitsImageDataset.from_bands(files)
    assert fb.hdus == ["G", "R"] and fb.mask_is_dq
    q, _ = fb[0]
    assert q["flux"].shape == (2, 6, 8) and q["mask"].shape == (2, 6, 8)
    assert fb.band_zeropoints() == {"G": 22.5, "R": None}
    with pytest.raises(ValueError, match="bands not found"):
        FitsImageDataset.from_bands(files, bands=["Z"])


def test_cube_dataset(tmp_path):
    cube = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    path = str(tmp_path / "cube.fits")
    fits.PrimaryHDU(cube).writeto(path)
    assert FitsCubeDataset(path)[0][0].shape == (3, 4, 5)
    one = FitsCubeDataset(path, slice_index=1)[0][0]
    assert np.array_equal(one.numpy(), cube[1])
    win = FitsCubeDataset(path, spectral_slice=(1, 3))[0][0]
    assert np.array_equal(win.numpy(), cube[1:3])
    assert next(iter(FitsCubeIterableDataset(path, slice_index=2))).shape == (4, 5)
    with pytest.raises(ValueError):
        FitsCubeDataset(path, slice_index=1, spectral_slice=(0, 1))


# -- dtypes and the device path --------------------------------------------------------------------
def test_dataset_dtype(files):
    for dt in (torch.float16, torch.bfloat16, torch.float64):
        x, _ = FitsImageDataset(files, dtype=dt)[0]
        assert x.dtype == dt
        assert torch.equal(x, torch.from_numpy(fits.getdata(files[0]).astype(np.float32)).to(dt)[None])
    with pytest.raises(TypeError):
        FitsImageDataset(files, dtype="complex-ish")


@pytest.mark.parametrize("bitpix,stored,bscale,bzero,blank", [
    (8, np.arange(48, dtype=np.uint8).reshape(6, 8), None, None, None),
    (8, np.arange(48, dtype=np.uint8).reshape(6, 8), None, -128, None),
    (16, (np.arange(48, dtype=np.int16) * 1000 - 20000).reshape(6, 8), None, 32768, None),
    (16, (np.arange(48, dtype=np.int16) - 7).reshape(6, 8), 0.25, 3.0, -7),
    (32, (np.arange(48, dtype=np.int32) * 99991).reshape(6, 8), None, None, None),
    (32, (np.arange(48, dtype=np.int32) - 3).reshape(6, 8), 1.5, -2.0, None),
    (64, (np.arange(48, dtype=np.int64) << 40).reshape(6, 8), None, None, None),
    (-32, np.linspace(-3, 3, 48, dtype=np.float32).reshape(6, 8), None, None, None),
    (-64, np.linspace(-3, 3, 48).reshape(6, 8), 2.0, 1.0, None),
])
def test_scale_on_device_matches_host_decode(tmp_path, bitpix, stored, bscale, bzero, blank):
    path = str(write_image(tmp_path / "x.fits", stored, bitpix=bitpix, bscale=bscale, bzero=bzero,
                           blank=blank))
    host = FitsTensorDataset(path)[0][0]
    dev = FitsTensorDataset(path, scale_on_device=True)[0][0]
    assert dev.dtype == host.dtype
    assert torch.equal(torch.nan_to_num(dev, nan=-999.0), torch.nan_to_num(host, nan=-999.0))
    spec = [(path, 0, 1, 2, 6, 5)]
    a = FitsCutoutDataset(spec)[0]
    b = FitsCutoutDataset(spec, scale_on_device=True)[0]
    assert a.shape == b.shape == (1, 3, 5)
    assert torch.equal(torch.nan_to_num(a, nan=-999.0), torch.nan_to_num(b, nan=-999.0))


def test_loader_device_argument_cpu(files):
    plain = [b for b in make_loader(FitsImageDataset(files), batch_size=3, shuffle=False)]
    moved = [b for b in make_loader(FitsImageDataset(files), batch_size=3, shuffle=False, device="cpu")]
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(plain, moved))
    with pytest.raises(ValueError, match="device"):
        make_loader(FitsImageDataset(files), device="gpu")


# -- iterable datasets, sharding, shuffles ---------------------------------------------------------
def test_rank_sharding_examples(files, monkeypatch):
    five = files[:5]
    ids = lambda ds: [_file_id(t) for t in ds]  # noqa: E731
    assert ids(FitsImageIterableDataset(five, rank=0, world_size=2)) == [0, 2, 4]
    assert ids(FitsImageIterableDataset(five, rank=1, world_size=2)) == [1, 3]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert ids(FitsImageIterableDataset(five)) == [1, 4]
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert ids(FitsImageIterableDataset(five)) == [0, 2, 4]
    for rank, world in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="rank"):
            FitsImageIterableDataset(five, rank=rank, world_size=world)


def test_shuffle_deterministic_per_seed_and_epoch(files):
    def epochs(seed, n=3, **kw):
        ds = FitsImageIterableDataset(files, shuffle=True, seed=seed, **kw)
        return [[_file_id(t) for t in ds] for _ in range(n)]

    a, b = epochs(7), epochs(7)
    assert a == b  # same (seed, epoch) → same order
    assert all(sorted(e) == list(range(NFILES)) for e in a)
    assert len({tuple(e) for e in a}) > 1  # the order changes every epoch
    assert epochs(8) != a
    ds = FitsImageIterableDataset(files, shuffle=True, seed=7)
    ds.set_epoch(1)
    assert [_file_id(t) for t in ds] == a[1]
    buffered = epochs(3, shuffle_buffer_size=4)
    assert all(sorted(e) == list(range(NFILES)) for e in buffered)
    assert buffered == epochs(3, shuffle_buffer_size=4)


def _collect(loader):
    out = []
    for batch in loader:
        items = batch[0] if isinstance(batch, (tuple, list)) else batch
        out += [(_file_id(t), t) for t in items]
    return out


def _check_once(files, got):
    assert sorted(k for k, _ in got) == list(range(len(files)))
    for k, t in got:
        assert np.array_equal(t.reshape(6, 8).numpy(), fits.getdata(files[k]))


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_loader_workers_fork_iterable(files, workers):
    ds = FitsImageIterableDataset(files, shuffle=True, seed=5)
    kw = {"multiprocessing_context": "fork"} if workers else {}
    loader = make_loader(ds, batch_size=2, num_workers=workers, **kw)
    first, second = _collect(loader), _collect(loader)
    _check_once(files, first)
    _check_once(files, second)
    again = make_loader(FitsImageIterableDataset(files, shuffle=True, seed=5), batch_size=2,
                        num_workers=workers, **kw)
    assert [k for k, _ in _collect(again)] == [k for k, _ in first]
    if workers == 0:
        assert [k for k, _ in first] != [k for k, _ in second]


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [2, 4])
def test_loader_workers_fork_map_style(files, workers):
    loader = make_loader(FitsImageDataset(files), batch_size=3, num_workers=workers,
                         multiprocessing_context="fork")
    _check_once(files, _collect(loader))


def test_loader_workers_spawn(files):
    # Spawned workers start a fresh interpreter each (seconds apiece): one loader, two workers.
    ds = FitsImageIterableDataset(files, ivar_hdu="G_IVAR", shuffle=True, seed=1)
    loader = make_loader(ds, batch_size=3, num_workers=2, multiprocessing_context="spawn")
    got = []
    for batch in loader:
        assert set(batch) == {"flux", "ivar"}
        got += [(_file_id(t), t) for t in batch["flux"]]
    _check_once(files, got)


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("world", [1, 2, 3])
def test_rank_times_workers_every_file_once(files, world):
    got = []
    for rank in range(world):
        ds = FitsImageIterableDataset(files, rank=rank, world_size=world)
        got += _collect(make_loader(ds, batch_size=2, num_workers=2, multiprocessing_context="fork"))
    _check_once(files, got)


# -- spectra -----------------------------------------------------------------------------------------
@pytest.fixture
def spectra(tmp_path):
    path = str(tmp_path / "spec.fits")
    b = np.linspace(1, 2, 10).astype(np.float32)
    r = np.linspace(3, 4, 10).astype(np.float32)
    z = np.linspace(5, 6, 7).astype(np.float32)
    wave = fits.ImageHDU(np.arange(10, dtype=np.float64), name="WAVE")
    tab = fits.BinTableHDU.from_columns([
        fits.Column(name="FLUX", format="10E", array=np.stack([b, r])),
        fits.Column(name="IVAR", format="10E", array=np.ones((2, 10), np.float32)),
        fits.Column(name="WAVE", format="10D", array=np.tile(np.arange(10.0), (2, 1)))], name="TAB")
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(b, name="B"), fits.ImageHDU(r, name="R"),
                  fits.ImageHDU(z, name="Z"), wave, tab]).writeto(path)
    return path, b, r, z


def test_spectrum_dataset(spectra):
    path, b, r, z = spectra
    one = FitsSpectrumDataset(path, hdu="B", wavelength_hdu="WAVE")[0]
    assert set(one) == {"flux", "wavelength"} and np.array_equal(one["flux"].numpy(), b)
    arms = FitsSpectrumDataset(path, hdu=["B", "R"])[0]
    assert set(arms) == {"B", "R"} and np.array_equal(arms["R"]["flux"].numpy(), r)
    stacked = FitsSpectrumDataset(path, hdu=["B", "R"], layout="stack")[0]
    assert stacked["flux"].shape == (2, 10)
    cat = FitsSpectrumDataset(path, hdu=["B", "Z"], layout="concat")[0]
    assert np.array_equal(cat["flux"].numpy(), np.concatenate([b, z]))
    with pytest.raises(ValueError, match="layout='stack' requires equal nwave per arm"):
        FitsSpectrumDataset(path, hdu=["B", "Z"], layout="stack")[0]
    row = FitsSpectrumDataset(path, hdu="TAB", column="FLUX", ivar_column="IVAR",
                              wavelength_column="WAVE", row=1)[0]
    assert np.array_equal(row["flux"].numpy(), r) and row["ivar"].shape == (10,)
    assert row["wavelength"].dtype == torch.float64
    with pytest.raises(ValueError, match="layout"):
        FitsSpectrumDataset(path, layout="zip")


# -- tables ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    n = 1003
    rng = np.random.default_rng(3)
    path = str(tmp_path_factory.mktemp("cat") / "cat.fits")
    cols = {"ID": np.arange(n, dtype=np.int64), "MAG": rng.normal(18, 2, n).astype(np.float32),
            "RA": rng.uniform(0, 360, n), "NAME": np.array([f"s{i % 17}" for i in range(n)])}
    fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="K", array=cols["ID"]),
        fits.Column(name="MAG", format="E", array=cols["MAG"]),
        fits.Column(name="RA", format="D", array=cols["RA"]),
        fits.Column(name="NAME", format="6A", array=cols["NAME"])]).writeto(path)
    return path, cols


def test_table_dataset_batches(catalog):
    """``__getitems__`` gathers each column once; equal to the rows one by one (strings as
    uint8 rows, labels, transforms), and a loader delivers every row once."""
    from torchfits.data.loader import FitsBatch

    path, cols = catalog
    keep = np.flatnonzero(cols["MAG"] < 18)
    ds = FitsTableDataset(path, where="MAG < 18", labels=np.arange(keep.size) % 3)
    idx = [7, 0, -1, 7, 3]
    got = ds.__getitems__(idx)
    assert isinstance(got, FitsBatch)
    x, y = fits_collate_fn(got)
    rx, ry = fits_collate_fn([ds[i] for i in idx])
    assert x.keys() == rx.keys() and all(x[k].dtype == rx[k].dtype and torch.equal(x[k], rx[k])
                                         for k in x)
    assert torch.equal(y, ry) and x["NAME"].shape == (5, 3) and x["NAME"].dtype == torch.uint8
    assert x["ID"].tolist() == [int(keep[i]) for i in idx]

    def scale(row):  # not batchable: runs row by row on views of the batch
        return {"MAG": row["MAG"] * 2}

    tds = FitsTableDataset(path, columns=["MAG"], transform=scale)
    items = tds.__getitems__([4, 2])
    assert torch.equal(fits_collate_fn(items)[0]["MAG"],
                       torch.stack([tds[4][0]["MAG"], tds[2][0]["MAG"]]))
    with pytest.raises(IndexError):
        ds.__getitems__([0, len(ds)])
    seen = torch.cat([b["ID"] for b, _ in make_loader(ds, batch_size=64, shuffle=True)])
    assert sorted(seen.tolist()) == keep.tolist()


def test_table_dataset(catalog):
    path, cols = catalog
    ds = FitsTableDataset(path, where="MAG < 18")
    keep = np.flatnonzero(cols["MAG"] < 18)
    assert len(ds) == keep.size
    row, label = ds[5]
    assert int(row["ID"]) == keep[5] and row["MAG"].dim() == 0 and int(label) == 0
    assert bytes(row["NAME"].numpy()).rstrip(b"\0").decode() == cols["NAME"][keep[5]]
    assert len(FitsTableDataset(path, where="MAG > 1000")) == 0
    with pytest.raises(ValueError, match="labels length"):
        FitsTableDataset(path, labels=[1])
    with pytest.raises(KeyError):
        FitsTableDataset(path, columns=["NOPE"])
    with pytest.raises(IndexError):
        ds[len(ds)]


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("world,workers", [(1, 0), (2, 2), (3, 4)])
def test_table_iterable_rows_once(catalog, world, workers):
    path, cols = catalog
    got = []
    for rank in range(world):
        ds = FitsTableIterableDataset(path, columns=["ID", "MAG"], where="MAG < 18", batch_size=97,
                                      rank=rank, world_size=world, as_batches=True)
        kw = {"multiprocessing_context": "fork"} if workers else {}
        for batch in make_loader(ds, batch_size=None, num_workers=workers, **kw):
            got.append(batch["ID"].numpy())
    ids = np.sort(np.concatenate(got))
    assert np.array_equal(ids, np.flatnonzero(cols["MAG"] < 18))


def test_table_iterable_rows_and_shuffle(catalog):
    path, cols = catalog
    rows = list(FitsTableIterableDataset(path, batch_size=100))
    assert len(rows) == len(cols["ID"]) and rows[7]["NAME"].dtype == torch.uint8
    assert set(rows[0]) == {"ID", "MAG", "RA", "NAME"}
    batches = list(FitsTableIterableDataset(path, batch_size=400, as_batches=True))
    assert set(batches[0]) == {"ID", "MAG", "RA"} and [len(b["ID"]) for b in batches] == [400, 400, 203]
    ds = FitsTableIterableDataset(path, columns=["ID"], batch_size=100, shuffle_buffer_size=50, seed=2)
    e0 = [int(r["ID"]) for r in ds]
    e1 = [int(r["ID"]) for r in ds]
    assert sorted(e0) == sorted(e1) == list(range(len(cols["ID"])))
    assert e0 != e1 and e0 != sorted(e0)
    again = FitsTableIterableDataset(path, columns=["ID"], batch_size=100, shuffle_buffer_size=50, seed=2)
    assert [int(r["ID"]) for r in again] == e0
    with pytest.raises(ValueError, match="unknown column|not found"):
        FitsTableIterableDataset(path, where="NOPE > 1")


# -- cutouts -------------------------------------------------------------------------------------
def test_cutout_dataset(files):
    full = fits.getdata(files[0])
    ds = FitsCutoutDataset([(files[0], 0, 1, 2, 3), (files[0], "G", 5, 4, 20, 30),
                            (files[0], 0, -2, -2, 3)], edge="clamp")
    assert ds.files == [files[0]] and len(ds) == 3
    assert np.array_equal(ds[0][0].numpy(), full[2:5, 1:4])
    assert np.array_equal(ds[1][0].numpy(), full[4:, 5:])  # clamped at the edges
    assert np.array_equal(ds[2][0].numpy(), full[0:1, 0:1])
    assert FitsCutoutDataset([(files[0], 0, 1, 2, 3)], add_channel_dim=False)[0].shape == (3, 3)
    with pytest.raises(ValueError, match=r"cutout must be \(path, hdu, x, y, size\) or "
                                         r"\(path, hdu, x1, y1, x2, y2\)"):
        FitsCutoutDataset([(files[0], 0, 1, 2)])


def test_staged_cutouts(files):
    ds = FitsStagedCutoutIterableDataset(files[:3], cutouts_per_file=4, cutout_size=(3, 5),
                                         mask_hdu="G_DQ", mask_is_dq=True, seed=4)
    items = list(ds)
    assert len(items) == 12 and items[0]["flux"].shape == (1, 3, 5)
    assert items[0]["mask"].dtype == torch.bool
    ds2 = FitsStagedCutoutIterableDataset(files[:3], cutouts_per_file=4, cutout_size=(3, 5),
                                          mask_hdu="G_DQ", mask_is_dq=True, seed=4)
    assert all(torch.equal(a["flux"], b["flux"]) for a, b in zip(items, ds2))
    fixed = FitsStagedCutoutIterableDataset(files[:1], cutouts_per_file=2, cutout_size=2,
                                            cutout_generator=lambda h, w, ch, cw: (1, 1, 1 + cw, 1 + ch))
    got = list(fixed)
    assert np.array_equal(got[1][0].numpy(), fits.getdata(files[0])[1:3, 1:3])
    with pytest.raises(ValueError, match="cutout_size"):
        FitsStagedCutoutIterableDataset(files, cutout_size=0)


# -- collation -------------------------------------------------------------------------------------
def test_fits_collate_fn():
    t = torch.ones(2, 3)
    assert fits_collate_fn([]) == []
    assert fits_collate_fn([t, t]).shape == (2, 2, 3)
    d = fits_collate_fn([{"a": t, "b": {"c": t}}] * 3)
    assert d["a"].shape == (3, 2, 3) and d["b"]["c"].shape == (3, 2, 3)
    x, y = fits_collate_fn([(t, torch.tensor(1)), (t, torch.tensor(2))])
    assert x.shape == (2, 2, 3) and y.tolist() == [1, 2]
    (dx, dy) = fits_collate_fn([({"f": t}, torch.tensor(0))] * 2)
    assert dx["f"].shape == (2, 2, 3)
    with pytest.raises(ValueError, match="'name'.*collate_fn"):
        fits_collate_fn([{"name": "x"}, {"name": "y"}])
    with pytest.raises(RuntimeError):
        fits_collate_fn([torch.ones(2), torch.ones(3)])
    with pytest.raises(TypeError):
        fits_collate_fn([1, 2])


def test_make_loader_defaults(files):
    loader = make_loader(FitsImageDataset(files))
    assert loader.batch_size == 32 and loader.collate_fn is fits_collate_fn
    assert isinstance(loader.sampler, torch.utils.data.RandomSampler)
    it = make_loader(FitsImageIterableDataset(files), batch_size=4)
    assert [b.shape[0] for b in it] == [4, 3]


# -- pickling into spawned processes ---------------------------------------------------------------
@pytest.fixture(scope="module")
def spawned():
    """One spawned worker process for every pickle round trip (a fresh interpreter: nothing of
    this process's maps or caches is there)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        yield lambda fn, *args: pool.apply(fn, args)


def test_pickles_reopen_in_spawned_process(files, catalog, tmp_path, spawned):
    import _spawned

    _spawn = spawned

    img = torchfits.open_image(files[1], "R", dtype="float64")
    region, whole = _spawn(_spawned.read_pickled_image, pickle.dumps(img))
    assert np.array_equal(region, img[1:4, 2:7]) and region.dtype == np.float64
    assert np.array_equal(whole, fits.getdata(files[1], "R"))
    comp = str(tmp_path / "comp.fits")
    data = np.arange(30 * 40, dtype=np.int32).reshape(30, 40)
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1")]).writeto(comp)
    cimg = torchfits.open_image(comp, 1)
    blob = pickle.dumps(cimg)
    assert b"mmap" not in blob
    region, whole = _spawn(_spawned.read_pickled_image, blob)
    assert np.array_equal(whole, data) and np.array_equal(region, data[1:4, 2:7])
    path, cols = catalog
    sc = torchfits.scan(path, columns=["ID", "MAG"], where="MAG < 17", batch_size=100)
    got = _spawn(_spawned.read_pickled_scanner, pickle.dumps(sc.with_row_slice((10, 700))))
    keep = np.flatnonzero(cols["MAG"] < 17)
    keep = keep[(keep >= 10) & (keep < 700)]
    assert np.array_equal(got["ID"], keep)
    frag = next(iter(torchfits.dataset(path).get_fragments()))
    assert _spawn(_spawned.read_pickled_fragment, pickle.dumps(frag))["ID"] == cols["ID"].tolist()
    ds = FitsImageDataset(files[:3], ivar_hdu="G_IVAR", label_key="CLASS")
    ds[0]  # readers opened here must not travel
    items = _spawn(_spawned.read_pickled_dataset, pickle.dumps(ds))
    for (p, y), (q, z) in zip(items, (ds[i] for i in range(3))):
        assert torch.equal(p["flux"], q["flux"]) and torch.equal(y, z)


def test_dataset_pickle_holds_no_handles(files, catalog):
    for ds in (FitsImageDataset(files), FitsCutoutDataset([(files[0], 0, 0, 0, 2)]),
               FitsTableIterableDataset(catalog[0]), FitsStagedCutoutIterableDataset(files)):
        iter(ds) if isinstance(ds, torch.utils.data.IterableDataset) else ds[0]
        clone = pickle.loads(pickle.dumps(ds))
        assert type(clone) is type(ds)


# -- dtype= on the read functions and to_torch_batches ---------------------------------------------
def test_read_dtype(files):
    ref = fits.getdata(files[0]).astype(np.float32)
    for dt in (torch.float16, torch.bfloat16, torch.float64, "float16"):
        t = torchfits.read(files[0], dtype=dt)
        want = dt if isinstance(dt, torch.dtype) else torch.float16
        assert t.dtype == want and torch.equal(t, torch.from_numpy(ref).to(want))
    assert torchfits.read_tensor(files[0], dtype=torch.bfloat16).dtype == torch.bfloat16
    assert torchfits.read(files[0] + "[1:3,2:4]", dtype=torch.float64).shape == (3, 3)
    assert torchfits.read_numpy(files[0], dtype=np.float16).dtype == np.float16
    assert torchfits.read_numpy(files[0], dtype=torch.float64).dtype == np.float64
    with pytest.raises(TypeError, match="bfloat16"):
        torchfits.read_numpy(files[0], dtype="bfloat16")
    with pytest.raises(ValueError, match="not both"):
        torchfits.read(files[0], dtype=torch.float16, fp16=True)
    img = torchfits.open_image(files[0], dtype="float16")
    assert img.dtype == np.float16 and img[1:3, 1:3].dtype == np.float16
    assert img.to_torch(dtype=torch.bfloat16).dtype == torch.bfloat16
    out = np.empty((6, 8), np.float64)
    assert torchfits.open_image(files[0]).read(out, dtype="float64") is out
    assert np.array_equal(out, ref)


def test_to_torch_batches(catalog):
    path, cols = catalog
    sc = torchfits.scan(path, columns=["ID", "MAG", "RA"], batch_size=300)
    batches = list(sc.to_torch_batches())
    assert [tuple(b.shape) for b in batches] == [(300, 3), (300, 3), (300, 3), (103, 3)]
    feats = torch.cat(batches)
    assert feats.dtype == torch.float32
    assert np.array_equal(feats[:, 1].numpy(), cols["MAG"])
    assert np.array_equal(feats[:, 2].numpy(), cols["RA"].astype(np.float32))
    f64 = torch.cat(list(sc.to_torch_batches(500, columns=["RA"], dtype=torch.float64)))
    assert f64.shape == (1003, 1) and np.array_equal(f64[:, 0].numpy(), cols["RA"])
    dicts = list(sc.to_torch_batches(500, stack=False))
    assert set(dicts[0]) == {"ID", "MAG", "RA"} and dicts[0]["ID"].dtype == torch.int64
    with pytest.raises(TypeError, match="NAME"):
        torchfits.scan(path).to_torch_batches()
    with pytest.raises(KeyError):
        sc.to_torch_batches(columns=["NAME"])
    stream = sc.to_torch_batches(100)
    assert isinstance(stream, torch.utils.data.IterableDataset)
    clone = pickle.loads(pickle.dumps(stream))
    assert torch.equal(torch.cat(list(clone)), torch.cat(list(stream)))
    if HAS_FORK:
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2,
                                             multiprocessing_context="fork")
        got = torch.cat(list(loader))
        assert np.array_equal(np.sort(got[:, 0].numpy()), cols["ID"].astype(np.float32))


def test_import_torchfits_data_is_an_attribute():
    assert torchfits.data.make_loader is make_loader
    assert "data" in dir(torchfits)
    assert all(not n.startswith("_") for n in torchfits.data.__all__)
    assert len(torchfits.data.__all__) == 18


def test_replaced_files_are_reread_and_large_files_mapped(tmp_path):
    import os
    import time

    path = str(tmp_path / "x.fits")
    fits.PrimaryHDU(np.zeros((4, 4), np.float32)).writeto(path)
    ds = FitsTensorDataset(path)
    assert float(ds[0][0].sum()) == 0
    time.sleep(0.01)
    fits.PrimaryHDU(np.ones((4, 4), np.float32)).writeto(path, overwrite=True)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert float(ds[0][0].sum()) == 16  # same size, new version: read again
    big = np.random.default_rng(0).normal(size=(700, 700)).astype(np.float32)  # > 1 MiB: mapped
    bpath = str(tmp_path / "big.fits")
    fits.PrimaryHDU(big).writeto(bpath)
    assert np.array_equal(FitsImageDataset(bpath)[0][0][0].numpy(), big)
    assert np.array_equal(FitsCutoutDataset([(bpath, 0, 600, 650, 200)], edge="clamp")[0][0].numpy(),
                          big[650:, 600:])


def test_cutout_batches_equal_items(files, tmp_path):
    comp = str(tmp_path / "comp.fits")
    data = np.arange(30 * 40, dtype=np.float32).reshape(30, 40)
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="GZIP_1")]).writeto(comp)
    specs = ([(files[k % 3], "R", k, k // 2, 4) for k in range(9)]
             + [(comp, 1, 3, 4, 10), (files[0], 0, 6, 5, 9)])
    ds = FitsCutoutDataset(specs, transform=lambda t: t * 2, edge="clamp")
    batch = ds.__getitems__(list(range(len(specs))))
    assert all(torch.equal(a, ds[i]) for i, a in enumerate(batch))
    assert torch.equal(batch[9][0], torch.from_numpy(data[4:14, 3:13] * 2))
    with pytest.raises(IndexError):
        ds.__getitems__([0, 99])


def test_compatibility_page_lists_data_and_transforms_once_as_complete():
    """docs/compatibility.md listed torchfits.data and torchfits.transforms both as missing and as
    complete; each has one row, and the row does not call a module that imports missing."""
    import pathlib

    import torchfits.data
    import torchfits.transforms

    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
    rows = [line for line in page.read_text().splitlines() if line.startswith("| `torchfits.")]
    for module in ("torchfits.data", "torchfits.transforms"):
        mine = [r for r in rows if r.startswith(f"| `{module}` |")]
        assert len(mine) == 1, (module, mine)
        assert "not provided" not in mine[0], mine[0]
    # the 1.2.3 surface of torchfits.data (the compatibility contract's list) is all there
    assert set(torchfits.data.__all__) >= {
        "BandInfo", "CutoutSpec", "discover_bands", "FitsTensorDataset", "FitsTensorIterableDataset",
        "FitsImageDataset", "FitsImageIterableDataset", "FitsCubeDataset", "FitsCubeIterableDataset",
        "FitsSpectrumDataset", "FitsSpectrumIterableDataset", "FitsTableDataset",
        "FitsTableIterableDataset", "FitsCutoutDataset", "FitsStagedCutoutIterableDataset",
        "fits_collate_fn", "make_loader"}
    assert torchfits.transforms.__all__

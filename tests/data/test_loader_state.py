"""Resumable passes (torchdata's StatefulDataLoader), per-epoch shuffles under a plain DataLoader
with workers, even shards over ranks, DistributedSampler, and the reprs of datasets and loaders."""
import multiprocessing as mp
import os

import numpy as np
import pytest
import torch

import torchfits
from torchfits.data import (
    FitsCutoutDataset,
    FitsImageDataset,
    FitsImageIterableDataset,
    FitsSpectrumIterableDataset,
    FitsStagedCutoutIterableDataset,
    FitsTableDataset,
    FitsTableIterableDataset,
    make_loader,
)
from torchfits.data.sharding import file_shard, row_shard

pytest.importorskip("torchdata")

HAS_FORK = "fork" in mp.get_all_start_methods()
NFILES = 11
NROWS = 103
VITAL = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("state")
    for i in range(NFILES):
        torchfits.write(str(d / f"img{i:02d}.fits"), np.full((5, 6), i, np.float32))
        torchfits.write(str(d / f"spec{i:02d}.fits"), np.full(7, i, np.float32))
        mosaic = (np.arange(40 * 40, dtype=np.float32).reshape(40, 40) + 10_000 * i)
        torchfits.write(str(d / f"mos{i:02d}.fits"), mosaic)
    torchfits.write(str(d / "cat.fits"),
                    [np.empty(0, np.uint8), {"i": np.arange(NROWS, dtype=np.int64),
                                             "f": np.arange(NROWS, dtype=np.float64) / 2}])
    return d


def _paths(folder, stem):
    return sorted(str(p) for p in folder.glob(f"{stem}*.fits"))


def _key(item):
    """What identifies an item: the file of an image or spectrum, the pixels of a stamp, the row
    of a table row or the rows of a table batch."""
    if isinstance(item, dict) and "flux" in item:
        item = item["flux"]
    elif isinstance(item, dict):
        return tuple(item["i"].reshape(-1).tolist())
    return (int(item.reshape(-1)[0]), int(item.reshape(-1)[-1]))


def _items(batch):
    if isinstance(batch, dict) and "flux" in batch:
        return list(batch["flux"])
    if isinstance(batch, dict):
        n = len(batch["i"])
        return [{k: v[j] for k, v in batch.items()} for j in range(n)]
    return list(batch)


MAKERS = {
    "images": lambda f: FitsImageIterableDataset(_paths(f, "img"), shuffle=True, seed=3),
    "images-buffer": lambda f: FitsImageIterableDataset(_paths(f, "img"), shuffle=True, seed=3,
                                                        shuffle_buffer_size=4),
    "spectra": lambda f: FitsSpectrumIterableDataset(_paths(f, "spec"), shuffle=True, seed=2),
    "stamps": lambda f: FitsStagedCutoutIterableDataset(_paths(f, "mos"), cutouts_per_file=3,
                                                        cutout_size=4, shuffle_files=True, seed=1),
    "stamps-buffer": lambda f: FitsStagedCutoutIterableDataset(
        _paths(f, "mos"), cutouts_per_file=3, cutout_size=4, seed=1, shuffle_buffer_size=5),
    "rows": lambda f: FitsTableIterableDataset(str(f / "cat.fits"), columns=["i"], batch_size=8),
    "rows-where": lambda f: FitsTableIterableDataset(str(f / "cat.fits"), columns=["i"],
                                                     where="i < 20 OR i >= 40", batch_size=8),
    "chunks": lambda f: FitsTableIterableDataset(str(f / "cat.fits"), columns=["i", "f"],
                                                 batch_size=8, as_batches=True),
    "rows-buffer": lambda f: FitsTableIterableDataset(str(f / "cat.fits"), columns=["i"],
                                                      batch_size=8, shuffle_buffer_size=16),
}


def _loader(ds, workers, context="fork", **kw):
    kw = dict(kw)
    if workers:
        kw.update(num_workers=workers, multiprocessing_context=context)
    batch_size = None if getattr(ds, "as_batches", False) else 2
    return make_loader(ds, batch_size=batch_size, stateful=True, **kw)


def _keys(batches):
    return [_key(item) for batch in batches for item in _items(batch)]


def _resume_check(folder, kind, workers, context="fork", stop=3):
    full = _keys(_loader(MAKERS[kind](folder), workers, context))
    loader = _loader(MAKERS[kind](folder), workers, context)
    head = []
    for k, batch in enumerate(loader):
        head.append(batch)
        if k + 1 == stop:
            state = loader.state_dict()
            break
    del loader
    fresh = _loader(MAKERS[kind](folder), workers, context)
    fresh.load_state_dict(state)
    tail = _keys(fresh)
    assert _keys(head) + tail == full
    # the next epoch after a resumed one is the next epoch of an uninterrupted run
    return fresh, full


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_resume_yields_exactly_the_rest(folder, kind, workers):
    _resume_check(folder, kind, workers)


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2])
def test_resumed_loader_goes_on_with_the_next_epoch(folder, workers):
    plain = _loader(MAKERS["images"](folder), workers)
    epochs = [_keys(plain) for _ in range(2)]
    assert epochs[0] != epochs[1]
    loader = _loader(MAKERS["images"](folder), workers)
    it = iter(loader)
    head = [next(it), next(it)]
    state = loader.state_dict()
    del it, loader
    fresh = _loader(MAKERS["images"](folder), workers)
    fresh.load_state_dict(state)
    assert _keys(head) + _keys(fresh) == epochs[0]
    assert _keys(fresh) == epochs[1]


def test_resume_reads_only_what_is_left(folder):
    """A resumed pass reads the files it has not yielded, and no other (0 workers)."""
    reads = []

    class Counting(FitsImageIterableDataset):
        def _payload(self, path):
            reads.append(path)
            return super()._payload(path)

    for buffer in (None, 4):
        ds = Counting(_paths(folder, "img"), shuffle=True, seed=3, shuffle_buffer_size=buffer)
        it = iter(ds)
        first = [next(it) for _ in range(4)]
        state = ds.state_dict()
        assert state["yielded"] == 4 and state["epoch"] == 0
        reads.clear()
        again = Counting(_paths(folder, "img"), shuffle=True, seed=3, shuffle_buffer_size=buffer)
        again.load_state_dict(state)
        rest = list(again)
        assert len(reads) == NFILES - 4 == len(rest)
        full = list(Counting(_paths(folder, "img"), shuffle=True, seed=3,
                             shuffle_buffer_size=buffer))
        assert [_key(t) for t in first + rest] == [_key(t) for t in full]


def test_resume_refuses_another_slot(folder):
    ds = FitsImageIterableDataset(_paths(folder, "img"), shuffle=True)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    other = FitsImageIterableDataset(_paths(folder, "img")[:-1], shuffle=True)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="same files, ranks and num_workers"):
        list(other)
    with pytest.raises(ValueError, match="'epoch' and 'yielded'"):
        other.load_state_dict({"epoch": 1})


@VITAL
def test_resume_with_spawned_workers(folder):
    _resume_check(folder, "images-buffer", 2, context="spawn")


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2])
def test_plain_dataloader_reshuffles_every_epoch(folder, workers):
    """torch's DataLoader (not make_loader): workers are new copies every epoch, and the
    epochs still differ; a new dataset with the same seed repeats the same epochs."""
    def run():
        ds = FitsImageIterableDataset(_paths(folder, "img"), shuffle=True, seed=9)
        kw = {"num_workers": workers, "multiprocessing_context": "fork"} if workers else {}
        loader = torch.utils.data.DataLoader(ds, batch_size=2, **kw)
        return [[_key(t) for b in loader for t in b] for _ in range(3)]

    first = run()
    assert len({tuple(e) for e in first}) == 3
    assert all(sorted(e) == sorted(first[0]) for e in first)
    assert run() == first
    ds = FitsImageIterableDataset(_paths(folder, "img"), shuffle=True, seed=9)
    ds.set_epoch(2)
    kw = {"num_workers": workers, "multiprocessing_context": "fork"} if workers else {}
    assert [_key(t) for b in torch.utils.data.DataLoader(ds, batch_size=2, **kw) for t in b] \
        == first[2]


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stateful", [False, True])
def test_map_style_loaders_resume_with_their_sampler(folder, workers, stateful):
    """Map-style datasets leave the state to the sampler (torchdata's RandomSampler)."""
    ds = FitsImageDataset(_paths(folder, "img"))
    kw = {"num_workers": workers, "multiprocessing_context": "fork"} if workers else {}
    torch.manual_seed(0)
    loader = make_loader(ds, batch_size=2, stateful=True, **kw)
    it = iter(loader)
    head = [next(it)[0] for _ in range(2)]
    state = loader.state_dict()
    rest = [b[0] for b in it]
    fresh = make_loader(FitsImageDataset(_paths(folder, "img")), batch_size=2, stateful=True, **kw)
    fresh.load_state_dict(state)
    again = [b[0] for b in fresh]
    assert [_key(t) for b in again for t in b] == [_key(t) for b in rest for t in b]
    seen = sorted(_key(t) for b in head + rest for t in b)
    assert seen == sorted((i, i) for i in range(NFILES))


def test_distributed_sampler_over_map_style_datasets(folder):
    sampler_cls = torch.utils.data.distributed.DistributedSampler
    for ds in (FitsImageDataset(_paths(folder, "img")),
               FitsTableDataset(str(folder / "cat.fits"), columns=["i"])):
        seen, steps = [], []
        for rank in range(3):
            sampler = sampler_cls(ds, num_replicas=3, rank=rank, shuffle=True, seed=4)
            sampler.set_epoch(1)
            loader = make_loader(ds, batch_size=4, sampler=sampler)
            batches = list(loader)
            steps.append(len(batches))
            for b in batches:
                payload = b[0]
                seen += payload["i"].tolist() if isinstance(payload, dict) else \
                    [int(t.reshape(-1)[0]) for t in payload]
        assert len(set(steps)) == 1
        assert set(seen) == set(range(len(ds)))


def test_even_shards_over_ranks():
    counts = {even: [len(file_shard(500, r, 3, even)) for r in range(3)]
              for even in (None, "pad", "drop")}
    assert counts == {None: [167, 167, 166], "pad": [167] * 3, "drop": [166] * 3}
    padded = [i for r in range(3) for i in file_shard(500, r, 3, "pad")]
    assert set(padded) == set(range(500)) and padded.count(0) == 2
    assert sorted(i for r in range(3) for i in file_shard(500, r, 3, "drop")) == list(range(498))
    assert [len(file_shard(2, r, 3, "pad")) for r in range(3)] == [1, 1, 1]
    rows = {even: [row_shard(100, r, 3, even) for r in range(3)] for even in (None, "pad", "drop")}
    assert rows[None] == [(0, 34), (34, 67), (67, 100)]
    assert rows["pad"] == [(0, 34), (33, 67), (66, 100)]
    assert rows["drop"] == [(0, 33), (34, 67), (67, 100)]
    with pytest.raises(ValueError, match="even must be"):
        FitsImageIterableDataset(["x.fits"], even="yes")


@pytest.mark.skipif(not HAS_FORK, reason="no fork start method")
@pytest.mark.parametrize("even", ["pad", "drop"])
def test_even_ranks_take_the_same_steps(folder, even):
    def steps(make, batch_size=2):
        out = []
        for rank in range(3):
            loader = make_loader(make(rank), batch_size=batch_size, num_workers=2,
                                 multiprocessing_context="fork")
            out.append(len(list(loader)))
        return out

    images = steps(lambda r: FitsImageIterableDataset(_paths(folder, "img"), rank=r,
                                                      world_size=3, even=even))
    rows = steps(lambda r: FitsTableIterableDataset(str(folder / "cat.fits"), columns=["i"],
                                                    rank=r, world_size=3, even=even))
    assert len(set(images)) == 1 and len(set(rows)) == 1
    plain = steps(lambda r: FitsImageIterableDataset(_paths(folder, "img"), rank=r, world_size=3),
                  batch_size=1)
    assert plain == [4, 4, 3]  # 11 files over 3 ranks
    padded = steps(lambda r: FitsImageIterableDataset(_paths(folder, "img"), rank=r, world_size=3,
                                                      even=even), batch_size=1)
    assert padded == [4 if even == "pad" else 3] * 3


def test_reprs_show_files_hdu_transform_rows(folder):
    imgs = _paths(folder, "img")

    def double(x):
        return x * 2

    assert repr(FitsImageDataset(imgs, transform=double)) == (
        f"FitsImageDataset(n={NFILES}, files=[{imgs[0]!r}, ...], hdu=0, transform=double, "
        "device='cpu')")
    assert repr(FitsImageIterableDataset(imgs[0], shuffle=True, seed=2, rank=1, world_size=2,
                                         even="pad")) == (
        f"FitsImageIterableDataset(n=1, files=[{imgs[0]!r}], hdu=0, rank=1, world_size=2, "
        "seed=2, even='pad', device='cpu')")
    cat = str(folder / "cat.fits")
    assert repr(FitsTableDataset(cat, columns=["i"], where="i < 5")) == (
        f"FitsTableDataset(n_rows=5, path={cat!r}, hdu=1, columns=['i'], where='i < 5', "
        "device='cpu')")
    assert repr(FitsTableIterableDataset(cat, batch_size=8)) == (
        f"FitsTableIterableDataset(n_rows={NROWS}, n=1, files=[{cat!r}], hdu=1, batch_size=8, "
        "as_batches=False, device='cpu')")
    cut = FitsCutoutDataset([(imgs[0], 0, 0, 0, 2), (imgs[1], 0, 0, 0, 2)])
    assert repr(cut) == (f"FitsCutoutDataset(n=2, n_files=2, files=[{imgs[0]!r}, ...], "
                         "edge='raise', device='cpu')")
    ds = FitsImageDataset(imgs)
    assert repr(make_loader(ds, batch_size=4, num_workers=2)) == (
        f"FitsDataLoader(dataset={ds!r}, batch_size=4, num_workers=2)")
    assert repr(make_loader(ds, stateful=True, device="cpu")) == (
        f"FitsStatefulDataLoader(dataset={ds!r}, batch_size=32, num_workers=0, device='cpu')")


def test_datasets_pickle_with_their_epoch(folder):
    import copy
    import pickle

    ds = FitsImageIterableDataset(_paths(folder, "img"), shuffle=True)
    ds.set_epoch(4)
    for clone in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds)):
        assert clone.epoch == 4
        clone.set_epoch(7)
        assert ds.epoch == 4  # a copy made outside a worker start does not share counters
    assert os.path.exists(_paths(folder, "img")[0])

"""Large batch tensors leaving a DataLoader worker through its ring of shared-memory slots
(`torchfits.data.worker_transfer`): the main process receives owned plain tensors equal to the
worker's; a full ring, a tensor larger than a slot or of another kind takes torch's path; the
main process's cache of rings does not grow over many loaders."""
from __future__ import annotations

import inspect
import multiprocessing as mp
import pickle
import time
from multiprocessing.reduction import ForkingPickler

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.multiprocessing")  # registers torch's reductions on ForkingPickler

from torch.utils.data._utils import worker as torch_worker  # noqa: E402

from torchfits.data import make_loader  # noqa: E402
from torchfits.data import worker_transfer as wt  # noqa: E402
from torchfits.data.loader import _BY_VALUE_MAX, _RING_MIN, _ByValue, fits_collate_fn, for_transfer  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
              pytest.mark.filterwarnings("ignore:.*pin_memory.*:UserWarning"),
              pytest.mark.skipif(not wt._RING_OK, reason="the ring is used on x86-64 only")]
HAS_FORK = "fork" in mp.get_all_start_methods()
CONTEXTS = ["fork", "spawn"] if HAS_FORK else ["spawn"]
JUST_ABOVE = _BY_VALUE_MAX // 4 + 1024  # float32 elements: 4 KiB above the by-value limit


class Batches(torch.utils.data.Dataset):
    """Item i: ``sizes[i]`` float32 values, an arange offset by ``i * 1e6`` (each differs)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int):
        return for_transfer(self.want(i))

    def want(self, i: int):
        return torch.arange(self.sizes[i], dtype=torch.float32) + i * 1e6


class Items(Batches):
    """The same values, one item at a time (batched by `fits_collate_fn`)."""

    def __getitem__(self, i: int):
        return self.want(i)


def _reads() -> int:
    return wt.ring_stats()["ring_reads"]


def _check(ds: Batches, got: list, order=None) -> None:
    order = range(len(ds)) if order is None else order
    assert len(got) == len(order)
    for i, g in zip(order, got):
        assert type(g) is torch.Tensor and g.dtype == torch.float32
        assert torch.equal(g, ds.want(i)), i


@pytest.fixture
def in_worker(monkeypatch):
    """This process as a DataLoader worker with no ring yet; the main-process cache emptied."""
    monkeypatch.setattr(torch_worker, "_worker_info",
                        torch_worker.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None))
    monkeypatch.setattr(wt, "_WORKER_RING", [])
    monkeypatch.setattr(wt, "_REFUSED", [])
    monkeypatch.setattr(wt, "_REPLACED", [])
    monkeypatch.setattr(wt, "_RINGS", {})


def _send(marked):
    """What a worker's queue does with a marked batch: pickle it (here, in this process)."""
    return ForkingPickler.dumps(marked)


def test_ring_slots_fill_and_free(in_worker):
    ts = [torch.arange(JUST_ABOVE, dtype=torch.float32) + k for k in range(wt._RING_SLOTS + 2)]
    marked = [for_transfer(t) for t in ts]
    assert all(type(m) is wt._InRing for m in marked)
    blobs = [_send(m) for m in marked]
    # the ring's 4 slots, then torch's path while nobody has read any
    assert all(len(b) < 2048 for b in blobs[:wt._RING_SLOTS])  # the reference, not the bytes
    assert all(len(b) < 2048 for b in blobs[wt._RING_SLOTS:])  # torch's shared-memory handle
    assert wt._WORKER_RING[0].flags[:wt._RING_SLOTS].tolist() == [1] * wt._RING_SLOTS
    reads = _reads()
    got = [pickle.loads(b) for b in blobs]
    assert _reads() - reads == wt._RING_SLOTS
    assert wt._WORKER_RING[0].flags[:wt._RING_SLOTS].tolist() == [0] * wt._RING_SLOTS  # freed
    for g, t in zip(got, ts):
        assert type(g) is torch.Tensor and torch.equal(g, t)
    got[0].zero_()  # owned memory: the ring's slot is untouched, and the next copy is exact
    assert torch.equal(pickle.loads(_send(for_transfer(ts[1]))), ts[1])
    assert _reads() - reads == wt._RING_SLOTS + 1


def test_a_change_made_after_marking_travels(in_worker):
    t = torch.arange(JUST_ABOVE, dtype=torch.float32)
    marked = for_transfer(t)
    t -= 1  # e.g. a collate function normalising the batch it was given
    got = pickle.loads(_send(marked))
    assert torch.equal(got, torch.arange(JUST_ABOVE, dtype=torch.float32) - 1)


def test_marked_tensors_never_sent_keep_no_slot(in_worker):
    # an iterable dataset's items are marked, then a collate function stacks them anew
    unsent = [for_transfer(torch.ones(JUST_ABOVE)) for _ in range(3 * wt._RING_SLOTS)]
    assert all(type(u) is wt._InRing for u in unsent)
    reads = _reads()
    t = torch.arange(JUST_ABOVE, dtype=torch.float32)
    assert torch.equal(pickle.loads(_send(for_transfer(t))), t)
    assert _reads() - reads == 1  # it took a slot: the unsent ones held none


def test_copies_in_the_worker_leave_the_ring_alone(in_worker):
    import copy

    t = torch.arange(JUST_ABOVE, dtype=torch.float32)
    marked = for_transfer(t)
    shallow, deep = copy.copy(marked), copy.deepcopy(marked)
    assert type(shallow) is torch.Tensor and type(deep) is torch.Tensor
    assert torch.equal(shallow, t) and torch.equal(deep, t) and deep.data_ptr() != t.data_ptr()
    assert not wt._WORKER_RING[0].flags[:wt._RING_SLOTS].any()  # no slot taken
    assert torch.equal(pickle.loads(_send(marked)), t)  # the original still travels


def test_what_the_ring_does_not_take(in_worker):
    first = torch.ones(JUST_ABOVE)
    assert type(for_transfer(first)) is wt._InRing  # sizes the slots: 1 MiB
    assert type(for_transfer(torch.ones(2 * JUST_ABOVE + (1 << 18)))) is torch.Tensor  # > a slot
    assert type(for_transfer(torch.ones(2, JUST_ABOVE)[:, ::2])) is torch.Tensor  # not contiguous
    half = for_transfer(torch.arange(JUST_ABOVE * 2, dtype=torch.bfloat16))  # bytes: any dtype
    assert type(half) is wt._InRing
    got = pickle.loads(_send(half))
    assert got.dtype == torch.bfloat16 and torch.equal(got, half.as_subclass(torch.Tensor))
    assert type(for_transfer(torch.ones(4 * JUST_ABOVE // 4, dtype=torch.float8_e4m3fn)
                             .repeat(4))) is torch.Tensor  # above the limit, not a ring dtype
    assert type(for_transfer(torch.ones(JUST_ABOVE, requires_grad=True))) is torch.Tensor
    conj = torch.ones(JUST_ABOVE // 2, dtype=torch.complex64).conj()
    assert conj.is_conj() and type(for_transfer(conj)) is torch.Tensor
    mixed = for_transfer({"big": torch.ones(JUST_ABOVE), "small": torch.ones(4)})
    assert type(mixed["big"]) is wt._InRing and type(mixed["small"]) is not wt._InRing


def test_no_ring_for_a_first_batch_too_large(in_worker):
    big = torch.ones((wt.RING_MAX_SLOT // 4) + 1)  # slots would be 16 MiB
    assert type(for_transfer(big)) is torch.Tensor and not wt._WORKER_RING
    assert type(for_transfer(torch.ones(JUST_ABOVE))) is wt._InRing  # a later one sizes it


def test_tensors_above_32_kib_take_the_ring(in_worker):
    # Under the by-value limit too: the batch then crosses the pipe as a reference, and with no
    # free slot such a tensor goes by value (not by torch's dearer path).
    small = torch.arange(_RING_MIN // 4 + 1, dtype=torch.float32)
    assert type(for_transfer(torch.ones(_RING_MIN // 4))) is _ByValue  # 32 KiB: by value
    marked = [for_transfer(small + k) for k in range(wt._RING_SLOTS + 1)]
    assert all(type(m) is wt._InRing for m in marked)
    assert wt._WORKER_RING[0].slot_bytes == wt._MIN_SLOT
    blobs = [_send(m) for m in marked]
    assert all(len(b) < 2048 for b in blobs[:wt._RING_SLOTS])
    assert len(blobs[-1]) > _RING_MIN  # the ring is full: the bytes themselves
    got = [pickle.loads(b) for b in blobs]
    for k, g in enumerate(got):
        assert type(g) is torch.Tensor and torch.equal(g, small + k)
    got[-1].zero_()  # writable


def test_one_walk_sizes_the_ring_by_the_whole_batch(in_worker):
    batch = {"a": torch.ones(40 << 10, dtype=torch.uint8), "b": [torch.ones(300 << 10, dtype=torch.uint8)],
             "c": torch.ones(4)}
    marked = for_transfer(batch)
    assert type(marked["a"]) is wt._InRing and type(marked["b"][0]) is wt._InRing
    assert type(marked["c"]) is _ByValue
    ring = wt._WORKER_RING[0]
    assert ring.slot_bytes == 512 << 10 and ring.slots == 2 * wt._RING_SLOTS
    got = pickle.loads(_send(marked))
    assert all(torch.equal(got[k], batch[k]) for k in "ac") and torch.equal(got["b"][0], batch["b"][0])
    # a later batch of the same sizes keeps it
    assert type(for_transfer(torch.ones(300 << 10, dtype=torch.uint8))) is wt._InRing
    assert wt._WORKER_RING[0] is ring


def test_a_ring_of_small_slots_grows_once(in_worker):
    # A worker whose first batch holds only tensors that could go by value gets small slots; a
    # later tensor above the by-value limit makes it a ring of larger slots (once), and what was
    # copied into the old ring still arrives.
    small = torch.arange(20 << 10, dtype=torch.float32)  # 80 KiB
    first = for_transfer(small)
    assert wt._WORKER_RING[0].slot_bytes == 128 << 10
    blob = _send(first)
    old = wt._WORKER_RING[0]
    big = torch.arange(1 << 18, dtype=torch.float32)  # 1 MiB
    marked = for_transfer({"big": big, "small": small + 1})
    ring = wt._WORKER_RING[0]
    assert ring is not old and ring.slot_bytes == 1 << 20 and ring.slots == 2 * wt._RING_SLOTS
    got = pickle.loads(_send(marked))
    assert torch.equal(got["big"], big) and torch.equal(got["small"], small + 1)
    # its slots are not small: an even larger tensor takes the other paths, the ring stays
    assert type(for_transfer(torch.ones(1 << 19))) is torch.Tensor and wt._WORKER_RING[0] is ring
    assert wt._REPLACED == [old]  # kept by the worker while a slot is unread
    assert torch.equal(pickle.loads(blob), small)  # the main process reads the old slot
    for_transfer(torch.ones(4))  # the worker's next batch frees the old ring
    assert wt._REPLACED == []


def test_the_main_process_drops_a_replaced_ring(in_worker, monkeypatch):
    # The main process caches one ring per worker: the new ring's first reference (after every
    # reference to the old one, through the worker's pipe) replaces the old buffer in its cache.
    small = torch.arange(20 << 10, dtype=torch.float32)
    first = _send(for_transfer(small))
    old_key = wt._WORKER_RING[0].key
    second = _send(for_transfer(torch.arange(1 << 18, dtype=torch.float32)))
    new_key = wt._WORKER_RING[0].key
    monkeypatch.setattr(wt, "_WORKER_RING", [])  # unpickle as the main process would
    assert torch.equal(pickle.loads(first), small) and set(wt._RINGS) == {old_key}
    assert torch.equal(pickle.loads(second), torch.arange(1 << 18, dtype=torch.float32))
    assert set(wt._RINGS) == {new_key}


def test_medium_tensors_do_not_cost_the_large_ones_their_ring(in_worker):
    # Two 4 MiB tensors and a 64 KiB one: as many 4 MiB slots as the ring's bytes allow (8, two
    # batches in flight), not no ring at all.
    batch = {"img": torch.ones(1 << 20), "ivar": torch.ones(1 << 20) * 2, "psf": torch.ones(16 << 10)}
    marked = for_transfer(batch)
    ring = wt._WORKER_RING[0]
    assert ring.slot_bytes == 4 << 20 and ring.slots * ring.slot_bytes == wt._RING_MAX_BYTES
    assert all(type(v) is wt._InRing for v in marked.values())
    blob = _send(marked)
    assert len(blob) < 4096
    got = pickle.loads(blob)
    assert all(torch.equal(got[k], batch[k]) for k in batch)


def test_a_ring_of_small_slots_stays_small(in_worker):
    # 60 columns of 100 KiB: 128 KiB slots, no more than 8 MiB of /dev/shm per worker; columns that
    # find no free slot go by value.
    cols = [torch.full((25 << 10,), float(k)) for k in range(60)]
    marked = for_transfer(cols)
    ring = wt._WORKER_RING[0]
    assert ring.slot_bytes == 128 << 10 and ring.slots * ring.slot_bytes == wt._SMALL_RING_MAX_BYTES
    got = pickle.loads(_send(marked))
    assert all(torch.equal(g, c) for g, c in zip(got, cols))
    again = pickle.loads(_send(for_transfer([c + 1 for c in cols])))  # slots still held: by value
    assert all(torch.equal(g, c + 1) for g, c in zip(again, cols))


def test_shared_memory_refusing_the_ring(in_worker, monkeypatch):
    # A full /dev/shm: the batch still leaves (by value, or torch's path above 512 KiB), and the
    # worker does not ask for a ring again.
    calls = []

    def refuse(*args):
        calls.append(args)
        raise RuntimeError("unable to allocate shared memory(shm)")

    monkeypatch.setattr(wt, "_Ring", refuse)
    batch = [torch.arange(20 << 10, dtype=torch.float32), torch.arange(1 << 18, dtype=torch.float32)]
    for _ in range(3):
        marked = for_transfer(batch)
        assert [type(m) for m in marked] in ([_ByValue, torch.Tensor], [wt._InRing, wt._InRing])
        got = pickle.loads(_send(marked))
        assert all(torch.equal(g, b) for g, b in zip(got, batch))
    assert len(calls) == 1 and not wt._WORKER_RING
    assert [type(m) for m in for_transfer(batch)] == [_ByValue, torch.Tensor]


def test_a_refused_larger_ring_leaves_the_small_one_in_use(in_worker, monkeypatch):
    small = torch.arange(20 << 10, dtype=torch.float32)
    for_transfer(small)
    ring = wt._WORKER_RING[0]

    def refuse(*args):
        raise RuntimeError("unable to allocate shared memory(shm)")

    monkeypatch.setattr(wt, "_Ring", refuse)
    big = torch.arange(1 << 18, dtype=torch.float32)
    got = pickle.loads(_send(for_transfer([small, big])))
    assert torch.equal(got[0], small) and torch.equal(got[1], big)
    assert wt._WORKER_RING[0] is ring
    assert type(for_transfer(small + 1)) is wt._InRing  # the small ring still serves
    assert type(for_transfer(big)) is torch.Tensor


def test_bfloat16_by_value_and_through_the_ring(in_worker):
    for n in (8, (_RING_MIN // 2) + 8):
        t = torch.arange(n, dtype=torch.float32).to(torch.bfloat16)
        marked = for_transfer(t)
        assert type(marked) is (_ByValue if n == 8 else wt._InRing)
        got = pickle.loads(_send(marked))
        assert type(got) is torch.Tensor and got.dtype == torch.bfloat16 and torch.equal(got, t)


def test_unknown_ring_says_so():
    with pytest.raises(RuntimeError, match="has not received"):
        wt._from_ring((1, 2), 0, wt._HEADER, 4, "float32", (1,), None)


def test_nothing_changes_without_workers():
    ds = Batches([JUST_ABOVE] * 4)
    reads = _reads()
    _check(ds, list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)))
    assert _reads() == reads


@pytest.mark.parametrize("context", CONTEXTS)
def test_persistent_workers_epochs(context):
    ds = Batches([JUST_ABOVE] * 22 + [4 * JUST_ABOVE] * 2)  # the last two: larger than a slot
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True,
                                     multiprocessing_context=context)
    reads = _reads()
    for _ in range(3):
        _check(ds, list(dl))
    assert _reads() - reads >= 3 * 22 - 2 * 2 * wt._RING_SLOTS  # the ring carried nearly all
    del dl


def test_tensor_larger_than_the_first_slot():
    context = "fork" if HAS_FORK else "spawn"
    sizes = [JUST_ABOVE] * 6 + [4 * JUST_ABOVE] * 6 + [JUST_ABOVE] * 6
    ds = Batches(sizes)
    reads = _reads()
    got = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                           multiprocessing_context=context))
    _check(ds, got)
    assert 0 < _reads() - reads <= 12  # the larger ones took torch's path


def test_main_process_behind_fills_the_ring():
    ds = Batches([JUST_ABOVE] * 40)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, prefetch_factor=8)
    reads = _reads()
    got = []
    for b in dl:
        if len(got) < 4:
            time.sleep(0.3)  # the workers run ahead: 8 in flight each, 4 slots
        got.append(b)
    _check(ds, got)
    assert 0 < _reads() - reads < 40


def test_pin_memory_and_out_of_order():
    ds = Batches([JUST_ABOVE] * 16)
    _check(ds, list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True)))
    if "in_order" not in inspect.signature(torch.utils.data.DataLoader).parameters:
        return  # torch before 2.6
    got = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, in_order=False))
    got.sort(key=lambda t: float(t[0]))
    _check(ds, got)


def test_stateful_resume_is_exact():
    pytest.importorskip("torchdata")
    context = "fork" if HAS_FORK else "spawn"  # spawned workers: test_persistent_workers_epochs
    ds = Items([JUST_ABOVE // 2] * 20)  # batches of 2: just above the limit

    def loader():
        return make_loader(ds, batch_size=2, shuffle=False, num_workers=2, stateful=True,
                           multiprocessing_context=context)

    want = [torch.stack([ds.want(i), ds.want(i + 1)]) for i in range(0, 20, 2)]
    reads = _reads()
    first = loader()
    it = iter(first)
    head = [next(it) for _ in range(3)]
    state = first.state_dict()
    del it
    second = loader()
    second.load_state_dict(state)
    rest = list(second)
    got = head + rest
    assert len(got) == len(want)
    assert all(type(g) is torch.Tensor and torch.equal(g, w) for g, w in zip(got, want))
    assert second.collate_fn is fits_collate_fn  # make_loader's default: through for_transfer
    assert _reads() - reads >= 4  # the batches took the ring


@pytest.mark.skipif(not HAS_FORK, reason="needs the fork start method")
def test_rings_dropped_when_a_torchfits_loader_pass_ends(monkeypatch):
    import gc

    monkeypatch.setattr(wt, "_RINGS", {})
    ds = Batches([JUST_ABOVE] * 8)
    received = wt.ring_stats()["rings_received"]
    _check(ds, list(make_loader(ds, batch_size=None, shuffle=False, num_workers=2,
                                   multiprocessing_context="fork")))
    gc.collect()
    assert wt.ring_stats()["rings_received"] - received == 2
    assert wt.ring_stats()["rings_cached"] == 0  # not held until the next pass
    dl = make_loader(ds, batch_size=None, shuffle=False, num_workers=2, persistent_workers=True,
                     multiprocessing_context="fork")
    for _ in range(2):
        _check(ds, list(dl))
    assert wt.ring_stats()["rings_cached"] == 2  # the workers live on
    del dl
    gc.collect()
    assert wt.ring_stats()["rings_cached"] == 0


@pytest.mark.skipif(not HAS_FORK, reason="needs the fork start method")
def test_table_batches_leave_workers_through_the_ring(tmp_path):
    import numpy as np

    import torchfits
    from torchfits.data import FitsTableIterableDataset

    rng = np.random.default_rng(5)
    cat = tmp_path / "cat.fits"
    cols = {"a": rng.normal(0, 1, 40000).astype(np.float32), "b": np.arange(40000, dtype=np.int64)}
    torchfits.write(str(cat), [np.empty(0, np.uint8), cols], overwrite=True)
    ds = FitsTableIterableDataset(str(cat), batch_size=10000, as_batches=True)
    want = list(make_loader(ds, batch_size=None, num_workers=0))
    reads = _reads()
    got = list(make_loader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork"))
    assert _reads() - reads == 2 * len(want)  # 40 KiB and 80 KiB columns: every one
    assert len(got) == len(want) == 4
    got.sort(key=lambda b: int(b["b"][0]))
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        assert all(type(g[k]) is torch.Tensor and torch.equal(g[k], w[k]) for k in w)


def test_cached_rings_do_not_grow(monkeypatch):
    monkeypatch.setattr(wt, "_RINGS", {})
    ds = Batches([JUST_ABOVE] * 8)
    received = wt.ring_stats()["rings_received"]
    for _ in range(6):  # a fresh pair of workers (and rings) every pass
        _check(ds, list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)))
        assert wt.ring_stats()["rings_cached"] <= 4
    assert wt.ring_stats()["rings_received"] - received == 12
    wt.forget_gone_workers()  # what a torchfits loader's pass starts with
    assert wt.ring_stats()["rings_cached"] == 0  # the last loader's workers have exited

"""Batches leaving a DataLoader worker by value (`torchfits.data.loader.for_transfer`): the main
process receives plain tensors with the worker's values, dtypes and shapes; outside a worker
nothing changes; tensors the by-value path does not take keep torch's shared-memory path."""
from __future__ import annotations

import multiprocessing as mp
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.multiprocessing")  # registers torch's reductions on ForkingPickler

import torchfits  # noqa: E402
from torchfits.data import FitsImageDataset, FitsTableIterableDataset, make_loader  # noqa: E402
from torchfits.data import loader as loader_mod  # noqa: E402
from torchfits.data.loader import _ByValue, _mark, fits_collate_fn, for_transfer  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
HAS_FORK = "fork" in mp.get_all_start_methods()

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.float32, torch.float64,
          torch.complex64]


def _roundtrip(obj):
    return pickle.loads(ForkingPickler.dumps(obj))


@pytest.mark.parametrize("dtype", DTYPES)
def test_marked_tensor_unpickles_as_plain_tensor(dtype):
    base = torch.arange(24).reshape(4, 6).to(dtype)
    view = base[1:, ::2]  # not contiguous
    got = _roundtrip(_mark({"x": view, "pair": (base, [base[0]])}))
    assert type(got["x"]) is torch.Tensor and got["x"].dtype == dtype
    assert got["x"].shape == view.shape and torch.equal(got["x"], view)
    assert torch.equal(got["pair"][0], base) and torch.equal(got["pair"][1][0], base[0])
    assert isinstance(got["pair"], tuple) and isinstance(got["pair"][1], list)
    got["x"].zero_()  # writable: no read-only buffer behind it


def test_bfloat16_by_value():
    t = torch.arange(12, dtype=torch.float32).to(torch.bfloat16).reshape(3, 4)[:, 1::2]
    m = _mark(t)
    assert type(m) is _ByValue
    got = _roundtrip(m)
    assert type(got) is torch.Tensor and got.dtype == torch.bfloat16 and torch.equal(got, t)


def test_marked_tensor_behaves_as_tensor():
    t = torch.arange(6, dtype=torch.float32)
    m = _mark(t)
    assert type(m) is _ByValue and isinstance(m, torch.Tensor)
    assert type(m * 2) is torch.Tensor and torch.equal(m * 2, t * 2)
    assert type(torch.stack([m, m])) is torch.Tensor


def test_what_stays_on_the_shared_memory_path(monkeypatch):
    grad = torch.ones(3, requires_grad=True)
    conj = torch.ones(3, dtype=torch.complex64).conj()
    neg = torch.ones(3, dtype=torch.complex64).conj().imag
    assert type(_mark(grad)) is torch.Tensor and type(_mark(conj)) is torch.Tensor
    assert neg.is_neg() and type(_mark(neg)) is torch.Tensor
    got = _roundtrip(_mark(conj))  # torch's path resolves the conjugate
    assert torch.equal(got, torch.ones(3, dtype=torch.complex64).conj())
    monkeypatch.setattr(loader_mod, "_BY_VALUE_MAX", 8)
    assert type(_mark(torch.ones(4))) is torch.Tensor  # 16 bytes > 8
    assert type(_mark(torch.ones(2))) is _ByValue
    monkeypatch.undo()
    assert type(_mark(torch.ones(2, 1 << 16)[:, ::2])) is _ByValue  # 256 KiB, strided: by value
    assert type(_mark(torch.ones(2, (1 << 17) + 2)[:, ::2])) is torch.Tensor  # above: shared memory


def test_without_a_ring_contiguous_tensors_up_to_512_kib_go_by_value(monkeypatch):
    # Where the ring is off (CPUs other than x86-64, Windows, or switched off) a contiguous
    # tensor from 32 KiB to 512 KiB still goes by value, a larger one by torch's path.
    from torchfits.data import worker_transfer

    monkeypatch.setattr(worker_transfer, "_RING_ENABLED", False)
    assert type(_mark(torch.ones(1 << 17))) is _ByValue  # 512 KiB
    assert type(_mark(torch.ones(40 << 8))) is _ByValue  # 40 KiB
    assert type(_mark(torch.ones((1 << 17) + 1))) is torch.Tensor
    t = torch.arange(1 << 15, dtype=torch.float32)
    assert torch.equal(_roundtrip(_mark(t)), t)


def test_nothing_changes_outside_a_worker():
    t = torch.arange(4)
    batch = {"a": t}
    assert for_transfer(batch) is batch
    got = fits_collate_fn([(t, torch.tensor(1)), (t, torch.tensor(2))])
    assert type(got[0]) is torch.Tensor and type(got[1]) is torch.Tensor


def _plain(obj) -> bool:
    if isinstance(obj, dict):
        return all(_plain(v) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return all(_plain(v) for v in obj)
    return type(obj) is torch.Tensor


@pytest.mark.skipif(not HAS_FORK, reason="needs the fork start method")
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_worker_batches_equal_in_process_batches(tmp_path, context):
    rng = np.random.default_rng(3)
    paths = []
    for i in range(6):
        p = tmp_path / f"s{i}.fits"
        torchfits.write(str(p), rng.normal(0, 1, (8, 8)).astype(np.float32), overwrite=True)
        paths.append(str(p))
    cat = tmp_path / "cat.fits"
    torchfits.write(str(cat), [np.empty(0, np.uint8),
                               {"a": rng.normal(0, 1, 50).astype(np.float32),
                                "b": np.arange(50, dtype=np.int16)}], overwrite=True)
    images = FitsImageDataset(paths)
    table = FitsTableIterableDataset(str(cat), batch_size=16, as_batches=True)
    for ds, kw in ((images, {"batch_size": 4, "shuffle": False}), (table, {"batch_size": None})):
        want = list(make_loader(ds, num_workers=0, **kw))
        got = list(make_loader(ds, num_workers=1, multiprocessing_context=context, **kw))
        assert _plain(got) and len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, dict):
                assert g.keys() == w.keys()
                assert all(torch.equal(g[k], w[k]) and g[k].dtype == w[k].dtype for k in w)
            else:
                assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(g, w))


# A worker's queue pickles and drops each batch on a daemon feeder thread; when a spawned worker
# is shut down mid-epoch its interpreter exits while that thread may still hold the last batches.
# Any torch call there (pickling, or the tensor's deallocation) could abort the worker with
# "terminate called without an active exception". This child does what such a worker does: a
# steady stream of batches, then a burst the feeder has not sent yet, then exit.
_FEEDER_AT_EXIT = """
import collections, sys, threading, time
import torch
from multiprocessing.reduction import ForkingPickler
from torch.utils.data._utils import worker
from torchfits.data import loader
from torchfits.data.loader import for_transfer

loader._BY_VALUE_MAX = 16 << 20  # 8 MiB batches by value: a long deallocation on the feeder
loader._RING_MIN = 16 << 20  # (not through the ring)
worker._worker_info = worker.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None)
buf, ready = collections.deque(), threading.Condition()

def feed():
    while True:
        with ready:
            while not buf:
                ready.wait()
            obj = buf.popleft()
        obj = ForkingPickler.dumps(obj)
        del obj

threading.Thread(target=feed, daemon=True).start()
for k in range(20):
    batch = for_transfer(torch.full((32, 256, 256), float(k)))
    with ready:
        buf.append((k, batch))
        ready.notify()
    del batch
    if k < 16:
        time.sleep(0.002)
sys.exit(0)
"""


def test_worker_exit_while_its_feeder_sends_batches():
    """Before the fix 5 of 6 such children aborted (SIGABRT); none may now."""
    import subprocess
    import sys
    for _ in range(3):
        run = subprocess.run([sys.executable, "-c", _FEEDER_AT_EXIT], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]

"""How a batch tensor leaves a DataLoader worker: by value (`torchfits.data.loader.for_transfer`),
through torch's shared memory, or through the worker's ring of shared-memory slots
(`torchfits.data.worker_transfer`), by tensor size.

Usage: ``python benchmarks/run_transfer.py [--sizes 128,512,1024,4096] [--batches 400] [--rounds 3]``
(sizes in KiB).

For each size a DataLoader with 2 fork workers hands out ``--batches`` float32 tensors of that
size, each marked by `for_transfer`; before the workers fork the by-value limit
(`loader._BY_VALUE_MAX`) is set above the size for "value", and to 0 for "shm" (the ring
switched off, `worker_transfer._RING_ENABLED`) and "ring" (the ring on, its floor
`loader._RING_MIN` at 0). After 20 batches of warm-up the main process's CPU time per batch
(``time.process_time``: receiving, unpickling, rebuilding the tensor, then reading one value in
each of its pages, as a consumer reading the batch faults them in) and the workers' (their
``RUSAGE_CHILDREN`` once they are reaped) are taken, with the wall time per batch. Rounds
alternate the three ways; the table gives the best of ``--rounds``.
With workers on every core the main process is what sets a loader's ceiling, so its column
decides the limit (docs/architecture.md, "Small batches leave a worker by value").
"""
from __future__ import annotations

import argparse
import gc
import resource
import time
from typing import Any

WARMUP = 20
RING_MIN: list[int] = []  # loader._RING_MIN as imported (set by report)


def _dataset(nbytes: int, n: int) -> Any:
    import torch

    from torchfits.data.loader import for_transfer

    class Batches(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> Any:
            t = torch.empty(nbytes // 4, dtype=torch.float32)
            t[::1024] = i  # touch every page, as a decoded batch would be
            return for_transfer(t)

    return Batches()


def one_run(nbytes: int, way: str, batches: int) -> tuple[float, float, float]:
    """(main CPU ms, workers' CPU ms, wall ms) per batch sent ``way`` (value, shm or ring)."""
    import torch

    from torchfits.data import loader, worker_transfer

    # read in the workers, which fork after this
    loader._BY_VALUE_MAX = max(nbytes, 1) if way == "value" else 0
    worker_transfer._RING_ENABLED = way == "ring"
    loader._RING_MIN = 0 if way == "ring" else RING_MIN[0]
    dl = torch.utils.data.DataLoader(_dataset(nbytes, batches + WARMUP), batch_size=None,
                                     num_workers=2, prefetch_factor=4, multiprocessing_context="fork")
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    it = iter(dl)
    for _ in range(WARMUP):
        next(it)
    c0, w0, k = time.process_time(), time.perf_counter(), 0
    for b in it:
        k += 1
        float(b[::1024].sum())  # the consumer reads every page of its batch
    c1, w1 = time.process_time(), time.perf_counter()
    del it, dl
    gc.collect()
    time.sleep(0.3)  # the workers are joined and reaped: their CPU lands in RUSAGE_CHILDREN
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    kids = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
    return (c1 - c0) / k * 1e3, kids / (k + WARMUP) * 1e3, (w1 - w0) / k * 1e3


def report(sizes_kib: list[int], batches: int, rounds: int) -> str:
    from torchfits.data import loader, worker_transfer

    default = loader._BY_VALUE_MAX
    RING_MIN[:] = [loader._RING_MIN]
    ways = ("value", "shm", "ring")
    lines = ["| tensor | way | main CPU ms / batch | workers' CPU ms / batch | wall ms / batch |",
             "|--:|:--|--:|--:|--:|"]
    try:
        for kib in sizes_kib:
            nbytes = kib << 10
            got: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
            for _ in range(rounds):
                for way in ways:
                    got[way].append(one_run(nbytes, way, batches))
            for way, runs in got.items():
                best = [min(r[i] for r in runs) for i in range(3)]
                lines.append(f"| {kib} KiB | {way} | {best[0]:.2f} | {best[1]:.2f} | {best[2]:.2f} |")
    finally:
        loader._BY_VALUE_MAX = default
        worker_transfer._RING_ENABLED = True
        loader._RING_MIN = RING_MIN[0]
    lines.append(f"\nDefault by-value limit: {default >> 10} KiB; the ring's floor: {RING_MIN[0] >> 10} KiB.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,512,1024,2048,4096", help="tensor sizes in KiB")
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(report([int(s) for s in args.sizes.split(",") if s.strip()], args.batches, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

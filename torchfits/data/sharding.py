"""Who reads what: (rank, worker) slots over files or row ranges (``even=`` to give every rank
the same count), per-epoch seeded shuffles and reservoir buffers. Pure Python/NumPy; the
DataLoader worker is asked through the torch adapter.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .._torch_adapter import worker_slot

__all__ = ["resolve_rank", "check_even", "block", "file_shard", "file_order", "row_shard", "epoch_rng",
           "reservoir"]

_EVEN = (None, "pad", "drop")


def check_even(even: Any) -> str | None:
    """The checked ``even`` argument: None (ranks take ``n // world_size`` or one more),
    ``"pad"`` (short ranks repeat items) or ``"drop"`` (long ranks leave their extra one)."""
    if even not in _EVEN:
        raise ValueError(f"even must be None, 'pad' or 'drop', not {even!r}")
    return even


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world size): explicit → RANK/WORLD_SIZE → SLURM_PROCID/SLURM_NTASKS →
    an initialised ``torch.distributed`` → (0, 1)."""
    if rank is None or world_size is None:
        env_rank, env_world = None, None
        for r_key, w_key in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
            if os.environ.get(r_key) is not None and os.environ.get(w_key) is not None:
                env_rank, env_world = int(os.environ[r_key]), int(os.environ[w_key])
                break
        if env_rank is None:
            import sys

            dist = sys.modules.get("torch.distributed")
            if dist is not None and dist.is_available() and dist.is_initialized():
                env_rank, env_world = dist.get_rank(), dist.get_world_size()
        rank = (env_rank if env_rank is not None else 0) if rank is None else rank
        world_size = (env_world if env_world is not None else 1) if world_size is None else world_size
    if isinstance(rank, bool) or isinstance(world_size, bool):
        raise ValueError("rank and world_size must be integers")
    rank, world_size = int(rank), int(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must satisfy 0 <= rank < world_size (got rank={rank}, "
                         f"world_size={world_size})")
    return rank, world_size


def block(n: int, slot: int, slots: int) -> tuple[int, int]:
    """The contiguous ``[start, stop)`` share of ``n`` items for ``slot`` of ``slots``: near-equal
    blocks, the first ``n % slots`` one item longer."""
    per, extra = divmod(n, slots)
    start = slot * per + min(slot, extra)
    return start, start + per + (1 if slot < extra else 0)


def file_shard(n: int, rank: int, world_size: int, even: str | None = None) -> list[int]:
    """File indices of this (rank, DataLoader worker): ``files[rank::world_size]``, then a
    contiguous block of that list per worker. ``even="pad"`` first extends the list with files
    from its start to a multiple of ``world_size`` (as ``DistributedSampler`` does), ``"drop"``
    cuts it to one, so every rank has the same number of files."""
    order = list(range(n))
    if even == "pad" and n and n % world_size:
        total = -(-n // world_size) * world_size
        order = (order * (-(-total // n)))[:total]
    elif even == "drop":
        order = order[:n - n % world_size]
    mine = order[rank::world_size]
    worker, workers = worker_slot()
    a, b = block(len(mine), worker, workers)
    return mine[a:b]


def file_order(n: int, rank: int, world_size: int, seed: int, epoch: int,
               shuffle: bool, even: str | None = None) -> tuple[list[int], np.random.Generator]:
    """One pass's file indices for this (rank, worker) slot: its `file_shard`, permuted when
    ``shuffle`` by the pass's `epoch_rng`; and that generator, which the pass draws on next
    (its reservoir buffer)."""
    order = file_shard(n, rank, world_size, even)
    rng = epoch_rng(seed, epoch, rank)
    if shuffle:
        order = [order[k] for k in rng.permutation(len(order))]
    return order, rng


def row_shard(nrows: int, rank: int, world_size: int, even: str | None = None) -> tuple[int, int]:
    """The contiguous row range of this (rank, worker) slot among ``world_size × workers``.
    Blocks differ by one row at most; ``even="pad"`` starts each short block one row early
    (that row is also its neighbour's last), ``"drop"`` ends each long block one row early."""
    worker, workers = worker_slot()
    slot, slots = rank * workers + worker, world_size * workers
    a, b = block(nrows, slot, slots)
    extra = nrows % slots
    if extra and even == "pad" and slot >= extra:
        a -= 1
    elif extra and even == "drop" and slot < extra:
        b -= 1
    return a, b


def epoch_rng(seed: int, epoch: int, rank: int, *extra: int) -> np.random.Generator:
    """A generator fixed by (seed, epoch, rank, worker, extra...): the same order every run, a new
    one every epoch."""
    worker, _ = worker_slot()
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), int(rank), worker,
                                  *(int(e) for e in extra)])


def reservoir(items: Iterable[Any], size: int | None, rng: np.random.Generator,
              buffer: list[Any] | None = None) -> Iterator[Any]:
    """Shuffle a stream through a buffer of ``size`` items (no-op for None or ≤ 1): each new item
    swaps with a random buffered one, which is emitted; the rest drain in random order.
    ``buffer`` starts it with those items buffered (a resumed pass, see `reservoir_skip`)."""
    if not size or size <= 1:
        yield from items
        return
    buf: list[Any] = list(buffer or ())
    for item in items:
        if len(buf) < size:
            buf.append(item)
            continue
        k = int(rng.integers(size))
        buf[k], item = item, buf[k]
        yield item
    order = rng.permutation(len(buf))
    for k in order:
        yield buf[k]



def reservoir_skip(keys: list[Any], size: int | None, rng: np.random.Generator,
                   skip: int) -> tuple[int, list[Any], list[Any] | None]:
    """Where `reservoir` over ``keys`` stands after ``skip`` outputs, replayed on the keys alone
    (nothing is read; ``rng`` is left as the reservoir would leave it): ``(p, buffered keys,
    None)`` while input remains (``keys[p:]`` is still to come), else ``(len(keys), [], the keys
    still to drain, in order)``."""
    if not size or size <= 1:
        return min(skip, len(keys)), [], None
    buf: list[Any] = []
    out = 0
    for p, key in enumerate(keys):
        if out == skip:
            return p, buf, None
        if len(buf) < size:
            buf.append(key)
            continue
        k = int(rng.integers(size))
        buf[k] = key
        out += 1
    order = rng.permutation(len(buf))
    return len(keys), [], [buf[k] for k in order][skip - out:]

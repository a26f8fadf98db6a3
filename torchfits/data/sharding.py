"""Who reads what: (rank, worker) slots over files or row ranges, per-epoch seeded shuffles and
reservoir buffers. Pure Python/NumPy; the DataLoader worker is asked through the torch adapter.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .._torch_adapter import worker_slot

__all__ = ["resolve_rank", "block", "file_shard", "file_order", "row_shard", "epoch_rng", "reservoir",
           "EpochMixin"]


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


def file_shard(n: int, rank: int, world_size: int) -> list[int]:
    """File indices of this (rank, DataLoader worker): ``files[rank::world_size]``, then a
    contiguous block of that list per worker."""
    mine = list(range(n))[rank::world_size]
    worker, workers = worker_slot()
    a, b = block(len(mine), worker, workers)
    return mine[a:b]


def file_order(n: int, rank: int, world_size: int, seed: int, epoch: int,
               shuffle: bool) -> tuple[list[int], np.random.Generator]:
    """One pass's file indices for this (rank, worker) slot: its `file_shard`, permuted when
    ``shuffle`` by the pass's `epoch_rng`; and that generator, which the pass draws on next
    (its reservoir buffer)."""
    order = file_shard(n, rank, world_size)
    rng = epoch_rng(seed, epoch, rank)
    if shuffle:
        order = [order[k] for k in rng.permutation(len(order))]
    return order, rng


def row_shard(nrows: int, rank: int, world_size: int) -> tuple[int, int]:
    """The contiguous row range of this (rank, worker) slot among ``world_size × workers``."""
    worker, workers = worker_slot()
    return block(nrows, rank * workers + worker, world_size * workers)


def epoch_rng(seed: int, epoch: int, rank: int, *extra: int) -> np.random.Generator:
    """A generator fixed by (seed, epoch, rank, worker, extra...): the same order every run, a new
    one every epoch."""
    worker, _ = worker_slot()
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), int(rank), worker,
                                  *(int(e) for e in extra)])


def reservoir(items: Iterable[Any], size: int | None, rng: np.random.Generator) -> Iterator[Any]:
    """Shuffle a stream through a buffer of ``size`` items (no-op for None or ≤ 1): each new item
    swaps with a random buffered one, which is emitted; the rest drain in random order."""
    if not size or size <= 1:
        yield from items
        return
    buf: list[Any] = []
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


class EpochMixin:
    """An epoch counter: each ``__iter__`` uses the current epoch, then advances it.

    DataLoader workers iterate copies of the dataset, so `make_loader` sets the epoch on the
    dataset before each pass (`set_epoch`, like ``DistributedSampler``)."""

    epoch: int = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass (shuffles are fixed by ``(seed, epoch)``)."""
        self.epoch = int(epoch)

    def _next_epoch(self) -> int:
        epoch = self.epoch
        self.epoch = epoch + 1
        return epoch

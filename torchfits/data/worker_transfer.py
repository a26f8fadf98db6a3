"""A DataLoader worker's ring of reusable shared-memory slots for its large batch tensors.

torch moves a tensor out of a worker into a new shared-memory segment whose descriptor the main
process fetches from the worker over a socket: a round trip per tensor (~1.2 ms of the main
process's CPU at any size) that waits for the worker to be scheduled; bytes sent through the
pipe make the main process wait on the worker's feeder thread for every 64 KiB pipe-full. Here
a worker makes one buffer of ``K`` slots the first time a batch holds a contiguous tensor above
32 KiB (`torchfits.data.loader.for_transfer`, which sizes it by that batch; a ring of slots of
512 KiB or less is replaced once by one of larger slots when a tensor above 512 KiB comes), and copies each
such tensor, that one included, into a free slot when the tensor is pickled (so a change made
in place after marking, in a collate function for instance, travels too); what is pickled is
the slot's reference (a few hundred bytes through the pipe). The
buffer reaches the main process once, through torch's reduction, with the references until the
main process says it holds it. The main process copies the slot into a fresh tensor (owned
memory: never a view of a buffer the worker will overwrite) and frees the slot. No free slot at
pickling time (a ring holds as many slots as ``_RING_MAX_BYTES`` allows), or no ring (shared
memory refused it): by value up to 512 KiB (the bytes through the pipe, NumPy only), else
torch's path, as before; a tensor larger than the
worker's slots or of another kind is not marked for the ring.

The main process drops the rings of exited workers when a new ring arrives, when a torchfits
loader starts a pass and when its iterator (with the workers) is gone; after a plain
``DataLoader``'s workers exit their rings stay cached until one of those (or a call of
`forget_gone_workers`).

Buffer layout: ``_HEADER`` bytes (one flag byte per slot, 1 while the slot holds a tensor the
main process has not copied yet; the last byte the main process sets once it has cached the
buffer), then the slots, each ``slot_bytes`` long.

Memory ordering. The main process copies a slot and only then stores 0 into its flag; the worker
loads the flag, sees 0, and only then stores into the slot. So the worker's stores come after
the main process's loads of the same bytes if neither CPU makes a later store visible before an
earlier load completes; x86-64 guarantees that (loads are not reordered with later stores), and
the copy and the flag store are separate opaque calls the compilers cannot interleave. The ring
is used on x86-64 POSIX systems only (`_RING_OK`); elsewhere tensors take torch's path. The
worker's stores into a slot reach the main process before its reads: they precede the pipe
write that carries the reference (a system call), which the main process's reads follow.
Freeing flags per slot, not a FIFO count, so correctness does not depend on the order in which
references are unpickled.
"""
from __future__ import annotations

import multiprocessing
import os
import platform
from typing import Any

import numpy as np
import torch

__all__ = ["RING_MAX_SLOT", "SMALL_SLOT", "drop_replaced", "forget_gone_workers", "has_ring", "make_ring",
           "ring_fits", "ring_mark", "ring_on", "ring_stats", "tensor_from_array"]

# x86-64 for the memory ordering (module docstring); POSIX for `forget_gone_workers`'s liveness
# check (on Windows `os.kill(pid, 0)` would end the worker).
_RING_OK = os.name == "posix" and platform.machine().lower() in ("x86_64", "amd64")
_RING_ENABLED = True  # benchmarks/run_transfer.py switches it off to measure torch's path
# Slots per large tensor of a worker's first ring batch: at most ``prefetch_factor`` (2 by
# default) batches of a worker are produced and not yet unpickled by the main process (it sends
# a worker a new index after receiving one of its batches); 4 covers prefetch_factor 4.
_RING_SLOTS = 4
# Above a few MiB torch's round trip costs the main process what the ring's copy does
# (docs/benchmarks.md, "Worker transfer"), so larger tensors take torch's path and a worker's ring
# stays small in /dev/shm (often 64 MiB in containers).
RING_MAX_SLOT = 8 << 20
_RING_MAX_BYTES = 32 << 20
# Bytes; slots this size or smaller serve tensors that could also go by value, so their ring is
# kept smaller still (many workers' rings share one /dev/shm), and a later tensor above it may
# make the worker a ring of larger slots once.
SMALL_SLOT = 512 << 10
_SMALL_RING_MAX_BYTES = 8 << 20
_HEADER = 4096  # flags, the ack byte; keeps the slots page-aligned
_ACK = _HEADER - 1  # set by the main process once it has cached the buffer
_MIN_SLOT = 64 << 10


class _Ring:
    """A worker's buffer: ``K`` slots of ``slot_bytes``; its numpy view (``flags``: the header's
    flag bytes and the slots)."""

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.pid = os.getpid()
        self.key = (self.pid, int.from_bytes(os.urandom(8), "little"))
        self.slots, self.slot_bytes = slots, slot_bytes
        nbytes = _HEADER + slots * slot_bytes
        new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
        if new_shared is not None:  # straight into shared memory, zero-filled
            self.buf = torch.empty(0, dtype=torch.uint8).set_(new_shared(nbytes))
        else:
            self.buf = torch.zeros(nbytes, dtype=torch.uint8).share_memory_()
        self.flags = self.buf.numpy()
        self.next = 0

    def take(self, data: Any, dtype: str, shape: tuple) -> tuple | None:
        """Copy ``data`` (a tensor's bytes, a uint8 NumPy view) into a free slot → its reference
        (what `_from_ring` gets), or None. NumPy only: it runs on the queue's feeder thread."""
        nbytes = data.nbytes
        if nbytes > self.slot_bytes:
            return None
        flags = self.flags
        for j in range(self.slots):
            slot = (self.next + j) % self.slots
            if flags[slot] == 0:  # the flag load, before the stores into the slot
                break
        else:
            return None  # the main process is behind: torch's path
        self.next = slot + 1
        flags[slot] = 1
        offset = _HEADER + slot * self.slot_bytes
        # numpy's copy: torch's uint8 copy_ costs ~8 ms per MiB here (threads that spin)
        np.copyto(flags[offset:offset + nbytes], data)
        ring = None if flags[_ACK] else self.buf  # until the main process holds it
        return (self.key, slot, offset, nbytes, dtype, shape, ring)


class _InRing(torch.Tensor):
    """A batch tensor copied into its worker's ring: it pickles as the slot's reference and
    unpickles as a plain tensor (`_from_ring`). Operations on it give plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]
    # Taken on the worker's thread (`ring_mark`; see loader._KEEP): the tensor's bytes as a NumPy
    # view (in-place changes show through), its dtype name and shape, whether it may go by value
    # when no slot is free, and the plain tensor.
    _tf_bytes: Any
    _tf_kind: tuple[str, tuple]
    _tf_by_value: bool
    _tf_plain: torch.Tensor

    def __reduce_ex__(self, protocol: Any) -> Any:
        ring = _WORKER_RING[0] if _WORKER_RING and _WORKER_RING[0].pid == os.getpid() else None
        ref = ring.take(self._tf_bytes, *self._tf_kind) if ring is not None else None
        if ref is not None:
            return (_from_ring, ref)
        if self._tf_by_value:  # no ring or no free slot: by value (NumPy only, feeder thread)
            return (tensor_from_array, (self._tf_bytes, *self._tf_kind))
        from torch.multiprocessing.reductions import reduce_tensor

        return reduce_tensor(self._tf_plain)  # torch's path

    def __copy__(self) -> torch.Tensor:
        return self._tf_plain

    def __deepcopy__(self, memo: dict) -> torch.Tensor:
        return self._tf_plain.clone()


def tensor_from_array(array: Any, dtype: str | None = None, shape: tuple | None = None) -> torch.Tensor:
    """Unpickling bytes sent by value (here, or `loader._ByValue`): a plain tensor over the
    received array, viewed as ``dtype`` (the tensor's type where the array holds its bits: raw
    bytes, or bfloat16's int16) and ``shape`` when given."""
    t = torch.from_numpy(array if array.flags.writeable else array.copy())
    if dtype is not None:
        t = t.view(getattr(torch, dtype))
    return t if shape is None else t.view(shape)


_WORKER_RING: list[_Ring] = []  # this worker's ring (empty until its first large tensor)
_REPLACED: list[_Ring] = []  # this worker's ring of small slots, replaced, until its slots are read
_REFUSED: list[int] = []  # the pid of a worker whose ring shared memory refused


def ring_on() -> bool:
    """Whether batch tensors may use a ring here (x86-64 POSIX, not switched off)."""
    return _RING_OK and _RING_ENABLED


def has_ring() -> bool:
    """Whether this process (a DataLoader worker) has made its ring."""
    return bool(_WORKER_RING) and _WORKER_RING[0].pid == os.getpid()


def _grows(nbytes: int) -> bool:
    # this worker's ring has small slots only, and ``nbytes`` needs a larger one
    return _WORKER_RING[0].slot_bytes <= SMALL_SLOT < nbytes


def ring_fits(nbytes: int) -> bool:
    """Whether this worker's ring has (or can be made with) slots of ``nbytes``: no ring yet (a
    batch sizes it), slots that large, or small slots that a ring of larger ones may replace
    (once: its slots are not small)."""
    if _REFUSED and _REFUSED[0] == os.getpid():  # a ring it has still serves
        return has_ring() and nbytes <= _WORKER_RING[0].slot_bytes
    return not has_ring() or nbytes <= _WORKER_RING[0].slot_bytes or _grows(nbytes)


def drop_replaced() -> None:
    """Free this worker's replaced ring once the main process has copied every slot out (on the
    worker's own thread, which marks batches: see loader._KEEP)."""
    if _REPLACED:
        _REPLACED[:] = [r for r in _REPLACED if r.flags[:r.slots].any()]


def make_ring(sizes: list[int]) -> None:
    """This worker's ring, sized by a batch with tensors for it (``sizes``: their bytes), when it
    has none yet or one of small slots that the batch outgrows: ``_RING_SLOTS`` slots per tensor,
    each the smallest power of two that holds the largest, as many as ``_RING_MAX_BYTES`` allows
    (``_SMALL_RING_MAX_BYTES`` for small slots; a tensor finding no free slot takes another
    path); none when slots would exceed ``RING_MAX_SLOT`` or fewer than two fit. Shared memory
    refusing the buffer (a full /dev/shm) leaves this worker without a ring for good."""
    if has_ring() and not _grows(max(sizes)):
        return
    slot_bytes = max(_MIN_SLOT, 1 << (max(sizes) - 1).bit_length())
    cap = _SMALL_RING_MAX_BYTES if slot_bytes <= SMALL_SLOT else _RING_MAX_BYTES
    slots = min(_RING_SLOTS * len(sizes), cap // slot_bytes, _ACK)
    if slot_bytes > RING_MAX_SLOT or slots < 2:
        return  # no ring for this worker yet: a later batch may size one
    try:
        ring = _Ring(slots, slot_bytes)
    except (RuntimeError, OSError):
        _REFUSED[:] = [os.getpid()]  # by value or torch's path from now on
        return
    # A replaced ring's slots in flight stay readable (the main process holds its buffer until
    # the new ring arrives); the worker keeps it until they are read (`drop_replaced`), so it is
    # not freed on the queue's feeder thread (see loader._KEEP).
    _REPLACED.extend(_WORKER_RING)
    _WORKER_RING[:] = [ring]


def ring_mark(obj: torch.Tensor, by_value: bool) -> torch.Tensor:
    """``obj`` (a contiguous CPU tensor whose bytes can travel, in a DataLoader worker) marked
    to leave through this worker's ring: pickling it copies it into a free slot and sends the
    slot's reference; with no ring or no free slot it goes by value (``by_value``) or by
    torch's path."""
    marked = obj.as_subclass(_InRing)
    marked._tf_bytes = obj.reshape(-1).view(torch.uint8).numpy()
    marked._tf_kind = (str(obj.dtype).rpartition(".")[2], tuple(obj.shape))
    marked._tf_by_value = by_value
    marked._tf_plain = obj
    return marked


# The main process's cache: ring key (worker pid, random id) → (buffer, its numpy view).
_RINGS: dict[tuple[int, int], tuple[torch.Tensor, Any]] = {}
_STATS = {"ring_reads": 0, "rings_received": 0}


def _from_ring(key: tuple[int, int], slot: int, offset: int, nbytes: int, dtype: str,
               shape: tuple, ring: torch.Tensor | None) -> torch.Tensor:
    """Unpickling a `_InRing` (main process): the slot copied into a fresh tensor, then freed."""
    own = _WORKER_RING[0] if _WORKER_RING and _WORKER_RING[0].key == key else None
    if own is not None:  # unpickled in the worker itself (a copy): free the slot, no ack
        return _copy_out(own.flags, slot, offset, nbytes, dtype, shape)
    entry = _RINGS.get(key)
    if entry is None:
        if ring is None:
            raise RuntimeError(f"a batch refers to DataLoader worker {key[0]}'s shared-memory ring, "
                               "which this process has not received")
        forget_gone_workers()
        # A worker's ring replaced by one of larger slots: its references came through the
        # worker's pipe, in order, before the new ring's first, so the old buffer is done with.
        for other in [k for k in _RINGS if k[0] == key[0]]:
            del _RINGS[other]
        entry = _RINGS[key] = (ring, ring.numpy())
        _STATS["rings_received"] += 1
    flags = entry[1]
    out = _copy_out(flags, slot, offset, nbytes, dtype, shape)
    if not flags[_ACK]:
        flags[_ACK] = 1  # the worker stops attaching the buffer to its references
    return out


def _copy_out(flags: Any, slot: int, offset: int, nbytes: int, dtype: str,
              shape: tuple) -> torch.Tensor:
    # NumPy's allocation: transparent huge pages from 4 MiB (fewer faults than torch.empty's)
    out = np.empty(nbytes, np.uint8)
    np.copyto(out, flags[offset:offset + nbytes])
    flags[slot] = 0  # after the copy: the slot is the worker's again (module docstring)
    _STATS["ring_reads"] += 1
    return torch.from_numpy(out).view(getattr(torch, dtype)).view(shape)


def forget_gone_workers() -> None:
    """Drop the cached rings of workers that have exited (when a new ring arrives, and when a
    torchfits loader starts a pass)."""
    if not _RINGS:
        return
    multiprocessing.active_children()  # reaps workers that ended (a zombie still answers kill)
    for key in list(_RINGS):
        try:
            os.kill(key[0], 0)
        except ProcessLookupError:
            _RINGS.pop(key, None)
        except OSError:
            pass  # exists, another user's: keep


def ring_stats() -> dict[str, int]:
    """This process's counts: slots read (``ring_reads``), rings received and cached now."""
    return {**_STATS, "rings_cached": len(_RINGS)}

"""Bounded residency of mapped files: byte ranges that sequential readers are done with, kept
resident up to a process-wide budget and released (least recently read first) beyond it.

A memory-mapped file's pages count in the process's RSS once read, and a map stays open while
its HDU index is cached, so a scan over files larger than memory would grow RSS by their size
(a Dask worker's monitor, which reads RSS, pauses or restarts such a worker). Readers that have
copied what they need out of a range hand it to `done`; the ranges of every source are kept in
one least-recently-read order, and once they add up to more than `BUDGET` the oldest are
released (`ByteSource.release`: ``madvise(MADV_DONTNEED)`` on a map). A reader larger than the
budget releases behind itself through `release` instead (now, with any recorded range it
overlaps), so this module is the one place pages are given back and `held` stays truthful.
Under the budget nothing is released, so a file re-read in one process (epochs, repeated
queries) keeps its pages and is read as fast as before. Releasing never loses bytes: a later
access to a released range, through any view, maps the same file bytes again.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..settings import mib_from_env

if TYPE_CHECKING:
    from .base import ByteSource

__all__ = ["BUDGET", "budget", "done", "release", "held", "forget_all"]

BUDGET = 64 << 20
"""Bytes of finished ranges kept resident in this process before the oldest are released,
unless ``TORCHFITS_RESIDENT_MB`` says otherwise (`budget`)."""

_lock = threading.Lock()
# (id of the source, offset) -> (weak reference to the source, size), least recently read first.
_ranges: OrderedDict[tuple[int, int], tuple[weakref.ref[ByteSource], int]] = OrderedDict()
_held = 0
# id of a source -> {offset: size} of its ranges in `_ranges`: `release` looks at that source's
# ranges only (a banded image read releases once per band).
_by_source: dict[int, dict[int, int]] = {}


def _after_fork() -> None:
    """A forked child gets a fresh lock: a thread of the parent may have held it at the fork."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def budget() -> int:
    """Bytes of finished ranges kept resident: ``$TORCHFITS_RESIDENT_MB`` MiB when set (``0``
    releases each range as soon as its reader is done, ``inf`` never releases;
    docs/environment.md), else `BUDGET`.

    Raises
    ------
    ValueError
        The variable is not a non-negative number.
    """
    return mib_from_env("TORCHFITS_RESIDENT_MB", BUDGET)  # "inf": never release


def done(source: ByteSource, offset: int, size: int) -> None:
    """Record that a sequential reader has copied what it needs out of ``[offset, offset + size)``
    of ``source``; release the least recently read ranges while more than `budget` are held.

    Sources that hold no mapped pages (remote, in-memory) are not recorded.
    """
    global _held
    if size <= 0 or not source.maps_file:
        return
    limit = budget()
    key = (id(source), offset)
    victims: list[tuple[weakref.ref[ByteSource], int, int]] = []
    with _lock:
        old = _ranges.pop(key, None)  # read again (or a dead source's range under a reused id)
        if old is not None:
            _held -= old[1]
        _ranges[key] = (weakref.ref(source), size)
        _by_source.setdefault(key[0], {})[offset] = size
        _held += size
        while _held > limit and _ranges:
            (sid, off), (ref, n) = _ranges.popitem(last=False)
            _held -= n
            _unindex(sid, off)
            victims.append((ref, off, n))
    for ref, off, n in victims:  # outside the lock: madvise takes the map's page-table lock
        src = ref()
        if src is not None:
            src.release(off, n)


def release(source: ByteSource, offset: int, size: int) -> None:
    """Release ``[offset, offset + size)`` of ``source`` now, whatever the budget (a read larger
    than the budget releasing behind itself: a whole image's bands, a training pass's chunks),
    with every recorded range of ``source`` that overlaps it, in whole: `held` then counts only
    ranges still kept, and no recorded range is left half released."""
    global _held
    if size <= 0 or not source.maps_file:
        return
    victims = [(offset, size)]
    sid, end = id(source), offset + size
    with _lock:
        mine = _by_source.get(sid, {})
        for off in [o for o, n in mine.items() if o < end and o + n > offset]:
            ref, n = _ranges.pop((sid, off))
            _held -= n
            _unindex(sid, off)
            if ref() is source:  # not a dead source's range under a reused id
                victims.append((off, n))
    for off, n in victims:  # outside the lock, as in `done`
        source.release(off, n)


def _unindex(sid: int, offset: int) -> None:
    """The range of source ``sid`` at ``offset`` left `_ranges` (under the lock)."""
    mine = _by_source[sid]
    del mine[offset]
    if not mine:
        del _by_source[sid]


def held() -> int:
    """Bytes of finished ranges currently kept resident (for tests and benchmarks)."""
    return _held


def forget_all() -> None:
    """Release every recorded range now (tests and benchmarks; a forked child's fresh start)."""
    global _held
    with _lock:
        items = list(_ranges.items())
        _ranges.clear()
        _by_source.clear()
        _held = 0
    for (_, off), (ref, n) in items:
        src = ref()
        if src is not None:
            src.release(off, n)

"""The shared decode thread pool: kernels release the GIL, so threads give real parallelism.

No OpenMP anywhere (torch ships its own runtime); parallel work goes through this pool.
"""
from __future__ import annotations

import functools
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable

__all__ = ["default_threads", "get_pool", "process_executor", "run_parallel", "run_shared",
           "iter_parallel", "iter_ahead", "fault_in"]

_executors: dict[str, ThreadPoolExecutor] = {}  # this process's, by name (`process_executor`)
_pool_lock = threading.Lock()
_in_worker = threading.local()
_in_ahead = threading.local()  # set on an `iter_ahead` thread while it computes an item


def default_threads() -> int:
    """Threads used when a call does not say: $TORCHFITS_THREADS, else every core."""
    env = os.environ.get("TORCHFITS_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return _cpu_count()


# NumPy backs allocations of 4 MiB and more with transparent huge pages where the kernel
# offers them; the first write to each 2 MiB page faults it in and zeroes it.
_HUGE_PAGE = 2 << 20
_HUGE_MIN_BYTES = 4 << 20


@functools.lru_cache(maxsize=1)
def _transparent_huge_pages() -> bool:
    """Whether the kernel gives huge pages to allocations that ask (``always`` or ``madvise``)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            mode = fh.read()
    except OSError:
        return False
    return "[always]" in mode or "[madvise]" in mode


def fault_in(out: Any) -> bool:
    """Fault in a fresh output's huge pages on the calling thread before pool threads fill it.

    Tile decoders write their output a tile at a time from every thread, and their huge-page
    faults contended; one write per huge page here moves that zeroing onto one thread (the
    measurements are in docs/benchmarks.md, "Measured choices in the code"). Plain image reads,
    two long copies, were slower with it and do not call it. Small arrays and kernels without
    transparent huge pages are left alone. The bytes written are zeros the decode overwrites,
    so call it only on memory allocated for a full decode. Returns whether it touched them.
    """
    if out.nbytes < _HUGE_MIN_BYTES or not out.flags.c_contiguous or not _transparent_huge_pages():
        return False
    out.reshape(-1).view("u1")[::_HUGE_PAGE] = 0
    return True


@functools.lru_cache(maxsize=1)
def _cpu_count() -> int:
    # os.cpu_count() reads the system each call (tens of µs): every batch of a scan asks.
    return os.cpu_count() or 1


def _after_fork() -> None:
    """A forked child (a DataLoader worker) inherits the parent's executors without their
    threads, where queued work would wait forever, and maybe a lock a parent thread held: it
    starts with none of either."""
    global _pool_lock
    _pool_lock = threading.Lock()
    _executors.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def process_executor(name: str, workers: int) -> ThreadPoolExecutor:
    """This process's executor called ``name`` (its threads' prefix), made on first use with
    ``workers`` threads; a forked child makes its own."""
    with _pool_lock:
        pool = _executors.get(name)
        if pool is None:
            pool = _executors[name] = ThreadPoolExecutor(workers, thread_name_prefix=name)
        return pool


def get_pool() -> ThreadPoolExecutor:
    return process_executor("torchfits", max(2, default_threads()))


def _run_marked(fn: Callable[[Any], Any], item: Any, mark: threading.local = _in_worker) -> Any:
    """``fn(item)`` with ``mark.active`` set on this thread meanwhile (nested calls look at it)."""
    mark.active = True
    try:
        return fn(item)
    finally:
        mark.active = False


def in_worker() -> bool:
    """Whether the calling thread is running an item of `run_parallel`, `run_shared` or
    `iter_parallel` (nested parallel calls run serially there)."""
    return bool(getattr(_in_worker, "active", False))


def run_parallel(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """Apply ``fn`` to every item on the pool and return the results in order.

    Called from inside a pool worker (nested parallelism), it runs serially instead, so a
    saturated pool can never deadlock waiting on itself. When one item fails, the items not yet
    started are cancelled and the running ones joined before the error reaches the caller.
    """
    items = list(items)
    if len(items) <= 1 or getattr(_in_worker, "active", False):
        return [fn(item) for item in items]
    pool = get_pool()
    futures = [pool.submit(_run_marked, fn, item) for item in items[1:]]
    try:
        first = fn(items[0])
        return [first] + [f.result() for f in futures]
    except BaseException:
        # Nothing of a failed call may run after it returns (a caller that then truncates or
        # replaces the file must not have our threads still reading it): cancel what has not
        # started, wait for what has.
        for f in futures:
            f.cancel()
        wait(futures)
        raise


def run_shared(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> list[Any]:
    """Apply ``fn`` to every item and return the results in order: the calling thread and up to
    ``workers - 1`` pool threads each take the next item nobody has started, until none is left.

    Unlike `run_parallel`, no item is bound to a thread in advance: when a pool thread starts
    late (another process holds the core), the caller runs its items instead of waiting for
    them, so cutting the work into a few more items than threads evens out a busy machine.
    Called from inside a pool worker, or with ``workers <= 1``, it runs serially. When an item
    fails, no further item starts, the running ones are joined and the first error is raised.
    """
    items = list(items)
    if len(items) <= 1 or workers <= 1 or getattr(_in_worker, "active", False):
        return [fn(item) for item in items]
    results: list[Any] = [None] * len(items)
    lock = threading.Lock()
    state = {"next": 0}
    errors: list[BaseException] = []

    def take() -> int:
        with lock:
            if errors or state["next"] >= len(items):
                return -1
            i = state["next"]
            state["next"] = i + 1
            return i

    def loop(_: Any = None) -> None:
        while True:
            i = take()
            if i < 0:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    pool = get_pool()
    futures = [pool.submit(_run_marked, loop, None) for _ in range(min(workers, len(items)) - 1)]
    try:
        loop()
    finally:
        # Helpers that have not started are not needed any more (and must not be waited for
        # behind other work on a busy pool); the ones running finish their current item.
        # (`wait` would block on a cancelled future until a pool thread dequeues it.)
        wait([f for f in futures if not f.cancel()])
    if errors:
        raise errors[0]
    return results


def iter_parallel(fn: Callable[[Any], Any], items: Iterable[Any], width: int) -> Iterator[Any]:
    """Yield ``fn(item)`` for every item, in order, computing up to ``width`` items ahead on the
    pool while the consumer works on the results already yielded.

    The window starts at one item and doubles with every result taken, so a consumer that stops
    after the first result (``LIMIT n``) pays for one item only. ``items`` is drawn lazily, from
    the consuming thread. When an item fails, or the consumer stops (the generator is closed),
    the items not yet started are cancelled and the running ones joined before the error (or the
    close) returns. Called from inside a pool worker, or with ``width <= 1``, it runs serially.
    """
    it = iter(items)
    if width <= 1 or getattr(_in_worker, "active", False):
        for item in it:
            yield fn(item)
        return
    pool = get_pool()
    pending: deque[Future[Any]] = deque()
    window = 1
    done = False
    try:
        while True:
            while not done and len(pending) < window:
                try:
                    item = next(it)
                except StopIteration:
                    done = True
                    break
                pending.append(pool.submit(_run_marked, fn, item))
            if not pending:
                return
            yield pending.popleft().result()  # not bound here: the consumer decides its life
            window = min(width, 2 * window)
    finally:
        for f in pending:
            f.cancel()
        wait(pending)


def iter_ahead(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
    """Yield ``fn(item)`` for every item, in order: the first computed on the calling thread,
    each next one on a background thread while the consumer works on the one before.

    Unlike `iter_parallel`, ``fn`` does not run as a pool item, so its own parallel calls still
    spread over the shared pool (which never waits on these threads: no deadlock). At most two
    results are alive here: the one the consumer holds and the one being computed (this
    generator drops its reference to a result once the consumer asks for the next). When an item
    fails, or the consumer stops, the item in flight is joined before the error (or the close)
    returns. Called from inside a pool worker or an item of another `iter_ahead` it runs
    serially (nested ones would wait on each other for the same two threads).
    """
    it = iter(items)
    if getattr(_in_worker, "active", False) or getattr(_in_ahead, "active", False):
        for item in it:
            yield fn(item)
        return
    end = object()
    item = next(it, end)
    if item is end:
        return
    current = fn(item)
    pending: Future[Any] | None = None
    try:
        while True:
            item = next(it, end)
            pending = None if item is end else \
                process_executor("torchfits-ahead", 2).submit(_run_marked, fn, item, _in_ahead)
            yield current
            current = None  # the consumer holds it now, if it wants it
            if pending is None:
                return
            current, pending = pending.result(), None
    finally:
        if pending is not None and not pending.cancel():
            wait([pending])

"""Files that change under readers: truncation while mapped (never SIGBUS), in-place rewrites,
threads, the pool's behaviour on errors, and stale temporary files of killed writers.

Every scenario that could kill the process runs in a child interpreter, so a SIGBUS shows up as a
non-zero return code (-7) instead of taking pytest down.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import torchfits
from torchfits.errors import FitsError, FitsIOError, TruncatedFileError
from torchfits.fits import threads as _threads
from torchfits.fits.threads import fault_in, get_pool, iter_ahead, iter_parallel, run_parallel, run_shared

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"child died (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


PRELUDE = """
    import os, threading, numpy as np, torchfits
    from torchfits.errors import TruncatedFileError, FitsError
    def shrink(p, n):
        os.truncate(p, n)
"""


# -- SIGBUS scenarios (issue scenarios a-d) --------------------------------------------------------
def test_held_image_after_truncation_raises(tmp_path):
    p = str(tmp_path / "img.fits")
    torchfits.write(p, np.arange(2000 * 500, dtype=np.int16).reshape(2000, 500))
    out = _ok(_child(PRELUDE + f"""
    img = torchfits.open_image({p!r})
    first = img[:10]
    shrink({p!r}, 2880 * 3)
    for key in [np.s_[1500:1510], np.s_[1900:, :3], np.s_[...]]:
        try:
            img[key]
            print("no error")
        except TruncatedFileError as exc:
            assert {p!r} in str(exc), str(exc)
            print("truncated")
    # The next call sees the new size and refuses up front.
    try:
        torchfits.read_numpy({p!r})
    except TruncatedFileError as exc:
        print("refused")
    """))
    assert out.split() == ["truncated"] * 3 + ["refused"]


def test_uint8_results_survive_truncation(tmp_path):
    p = str(tmp_path / "u8.fits")
    data = (np.arange(300 * 1000) % 251).astype(np.uint8).reshape(300, 1000)
    torchfits.write(p, data)
    out = _ok(_child(PRELUDE + f"""
    owned = torchfits.read_numpy({p!r})
    piece = torchfits.open_image({p!r})[100:200]
    view = torchfits.read_numpy({p!r}, copy=False)
    shrink({p!r}, 2880 * 2)
    expected = (np.arange(300 * 1000) % 251).astype(np.uint8).reshape(300, 1000)
    assert np.array_equal(owned, expected)
    assert np.array_equal(piece, expected[100:200])
    # The zero-copy view shares the file's fate: the lost bytes read as zeros, no SIGBUS.
    assert int(view[-1].sum()) == 0
    print("ok")
    """))
    assert out.strip() == "ok"


def test_held_scan_after_truncation_raises(tmp_path):
    p = str(tmp_path / "tab.fits")
    n = 200_000
    torchfits.write(p, {"a": np.arange(n, dtype=np.int64), "b": np.arange(n, dtype=np.float64)})
    out = _ok(_child(PRELUDE + f"""
    sc = torchfits.scan({p!r}, where="a > 10")
    shrink({p!r}, 2880 * 4)
    try:
        sc.to_arrow()
        print("no error")
    except TruncatedFileError as exc:
        assert {p!r} in str(exc)
        print("truncated")
    """))
    assert out.strip() == "truncated"


def test_failed_compressed_read_then_truncate(tmp_path, fitsio):
    """A corrupt tile fails the read; nothing of that read may run after it returns."""
    p = str(tmp_path / "c.fits")
    data = np.random.default_rng(1).integers(0, 1000, (512, 512)).astype(np.int32)
    fitsio.write(p, data, compress="GZIP_1", tile_dims=[8, 512])
    idx = torchfits.info(p)
    raw = bytearray((tmp_path / "c.fits").read_bytes())
    # Corrupt the first tile's bytes (the heap start).
    from torchfits.fits.hdu_index import get_index

    e = get_index(p).entries[1]
    raw[e.heap_offset:e.heap_offset + 64] = b"\xff" * 64
    (tmp_path / "c.fits").write_bytes(bytes(raw))
    keep = str(tmp_path / "corrupt.bin")
    (tmp_path / "corrupt.bin").write_bytes(bytes(raw))
    assert idx
    out = _ok(_child(PRELUDE + f"""
    raw = open({keep!r}, "rb").read()
    for i in range(5):
        try:
            torchfits.read_numpy({p!r}, 1)
            print("no error")
        except FitsError:
            pass
        with open({p!r}, "r+b") as fh:
            fh.truncate(2880 * 2)
        import time; time.sleep(0.05)
        open({p!r}, "wb").write(raw)
    print("alive")
    """))
    assert out.strip() == "alive"


def test_reads_while_another_thread_truncates(tmp_path):
    p = str(tmp_path / "loop.fits")
    data = np.arange(1000 * 1000, dtype=np.float32).reshape(1000, 1000)
    torchfits.write(p, data)
    good = (tmp_path / "loop.fits").read_bytes()
    out = _ok(_child(PRELUDE + f"""
    good = open({p!r}, "rb").read()
    expected = np.arange(1000 * 1000, dtype=np.float32).reshape(1000, 1000)
    stop = False
    def churn():
        while not stop:
            with open({p!r}, "r+b") as fh:
                fh.truncate(len(good) // 3)
                fh.seek(0); fh.write(good)
    t = threading.Thread(target=churn); t.start()
    counts = {{"ok": 0, "err": 0}}
    for i in range(300):
        try:
            arr = torchfits.read_numpy({p!r})
        except FitsError:
            counts["err"] += 1
            continue
        assert np.array_equal(arr, expected)
        counts["ok"] += 1
    stop = True; t.join()
    print(counts["ok"] + counts["err"])
    """, timeout=300))
    assert out.strip() == "300"
    assert len(good) > 0


def test_foreign_sigbus_still_kills(tmp_path):
    """Only faults inside our own maps are absorbed; any other SIGBUS keeps its default action."""
    proc = _child("""
    import os, signal, numpy as np, torchfits
    from torchfits._kernels import _safemap
    assert _safemap.install_handler()
    os.kill(os.getpid(), signal.SIGBUS)
    print("survived")
    """)
    assert proc.returncode == -signal.SIGBUS
    assert "survived" not in proc.stdout


def test_faulted_map_forces_reindex(tmp_path):
    p = str(tmp_path / "re.fits")
    torchfits.write(p, np.ones((400, 400), np.float64))
    out = _ok(_child(PRELUDE + f"""
    img = torchfits.open_image({p!r})
    st = os.stat({p!r})
    shrink({p!r}, 2880 * 2)
    try:
        img[399]
    except TruncatedFileError:
        print("truncated")
    # Restore the same bytes with the same size and mtime: the faulted map must not be reused.
    torchfits.write({p!r}, np.full((400, 400), 2.0), overwrite=True)
    print(float(torchfits.read_numpy({p!r})[399, 0]))
    """))
    assert out.split() == ["truncated", "2.0"]


# -- in-place rewrites between calls ---------------------------------------------------------------
def test_same_size_rewrite_with_restored_mtime_is_reindexed(tmp_path):
    p = tmp_path / "same.fits"
    torchfits.write(p, np.zeros((10, 10), np.int16))
    assert torchfits.read_numpy(p).dtype == np.int16
    st = os.stat(p)
    # Same size, different BITPIX and data: BITPIX=16 100 px -> BITPIX=8 200 px.
    import io

    buf = io.BytesIO()
    other = tmp_path / "other.fits"
    torchfits.write(other, np.full((10, 20), 7, np.uint8))
    new = other.read_bytes()
    assert len(new) == st.st_size
    time.sleep(0.01)
    with open(p, "r+b") as fh:
        fh.write(new)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_mtime_ns == st.st_mtime_ns and os.stat(p).st_size == st.st_size
    arr = torchfits.read_numpy(p)
    assert arr.dtype == np.uint8 and arr.shape == (10, 20) and (arr == 7).all()
    assert buf.getvalue() == b""


# -- threads ---------------------------------------------------------------------------------------
def test_threads_match_sequential_reads(tmp_path):
    paths = []
    for k in range(4):
        p = tmp_path / f"t{k}.fits"
        torchfits.write(p, np.arange(20000, dtype=np.float32).reshape(100, 200) * (k + 1))
        paths.append(p)
    expected = [torchfits.read_numpy(p) for p in paths]
    results: list = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(30):
            k = int(rng.integers(0, 4))
            arr = torchfits.read_numpy(paths[k])
            piece = torchfits.open_image(paths[k])[10:20, 5:50]
            with lock:
                results.append(np.array_equal(arr, expected[k])
                               and np.array_equal(piece, expected[k][10:20, 5:50]))

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(results) == 180 and all(results)


def _items_running_when_one_fails(run, fail_at: int, work_s: float, settle_s: float):
    """Run ``run(fn, range(64))`` where item ``fail_at`` raises while others work; check that
    everything that started had finished when the error arrived and nothing started after it.
    Returns the items that ran."""
    running, finished = [], []
    lock = threading.Lock()

    def fn(i: int) -> int:
        if i == fail_at:
            time.sleep(0.05)
            raise ValueError("boom")
        with lock:
            running.append(i)
        time.sleep(work_s)
        with lock:
            finished.append(i)
        return i

    with pytest.raises(ValueError, match="boom"):
        run(fn, range(64))
    snapshot = (list(running), list(finished))
    time.sleep(settle_s)
    assert sorted(snapshot[0]) == sorted(snapshot[1])  # joined before the error arrived
    assert (running, finished) == snapshot  # nothing started afterwards
    return running


def test_run_parallel_joins_siblings_before_raising():
    running = _items_running_when_one_fails(run_parallel, 0, 0.2, 0.5)
    assert len(running) < 63  # the queued items were cancelled


def test_run_parallel_results_in_order():
    assert run_parallel(lambda i: i * i, range(50)) == [i * i for i in range(50)]


def test_run_shared_results_in_order_and_caller_takes_over():
    assert run_shared(lambda i: i * i, range(50), 3) == [i * i for i in range(50)]
    assert run_shared(lambda i: -i, range(5), 1) == [0, -1, -2, -3, -4]
    # Every pool thread busy: the caller runs all the items itself instead of waiting for one.
    gate = threading.Event()
    blockers = [get_pool().submit(gate.wait) for _ in range(get_pool()._max_workers)]
    try:
        who = run_shared(lambda i: threading.current_thread().name, range(20), 4)
        assert set(who) == {threading.current_thread().name}
    finally:
        gate.set()
        for b in blockers:
            b.result()


def test_run_shared_stops_and_joins_on_error():
    running = _items_running_when_one_fails(lambda fn, items: run_shared(fn, items, 2), 1, 0.1, 0.3)
    assert len(running) < 10


@pytest.mark.parametrize("huge_pages", [True, False])
def test_fault_in_touches_one_byte_per_huge_page(monkeypatch, huge_pages):
    """Large contiguous outputs get one zero per 2 MiB (the faults a tile decoder's threads
    would otherwise take together); small or strided arrays, or kernels without transparent
    huge pages, are left as they are."""
    monkeypatch.setattr(_threads, "_transparent_huge_pages", lambda: huge_pages)
    big = np.full(5 << 20, 7, np.uint8)
    fault_in(big)
    touched = np.flatnonzero(big != 7)
    assert touched.tolist() == ([0, 2 << 20, 4 << 20] if huge_pages else [])
    floats = np.full((1024, 1024 + 512), 1.1, np.float32)  # 6 MiB; its low byte is not 0
    fault_in(floats)
    assert int((floats != np.float32(1.1)).sum()) == (3 if huge_pages else 0)
    small = np.full(1 << 20, 7, np.uint8)
    strided = np.full(12 << 20, 7, np.uint8)[::2]
    fault_in(small)
    fault_in(strided)
    assert (small == 7).all() and (strided == 7).all()


def test_iter_parallel_in_order_and_ahead():
    assert list(iter_parallel(lambda i: i * i, range(50), 4)) == [i * i for i in range(50)]
    assert list(iter_parallel(lambda i: i + 1, iter(range(7)), 1)) == list(range(1, 8))
    started = []
    lock = threading.Lock()

    def fn(i: int) -> int:
        with lock:
            started.append(i)
        return i

    gen = iter_parallel(fn, range(100), 8)
    assert next(gen) == 0
    assert started == [0]  # the window starts at one item: a consumer stopping here paid for one
    assert [next(gen) for _ in range(5)] == [1, 2, 3, 4, 5]
    gen.close()
    assert len(started) <= 6 + 8  # never more than the window ahead


def test_iter_ahead_order_overlap_threads_and_lifetimes():
    """The first item on the caller's thread, the next under way while the consumer holds the
    one before (with the shared pool free for its nested calls), and no result kept here once
    the consumer asks for the next."""
    import weakref

    class Result:
        def __init__(self, i: int, thread: str, nested: list[int]) -> None:
            self.i, self.thread, self.nested = i, thread, nested

    started = {i: threading.Event() for i in range(4)}

    def fn(i: int) -> Result:
        started[i].set()
        names = run_parallel(lambda k: threading.current_thread().name, range(3))
        inner = list(iter_ahead(lambda k: threading.current_thread().name, range(2)))
        return Result(i, threading.current_thread().name, names + inner)

    gen = iter_ahead(fn, range(4))
    first = next(gen)
    assert first.i == 0 and first.thread == threading.current_thread().name
    assert started[1].wait(30)  # under way while the consumer holds item 0
    assert not started[2].is_set()  # one ahead, no more
    gone = weakref.ref(first)
    del first
    second = next(gen)
    assert gone() is None  # the generator dropped item 0
    assert second.i == 1 and second.thread.startswith("torchfits-ahead")
    # not a pool item: its parallel call spread over the pool's threads; a nested iter_ahead
    # runs serially there (two levels would wait on each other for the same threads)
    assert any(name.startswith("torchfits_") for name in second.nested[:3])
    assert second.nested[3:] == [second.thread] * 2
    assert [r.i for r in gen] == [2, 3]
    assert list(iter_ahead(fn, [])) == []


def test_iter_ahead_error_and_close_join_the_item_in_flight():
    running, finished = [], []

    def fn(i: int) -> int:
        running.append(i)
        time.sleep(0.1)
        if i == 2:
            raise ValueError("boom")
        finished.append(i)
        return i

    with pytest.raises(ValueError, match="boom"):
        list(iter_ahead(fn, range(10)))
    assert running == [0, 1, 2] and finished == [0, 1]  # one ahead: nothing past the failure
    running.clear()
    finished.clear()
    gen = iter_ahead(fn, range(10))
    assert next(gen) == 0
    gen.close()  # item 1 was submitted: cancelled, or joined if it had started
    snapshot = (list(running), list(finished))
    time.sleep(0.3)
    assert (running, finished) == snapshot and running == finished and running[:1] == [0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_pool_works_in_a_forked_child():
    """A child forked after the parent used the pool (a DataLoader worker) gets threads of its
    own: the parent's pool has none there, and work queued on it would never run. The parent's
    remote downloads in flight are not the child's either (they would never finish there)."""
    assert run_parallel(lambda i: i + 1, range(8)) == list(range(1, 9))  # the parent's pool is up
    code = textwrap.dedent("""
        import os, sys
        from concurrent.futures import Future
        from torchfits.data import remote
        from torchfits.fits.threads import iter_ahead, iter_parallel, run_parallel
        assert run_parallel(lambda i: i + 1, range(8)) == list(range(1, 9))
        remote._in_flight["/nowhere/in-flight.fits"] = Future()  # a download at the fork
        pid = os.fork()
        if pid == 0:
            ok = run_parallel(lambda i: 2 * i, range(8)) == [2 * i for i in range(8)] and \\
                list(iter_parallel(lambda i: -i, range(5), 2)) == [0, -1, -2, -3, -4] and \\
                list(iter_ahead(lambda i: -i, range(5))) == [0, -1, -2, -3, -4] and \\
                not remote._in_flight
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

def test_iter_parallel_close_and_error_join_running_items():
    running, finished = [], []
    lock = threading.Lock()

    def fn(i: int) -> int:
        with lock:
            running.append(i)
        time.sleep(0.05)
        if i == 5:
            raise ValueError("boom")
        with lock:
            finished.append(i)
        return i

    with pytest.raises(ValueError, match="boom"):
        for _ in iter_parallel(fn, range(64), 4):
            pass
    snapshot = (sorted(running), sorted(finished))
    time.sleep(0.3)
    # Everything that started had finished (or failed) when the error arrived; nothing afterwards.
    assert (sorted(running), sorted(finished)) == snapshot
    assert set(snapshot[0]) - set(snapshot[1]) == {5}
    assert len(running) < 64
    running.clear()
    finished.clear()
    gen = iter_parallel(fn, range(4, -60, -1), 4)  # never reaches the failing item 5
    for _ in range(3):
        next(gen)
    gen.close()
    snapshot = (sorted(running), sorted(finished))
    time.sleep(0.3)
    assert (sorted(running), sorted(finished)) == snapshot and snapshot[0] == snapshot[1]


# -- writes ----------------------------------------------------------------------------------------
def test_full_disk_names_the_file(tmp_path, monkeypatch):
    from torchfits.writing.atomic import Sink

    p = tmp_path / "full.fits"
    torchfits.write(p, np.zeros((4, 4), np.int16))
    before = p.read_bytes()

    def boom(self, data):
        raise OSError(28, "No space left on device")

    many = {f"KEY{i}": i for i in range(60)}  # the header grows: the file is rewritten
    monkeypatch.setattr(Sink, "write", boom)
    for edit in (lambda: torchfits.update_header(p, 0, many),
                 lambda: torchfits.write_checksums(p, 0)):
        with pytest.raises(FitsIOError, match="No space left") as info:
            edit()
        assert str(p) in str(info.value) and info.value.errno == 28
        assert isinstance(info.value, OSError)
    assert p.read_bytes() == before
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []
    monkeypatch.undo()

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(FitsIOError, match="in-place write failed.*Input/output") as info:
        torchfits.update_header(p, 0, {"OBSERVER": "x"})  # same size: edited in place
    assert str(p) in str(info.value)


def test_stale_temporaries_of_killed_writers_are_removed(tmp_path):
    from torchfits.writing.atomic import _host_tag

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = proc.pid
    stale = tmp_path / f".torchfits-{_host_tag()}-{dead}-abc.tmp"
    alive = tmp_path / f".torchfits-{_host_tag()}-{os.getpid()}-abc.tmp"
    other_host = tmp_path / f".torchfits-00000000-{dead}-abc.tmp"
    old_style = tmp_path / ".torchfits-xyz.tmp"
    for f in (stale, alive, other_host, old_style):
        f.write_bytes(b"partial")
    os.utime(old_style, (time.time() - 3 * 86400,) * 2)
    torchfits.write(tmp_path / "new.fits", np.zeros(3, np.int16))
    left = sorted(n for n in os.listdir(tmp_path) if n.endswith(".tmp"))
    assert left == sorted([alive.name, other_host.name])


def test_truncated_error_is_fits_error():
    assert issubclass(TruncatedFileError, FitsError)


# -- hostile where-strings -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ids_table(tmp_path_factory):
    p = tmp_path_factory.mktemp("where") / "ids.fits"
    n = 20_000
    torchfits.write(p, {"id": np.arange(n, dtype=np.int64), "x": np.arange(n) * 0.5})
    return p


def test_in_list_of_100000_values(ids_table):
    values = range(0, 200_000, 2)
    t = torchfits.scan(ids_table, where=f"id IN ({','.join(map(str, values))})").to_arrow()
    assert t.column("id").to_pylist() == list(range(0, 20_000, 2))


def test_or_chain_of_10000_terms(ids_table):
    t = torchfits.scan(ids_table, where=" OR ".join(f"id == {i}" for i in range(0, 30_000, 3))).to_arrow()
    assert t.column("id").to_pylist() == list(range(0, 20_000, 3))
    mixed = " OR ".join(f"(id == {i} AND x >= 0)" for i in range(10_000))
    assert torchfits.scan(ids_table, where=mixed).count_rows() == 10_000


def test_and_chain_of_2000_terms(ids_table):
    where = " AND ".join(f"id != {i}" for i in range(2000))
    assert torchfits.scan(ids_table, where=where).count_rows() == 18_000
    from torchfits.query import expr

    tree = expr.parse(where)
    depth, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        depth = max(depth, d)
        if isinstance(node, (expr.And, expr.Or)):
            stack += [(node.left, d + 1), (node.right, d + 1)]
    assert depth < 20  # balanced, not a 2000-deep chain
    short = expr.parse("id > 1 AND id > 2 AND id > 3")
    assert isinstance(short.left, expr.And)  # short chains keep their written (left) nesting


def test_int64_overflow_in_where_is_a_clear_error(ids_table):
    from torchfits.errors import WhereEvaluationError

    with pytest.raises(WhereEvaluationError, match="overflows 64-bit") as info:
        torchfits.scan(ids_table, where="id * 9223372036854775807 > 5").to_arrow()
    assert str(ids_table) in str(info.value)
    assert isinstance(info.value, ValueError)
    assert torchfits.scan(ids_table, where="id * 2.0 * 9223372036854775807 > 5").count_rows() == 19_999

"""torchfits.dask inside distributed workers: decode threads per task, and a killed worker.

The last module of tests/dask/ on purpose: its last test kills a worker (the nanny restarts it).
"""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import torchfits.dask as tfd  # noqa: E402


def _decode_threads_probe():
    """Record, in a worker, the decode threads asked for and whether the shared pool is used."""
    from torchfits.fits import threads as pool_module
    from torchfits.tables.source import TableSource

    original, original_pool = TableSource.decode, pool_module.get_pool
    seen: list = []

    def recording(self, *, options, **kwargs):
        seen.append(options.threads)
        return original(self, options=options, **kwargs)

    def pool_used():
        seen.append("pool")
        return original_pool()

    TableSource._threads_probe = (original, original_pool, seen)
    TableSource.decode = recording
    pool_module.get_pool = pool_used
    return True


def _decode_threads_seen():
    from torchfits.fits import threads as pool_module
    from torchfits.tables.source import TableSource

    original, original_pool, seen = TableSource._threads_probe
    TableSource.decode = original
    pool_module.get_pool = original_pool
    del TableSource._threads_probe
    return sorted(set(seen), key=str)


def _use_the_pool():
    from torchfits.fits.threads import run_parallel

    return run_parallel(abs, [1, -2])


def test_tasks_in_workers_decode_on_one_thread_unless_told(client, catalogs):
    from torchfits.dask.partitions import task_threads

    assert task_threads(None) is None  # not in a worker: the shared default
    assert client.submit(task_threads, None, pure=False).result() == 1
    assert client.submit(task_threads, 3, pure=False).result() == 3
    # by default the kernels get threads=1 and never touch the shared pool
    for threads, want in ((None, [1]), (2, [2])):
        client.run(_decode_threads_probe)
        try:
            frame = tfd.read_table(str(catalogs), columns=["ra"], where="mag < 22", threads=threads)
            frame.ra.sum().compute()
        finally:
            seen = client.run(_decode_threads_seen)
        assert sorted({t for v in seen.values() for t in v}, key=str) == want
    client.run(_decode_threads_probe)  # the probe does see the pool when it is used
    client.run(_use_the_pool)
    assert all("pool" in v for v in client.run(_decode_threads_seen).values())
    with pytest.raises(ValueError, match="threads"):
        tfd.read_table(str(catalogs), threads=0)
    with pytest.raises(ValueError, match="threads"):
        tfd.read_images(str(catalogs / "cat00.fits"), hdu=0, threads=0)


def _slow_identity(df):
    time.sleep(0.2)
    return df


def test_zz_killed_worker_is_retried_with_the_same_result(client, catalogs, astropy_frame):
    """Runs last (the last test of the folder's last module): SIGKILL one worker
    mid-computation; the nanny restarts it and the scheduler reruns the lost tasks elsewhere."""
    ddf = tfd.read_table(str(catalogs), where="mag < 22", split_row_groups=False)
    slow = ddf.map_partitions(_slow_identity, meta=ddf._meta)
    future = client.compute(slow.groupby("band").ra.sum())
    deadline = time.monotonic() + 30
    victim = None
    while time.monotonic() < deadline and victim is None:
        processing = client.processing()
        busy = [w for w, tasks in processing.items() if tasks]
        done = sum(1 for v in client.who_has().values() if v)
        if busy and done >= 2:
            victim = busy[0]
        else:
            time.sleep(0.05)
    if victim is None or future.done():
        pytest.skip("the computation finished before a worker could be killed mid-way")
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    got = future.result(timeout=120).sort_index()
    ref = astropy_frame[astropy_frame.mag < np.float32(22)].groupby("band").ra.sum()
    np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=1e-12)
    assert list(got.index) == list(ref.index)

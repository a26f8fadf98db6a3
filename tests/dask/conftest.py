"""Fixtures of the Dask tests: one ``distributed.LocalCluster`` (2 worker processes on
127.0.0.1) shared by every module of this folder, and the catalogs they read with their
astropy oracle.

The cluster starts with the first test that asks for it and closes after the last test of
this folder (`pytest_runtest_teardown`), so it costs one start-up however the tests are split
and never outlives them. test_workers.py, which kills a worker, sorts last.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _daskhelpers import NFILES, write_catalog

HERE = Path(__file__).resolve().parent


class _Cluster:
    client: Any | None = None
    cluster: Any | None = None

    @classmethod
    def start(cls) -> Any:
        if cls.client is None:
            import distributed

            import torchfits

            # workers import this torchfits (not another install) and the test helpers
            root = os.path.dirname(os.path.dirname(torchfits.__file__))
            env_path = os.pathsep.join(
                p for p in [root, str(HERE.parent), os.environ.get("PYTHONPATH", "")] if p)
            os.environ["PYTHONPATH"] = env_path
            cls.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                   host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                                   silence_logs=40)
            cls.client = distributed.Client(cls.cluster)
        return cls.client

    @classmethod
    def close(cls) -> None:
        client, cluster = cls.client, cls.cluster
        cls.client = cls.cluster = None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


@pytest.fixture
def client():
    """The folder's cluster client (2 single-threaded worker processes)."""
    pytest.importorskip("distributed")
    return _Cluster.start()


def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or HERE not in Path(nextitem.path).resolve().parents:
        _Cluster.close()


@pytest.fixture(scope="package")
def catalogs(tmp_path_factory):
    """NFILES catalogs with a statistics sidecar of 1000-row chunks."""
    pytest.importorskip("astropy.io.fits")
    from torchfits.tables.stats_index import build_index

    d = tmp_path_factory.mktemp("catalogs")
    for k in range(NFILES):
        write_catalog(str(d / f"cat{k:02d}.fits"), k)
    build_index(str(d), chunk_rows=1000)
    return d


@pytest.fixture(scope="package")
def astropy_frame(catalogs):
    """The same catalogs read by astropy, as one pandas frame (flag nulls → pandas NA)."""
    fits = pytest.importorskip("astropy.io.fits")
    pd = pytest.importorskip("pandas")
    frames = []
    for k in range(NFILES):
        with fits.open(catalogs / f"cat{k:02d}.fits") as hdul:
            data = hdul[1].data
            flag = np.asarray(data["flag"])
            nullable = pd.array(flag.astype(np.int32), dtype="Int32")
            nullable[flag == -1] = pd.NA
            frames.append(pd.DataFrame({
                "id": np.asarray(data["id"]), "ra": np.asarray(data["ra"]), "dec": np.asarray(data["dec"]),
                "mag": np.asarray(data["mag"]),
                "flag": nullable,
                "band": [s.strip() for s in data["band"]],
            }))
    return pd.concat(frames, ignore_index=True)

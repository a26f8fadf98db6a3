"""Helpers for the Dask tests (tests/dask/): the catalog files every module reads, the HTTP
server options of the remote tests, and the decode counter installed in worker processes.

The counter functions run inside the workers (``client.run``): the cluster's workers have
tests/ on their path, so they import this module by name.
"""
from __future__ import annotations

import numpy as np
import pytest

NFILES = 12
NROWS = 4000
BANDS = np.array(["g", "r", "i", "z"])


def write_catalog(path: str, k: int) -> None:
    """Catalog ``k``: NROWS rows of id (k*NROWS onwards), ra, dec, mag, a TNULL flag and a band."""
    from astropy.io import fits

    rng = np.random.default_rng(k)
    ids = np.arange(k * NROWS, (k + 1) * NROWS, dtype=np.int64)
    mag = rng.uniform(14, 24, NROWS).astype(np.float32)
    flag = rng.integers(-1, 3, NROWS).astype(np.int32)
    cols = [
        fits.Column("id", "K", array=ids),
        fits.Column("ra", "D", array=rng.uniform(0, 360, NROWS)),
        fits.Column("dec", "D", array=rng.uniform(-90, 90, NROWS)),
        fits.Column("mag", "E", array=mag),
        fits.Column("flag", "J", array=flag, null=-1),  # TNULL: -1 reads as null
        fits.Column("band", "1A", array=BANDS[rng.integers(0, 4, NROWS)]),
    ]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(path)


def write_images(d, n, shape, fits_mod):
    """``n`` uint16 images of ``shape`` (int16 + BZERO 32768 on disk) as ``d/img{k}.fits``;
    returns the arrays."""
    rng = np.random.default_rng(7)
    arrays = []
    for k in range(n):
        a = rng.integers(0, 60000, shape).astype(np.uint16)
        arrays.append(a)
        fits_mod.PrimaryHDU(a).writeto(str(d / f"img{k}.fits"))
    return arrays


def served(root, **kwargs):
    """An HTTP server on 127.0.0.1 over ``root`` (skips without fsspec and aiohttp)."""
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    from _http_server import FileServer

    return FileServer(str(root), **kwargs)


def remote_options(tmp_path, cache=False):
    """``storage_options`` for the loopback server, which the guard refuses unless allowed; the
    workers get these options with every task."""
    opts = {"allow_private_hosts": True, "cache": cache}
    if cache:
        opts["cache_dir"] = str(tmp_path / "remote-cache")
    return opts


def install_decode_counter():
    """In a worker: record the columns of every table decode until `collect_decode_counter`."""
    from torchfits.tables.source import TableSource

    if getattr(TableSource, "_counted", None) is None:
        original = TableSource.decode
        seen: list = []

        def counting(self, *, columns, **kwargs):
            seen.append(tuple(sorted(columns)) if columns is not None else ("<all>",))
            return original(self, columns=columns, **kwargs)

        TableSource._counted = (original, seen)
        TableSource.decode = counting
    TableSource._counted[1].clear()
    return True


def collect_decode_counter():
    """In a worker: the decodes recorded since `install_decode_counter`, which is undone."""
    from torchfits.tables.source import TableSource

    original, seen = TableSource._counted
    TableSource.decode = original
    del TableSource._counted
    return list(seen)


def set_resident_mb(value):
    """In a worker: set ``TORCHFITS_RESIDENT_MB`` (None: unset) and forget the recorded ranges;
    returns the budget in bytes."""
    import os

    from torchfits.fits.sources import residency

    if value is None:
        os.environ.pop("TORCHFITS_RESIDENT_MB", None)
    else:
        os.environ["TORCHFITS_RESIDENT_MB"] = value
    residency.forget_all()
    return residency.budget()


def resident_held():
    """In a worker: the bytes of finished ranges it keeps resident (`residency.held`)."""
    from torchfits.fits.sources import residency

    return residency.held()

"""Catalog files for the dataset, SQL and Polars tests: the same rows written as FITS (astropy)
and as Parquet (pyarrow), from one set of NumPy arrays, so DuckDB/Polars over Parquet are an
independent oracle for queries over the FITS files."""
from __future__ import annotations

import os

import numpy as np

NFILES = 4
NROWS = 3000
NAMES = np.array(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"])


def catalog_arrays(k: int, nrows: int = NROWS) -> dict:
    """File ``k``'s columns; ``ra`` ranges are disjoint per file (statistics can skip files) and
    increase with the row (statistics can skip row chunks)."""
    rng = np.random.default_rng(1000 + k)
    flags = rng.integers(0, 16, nrows).astype(np.int32)
    flags_null = rng.random(nrows) < 0.1
    return {
        "id": np.arange(nrows, dtype=np.int64) + k * nrows,
        "ra": np.sort(rng.uniform(90 * k, 90 * (k + 1), nrows)),
        "mag": rng.normal(18, 2, nrows).astype(np.float32),
        "flags": flags,
        "flags_null": flags_null,
        "cnt": rng.integers(-500, 500, nrows).astype(np.int16),
        "star": rng.random(nrows) < 0.3,
        "name": NAMES[rng.integers(0, len(NAMES), nrows)],
    }


def write_fits(path: str, arrays: dict, *, drop: tuple = ()) -> None:
    from astropy.io import fits

    flags = np.where(arrays["flags_null"], -1, arrays["flags"]).astype(np.int32)
    cols = [fits.Column(name="id", format="K", array=arrays["id"]),
            fits.Column(name="ra", format="D", array=arrays["ra"]),
            fits.Column(name="mag", format="E", array=arrays["mag"]),
            fits.Column(name="flags", format="J", null=-1, array=flags),
            fits.Column(name="cnt", format="I", array=arrays["cnt"]),
            fits.Column(name="star", format="L", array=arrays["star"]),
            fits.Column(name="name", format="8A", array=arrays["name"])]
    cols = [c for c in cols if c.name not in drop]
    fits.BinTableHDU.from_columns(cols, name="CATALOG").writeto(path, overwrite=True)


def arrow_table(arrays: dict, *, drop: tuple = ()):
    import pyarrow as pa

    table = pa.table({
        "id": arrays["id"], "ra": arrays["ra"], "mag": arrays["mag"],
        "flags": pa.array(arrays["flags"], mask=arrays["flags_null"]),
        "cnt": arrays["cnt"], "star": arrays["star"], "name": pa.array(list(arrays["name"]), pa.string()),
    })
    return table.drop_columns(list(drop))


def make_catalog_dir(root, nfiles: int = NFILES, nrows: int = NROWS) -> tuple[str, str]:
    """Write ``root/fits/cat_K.fits`` and ``root/parquet/cat_K.parquet``; return both dirs."""
    import pyarrow.parquet as pq

    fdir, pdir = os.path.join(root, "fits"), os.path.join(root, "parquet")
    os.makedirs(fdir, exist_ok=True)
    os.makedirs(pdir, exist_ok=True)
    for k in range(nfiles):
        arrays = catalog_arrays(k, nrows)
        write_fits(os.path.join(fdir, f"cat_{k}.fits"), arrays)
        pq.write_table(arrow_table(arrays), os.path.join(pdir, f"cat_{k}.parquet"))
    return fdir, pdir

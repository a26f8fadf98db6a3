"""Dask benchmark: a filtered group-by aggregate over many catalog files on a LocalCluster.

``ddf[ddf.mag_r < 21].groupby("kind").mag_g.agg(["mean", "count"])`` over FILES catalog files
of ROWS rows each (the 12-column catalog of ``generate.py``), computed with 1 and then 2 worker
processes (one thread each), three ways in the same run:

- torchfits: ``torchfits.dask.read_table(dir, where="mag_r < 21")`` (projection and where reach
  the decoder in each partition);
- Parquet: ``dask.dataframe.read_parquet`` over the same rows written as uncompressed Parquet
  (one file per FITS file; Dask pushes the projection and the filter into the reader);
- astropy: ``dask.dataframe.from_delayed`` over ``astropy.table.Table.read(...).to_pandas()``.

Targets (from the issue): within 1.5x of Parquet, at least 5x faster than the astropy route,
near-linear from 1 to 2 workers. Prints a markdown section; ``--append`` adds it to
docs/benchmarks.md. The issue's full size is ``--files 50 --rows 400000`` (1.2 GB of FITS);
pass smaller numbers on a small machine and say so.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402
import generate  # noqa: E402
from _harness import REPO_ROOT, Case, fmt_ms, fmt_ratio, log, machine_info, markdown_table, measure_group  # noqa: E402

WHERE = "mag_r < 21"


def _make_data(directory: Path, files: int, rows: int) -> tuple[Path, Path]:
    """FITS (fitsio-written) and uncompressed Parquet copies of the same rows, one file each."""
    import fitsio
    import pyarrow.parquet as pq

    from torchfits.tables.dataset import dataset

    fits_dir, parquet_dir = directory / "fits", directory / "parquet"
    if len(list(fits_dir.glob("*.fits"))) == files and len(list(parquet_dir.glob("*.parquet"))) == files:
        return fits_dir, parquet_dir
    shutil.rmtree(directory, ignore_errors=True)
    fits_dir.mkdir(parents=True)
    parquet_dir.mkdir(parents=True)
    for k in range(files):
        data = generate.catalog_rows(rows, seed=generate.CATALOG_SEED + k)
        path = fits_dir / f"cat_{k:03d}.fits"
        fitsio.write(str(path), data, extname="CATALOG", clobber=True)
        pq.write_table(dataset(str(path)).to_table(), parquet_dir / f"cat_{k:03d}.parquet",
                       compression="none")
    return fits_dir, parquet_dir


def _astropy_part(path: str) -> object:
    from astropy.table import Table

    df = Table.read(path, hdu=1).to_pandas()
    return df[["mag_r", "mag_g", "kind"]]


def _queries(fits_dir: Path, parquet_dir: Path, threads: int | None = None) -> dict:
    import dask.dataframe as dd

    import dask
    import torchfits.dask as tfd

    paths = sorted(str(p) for p in fits_dir.glob("*.fits"))
    meta = _astropy_part(paths[0]).iloc[:0]

    def agg(ddf: object, filtered: bool = False) -> object:
        sel = ddf if filtered else ddf[ddf.mag_r < 21]
        return sel.groupby("kind").mag_g.agg(["mean", "count"])

    return {
        "torchfits": lambda: agg(tfd.read_table(str(fits_dir), where=WHERE, threads=threads),
                                 filtered=True).compute(),
        "Parquet (uncompressed)": lambda: agg(dd.read_parquet(str(parquet_dir))).compute(),
        "astropy (from_delayed)": lambda: agg(dd.from_delayed(
            [dask.delayed(_astropy_part)(p) for p in paths], meta=meta)).compute(),
    }


def _check(results: dict) -> None:
    ref = None
    for name, frame in results.items():
        frame = frame.sort_index()
        frame.index = frame.index.astype(str)
        if ref is None:
            ref = frame
            continue
        assert list(frame.index) == list(ref.index), name
        assert frame["count"].tolist() == ref["count"].tolist(), name
        np.testing.assert_allclose(frame["mean"].to_numpy(), ref["mean"].to_numpy(), rtol=1e-6)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per worker count (default 5)")
    parser.add_argument("--append", action="store_true", help="append the section to docs/benchmarks.md")
    parser.add_argument("--decode-threads", type=int, default=None,
                        help="threads= for torchfits' partitions (default: 1 per task in a worker; "
                             "pass the core count to see the oversubscribed behaviour)")
    args = parser.parse_args(argv)

    import distributed

    import dask

    fits_dir, parquet_dir = _make_data(generate.DATA_DIR / f"dask_{args.files}x{args.rows}",
                                       args.files, args.rows)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if p)
    timings = {}
    load_before = os.getloadavg()[0]
    for workers in (1, 2):
        log(f"{workers} worker(s) ...")
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                      silence_logs=40) as cluster, distributed.Client(cluster):
            queries = _queries(fits_dir, parquet_dir, args.decode_threads)
            _check({k: q() for k, q in queries.items()})  # also warms every worker
            cases = {k: Case(q, budget_s=60.0, min_repeat=2) for k, q in queries.items()}
            timings[workers] = measure_group(cases, repeat=args.repeat, warmup=0)

    names = list(timings[1])
    rows = []
    for name in names:
        t1, t2 = timings[1][name].median, timings[2][name].median
        rows.append([name, fmt_ms(t1), fmt_ms(t2), f"{t1 / t2:.2f}x",
                     fmt_ratio(t2 / timings[2]["Parquet (uncompressed)"].median)])
    tf2 = timings[2]["torchfits"].median
    pq2 = timings[2]["Parquet (uncompressed)"].median
    ap2 = timings[2]["astropy (from_delayed)"].median
    scale = timings[1]["torchfits"].median / tf2
    load_after = os.getloadavg()[0]
    info = machine_info()
    total = args.files * args.rows
    threads_note = ("one decode thread per task (the default inside a worker)" if args.decode_threads is None
                    else f"threads={args.decode_threads} per task")
    section = "\n".join([
        "",
        "## Dask: filtered group-by over many catalogs (benchmarks/run_dask.py)",
        "",
        f"{info['date']}; {info['cpu']}, {info['cores']} cores, {info['memory']}; {info['python']}; "
        f"Dask {dask.__version__}. {args.files} files × {args.rows:,} rows ({total:,} rows, 12 columns); "
        f"LocalCluster with 1 and 2 worker processes of one thread; median of {args.repeat} interleaved "
        f"rounds; warm page cache; torchfits decodes with {threads_note}; 1-minute load average "
        f"{load_before:.1f} before, {load_after:.1f} after. Command: `python benchmarks/run_dask.py "
        f"--files {args.files} --rows {args.rows} --repeat {args.repeat}"
        f"{'' if args.decode_threads is None else f' --decode-threads {args.decode_threads}'}`.",
        "",
        f"Query: `ddf[ddf.mag_r < 21].groupby('kind').mag_g.agg(['mean', 'count'])` (torchfits gets "
        f"the filter as `where=\"{WHERE}\"`).",
        "",
        markdown_table(["route", "1 worker ms", "2 workers ms", "1→2 speed-up", "vs Parquet (2 workers)"],
                       rows),
        "",
        f"Targets: within 1.5× of Parquet — {'met' if tf2 <= 1.5 * pq2 else 'NOT met'} "
        f"({fmt_ratio(tf2 / pq2)}); "
        f"≥ 5× faster than astropy — {'met' if ap2 >= 5 * tf2 else 'NOT met'} ({ap2 / tf2:.1f}×); "
        f"1→2 workers {scale:.2f}× (2.0 is linear).",
        "",
    ])
    _harness.emit(section, args.append)
    return 0


if __name__ == "__main__":
    sys.exit(main())

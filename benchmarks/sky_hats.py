"""HATS benchmark: FITS → HATS catalog, ``torchfits.hats.write`` against hats-import.

The data: FILES FITS tables of ROWS rows each (default 4 × 500,000 = 2M rows; 6 columns: int64
id, float64 ra/dec/flux, float32 mag, int16 flag; positions uniform on the sphere), made by this
script in a temporary directory. Every route writes the same catalog (pixel_threshold=100,000,
highest_order=7: 48 partitions of order 1). At hats-import's default highest_order=10 its
partitioning step alone (Python loops over the 12.6M-pixel map) takes over a minute whatever
the rows, which would only widen the gap; order 7 keeps the comparison about reading and
writing (``--order 10`` measures the default).

- torchfits: ``torchfits.hats.write(files, out, pixel_threshold=...)`` in this process (default
  zstd level 3), and once more with ``compression_level=15`` (hats-import's Parquet setting);
- hats-import: its own pipeline (``ImportArguments(file_reader="fits")``: astropy's FITS reader)
  on a ``distributed.LocalCluster`` of 2 worker processes with one thread each, run in a child
  process; the time is the ``pipeline_with_client`` call (the cluster's start and stop are not
  counted); the whole child's wall clock is reported beside it;
- hats-import with ``torchfits.hats.hats_import_reader()`` as its reader (same pipeline).

Results are checked equal (partitions, and every row sorted by ``_healpix_29`` and id). Best of
``repeat`` after a warm-up for torchfits; hats-import runs ``max(1, repeat - 1)`` times (each run
takes tens of seconds). Target (issue 26): torchfits ≥ 5× hats-import's FITS reader pipeline.

Usage: ``python benchmarks/sky_hats.py [--files 4 --rows 500000 --repeat 3]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import REPO_ROOT, fmt_ratio, log, markdown_table, measure  # noqa: E402

THRESHOLD = 100_000
HIGHEST_ORDER = 7

# the hats-import child: a 2-worker cluster, the pipeline timed alone, seconds printed as JSON
_CHILD = r"""
import json, sys, time
from dask.distributed import Client, LocalCluster
from hats_import.catalog.arguments import ImportArguments
from hats_import.pipeline import pipeline_with_client

if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    reader = job["reader"]
    if reader == "torchfits":
        import torchfits.hats
        reader = torchfits.hats.hats_import_reader(threads=1)
    args = ImportArguments(output_artifact_name="catalog", input_file_list=job["files"],
                           file_reader=reader, output_path=job["out"],
                           pixel_threshold=job["threshold"], highest_healpix_order=job["order"],
                           progress_bar=False, resume=False, tmp_dir=job["tmp"])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=50) as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        pipeline_with_client(args, client)
        print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def make_data(directory: Path, files: int, rows: int) -> list[str]:
    """FILES FITS tables of ROWS rows: id, ra, dec, mag, flux, flag."""
    import torchfits

    rng = np.random.default_rng(26)
    paths = []
    for k in range(files):
        path = directory / f"cat_{k}.fits"
        ra = rng.uniform(0.0, 360.0, rows)
        dec = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, rows)))
        torchfits.write(str(path), {
            "id": np.arange(k * rows, (k + 1) * rows, dtype=np.int64), "ra": ra, "dec": dec,
            "mag": rng.normal(20.0, 1.5, rows).astype(np.float32), "flux": rng.random(rows),
            "flag": rng.integers(0, 1000, rows).astype(np.int16)}, overwrite=True)
        paths.append(str(path))
    return paths


def _hats_import(files: list[str], out: Path, tmp: Path, reader: str, order: int) -> tuple[float, float]:
    """One hats-import run in a child process: (pipeline seconds, child wall seconds)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
    job = {"files": files, "out": str(out), "tmp": str(tmp), "threshold": THRESHOLD,
           "order": order, "reader": reader}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], env=env, check=True,
                          capture_output=True, text=True, cwd=str(tmp))
    wall = time.perf_counter() - t0
    line = [s for s in done.stdout.splitlines() if s.startswith("{")][-1]
    return float(json.loads(line)["seconds"]), wall


def _rows(catalog: Path) -> tuple[str, object]:
    """(partition_info.csv, every row sorted by _healpix_29 and id) of a catalog."""
    import pyarrow.parquet as pq

    table = pq.read_table(catalog / "dataset", columns=["_healpix_29", "id", "ra", "dec", "mag",
                                                         "flux", "flag"])
    table = table.sort_by([("_healpix_29", "ascending"), ("id", "ascending")])
    return (catalog / "partition_info.csv").read_text(), table


def report(repeat: int = 3, files: int = 4, rows: int = 500_000, order: int = HIGHEST_ORDER) -> str:
    """Run the benchmark; the markdown section."""
    import torchfits.hats

    with tempfile.TemporaryDirectory(prefix="sky_hats_") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "in").mkdir()
        log(f"making {files} x {rows:,} rows")
        paths = make_data(tmp / "in", files, rows)
        ours = tmp / "torchfits"

        def run(level: int = 3) -> str:
            return torchfits.hats.write(paths, ours, pixel_threshold=THRESHOLD,
                                        highest_order=order, compression_level=level,
                                        overwrite=True)

        log("torchfits.hats.write")
        fast = measure(run, repeat)
        info, table = _rows(ours)
        slow = measure(lambda: run(15), max(1, repeat - 1))
        assert _rows(ours)[1].equals(table)
        results = {}
        for reader in ("fits", "torchfits"):
            log(f"hats-import, reader={reader!r}")
            samples = []
            for i in range(max(1, repeat - 1)):
                out = tmp / f"hats_import_{reader}_{i}"
                work = tmp / f"work_{reader}_{i}"
                work.mkdir()
                samples.append(_hats_import(paths, out, work, reader, order))
                got_info, got = _rows(out / "catalog")
                assert got_info == info, "hats-import chose other partitions"
                assert got.equals(table), "hats-import's rows differ"
            results[reader] = min(samples)
        anchor = results["fits"][0]
        lines = [
            ("torchfits.hats.write (zstd 3)", fast.best, anchor / fast.best),
            ("torchfits.hats.write (zstd 15, hats-import's level)", slow.best, anchor / slow.best),
            ("hats-import, its FITS reader (astropy), 2 workers", anchor, 1.0),
            ("hats-import, torchfits.hats reader, 2 workers", results["torchfits"][0],
             anchor / results["torchfits"][0]),
        ]
        nparts = len(info.splitlines()) - 1
        table_md = markdown_table(
            ["route", "best s", "vs hats-import"],
            [(label, f"{seconds:.2f}", fmt_ratio(ratio)) for label, seconds, ratio in lines])
        return (f"### FITS → HATS ({files} files × {rows:,} rows, 6 columns → {nparts} partitions)\n\n"
                f"pixel_threshold={THRESHOLD:,}, highest_order={order}; best of {repeat} "
                f"(torchfits) / {max(1, repeat - 1)} (hats-import) after a warm-up; "
                f"hats-import times its pipeline call only (its child process took "
                f"{results['fits'][1]:.1f} s with the cluster's start and stop); "
                f"every catalog checked equal (partitions and rows).\n\n{table_md}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--order", type=int, default=HIGHEST_ORDER)
    args = parser.parse_args()
    print(report(args.repeat, args.files, args.rows, args.order))


if __name__ == "__main__":
    main()

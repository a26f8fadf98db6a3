"""Loader benchmark measured as MLPerf Storage does: a simulated accelerator consumes each batch
for ``batch samples / rate`` seconds (it reads the batch, the float64 checksum below, and sleeps
the rest of the step: the sleep leaves the host CPUs to the loader), and the
accelerator utilisation (AU) is the time it computed over the time it ran. A loader sustains a
rate when AU >= 90 %; for each workload we search (bisection on a log scale) the highest rate
it sustains and report it in samples/s.

Workloads (data made by the script in a temp dir):
  stamps       N files of 64x64 float32 → FitsImageDataset, batch 64 (map-style, shuffled)
  compressed   N files of 64x64 int16, RICE_1 tiles → FitsImageDataset(hdu=1), batch 64
  cutouts      M random 64x64 boxes of one 4096² float32 image → FitsCutoutDataset, batch 256
  rows         a 1M-row table, 4 float32 columns → FitsTableIterableDataset(as_batches=True,
               batch_size=16384); a sample is a row

each with 0 and 2 DataLoader workers (fork), page cache warm and dropped (posix_fadvise
DONTNEED on every file and the in-process readers closed before each epoch: no root needed;
where the call is missing the dropped rows are skipped). With warm cache the 2 workers persist
across epochs (started by a warm-up epoch); with dropped cache they start afresh each epoch.
The clock of an epoch starts when every worker has delivered a batch (batch ``workers - 1``;
batch 0 without workers) and stops when the last batch's step ends (worker start-up, a
second worker's late first batch and the tear-down of the workers are not the loader's steady
rate); a rate probe is ``--epochs`` epochs (default 2), and more until their clocked windows
add up to ``--probe-seconds`` (default 0.5; a probe of two short epochs failed on one stall),
AU over them together. One torch
intra-op thread in both interpreters. Every epoch's float64
sum is checked against an astropy loop over the same samples (the anchor, also timed alone).
torchfits 1.2.3 (benchmarks/.venv-tf123, setup_incumbent.sh) runs the same workloads in its own
interpreter, right after ours workload by workload, when that venv is present; otherwise the
report says so and leaves its rows out.

Usage: python benchmarks/run_loader.py [--files 1024] [--cutouts 4096] [--rows 1000000]
       [--repeat 3] [--only stamps,compressed,cutouts,rows] [--steps 5] [--epochs 2]
       [--probe-seconds 0.5]
       [--json PATH] [--data-dir DIR]
       python benchmarks/run_loader.py --runs A.json B.json C.json   (one table over runs)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
INCUMBENT = HERE / ".venv-tf123" / "bin" / "python"
WORKLOADS = ("stamps", "compressed", "cutouts", "rows")
COLUMNS = ["a", "b", "c", "d"]
TARGET_AU = 0.90
STEPS = [5]  # bisection steps of the rate search (--steps)
EPOCHS = [2]  # epochs of one rate probe (--epochs)
PROBE_S = [0.5]  # and more until their clocked windows add up to this (--probe-seconds)


# -- data --------------------------------------------------------------------------------------
def make_data(folder: Path, files: int, cutouts: int, rows: int) -> dict[str, Any]:
    import torchfits

    rng = np.random.default_rng(7)
    stamps, packed = [], []
    for i in range(files):
        p = folder / f"s{i:05d}.fits"
        torchfits.write(str(p), rng.normal(100, 5, (64, 64)).astype(np.float32), overwrite=True)
        stamps.append(str(p))
        c = folder / f"c{i:05d}.fits"
        torchfits.write(str(c), [np.empty(0, np.uint8), rng.integers(0, 4000, (64, 64)).astype(np.int16)],
                        compress="RICE_1", overwrite=True)
        packed.append(str(c))
    big = folder / "big.fits"
    torchfits.write(str(big), rng.normal(0, 1, (4096, 4096)).astype(np.float32), overwrite=True)
    corners = [(int(x), int(y)) for x, y in rng.integers(0, 4096 - 64, (cutouts, 2))]
    cat = folder / "cat.fits"
    torchfits.write(str(cat), [np.empty(0, np.uint8),
                               {c: rng.normal(20, 2, rows).astype(np.float32) for c in COLUMNS}],
                    overwrite=True)
    return {"stamps": stamps, "compressed": packed, "big": str(big), "corners": corners,
            "cat": str(cat), "rows": rows}


def anchors(data: dict[str, Any], only: list[str]) -> dict[str, dict[str, float]]:
    """The float64 sum and the time of one loop over each workload read with astropy."""
    from astropy.io import fits

    def stamps(paths: list[str], hdu: int) -> float:
        return sum(float(fits.getdata(p, hdu).astype(np.float64).sum()) for p in paths)

    def cutouts() -> float:
        with fits.open(data["big"], memmap=True) as hdul:
            img = hdul[0].data
            return sum(float(img[y:y + 64, x:x + 64].astype(np.float64).sum())
                       for x, y in data["corners"])

    def rows() -> float:
        with fits.open(data["cat"], memmap=True) as hdul:
            t = hdul[1].data
            return sum(float(np.asarray(t[c], np.float64).sum()) for c in COLUMNS)

    fns = {"stamps": lambda: stamps(data["stamps"], 0),
           "compressed": lambda: stamps(data["compressed"], 1), "cutouts": cutouts, "rows": rows}
    out = {}
    for name in only:
        t0 = time.perf_counter()
        total = fns[name]()
        out[name] = {"sum": total, "seconds": time.perf_counter() - t0}
    return out


# -- the loaders (only API torchfits 1.2.3 has too) ----------------------------------------------
def loader_for(name: str, data: dict[str, Any], workers: int,
               persistent: bool = False) -> tuple[Any, int]:
    """(a DataLoader over the workload, the number of samples of one epoch)."""
    import torchfits.data as td

    kw: dict[str, Any] = {"num_workers": workers}
    if workers:
        kw["multiprocessing_context"] = "fork"
        kw["persistent_workers"] = persistent
    if name in ("stamps", "compressed"):
        paths = data[name]
        ds = td.FitsImageDataset(paths, hdu=0 if name == "stamps" else 1)
        return td.make_loader(ds, batch_size=64, shuffle=True, **kw), len(paths)
    if name == "cutouts":
        specs = [(data["big"], 0, x, y, 64) for x, y in data["corners"]]
        return td.make_loader(td.FitsCutoutDataset(specs), batch_size=256, shuffle=True, **kw), len(specs)
    ds = td.FitsTableIterableDataset(data["cat"], columns=COLUMNS, batch_size=16384, as_batches=True)
    # 1.2.3's make_loader sets its fits_collate_fn even without batching, which fails on a
    # dict of columns: both take the batches as they come.
    return td.make_loader(ds, batch_size=None, collate_fn=_as_is, **kw), int(data["rows"])


def _as_is(batch: Any) -> Any:
    return batch


def _samples_and_sum(batch: Any) -> tuple[int, float]:
    if isinstance(batch, dict):
        return len(next(iter(batch.values()))), sum(float(v.double().sum()) for v in batch.values())
    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    return len(x), float(x.double().sum())


def drop_cache(data: dict[str, Any], name: str) -> bool:
    """Evict the workload's files from the page cache (and close this process's readers, whose
    maps would pin the pages); False where posix_fadvise is missing."""
    if not hasattr(os, "posix_fadvise"):
        return False
    try:
        from torchfits.data.readers import clear_readers

        clear_readers()
    except ImportError:  # torchfits 1.2.3
        pass
    try:
        import torchfits

        torchfits.clear_file_cache()
    except (AttributeError, TypeError):
        pass
    paths = data[name] if name in ("stamps", "compressed") else \
        [data["big"]] if name == "cutouts" else [data["cat"]]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def epoch(loader: Any, rate: float | None, workers: int) -> dict[str, float]:
    """One epoch with an accelerator of ``rate`` samples/s (None: no accelerator): samples and
    float64 sum of every batch, and the clocked window: from the arrival of the batch by which
    every worker has delivered one (batch ``workers - 1``: the DataLoader hands batches out to
    its workers in turn and returns them in order; batch 0 without workers) to the end of the
    last batch's step, with the samples and the compute time inside it. Worker start-up (and a
    second worker's late first batch) and the tear-down of the workers after the last batch are
    outside: neither is the loader's steady rate."""
    samples, total, compute, clocked = 0, 0.0, 0.0, 0
    try:
        start_at = min(max(0, workers - 1), len(loader) - 1)  # an epoch of fewer batches: the first
    except TypeError:  # an iterable dataset's loader has no length
        start_at = max(0, workers - 1)
    t0 = t_end = None
    for i, batch in enumerate(loader):
        if i == start_at:
            t0 = time.perf_counter()
        t1 = time.perf_counter()
        n, s = _samples_and_sum(batch)
        samples += n
        total += s
        if t0 is not None:
            clocked += n
        if rate is not None:
            # The checksum is the accelerator reading its batch: it is part of the step, which
            # sleeps only the rest of n / rate (a checksum longer than that is an overlong step).
            left = n / rate - (time.perf_counter() - t1)
            if left > 0:
                time.sleep(left)
            if t0 is not None:
                compute += time.perf_counter() - t1  # an overslept step is the accelerator's time
        t_end = time.perf_counter()
    wall = (t_end - t0) if t0 is not None and t_end is not None else 0.0
    return {"samples": samples, "sum": total, "seconds": wall, "compute": compute,
            "clocked": clocked}


def measure(name: str, data: dict[str, Any], workers: int, cold: bool, repeat: int,
            check: float | None) -> dict[str, Any]:
    """The loader alone (best of ``repeat``), then the highest rate with AU >= 90 %."""
    # Warm cache: the workers persist across epochs (as in a training run; started by the
    # warm-up epoch). Dropped cache: fresh workers every epoch, so no worker's open map pins
    # the pages the drop must evict.
    loader, n = loader_for(name, data, workers, persistent=bool(workers) and not cold)

    def run(rate: float | None) -> dict[str, float]:
        if cold:
            drop_cache(data, name)
        r = epoch(loader, rate, workers)
        if check is not None and abs(r["sum"] - check) > 1e-9 * max(1.0, abs(check)):
            raise AssertionError(f"{name}: sum {r['sum']!r} differs from the anchor's {check!r}")
        if r["samples"] != n:
            raise AssertionError(f"{name}: {r['samples']} samples, expected {n}")
        return r

    run(None)  # warm-up: imports, first opens, the persistent workers' start
    alone = min((run(None) for _ in range(repeat)), key=lambda r: r["seconds"] / r["clocked"])
    peak = alone["clocked"] / alone["seconds"]

    def au(rate: float) -> tuple[float, float]:
        """(AU, samples/s delivered) over the probe's ``EPOCHS[0]`` epochs, and more until their
        clocked windows add up to ``PROBE_S[0]`` (a short probe fails on one stall), together (their
        clocked windows summed)."""
        runs = [run(rate) for _ in range(EPOCHS[0])]
        while sum(r["seconds"] for r in runs) < PROBE_S[0] and len(runs) < 64:
            runs.append(run(rate))
        seconds = sum(r["seconds"] for r in runs)
        if not seconds:
            return 0.0, 0.0
        return sum(r["compute"] for r in runs) / seconds, sum(r["clocked"] for r in runs) / seconds

    # Without workers loading and computing alternate, so AU >= 90 % needs rate <= peak / 9;
    # workers overlap them, up to the peak. The slow low end (peak / 16) is probed only when
    # no rate above it passed.
    lo, hi = peak / 16, peak * 1.05
    passed: tuple[float, float, float] | None = None  # (rate, AU, delivered)
    a, got = au(hi)
    if a >= TARGET_AU:
        passed = (hi, a, got)
    else:
        for _ in range(STEPS[0]):
            mid = math.sqrt(lo * hi)
            a, got = au(mid)
            if a >= TARGET_AU:
                lo, passed = mid, (mid, a, got)
            else:
                hi = mid
        if passed is None:
            a, got = au(lo)
            if a < TARGET_AU:
                return {"samples": n, "alone_per_s": peak, "rate": None, "au": a, "delivered": got}
            passed = (lo, a, got)
    return {"samples": n, "alone_per_s": peak, "rate": passed[0], "au": passed[1],
            "delivered": passed[2]}


def run_all(data: dict[str, Any], only: list[str], repeat: int, sums: dict | None) -> dict[str, Any]:
    import torch

    # One intra-op thread in both interpreters: on the shared machine torch's threads made the
    # checksum of every batch cost more than the reads (as in run_training.py).
    torch.set_num_threads(1)
    cold_ok = hasattr(os, "posix_fadvise")
    out: dict[str, Any] = {}
    for name in only:
        for workers in (0, 2):
            for cold in ((False, True) if cold_ok else (False,)):
                key = f"{name}/{workers}/{'dropped' if cold else 'warm'}"
                check = None if sums is None else sums[name]["sum"]
                try:
                    out[key] = measure(name, data, workers, cold, repeat, check)
                except Exception as exc:  # noqa: BLE001 - a failing case is a row, not a crash
                    out[key] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                print(f"{key:28s} {out[key]}", file=sys.stderr, flush=True)
    return out


def run_incumbent(data: dict[str, Any], only: list[str], repeat: int, sums: dict) -> dict[str, Any]:
    if not INCUMBENT.exists():
        return {"error": "benchmarks/.venv-tf123 is not present (bash benchmarks/setup_incumbent.sh)"}
    job = {"data": data, "only": only, "repeat": repeat, "sums": sums, "steps": STEPS[0],
           "epochs": EPOCHS[0], "probe_s": PROBE_S[0]}
    proc = subprocess.run([str(INCUMBENT), "-I", str(Path(__file__)), "--incumbent-worker"],
                          input=json.dumps(job), capture_output=True, text=True, timeout=7200,
                          cwd="/")
    if proc.returncode:
        return {"error": proc.stderr[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the report --------------------------------------------------------------------------------------
def _rate(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def render(results: dict[str, Any], incumbent: dict[str, Any], sums: dict, repeat: int,
           shapes: str) -> str:
    import sys as _sys

    _sys.path.insert(0, str(HERE))
    from _harness import markdown_table

    rows = []
    for key, r in results.items():
        name, workers, cache = key.split("/")
        inc = incumbent.get(key, {}) if "error" not in incumbent else {}
        if "error" in r:
            rows.append([name, workers, cache, "failed: " + r["error"][:60], "", "", "", "", "", ""])
            continue
        inc_rate = inc.get("rate") if isinstance(inc, dict) else None
        ratio = "—" if not inc_rate or not r["rate"] else f"{r['rate'] / inc_rate:.1f}×"
        verdict = "—" if not inc_rate else ("met" if r["rate"] and r["rate"] >= 2 * inc_rate
                                            else "not met")
        rows.append([name, workers, cache, _rate(r["alone_per_s"]), _rate(r["rate"]),
                     f"{100 * r['au']:.0f} %", _rate(r.get("delivered")), _rate(inc_rate), ratio,
                     verdict])
    table = markdown_table(["workload", "workers", "page cache", "loader alone (samples/s)",
                            "highest rate at AU ≥ 90 % (samples/s)", "AU there", "delivered (samples/s)",
                            "1.2.3 rate", "vs 1.2.3", "≥ 2× 1.2.3"], rows, align="lrlrrrrrrl")
    anchor = ", ".join(f"{k} {v['seconds'] * 1e3:.0f} ms" for k, v in sums.items())
    lines = [
        "### Loaders under a simulated accelerator (MLPerf Storage style)",
        "",
        f"{shapes}. AU = accelerator compute time / clocked time (each epoch clocked from the "
        f"batch by which every worker has delivered one to the end of the last step; with 2 "
        f"workers they persist across epochs when the page cache stays warm); rates found by "
        f"bisection ({STEPS[0]} steps), each probe {EPOCHS[0]} epoch(s) or more until "
        f"{PROBE_S[0]:g} s clocked, together; loader alone "
        f"best of {repeat} after a warm-up. "
        f"Every epoch's sum equals the astropy anchor's (astropy loop, one epoch: {anchor}).",
        "",
        table,
    ]
    if "error" in incumbent:
        lines += ["", f"torchfits 1.2.3 rows left out: {incumbent['error']}"]
    return "\n".join(lines) + "\n"


def render_runs(raws: list[dict[str, Any]]) -> str:
    """One table over several runs' ``--json`` files: per case, each run's highest rate at
    AU >= 90 % (ours / 1.2.3 → ratio) and its loader-alone ratio to 1.2.3."""
    sys.path.insert(0, str(HERE))
    from _harness import markdown_table

    def cell(values: list[str]) -> str:
        return " / ".join(values)

    def ratio(a: float | None, b: float | None) -> str:
        return "—" if not a or not b else f"{a / b:.1f}×"

    keys = list(raws[0]["results"])
    rows = []
    for key in keys:
        name, workers, cache = key.split("/")
        ours = [raw["results"].get(key, {}) for raw in raws]
        inc = [raw["incumbent"].get(key, {}) if isinstance(raw["incumbent"], dict) else {}
               for raw in raws]
        rates = [r.get("rate") for r in ours]
        inc_rates = [i.get("rate") if isinstance(i, dict) else None for i in inc]
        met = [bool(a and b and a >= 2 * b) for a, b in zip(rates, inc_rates)]
        rows.append([name, workers, cache, cell([_rate(r) for r in rates]),
                     cell([f"{100 * r['au']:.0f} %" if "au" in r else "—" for r in ours]),
                     cell([_rate(r) for r in inc_rates]),
                     cell([ratio(a, b) for a, b in zip(rates, inc_rates)]),
                     cell([ratio(r.get("alone_per_s"), i.get("alone_per_s"))
                           for r, i in zip(ours, inc)]),
                     f"{sum(met)} of {len(met)}"])
    return markdown_table(["workload", "workers", "page cache", "rate at AU ≥ 90 % (samples/s)",
                           "AU there", "1.2.3 rate", "vs 1.2.3", "loader alone vs 1.2.3",
                           "≥ 2× 1.2.3"], rows, align="lllrrrrrl") + "\n"


def report(repeat: int = 3, files: int = 1024, cutouts: int = 4096, rows: int = 1_000_000,
           only: list[str] | None = None, raw: dict | None = None,
           data_dir: str | None = None) -> str:
    """The markdown section of this benchmark (data made in a temp dir, or kept in a folder of
    ``data_dir`` named by the sizes and reused by the next run with the same sizes)."""
    only = list(only or WORKLOADS)
    with tempfile.TemporaryDirectory(prefix="tf-loader-") as tmp:
        # one folder per set of sizes: runs of other sizes in the same data_dir would rewrite
        # the shared file names (big.fits, cat.fits) under the other's record
        folder = Path(data_dir) / f"loader_{files}_{cutouts}_{rows}" if data_dir else Path(tmp)
        made = folder / "made.json"
        if data_dir and made.exists():
            data = json.loads(made.read_text())
        else:
            folder.mkdir(parents=True, exist_ok=True)
            data = make_data(folder, files, cutouts, rows)
            if data_dir:
                made.write_text(json.dumps(data))
        sums = anchors(data, only)
        results: dict[str, Any] = {}
        incumbent: dict[str, Any] = {}
        for name in only:  # interleaved per workload, so load drift favours neither
            results.update(run_all(data, [name], repeat, sums))
            got = run_incumbent(data, [name], repeat, sums)
            if "error" in got and not INCUMBENT.exists():
                incumbent = got
                continue
            for key in results:
                if key.startswith(name + "/"):
                    incumbent[key] = got.get(key, {"error": got.get("error", "no row")})
                    print(f"1.2.3 {key:22s} {incumbent[key]}", file=sys.stderr, flush=True)
    if raw is not None:
        raw.update(results=results, incumbent=incumbent, anchors=sums)
    shapes = (f"stamps and compressed stamps: {files} files of 64×64 (float32; int16 RICE_1), "
              f"batch 64; cutouts: {cutouts} boxes 64×64 of a 4096² float32 image, batch 256; "
              f"rows: {rows:,} rows × 4 float32 columns, 16,384-row batches")
    return render(results, incumbent, sums, repeat, shapes)


def _incumbent_worker() -> int:
    job = json.loads(sys.stdin.read())
    STEPS[0] = int(job.get("steps", STEPS[0]))
    EPOCHS[0] = int(job.get("epochs", EPOCHS[0]))
    PROBE_S[0] = float(job.get("probe_s", PROBE_S[0]))
    import torchfits

    out = run_all(job["data"], job["only"], job["repeat"], job["sums"])
    out["version"] = torchfits.__version__
    print(json.dumps(out))
    return 0


def main() -> int:
    if "--incumbent-worker" in sys.argv:
        return _incumbent_worker()
    if sys.argv[1:2] == ["--runs"]:  # --runs A.json B.json ...: one table over those runs
        print(render_runs([json.loads(Path(p).read_text()) for p in sys.argv[2:]]))
        return 0
    sys.path.insert(0, str(HERE.parent))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1024)
    ap.add_argument("--cutouts", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", type=str, default=None)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--steps", type=int, default=5,
                    help="bisection steps of the rate search (5: rates within ~9 %%)")
    ap.add_argument("--epochs", type=int, default=2,
                    help="epochs of one rate probe, AU over them together")
    ap.add_argument("--probe-seconds", type=float, default=0.5,
                    help="more epochs in a probe until their clocked time adds up to this")
    ap.add_argument("--data-dir", type=str, default=None,
                    help="make the files there once (a subfolder per set of sizes) and reuse "
                         "them in later runs")
    args = ap.parse_args()
    only = None if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    if only is not None and set(only) - set(WORKLOADS):
        ap.error(f"unknown workloads {sorted(set(only) - set(WORKLOADS))}")
    STEPS[0] = max(1, args.steps)
    EPOCHS[0] = max(1, args.epochs)
    PROBE_S[0] = max(0.0, args.probe_seconds)
    raw: dict = {}
    print(report(args.repeat, args.files, args.cutouts, args.rows, only, raw, args.data_dir))
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Peak memory (RSS) per workload, each in a whole fresh process: torchfits against astropy,
fitsio and torchfits 1.2.3, and torchfits with the release of finished map ranges switched off
("today": the behaviour before bounded residency) as the A/B of the change.

Usage: ``python benchmarks/run_memory.py [--big] [--rounds N] [--json PATH]`` with the dev venv
(1.2.3 runs from ``benchmarks/.venv-tf123`` when it is there).

Every workload runs in its own interpreter, which imports its library, reads its RSS (the
*baseline*: interpreter plus imports), runs the workload once and reports its peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``); the table shows the peak above the baseline, the
baseline next to it, and the file size. Results are consumed the way a pipeline would
(streamed batches discarded, reads kept until the end). Data: ``generate.py``'s catalog_2m
(2,000,000 rows × 59 bytes, 118 MB) and image_4096_f32 (64 MiB); the row-index scan streams every
4th row of 2 columns (batches of 65,536 indices; 1.2.3 has no streamed take, and its whole
``table.read(rows=...)`` of them took 270 s); the VLA heap scan streams a ``1PE`` column of
524,288 cells of 64 floats (128 MiB of heap, written once and removed unless ``--keep``).

``--big`` adds two rows that need disk and minutes: a 2 GB catalog streamed batch by batch
(torchfits and torchfits with release off), and a ``distributed`` LocalCluster with one worker
limited to 1 GB that counts the rows of a 4 GB catalog passing a filter through
``torchfits.dask.read_table``, with the worker's peak RSS and whether the worker paused,
restarted or warned about memory. The big files (catalog_2m's rows repeated, written once
under ``benchmarks/data/``) are removed at the end unless ``--keep``.

The warm-speed A/B (``--rounds``, default 5): a streaming scan and a where-scan of catalog_2m,
each the first call of a fresh process and then repeated 5 times in it, in interleaved fresh
processes per release variant (off = before this change; budgets of 128 and 64 MiB (the default); budget 0 =
release every finished range at once); medians of wall and CPU time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402
from _harness import BENCH_DIR, REPO_ROOT, clean_env, log, machine_info, markdown_table  # noqa: E402

INCUMBENT = BENCH_DIR / ".venv-tf123" / "bin" / "python"
WHERE = "mag_r < 20 AND flags == 0"
CUTOUTS = 1000
STALL_S = 300  # a Dask scan still running after this long is reported as stalled

# What every child runs around its workload: the baseline after imports, the peak at the end.
PRELUDE = """
import json, resource, sys, time
def _rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
"""
REPORT = """
_base = _rss()
_t = time.perf_counter()
_run()
_wall = time.perf_counter() - _t
print(json.dumps({"base": _base, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "wall": _wall}))
"""
RELEASE_OFF = """
from torchfits.fits.sources import residency
residency.done = lambda *args: None
residency.budget = lambda: 1 << 60  # nor do whole-image reads and dataset passes release behind them
"""
# The release variants of the A/B: today's behaviour (no release), the default budget, and
# releasing every finished range at once (budget 0).
VARIANTS = {"off": RELEASE_OFF,
            "budget 128 MiB": "from torchfits.fits.sources import residency\nresidency.BUDGET = 128 << 20\n",
            "budget 64 MiB (default)": "",
            "budget 0": "from torchfits.fits.sources import residency\nresidency.BUDGET = 0\n"}
# torchfits imports NumPy and pyarrow lazily, on the first read: import them before the
# baseline, as the other libraries' imports are.
TF_IMPORTS = "import numpy, pyarrow, pyarrow.compute\n"

# Workload → library → (imports, body of _run()). ``{p}`` is the file, ``{n}`` the cutout count.
WORKLOADS: dict[str, dict[str, tuple[str, str]]] = {
    "full catalog read": {
        "torchfits": ("import torchfits, torchfits.table", "out = torchfits.table.read(P, hdu=1)"),
        "torchfits 1.2.3": ("import torchfits, torchfits.table", "out = torchfits.table.read(P, hdu=1)"),
        "astropy": ("from astropy.table import Table", "out = Table.read(P, hdu=1)"),
        "fitsio": ("import fitsio", "out = fitsio.read(P, ext=1)"),
    },
    "streaming scan": {
        "torchfits": ("import torchfits, torchfits.table",
                      "for b in torchfits.scan(P).to_batches(): pass"),
        "torchfits 1.2.3": ("import torchfits, torchfits.table",
                            "for b in torchfits.table.scan(P, hdu=1): pass"),
        "astropy": ("from astropy.io import fits",
                    "h = fits.open(P)\n    d = h[1].data\n"
                    "    for a in range(0, len(d), 65536): b = d[a:a + 65536].copy()"),
        "fitsio": ("import fitsio",
                   "f = fitsio.FITS(P)\n    n = f[1].get_nrows()\n"
                   "    for a in range(0, n, 65536): b = f[1][a:a + 65536]"),
    },
    "where scan": {
        "torchfits": ("import torchfits, torchfits.table",
                      f"out = torchfits.scan(P, where={WHERE!r}).to_arrow()"),
        "torchfits 1.2.3": ("import torchfits, torchfits.table",
                            f"out = torchfits.table.read(P, hdu=1, where={WHERE!r})"),
        "astropy": ("from astropy.io import fits",
                    "h = fits.open(P)\n    d = h[1].data\n"
                    "    out = d[(d['mag_r'] < 20) & (d['flags'] == 0)]"),
        "fitsio": ("import fitsio",
                   "f = fitsio.FITS(P)\n    out = f[1].read(rows=f[1].where('mag_r < 20 && flags == 0'))"),
    },
    "image full read": {
        "torchfits": ("import torch, torchfits", "out = torchfits.read(P)"),
        "torchfits 1.2.3": ("import torch, torchfits", "out = torchfits.read(P)"),
        "astropy": ("from astropy.io import fits", "out = fits.getdata(P)"),
        "fitsio": ("import fitsio", "out = fitsio.read(P)"),
    },
    "1,000 cutouts": {
        "torchfits": ("import torch, torchfits\nfrom numpy.random import default_rng",
                      "r = torchfits.open_subset_reader(P, 0)\n"
                      "    xy = default_rng(0).integers(0, 4096 - 64, (N, 2))\n"
                      "    out = [r(int(x), int(y), int(x) + 64, int(y) + 64) for x, y in xy]"),
        "torchfits 1.2.3": ("import torch, torchfits\nfrom numpy.random import default_rng",
                            "r = torchfits.open_subset_reader(P, 0)\n"
                            "    xy = default_rng(0).integers(0, 4096 - 64, (N, 2))\n"
                            "    out = [r(int(x), int(y), int(x) + 64, int(y) + 64) for x, y in xy]"),
        "astropy": ("from astropy.io import fits\nfrom numpy.random import default_rng",
                    "s = fits.open(P)[0].section\n"
                    "    xy = default_rng(0).integers(0, 4096 - 64, (N, 2))\n"
                    "    out = [s[int(y):int(y) + 64, int(x):int(x) + 64] for x, y in xy]"),
        "fitsio": ("import fitsio\nfrom numpy.random import default_rng",
                   "h = fitsio.FITS(P)[0]\n"
                   "    xy = default_rng(0).integers(0, 4096 - 64, (N, 2))\n"
                   "    out = [h[int(y):int(y) + 64, int(x):int(x) + 64] for x, y in xy]"),
    },
    "dataset epoch": {
        "torchfits": ("import torch, torchfits, torchfits.data",
                      "ds = torchfits.data.FitsTableIterableDataset(P, 1, columns=['ra', 'dec', 'mag_r', "
                      "'flags'], as_batches=True)\n    for b in ds: pass"),
        "torchfits 1.2.3": ("import torch, torchfits, torchfits.data",
                            "ds = torchfits.data.FitsTableIterableDataset(P, 1, columns=['ra', 'dec', "
                            "'mag_r', 'flags'], as_batches=True)\n    for b in ds: pass"),
    },
    "row-index scan": {
        "torchfits": ("import torchfits, torchfits.table\nimport numpy as np",
                      "i = np.arange(0, 2_000_000, 4)\n"
                      "    for b in torchfits.scan(P, columns=['ra', 'dec'], rows=i).to_batches(): pass"),
        "astropy": ("from astropy.io import fits\nimport numpy as np",
                    "d = fits.open(P)[1].data\n    i = np.arange(0, 2_000_000, 4)\n"
                    "    for a in range(0, len(i), 65536):\n"
                    "        b = (d['ra'][i[a:a + 65536]], d['dec'][i[a:a + 65536]])"),
        "fitsio": ("import fitsio\nimport numpy as np",
                   "f = fitsio.FITS(P)\n    i = np.arange(0, 2_000_000, 4)\n"
                   "    for a in range(0, len(i), 65536):\n"
                   "        b = f[1].read(columns=['ra', 'dec'], rows=i[a:a + 65536])"),
    },
    "VLA heap scan": {
        "torchfits": ("import torchfits, torchfits.table",
                      "for b in torchfits.scan(P).to_batches(): pass"),
        "torchfits 1.2.3": ("import torchfits, torchfits.table",
                            "for b in torchfits.table.scan(P, hdu=1): pass"),
        "astropy": ("from astropy.io import fits",
                    "d = fits.open(P)[1].data\n"
                    "    for a in range(0, len(d), 65536): b = [c.copy() for c in d['V'][a:a + 65536]]"),
        "fitsio": ("import fitsio",
                   "f = fitsio.FITS(P)\n    n = f[1].get_nrows()\n"
                   "    for a in range(0, n, 65536): b = f[1][a:a + 65536]"),
    },
}
FILES = {"full catalog read": "catalog_2m", "streaming scan": "catalog_2m", "where scan": "catalog_2m",
         "image full read": "image_f32", "1,000 cutouts": "image_f32", "dataset epoch": "catalog_2m",
         "row-index scan": "catalog_2m", "VLA heap scan": "vla_heap"}
VLA_ROWS, VLA_CELL = 1 << 19, 64  # 524,288 rows of 64 float32 each: 128 MiB of heap


def child(library: str, imports: str, body: str, path: Path, *, release: bool = True,
          timeout: float = 1800) -> dict[str, Any]:
    """Run one workload in a fresh interpreter → {"base", "peak", "wall"} (MiB, s)."""
    python = str(INCUMBENT) if library == "torchfits 1.2.3" else sys.executable
    # The dev children import the repository's torchfits (cwd on sys.path); 1.2.3 its venv's.
    cwd = BENCH_DIR if library == "torchfits 1.2.3" else REPO_ROOT
    head = imports
    if library.startswith("torchfits"):
        head = TF_IMPORTS + head + ("\n" + RELEASE_OFF if not release else "")
    code = (PRELUDE + head + f"\nP = {str(path)!r}\nN = {CUTOUTS}\n"
            + "def _run():\n    " + body + "\n" + REPORT)
    proc = subprocess.run([python, "-c", code], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{library}: workload failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bare_interpreter() -> float:
    """Peak RSS of an interpreter that imports nothing (MiB)."""
    code = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=clean_env(),
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def mib(value: float) -> str:
    return f"{value:,.0f}"


def vla_table() -> Path:
    """A one-column ``1PE`` table of `VLA_ROWS` rows, `VLA_CELL` floats a row, the cells in row
    order in the heap (written once under ``benchmarks/data``, removed at the end unless --keep)."""
    import numpy as np
    from astropy.io import fits

    out = generate.DATA_DIR / "vla_heap_128mb.fits"
    heap = VLA_ROWS * VLA_CELL * 4
    if out.exists() and out.stat().st_size % 2880 == 0 and out.stat().st_size > heap:
        return out
    log(f"writing {out}")
    hdu = fits.BinTableHDU.from_columns([fits.Column("V", "PE()", array=np.array(
        [np.zeros(VLA_CELL, np.float32)], dtype=object))])
    hdu.header["NAXIS2"], hdu.header["PCOUNT"] = VLA_ROWS, heap
    hdu.header["TFORM1"] = f"1PE({VLA_CELL})"
    head = fits.PrimaryHDU().header.tostring().encode() + hdu.header.tostring().encode()
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(head)
        desc = np.empty((VLA_ROWS, 2), ">i4")
        desc[:, 0], desc[:, 1] = VLA_CELL, np.arange(VLA_ROWS) * VLA_CELL * 4
        fh.write(desc.tobytes())
        rng = np.random.default_rng(0)
        for _ in range(VLA_ROWS * VLA_CELL // (1 << 22)):
            fh.write(rng.standard_normal(1 << 22).astype(">f4").tobytes())
        fh.write(b"\0" * ((-(VLA_ROWS * 8 + heap)) % 2880))
    os.replace(tmp, out)
    return out


def table_rows(libraries: list[str]) -> list[list[str]]:
    rows = []
    for workload, by_library in WORKLOADS.items():
        name = FILES[workload]
        path = vla_table() if name == "vla_heap" else generate.ensure(name, verbose=False)
        size = path.stat().st_size / 2**20
        cases: list[tuple[str, str, str, bool]] = [
            ("torchfits", *by_library["torchfits"], True),
            ("torchfits, release off", *by_library["torchfits"], False)]
        cases += [(lib, *by_library[lib], True) for lib in libraries if lib in by_library]
        for label, imports, body, release in cases:
            library = "torchfits" if label.startswith("torchfits,") else label
            log(f"{workload}: {label}")
            got = child(library, imports, body, path, release=release)
            rows.append([workload, label, mib(got["peak"] - got["base"]), mib(got["base"]),
                         f"{size:,.0f}", f"{got['wall']:.2f}"])
    return rows


# -- the big rows --------------------------------------------------------------------------------

def big_catalog(copies: int, name: str) -> Path:
    """catalog_2m's rows repeated ``copies`` times in one table HDU (written once)."""
    src = generate.ensure("catalog_2m", verbose=False)
    out = generate.DATA_DIR / name
    with open(src, "rb") as fh:
        raw = fh.read()
    blocks = 2880
    # The table header: the second HDU's cards (the primary is one header block).
    start = raw.index(b"XTENSION= 'BINTABLE'")
    end = raw.index(b"END" + b" " * 77, start)
    header_end = (end // blocks + 1) * blocks
    cards = [raw[i:i + 80] for i in range(start, end, 80)]
    naxis1 = next(int(c[10:30]) for c in cards if c.startswith(b"NAXIS1  ="))
    naxis2 = next(int(c[10:30]) for c in cards if c.startswith(b"NAXIS2  ="))
    rows = raw[header_end:header_end + naxis1 * naxis2]
    nbytes = naxis1 * naxis2 * copies
    want = start + (header_end - start) + nbytes + (-nbytes) % blocks
    if out.exists() and out.stat().st_size == want:
        return out
    log(f"writing {out} ({want / 1e9:.1f} GB)")
    new_cards = [b"NAXIS2  = " + f"{naxis2 * copies:>20d}".encode() + b" " * 50
                 if c.startswith(b"NAXIS2  =") else c for c in cards]
    header = b"".join(new_cards) + b"END" + b" " * 77
    header += b" " * ((-len(header)) % blocks)
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(raw[:start])
        fh.write(header)
        for _ in range(copies):
            fh.write(rows)
        fh.write(b"\0" * ((-nbytes) % blocks))
    os.replace(tmp, out)
    return out


DASK_JOB = """
import json, logging, resource, sys, time
from distributed import Client, LocalCluster
import torchfits.dask

def off():
    from torchfits.fits.sources import residency
    residency.done = lambda *args: None

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

if __name__ == "__main__":
    logging.getLogger("distributed").setLevel(logging.WARNING)
    with LocalCluster(n_workers=1, threads_per_worker=2, memory_limit="1GB", processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        if not RELEASE:
            client.run(off)
        t = time.perf_counter()
        ddf = torchfits.dask.read_table(P, columns=["mag_r", "flags"])
        future = client.compute(ddf[(ddf.mag_r < 20) & (ddf.flags == 0)].shape[0])
        try:
            n = int(future.result(timeout=STALL_S))
        except TimeoutError:
            n = -1  # stalled: a paused worker runs nothing until its memory drops
        wall = time.perf_counter() - t
        peaks = list(client.run(peak).values())
        logs = [m for w in client.get_worker_logs().values() for _, m in w]
        events = [str(e) for topic in ("worker-restart", "restart") for e in client.get_events(topic)]
        nanny = client.run_on_scheduler(lambda dask_scheduler: [
            str(v) for v in dask_scheduler.get_events("all")][-200:])
    text = "\\n".join(logs + events)
    flags = {k: text.count(k) for k in ("paused", "restart", "Worker is at", "memory")}
    print(json.dumps({"rows": n, "wall": wall, "worker_peak": max(peaks), "flags": flags,
                      "nworkers_seen": len(peaks), "log_tail": logs[-5:]}))
"""


def dask_row(path: Path, release: bool) -> dict[str, Any]:
    code = f"P = {str(path)!r}\nRELEASE = {release}\nSTALL_S = {STALL_S}\n" + DASK_JOB
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    got["stderr_flags"] = {k: proc.stderr.count(k) for k in ("paused", "restart", "Worker is at")}
    return got


def big_rows(keep: bool) -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    two = big_catalog(18, "catalog_big_2gb.fits")   # 36,000,000 rows, 2.1 GB
    body = WORKLOADS["streaming scan"]["torchfits"]
    size = two.stat().st_size / 2**20
    for label, release in (("torchfits", True), ("torchfits, release off", False)):
        log(f"2 GB streaming scan: {label}")
        got = child("torchfits", *body, two, release=release)
        rows.append(["2 GB streaming scan", label, mib(got["peak"] - got["base"]), mib(got["base"]),
                     f"{size:,.0f}", f"{got['wall']:.2f}"])
    if not keep:
        two.unlink()
    four = big_catalog(36, "catalog_big_4gb.fits")  # 72,000,000 rows, 4.2 GB
    size = four.stat().st_size / 2**20
    for label, release in (("torchfits", True), ("torchfits, release off", False)):
        log(f"Dask 4 GB filtered count: {label}")
        got = dask_row(four, release)
        if "error" in got:
            notes.append(f"Dask, {label}: failed: {got['error'][-400:]}")
            rows.append(["Dask 1 GB worker, 4 GB filtered count", label, "failed", "—", f"{size:,.0f}", "—"])
            continue
        done = f"{got['rows']:,} rows" if got["rows"] >= 0 else f"stalled (no result after {STALL_S} s)"
        notes.append(f"Dask, {label}: {done}; worker log/stderr mentions: "
                     f"{got['flags']} / {got['stderr_flags']}")
        rows.append(["Dask 1 GB worker, 4 GB filtered count", label,
                     f"{got['worker_peak']:,.0f} (worker peak)", "—", f"{size:,.0f}", f"{got['wall']:.2f}"])
    if not keep:
        four.unlink()
    return rows, notes


# -- the warm-speed A/B -------------------------------------------------------------------------

AB = """
import time
import torchfits
def scan():
    for b in torchfits.scan(P).to_batches(): pass
def where():
    for b in torchfits.scan(P, where={where!r}).to_batches(): pass
def _run():
    out = {{}}
    base = _rss()
    for name, fn in (("scan", scan), ("where", where)):
        t = time.perf_counter()
        fn()
        first = time.perf_counter() - t
        walls, cpus = [], []
        for _ in range(5):
            t, c = time.perf_counter(), time.process_time()
            fn()
            cpus.append(time.process_time() - c)
            walls.append(time.perf_counter() - t)
        out[name] = (first, sorted(walls)[2], sorted(cpus)[2])
        if name == "scan":  # the where-scan's first call imports more (query planning)
            out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    print(json.dumps(out))
"""


def speed_ab(rounds: int) -> list[list[str]]:
    """Interleaved fresh processes per release variant → rows of medians over rounds."""
    path = generate.ensure("catalog_2m", verbose=False)
    got: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant, patch in VARIANTS.items():
            log(f"speed A/B round {r + 1}: {variant}")
            code = (PRELUDE + TF_IMPORTS + patch + f"P = {str(path)!r}\n"
                    + textwrap.dedent(AB.format(where=WHERE)) + "\n_run()\n")
            proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=clean_env(),
                                  capture_output=True, text=True, check=True)
            got[variant].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = []
    for variant, runs in got.items():
        cells = [f"{statistics.median(run[name][k] for run in runs) * 1e3:.0f}"
                 for name in ("scan", "where") for k in (0, 1, 2)]
        rows.append([variant, mib(statistics.median(run["peak"] for run in runs)), *cells])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big", action="store_true", help="add the 2 GB streaming and Dask 4 GB rows")
    ap.add_argument("--keep", action="store_true", help="keep the big files under benchmarks/data")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the warm-speed A/B (0: none)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if not Path("/proc/self/status").exists():
        raise SystemExit("run_memory.py reads /proc/self/status (Linux)")
    libraries = ["torchfits 1.2.3"] if INCUMBENT.exists() else []
    for name in ("astropy", "fitsio"):
        try:
            __import__(name)
            libraries.append(name)
        except ImportError:
            log(f"{name} not installed: its rows are left out")
    info = machine_info()
    load = os.getloadavg()
    bare = bare_interpreter()
    rows = table_rows(libraries)
    if not args.keep:
        vla_table().unlink()
    notes: list[str] = []
    if args.big:
        big, notes = big_rows(args.keep)
        rows += big
    ab = speed_ab(args.rounds) if args.rounds else []
    print(f"# Memory: peak RSS per workload, whole process ({time.strftime('%Y-%m-%d %H:%M')})\n")
    print(f"Machine: {info.get('cpu', '?')}, {info.get('cores', '?')} cores, {info.get('memory', '?')}; "
          f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}. "
          f"A bare interpreter peaks at {bare:.0f} MiB.\n")
    print(markdown_table(["workload", "library", "peak above baseline (MiB)", "baseline (MiB)",
                          "file (MiB)", "wall (s)"], rows))
    for note in notes:
        print(f"\n- {note}")
    if ab:
        print("\nRelease variants on catalog_2m (warm page cache), medians over interleaved fresh "
              "processes: the first scan of the process, then the median of 5 repeats (wall, CPU):\n")
        print(markdown_table(["variant", "scan peak above baseline (MiB)", "scan first (ms)", "scan repeat",
                              "scan repeat CPU", "where first (ms)", "where repeat", "where repeat CPU"],
                             ab))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "notes": notes, "speed_ab": ab, "load": load}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Per-call overhead A/B: the same small calls timed under two source trees.

Each tree is measured in its own subprocess with ``PYTHONPATH`` set to it (so each imports its own
``torchfits``), rounds alternate base and current, and each call's figure is the best of
``--repeat`` timing loops after a warm-up. Small inputs keep the decode itself negligible, so the
numbers are the Python layers a call passes through (argument checks, file cache, HDU lookup,
Arrow assembly)::

    python benchmarks/run_overhead.py --base ../base              # base vs this tree
    python benchmarks/run_overhead.py --base A --current B --rounds 7

The table gives µs per call for each tree, the ratio current/base, and the noise band: the
spread (max/min) of each tree's per-round figures. The default clock is the process's CPU
time (``--clock cpu``), which a core busy with other work does not inflate the way it inflates
wall time; ``--clock wall`` times with ``perf_counter``.
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

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent

# name -> (setup, statement): both run in the worker with ``tf`` (torchfits) and ``d`` (the data
# directory) bound; the statement is what is timed.
CALLS = {
    "read_numpy 32x32 f32": ("p = str(d / 'img.fits')", "tf.read_numpy(p)"),
    "read_header": ("p = str(d / 'img.fits')", "tf.read_header(p, 0)"),
    "open_image()[8:16, 8:16]": ("img = tf.open_image(str(d / 'img.fits'))", "img[8:16, 8:16]"),
    "scan(...).to_arrow()": ("p = str(d / 'tab.fits')", "tf.scan(p, 1).to_arrow()"),
    "scan(where=...).to_arrow()": ("p = str(d / 'tab.fits')",
                                   "tf.scan(p, 1, where='a > 50').to_arrow()"),
    "1.x table.read": ("import torchfits.table as table; p = str(d / 'tab.fits')",
                       "table.read(p, 1)"),
}


def write_data(directory: Path) -> None:
    """A 32x32 float32 image and a 100-row, 3-column table, written with numpy and plain bytes
    so that neither tree's writer is involved."""
    import numpy as np

    def cards(items):
        text = "".join(f"{k:<8}= {v:>20}".ljust(80) for k, v in items) + "END".ljust(80)
        return text.ljust(-(-len(text) // 2880) * 2880).encode("ascii")

    def pad(data: bytes) -> bytes:
        return data + b"\0" * (-len(data) % 2880)

    img = np.arange(32 * 32, dtype=">f4").reshape(32, 32)
    (directory / "img.fits").write_bytes(
        cards([("SIMPLE", "T"), ("BITPIX", -32), ("NAXIS", 2), ("NAXIS1", 32), ("NAXIS2", 32)])
        + pad(img.tobytes()))
    rows = np.zeros(100, dtype=[("a", ">i4"), ("b", ">f8"), ("c", ">f4")])
    rows["a"] = np.arange(100)
    rows["b"] = np.linspace(0, 1, 100)
    rows["c"] = np.arange(100) * 0.5
    table = [("XTENSION", "'BINTABLE'"), ("BITPIX", 8), ("NAXIS", 2), ("NAXIS1", 16),
             ("NAXIS2", 100), ("PCOUNT", 0), ("GCOUNT", 1), ("TFIELDS", 3),
             ("TTYPE1", "'a'"), ("TFORM1", "'J'"), ("TTYPE2", "'b'"), ("TFORM2", "'D'"),
             ("TTYPE3", "'c'"), ("TFORM3", "'E'")]
    (directory / "tab.fits").write_bytes(
        cards([("SIMPLE", "T"), ("BITPIX", 8), ("NAXIS", 0), ("EXTEND", "T")])
        + cards(table) + pad(rows.tobytes()))


def worker(data: Path, repeat: int, target_s: float, clock: str) -> dict[str, float]:
    """µs per call of each entry of CALLS, in this process (run with PYTHONPATH = one tree)."""
    import timeit

    import torchfits as tf

    out = {}
    for name, (setup, statement) in CALLS.items():
        env = {"tf": tf, "d": data}
        exec(setup, env)
        timer = timeit.Timer(statement, globals=env,
                             timer=time.process_time if clock == "cpu" else time.perf_counter)
        number, _ = timer.autorange()  # warm-up, and a loop long enough to time (>= 0.2 s)
        number = max(1, int(number * target_s / 0.2))
        out[name] = min(timer.repeat(repeat, number)) / number * 1e6
    return out


def measure(tree: Path, data: Path, repeat: int, target_s: float, clock: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(data),
         "--repeat", str(repeat), "--target", str(target_s), "--clock", clock],
        env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"worker under {tree} failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.splitlines()[-1])
    if Path(result.pop("torchfits")).resolve().parent.parent != tree.resolve():
        sys.exit(f"the worker under {tree} imported another torchfits")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path,
                        help="the reference source tree (a built checkout of the revision to compare with)")
    parser.add_argument("--current", type=Path, default=REPO_ROOT,
                        help="the tree compared with it (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=5, help="worker runs per tree (default 5)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="timing loops per call in each worker (default 5)")
    parser.add_argument("--target", type=float, default=0.05,
                        help="seconds per timing loop (default 0.05)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: the process's CPU time, which waiting for a busy core does not "
                             "inflate (default); wall: perf_counter")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if not args.worker and args.base is None:
        parser.error("--base is required (a built checkout of the revision to compare with)")
    if args.worker:
        import torchfits

        result = worker(args.worker, args.repeat, args.target, args.clock)
        print(json.dumps({**result, "torchfits": torchfits.__file__}))
        return

    trees = {"base": args.base, "current": args.current}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_data(data)
        for r in range(args.rounds):  # interleaved, the order flipped every round
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for label in order:
                runs[label].append(measure(trees[label], data, args.repeat, args.target,
                                           args.clock))
    print(f"base: {args.base}\ncurrent: {args.current}\n"
          f"{args.rounds} rounds x {args.repeat} loops, {args.clock} clock, "
          f"{time.perf_counter() - start:.0f} s\n")
    print("| call | base µs | current µs | current/base | noise base | noise current |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in CALLS:
        per = {label: [run[name] for run in runs[label]] for label in trees}
        best = {label: min(v) for label, v in per.items()}
        noise = {label: max(v) / min(v) for label, v in per.items()}
        print(f"| {name} | {best['base']:.1f} | {best['current']:.1f} | "
              f"{best['current'] / best['base']:.3f} | ±{(noise['base'] - 1) * 100:.1f}% | "
              f"±{(noise['current'] - 1) * 100:.1f}% |")


if __name__ == "__main__":
    main()

"""1,000 open-once cutouts, torchfits (new) and 1.2.3 each in a process of its own, under the
same cache states: what the cutouts target of `run_images.py` measures and what it does not.

Usage: ``python benchmarks/run_cutout_regimes.py [--rounds 2] [--repeat 15]``

`run_images.py` times our reader interleaved with the other libraries' cases in one process,
each round after a full `gc.collect()`, and 1.2.3 in a worker where only its own case runs. A
full collection walks every object the process holds (~170,000 once torch is imported) and
leaves the caches cold for the cutouts that follow, so the two sides do not start from the same
state. Here both libraries run the same loop (`open_subset_reader`, the same 1,000 random 64×64
boxes of the 4096² float32 image, results kept in a list, medians of ``--repeat``) in four
regimes: back to back ("none"); after `gc.collect()` ("gc", the runner's); after `gc.freeze()`
then `gc.collect()` (a collection that walks only new objects, "freeze+gc"); after writing
400 MB (the image's lines out of every cache, "flush"). Processes alternate new, 1.2.3 for
``--rounds`` rounds.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCUMBENT = HERE / ".venv-tf123" / "bin" / "python"
REGIMES = ("none", "gc", "freeze+gc", "flush")


def worker(job: dict) -> dict:
    """Run in the library's interpreter: median ms per 1,000 cutouts in each regime."""
    import gc
    import time

    import numpy as np

    import torchfits

    reader = torchfits.open_subset_reader(job["path"], 0)
    boxes = [tuple(b) for b in job["boxes"]]
    flush_buffer = np.ones(400_000_000 // 8)

    def cut() -> list:
        return [reader(x1, y1, x2, y2) for x1, y1, x2, y2 in boxes]

    out = {"version": torchfits.__version__, "objects": len(gc.get_objects())}
    for regime in REGIMES:
        if regime == "freeze+gc":
            gc.freeze()
        cut()
        times = []
        for _ in range(job["repeat"]):
            if regime in ("gc", "freeze+gc"):
                gc.collect()
            elif regime == "flush":
                flush_buffer += 1.0
            t0 = time.perf_counter()
            kept = cut()
            times.append(time.perf_counter() - t0)
            del kept
        if regime == "freeze+gc":
            gc.unfreeze()
        out[regime] = 1e3 * float(np.median(times))
    return out


def run(python: str, job: dict, isolated: bool) -> dict:
    """The worker's reply; ``isolated`` (1.2.3's venv): ``-I``, so no PYTHONPATH can put the
    new torchfits on its path."""
    argv = [python] + (["-I"] if isolated else []) + [str(Path(__file__)), "--worker"]
    proc = subprocess.run(argv, input=json.dumps(job), capture_output=True, text=True, timeout=600, cwd="/")
    if proc.returncode:
        raise RuntimeError(proc.stderr[-800:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(sys.stdin.read()))))
        return
    sys.path.insert(0, str(HERE))
    import generate
    from run_images import cutout_boxes

    job = {"path": str(generate.ensure("image_f32")), "boxes": cutout_boxes(1000), "repeat": args.repeat}
    sides = [("torchfits (new)", sys.executable)]
    if INCUMBENT.exists():
        sides.append(("torchfits 1.2.3", str(INCUMBENT)))
    rows: dict[str, list[dict]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, python in sides:
            reply = run(python, job, isolated=python != sys.executable)
            if name.endswith("1.2.3") and reply["version"] != "1.2.3":
                raise RuntimeError(f"the 1.2.3 venv imported torchfits {reply['version']}")
            rows[name].append(reply)
    print(f"1,000 cutouts of 64×64 ({args.repeat} repetitions a regime, {args.rounds} processes a "
          "library); median ms per process")
    print("| library | objects | " + " | ".join(REGIMES) + " |")
    print("|:--|--:|" + "--:|" * len(REGIMES))
    for name, results in rows.items():
        cells = [" / ".join(f"{r[g]:.2f}" for r in results) for g in REGIMES]
        print(f"| {name} | {results[0]['objects']:,} | " + " | ".join(cells) + " |")
    if len(rows) == 2:
        new, old = rows["torchfits (new)"], rows["torchfits 1.2.3"]
        ratios = [" / ".join(f"{o[g] / n[g]:.2f}×" for n, o in zip(new, old)) for g in REGIMES]
        print("| 1.2.3 time / new time | | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()

"""The fuzzing campaign, run by hand: ``python -m tests.fuzz --budget-s 300``.

Uses atheris (coverage-guided, libFuzzer) when it is installed, with the structure-aware mutators
of ``tests/fuzz/mutators.py`` as its custom mutator (``tests/fuzz/atheris_target.py``);
otherwise (or with ``--engine mutators``) those mutators at random in the supervised worker.
Findings (crash, hang, memory, bare exception) are deduplicated by kind, operation and exception,
and the smallest file of each is written to ``--out`` for turning into a regression file under
tests/data/.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from .harness import atheris_available, atheris_campaign, build_corpus, campaign, read_corpus_dirs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--budget-s", type=float, default=60.0, help="wall-clock budget in seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", action="append", default=[],
                    help="extra directories of seed .fits files (tests/data is always used)")
    ap.add_argument("--out", default="fuzz-findings", help="directory for the finding files")
    ap.add_argument("--read-timeout", type=float, default=10.0)
    ap.add_argument("--engine", choices=("auto", "atheris", "mutators"), default="auto",
                    help="atheris (coverage-guided, with the structure-aware mutators) or the "
                         "mutators at random; auto picks atheris when it is installed")
    ap.add_argument("--atheris", action="store_true", help="same as --engine atheris")
    ap.add_argument("--sweep", action="store_true",
                    help="mutators engine: first set every structural card of every seed to every "
                         "interesting value, then mutate at random")
    args = ap.parse_args(argv)

    engine = "atheris" if args.atheris else args.engine
    if engine == "auto":
        engine = "atheris" if atheris_available() else "mutators"
    elif engine == "atheris" and not atheris_available():
        print("atheris is not installed (pip install atheris); using the mutators at random",
              file=sys.stderr)
        engine = "mutators"

    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        seeds = build_corpus(os.path.join(tmp, "seeds"))
        seeds += read_corpus_dirs([os.path.join(os.path.dirname(here), "data")] + args.corpus)
        t0 = time.monotonic()
        if engine == "atheris":
            stats = atheris_campaign(seeds, budget_s=args.budget_s, seed=args.seed,
                                     read_timeout=args.read_timeout)
        else:
            stats = campaign(seeds, budget_s=args.budget_s, seed=args.seed,
                             read_timeout=args.read_timeout, sweep=args.sweep)
        elapsed = time.monotonic() - t0
    unique: dict[str, object] = {}
    for f in stats.findings:
        best = unique.get(f.signature())
        if best is None or len(f.data) < len(best.data):  # type: ignore[attr-defined]
            unique[f.signature()] = f
    os.makedirs(args.out, exist_ok=True)
    report = []
    for n, (sig, f) in enumerate(sorted(unique.items())):
        name = os.path.join(args.out, f"finding{n:03d}.fits")
        with open(name, "wb") as fh:
            fh.write(f.data)  # type: ignore[attr-defined]
        report.append({"signature": sig, "file": name, "op": f.op, "detail": f.detail,  # type: ignore[attr-defined]
                       "mutations": f.notes})  # type: ignore[attr-defined]
    summary = {"engine": engine, "seconds": round(elapsed, 1), "seed_files": len(seeds), "files": stats.files,
               "reads": stats.reads, "outcomes": stats.outcomes,
               "findings": len(stats.findings), "unique_findings": len(unique)}
    with open(os.path.join(args.out, "report.json"), "w") as fh:
        json.dump({"summary": summary, "findings": report}, fh, indent=1)
    print(json.dumps(summary))
    for r in report:
        print(f"  {r['signature']}: {r['detail'][:160]}  [{'; '.join(r['mutations'])}] -> {r['file']}")
    return 1 if unique else 0


if __name__ == "__main__":
    sys.exit(main())

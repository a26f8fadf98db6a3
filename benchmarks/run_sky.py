"""Sky-native queries against their anchors: cone searches, the sky index, cross-matches, cutouts, HATS.

Each part lives in its own module beside this one (``sky_cone``, ``sky_index``, ``sky_crossmatch``,
``sky_cutouts``, ``sky_hats``), makes its own data in a temporary directory, measures its anchors in
the same run and checks every result equal to the anchor's. This runner prints them as one report.

    python benchmarks/run_sky.py [--repeat 3] [--only cone,index,crossmatch,cutouts,hats] [--append]

``--append`` adds the report to docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

PARTS = {"cone": "sky_cone", "index": "sky_index", "crossmatch": "sky_crossmatch",
         "cutouts": "sky_cutouts", "hats": "sky_hats"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions per case (best of)")
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument("--append", action="store_true", help="append the report to docs/benchmarks.md")
    args = parser.parse_args(argv)
    wanted = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; known: {', '.join(PARTS)}")
    info = _harness.machine_info()
    lines = ["## Sky-native queries\n",
             f"- date: {info['date']}",
             f"- machine: {info['cpu']}, {info['cores']} cores, {info['memory']} RAM, {info['os']}", ""]
    for part in wanted:
        _harness.log(f"[run_sky] {part}")
        module = importlib.import_module(PARTS[part])
        lines.append(module.report(repeat=args.repeat))
        lines.append("")
    _harness.emit("\n".join(lines), args.append)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

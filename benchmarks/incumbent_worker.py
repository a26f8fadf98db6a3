"""Timing worker for torchfits 1.2.3, run with ``benchmarks/.venv-tf123/bin/python``.

Reads one JSON job (or ``{"jobs": [...]}``) from stdin, runs the timing loops here (so
interpreter start-up and ``import torch`` are not measured) and prints one JSON line:
samples plus a digest of the result, which the runner checks against astropy before
trusting the timings.

Jobs (all take ``path``, ``hdu`` or ``hdus``, ``repeat``):

- ``{"kind": "image_read", ...}``: ``torchfits.read(path, hdu=hdu)``.
- ``{"kind": "cutouts", "boxes": [[x1, y1, x2, y2], ...], ...}``: one
  ``open_subset_reader`` per job, every box read per repetition.
- ``{"kind": "headers", "hdus": [...], "cold": bool, ...}``: ``read_header`` of each
  HDU per repetition; ``cold`` clears the library's caches before each repetition.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

# The worker sits next to _harness; its directory is sys.path[0] when run as a script.
from _harness import Case, DigestStream, array_digest, measure_group


def _header_items(header: Any) -> list[list[Any]]:
    """Keyword/value pairs of a header, in order, without commentary cards."""
    return [[str(k), v] for k, v in header.items() if k not in ("", "COMMENT", "HISTORY")]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job; return samples, a correctness digest and the library version."""
    import torchfits

    kind = job["kind"]
    repeat = int(job["repeat"])
    path = job["path"]
    setup: Callable[[], Any] | None = None

    if kind == "image_read":
        hdu = int(job["hdu"])

        def fn() -> Any:
            return torchfits.read(path, hdu=hdu)

        if job.get("clear_cache", False):
            # Off by default: 1.2.3 keeps no decoded image between calls (checked), and
            # clearing would also drop the metadata its steady state relies on.
            setup = torchfits.clear_file_cache
        check = array_digest(fn())

    elif kind == "cutouts":
        reader = torchfits.open_subset_reader(path, int(job["hdu"]))
        boxes = [tuple(int(v) for v in box) for box in job["boxes"]]

        def fn() -> Any:
            return [reader(x1, y1, x2, y2) for x1, y1, x2, y2 in boxes]

        stream = DigestStream()
        for cutout in fn():
            stream.add(cutout)
        check = stream.result()

    elif kind == "headers":
        hdus = [int(h) for h in job["hdus"]]

        def fn() -> Any:
            return [torchfits.read_header(path, h) for h in hdus]

        if job.get("cold", False):
            setup = torchfits.clear_file_cache
        check = {"items": _header_items(fn()[-1])}

    else:
        raise ValueError(f"unknown job kind {kind!r}")

    timing = measure_group({kind: Case(fn, setup)}, repeat, warmup=int(job.get("warmup", 1)))[kind]
    return {"version": torchfits.__version__, "timing": timing.to_json(), "check": check}


def main() -> int:
    """Read the job(s) from stdin, print the JSON reply as the last stdout line."""
    job = json.loads(sys.stdin.read())
    reply: Any = [run_job(j) for j in job["jobs"]] if "jobs" in job else run_job(job)
    print(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())

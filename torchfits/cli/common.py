"""Shared pieces of the command line: exit codes, output formats, path and HDU arguments."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

EXIT_OK, EXIT_DIFF, EXIT_USAGE, EXIT_IO, EXIT_CHECKSUM, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5

__all__ = ["EXIT_OK", "EXIT_DIFF", "EXIT_USAGE", "EXIT_IO", "EXIT_CHECKSUM", "EXIT_INTERNAL",
           "UsageError", "emit", "hdus", "input_paths", "selected", "common_options"]


class UsageError(Exception):
    """Bad arguments: exit code 2."""


def emit(records: list[dict], fmt: str, out: Any = None) -> None:
    """Print records as ``key='value'`` lines (sorted keys), a JSON array, or JSON lines."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps(records, indent=2, default=str) + "\n")
    elif fmt == "jsonl":
        for r in records:
            out.write(json.dumps(r, default=str) + "\n")
    else:
        for r in records:
            out.write(" ".join(f"{k}={str(r[k])!r}" for k in sorted(r)) + "\n")


def hdus(arg: Optional[str]) -> Optional[list[int]]:
    """``-e 0,2`` → [0, 2]; None when not given."""
    if arg is None:
        return None
    try:
        values = [int(x) for x in arg.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"-e/--hdu takes a comma-separated list of integers, not {arg!r}") from None
    if any(v < 0 for v in values):
        raise UsageError("-e/--hdu values must be non-negative")
    return values


def input_paths(args: argparse.Namespace) -> list[str]:
    """Positional paths, plus paths from stdin (``--stdin``, or implied when no path is given
    and stdin is not a terminal)."""
    paths = list(getattr(args, "paths", []) or [])
    stdin = sys.stdin
    if getattr(args, "stdin", False) or (not paths and stdin is not None and not stdin.isatty()):
        paths += [line.strip() for line in stdin if line.strip()]
    if not paths:
        raise UsageError("no input files")
    return paths


def selected(n: int, wanted: Optional[list[int]], path: str) -> list[int]:
    """The HDU indices to visit; an index past the end is a usage error."""
    if wanted is None:
        return list(range(n))
    for h in wanted:
        if h >= n:
            raise UsageError(f"{path}: HDU {h} out of range (file has {n} HDUs)")
    return wanted


def common_options(p: argparse.ArgumentParser, *, stdin: bool = True) -> None:
    """paths, --stdin, -e/--hdu and the output format options."""
    p.add_argument("paths", nargs="*", help="FITS files")
    if stdin:
        p.add_argument("--stdin", action="store_true", help="read paths from stdin, one per line")
    p.add_argument("-e", "--hdu", help="comma-separated HDU indices")
    p.add_argument("-f", "--format", choices=("text", "json", "jsonl"), default="text")
    p.add_argument("--json", dest="format", action="store_const", const="json")
    p.add_argument("--jsonl", dest="format", action="store_const", const="jsonl")

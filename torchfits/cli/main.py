"""``torchfits`` command line: inspect files (info, header), and a demo of the whole engine.

Exit codes follow torchfits 1.x: 0 ok, 2 usage, 3 I/O, 4 checksum failure, 5 internal, 130 ^C.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import traceback
from typing import Any, Callable, Iterable, Optional, Sequence

from ..errors import FitsError

EXIT_OK, EXIT_DIFF, EXIT_USAGE, EXIT_IO, EXIT_CHECKSUM, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5


class UsageError(Exception):
    """Bad arguments: exit code 2."""


# -- output ---------------------------------------------------------------------------------------
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


def _hdus(arg: Optional[str]) -> Optional[list[int]]:
    if arg is None:
        return None
    try:
        values = [int(x) for x in arg.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"-e/--hdu takes a comma-separated list of integers, not {arg!r}") from None
    if any(v < 0 for v in values):
        raise UsageError("-e/--hdu values must be non-negative")
    return values


def _paths(args: argparse.Namespace) -> list[str]:
    paths = list(getattr(args, "paths", []) or [])
    if getattr(args, "stdin", False) or (not paths and not sys.stdin.isatty()):
        paths += [line.strip() for line in sys.stdin if line.strip()]
    if not paths:
        raise UsageError("no input files")
    return paths


def _selected(n: int, wanted: Optional[list[int]], path: str) -> list[int]:
    if wanted is None:
        return list(range(n))
    for h in wanted:
        if h >= n:
            raise UsageError(f"{path}: HDU {h} out of range (file has {n} HDUs)")
    return wanted


# -- commands -------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from ..meta import info

    records = []
    for path in _paths(args):
        summaries = info(path)
        for i in _selected(len(summaries), _hdus(args.hdu), path):
            s = summaries[i]
            rec: dict[str, Any] = {"file": path, "hdu": s.index, "name": s.name}
            if s.kind in ("bintable", "table"):
                rec.update(type="TABLE", nrows=s.nrows, ncols=s.ncols)
            elif s.kind == "primary" and not s.shape:
                rec.update(type="UNKNOWN")
            else:
                rec.update(type="IMAGE", shape=str(tuple(s.shape)), dtype=_storage_dtype(s.bitpix))
                if s.codec:
                    rec["codec"] = s.codec
            records.append(rec)
    emit(records, args.format)
    return EXIT_OK


def _storage_dtype(bitpix: Optional[int]) -> str:
    return {8: "uint8", 16: "int16", 32: "int32", 64: "int64", -32: "float32",
            -64: "float64"}.get(bitpix or 0, "unknown")


def cmd_header(args: argparse.Namespace) -> int:
    from .._hdu_index import get_index
    from ..header import format_card

    if args.keyword_table and not args.keyword:
        raise UsageError("--keyword-table requires -k/--keyword")
    patterns = [k.upper() for k in args.keyword or []]
    records: list[dict] = []
    for path in _paths(args):
        index = get_index(path)
        for i in _selected(len(index), _hdus(args.hdu), path):
            entry = index.entries[i]
            raw = index.header(entry, raw_values=True)
            cards = [c for c in raw.cards if not patterns or any(fnmatch.fnmatchcase(c.key.upper(), p) for p in patterns)]
            name = entry.display_name
            if args.keyword_table:
                row: dict[str, Any] = {"file": path, "hdu": i, "name": name}
                for p in args.keyword:
                    match = next((c for c in cards if fnmatch.fnmatchcase(c.key.upper(), p.upper())), None)
                    row[p] = None if match is None else match.value
                records.append(row)
            elif args.format in ("json", "jsonl"):
                records += [{"file": path, "hdu": i, "name": name, "keyword": c.key,
                             "value": c.value, "comment": c.comment} for c in cards]
            else:
                typed = index.header(entry)
                sys.stdout.write(f"# HDU {i} ({name}) in {path}:\n")
                for c in typed.cards:
                    if patterns and not any(fnmatch.fnmatchcase(c.key.upper(), p) for p in patterns):
                        continue
                    for line in format_card(c.key, c.value, c.comment):
                        sys.stdout.write(line.rstrip() + "\n")
    if args.keyword_table and args.format == "text":
        cols = ["file", "hdu", "name"] + list(args.keyword)
        widths = [max(len(str(c)), *(len(str(r[c])) for r in records)) if records else len(c) for c in cols]
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip() + "\n")
        for r in records:
            sys.stdout.write("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)).rstrip() + "\n")
    elif records:
        emit(records, args.format)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(args.dir, keep=args.keep)
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser, *, stdin: bool = True) -> None:
    p.add_argument("paths", nargs="*", help="FITS files")
    if stdin:
        p.add_argument("--stdin", action="store_true", help="read paths from stdin, one per line")
    p.add_argument("-e", "--hdu", help="comma-separated HDU indices")
    p.add_argument("-f", "--format", choices=("text", "json", "jsonl"), default="text")
    p.add_argument("--json", dest="format", action="store_const", const="json")
    p.add_argument("--jsonl", dest="format", action="store_const", const="jsonl")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchfits", description="Fast FITS access: inspect, query, convert.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("info", help="one line per HDU: type, shape/rows, dtype")
    _common(p)
    COMMANDS["info"] = cmd_info

    p = sub.add_parser("header", help="print header cards")
    _common(p)
    p.add_argument("-k", "--keyword", action="append", help="keyword to show (wildcards *, ?); repeatable")
    p.add_argument("--keyword-table", action="store_true", help="one row per HDU, one column per -k")
    COMMANDS["header"] = cmd_header

    p = sub.add_parser("demo", help="write a sample image and catalog, then read them every way")
    p.add_argument("--dir", help="where to write the sample files (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the sample files")
    COMMANDS["demo"] = cmd_demo
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"torchfits {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except (FitsError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        return 130
    except Exception:  # the last resort: report, never a bare crash
        traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

"""``torchfits`` command line: inspect files (info, header), and a demo of the whole engine.

Exit codes follow torchfits 1.x: 0 ok, 2 usage, 3 I/O, 4 checksum failure, 5 internal, 130 ^C.
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
import traceback
from typing import Any, Callable, Optional, Sequence

from ..errors import FitsError

from .common import (EXIT_INTERNAL, EXIT_IO, EXIT_OK, EXIT_USAGE, UsageError, common_options,
                     emit, hdus, input_paths, selected)


# -- commands -------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace) -> int:
    from ..fits.metadata import info

    records = []
    for path in input_paths(args):
        summaries = info(path)
        for i in selected(len(summaries), hdus(args.hdu), path):
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
    from ..fits.hdu_index import get_index
    from ..fits.header import format_card

    if args.keyword_table and not args.keyword:
        raise UsageError("--keyword-table requires -k/--keyword")
    patterns = [k.upper() for k in args.keyword or []]
    records: list[dict] = []
    for path in input_paths(args):
        index = get_index(path)
        for i in selected(len(index), hdus(args.hdu), path):
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
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchfits", description="Fast FITS access: inspect, query, convert.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("info", help="one line per HDU: type, shape/rows, dtype")
    common_options(p)
    COMMANDS["info"] = cmd_info

    p = sub.add_parser("header", help="print header cards")
    common_options(p)
    p.add_argument("-k", "--keyword", action="append", help="keyword to show (wildcards *, ?); repeatable")
    p.add_argument("--keyword-table", action="store_true", help="one row per HDU, one column per -k")
    COMMANDS["header"] = cmd_header

    p = sub.add_parser("demo", help="write a sample image and catalog, then read them every way")
    p.add_argument("--dir", help="where to write the sample files (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the sample files")
    COMMANDS["demo"] = cmd_demo

    from . import compress_commands, edit_commands, index_commands, inspect_commands

    inspect_commands.add_parsers(sub, COMMANDS)
    index_commands.add_parsers(sub, COMMANDS)
    edit_commands.add_parsers(sub, COMMANDS)
    compress_commands.add_parsers(sub, COMMANDS)
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

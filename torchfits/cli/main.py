"""``torchfits`` command line: inspect files (info, header), and a demo of the whole engine.

Exit codes: 0 ok, 1 ``diff`` found differences, 2 bad arguments, 3 a file could not be read or
written, 4 checksum failure, 5 internal error (a bug: traceback printed), 130 interrupted.
The grammar every subcommand shares is in `torchfits.cli.common` (see docs/cli.md).
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import Any, Callable, NoReturn

from ..errors import FitsError
from .common import (
    EXIT_INTERNAL,
    EXIT_IO,
    EXIT_OK,
    EXIT_USAGE,
    Batch,
    Target,
    UsageError,
    common_options,
    emit,
    hdus,
    input_paths,
    select_hdus,
    targets,
)

# -- commands -------------------------------------------------------------------------------------
INFO_COLUMNS = ("file", "hdu", "name", "type", "shape", "dtype", "codec", "groups", "params",
                "nrows", "ncols")


def info_record(shown: str, s: Any) -> dict[str, Any]:
    """One ``info`` record: the HDU's type, image shape and dtype, or table rows and columns;
    a random-groups HDU also has its group and parameter counts."""
    rec: dict[str, Any] = {"file": shown, "hdu": s.index, "name": s.name, "type": s.type}
    if s.nrows is not None:
        rec.update(nrows=s.nrows, ncols=s.ncols)
    elif s.type != "EMPTY":
        rec.update(shape=tuple(s.shape), dtype=s.dtype or _storage_dtype(s.bitpix))
        if s.codec:
            rec["codec"] = s.codec
        if s.type == "GROUPS":  # shape is (GCOUNT, NAXISn, ..., NAXIS2), as read_numpy gives it
            rec.update(groups=getattr(s, "gcount", None), params=getattr(s, "pcount", None))
    return rec


def cmd_info(args: argparse.Namespace) -> int:
    from ..fits.hdu_index import get_index
    from ..fits.metadata import info

    spec = hdus(args.hdu)
    batch = Batch("info")

    def one(t: Target) -> tuple[list[dict[str, Any]], FitsError | None]:
        summaries = info(t.path)
        index = get_index(t.path)
        wanted = select_hdus(index, t, spec)
        # the HDUs whose headers are there are listed; data the file cuts short is an error
        # (the HDUs after it cannot be found), not a silent success
        problem: FitsError | None = None
        for entry in index.entries:
            try:
                index.check_data(entry)
            except FitsError as exc:
                problem = exc
                break
        return [info_record(t.shown, summaries[i]) for i in wanted], problem

    done = batch.run(targets(input_paths(args)), one, name=lambda t: t.shown)
    records = [r for _, (rs, _) in done for r in rs]
    emit(records, args.format, columns=[c for c in INFO_COLUMNS if any(c in r for r in records)])
    for t, (_, problem) in done:
        if problem is not None:
            batch.fail(t.shown, problem)
    return batch.code


def _storage_dtype(bitpix: int | None) -> str:
    return {8: "uint8", 16: "int16", 32: "int32", 64: "int64", -32: "float32",
            -64: "float64"}.get(bitpix or 0, "unknown")


def cmd_header(args: argparse.Namespace) -> int:
    from ..fits.hdu_index import get_index
    from ..fits.header import format_card

    if args.keyword_table and not args.keyword:
        raise UsageError("--keyword-table requires -k/--keyword")
    patterns = [k.upper() for k in args.keyword or []]
    spec = hdus(args.hdu)
    batch = Batch("header")

    def matches(key: str) -> bool:
        return not patterns or any(fnmatch.fnmatchcase(key.upper(), p) for p in patterns)

    def one(t: Target) -> list[tuple[int, str, Any]]:
        index = get_index(t.path)
        found = [(i, index.entries[i].display_name, index.header(index.entries[i]))
                 for i in select_hdus(index, t, spec)]
        # a -k that names no card of any HDU shown is a mistake to report, not an empty answer;
        # in a --keyword-table a file without it is a row of `-` (checked over all files below)
        for p in patterns if not args.keyword_table else ():
            if not any(fnmatch.fnmatchcase(c.key.upper(), p) for _, _, h in found for c in h.cards):
                where = ", ".join(f"{i} ({name})" for i, name, _ in found)
                what = f"matches {p!r}" if any(ch in p for ch in "*?[") else repr(p)
                raise UsageError(f"{t.shown}: no keyword {what} in HDU {where}" if len(found) == 1
                                 else f"{t.shown}: no keyword {what} in any of HDUs {where}")
        return found

    done = batch.run(targets(input_paths(args)), one, name=lambda t: t.shown)
    records: list[dict[str, Any]] = []
    for t, headers in done:
        for i, name, header in headers:
            cards = [c for c in header.cards if matches(c.key)]
            if args.keyword_table:
                row: dict[str, Any] = {"file": t.shown, "hdu": i, "name": name}
                for p in args.keyword:
                    match = next((c for c in cards if fnmatch.fnmatchcase(c.key.upper(), p.upper())), None)
                    row[p] = None if match is None else match.value
                records.append(row)
            elif args.format in ("json", "jsonl"):
                records += [{"file": t.shown, "hdu": i, "name": name, "keyword": c.key,
                             "value": c.value, "comment": c.comment} for c in cards]
            else:
                sys.stdout.write(f"# HDU {i} ({name}) in {t.shown}:\n")
                for c in cards:
                    for line in format_card(c.key, c.value, c.comment):
                        sys.stdout.write(line.rstrip() + "\n")
    if args.keyword_table and records:
        missing = [p for p in args.keyword if all(r[p] is None for r in records)]
        if missing:
            raise UsageError(f"no keyword {', '.join(map(repr, missing))} in any HDU shown of "
                             f"{', '.join(dict.fromkeys(r['file'] for r in records))}")
    if args.keyword_table or args.format != "text":
        emit(records, args.format, columns=(["file", "hdu", "name"] + list(args.keyword))
             if args.keyword_table else None)
    return batch.code


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(args.dir, keep=args.keep)
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (and a pointer to -h) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} -h)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every command, or with ``command`` (the first argument) the built-in
    commands and that command's module only."""
    parser = _Parser(prog="torchfits", description="Fast FITS access: inspect, query, convert.")
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
    p.add_argument("--dir", help="where to write the sample files (default: a temp dir, removed "
                                 "afterwards unless --keep); files in a --dir you name are kept")
    p.add_argument("--keep", action="store_true", help="keep the sample files")
    COMMANDS["demo"] = cmd_demo

    # A command's run registers only its own module: the others import NumPy, the image codecs
    # and the writers, which `torchfits sql` or `info` would otherwise pay at every start.
    if command in ("info", "header", "demo"):
        modules: Sequence[str] = ()
    elif command in _COMMAND_MODULES:
        modules = (_COMMAND_MODULES[command],)
    else:  # help, or a command to refuse with the list of every command
        modules = list(dict.fromkeys(_COMMAND_MODULES.values()))
    for name in modules:
        importlib.import_module(f".{name}", __package__).add_parsers(sub, COMMANDS)
    return parser


# subcommand → the module that registers it (in the order `torchfits -h` lists them)
_COMMAND_MODULES = {
    "stats": "inspect_commands", "table": "inspect_commands", "copy": "inspect_commands",
    "cutout": "inspect_commands", "convert": "inspect_commands", "preview": "inspect_commands",
    "diff": "diff_command",
    "sql": "sql_commands",
    "index": "index_commands", "sort": "index_commands",
    "verify": "edit_commands", "setkey": "edit_commands",
    "compress": "compress_commands", "decompress": "compress_commands",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    try:
        args = _parse(parser, argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    prefix = f"torchfits {args.command}"
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"{prefix}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except (FitsError, OSError) as exc:
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"{prefix}: {message or type(exc).__name__}", file=sys.stderr)
        return EXIT_IO
    except ImportError as exc:  # an optional dependency the command needs
        print(f"{prefix}: {exc}", file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        return 130
    except Exception:  # a bug: report it with its traceback, never a bare crash
        traceback.print_exc()
        return EXIT_INTERNAL


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; a command's positionals may come before, between or after its options
    (``cutout in.fits --box 0,0,9,9 out.fits``), which plain argparse refuses."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if argv and actions and argv[0] in actions[0].choices:
        sub = actions[0].choices[argv[0]]
        nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
        if not nested:  # `index build` has its own subcommands: argparse cannot intermix those
            args = sub.parse_intermixed_args(argv[1:])
            args.command = argv[0]
            return args
    return parser.parse_args(argv)


def _quiet_stdout() -> None:
    """After the reader of our stdout went away, point stdout at devnull so the interpreter's
    final flush does not raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass

if __name__ == "__main__":
    sys.exit(main())

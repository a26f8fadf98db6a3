"""The one grammar every subcommand shares: exit codes, inputs and HDU selection, outputs,
output formats, per-file error handling in batches.

* ``-e/--hdu`` takes HDU indices and EXTNAMEs, comma-separated (``-e SCI``, ``-e SCI,2``);
  a CFITSIO suffix on a path (``file.fits[SCI]``) selects the same way (not both at once).
* ``--overwrite`` is the one flag that lets a command replace an existing output.
* ``-`` as an output means stdout (text, CSV, JSON and Arrow outputs).
* A bad argument is a one-line error on stderr and exit 2; a file that cannot be read is
  reported (``<path>: <message>``) and the other files are still processed; the command then
  exits with the worst code seen (3 for an unreadable file).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any, Callable, TypeVar, Union

from ..errors import FitsError

EXIT_OK, EXIT_DIFF, EXIT_USAGE, EXIT_IO, EXIT_CHECKSUM, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5

__all__ = ["EXIT_OK", "EXIT_DIFF", "EXIT_USAGE", "EXIT_IO", "EXIT_CHECKSUM", "EXIT_INTERNAL",
           "UsageError", "Batch", "Target", "emit", "format_table", "json_value", "hdus",
           "input_paths", "targets", "select_hdus", "selected", "common_options",
           "output_options", "format_options", "progress_options", "check_outputs", "open_output",
           "jobs", "progress_enabled"]

HduKey = Union[int, str]
T = TypeVar("T")
R = TypeVar("R")


class UsageError(Exception):
    """Bad arguments: exit code 2."""


# -- values and output formats --------------------------------------------------------------------
def json_value(value: Any) -> Any:
    """A value JSON can carry as its own type: numbers stay numbers, tuples become arrays,
    NumPy scalars become Python scalars, NaN/inf become null."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (tuple, list)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    item = getattr(value, "item", None)  # NumPy scalars
    if callable(item) and getattr(value, "shape", None) == ():
        return json_value(item())
    tolist = getattr(value, "tolist", None)  # NumPy arrays
    if callable(tolist):
        return json_value(tolist())
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return str(value)


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, float):
        return f"{value:.7g}"
    if isinstance(value, tuple):
        return "x".join(str(v) for v in value) if value else "()"
    if isinstance(value, list):
        return ",".join(_text_value(v) for v in value)
    return str(value)


def format_table(records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Records as an aligned text table; columns in the order given, else in the order they
    first appear; a missing value is ``-``. Numbers are right-aligned."""
    if columns is None:
        columns = list(dict.fromkeys(k for r in records for k in r))
    cells = [[_text_value(r.get(c)) for c in columns] for r in records]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                   for r in records if r.get(c) is not None) for c in columns]
    lines = ["  ".join(c.rjust(w) if num else c.ljust(w)
                       for c, w, num in zip(columns, widths, numeric)).rstrip()]
    for row in cells:
        lines.append("  ".join(v.rjust(w) if num else v.ljust(w)
                               for v, w, num in zip(row, widths, numeric)).rstrip())
    return "\n".join(lines) + "\n"


def emit(records: Sequence[dict[str, Any]], fmt: str, out: IO[str] | None = None,
         columns: Sequence[str] | None = None) -> None:
    """Print records as an aligned table (``text``), a JSON array (``json``) or one JSON object
    per line (``jsonl``); JSON values keep their types."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps([json_value(r) for r in records], indent=2) + "\n")
    elif fmt == "jsonl":
        for r in records:
            out.write(json.dumps(json_value(r)) + "\n")
    elif records:
        out.write(format_table(records, columns))


# -- inputs and HDU selection ---------------------------------------------------------------------
def hdus(arg: str | None) -> list[HduKey] | None:
    """``-e 0,2`` → [0, 2]; ``-e SCI,2`` → ['SCI', 2]; None when not given."""
    if arg is None:
        return None
    values: list[HduKey] = []
    for item in arg.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"-e/--hdu: empty item in {arg!r} (give indices or EXTNAMEs, comma-separated)")
        if item.lstrip("+-").isdigit():
            if int(item) < 0:
                raise UsageError(f"-e/--hdu: HDU indices are non-negative, not {item}")
            values.append(int(item))
        else:
            values.append(item)
    return values


def input_paths(args: argparse.Namespace, attr: str = "paths") -> list[str]:
    """Positional paths (``@list`` files expand to one path per line, ``#`` comments skipped),
    plus paths from stdin (``--stdin``, or implied when no path is given and stdin is not a
    terminal)."""
    raw = list(getattr(args, attr, []) or [])
    stdin = sys.stdin
    if getattr(args, "stdin", False) or (not raw and stdin is not None and not stdin.isatty()):
        raw += [line.strip() for line in stdin if line.strip()]
    paths: list[str] = []
    for item in raw:
        if item.startswith("@") and len(item) > 1:
            try:
                with open(item[1:], encoding="utf-8") as fh:
                    paths += [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
            except OSError as exc:
                raise UsageError(f"{item}: cannot read the path list ({exc.strerror or exc})") from None
        else:
            paths.append(item)
    if not paths:
        raise UsageError("no input files")
    return paths


@dataclass(frozen=True)
class Target:
    """One input as given (``shown``), split into the file and its CFITSIO suffixes."""

    shown: str
    path: str
    hdu: HduKey | None
    section: tuple[Any, ...] | None


def targets(paths: Iterable[str], *, sections: bool = False) -> list[Target]:
    """Split CFITSIO suffixes off each path; an image section is refused unless ``sections``."""
    from ..fits.paths import parse_path

    out = []
    for shown in paths:
        try:
            fp = parse_path(shown)
        except ValueError as exc:
            raise UsageError(f"{shown}: {exc}") from None
        if fp.section is not None and not sections:
            raise UsageError(f"{shown}: an image section suffix only applies to `cutout`")
        out.append(Target(shown, fp.path, fp.hdu, fp.section))
    return out


def select_hdus(index: Any, target: Target, spec: Sequence[HduKey] | None,
                default: Callable[[Any], list[int]] | None = None) -> list[int]:
    """The HDU indices of ``index`` that ``-e`` (``spec``) or the path suffix name; every HDU
    (or ``default(index)``) when neither does. A missing HDU is a usage error."""
    if spec is not None and target.hdu is not None:
        raise UsageError(f"{target.shown}: give the HDU either as a path suffix or with -e, not both")
    wanted: Sequence[HduKey] | None = [target.hdu] if target.hdu is not None else spec
    if wanted is None:
        return default(index) if default is not None else list(range(len(index)))
    out = []
    for key in wanted:
        if isinstance(key, int) and key >= len(index):
            raise UsageError(f"{target.shown}: HDU {key} out of range (file has {len(index)} HDUs)")
        try:
            out.append(index.resolve(key).index)
        except FitsError as exc:
            if isinstance(exc, KeyError):
                raise UsageError(f"{target.shown}: no HDU named {key!r}") from None
            raise
    return out


def selected(n: int, wanted: Sequence[int] | None, path: str) -> list[int]:
    """The HDU indices to visit among ``n``; an index past the end is a usage error."""
    if wanted is None:
        return list(range(n))
    for h in wanted:
        if h >= n:
            raise UsageError(f"{path}: HDU {h} out of range (file has {n} HDUs)")
    return list(wanted)


# -- outputs ---------------------------------------------------------------------------------------
def check_outputs(outputs: Sequence[str], overwrite: bool) -> None:
    """Refuse duplicate outputs, and existing ones unless ``--overwrite``."""
    real = [o for o in outputs if o != "-"]
    for o in real:
        _refuse_suffix(o)
    if len(set(real)) != len(real):
        raise UsageError("two inputs would write the same output")
    if not overwrite:
        for o in real:
            if os.path.exists(o):
                raise UsageError(f"{o}: output exists (use --overwrite to replace it)")


def _refuse_suffix(path: str) -> None:
    """An output names a whole file: a CFITSIO suffix (``out.fits[1]``) would otherwise become
    part of a file name nobody asked for."""
    from ..fits.paths import parse_path

    try:
        fp = parse_path(path)
    except ValueError:
        return
    if fp.hdu is not None or fp.section is not None:
        raise UsageError(f"{path}: an output is a whole file; the suffix {path[len(fp.path):]} "
                         f"does not apply (write to {fp.path!r})")


def open_output(path: str) -> IO[bytes] | _Unclosed:
    """A binary stream for ``path``; ``-`` is stdout (not closed by the caller's ``with``)."""
    if path == "-":
        return _Unclosed(sys.stdout.buffer)
    return open(path, "wb")


class _Unclosed:
    """Wraps stdout so a ``with`` block or a writer's close() flushes it but leaves it open."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.closed = False

    def write(self, data: Any) -> int:
        return int(self._raw.write(data))

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        self._raw.flush()
        self.closed = True

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        raise OSError("stdout is not seekable")

    def __enter__(self) -> _Unclosed:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def jobs(value: int | None, n: int) -> int:
    """``-J`` → worker count: None → 1; 0 → CPU count when there are ≥ 2 files."""
    if value is None:
        return 1
    if value < 0:
        raise UsageError("-J/--file-jobs must be >= 0")
    if value == 0:
        return (os.cpu_count() or 1) if n >= 2 else 1
    return max(1, min(value, max(n, 1)))


def progress_enabled(args: argparse.Namespace) -> bool:
    """Progress bars: on with ``--progress``, off with ``--no-progress``, else only when stderr
    is a terminal."""
    choice = getattr(args, "progress", None)
    if choice is not None:
        return bool(choice)
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


# -- batches ---------------------------------------------------------------------------------------
class Batch:
    """Runs one step per input; an input that fails is reported on stderr as
    ``<path>: <message>`` and the others still run. ``code`` is the worst exit code seen."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.code = EXIT_OK

    def fail(self, shown: str, exc: BaseException) -> None:
        code = EXIT_USAGE if isinstance(exc, UsageError) else EXIT_IO
        message = str(exc) or type(exc).__name__
        if isinstance(exc, KeyError) and exc.args:
            message = str(exc.args[0])
        if not message.startswith(shown) and shown not in message:
            message = f"{shown}: {message}"
        print(f"torchfits {self.command}: {message}", file=sys.stderr)
        self.code = max(self.code, code)

    def run(self, items: Sequence[T], fn: Callable[[T], R], *, name: Callable[[T], str] = str,
            workers: int = 1, progress: bool = False, desc: str = "") -> list[tuple[T, R]]:
        """``fn`` over ``items`` (in ``workers`` threads); the successful (item, result) pairs
        in input order."""
        from .._progress import progress_bar

        def guarded(item: T) -> tuple[bool, Any]:
            try:
                return True, fn(item)
            except (UsageError, FitsError, OSError) as exc:
                return False, exc

        results: list[tuple[T, R]] = []
        with progress_bar(total=len(items), desc=desc or self.command, enabled=progress,
                          unit="file") as bar:
            if workers > 1 and len(items) > 1:
                with ThreadPoolExecutor(workers) as pool:
                    outcomes = []
                    for outcome in pool.map(guarded, items):
                        outcomes.append(outcome)
                        bar.update(1)
            else:
                outcomes = []
                for item in items:
                    outcomes.append(guarded(item))
                    bar.update(1)
        for item, (ok, value) in zip(items, outcomes):
            if ok:
                results.append((item, value))
            else:
                self.fail(name(item), value)
        return results


# -- argparse pieces -------------------------------------------------------------------------------
def common_options(p: argparse.ArgumentParser, *, stdin: bool = True, formats: bool = True) -> None:
    """paths, --stdin, -e/--hdu and the output format options."""
    p.add_argument("paths", nargs="*", help="FITS files (CFITSIO suffixes [1] / [SCI] select HDUs; "
                                            "@list reads paths from a file)")
    if stdin:
        p.add_argument("--stdin", action="store_true", help="read paths from stdin, one per line")
    p.add_argument("-e", "--hdu", help="HDU indices and/or EXTNAMEs, comma-separated (0,SCI)")
    if formats:
        format_options(p)


def format_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--format", choices=("text", "json", "jsonl"), default="text",
                   help="text (aligned table), json (array) or jsonl (one object per line)")
    p.add_argument("--json", dest="format", action="store_const", const="json")
    p.add_argument("--jsonl", dest="format", action="store_const", const="jsonl")


def output_options(p: argparse.ArgumentParser, *, out: bool = True, out_dir: bool = True) -> None:
    """-o/--out, --out-dir and --overwrite."""
    if out:
        p.add_argument("-o", "--out", help="output path (- for stdout where the format allows)")
    if out_dir:
        p.add_argument("--out-dir", help="write one output per input into this directory")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")


def file_jobs_option(p: argparse.ArgumentParser, verb: str) -> None:
    """-J/--file-jobs: how many files are ``verb`` (read, copied, ...) in parallel (see `jobs`)."""
    p.add_argument("-J", "--file-jobs", type=int, default=None, help=f"files {verb} in parallel")


def progress_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: when stderr is a terminal; needs tqdm)")
    g.add_argument("--no-progress", dest="progress", action="store_false")

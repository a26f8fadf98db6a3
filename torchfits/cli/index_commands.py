"""``torchfits index build DIR``: write the statistics sidecar datasets use to skip files and
row chunks (format: `torchfits.tables.stats_index`)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .common import UsageError, emit, format_options, hdus, progress_enabled, progress_options


def cmd_index(args: argparse.Namespace) -> int:
    """Run ``torchfits index <action>``; only ``build`` exists."""
    from ..fits.metadata import read_colnames
    from ..tables.source import resolve_sources
    from ..tables.stats_index import build_index, default_sidecar, load_index, sidecar_exists

    if args.index_command != "build":
        raise UsageError("expected an action: build")
    spec = hdus(args.hdu)
    if spec is None or len(spec) != 1:
        raise UsageError("-e/--hdu takes one table HDU (index or EXTNAME)")
    hdu = spec[0]
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    if args.chunk_rows <= 0:
        raise UsageError("--chunk-rows must be > 0")
    source: Any = args.source if len(args.source) > 1 else args.source[0]
    try:
        paths = resolve_sources(source)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if columns:
        for path in paths:  # a misspelt column is an error, not a silently smaller index
            missing = [c for c in columns if c not in read_colnames(path, hdu)]
            if missing:
                raise UsageError(f"{path}: no column {', '.join(map(repr, missing))} in HDU {hdu}")
    target = args.out or default_sidecar(source, paths)
    if not args.overwrite and sidecar_exists(target):  # a URL sidecar is asked for once
        raise UsageError(f"{target}: output exists (use --overwrite to replace it)")
    path = build_index(source, hdu, columns=columns, chunk_rows=args.chunk_rows, output=args.out,
                       progress=progress_enabled(args))
    index = load_index(path)
    if columns:
        skipped = [c for c in columns if c not in index.columns]
        if skipped:
            print(f"torchfits index build: no statistics for {', '.join(skipped)} "
                  "(array or unsupported column type)", file=sys.stderr)
    emit([{"index": path, "files": len(index), "columns": index.columns,
           "chunk_rows": index.chunk_rows}], args.format)
    return 0


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``index build`` on the CLI's subparsers and in its command table."""
    p = sub.add_parser("index", help="statistics sidecars for datasets (index build DIR)")
    actions = p.add_subparsers(dest="index_command", metavar="ACTION")
    b = actions.add_parser("build", help="write _torchfits_index.json: per-chunk min/max/null counts")
    b.add_argument("source", nargs="+", help="directory, files, glob or URLs (a remote glob or directory "
                   "where the store lists)")
    b.add_argument("-e", "--hdu", default="1", help="table HDU index or EXTNAME (default 1)")
    b.add_argument("-c", "--columns", help="comma-separated columns (default: every scalar column)")
    b.add_argument("--chunk-rows", type=int, default=65_536, help="rows per statistics chunk")
    b.add_argument("-o", "--out", help="sidecar path or URL (default: DIR/_torchfits_index.json, "
                   "beside remote files for URLs)")
    b.add_argument("--overwrite", action="store_true", help="replace an existing sidecar")
    format_options(b)
    progress_options(b)
    commands["index"] = cmd_index

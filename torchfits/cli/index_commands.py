"""``torchfits index build DIR``: write the statistics sidecar datasets use to skip files and
row chunks (format: `torchfits._stats_index`)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def cmd_index(args: argparse.Namespace) -> int:
    """Run ``torchfits index <action>``; only ``build`` exists."""
    from ..tables.stats_index import build_index, load_index

    if args.index_command != "build":
        print("torchfits index: expected an action: build", file=sys.stderr)
        return 2
    hdu: Any = int(args.hdu) if str(args.hdu).lstrip("-").isdigit() else args.hdu
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    if args.chunk_rows <= 0:
        print("torchfits index build: --chunk-rows must be > 0", file=sys.stderr)
        return 2
    path = build_index(args.source if len(args.source) > 1 else args.source[0], hdu, columns=columns,
                       chunk_rows=args.chunk_rows, output=args.out)
    index = load_index(path)
    record = {"index": path, "files": len(index), "columns": index.columns,
              "chunk_rows": index.chunk_rows}
    if args.format == "json":
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        sys.stdout.write(" ".join(f"{k}={str(record[k])!r}" for k in sorted(record)) + "\n")
    return 0


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``index build`` on the CLI's subparsers and in its command table."""
    p = sub.add_parser("index", help="statistics sidecars for datasets (index build DIR)")
    actions = p.add_subparsers(dest="index_command", metavar="ACTION")
    b = actions.add_parser("build", help="write _torchfits_index.json: per-chunk min/max/null counts")
    b.add_argument("source", nargs="+", help="directory, files or glob")
    b.add_argument("-e", "--hdu", default="1", help="table HDU index or EXTNAME (default 1)")
    b.add_argument("-c", "--columns", help="comma-separated columns (default: every scalar column)")
    b.add_argument("--chunk-rows", type=int, default=65_536, help="rows per statistics chunk")
    b.add_argument("-o", "--out", help="sidecar path (default: DIR/_torchfits_index.json)")
    b.add_argument("-f", "--format", choices=("text", "json"), default="text")
    commands["index"] = cmd_index

"""``torchfits index build DIR``: write the statistics sidecar datasets use to skip files and
row chunks (format: `torchfits.tables.stats_index`); ``torchfits sort --healpix ORDER IN OUT``:
rewrite a catalog in HEALPix order with its row ranges by cell in the sidecar."""
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
    sky = tuple(args.sky) if args.sky else None
    if args.sky_order is not None and sky is None:
        raise UsageError("--sky-order needs --sky RA DEC")
    if args.sky_order is not None and not 0 <= args.sky_order <= 29:
        raise UsageError("--sky-order must be in 0..29")
    if columns or sky:
        for path in paths:  # a misspelt column is an error, not a silently smaller index
            names = read_colnames(path, hdu)
            missing = [c for c in columns or () if c not in names]
            folded = {n.lower() for n in names}
            missing += [c for c in sky or () if c.lower() not in folded]
            if missing:
                raise UsageError(f"{path}: no column {', '.join(map(repr, missing))} in HDU {hdu}")
    target = args.out or default_sidecar(source, paths)
    if not args.overwrite and sidecar_exists(target):  # a URL sidecar is asked for once
        raise UsageError(f"{target}: output exists (use --overwrite to replace it)")
    path = build_index(source, hdu, columns=columns, chunk_rows=args.chunk_rows, output=args.out,
                       progress=progress_enabled(args), sky=sky, sky_order=args.sky_order)
    index = load_index(path)
    if columns:
        skipped = [c for c in columns if c not in index.columns]
        if skipped:
            print(f"torchfits index build: no statistics for {', '.join(skipped)} "
                  "(array or unsupported column type)", file=sys.stderr)
    record: dict[str, Any] = {"index": path, "files": len(index), "columns": index.columns,
                              "chunk_rows": index.chunk_rows}
    if sky:
        record["sky"] = list(sky)
    emit([record], args.format)
    return 0


def cmd_sort(args: argparse.Namespace) -> int:
    """Run ``torchfits sort --healpix ORDER IN OUT``."""
    import os

    from ..sky.healpix_sort import sort_healpix

    if args.healpix is None:
        raise UsageError("say what to sort by: --healpix ORDER")
    if not 0 <= args.healpix <= 29:
        raise UsageError("--healpix ORDER must be in 0..29")
    spec = hdus(args.hdu)
    if spec is None or len(spec) != 1:
        raise UsageError("-e/--hdu takes one table HDU (index or EXTNAME)")
    if not os.path.isfile(args.input):
        raise UsageError(f"{args.input}: no such file")
    if os.path.exists(args.output) and not args.overwrite:
        raise UsageError(f"{args.output}: output exists (use --overwrite to replace it)")
    from ..fits.metadata import read_colnames

    folded = {n.lower() for n in read_colnames(args.input, spec[0])}
    missing = [c for c in (args.ra, args.dec) if c.lower() not in folded]
    if missing:
        raise UsageError(f"{args.input}: no column {', '.join(map(repr, missing))} in HDU {spec[0]}")
    out = sort_healpix(args.input, args.output, args.healpix, ra=args.ra, dec=args.dec, hdu=spec[0],
                       overwrite=args.overwrite, index=False if args.no_index else (args.index or True))
    record: dict[str, Any] = {"output": out, "order": args.healpix}
    if not args.no_index:
        record["index"] = args.index or os.path.join(os.path.dirname(os.path.abspath(out)),
                                                     "_torchfits_index.json")
    emit([record], args.format)
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
    b.add_argument("--sky", nargs=2, metavar=("RA", "DEC"),
                   help="also record the HEALPix coverage of row ranges (cone searches skip rows)")
    b.add_argument("--sky-order", type=int, default=None,
                   help="finest HEALPix order of that coverage (default 10)")
    format_options(b)
    progress_options(b)
    commands["index"] = cmd_index

    s = sub.add_parser("sort", help="rewrite a catalog ordered by HEALPix cell, indexed by row range")
    s.add_argument("input", metavar="IN", help="the catalog")
    s.add_argument("output", metavar="OUT", help="the sorted copy (may be IN with --overwrite)")
    s.add_argument("--healpix", type=int, metavar="ORDER", help="nested HEALPix order to sort by (0..29)")
    s.add_argument("--ra", default="ra", help="RA column, degrees (default ra)")
    s.add_argument("--dec", default="dec", help="Dec column, degrees (default dec)")
    s.add_argument("-e", "--hdu", default="1", help="table HDU index or EXTNAME (default 1)")
    s.add_argument("--index", help="sidecar to add OUT's row ranges to (default: OUT's directory)")
    s.add_argument("--no-index", action="store_true", help="write no sidecar")
    s.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    format_options(s)
    commands["sort"] = cmd_sort

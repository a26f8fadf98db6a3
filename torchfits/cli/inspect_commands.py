"""CLI commands that inspect, compare, copy, cut and convert files (docs/cli.md).

Each ``cmd_*`` takes the parsed arguments and returns the exit code; `add_parsers` wires them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any, Callable

import numpy as np

from .common import EXIT_DIFF, EXIT_OK, UsageError, common_options, emit, hdus, input_paths, selected


def _image_stats(arr: np.ndarray) -> dict[str, Any]:
    finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr.reshape(-1)
    if finite.size == 0:
        return {"min": None, "max": None, "mean": None, "std": None, "median": None}
    ordered = np.sort(finite, kind="stable")
    return {
        "min": finite.min().item(),
        "max": finite.max().item(),
        "mean": float(finite.mean(dtype=np.float64)),
        "std": float(finite.std(dtype=np.float64)),
        "median": ordered[(ordered.size - 1) // 2].item(),  # lower median
    }


def cmd_stats(args: argparse.Namespace) -> int:
    """shape, dtype, min, max, mean, std (ddof=0) and lower median of each image HDU."""
    from ..image.plain import read_numpy
    from ..fits.metadata import info

    records = []
    for path in input_paths(args):
        summaries = info(path)
        for i in selected(len(summaries), hdus(args.hdu), path):
            s = summaries[i]
            if s.kind not in ("primary", "image", "compressed_image") or not s.shape:
                continue
            arr = read_numpy(path, i)
            records.append({"file": path, "hdu": i, "name": s.name, "shape": str(tuple(arr.shape)),
                            "dtype": str(arr.dtype), **_image_stats(arr)})
    emit(records, args.format)
    return EXIT_OK


def cmd_table(args: argparse.Namespace) -> int:
    """The Arrow schema of a table HDU and a JSON preview of its first rows."""
    from ..tables.scan import scan
    from ..fits.metadata import info

    if args.rows < 0:
        raise UsageError("-n/--rows must be >= 0")
    for path in input_paths(args):
        summaries = info(path)
        wanted = hdus(args.hdu) or [s.index for s in summaries if s.kind in ("bintable", "table")]
        for i in selected(len(summaries), wanted, path):
            scanner = scan(path, i)
            schema = scanner.schema
            preview = scanner.head(args.rows).to_pylist() if args.rows else []
            if args.format == "text":
                sys.stdout.write(f"# HDU {i} ({summaries[i].name}) in {path}: "
                                 f"{summaries[i].nrows} rows\n")
                for field in schema:
                    sys.stdout.write(f"{field.name}: {field.type}\n")
                for row in preview:
                    sys.stdout.write(json.dumps(row, default=str) + "\n")
            else:
                emit([{"file": path, "hdu": i, "schema": {f.name: str(f.type) for f in schema},
                       "rows": preview}], args.format)
    return EXIT_OK


def _header_differences(a: Any, b: Any, i: int) -> list[str]:
    skip = {"CHECKSUM", "DATASUM"}
    keys = [k for k in dict.fromkeys(list(a) + list(b)) if k not in skip]
    return [f"HDU {i} {k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two files: HDU count and kinds, header keywords, image shapes and statistics."""
    from ..fits.hdu_index import get_index
    from ..image.plain import read_numpy

    a_path, b_path = args.path_a, args.path_b
    ia, ib = get_index(a_path), get_index(b_path)
    lines = []
    if len(ia) != len(ib):
        lines.append(f"HDU count: {len(ia)} vs {len(ib)}")
    for i, (ea, eb) in enumerate(zip(ia.entries, ib.entries)):
        if ea.kind != eb.kind:
            lines.append(f"HDU {i} type: {ea.kind} vs {eb.kind}")
            continue
        lines += _header_differences(ia.header_view(ea), ib.header_view(eb), i)
        if ea.is_image and ea.naxes:
            x, y = read_numpy(a_path, i), read_numpy(b_path, i)
            if x.shape != y.shape:
                lines.append(f"HDU {i} shape: {x.shape} vs {y.shape}")
                continue
            sx, sy = _image_stats(x), _image_stats(y)
            for key in ("min", "max", "mean"):
                if sx[key] != sy[key]:
                    lines.append(f"HDU {i} {key}: {sx[key]!r} vs {sy[key]!r}")
    for line in lines:
        sys.stdout.write(line + "\n")
    return EXIT_DIFF if lines else EXIT_OK


def _outputs(args: argparse.Namespace, suffix: str = "") -> list[tuple[str, str]]:
    """(input, output) pairs from ``INPUT [OUTPUT]`` or many inputs plus ``--out-dir``."""
    paths = list(args.paths)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        pairs = [(p, os.path.join(args.out_dir, os.path.basename(p) + suffix)) for p in paths]
    elif len(paths) == 2:
        pairs = [(paths[0], paths[1])]
    else:
        raise UsageError("give INPUT OUTPUT, or inputs with --out-dir")
    outs = [o for _, o in pairs]
    if len(set(outs)) != len(outs):
        raise UsageError("two inputs would write the same output")
    return pairs


def cmd_copy(args: argparse.Namespace) -> int:
    """An exact byte copy (the input is checked to be FITS first)."""
    from ..fits.hdu_index import get_index

    for src, dst in _outputs(args):
        get_index(src)
        shutil.copyfile(src, dst)
    return EXIT_OK


def _box(text: str) -> tuple[int, int, int, int]:
    try:
        x1, y1, x2, y2 = (int(v) for v in text.split(","))
    except ValueError:
        raise UsageError("--box takes x1,y1,x2,y2 (0-based, half-open)") from None
    return x1, y1, x2, y2


def cmd_cutout(args: argparse.Namespace) -> int:
    """Write a cutout of an image HDU: ``--box x1,y1,x2,y2`` or a CFITSIO section on the path."""
    from ..fits.paths import parse_path
    from ..fits.section_header import section_header
    from ..image.plain import Image, region_from_key
    from ..writing.api import write

    for src, dst in _outputs(args, suffix=".cutout.fits"):
        fp = parse_path(src)
        if (fp.section is None) == (args.box is None):
            raise UsageError("give exactly one of --box or an image section on the path")
        hdu = (hdus(args.hdu) or [fp.hdu if fp.hdu is not None else 0])[0]
        img = Image(fp.path, hdu)
        if args.box:
            x1, y1, x2, y2 = _box(args.box)
            h, w = img.shape[-2:]
            key: Any = (Ellipsis, slice(max(0, y1), min(h, y2)), slice(max(0, x1), min(w, x2)))
        else:
            key = fp.section
        (starts, steps, counts), _ = region_from_key(img.shape, key)
        write(dst, img[key], header=section_header(img.header, starts, steps, counts),
              overwrite=True)
    return EXIT_OK


_EXPORTS = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".arrow": "arrow",
            ".feather": "arrow", ".ipc": "arrow", ".fits": "fits", ".fit": "fits"}


def cmd_convert(args: argparse.Namespace) -> int:
    """Export a table HDU (projection and where-filter applied) to Parquet, CSV/TSV, Arrow IPC
    or FITS; the format comes from the output's extension, else ``--to``."""
    import pyarrow as pa

    from ..tables.scan import scan

    paths = list(args.paths)
    if args.out:
        pairs = [(p, args.out) for p in paths] if len(paths) == 1 else None
        if pairs is None:
            raise UsageError("-o takes one input")
    elif len(paths) == 2:
        pairs = [(paths[0], paths[1])]
    else:
        raise UsageError("give INPUT OUTPUT (or INPUT -o OUTPUT)")
    for src, dst in pairs:
        fmt = _EXPORTS.get(os.path.splitext(dst)[1].lower()) or args.to
        if fmt not in ("parquet", "csv", "tsv", "arrow", "fits"):
            raise UsageError(f"cannot tell the output format of {dst!r}: use --to")
        columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
        hdu = (hdus(args.hdu) or [1])[0]
        table = scan(src, hdu, columns=columns, where=args.where).to_arrow()
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, dst)
        elif fmt in ("csv", "tsv"):
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, dst, pacsv.WriteOptions(delimiter="\t" if fmt == "tsv" else ","))
        elif fmt == "arrow":
            with pa.OSFile(dst, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
        else:
            from ..writing.api import write

            write(dst, table, overwrite=True)
    return EXIT_OK


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    p = sub.add_parser("stats", help="min/max/mean/std/median of image HDUs")
    common_options(p)
    commands["stats"] = cmd_stats

    p = sub.add_parser("table", help="Arrow schema and a preview of table HDUs")
    common_options(p)
    p.add_argument("-n", "--rows", type=int, default=5, help="rows to preview (0: schema only)")
    commands["table"] = cmd_table

    p = sub.add_parser("diff", help="compare two files (exit 1 when they differ)")
    p.add_argument("path_a")
    p.add_argument("path_b")
    commands["diff"] = cmd_diff

    p = sub.add_parser("copy", help="exact byte copy")
    p.add_argument("paths", nargs="+")
    p.add_argument("--out-dir")
    commands["copy"] = cmd_copy

    p = sub.add_parser("cutout", help="write a cutout of an image HDU")
    p.add_argument("paths", nargs="+")
    p.add_argument("-e", "--hdu")
    p.add_argument("--box", help="x1,y1,x2,y2 (0-based, half-open)")
    p.add_argument("--out-dir")
    commands["cutout"] = cmd_cutout

    p = sub.add_parser("convert", help="export a table HDU to Parquet, CSV/TSV, Arrow or FITS")
    p.add_argument("paths", nargs="+")
    p.add_argument("-o", "--out")
    p.add_argument("--to", choices=("parquet", "csv", "tsv", "arrow", "fits"))
    p.add_argument("-e", "--hdu")
    p.add_argument("-w", "--where")
    p.add_argument("-c", "--columns", help="comma-separated column names")
    commands["convert"] = cmd_convert

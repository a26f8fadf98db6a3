"""CLI commands that inspect, copy, cut, convert and draw files (docs/cli.md; diff is in `diff_command`).

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

from ..fits.hdu_index import image_with_data
from ..image.thumbnail import STRETCHES
from .common import (
    Batch,
    Target,
    UsageError,
    check_outputs,
    common_options,
    emit,
    file_jobs_option,
    format_table,
    hdus,
    input_paths,
    jobs,
    json_value,
    open_output,
    output_options,
    progress_enabled,
    progress_options,
    select_hdus,
    targets,
)


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


STATS_COLUMNS = ("file", "hdu", "name", "shape", "dtype", "min", "max", "mean", "std", "median")


def _image_hdus(index: Any) -> list[int]:
    return [e.index for e in index.entries if image_with_data(e, compressed=True)]


def _table_hdus(index: Any) -> list[int]:
    return [e.index for e in index.entries if e.is_table]


def cmd_stats(args: argparse.Namespace) -> int:
    """shape, dtype, min, max, mean, std (ddof=0) and lower median of each image HDU."""
    from ..fits.hdu_index import get_index
    from ..image.plain import read_numpy

    spec = hdus(args.hdu)
    batch = Batch("stats")

    def one(t: Target) -> list[dict[str, Any]]:
        index = get_index(t.path)
        explicit = spec is not None or t.hdu is not None
        wanted = select_hdus(index, t, spec, default=_image_hdus)
        if not wanted:
            raise UsageError(f"{t.shown}: no image HDU with data (stats reads images; "
                             "for tables see `torchfits table` or `torchfits sql`)")
        out = []
        for i in wanted:
            e = index.entries[i]
            if i not in _image_hdus(index):
                if explicit:
                    raise UsageError(f"{t.shown}: HDU {i} ({e.display_name}) is not an image with data")
                continue
            arr = read_numpy(t.path, i)
            out.append({"file": t.shown, "hdu": i, "name": e.display_name, "shape": tuple(arr.shape),
                        "dtype": str(arr.dtype), **_image_stats(arr)})
        return out

    items = targets(input_paths(args))
    done = batch.run(items, one, name=lambda t: t.shown, workers=jobs(args.file_jobs, len(items)),
                     progress=progress_enabled(args) and len(items) > 1)
    emit([r for _, rs in done for r in rs], args.format, columns=STATS_COLUMNS)
    return batch.code


def cmd_table(args: argparse.Namespace) -> int:
    """The Arrow schema of a table HDU and a preview of its first rows."""
    from ..fits.hdu_index import get_index
    from ..tables.scan import scan

    if args.rows < 0:
        raise UsageError("-n/--rows must be >= 0")
    spec = hdus(args.hdu)
    batch = Batch("table")

    def one(t: Target) -> list[dict[str, Any]]:
        index = get_index(t.path)
        wanted = select_hdus(index, t, spec, default=_table_hdus)
        if not wanted:
            raise UsageError(f"{t.shown}: no table HDU (for images see `torchfits info` or `stats`)")
        out = []
        for i in wanted:
            e = index.entries[i]
            if not e.is_table:
                raise UsageError(f"{t.shown}: HDU {i} ({e.display_name}) is not a table")
            scanner = scan(t.path, i)
            out.append({"file": t.shown, "hdu": i, "name": e.display_name, "nrows": e.nrows,
                        "schema": {f.name: str(f.type) for f in scanner.schema},
                        "rows": scanner.head(args.rows).to_pylist() if args.rows else []})
        return out

    done = batch.run(targets(input_paths(args)), one, name=lambda t: t.shown)
    records = [r for _, rs in done for r in rs]
    if args.format != "text":
        emit(records, args.format)
        return batch.code
    for r in records:
        sys.stdout.write(f"# HDU {r['hdu']} ({r['name']}) in {r['file']}: {r['nrows']} rows\n")
        for name, type_ in r["schema"].items():
            sys.stdout.write(f"{name}: {type_}\n")
        if r["rows"]:
            sys.stdout.write("\n" + format_table(r["rows"], list(r["schema"])))
    return batch.code


def _outputs(args: argparse.Namespace, name: Callable[[str], str], *,
             stdout: bool = False) -> list[tuple[str, str]]:
    """(input, output) pairs from ``INPUT OUTPUT``, ``INPUT -o OUTPUT`` or inputs plus
    ``--out-dir`` (output names from ``name(input basename)``); outputs checked against
    ``--overwrite``."""
    paths = list(args.paths)
    out = getattr(args, "out", None)
    if out and args.out_dir:
        raise UsageError("give -o/--out or --out-dir, not both")
    if args.out_dir:
        if not paths:
            raise UsageError("no input files")
        pairs = [(p, os.path.join(args.out_dir, name(os.path.basename(p.split("[", 1)[0]))))
                 for p in paths]
    elif out:
        if len(paths) != 1:
            raise UsageError("-o/--out takes one input; use --out-dir for several")
        pairs = [(paths[0], out)]
    elif len(paths) == 2:
        pairs = [(paths[0], paths[1])]
    else:
        raise UsageError("give INPUT OUTPUT, INPUT -o OUTPUT, or inputs with --out-dir")
    if not stdout and any(o == "-" for _, o in pairs):
        raise UsageError("this command cannot write to stdout (-)")
    check_outputs([o for _, o in pairs], args.overwrite)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    return pairs


def _whole_file(path: str, command: str) -> str:
    """The file a path names; ``command`` works on whole files, so a suffix is refused."""
    (t,) = targets([path], sections=True)
    if t.hdu is not None or t.section is not None:
        raise UsageError(f"{path}: {command} works on whole files; an HDU or section suffix "
                         "does not apply")
    return t.path


def cmd_copy(args: argparse.Namespace) -> int:
    """An exact byte copy (the input is checked to be FITS first)."""
    from ..fits.hdu_index import get_index
    from ..writing.atomic import atomic_output

    pairs = _outputs(args, lambda b: b)
    batch = Batch("copy")

    def one(pair: tuple[str, str]) -> None:
        src, dst = pair
        src = _whole_file(src, "copy")
        index = get_index(src)
        for entry in index.entries:  # a truncated file is not copied as if it were whole
            index.check_data(entry)
        with open(src, "rb") as fh, atomic_output(dst) as sink:
            shutil.copyfileobj(fh, sink.fh, 1 << 22)

    batch.run(pairs, one, name=lambda p: p[0], workers=jobs(args.file_jobs, len(pairs)),
              progress=progress_enabled(args) and len(pairs) > 1)
    return batch.code


def _box(text: str) -> tuple[int, int, int, int]:
    try:
        x1, y1, x2, y2 = (int(v) for v in text.split(","))
    except ValueError:
        raise UsageError("--box takes x1,y1,x2,y2 (0-based, half-open)") from None
    if x2 <= x1 or y2 <= y1:
        raise UsageError(f"--box {text}: x2 > x1 and y2 > y1 are required")
    return x1, y1, x2, y2


def _one_image_hdu(src: str, t: Any, spec: Any, one: str, images: str) -> tuple[Any, Any]:
    """(HDU index, entry) of the single image HDU a path names, or a UsageError that says why
    not (``one``: several HDUs named; ``images``: the HDU is no image)."""
    from ..fits.hdu_index import get_index

    index = get_index(t.path)
    wanted = select_hdus(index, t, spec, default=lambda ix: [ix.autodetect()])
    if len(wanted) != 1:
        raise UsageError(f"{src}: {one}")
    entry = index.entries[wanted[0]]
    if wanted[0] not in _image_hdus(index) or entry.is_groups:
        what = "a table" if entry.is_table else (
            "a random-groups HDU" if entry.is_groups else "not an image with data")
        raise UsageError(f"{src}: HDU {entry.index} ({entry.display_name}) is {what}; {images}")
    return index, entry


def cmd_cutout(args: argparse.Namespace) -> int:
    """Write a cutout of an image HDU: ``--box x1,y1,x2,y2`` or a CFITSIO section on the path."""
    from ..fits.section_header import section_header
    from ..image.plain import Image, region_from_key
    from ..writing.api import write

    pairs = _outputs(args, lambda b: os.path.splitext(b)[0] + ".cutout.fits")
    spec = hdus(args.hdu)
    box = _box(args.box) if args.box else None
    batch = Batch("cutout")

    def one(pair: tuple[str, str]) -> None:
        src, dst = pair
        (t,) = targets([src], sections=True)
        if (t.section is None) == (box is None):
            raise UsageError(f"{src}: give exactly one of --box or an image section on the path")
        index, entry = _one_image_hdu(src, t, spec, "cutout takes one HDU", "cutout cuts images")
        img = Image(t.path, entry.index)
        if box is not None:
            x1, y1, x2, y2 = box
            h, w = img.shape[-2:]
            if x1 >= w or y1 >= h or x2 <= 0 or y2 <= 0:
                raise UsageError(f"{src}: --box {x1},{y1},{x2},{y2} lies outside the "
                                 f"{w}x{h} image of HDU {entry.index} ({entry.display_name})")
            key: Any = (Ellipsis, slice(max(0, y1), min(h, y2)), slice(max(0, x1), min(w, x2)))
        else:
            key = t.section
        (starts, steps, counts), _ = region_from_key(img.shape, key)
        tables = _lookup_tables(index, img.header, starts, steps, f"{src}: HDU {entry.index}")
        cut = img[key]
        write(dst, [cut, *tables] if tables else cut,
              header=section_header(img.header, starts, steps, counts), overwrite=True)

    batch.run(pairs, one, name=lambda p: p[0], workers=jobs(args.file_jobs, len(pairs)))
    return batch.code


def cmd_preview(args: argparse.Namespace) -> int:
    """Write a PNG picture of an image HDU (zscale/asinh by default; `torchfits.preview`)."""
    from ..image.plain import Image
    from ..image.thumbnail import picture_key, pillow
    from ..writing.png import preview

    pillow()  # Pillow missing: one error naming the extra, before any file is read
    if args.size is not None and args.size < 1:
        raise UsageError("--size must be a positive number of pixels")
    interval: Any = "minmax" if args.minmax else args.percentile if args.percentile else "zscale"
    if args.percentile is not None and not 0 < args.percentile <= 100:
        raise UsageError(f"--percentile {args.percentile}: give the percent of pixels kept, 0 < P <= 100")
    pairs = _outputs(args, lambda b: os.path.splitext(b)[0] + ".png", stdout=True)
    spec = hdus(args.hdu)
    batch = Batch("preview")

    def one(pair: tuple[str, str]) -> None:
        src, dst = pair
        (t,) = targets([src], sections=True)
        index, entry = _one_image_hdu(src, t, spec, "preview draws one HDU", "preview draws images")
        shape = Image(t.path, entry.index, index=index).shape
        if picture_key(shape, None) is None:
            raise UsageError(f"{src}: HDU {entry.index} ({entry.display_name}) has shape {shape}; "
                             "preview draws two axes longer than 1")
        source = src if t.section is not None else t.path
        hdu = None if t.section is not None and t.hdu is not None else entry.index
        png = preview(source, None if dst == "-" else dst, hdu=hdu, stretch=args.stretch,
                      interval=interval, size=args.size, overwrite=True)
        if dst == "-":
            sys.stdout.buffer.write(png)
            sys.stdout.buffer.flush()

    batch.run(pairs, one, name=lambda p: p[0], workers=jobs(args.file_jobs, len(pairs)))
    return batch.code


#: Lookup-table distortions: (the image's keyword naming one, its record-valued parameters,
#: the EXTNAME of the HDUs holding the tables).
_LOOKUPS = (("CPDIS", "DP", "WCSDVARR"), ("D2IMDIS", "D2IM", "D2IMARR"))


def _lookup_tables(index: Any, header: Any, starts: Any, steps: Any,
                   where: str) -> list[dict[str, Any]]:
    """The lookup tables (``WCSDVARR``/``D2IMARR`` HDUs) that the image's ``CPDISj`` and
    ``D2IMDISj = 'LOOKUP'`` cards name, cut for the cutout (`section_lookup_table`), as HDU
    dicts to write after it: the cutout's header names them, so its file must hold them."""
    from ..fits.section_header import section_lookup_table

    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, int], int] = {}
    for distortion, record, extname in _LOOKUPS:
        for card in header.cards:
            key = card.key
            if not (key.startswith(distortion) and key[len(distortion):].isdigit()):
                continue
            if str(card.value).strip().upper() != "LOOKUP":
                continue
            axis = int(key[len(distortion):])
            params: dict[str, str] = {}
            for c in header.cards:  # record-valued cards: DPj = 'EXTVER: 1'
                if c.key == f"{record}{axis}" and isinstance(c.value, str) and ":" in c.value:
                    name, value = c.value.split(":", 1)
                    params[name.strip().upper()] = value.strip()
            try:
                extver = int(float(params.get("EXTVER", "1")))
                naxes = int(float(params.get("NAXES", "2")))
                axes = [int(float(params.get(f"AXIS.{k}", str(k)))) for k in range(1, naxes + 1)]
            except ValueError:
                raise UsageError(f"{where}: {key} = 'LOOKUP' has unreadable {record}{axis} "
                                 "records") from None
            if axes != list(range(1, naxes + 1)):
                raise UsageError(f"{where}: the {extname} table of {key} samples image axes "
                                 f"{axes}; cutout handles tables whose axis k is image axis k")
            if seen.get((extname, extver), axis) != axis:
                raise UsageError(f"{where}: {extname} version {extver} corrects two axes")
            if (extname, extver) in seen:
                continue
            seen[(extname, extver)] = axis
            table = index.resolve((extname, extver))  # a missing table: HDU not found
            th, values = section_lookup_table(index.header(table), _read_image(index, table),
                                              starts, steps, axis=axis)
            out.append({"data": np.ascontiguousarray(values), "header": th})
    return out


def _read_image(index: Any, entry: Any) -> np.ndarray:
    from ..image.plain import Image

    return np.asarray(Image(index.path, entry.index, index=index).read())


_EXPORTS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv",
            ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow", ".json": "json",
            ".jsonl": "jsonl", ".ndjson": "jsonl", ".fits": "fits", ".fit": "fits", ".fts": "fits"}
_FORMATS = ("parquet", "csv", "tsv", "arrow", "json", "jsonl", "fits")


def output_format(dst: str, to: str | None) -> str:
    """``--to`` if given, else the format the output's extension names; stdout needs ``--to``
    unless it defaults to CSV."""
    if to:
        return to
    if dst == "-":
        return "csv"
    fmt = _EXPORTS.get(os.path.splitext(dst)[1].lower())
    if fmt is None:
        raise UsageError(f"cannot tell the output format of {dst!r}: use --to "
                         f"({'/'.join(_FORMATS)})")
    return fmt


def write_arrow_table(table: Any, dst: str, fmt: str, *, overwrite: bool) -> None:
    """Write an Arrow table as ``fmt`` to ``dst`` (``-``: stdout); the file appears whole or
    not at all."""
    import pyarrow as pa

    from ..writing.atomic import atomic_output

    if fmt == "fits":
        if dst == "-":
            raise UsageError("FITS output cannot go to stdout: give a file name")
        from ..writing.api import write

        write(dst, table, overwrite=overwrite)
        return
    if fmt in ("csv", "tsv"):
        nested = [f.name for f in table.schema if pa.types.is_nested(f.type)]
        if nested:
            raise UsageError(f"CSV cannot hold array columns ({', '.join(nested)}): leave them out "
                             "with -c, or write Parquet, Arrow or JSON")
    if dst == "-":
        _write_stream(table, fmt, open_output("-"))
        return
    with atomic_output(dst) as sink:
        _write_stream(table, fmt, sink.fh)


def _write_stream(table: Any, fmt: str, fh: Any) -> None:
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, pa.PythonFile(fh, mode="w"))
    elif fmt in ("csv", "tsv"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, pa.PythonFile(fh, mode="w"),
                        pacsv.WriteOptions(delimiter="\t" if fmt == "tsv" else ","))
    elif fmt == "arrow":
        sink = pa.PythonFile(fh, mode="w")
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        rows = (json_value(r) for batch in table.to_batches() for r in batch.to_pylist())
        if fmt == "jsonl":
            for r in rows:
                fh.write((json.dumps(r) + "\n").encode())
        else:
            fh.write(b"[")
            for k, r in enumerate(rows):
                fh.write((",\n" if k else "\n").encode() + json.dumps(r).encode())
            fh.write(b"\n]\n")
    fh.flush()


def cmd_convert(args: argparse.Namespace) -> int:
    """Export a table HDU (projection and where-filter applied) to Parquet, CSV/TSV, Arrow IPC,
    JSON or FITS; the format comes from the output's extension, else ``--to``."""
    from ..fits.hdu_index import get_index
    from ..tables.scan import scan

    ext = "." + (args.to or "parquet")
    pairs = _outputs(args, lambda b: os.path.splitext(b)[0] + ext, stdout=True)
    if sum(o == "-" for _, o in pairs) and len(pairs) > 1:
        raise UsageError("only one input can be written to stdout")
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    spec = hdus(args.hdu)
    formats = {dst: output_format(dst, args.to) for _, dst in pairs}
    batch = Batch("convert")

    def one(pair: tuple[str, str]) -> None:
        src, dst = pair
        (t,) = targets([src])
        index = get_index(t.path)
        wanted = select_hdus(index, t, spec, default=lambda ix: _table_hdus(ix)[:1])
        if len(wanted) != 1 or not index.entries[wanted[0]].is_table:
            raise UsageError(f"{src}: convert exports one table HDU (none selected or found)")
        try:
            scanner = scan(t.path, wanted[0], columns=columns, where=args.where)
        except (KeyError, ValueError) as exc:  # unknown column, bad where: the arguments' fault
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise UsageError(f"{src}: {message}") from None
        write_arrow_table(scanner.to_arrow(), dst, formats[dst], overwrite=args.overwrite)

    batch.run(pairs, one, name=lambda p: p[0], progress=progress_enabled(args) and len(pairs) > 1)
    return batch.code


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    p = sub.add_parser("stats", help="min/max/mean/std/median of image HDUs")
    common_options(p)
    file_jobs_option(p, "read")
    progress_options(p)
    commands["stats"] = cmd_stats

    p = sub.add_parser("table", help="Arrow schema and a preview of table HDUs")
    common_options(p)
    p.add_argument("-n", "--rows", type=int, default=5, help="rows to preview (0: schema only)")
    commands["table"] = cmd_table

    p = sub.add_parser("copy", help="exact byte copy")
    p.add_argument("paths", nargs="+", help="INPUT OUTPUT, or inputs with --out-dir")
    output_options(p)
    file_jobs_option(p, "copied")
    progress_options(p)
    commands["copy"] = cmd_copy

    p = sub.add_parser("cutout", help="write a cutout of an image HDU")
    p.add_argument("paths", nargs="+", help="INPUT OUTPUT, or inputs with --out-dir")
    p.add_argument("-e", "--hdu", help="the image HDU: index or EXTNAME (default: the first image)")
    p.add_argument("--box", help="x1,y1,x2,y2 (0-based, half-open)")
    output_options(p)
    file_jobs_option(p, "cut")
    commands["cutout"] = cmd_cutout

    p = sub.add_parser("preview", help="write a PNG picture of an image HDU (zscale, asinh)")
    p.add_argument("paths", nargs="+", help="INPUT OUTPUT.png, or inputs with --out-dir")
    p.add_argument("-e", "--hdu", help="the image HDU: index or EXTNAME (default: the first image)")
    p.add_argument("--stretch", choices=STRETCHES, default="asinh", help="default: asinh")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--zscale", action="store_true", help="IRAF zscale limits (the default)")
    g.add_argument("--percentile", type=float, metavar="P",
                   help="limits keeping the central P percent of the pixels (99.5)")
    g.add_argument("--minmax", action="store_true", help="the pixels' minimum and maximum")
    p.add_argument("--size", type=int, help="longest side in pixels (default: every pixel); "
                                            "a big image is then read through a strided slice")
    output_options(p)
    file_jobs_option(p, "drawn")
    commands["preview"] = cmd_preview

    p = sub.add_parser("convert", help="export a table HDU to Parquet, CSV/TSV, Arrow, JSON or FITS")
    p.add_argument("paths", nargs="+", help="INPUT OUTPUT, INPUT -o OUTPUT, or inputs with --out-dir")
    output_options(p)
    p.add_argument("--to", choices=_FORMATS, help="output format (default: from the extension; "
                                                  "csv for stdout)")
    p.add_argument("-e", "--hdu", help="the table HDU: index or EXTNAME (default: the first table)")
    p.add_argument("-w", "--where", help="row filter in the where dialect (docs/where.md)")
    p.add_argument("-c", "--columns", help="comma-separated column names")
    progress_options(p)
    commands["convert"] = cmd_convert

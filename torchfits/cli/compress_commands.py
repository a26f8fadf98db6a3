"""``torchfits compress`` (tile-compress the image HDUs of files; tables are copied as they are)
and ``torchfits decompress`` (write plain images back; the empty primary is kept)."""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from ..fits.hdu_index import image_with_data
from ..image.codec_registry import DEFAULT_CODEC, writer_names
from ..writing.recompress import compress_file, decompress_file
from .common import (
    Batch,
    UsageError,
    check_outputs,
    emit,
    file_jobs_option,
    format_options,
    hdus,
    jobs,
    output_options,
    progress_enabled,
    progress_options,
    select_hdus,
    targets,
)

__all__ = ["cmd_compress", "cmd_decompress", "add_parsers", "compress_file", "decompress_file"]

def _outputs(args: argparse.Namespace, name: Callable[[str], str]) -> list[tuple[str, str]]:
    """(input, output) pairs: ``INPUT OUTPUT`` (two paths) or ``INPUT -o OUTPUT``; one or
    three or more inputs are written beside themselves (``name(path)``) or into ``--out-dir``.
    Existing outputs are refused unless ``--overwrite``."""
    paths = list(args.paths)
    if not paths:
        raise UsageError("no input files")
    if args.out and args.out_dir:
        raise UsageError("give -o/--out or --out-dir, not both")
    if args.out:
        if len(paths) != 1:
            raise UsageError("-o/--out takes one input; use --out-dir for several")
        pairs = [(paths[0], args.out)]
    elif args.out_dir:
        pairs = [(p, os.path.join(args.out_dir, os.path.basename(name(_file(p))))) for p in paths]
    elif len(paths) == 2:
        pairs = [(paths[0], paths[1])]
    else:
        pairs = [(p, name(_file(p))) for p in paths]
    if any(o == "-" for _, o in pairs):
        raise UsageError("FITS output cannot go to stdout (-): give a file name")
    check_outputs([o for _, o in pairs], args.overwrite)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    return pairs


def _tile(text: str | None) -> tuple | None:
    if not text:
        return None
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise UsageError(f"--tile takes comma-separated integers (C order), not {text!r}") from None


def _run(args: argparse.Namespace, pairs: list[tuple[str, str]], fn: Callable[[str, str], int],
         action: str) -> int:
    batch = Batch(action)
    done = batch.run(pairs, lambda pair: fn(*pair), name=lambda pair: pair[0],
                     workers=jobs(args.file_jobs, len(pairs)), progress=progress_enabled(args),
                     desc=action)
    emit([{"file": s, "output": d, "hdus": c} for (s, d), c in done], args.format)
    return batch.code


def cmd_compress(args: argparse.Namespace) -> int:
    """Tile-compress the image HDUs of each input."""
    tile = _tile(args.tile)
    quantize = None if args.quantize is None else (args.quantize, args.dither)
    pairs = _outputs(args, lambda p: p + ".fz")
    spec = hdus(args.hdu)
    return _run(args, pairs, lambda s, d: compress_file(
        _file(s), d, algorithm=args.algorithm, tile=tile, quantize=quantize,
        which=_which(s, spec, "compress"), overwrite=True), "compress")


def cmd_decompress(args: argparse.Namespace) -> int:
    """Write the compressed image HDUs of each input as plain images."""
    def suffix(p: str) -> str:
        return p[:-3] if p.endswith(".fz") else os.path.splitext(p)[0] + "_decompressed.fits"

    pairs = _outputs(args, suffix)
    spec = hdus(args.hdu)
    return _run(args, pairs, lambda s, d: decompress_file(_file(s), d,
                                                          which=_which(s, spec, "decompress"),
                                                          overwrite=True),
                "decompress")


def _which(path: str, spec: list[Any] | None, action: str) -> list[int] | None:
    """``-e`` (indices and EXTNAMEs) resolved against ``path``; None means every HDU. An HDU
    named explicitly must be one ``action`` converts (an image with data to compress, a
    compressed image to decompress), and without ``-e`` the file must have at least one:
    otherwise the output would be an unchanged copy reported as a success."""
    from ..fits.hdu_index import get_index

    (t,) = targets([path])
    index = get_index(t.path)
    need = "an image with data" if action == "compress" else "a tile-compressed image"
    if spec is None and t.hdu is None:
        if not any(_converts(e, action) for e in index.entries):
            kinds = ", ".join(f"HDU {e.index} {_kind(e)}" for e in index.entries)
            raise UsageError(f"{t.shown}: no HDU is {need} ({kinds}); nothing to {action}")
        return None
    wanted = select_hdus(index, t, spec)
    for i in wanted:
        e = index.entries[i]
        if not _converts(e, action):
            raise UsageError(f"{t.shown}: HDU {i} ({e.display_name}) is not {need}; "
                             f"{action} -e names the HDUs to {action}")
    return wanted


def _kind(entry: Any) -> str:
    """What an HDU holds, in a word or two: ``empty image``, ``binary table``, ..."""
    if entry.is_image and not image_with_data(entry):
        return "empty image" if entry.kind == "primary" else "empty image extension"
    return {"primary": "image", "image": "image", "bintable": "binary table",
            "table": "ASCII table", "compressed_image": "tile-compressed image"}.get(entry.kind, entry.kind)


def _converts(entry: Any, action: str) -> bool:
    """Whether ``action`` converts this HDU (the rule of `compress_file`/`decompress_file`)."""
    if action == "compress":
        return image_with_data(entry)
    return bool(entry.kind == "compressed_image")


def _file(path: str) -> str:
    """The file a path names, without its CFITSIO suffix."""
    return targets([path])[0].path


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="INPUT [OUTPUT], or several inputs written beside "
                                            "themselves (or into --out-dir)")
    p.add_argument("-e", "--hdu", help="HDU indices/EXTNAMEs to convert, comma-separated (default: all)")
    output_options(p)
    file_jobs_option(p, "converted")
    format_options(p)
    progress_options(p)


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the ``compress`` and ``decompress`` subcommands and register them in ``commands``."""
    p = sub.add_parser("compress", help="tile-compress image HDUs (tables are kept as they are)")
    _common(p)
    names = sorted(set(writer_names().values()), key=list(writer_names().values()).index)
    p.add_argument("--algorithm", default=DEFAULT_CODEC,
                   help=", ".join(f"{n} (default)" if n == DEFAULT_CODEC else n for n in names))
    p.add_argument("--tile", help="tile shape, comma-separated, C order (default: one row)")
    p.add_argument("--quantize", type=float, default=None,
                   help="float images: quantisation level (noise/step; negative = step; 0 = lossless)")
    p.add_argument("--dither", default="SUBTRACTIVE_DITHER_1",
                   choices=("NO_DITHER", "SUBTRACTIVE_DITHER_1", "SUBTRACTIVE_DITHER_2"))
    commands["compress"] = cmd_compress

    p = sub.add_parser("decompress", help="write compressed image HDUs as plain images")
    _common(p)
    commands["decompress"] = cmd_decompress

"""``torchfits compress`` (tile-compress the image HDUs of files; tables are copied as they are)
and ``torchfits decompress`` (write plain images back; the empty primary is kept)."""
from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional


from ..writing.recompress import compress_file, decompress_file
from .common import EXIT_OK, UsageError, emit, hdus

__all__ = ["cmd_compress", "cmd_decompress", "add_parsers", "compress_file", "decompress_file"]

def _outputs(args: argparse.Namespace, suffix: Callable[[str], str]) -> list[tuple[str, str]]:
    paths = list(args.paths)
    if not paths:
        raise UsageError("no input files")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        pairs = [(p, os.path.join(args.out_dir, os.path.basename(suffix(p)))) for p in paths]
    elif len(paths) == 2 and not os.path.exists(paths[1]) or (len(paths) == 2 and args.overwrite):
        pairs = [(paths[0], paths[1])]
    else:
        pairs = [(p, suffix(p)) for p in paths]
    outs = [o for _, o in pairs]
    if len(set(outs)) != len(outs):
        raise UsageError("two inputs would be written to the same output file")
    return pairs


def _tile(text: Optional[str]) -> Optional[tuple]:
    if not text:
        return None
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise UsageError(f"--tile takes comma-separated integers (C order), not {text!r}") from None


def _run(pairs: list[tuple[str, str]], fn: Callable[[str, str], int], jobs: Optional[int],
         fmt: str, action: str) -> int:
    n = len(pairs)
    workers = 1 if not jobs else (jobs if jobs > 0 else (os.cpu_count() or 1))
    with ThreadPoolExecutor(max(1, min(workers, n))) as pool:
        counts = list(pool.map(lambda pair: fn(*pair), pairs))
    emit([{"file": s, "output": d, action: c} for (s, d), c in zip(pairs, counts)], fmt)
    return EXIT_OK


def cmd_compress(args: argparse.Namespace) -> int:
    """Tile-compress the image HDUs of each input."""
    tile = _tile(args.tile)
    quantize = None if args.quantize is None else (args.quantize, args.dither)
    pairs = _outputs(args, lambda p: p + ".fz")
    which = hdus(args.hdu)
    return _run(pairs, lambda s, d: compress_file(s, d, algorithm=args.algorithm, tile=tile,
                                                  quantize=quantize, which=which,
                                                  overwrite=args.overwrite),
                args.file_jobs, args.format, "compressed")


def cmd_decompress(args: argparse.Namespace) -> int:
    """Write the compressed image HDUs of each input as plain images."""
    def suffix(p: str) -> str:
        return p[:-3] if p.endswith(".fz") else os.path.splitext(p)[0] + "_decompressed.fits"

    pairs = _outputs(args, suffix)
    which = hdus(args.hdu)
    return _run(pairs, lambda s, d: decompress_file(s, d, which=which, overwrite=args.overwrite),
                args.file_jobs, args.format, "decompressed")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="INPUT [OUTPUT], or several inputs")
    p.add_argument("-e", "--hdu", help="comma-separated HDU indices to convert (default: all)")
    p.add_argument("--out-dir", help="write outputs into this directory")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    p.add_argument("-J", "--file-jobs", type=int, default=None, help="files converted in parallel")
    p.add_argument("-f", "--format", choices=("text", "json", "jsonl"), default="text")


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add the ``compress`` and ``decompress`` subcommands and register them in ``commands``."""
    p = sub.add_parser("compress", help="tile-compress image HDUs (tables are kept as they are)")
    _common(p)
    p.add_argument("--algorithm", default="RICE_1",
                   help="RICE_1 (default), GZIP_1, GZIP_2, PLIO_1, HCOMPRESS_1")
    p.add_argument("--tile", help="tile shape, comma-separated, C order (default: one row)")
    p.add_argument("--quantize", type=float, default=None,
                   help="float images: quantisation level (noise/step; negative = step; 0 = lossless)")
    p.add_argument("--dither", default="SUBTRACTIVE_DITHER_1",
                   choices=("NO_DITHER", "SUBTRACTIVE_DITHER_1", "SUBTRACTIVE_DITHER_2"))
    commands["compress"] = cmd_compress

    p = sub.add_parser("decompress", help="write compressed image HDUs as plain images")
    _common(p)
    commands["decompress"] = cmd_decompress

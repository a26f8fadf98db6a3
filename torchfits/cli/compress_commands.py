"""``torchfits compress`` (tile-compress the image HDUs of files; tables are copied as they are)
and ``torchfits decompress`` (write plain images back; the empty primary is kept)."""
from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

import numpy as np

from .common import EXIT_OK, UsageError, emit, hdus

__all__ = ["cmd_compress", "cmd_decompress", "add_parsers", "compress_file", "decompress_file"]

BLOCK = 2880


def _raw_hdu(index: Any, entry: Any) -> bytes:
    """The bytes of one HDU as stored (header and padded data)."""
    end = entry.data_offset + -(-entry.data_size // BLOCK) * BLOCK
    index.check_data(entry)
    return bytes(index.source.buffer()[entry.header_offset:min(end, index.size)]).ljust(
        end - entry.header_offset, b"\0")


def _header_bytes(cards: list) -> bytes:
    from .._compress_write import _header_bytes as build

    return build(cards)


def compress_file(src: str, dst: str, *, algorithm: str = "RICE_1", tile: Optional[tuple] = None,
                  quantize: Any = None, which: Optional[list[int]] = None,
                  overwrite: bool = False) -> int:
    """Write ``src`` to ``dst`` with its image HDUs (all, or those in ``which``) tile-compressed.

    Returns the number of HDUs compressed. An image primary becomes an empty primary followed by
    the compressed image.
    """
    from .._atomic import atomic_output, check_target
    from .._compress_write import encode_compressed_hdu, normalize_compress
    from .._hdu_index import IMAGE_KINDS, get_index, invalidate
    from ..header import Card
    from ..image import Image

    codec = normalize_compress(algorithm, allow_nocompress=True) or "RICE_1"
    index = get_index(src)
    target = check_target(dst, overwrite=overwrite)
    parts: list[bytes] = []
    done = 0
    for entry in index.entries:
        wanted = which is None or entry.index in which
        if entry.kind in IMAGE_KINDS and entry.naxes and all(n > 0 for n in entry.naxes) and wanted:
            header = index.header(entry)
            img = Image(src, entry.index, index=index)
            plan = img.plan
            unsigned = plan.mode == 1
            data = img.read() if unsigned or plan.mode == 0 else Image(
                src, entry.index, raw_scale=True, index=index).read()
            cards, table, heap = encode_compressed_hdu(np.ascontiguousarray(data), header,
                                                       compress=codec, tile=tile, quantize=quantize)
            if not unsigned:
                for key in ("BSCALE", "BZERO", "BLANK"):
                    if key in header:
                        cards.append(Card(key, header[key], header.comments[key]))
            if entry.index == 0:
                parts.append(_header_bytes([Card("SIMPLE", True), Card("BITPIX", 8),
                                            Card("NAXIS", 0), Card("EXTEND", True)]))
            blob = _header_bytes(cards) + table + heap
            parts.append(blob + b"\0" * (-len(blob) % BLOCK))
            done += 1
        else:
            parts.append(_raw_hdu(index, entry))
    with atomic_output(target) as sink:
        for part in parts:
            sink.write(part)
    invalidate(target)
    return done


def decompress_file(src: str, dst: str, *, which: Optional[list[int]] = None,
                    overwrite: bool = False) -> int:
    """Write ``src`` to ``dst`` with its compressed image HDUs stored as plain images."""
    from .._atomic import atomic_output, check_target
    from .._hdu_index import KIND_COMPRESSED, get_index, invalidate
    from ..compressed import CompressedImage
    from ..header import Card

    index = get_index(src)
    target = check_target(dst, overwrite=overwrite)
    parts: list[bytes] = []
    done = 0
    for entry in index.entries:
        if entry.kind == KIND_COMPRESSED and (which is None or entry.index in which):
            img = CompressedImage(src, entry.index, raw_scale=True, index=index)
            stored = img.read()
            header = img.header
            cards = list(header.cards)
            if cards and cards[0].key == "SIMPLE":  # the primary image is stored after a primary
                cards[0] = Card("XTENSION", "IMAGE", "Image extension")
                cards = [c for c in cards if c.key != "EXTEND"]
                naxis_end = max(i for i, c in enumerate(cards) if c.key.startswith("NAXIS")) + 1
                cards[naxis_end:naxis_end] = [Card("PCOUNT", 0), Card("GCOUNT", 1)]
            data = stored.astype(stored.dtype.newbyteorder(">")).tobytes()
            blob = _header_bytes(cards)
            parts.append(blob + data + b"\0" * (-len(data) % BLOCK))
            done += 1
        else:
            parts.append(_raw_hdu(index, entry))
    with atomic_output(target) as sink:
        for part in parts:
            sink.write(part)
    invalidate(target)
    return done


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

"""Whole-file re-encoding: tile-compress the image HDUs of a file, or store compressed images
as plain ones; every other HDU is copied byte for byte (used by the CLI and by HDU edits)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..image.codec_registry import DEFAULT_CODEC
from .compress_write import header_bytes
from .hdu_bytes import copy_hdu

__all__ = ["compress_file", "decompress_file"]


def _bar(total: int, desc: str, progress: bool | None) -> Any:
    from .._progress import progress_bar

    return progress_bar(total=total, desc=desc, enabled=progress, unit="HDU")


def compress_file(src: str, dst: str, *, algorithm: str = DEFAULT_CODEC, tile: tuple | None = None,
                  quantize: Any = None, which: list[int] | None = None,
                  overwrite: bool = False, progress: bool | None = False) -> int:
    """Write ``src`` to ``dst`` with its image HDUs (all, or those in ``which``) tile-compressed.

    Returns the number of HDUs compressed. An image primary becomes an empty primary followed by
    the compressed image. ``progress=True`` shows a bar over the HDUs (needs tqdm; None: only
    when stderr is a terminal).
    """
    from ..fits.hdu_index import get_index, image_with_data, invalidate
    from ..fits.header import Card
    from ..image.plain import Image
    from .atomic import atomic_output, check_target
    from .compress_write import encode_compressed_hdu, normalize_compress

    codec = normalize_compress(algorithm, allow_nocompress=True) or DEFAULT_CODEC
    index = get_index(src)
    target = check_target(dst, overwrite=overwrite)
    done = 0
    # Streamed HDU by HDU; a failure anywhere leaves ``dst`` as it was (atomic output).
    with atomic_output(target) as sink, _bar(len(index), f"compress {src}", progress) as bar:
        for entry in index.entries:
            bar.update(1)
            wanted = which is None or entry.index in which
            if not (image_with_data(entry) and wanted):
                copy_hdu(sink, index, entry, primary=entry.index == 0)
                continue
            header = index.header(entry)
            img = Image(src, entry.index, index=index)
            unsigned = img.plan.mode == 1
            data = img.read() if unsigned or img.plan.mode == 0 else Image(
                src, entry.index, raw_scale=True, index=index).read()
            cards, table, heap = encode_compressed_hdu(np.ascontiguousarray(data), header,
                                                       compress=codec, tile=tile, quantize=quantize)
            if not unsigned:
                for key in ("BSCALE", "BZERO", "BLANK"):
                    if key in header:
                        cards.append(Card(key, header[key], header.comments[key]))
            if entry.index == 0:
                sink.write(header_bytes([Card("SIMPLE", True), Card("BITPIX", 8),
                                          Card("NAXIS", 0), Card("EXTEND", True)]))
            sink.write(header_bytes(cards))
            sink.write(table)
            sink.write(heap)
            sink.pad()
            done += 1
    invalidate(target)
    return done


def decompress_file(src: str, dst: str, *, which: list[int] | None = None,
                    overwrite: bool = False, progress: bool | None = False) -> int:
    """Write ``src`` to ``dst`` with its compressed image HDUs stored as plain images
    (``progress`` as in `compress_file`)."""
    from ..fits.hdu_index import KIND_COMPRESSED, get_index, invalidate
    from ..fits.header import Card
    from ..image.compressed import CompressedImage
    from .atomic import atomic_output, check_target

    index = get_index(src)
    target = check_target(dst, overwrite=overwrite)
    done = 0
    with atomic_output(target) as sink, _bar(len(index), f"decompress {src}", progress) as bar:
        for entry in index.entries:
            bar.update(1)
            if entry.kind != KIND_COMPRESSED or (which is not None and entry.index not in which):
                copy_hdu(sink, index, entry, primary=entry.index == 0)
                continue
            img = CompressedImage(src, entry.index, raw_scale=True, index=index)
            stored = img.read()
            cards = list(img.header.cards)
            if cards and cards[0].key == "SIMPLE":  # the primary image is stored after a primary
                cards[0] = Card("XTENSION", "IMAGE", "Image extension")
                cards = [c for c in cards if c.key != "EXTEND"]
                naxis_end = max(i for i, c in enumerate(cards) if c.key.startswith("NAXIS")) + 1
                cards[naxis_end:naxis_end] = [Card("PCOUNT", 0), Card("GCOUNT", 1)]
            sink.write(header_bytes(cards))
            sink.write(stored.astype(stored.dtype.newbyteorder(">")))
            sink.pad()
            done += 1
    invalidate(target)
    return done

"""Whole-file re-encoding: tile-compress the image HDUs of a file, or store compressed images
as plain ones; every other HDU is copied byte for byte (used by the CLI and by HDU edits)."""
from __future__ import annotations

from collections.abc import Callable
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
    from ..fits.hdu_index import image_with_data
    from ..fits.header import Card
    from ..image.plain import Image
    from .compress_write import encode_compressed_hdu, normalize_compress

    codec = normalize_compress(algorithm, allow_nocompress=True) or DEFAULT_CODEC

    def selected(entry: Any) -> bool:
        return image_with_data(entry) and (which is None or entry.index in which)

    def convert(sink: Any, index: Any, entry: Any) -> None:
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

    return _rewrite(src, dst, "compress", selected, convert, overwrite=overwrite, progress=progress)


def decompress_file(src: str, dst: str, *, which: list[int] | None = None,
                    overwrite: bool = False, progress: bool | None = False) -> int:
    """Write ``src`` to ``dst`` with its compressed image HDUs stored as plain images
    (``progress`` as in `compress_file`)."""
    from ..fits.hdu_index import KIND_COMPRESSED
    from ..fits.header import Card
    from ..image.compressed import CompressedImage

    def selected(entry: Any) -> bool:
        return entry.kind == KIND_COMPRESSED and (which is None or entry.index in which)

    def convert(sink: Any, index: Any, entry: Any) -> None:
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

    return _rewrite(src, dst, "decompress", selected, convert, overwrite=overwrite, progress=progress)


def _rewrite(src: str, dst: str, verb: str, selected: Callable[[Any], bool],
             convert: Callable[[Any, Any, Any], None], *, overwrite: bool,
             progress: bool | None) -> int:
    """Stream ``src`` to ``dst`` HDU by HDU: ``convert(sink, index, entry)`` writes each HDU that
    ``selected`` accepts, every other is copied byte for byte. A failure anywhere leaves ``dst``
    as it was (atomic output). Returns the number of HDUs converted."""
    from ..fits.hdu_index import get_index, invalidate
    from .atomic import atomic_output, check_target

    index = get_index(src)
    target = check_target(dst, overwrite=overwrite)
    done = 0
    with atomic_output(target) as sink, _bar(len(index), f"{verb} {src}", progress) as bar:
        for entry in index.entries:
            bar.update(1)
            if not selected(entry):
                copy_hdu(sink, index, entry, primary=entry.index == 0)
                continue
            convert(sink, index, entry)
            done += 1
    invalidate(target)
    return done

"""Whole-file re-encoding: tile-compress the image HDUs of a file, or store compressed images
as plain ones; every other HDU is copied byte for byte (used by the CLI and by HDU edits)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

__all__ = ["compress_file", "decompress_file"]

BLOCK = 2880


def _raw_hdu(index: Any, entry: Any) -> bytes:
    """The bytes of one HDU as stored (header and padded data)."""
    end = entry.data_offset + -(-entry.data_size // BLOCK) * BLOCK
    index.check_data(entry)
    return bytes(index.source.buffer()[entry.header_offset:min(end, index.size)]).ljust(
        end - entry.header_offset, b"\0")


def _header_bytes(cards: list) -> bytes:
    from ._compress_write import _header_bytes as build

    return build(cards)


def compress_file(src: str, dst: str, *, algorithm: str = "RICE_1", tile: Optional[tuple] = None,
                  quantize: Any = None, which: Optional[list[int]] = None,
                  overwrite: bool = False) -> int:
    """Write ``src`` to ``dst`` with its image HDUs (all, or those in ``which``) tile-compressed.

    Returns the number of HDUs compressed. An image primary becomes an empty primary followed by
    the compressed image.
    """
    from ._atomic import atomic_output, check_target
    from ._compress_write import encode_compressed_hdu, normalize_compress
    from ._hdu_index import IMAGE_KINDS, get_index, invalidate
    from .header import Card
    from .image import Image

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
    from ._atomic import atomic_output, check_target
    from ._hdu_index import KIND_COMPRESSED, get_index, invalidate
    from .compressed import CompressedImage
    from .header import Card

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



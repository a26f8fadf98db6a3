"""Raw HDU pieces for in-file edits: header cards as 80-byte records, primary ↔ extension header
conversion, and copying an existing HDU's bytes into a new file unchanged.

Copying cards byte for byte is what keeps preserved HDUs exactly as they were (typed values,
comments, spacing) when a file is rewritten around them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..fits.hdu_index import HduEntry, HduIndex
from ..fits.layout import CARD, finish_raw_header, padded
from .atomic import Sink
from .cards import card_bytes

__all__ = ["raw_cards", "card_key", "header_from_raw", "copy_hdu"]

_AXIS = re.compile(rb"^NAXIS\d+$")


def raw_cards(index: HduIndex, entry: HduEntry) -> list[bytes]:
    """The header's cards before END, 80 bytes each, exactly as stored."""
    buf = index.source.buffer()
    out = []
    for pos in range(entry.header_offset, entry.data_offset - CARD + 1, CARD):
        card = bytes(buf[pos:pos + CARD])
        if card[:8].rstrip() == b"END" and card[8:].strip() == b"":
            break
        out.append(card)
    return out


def card_key(card: bytes) -> bytes:
    """The keyword of a raw card (HIERARCH cards report b"HIERARCH")."""
    return card[:8].rstrip().upper()


def header_from_raw(cards: Iterable[bytes]) -> bytes:
    """Cards (80 bytes each) plus END, padded with blanks to whole blocks."""
    return finish_raw_header(cards)


_STRUCT = {b"SIMPLE", b"XTENSION", b"BITPIX", b"NAXIS", b"EXTEND", b"PCOUNT", b"GCOUNT",
           b"CHECKSUM", b"DATASUM"}


def restructured_image_header(cards: list[bytes], entry: HduEntry, *, primary: bool) -> bytes:
    """An image header rewritten as primary (SIMPLE/EXTEND) or extension (XTENSION/PCOUNT/GCOUNT);
    every non-structural card is kept verbatim (BSCALE/BZERO/BLANK stay: the data is copied)."""
    out = card_bytes("SIMPLE", True, "conforms to FITS standard") if primary else \
        card_bytes("XTENSION", "IMAGE", "image extension")
    out += card_bytes("BITPIX", entry.bitpix, "array data type")
    out += card_bytes("NAXIS", len(entry.naxes), "number of array dimensions")
    for k, n in enumerate(entry.naxes, start=1):
        out += card_bytes(f"NAXIS{k}", int(n))
    out += card_bytes("EXTEND", True) if primary else card_bytes("PCOUNT", 0) + card_bytes("GCOUNT", 1)
    for card in cards:
        key = card_key(card)
        if key in _STRUCT or _AXIS.match(key):
            continue
        out.append(card)
    return header_from_raw(out)


def copy_hdu(sink: Sink, index: HduIndex, entry: HduEntry, *, primary: bool) -> tuple[int, int, int]:
    """Copy one HDU into ``sink``; an image that changes between primary and extension gets its
    structural cards rewritten, everything else is byte for byte. Returns the new span."""
    buf = index.source.buffer()
    was_primary = entry.index == 0
    header_offset = sink.offset
    if primary != was_primary:
        if not entry.is_image:
            raise ValueError(f"HDU {entry.index} ({entry.kind}) cannot become the primary HDU")
        sink.write(restructured_image_header(raw_cards(index, entry), entry, primary=primary))
    else:
        sink.write(buf[entry.header_offset:entry.data_offset])
    data_offset = sink.offset
    end = entry.data_offset + padded(entry.data_size)
    index.check_data(entry)
    sink.write(buf[entry.data_offset:min(end, len(buf))])
    index.source.check()
    sink.pad()
    return header_offset, data_offset, entry.data_size

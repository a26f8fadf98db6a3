"""Structure-aware mutators for FITS files: each takes the bytes and a random generator and
returns mutated bytes plus a short description (kept with every finding so it can be replayed).

The mutators know just enough FITS to hit the places readers trust: header cards (80-byte
records, keyword in columns 1-8), the structural keywords, table descriptors and the heap.
"""
from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Callable

BLOCK = 2880
CARD = 80

# Keywords whose values size allocations, loops or offsets.
STRUCTURAL = re.compile(
    rb"^(BITPIX|NAXIS\d*|PCOUNT|GCOUNT|THEAP|TFIELDS|TFORM\d+|TDIM\d+|TBCOL\d+|TNULL\d+|TSCAL\d+|"
    rb"TZERO\d+|TTYPE\d+|ZBITPIX|ZNAXIS\d*|ZTILE\d+|ZCMPTYPE|ZQUANTIZ|ZDITHER0|ZBLANK|ZSCALE|ZZERO|"
    rb"ZNAME\d+|ZVAL\d+|BSCALE|BZERO|BLANK|EXTEND|GROUPS|ZIMAGE|XTENSION|EXTNAME)\s*$")

INTERESTING_INTS = [0, 1, -1, 2, 7, 8, 255, 999, 1000, 32767, 32768, 65535, 2**31 - 1, 2**31,
                    2**32 + 1, 2**40, 2**53 + 1, 2**63 - 1, 2**63, -2**31, -2**63, 10**20]
INTERESTING_VALUES = [str(v).encode() for v in INTERESTING_INTS] + [
    b"1E400", b"-1E400", b"NaN", b"T", b"F", b"'X'", b"'1PB(9999999999)'", b"'1000000000D'",
    b"'(2147483647,2147483647)'", b"'RICE_1'", b"'GZIP_1'", b"'HCOMPRESS_1'", b"'PLIO_1'",
    b"'NOCOMPRESS'", b"'ZSCALE'", b"'ZSCALE '", b"'ZSCALf'", b"-32", b"32", b"-64", b"64", b"16",
    b"'3PJ'", b"'0J'", b"'-1J'", b"1.5", b"''", b"garbage", b"'",
]


def cards(data: bytes) -> list[int]:
    """Offsets of the header cards (every 80-byte record in a header block up to END)."""
    out = []
    pos = 0
    n = len(data)
    while pos + CARD <= n:
        # Headers start at block boundaries; walk cards until END, then skip the data we can size
        # only roughly: look for the next block that starts like a header.
        block_start = pos
        end_found = False
        while pos + CARD <= n:
            rec = data[pos:pos + CARD]
            if not all(32 <= b < 127 for b in rec):
                break
            out.append(pos)
            pos += CARD
            if rec[:8] == b"END     ":
                end_found = True
                break
        if not end_found:
            break
        pos = -(-pos // BLOCK) * BLOCK
        nxt = data.find(b"XTENSION=", pos)
        while nxt >= 0 and nxt % BLOCK:
            nxt = data.find(b"XTENSION=", nxt + 1)
        if nxt < 0 or nxt == block_start:
            break
        pos = nxt
    return out


def _value_card(key: bytes, value: bytes) -> bytes:
    return (key.ljust(8) + b"= " + value.rjust(20) if len(value) <= 20 else
            key.ljust(8) + b"= " + value)[:CARD].ljust(CARD)


def bit_flip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    buf = bytearray(data)
    n = rng.choice([1, 1, 2, 4, 16])
    where = []
    for _ in range(n):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
        where.append(i)
    return bytes(buf), f"bit_flip at {where[:4]}"


def truncate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    if rng.random() < 0.5:
        cut = BLOCK * rng.randrange(0, max(1, len(data) // BLOCK))
    else:
        cut = rng.randrange(0, len(data))
    return data[:cut], f"truncate at {cut}"


def _lie(data: bytes, src: int, dst: int, rng: random.Random, what: str) -> tuple[bytes, str]:
    """Write the keyword of the card at ``src`` with an interesting value over the card at ``dst``."""
    key = data[src:src + 8].rstrip()
    value = rng.choice(INTERESTING_VALUES)
    buf = bytearray(data)
    buf[dst:dst + CARD] = _value_card(key, value)
    return bytes(buf), f"{what} {key.decode()}={value.decode(errors='replace')}"


def card_lie(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    offsets = cards(data)
    structural = [o for o in offsets if STRUCTURAL.match(data[o:o + 8])]
    pool = structural or offsets
    if not pool:
        return bit_flip(data, rng)
    o = rng.choice(pool)
    return _lie(data, o, o, rng, "card_lie")


def duplicate_card(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Overwrite a blank or COMMENT card with a second copy of a structural card (new value)."""
    offsets = cards(data)
    free = [o for o in offsets if data[o:o + 8] in (b"        ", b"COMMENT ", b"HISTORY ")]
    structural = [o for o in offsets if STRUCTURAL.match(data[o:o + 8])]
    if not free or not structural:
        return card_lie(data, rng)
    src, dst = rng.choice(structural), rng.choice(free)
    return _lie(data, src, dst, rng, "duplicate_card")


def data_words(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Overwrite a 4- or 8-byte word after the first header (descriptors, tile bytes, pixels)."""
    offsets = cards(data)
    first_data = -(-((offsets[0] if offsets else 0) + CARD) // BLOCK) * BLOCK
    ends = [o for o in offsets if data[o:o + 8] == b"END     "]
    starts = [-(-(e + CARD) // BLOCK) * BLOCK for e in ends] or [first_data]
    start = rng.choice(starts)
    if start >= len(data) - 8:
        return bit_flip(data, rng)
    i = rng.randrange(start, len(data) - 8)
    width = rng.choice([4, 8])
    value = rng.choice(INTERESTING_INTS) % (1 << (8 * width))
    buf = bytearray(data)
    buf[i:i + width] = value.to_bytes(width, "big")
    return bytes(buf), f"data_word at {i} = {value} ({width} bytes)"


def data_garble(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Random bytes over a span of a data unit (corrupt tiles, garbled heap)."""
    offsets = cards(data)
    ends = [o for o in offsets if data[o:o + 8] == b"END     "]
    starts = [-(-(e + CARD) // BLOCK) * BLOCK for e in ends]
    starts = [s for s in starts if s < len(data) - 1]
    if not starts:
        return bit_flip(data, rng)
    start = rng.choice(starts)
    i = rng.randrange(start, len(data))
    n = rng.choice([1, 4, 16, 64, 512])
    buf = bytearray(data)
    buf[i:i + n] = bytes(rng.randrange(256) for _ in range(min(n, len(buf) - i)))
    return bytes(buf), f"data_garble at {i} ({n} bytes)"


def card_lie_sweep(data: bytes) -> Iterator[tuple[bytes, str]]:
    """Every structural card of ``data`` set to every interesting value, one at a time (the
    deterministic counterpart of `card_lie`)."""
    for o in cards(data):
        if not STRUCTURAL.match(data[o:o + 8]):
            continue
        key = data[o:o + 8].rstrip()
        for value in INTERESTING_VALUES:
            buf = bytearray(data)
            buf[o:o + CARD] = _value_card(key, value)
            yield bytes(buf), f"card_lie {key.decode()}={value.decode(errors='replace')}"


MUTATORS: dict[str, Callable[[bytes, random.Random], tuple[bytes, str]]] = {
    "bit_flip": bit_flip,
    "truncate": truncate,
    "card_lie": card_lie,
    "duplicate_card": duplicate_card,
    "data_word": data_words,
    "data_garble": data_garble,
}


def mutate(data: bytes, rng: random.Random, rounds: int = 1) -> tuple[bytes, list[str]]:
    """Apply ``rounds`` random mutators (card lies weighted up: they find the most)."""
    names = list(MUTATORS) + ["card_lie", "card_lie", "data_word"]
    notes = []
    for _ in range(rounds):
        name = rng.choice(names)
        data, note = MUTATORS[name](data, rng)
        notes.append(note)
        if not data:
            break
    return data, notes

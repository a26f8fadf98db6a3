"""The byte layout of FITS files: 2,880-byte blocks, headers of 80-byte cards closed by END,
padding, and the offset-binary storage of unsigned and signed-byte integers.

The one home of these rules for every reader and writer in the package.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

__all__ = ["BLOCK", "CARD", "padding", "padded", "finish_header", "finish_raw_header",
           "flip_sign_bit"]

#: Every header and data unit fills whole blocks of this many bytes.
BLOCK = 2880
#: Every header card is this many ASCII characters.
CARD = 80


def padding(nbytes: int) -> int:
    """Bytes needed after ``nbytes`` to reach the next block boundary."""
    return -nbytes % BLOCK


def padded(nbytes: int) -> int:
    """``nbytes`` rounded up to whole blocks: the bytes a data unit of that size occupies."""
    return nbytes + padding(nbytes)


def finish_header(lines: Iterable[str]) -> bytes:
    """A header's bytes: its 80-character lines, the END card, blank padding to a whole block."""
    text = "".join(lines) + "END".ljust(CARD)
    return (text + " " * padding(len(text))).encode("ascii")


def finish_raw_header(cards: Iterable[bytes]) -> bytes:
    """`finish_header` for cards that are already 80-byte records."""
    text = b"".join(cards) + b"END".ljust(CARD)
    return text + b" " * padding(len(text))


def flip_sign_bit(native: np.ndarray, *, big_endian: bool = True) -> np.ndarray:
    """Offset-binary storage (unsigned via BZERO, int8 via BZERO=-128): stored = value - BZERO,
    which is the value's bits with the top bit flipped; returned as unsigned integers,
    big-endian (ready to write) or in native order (for a codec that swaps later)."""
    import numpy as np  # here: headers and layout work without loading NumPy

    size = native.dtype.itemsize
    bits = np.ascontiguousarray(native).view(np.dtype(f"u{size}"))
    flipped = bits ^ np.array(1 << (8 * size - 1), dtype=bits.dtype)
    return flipped.astype(np.dtype(f">u{size}")) if big_endian else flipped

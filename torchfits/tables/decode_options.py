"""`DecodeOptions`: how a table decode turns stored values into Arrow values (type mapping,
strings, encodings, nulls, threads, field metadata), and the string strip modes of the kernels.
"""
from __future__ import annotations

import codecs
import functools
from typing import Literal

from ..fits.record import FrozenRecord

__all__ = [
    "DEFAULT_OPTIONS",
    "DecodeOptions",
    "STRIP_BLANK",
    "STRIP_NONE",
    "STRIP_NUL",
    "ascii_compatible",
    "check_encoding",
    "strip_mode",
]


STRIP_NONE, STRIP_NUL, STRIP_BLANK = 0, 1, 2


@functools.lru_cache(maxsize=32)
def ascii_compatible(encoding: str) -> bool:
    """True when plain ASCII bytes decode to the same characters, so they pass through as is."""
    try:
        sample = bytes(range(1, 128))
        return sample.decode(encoding) == sample.decode("ascii")
    except (LookupError, UnicodeDecodeError):
        return False


def check_encoding(encoding: str) -> None:
    if encoding == "ascii":
        return  # a codec Python always has (looking it up imports its module)
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}") from None


def strip_mode(strip: bool) -> int:
    return STRIP_BLANK if strip else STRIP_NUL


class DecodeOptions(FrozenRecord):
    """How a table decode turns stored values into Arrow values.

    Attributes
    ----------
    mapping : {"native", "compat"}
        The type mapping (`torchfits.fits.columns.arrow_type`); ``"compat"`` is the 1.x one.
    decode_bytes : bool
        Character columns as strings (True) or fixed-width binary with their padding (False).
    strip : bool
        Remove trailing spaces and NULs (True) or trailing NULs only (False).
    encoding : str
        Text encoding of character columns; undecodable bytes become U+FFFD, never an error.
    apply_nulls : bool
        TNULL sentinels (and, natively, zero logical bytes) become nulls.
    binary_strings : bool
        With ``decode_bytes``, return stripped bytes (``binary``) instead of text.
    threads : int, optional
        Row chunks decoded in parallel for big tables (default: ``$TORCHFITS_THREADS`` or the
        CPU count, see `torchfits.fits.threads`).
    metadata : bool
        Attach ``fits_*`` field metadata (`torchfits.fits.columns.field_metadata`).

    A `FrozenRecord` (a frozen dataclass's repr, equality, hashing and pickling; ``replace``):
    the dataclass decorator's ``exec`` cost the first call of a process (docs/architecture.md,
    "Start-up").
    """

    __slots__ = ("mapping", "decode_bytes", "strip", "encoding", "apply_nulls", "binary_strings",
                 "threads", "metadata")
    mapping: Literal["native", "compat"]
    decode_bytes: bool
    strip: bool
    encoding: str
    apply_nulls: bool
    binary_strings: bool
    threads: int | None
    metadata: bool

    def __init__(self, mapping: Literal["native", "compat"] = "native", decode_bytes: bool = True,
                 strip: bool = True, encoding: str = "ascii", apply_nulls: bool = True,
                 binary_strings: bool = False, threads: int | None = None,
                 metadata: bool = True) -> None:
        if mapping not in ("native", "compat"):
            raise ValueError(f"mapping must be 'native' or 'compat', not {mapping!r}")
        check_encoding(encoding)
        values = (mapping, decode_bytes, strip, encoding, apply_nulls, binary_strings, threads, metadata)
        for field, value in zip(self.__slots__, values):
            object.__setattr__(self, field, value)


DEFAULT_OPTIONS = DecodeOptions()

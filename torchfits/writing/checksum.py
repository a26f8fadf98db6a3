"""FITS checksums (CHECKSUM / DATASUM): compute, write into headers, and verify.

The ones'-complement sum runs in the `_checksum` kernel; this module encodes the 16-character
CHECKSUM string, finds the cards to patch and implements `write_checksums`/`verify_checksums`.
"""
from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from .._kernels import _checksum
from ..errors import FitsError, FitsFileNotFoundError
from ..fits.hdu_index import NEGATIVE_HDU, HduEntry, get_index
from ..fits.header import format_card
from ..fits.layout import CARD, finish_raw_header
from ..fits.layout import padded as padded_size
from .atomic import atomic_output, require_file

__all__ = ["write_checksums", "verify_checksums", "encode_checksum", "ones_sum", "patch_checksums"]

ZERO_CHECKSUM = "0000000000000000"
# Characters the ASCII encoding must avoid: the punctuation between digits and letters.
_EXCLUDED = frozenset(range(0x3A, 0x41)) | frozenset(range(0x5B, 0x61))


def ones_sum(buf: Any, initial: int = 0) -> int:
    """32-bit ones'-complement sum of the big-endian words of ``buf`` (zero-padded to 4 bytes)."""
    view = np.frombuffer(buf, dtype=np.uint8)
    if view.size % 4:
        view = np.concatenate([view, np.zeros(-view.size % 4, np.uint8)])
    return int(_checksum.ones_sum32(view, initial))


def _add(a: int, b: int) -> int:
    total = a + b
    return (total & 0xFFFFFFFF) + (total >> 32)


def encode_checksum(value: int, complement: bool = True) -> str:
    """The 16-character ASCII encoding of a 32-bit sum (complemented, as CHECKSUM stores it).

    Each byte is spread over four characters around '0' so that they sum back to the byte;
    pairs are nudged apart to avoid punctuation, and the result is rotated right by one so the
    encoding is aligned with the 4-byte words of the card it sits in.
    """
    if complement:
        value = ~value & 0xFFFFFFFF
    chars = [0] * 16
    for i in range(4):
        byte = (value >> (24 - 8 * i)) & 0xFF
        quarter, remainder = divmod(byte, 4)
        group = [quarter + 0x30] * 4
        group[0] += remainder
        changed = True
        while changed:
            changed = False
            for j in (0, 2):
                if group[j] in _EXCLUDED or group[j + 1] in _EXCLUDED:
                    group[j] += 1
                    group[j + 1] -= 1
                    changed = True
        for j in range(4):
            chars[4 * j + i] = group[j]
    rotated = chars[15:] + chars[:15]
    return bytes(rotated).decode("ascii")


def _card_positions(header: memoryview) -> dict[str, int]:
    """Byte offsets (within ``header``) of the CHECKSUM and DATASUM cards, if present."""
    found: dict[str, int] = {}
    for pos in range(0, len(header) - CARD + 1, CARD):
        key = bytes(header[pos:pos + 8]).rstrip()
        if key in (b"CHECKSUM", b"DATASUM"):
            found.setdefault(key.decode(), pos)
        elif key == b"END":
            break
    return found


def _data_sum(buf: memoryview, start: int, padded_size: int) -> int:
    """Sum of the padded data unit; bytes missing past the end of the file count as zeros."""
    end = min(len(buf), start + padded_size)
    if end <= start:
        return 0
    return ones_sum(buf[start:end])


def patch_checksums(buf: Any, header_offset: int, data_offset: int, data_size: int) -> None:
    """Fill the CHECKSUM and DATASUM cards of one HDU in the writable buffer ``buf``.

    Both cards must already be in the header (any value); they are rewritten in place.
    """
    view = memoryview(buf)
    header = view[header_offset:data_offset]
    where = _card_positions(header)
    if "CHECKSUM" not in where or "DATASUM" not in where:
        raise ValueError("the header has no room reserved for CHECKSUM/DATASUM")
    padded = padded_size(data_size)
    datasum = _data_sum(view, data_offset, padded)
    data_card = format_card("DATASUM", str(datasum), "data unit checksum")[0].encode("ascii")
    header[where["DATASUM"]:where["DATASUM"] + CARD] = data_card
    zero_card = format_card("CHECKSUM", ZERO_CHECKSUM, "HDU checksum")[0].encode("ascii")
    header[where["CHECKSUM"]:where["CHECKSUM"] + CARD] = zero_card
    total = _add(ones_sum(header), datasum)
    card = format_card("CHECKSUM", encode_checksum(total), "HDU checksum")[0].encode("ascii")
    header[where["CHECKSUM"]:where["CHECKSUM"] + CARD] = card


def patch_file_checksums(fh: Any, hdus: list[tuple[int, int, int]]) -> None:
    """Patch CHECKSUM/DATASUM of every ``(header_offset, data_offset, data_size)`` HDU of an open,
    writable file (the temporary file of a write, before it is renamed into place)."""
    fh.flush()
    size = os.fstat(fh.fileno()).st_size
    if not size or not hdus:
        return
    with mmap.mmap(fh.fileno(), size) as mapped:
        for header_offset, data_offset, data_size in hdus:
            patch_checksums(mapped, header_offset, data_offset, data_size)
        mapped.flush()


def header_with_checksum_cards(raw_header: bytes) -> bytes:
    """``raw_header`` (a whole padded header) with any CHECKSUM/DATASUM cards replaced by
    placeholders just before END; every other card is kept byte for byte."""
    cards = []
    for pos in range(0, len(raw_header) - CARD + 1, CARD):
        card = raw_header[pos:pos + CARD]
        key = card[:8].rstrip()
        if key == b"END":
            break
        if key in (b"CHECKSUM", b"DATASUM"):
            continue
        cards.append(card)
    cards.append(format_card("CHECKSUM", ZERO_CHECKSUM, "HDU checksum")[0].encode("ascii"))
    cards.append(format_card("DATASUM", "0", "data unit checksum")[0].encode("ascii"))
    return finish_raw_header(cards)


def _check_hdu_arg(hdu: Any) -> int:
    if isinstance(hdu, bool) or not isinstance(hdu, (int, np.integer)):
        raise TypeError(f"hdu must be an integer, not {type(hdu).__name__}")
    if hdu < 0:
        raise ValueError(f"{NEGATIVE_HDU}, got {hdu}")
    return int(hdu)


def _entry(path: str, hdu: int, missing: str) -> tuple[Any, HduEntry]:
    try:
        index = get_index(path)
    except FitsFileNotFoundError:
        raise FitsFileNotFoundError(f"{missing}: {path}") from None
    if hdu >= len(index):
        raise RuntimeError(f"{path}: Could not move to HDU {hdu} (the file has {len(index)} HDUs)")
    return index, index.entries[hdu]


def write_checksums(path: Any, hdu: int = 0) -> None:
    """Add or update DATASUM and CHECKSUM on one HDU (the file is rewritten atomically).

    Parameters
    ----------
    path : str or os.PathLike
        The FITS file.
    hdu : int
        0-based HDU index. Out of range → ``RuntimeError("Could not move to HDU")``.
    """
    hdu = _check_hdu_arg(hdu)
    target = require_file(path)
    index, entry = _entry(target, hdu, "Could not open FITS file")
    raw = bytes(index.source.buffer()[entry.header_offset:entry.data_offset])
    replace_header(target, index.source, entry, header_with_checksum_cards(raw), checksum=True)


def replace_header(target: str, source: Any, entry: HduEntry, header: bytes, *, checksum: bool) -> None:
    """Rewrite ``target`` atomically with ``entry``'s header replaced by ``header``; with
    ``checksum``, patch the HDU's CHECKSUM/DATASUM cards for the bytes written."""
    buf = source.buffer()
    with atomic_output(target) as sink:
        sink.write(buf[:entry.header_offset])
        header_offset = sink.offset
        sink.write(header)
        data_offset = sink.offset
        sink.write(buf[entry.data_offset:])
        del buf  # the map is released before the file is replaced
        if checksum:
            patch_file_checksums(sink.fh, [(header_offset, data_offset, entry.data_size)])


def checksum_status(buf: memoryview, entry: HduEntry, header: Any) -> dict:
    """The 1.x checksum status dict of one HDU whose bytes are in ``buf``."""
    padded = padded_size(entry.data_size)
    datasum = _data_sum(buf, entry.data_offset, padded)
    has_data = "DATASUM" in header
    has_hdu = "CHECKSUM" in header
    datastatus = 0
    if has_data:
        try:
            datastatus = 1 if int(str(header["DATASUM"]).strip()) == datasum else -1
        except ValueError:
            datastatus = -1
    hdustatus = 0
    if has_hdu:
        total = _add(ones_sum(buf[entry.header_offset:entry.data_offset]), datasum)
        # A correct HDU sums to ones'-complement zero (either representation).
        hdustatus = 1 if total in (0, 0xFFFFFFFF) else -1
    present = has_data or has_hdu
    ok = datastatus != -1 and hdustatus != -1
    status = "fail" if not ok else ("ok" if present else "no_checksums")
    return {"datastatus": datastatus, "hdustatus": hdustatus, "present": present, "ok": ok,
            "status": status}


def verify_checksums(path: Any, hdu: int = 0) -> dict:
    """Check DATASUM and CHECKSUM of one HDU.

    Returns
    -------
    dict
        ``datastatus`` / ``hdustatus`` (1 correct, 0 absent, -1 wrong), ``present`` (either
        keyword exists), ``ok`` (no present checksum is wrong) and ``status`` (``"ok"``,
        ``"no_checksums"`` or ``"fail"``).
    """
    hdu = _check_hdu_arg(hdu)
    try:
        from ..fits.paths import fspath

        target = fspath(path)
        index, entry = _entry(target, hdu, "Could not open FITS file for checksum verification")
    except FitsError as exc:
        if isinstance(exc, FitsFileNotFoundError):
            raise
        if "Could not move to HDU" in str(exc):
            raise
        raise RuntimeError(f"Could not open FITS file for checksum verification: {exc}") from None
    status = checksum_status(index.source.buffer(), entry, index.header_view(entry))
    index.source.check()
    return status

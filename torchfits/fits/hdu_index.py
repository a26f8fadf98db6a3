"""The HDU index: one pass over a file's header blocks gives every HDU's kind and byte layout.

Indexes are built over the byte source `open_source` returns and cached for as long as it returns
that same source: per path and file version (device, inode, size, mtime_ns, ctime_ns) — a changed
file is re-indexed, and so is one whose map found the file truncated under it; per URL and
storage options, re-validated (size, ETag, mtime) every few seconds; per file object while it
lives. Bytes are indexed on every call.

Headers are read block by block until END (``ByteSource.ensure``), so indexing a remote file
fetches its headers, not its data.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._kernels import _header
from .._kernels._safemap import fault_count as faults_seen
from ..errors import (
    CorruptHeaderError,
    FitsError,
    HDUNotFoundError,
    NaxisOverflowError,
    NotFitsError,
    TruncatedFileError,
)
from .header import Header, header_from_parsed
from .layout import BLOCK, padded
from .record import Record
from .sources import ByteSource, open_source

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .columns import ColumnSpec

__all__ = ["HduEntry", "HduIndex", "data_unit", "get_index", "suffix_hdu", "cache_stats", "clear_index_cache",
           "check_hdu_arg", "NEGATIVE_HDU"]

NEGATIVE_HDU = "HDU index must be a non-negative integer"  # the 1.x wording

_MAX_BYTES = 1 << 62  # beyond this a NAXIS product cannot describe a real file
KIND_PRIMARY = "primary"
KIND_IMAGE = "image"
KIND_BINTABLE = "bintable"
KIND_TABLE = "table"
KIND_COMPRESSED = "compressed_image"
IMAGE_KINDS = (KIND_PRIMARY, KIND_IMAGE)
TABLE_KINDS = (KIND_BINTABLE, KIND_TABLE)


class HduEntry(Record):
    """Byte layout and structural keywords of one HDU (all offsets absolute, in bytes).

    Treat it as read-only: entries are shared by every reader of the cached index. (Not
    frozen only because frozen initialisation costs a few µs per HDU.)

    Fields: ``index``, ``kind``, ``header_offset``, ``data_offset``, ``data_size`` (declared
    bytes, heap included, padding excluded), ``bitpix``, ``naxes`` (NAXIS1..NAXISn in FITS
    order), ``pcount``, ``gcount``, ``heap_offset``, ``heap_size``, ``extname``, ``extver``,
    ``ncards``, ``tfields``, ``zcmptype`` and ``structural``: every structural keyword (first
    card of each) of an HDU described the careful way, which every tile-compressed HDU is
    (``image_layout`` reads ZBITPIX/ZNAXISn from it); empty for the ordinary HDUs the kernel
    walk describes, and left out of ``repr`` and ``==``."""

    __slots__ = ("index", "kind", "header_offset", "data_offset", "data_size", "bitpix", "naxes",
                 "pcount", "gcount", "heap_offset", "heap_size", "extname", "extver", "ncards",
                 "tfields", "zcmptype", "structural")
    _hidden = ("structural",)

    def __init__(self, index: int, kind: str, header_offset: int, data_offset: int,
                 data_size: int, bitpix: int, naxes: tuple[int, ...], pcount: int, gcount: int,
                 heap_offset: int, heap_size: int, extname: str | None, extver: int | None,
                 ncards: int, tfields: int, zcmptype: str | None,
                 structural: dict | None = None) -> None:
        self.index = index
        self.kind = kind
        self.header_offset = header_offset
        self.data_offset = data_offset
        self.data_size = data_size
        self.bitpix = bitpix
        self.naxes = naxes
        self.pcount = pcount
        self.gcount = gcount
        self.heap_offset = heap_offset
        self.heap_size = heap_size
        self.extname = extname
        self.extver = extver
        self.ncards = ncards
        self.tfields = tfields
        self.zcmptype = zcmptype
        self.structural = {} if structural is None else structural

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape in C order (NAXISn first), as NumPy and torch see it."""
        return tuple(reversed(self.naxes))

    @property
    def nrows(self) -> int:
        return self.naxes[1] if len(self.naxes) >= 2 else 0

    @property
    def row_bytes(self) -> int:
        return self.naxes[0] if self.naxes else 0

    @property
    def is_image(self) -> bool:
        return self.kind in IMAGE_KINDS

    @property
    def is_table(self) -> bool:
        return self.kind in TABLE_KINDS

    @property
    def is_groups(self) -> bool:
        """A random-groups primary (NAXIS1=0, GROUPS=T): GCOUNT groups of PCOUNT parameters and
        one array each. Its kind stays ``primary`` (it is copied and edited as one)."""
        return (self.index == 0 and self.kind == KIND_PRIMARY and self.naxes[:1] == (0,)
                and len(self.naxes) > 1 and self.structural.get("GROUPS") is True)

    @property
    def has_data(self) -> bool:
        """True when the HDU holds at least one value (a compressed image: its logical image)."""
        if self.kind == KIND_COMPRESSED:
            _, naxes = self.image_layout
            return bool(naxes) and all(n > 0 for n in naxes)
        return self.data_size > 0

    @property
    def image_layout(self) -> tuple[int, tuple[int, ...]]:
        """(BITPIX, NAXIS1..n) of the image a user sees: ZBITPIX/ZNAXISn for compressed HDUs."""
        if self.kind != KIND_COMPRESSED:
            return self.bitpix, self.naxes
        s = self.structural
        znaxis = s.get("ZNAXIS", 0)
        znaxis = znaxis if isinstance(znaxis, int) and 0 <= znaxis <= 999 else 0
        naxes = tuple(s.get(f"ZNAXIS{k}", 0) for k in range(1, znaxis + 1))
        zbitpix = s.get("ZBITPIX", 0)
        return (zbitpix if isinstance(zbitpix, int) else 0), naxes

    @property
    def display_name(self) -> str:
        if self.extname:
            return self.extname
        return "PRIMARY" if self.index == 0 else f"HDU{self.index}"


def _int_keyword(s: dict, key: str, path: str, index: int, default: Any = None) -> int:
    value = s.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptHeaderError(
            f"{path}: HDU {index}: keyword {key} must be an integer, found {value!r}"
        )
    return value


def data_unit(s: dict, index: int, path: str) -> tuple[int, list[int], int, int, int]:
    """(BITPIX, NAXISn, PCOUNT, GCOUNT, data size in bytes before padding) of HDU ``index``
    from its structural cards ``s`` (`_header.scan_structural`): the one rule for how large a
    data unit is, for the index and for readers that skip HDUs on their own.

    Raises
    ------
    CorruptHeaderError
        A structural card is missing, not an integer, or out of range.
    NaxisOverflowError
        The data size overflows.
    """
    bitpix = _int_keyword(s, "BITPIX", path, index)
    if bitpix not in (8, 16, 32, 64, -32, -64):
        raise CorruptHeaderError(f"{path}: HDU {index}: invalid BITPIX {bitpix}")
    naxis = _int_keyword(s, "NAXIS", path, index)
    if not 0 <= naxis <= 999:
        raise CorruptHeaderError(f"{path}: HDU {index}: NAXIS={naxis} is outside 0..999")
    naxes = []
    for k in range(1, naxis + 1):
        n = _int_keyword(s, f"NAXIS{k}", path, index)
        if n < 0:
            raise CorruptHeaderError(f"{path}: HDU {index}: NAXIS{k}={n} is negative")
        naxes.append(n)
    pcount = _int_keyword(s, "PCOUNT", path, index, 0)
    gcount = _int_keyword(s, "GCOUNT", path, index, 1)
    if pcount < 0 or gcount < 0:
        raise CorruptHeaderError(f"{path}: HDU {index}: negative PCOUNT or GCOUNT")
    # Random groups (NAXIS1=0 in a primary) count the remaining axes only.
    counted = naxes[1:] if (index == 0 and naxes and naxes[0] == 0 and s.get("GROUPS") is True) else naxes
    nelem = 1
    for n in counted:
        nelem *= n
    if naxis == 0:
        nelem = 0
    data_size = abs(bitpix) // 8 * gcount * (pcount + nelem)
    if data_size > _MAX_BYTES:
        raise NaxisOverflowError(
            f"{path}: HDU {index}: NAXIS product overflow ({' x '.join(map(str, naxes))})"
        )
    return bitpix, naxes, pcount, gcount, data_size


def _describe(buf: memoryview, pos: int, end: int, index: int, path: str, file_size: int) -> HduEntry:
    s = _header.scan_structural(buf, pos, end)
    first = bytes(buf[pos:pos + 10])
    if index == 0:
        if not first.startswith(b"SIMPLE  ="):
            raise NotFitsError(f"{path}: not a FITS file (first card is not SIMPLE)")
        kind = KIND_PRIMARY
    else:
        xtension = str(s.get("XTENSION", "")).strip().upper()
        if xtension in ("IMAGE", "IUEIMAGE"):
            kind = KIND_IMAGE
        elif xtension in ("BINTABLE", "A3DTABLE"):
            kind = KIND_COMPRESSED if s.get("ZIMAGE") is True else KIND_BINTABLE
        elif xtension == "TABLE":
            kind = KIND_TABLE
        else:
            raise CorruptHeaderError(f"{path}: HDU {index}: unknown XTENSION {xtension!r}")
    bitpix, naxes, pcount, gcount, data_size = data_unit(s, index, path)
    data_offset = end
    heap_offset = heap_size = 0
    if kind in TABLE_KINDS or kind == KIND_COMPRESSED:
        table_bytes = naxes[0] * naxes[1] if len(naxes) >= 2 else 0
        theap = _int_keyword(s, "THEAP", path, index, table_bytes)
        if pcount and not table_bytes <= theap <= table_bytes + pcount:
            # The heap lies between the rows and the end of PCOUNT; anything else would point
            # descriptors into the rows or past the data unit.
            raise CorruptHeaderError(
                f"{path}: HDU {index}: THEAP={theap} lies outside the data area "
                f"({table_bytes} bytes of rows + PCOUNT={pcount})"
            )
        heap_offset = data_offset + theap
        heap_size = max(0, table_bytes + pcount - theap)
    tfields = 0
    if kind in TABLE_KINDS or kind == KIND_COMPRESSED:
        tfields = _int_keyword(s, "TFIELDS", path, index, 0)
        if not 0 <= tfields <= 999:
            raise CorruptHeaderError(f"{path}: HDU {index}: TFIELDS={tfields} is outside 0..999")
    extname = s.get("EXTNAME")
    extver = s.get("EXTVER")
    zcmptype = s.get("ZCMPTYPE") if kind == KIND_COMPRESSED else None
    return HduEntry(
        index=index,
        kind=kind,
        header_offset=pos,
        data_offset=data_offset,
        data_size=data_size,
        bitpix=bitpix,
        naxes=tuple(naxes),
        pcount=pcount,
        gcount=gcount,
        heap_offset=heap_offset,
        heap_size=heap_size,
        extname=extname.strip() if isinstance(extname, str) else None,
        extver=extver if isinstance(extver, int) and not isinstance(extver, bool) else None,
        ncards=s["__ncards__"],
        tfields=tfields,
        zcmptype=zcmptype.strip() if isinstance(zcmptype, str) else None,
        structural=s,
    )


class _Entries:
    """The HDU entries of an index: a read-only sequence whose `HduEntry` objects are built on
    first access from the kernel's compact rows (a cold lookup of one HDU of a many-HDU file
    builds one entry, not all of them)."""

    __slots__ = ("_items", "_rows")

    def __init__(self, rows: Any) -> None:
        self._items: list[Any] = []  # an HduEntry, or the row number of one not built yet
        self._rows = rows

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._items)))]
        e = self._items[i]
        if type(e) is int:
            k = i if i >= 0 else i + len(self._items)
            e = self._items[i] = HduEntry(*self._rows.fields(e, k))
        return e

    def __iter__(self) -> Iterator[HduEntry]:
        for k in range(len(self._items)):
            yield self[k]

    def append(self, entry: HduEntry) -> None:
        self._items.append(entry)

    def extname(self, i: int) -> str | None:
        """EXTNAME of HDU ``i`` without building its entry."""
        e = self._items[i]
        return self._rows.extname(e) if type(e) is int else e.extname

    def __repr__(self) -> str:
        return f"<{len(self)} HDU entries>"


class HduIndex:
    """Every HDU of one file version, plus lazily parsed headers.

    ``tail_error`` records why indexing stopped early (a header cut short after the last
    complete HDU); it is raised when a caller asks for an HDU past the ones indexed.
    """

    #: False describes every HDU in Python, one at a time: the reference the kernel walk
    #: (``HduRows.walk``) is tested against.
    kernel_walk: bool = True

    def __init__(self, path: str, key: tuple | None, source: ByteSource) -> None:
        self.path = path
        self.key = key
        self.source = source
        self.size = source.size
        self.entries = _Entries(_header.HduRows())
        self.tail_error: str | None = None
        self.tail_exception: type = TruncatedFileError
        self._headers: dict[tuple[int, bool], Header] = {}
        self._specs: dict[int, tuple[ColumnSpec, ...]] = {}
        # True when bytes must be fetched (``ensure``) before they can be read from ``view()``.
        self.lazy = type(source).ensure is not ByteSource.ensure
        try:
            self._build()
        finally:
            # Header blocks lost to a truncation during the pass read as zeros: say so instead.
            self.source.check()

    def _header_end(self, buf: memoryview, pos: int, lazy: bool) -> int:
        if not lazy:
            return _header.find_header_end(buf, pos, self.size)
        # Fetch the header a few blocks at a time until its END card shows up.
        window = 8 * BLOCK
        while True:
            stop = min(self.size, pos + window)
            self.source.ensure([(pos, stop - pos)])
            end = _header.find_header_end(buf, pos, stop)
            if end >= 0 or stop >= self.size:
                return end
            window *= 4

    def _build(self) -> None:
        src = self.source
        lazy = self.lazy
        walk = self.kernel_walk and not lazy
        size = self.size
        path = self.path
        src.ensure([(0, BLOCK)])
        buf = src.view()
        if size < BLOCK:
            if size == 0:
                raise NotFitsError(f"{path}: not a FITS file (the file is empty)")
            if not bytes(buf[:9]) == b"SIMPLE  =":
                raise NotFitsError(f"{path}: not a FITS file (first card is not SIMPLE)")
            raise TruncatedFileError(f"{path}: truncated FITS file: {size} bytes, less than one header block")
        rows = self.entries._rows
        items = self.entries._items
        pos = 0
        while pos < size:
            if walk:
                # The kernel walks every ordinary HDU in one C pass; it stops at the end of the
                # HDUs or at one it leaves to the careful path below (errors are worded there).
                pos, status = rows.walk(buf, pos, size, len(items), items)
                if status == _header.WALK_DONE:
                    break
            nxt = self._describe_one(buf, pos, lazy)
            if nxt is None:
                break
            pos = nxt

    def _describe_one(self, buf: memoryview, pos: int, lazy: bool) -> int | None:
        """Describe the HDU at ``pos`` in Python (fetching its header first from a lazy source);
        the offset of the next HDU, or None when indexing stops here."""
        src = self.source
        size = self.size
        path = self.path
        if lazy and self.entries:
            src.ensure([(pos, BLOCK)])
        if self.entries and not bytes(buf[pos:pos + 9]) == b"XTENSION=":
            # Trailing bytes after the last HDU (zero padding, junk) are not an HDU.
            return None
        # Binary bytes in the first block mean "not FITS"; after that, one card is enough
        # to tell trailing junk from the next header.
        check_end = pos + BLOCK if not self.entries else pos + 80
        if not _header.header_is_printable(buf, pos, min(size, check_end)):
            if not self.entries:
                raise NotFitsError(f"{path}: not a FITS file (binary bytes in the first header block)")
            return None
        end = self._header_end(buf, pos, lazy)
        if end < 0:
            message = (
                f"{path}: HDU {len(self.entries)}: header never ends "
                f"(no END card before the end of the file: truncated or corrupt)"
            )
            if not self.entries:
                if bytes(buf[:9]) != b"SIMPLE  =":
                    raise NotFitsError(f"{path}: not a FITS file (first card is not SIMPLE)")
                raise TruncatedFileError(message)
            self.tail_error = message
            return None
        if end > size:
            # END found but its block is cut short: the header itself is readable.
            end = size
        try:
            entry = _describe(buf, pos, end, len(self.entries), path, size)
        except FitsError as exc:
            if not self.entries:
                raise
            # A corrupt later HDU must not take the readable ones before it down with it.
            self.tail_error = str(exc)
            self.tail_exception = type(exc)
            return None
        self.entries.append(entry)
        if entry.data_offset + entry.data_size > size:
            return None
        return entry.data_offset + padded(entry.data_size)

    # -- selection --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.entries)

    def resolve(self, hdu: Any, *, allow_auto: bool = False,
                first_with_data: bool = False) -> HduEntry:
        """The entry an HDU argument names: every route that takes an HDU resolves it here.

        ``hdu`` is a 0-based index; an EXTNAME (case-insensitive; ``"PRIMARY"`` names HDU 0
        unless an HDU is called that); ``(EXTNAME, EXTVER)`` or the string ``"EXTNAME,EXTVER"``
        (an HDU without EXTVER has version 1); or ``None``. A name alone is its first HDU. The
        name of an HDU is its first EXTNAME card. ``None`` (and ``"auto"``) is the first HDU
        with data with ``first_with_data`` (the native reads, as ``fitsio.read``), the 1.x
        autodetect rule with ``allow_auto``, and refused otherwise.
        """
        if hdu is None or (isinstance(hdu, str) and hdu.lower() == "auto"):
            if first_with_data:
                return self.entries[self.first_with_data()]
            if not allow_auto:
                raise ValueError(f"{self.path}: hdu must be an integer index or an EXTNAME, not {hdu!r}")
            return self.entries[self.autodetect()]
        if isinstance(hdu, tuple):
            return self._by_name(hdu, *self._name_version(hdu))
        if isinstance(hdu, str):
            name, sep, ver = hdu.partition(",")
            if sep and ver.strip().isdigit() and self._find(hdu.strip().upper(), None) is None:
                return self._by_name(hdu, name, int(ver))  # CFITSIO's "SCI,2"
            return self._by_name(hdu, hdu, None)
        try:
            index = int(hdu.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"hdu must be an integer, a string or an (EXTNAME, EXTVER) pair, "
                            f"not {type(hdu).__name__}") from None
        if index < 0:
            raise ValueError(f"{NEGATIVE_HDU}, got {index}")
        if index >= len(self.entries):
            if self.tail_error:
                raise self.tail_exception(self.tail_error)
            raise HDUNotFoundError(
                f"{self.path}: Could not move to HDU {index}: the file has {len(self.entries)} "
                f"HDUs: {self.listing()}"
            )
        return self.entries[index]

    @staticmethod
    def _name_version(hdu: tuple) -> tuple[str, int | None]:
        if len(hdu) not in (1, 2) or not isinstance(hdu[0], str):
            raise TypeError(f"an HDU named by version is (EXTNAME, EXTVER), not {hdu!r}")
        ver = hdu[1] if len(hdu) == 2 else None
        if ver is not None and (isinstance(ver, bool) or not hasattr(ver, "__index__")):
            raise TypeError(f"EXTVER must be an integer, not {type(ver).__name__} ({hdu!r})")
        return hdu[0], None if ver is None else int(ver.__index__())

    def _find(self, wanted: str, ver: int | None) -> int | None:
        entries = self.entries
        for k in range(len(entries)):
            name = entries.extname(k)
            if name is not None and name.upper() == wanted:
                if ver is None or (entries[k].extver or 1) == ver:
                    return k
        if wanted == "PRIMARY" and ver in (None, 1) and len(entries):
            return 0
        return None

    def _by_name(self, hdu: Any, name: str, ver: int | None) -> HduEntry:
        k = self._find(name.strip().upper(), ver)
        if k is not None:
            return self.entries[k]
        if self.tail_error:
            raise self.tail_exception(self.tail_error)
        shown = repr(hdu) if not isinstance(hdu, tuple) else repr(tuple(hdu))
        raise HDUNotFoundError(f"{self.path}: HDU {shown} not found; the file has: {self.listing()}")

    def listing(self, limit: int = 24) -> str:
        """The HDUs there are, for messages: ``0 PRIMARY, 1 SCI,1, 2 SCI,2, 3 HDU3`` (a name
        with its EXTVER when it has one; the first and last ones of a long file)."""
        entries = self.entries
        n = len(entries)

        def one(k: int) -> str:
            name = entries.extname(k)
            if name is None:
                return f"{k} {'PRIMARY' if k == 0 else '(no EXTNAME)'}"
            ver = entries[k].extver
            return f"{k} {name}" if ver is None else f"{k} {name},{ver}"

        if n <= limit:
            return ", ".join(one(k) for k in range(n))
        head = [one(k) for k in range(limit - 4)]
        tail = [one(k) for k in range(n - 3, n)]
        return ", ".join(head + [f"... {n - limit + 1} more ..."] + tail)

    def first_with_data(self) -> int:
        """The first HDU holding data, as ``fitsio.read`` and ``astropy.io.fits.getdata`` pick
        it (astropy looks no further than HDU 1); 0 when no HDU has data."""
        for e in self.entries:
            if e.has_data:
                return int(e.index)
        return 0

    def autodetect(self) -> int:
        """First image with every axis > 0 or first compressed image; else first table; else 0."""
        first_table = None
        for e in self.entries:
            if e.kind == KIND_COMPRESSED:
                return e.index
            if e.is_image and e.naxes and all(n > 0 for n in e.naxes):
                return e.index
            if e.is_table and first_table is None:
                first_table = e.index
        return first_table if first_table is not None else 0

    # -- headers ----------------------------------------------------------------------------------
    def parsed_cards(self, entry: HduEntry) -> list[tuple]:
        src = self.source
        src.ensure([(entry.header_offset, entry.data_offset - entry.header_offset)])
        cards = _header.parse_cards(src.view(), entry.header_offset, entry.data_offset)
        if faults_seen():
            src.check()
        return cards

    def data_view(self, entry: HduEntry, ranges: Any = None) -> memoryview:
        """The file buffer with ``ranges`` of ``entry``'s data made readable (all of it by default).

        Offsets in ``ranges`` are relative to the data start; a local map holds everything already.
        """
        src = self.source
        if ranges is None:
            ranges = [(0, entry.data_size)]
        src.ensure([(entry.data_offset + o, n) for o, n in ranges])
        return src.view()

    def header(self, entry: HduEntry, *, raw_values: bool = False) -> Header:
        """The parsed header of ``entry`` (cached; callers get a copy they may edit)."""
        cache_key = (entry.index, raw_values)
        h = self._headers.get(cache_key)
        if h is None:
            h = header_from_parsed(self.parsed_cards(entry), raw_values=raw_values)
            self._headers[cache_key] = h
        return h.copy()

    def header_view(self, entry: HduEntry) -> Header:
        """The cached typed header itself, for internal read-only use (no copy)."""
        h = self._headers.get((entry.index, False))
        if h is None:
            h = header_from_parsed(self.parsed_cards(entry))
            self._headers[(entry.index, False)] = h
        return h

    def column_specs(self, entry: HduEntry) -> tuple[ColumnSpec, ...]:
        """The column specs of table ``entry`` (parsed from its header once per file version;
        a bad column description raises `CorruptHeaderError` every time)."""
        specs = self._specs.get(entry.index)
        if specs is None:
            # Imported here: columns needs NumPy, which header-only work never loads.
            from .columns import parse_columns

            specs = tuple(parse_columns(self.header_view(entry),
                                        "bintable" if entry.kind == "bintable" else "table"))
            self._specs[entry.index] = specs
        return specs

    def check_data(self, entry: HduEntry, nbytes: int | None = None) -> None:
        """Raise TruncatedFileError unless the first ``nbytes`` of the data (all by default) exist."""
        need = entry.data_size if nbytes is None else nbytes
        if entry.data_offset + need > self.size:
            have = max(0, self.size - entry.data_offset)
            raise TruncatedFileError(
                f"{self.path}: HDU {entry.index}: file is truncated: the data needs {need} bytes "
                f"from offset {entry.data_offset} but only {have} remain"
            )


# -- the per-process cache ------------------------------------------------------------------------
_CAPACITY = 256
_lock = threading.Lock()
_cache: OrderedDict[str, HduIndex] = OrderedDict()  # by the source's cache_key
_stats = {"hits": 0, "misses": 0}
# Sources whose index `invalidate` or `clear_index_cache` dropped: the next call opens them anew.
_dropped: weakref.WeakSet[ByteSource] = weakref.WeakSet()


def check_hdu_arg(hdu: Any) -> None:
    """Refuse a negative HDU index (each one of a list too) before any file is opened, with the
    1.x wording; other selectors are left to `HduIndex.resolve`."""
    if type(hdu) is int:  # the common case, on every header and image call
        if hdu < 0:
            raise ValueError(f"{NEGATIVE_HDU}, got {hdu}")
        return
    for h in hdu if isinstance(hdu, (list, tuple)) else (hdu,):
        if not isinstance(h, (bool, str)) and hasattr(h, "__index__") and h.__index__() < 0:
            raise ValueError(f"{NEGATIVE_HDU}, got {h.__index__()}")


def get_index(path: Any, storage_options: dict | None = None) -> HduIndex:
    """The HduIndex of the current version of ``path`` (cached; validated by stat each call).

    ``path`` may also be an fsspec URL (with ``storage_options``), a ``SourcePath``, bytes-like
    contents or a binary file object: whatever `open_source` opens.
    """
    if type(path) is not str and isinstance(path, HduIndex):
        return path
    src = open_source(path) if storage_options is None else \
        open_source(path, storage_options=storage_options)
    key = src.cache_key
    if key is None:
        return HduIndex(src.path, src.version, src)
    with _lock:
        idx = _cache.get(key)
        if idx is not None and idx.source is src:
            _cache.move_to_end(key)
            _stats["hits"] += 1
            return idx
        _stats["misses"] += 1
        stale = src in _dropped
    if stale:
        _dropped.discard(src)
        src = open_source(path, storage_options=storage_options, fresh=True)
        key = src.cache_key or key
    idx = HduIndex(src.path, src.version, src)
    with _lock:
        _cache[key] = idx
        _cache.move_to_end(key)
        while len(_cache) > _CAPACITY:
            _cache.popitem(last=False)
    return idx


def invalidate(path: Any) -> None:
    """Forget the cached index of ``path`` (writers call this after replacing a file)."""
    p = _fspath(path)
    with _lock:
        for key in [k for k in _cache if k == p or k.startswith(p + "\0")]:
            _dropped.add(_cache.pop(key).source)  # (a URL is cached under its storage options)


def cache_stats() -> dict:
    with _lock:
        return {"cache_size": len(_cache), **_stats}


def clear_index_cache(*, stats: bool = True, entries: bool = True) -> None:
    with _lock:
        if entries:
            for idx in _cache.values():
                _dropped.add(idx.source)
            _cache.clear()
        if stats:
            _stats["hits"] = _stats["misses"] = 0


def _fspath(path: Any) -> str:
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}") from None
    if isinstance(p, bytes):
        p = p.decode()
    if not p:
        raise ValueError("Path must be a non-empty string")
    return p


def suffix_hdu(path: str, suffix: Any, hdu: Any, default: Any) -> Any:
    """The HDU of ``path`` when a ``[...]`` path suffix named ``suffix`` and the caller passed
    ``hdu``: the suffix, when ``hdu`` is the default (``default``) or names the same HDU; an
    ``hdu`` naming another HDU (or several) is refused, naming the file and both."""
    if isinstance(hdu, list) and len(hdu) == 1:
        hdu = hdu[0]
    if hdu == default or hdu == suffix:
        return suffix
    pair = isinstance(hdu, tuple) and len(hdu) == 2 and isinstance(hdu[0], str) \
        and isinstance(hdu[1], int)
    if pair or not isinstance(hdu, (list, tuple)):
        index = get_index(path)
        if index.resolve(hdu).index == index.resolve(suffix).index:
            return suffix
    other = "several" if isinstance(hdu, (list, tuple)) and not pair else "another"
    raise ValueError(f"{path}: the path suffix selects HDU {suffix!r} and hdu={hdu!r} {other}; "
                     "give the HDU one way (drop hdu= or the suffix)")


def image_with_data(entry: HduEntry, *, compressed: bool = False) -> bool:
    """An image HDU (or, with ``compressed``, a tile-compressed one) holding at least one pixel:
    the HDUs that compressing, and image statistics, act on."""
    kinds = IMAGE_KINDS + (KIND_COMPRESSED,) if compressed else IMAGE_KINDS
    return entry.kind in kinds and bool(entry.naxes) and all(n > 0 for n in entry.naxes)

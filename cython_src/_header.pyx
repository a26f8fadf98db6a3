# cython: language_level=3
"""FITS header kernels: find where a header ends, and tokenize 80-byte cards into typed values.

Callers validate offsets; these functions only read inside ``[start, stop)`` of the buffer.
"""
from libc.stdint cimport uint8_t, int64_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memcmp

cdef enum:
    CARD = 80
    BLOCK = 2880

# Card kinds returned by parse_cards.
KIND_VALUE = 0       # KEY = value / comment
KIND_COMMENTARY = 1  # COMMENT, HISTORY, blank keyword, or any card without a value indicator
KIND_CONTINUE = 2    # CONTINUE 'string part'
KIND_END = 3


cdef inline bint _is_end_card(const uint8_t* p) noexcept nogil:
    cdef int i
    if p[0] != b'E' or p[1] != b'N' or p[2] != b'D':
        return False
    for i in range(3, 8):
        if p[i] != b' ':
            return False
    return True


def find_header_end(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t stop):
    """Return the offset just past the END card's 2880-byte block, or -1 if END is not found
    before ``stop``. ``start`` must be block aligned relative to the HDU."""
    cdef Py_ssize_t pos = start
    cdef Py_ssize_t end_at = -1
    if stop > buf.shape[0]:
        stop = buf.shape[0]
    with nogil:
        while pos + CARD <= stop:
            if _is_end_card(&buf[pos]):
                end_at = pos
                break
            pos += CARD
    if end_at < 0:
        return -1
    end_at = end_at + CARD
    return start + ((end_at - start + BLOCK - 1) // BLOCK) * BLOCK


def header_is_printable(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t stop):
    """True when every byte in ``[start, stop)`` is printable ASCII (FITS headers must be)."""
    cdef Py_ssize_t i
    cdef bint ok = True
    if stop > buf.shape[0]:
        stop = buf.shape[0]
    with nogil:
        for i in range(start, stop):
            if buf[i] < 32 or buf[i] > 126:
                ok = False
                break
    return ok


cdef inline Py_ssize_t _rstrip(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    while hi > lo and p[hi - 1] == b' ':
        hi -= 1
    return hi


cdef inline Py_ssize_t _lstrip(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    while lo < hi and p[lo] == b' ':
        lo += 1
    return lo


cdef str _text(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi):
    if hi <= lo:
        return ""
    return (<char*>p)[lo:hi].decode("latin-1")


cdef object _parse_number(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi):
    """Parse an integer or a real number; None if the token is neither."""
    cdef Py_ssize_t i = lo
    cdef bint is_int = True
    cdef bint digits = False
    cdef int64_t acc = 0
    cdef bint neg = False
    cdef char tmp[72]
    cdef char* endp
    cdef double d
    if i < hi and (p[i] == b'+' or p[i] == b'-'):
        neg = p[i] == b'-'
        i += 1
    if i >= hi:
        return None
    while i < hi:
        if b'0' <= p[i] <= b'9':
            digits = True
        elif p[i] in b'.eEdD+-':
            is_int = False
        else:
            return None
        i += 1
    if not digits:
        return None
    if is_int:
        if hi - lo <= 18:
            i = lo + 1 if (p[lo] == b'+' or p[lo] == b'-') else lo
            while i < hi:
                acc = acc * 10 + (p[i] - 48)
                i += 1
            return -acc if neg else acc
        return int(_text(p, lo, hi))
    if hi - lo >= 71:
        return None
    for i in range(lo, hi):
        tmp[i - lo] = b'E' if (p[i] == b'D' or p[i] == b'd') else p[i]
    tmp[hi - lo] = 0
    d = strtod(tmp, &endp)
    if endp != tmp + (hi - lo):
        return None
    return d


cdef object _parse_complex(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi):
    """``(re, im)`` → complex, or None."""
    cdef Py_ssize_t comma = -1, i
    if hi - lo < 5 or p[lo] != b'(' or p[hi - 1] != b')':
        return None
    for i in range(lo + 1, hi - 1):
        if p[i] == b',':
            comma = i
            break
    if comma < 0:
        return None
    re = _parse_number(p, _lstrip(p, lo + 1, comma), _rstrip(p, lo + 1, comma))
    im = _parse_number(p, _lstrip(p, comma + 1, hi - 1), _rstrip(p, comma + 1, hi - 1))
    if re is None or im is None:
        return None
    return complex(float(re), float(im))


cdef tuple _parse_value_field(const uint8_t* p, Py_ssize_t lo, Py_ssize_t hi):
    """Parse a value field ``p[lo:hi]`` into (value, comment, raw_value_text)."""
    cdef Py_ssize_t i, j, slash
    cdef bytearray out
    lo = _lstrip(p, lo, hi)
    if lo < hi and p[lo] == b"'":
        out = bytearray()
        i = lo + 1
        while i < hi:
            if p[i] == b"'":
                if i + 1 < hi and p[i + 1] == b"'":
                    out.append(39)
                    i += 2
                    continue
                break
            out.append(p[i])
            i += 1
        raw = _text(p, lo, i + 1 if i < hi else hi)
        # Trailing blanks in a string value are not significant; leading ones are.
        value = out.decode("latin-1").rstrip(" ")
        j = i + 1
        while j < hi and p[j] != b'/':
            j += 1
        comment = _text(p, _lstrip(p, j + 1, hi), _rstrip(p, j + 1, hi)) if j < hi else ""
        return value, comment, raw
    slash = lo
    # Complex values contain no '/', so the first '/' starts the comment.
    while slash < hi and p[slash] != b'/':
        slash += 1
    j = _rstrip(p, lo, slash)
    comment = _text(p, _lstrip(p, slash + 1, hi), _rstrip(p, slash + 1, hi)) if slash < hi else ""
    raw = _text(p, lo, j)
    if j <= lo:
        return None, comment, raw
    if j - lo == 1 and (p[lo] == b'T' or p[lo] == b'F'):
        return p[lo] == b'T', comment, raw
    value = _parse_number(p, lo, j)
    if value is None:
        value = _parse_complex(p, lo, j)
    if value is None:
        value = raw
    return value, comment, raw


def parse_cards(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t stop):
    """Tokenize the cards of one header in ``buf[start:stop]`` up to and including END.

    Returns a list of ``(kind, keyword, value, comment, raw_value)`` tuples. ``value`` is typed
    (bool, int, float, complex, str, or None for an undefined value); ``raw_value`` is the value
    field as written (quotes included for strings). Commentary cards carry their text as value.
    """
    cdef Py_ssize_t pos = start, k, key_end, eq
    cdef const uint8_t* p
    cdef list cards = []
    if stop > buf.shape[0]:
        stop = buf.shape[0]
    while pos + CARD <= stop:
        p = &buf[pos]
        if _is_end_card(p):
            cards.append((KIND_END, "END", None, "", ""))
            break
        key_end = _rstrip(p, 0, 8)
        keyword = _text(p, 0, key_end).upper()
        if keyword == "HIERARCH":
            eq = -1
            for k in range(8, CARD):
                if p[k] == b'=':
                    eq = k
                    break
                if p[k] == b"'":
                    break
            if eq > 0:
                name = _text(p, _lstrip(p, 8, eq), _rstrip(p, 8, eq))
                value, comment, raw = _parse_value_field(p, eq + 1, CARD)
                cards.append((KIND_VALUE, name, value, comment, raw))
                pos += CARD
                continue
        if p[8] == b'=' and p[9] == b' ' and keyword not in ("COMMENT", "HISTORY", ""):
            value, comment, raw = _parse_value_field(p, 10, CARD)
            cards.append((KIND_VALUE, keyword, value, comment, raw))
        elif keyword == "CONTINUE":
            value, comment, raw = _parse_value_field(p, 8, CARD)
            cards.append((KIND_CONTINUE, keyword, value, comment, raw))
        else:
            text = _text(p, 8, _rstrip(p, 8, CARD))
            cards.append((KIND_COMMENTARY, keyword, text, "", text))
        pos += CARD
    return cards


# Structural keywords the HDU index needs; anything else is skipped without building objects.
cdef const char* _STRUCTURAL[18]
_STRUCTURAL[:] = [
    b"SIMPLE  ", b"XTENSION", b"BITPIX  ", b"NAXIS   ", b"PCOUNT  ", b"GCOUNT  ", b"THEAP   ",
    b"EXTNAME ", b"EXTVER  ", b"ZIMAGE  ", b"ZCMPTYPE", b"TFIELDS ", b"ZBITPIX ", b"ZNAXIS  ",
    b"BSCALE  ", b"BZERO   ", b"BLANK   ", b"GROUPS  ",
]


cdef inline bint _is_structural(const uint8_t* p) noexcept nogil:
    cdef int i, k
    if p[8] != b'=':
        return False
    # NAXISn / ZNAXISn: a prefix followed by digits (and blanks).
    if memcmp(p, b"NAXIS", 5) == 0 or memcmp(p, b"ZNAXIS", 6) == 0:
        k = 5 if p[0] == b'N' else 6
        for i in range(k, 8):
            if not (b'0' <= p[i] <= b'9' or p[i] == b' '):
                return False
        return True
    for i in range(18):
        if memcmp(p, _STRUCTURAL[i], 8) == 0:
            return True
    return False


def scan_structural(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t stop):
    """Return ``{keyword: value}`` for the structural keywords of one header (first occurrence),
    including NAXISn and ZNAXISn, plus ``"__ncards__"``: the number of cards before END."""
    cdef Py_ssize_t pos = start, ncards = 0
    cdef const uint8_t* p
    cdef dict found = {}
    if stop > buf.shape[0]:
        stop = buf.shape[0]
    while pos + CARD <= stop:
        p = &buf[pos]
        if _is_end_card(p):
            break
        ncards += 1
        if _is_structural(p):
            keyword = _text(p, 0, _rstrip(p, 0, 8))
            if keyword not in found:
                found[keyword] = _parse_value_field(p, 10, CARD)[0]
        pos += CARD
    found["__ncards__"] = ncards
    return found


# -- the HDU walk ----------------------------------------------------------------------------------
# One C pass over the headers of a mapped file: each HDU's header and data offsets and its
# structural values go into a compact table (no Python object per keyword, none per HDU but an
# EXTNAME string). Only well-formed, ordinary HDUs are described here; the walk stops at any HDU
# it cannot describe exactly (a validation failure, an unusual value, a tile-compressed or
# random-groups HDU) and hands its offset back, so the caller's careful path decides it (and words
# its error) the way it always has.

from libc.stdlib cimport realloc, free

WALK_DONE = 0  # no further HDU: end of file, trailing bytes, or a last HDU cut short
WALK_SLOW = 1  # the HDU at the returned offset needs the caller's careful path

cdef enum:
    F_KIND = 0
    F_HEADER = 1
    F_DATA = 2
    F_SIZE = 3
    F_BITPIX = 4
    F_NAXIS = 5
    F_AXES = 6
    F_PCOUNT = 7
    F_GCOUNT = 8
    F_HEAP = 9
    F_HEAPSIZE = 10
    F_EXTVER = 11
    F_HAS_EXTVER = 12
    F_NCARDS = 13
    F_TFIELDS = 14
    NFIELDS = 15
    MAXAXES = 999

cdef int64_t _LIMIT = (<int64_t>1) << 60  # beyond this the careful path does the arithmetic


cdef inline uint64_t _key(const uint8_t* p) noexcept nogil:
    """Columns 1-8 of a card as one big-endian number: keyword tests are single compares."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return v


cdef uint64_t K_END = _key(b"END     ")
cdef uint64_t K_NAXIS = _key(b"NAXIS   ")
cdef uint64_t K_NAXIS_PREFIX = _key(b"NAXIS   ") >> 24  # the first five bytes

# The keywords the walk reads, one slot each (the first card of a keyword wins). The integer
# ones come first: each must hold a plain integer, else the careful path describes the HDU.
cdef enum:
    S_BITPIX = 0
    S_NAXIS = 1
    S_PCOUNT = 2
    S_GCOUNT = 3
    S_EXTVER = 4
    S_THEAP = 5
    S_TFIELDS = 6
    N_INT_SLOTS = 7
    S_XTENSION = 7  # parsed where it stands
    S_EXTNAME = 8   # parsed where it stands
    S_ZIMAGE = 9    # present or not
    S_GROUPS = 10   # present or not
    N_SLOTS = 11

cdef uint64_t _SLOT_KEY[N_SLOTS]
_SLOT_KEY[:] = [_key(k) for k in (b"BITPIX  ", b"NAXIS   ", b"PCOUNT  ", b"GCOUNT  ",
                                  b"EXTVER  ", b"THEAP   ", b"TFIELDS ", b"XTENSION",
                                  b"EXTNAME ", b"ZIMAGE  ", b"GROUPS  ")]
# Values of the integer keywords a header leaves out (NAXIS: none, THEAP: after the rows).
cdef int64_t _SLOT_DEFAULT[N_INT_SLOTS]
_SLOT_DEFAULT[:] = [0, -1, 0, 1, 0, -1, 0]


cdef inline int _slot_of(uint64_t key) noexcept nogil:
    cdef int s
    for s in range(N_SLOTS):
        if _SLOT_KEY[s] == key:
            return s
    return -1


cdef object _fast_string(const uint8_t* p):
    """A quoted value of plain printable ASCII without doubled quotes, stripped as the
    tokenizer's value would be by ``str.strip()``; None for anything else."""
    cdef Py_ssize_t lo = _lstrip(p, 10, CARD), i, a, b
    if lo >= CARD or p[lo] != b"'":
        return None
    i = lo + 1
    while i < CARD and p[i] != b"'":
        if p[i] < 32 or p[i] > 126:
            return None
        i += 1
    if i >= CARD or (i + 1 < CARD and p[i + 1] == b"'"):
        return None
    a = _lstrip(p, lo + 1, i)
    b = _rstrip(p, a, i)
    return (<char*>p)[a:b].decode("ascii")
_KINDS = ("primary", "image", "bintable", "table")


cdef inline bint _fast_int(const uint8_t* p, int64_t* out) noexcept nogil:
    """The value of card ``p`` when it is a plain integer of at most 18 characters (as the
    tokenizer reads it: an int64 there); False for anything else."""
    cdef Py_ssize_t lo = _lstrip(p, 10, CARD), hi = lo, i
    cdef int64_t acc = 0
    cdef bint neg = False
    while hi < CARD and p[hi] != b'/':
        hi += 1
    hi = _rstrip(p, lo, hi)
    if hi <= lo or hi - lo > 18:
        return False
    i = lo
    if p[i] == b'+' or p[i] == b'-':
        neg = p[i] == b'-'
        i += 1
    if i >= hi:
        return False
    while i < hi:
        if not (b'0' <= p[i] <= b'9'):
            return False
        acc = acc * 10 + (p[i] - 48)
        i += 1
    out[0] = -acc if neg else acc
    return True


cdef inline int _xtension_kind(const uint8_t* p) noexcept nogil:
    """Kind of a quoted XTENSION value without escapes (1 image, 2 bintable, 3 table), else -1."""
    cdef Py_ssize_t lo = _lstrip(p, 10, CARD), i, a, b, n, k
    cdef char word[9]
    if lo >= CARD or p[lo] != b"'":
        return -1
    i = lo + 1
    while i < CARD and p[i] != b"'":
        i += 1
    if i >= CARD or (i + 1 < CARD and p[i + 1] == b"'"):
        return -1
    a = _lstrip(p, lo + 1, i)
    b = _rstrip(p, a, i)
    n = b - a
    if n < 5 or n > 8:
        return -1
    for k in range(n):
        word[k] = p[a + k] - 32 if b'a' <= p[a + k] <= b'z' else p[a + k]
    if n == 5 and memcmp(word, b"IMAGE", 5) == 0:
        return 1
    if n == 5 and memcmp(word, b"TABLE", 5) == 0:
        return 3
    if n == 8 and (memcmp(word, b"IUEIMAGE", 8) == 0):
        return 1
    if n == 8 and (memcmp(word, b"BINTABLE", 8) == 0 or memcmp(word, b"A3DTABLE", 8) == 0):
        return 2
    return -1


cdef inline bint _mul(int64_t a, int64_t b, int64_t* out) noexcept nogil:
    """a * b for 0 ≤ a, b, False when the product passes _LIMIT."""
    if a != 0 and b > _LIMIT // a:
        return False
    out[0] = a * b
    return out[0] <= _LIMIT


cdef class HduRows:
    """Compact per-HDU rows filled by :meth:`walk`; :meth:`fields` builds one HDU's values."""

    cdef int64_t* rows
    cdef int64_t* axes
    cdef Py_ssize_t n, cap, naxes, axcap
    cdef list extnames
    # Scratch for one header: NAXISn values and the HDU that set them (first card wins).
    cdef int64_t ax_value[MAXAXES + 1]
    cdef int64_t ax_stamp[MAXAXES + 1]
    cdef int64_t stamp

    def __cinit__(self):
        self.rows = NULL
        self.axes = NULL
        self.n = self.cap = self.naxes = self.axcap = 0
        self.extnames = []
        self.stamp = 0
        cdef int k
        for k in range(MAXAXES + 1):
            self.ax_stamp[k] = -1

    def __dealloc__(self):
        free(self.rows)
        free(self.axes)

    def __len__(self):
        return self.n

    cdef int _grow(self, Py_ssize_t naxis) except -1:
        cdef int64_t* p
        cdef Py_ssize_t cap
        if self.n >= self.cap:
            cap = 64 if self.cap == 0 else 2 * self.cap
            p = <int64_t*>realloc(self.rows, cap * NFIELDS * sizeof(int64_t))
            if p == NULL:
                raise MemoryError()
            self.rows, self.cap = p, cap
        if self.naxes + naxis > self.axcap:
            cap = max(2 * self.axcap, self.naxes + naxis, 128)
            p = <int64_t*>realloc(self.axes, cap * sizeof(int64_t))
            if p == NULL:
                raise MemoryError()
            self.axes, self.axcap = p, cap
        return 0

    cdef Py_ssize_t _scan(self, const uint8_t* base, Py_ssize_t pos, Py_ssize_t stop,
                          Py_ssize_t* at, Py_ssize_t* ncards) noexcept nogil:
        """One pass over the cards of the header at ``pos``: ``at[slot]`` gets the offset of
        each table keyword's first card, NAXISn values go to the scratch arrays. Returns the
        offset of the END card, or -1 when no END comes before ``stop``."""
        cdef Py_ssize_t q = pos, k
        cdef uint64_t key
        cdef const uint8_t* p
        cdef int64_t v
        cdef int slot
        for slot in range(N_SLOTS):
            at[slot] = -1
        ncards[0] = 0
        while q + CARD <= stop:
            p = base + q
            key = _key(p)
            if key == K_END:
                return q
            ncards[0] += 1
            q += CARD
            if p[8] != b'=':
                continue
            if (key >> 24) == K_NAXIS_PREFIX and key != K_NAXIS:
                # NAXISn: digits (no leading zero) then blanks
                if not (b'1' <= p[5] <= b'9'):
                    continue
                v = p[5] - 48
                k = 6
                while k < 8 and b'0' <= p[k] <= b'9':
                    v = v * 10 + (p[k] - 48)
                    k += 1
                while k < 8 and p[k] == b' ':
                    k += 1
                if k < 8 or self.ax_stamp[v] == self.stamp:
                    continue
                self.ax_stamp[v] = self.stamp
                if not _fast_int(p, &self.ax_value[v]):
                    self.ax_value[v] = -1  # not a plain integer: the careful path decides
                continue
            slot = _slot_of(key)
            if slot >= 0 and at[slot] < 0:
                at[slot] = q - CARD
        return -1  # no END: the careful path says the header never ends

    cdef int _describe(self, const uint8_t* base, Py_ssize_t pos, Py_ssize_t stop,
                       Py_ssize_t index) except -2:
        """Append the row of the HDU whose header starts at ``pos`` (and must end before
        ``stop``); 0 when done, -1 when the careful path must describe it (nothing appended)."""
        cdef Py_ssize_t q, ncards, k, end
        cdef Py_ssize_t at[N_SLOTS]
        cdef int64_t val[N_INT_SLOTS]
        cdef int kind = 0 if index == 0 else -1
        cdef int64_t v, nelem, data_size, table_bytes = 0, bp
        cdef int64_t stamp
        cdef int slot
        self.stamp += 1
        stamp = self.stamp
        if index == 0 and memcmp(base + pos, b"SIMPLE  =", 9) != 0:
            return -1
        q = self._scan(base, pos, stop, at, &ncards)
        if q < 0:
            return -1
        for slot in range(N_INT_SLOTS):
            val[slot] = _SLOT_DEFAULT[slot]
            if at[slot] >= 0 and not _fast_int(base + at[slot], &val[slot]):
                return -1
        if index > 0 and at[S_XTENSION] >= 0:
            kind = _xtension_kind(base + at[S_XTENSION])
            if kind < 0:
                return -1
        cdef int64_t bitpix = val[S_BITPIX], naxis = val[S_NAXIS], pcount = val[S_PCOUNT]
        cdef int64_t gcount = val[S_GCOUNT], theap = val[S_THEAP], tfields = val[S_TFIELDS]
        # The header ends with the block holding END (cut short by the end of the file).
        end = pos + ((q + CARD - pos + BLOCK - 1) // BLOCK) * BLOCK
        if end > stop:
            end = stop
        if kind < 0 or at[S_BITPIX] < 0 or naxis < 0 or naxis > MAXAXES:
            return -1
        if not (bitpix == 8 or bitpix == 16 or bitpix == 32 or bitpix == 64 or bitpix == -32
                or bitpix == -64):
            return -1
        if kind == 2 and at[S_ZIMAGE] >= 0:
            return -1  # maybe tile-compressed
        if not (0 <= pcount <= _LIMIT and 0 <= gcount <= _LIMIT):
            return -1
        nelem = 1
        for k in range(1, naxis + 1):
            if self.ax_stamp[k] != stamp or self.ax_value[k] < 0 or self.ax_value[k] > _LIMIT:
                return -1
            if self.ax_value[k] == 0:
                nelem = 0
        if index == 0 and naxis > 0 and self.ax_value[1] == 0 and at[S_GROUPS] >= 0:
            return -1  # random groups
        if naxis == 0:
            nelem = 0
        if nelem != 0:
            for k in range(1, naxis + 1):
                if not _mul(nelem, self.ax_value[k], &nelem):
                    return -1
        bp = (bitpix if bitpix > 0 else -bitpix) // 8
        if pcount + nelem > _LIMIT:
            return -1
        if not _mul(bp, gcount, &data_size) or not _mul(data_size, pcount + nelem, &data_size):
            return -1
        if kind >= 2:
            if naxis >= 2 and not _mul(self.ax_value[1], self.ax_value[2], &table_bytes):
                return -1
            if at[S_THEAP] < 0:
                theap = table_bytes
            # THEAP outside the rows..PCOUNT span: Python's path names the error
            if pcount and (theap < table_bytes or theap - table_bytes > pcount):
                return -1
            if not 0 <= tfields <= 999:
                return -1
        self._grow(naxis)
        cdef int64_t* row = self.rows + self.n * NFIELDS
        row[F_KIND] = kind
        row[F_HEADER] = pos
        row[F_DATA] = end
        row[F_SIZE] = data_size
        row[F_BITPIX] = bitpix
        row[F_NAXIS] = naxis
        row[F_AXES] = self.naxes
        for k in range(1, naxis + 1):
            self.axes[self.naxes + k - 1] = self.ax_value[k]
        row[F_PCOUNT] = pcount
        row[F_GCOUNT] = gcount
        if kind >= 2:
            row[F_HEAP] = end + theap
            v = table_bytes + pcount - theap
            row[F_HEAPSIZE] = v if v > 0 else 0
            row[F_TFIELDS] = tfields
        else:
            row[F_HEAP] = row[F_HEAPSIZE] = row[F_TFIELDS] = 0
        row[F_EXTVER] = val[S_EXTVER]
        row[F_HAS_EXTVER] = at[S_EXTVER] >= 0
        row[F_NCARDS] = ncards
        if at[S_EXTNAME] >= 0:
            # As the tokenizer reads it: a string (stripped) names the HDU, anything else not.
            value = _fast_string(base + at[S_EXTNAME])
            if value is None:
                value = _parse_value_field(base + at[S_EXTNAME], 10, CARD)[0]
                value = value.strip() if isinstance(value, str) else None
            self.extnames.append(value)
        else:
            self.extnames.append(None)
        self.naxes += naxis
        self.n += 1
        return 0

    def walk(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t size, Py_ssize_t index,
             list items):
        """Describe the HDUs from ``pos`` (the ``index``-th HDU) on, appending each new row's
        number to ``items``. Returns ``(pos, status)``: ``WALK_DONE`` when no HDU follows,
        ``WALK_SLOW`` when the HDU at ``pos`` needs the careful path."""
        cdef const uint8_t* base = &buf[0]
        cdef Py_ssize_t check_end, i
        cdef int64_t* row
        if size > buf.shape[0]:
            return pos, WALK_SLOW  # fewer bytes than the file claims: the careful path
        while pos < size:
            if index > 0 and (pos + 9 > size or memcmp(base + pos, b"XTENSION=", 9) != 0):
                return pos, WALK_DONE  # trailing bytes after the last HDU
            check_end = pos + (BLOCK if index == 0 else CARD)
            if check_end > size:
                check_end = size
            for i in range(pos, check_end):
                if base[i] < 32 or base[i] > 126:
                    return pos, (WALK_SLOW if index == 0 else WALK_DONE)
            if self._describe(base, pos, size, index) < 0:
                return pos, WALK_SLOW
            items.append(self.n - 1)
            index += 1
            row = self.rows + (self.n - 1) * NFIELDS
            if row[F_DATA] + row[F_SIZE] > size:
                return pos, WALK_DONE  # the data is cut short: nothing can follow
            pos = row[F_DATA] + ((row[F_SIZE] + BLOCK - 1) // BLOCK) * BLOCK
        return pos, WALK_DONE

    def fields(self, Py_ssize_t r, Py_ssize_t index):
        """The HduEntry fields of row ``r`` (HDU number ``index``), in declaration order up to
        ``zcmptype``: index, kind, header_offset, data_offset, data_size, bitpix, naxes, pcount,
        gcount, heap_offset, heap_size, extname, extver, ncards, tfields, zcmptype (None: the
        walk never describes a tile-compressed HDU)."""
        if not 0 <= r < self.n:
            raise IndexError(r)
        cdef int64_t* row = self.rows + r * NFIELDS
        cdef int64_t* ax = self.axes + row[F_AXES]
        naxes = tuple([ax[k] for k in range(row[F_NAXIS])])
        return (index, _KINDS[row[F_KIND]], row[F_HEADER], row[F_DATA], row[F_SIZE],
                row[F_BITPIX], naxes, row[F_PCOUNT], row[F_GCOUNT], row[F_HEAP], row[F_HEAPSIZE],
                self.extnames[r], row[F_EXTVER] if row[F_HAS_EXTVER] else None, row[F_NCARDS],
                row[F_TFIELDS], None)

    def extname(self, Py_ssize_t r):
        """EXTNAME of row ``r`` (stripped), or None."""
        return self.extnames[r]

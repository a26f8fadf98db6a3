# cython: language_level=3
"""FITS header kernels: find where a header ends, and tokenize 80-byte cards into typed values.

Callers validate offsets; these functions only read inside ``[start, stop)`` of the buffer.
"""
from libc.stdint cimport uint8_t, int64_t
from libc.stdlib cimport strtod
from libc.string cimport memcmp, memcpy

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

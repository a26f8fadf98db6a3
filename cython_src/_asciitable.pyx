# cython: language_level=3
"""ASCII-table decode kernel: fixed-width text fields (Aw, Iw, Fw.d, Ew.d, Dw.d) → column buffers.

Like the binary-table kernel it makes one pass over the row bytes for all projected columns,
without the GIL, writing into outputs the caller allocated and bounds the caller checked.
"""
from libc.stdint cimport uint8_t, int32_t, int64_t, INT32_MIN, INT32_MAX, INT64_MAX
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free, strtod
from libc.math cimport NAN

from _tablecommon cimport set_bit, put_string

cdef enum:
    FOP_COPY = 0      # raw field bytes (binary output, or the uint8 matrix of the torch mapping)
    FOP_STRING = 1    # Arrow string, trailing padding stripped
    FOP_INT = 2       # Iw → int32/int64, or float64 physical when scaled
    FOP_FLOAT = 3     # Fw.d/Ew.d/Dw.d → float32/float64

cdef enum:
    FP_OP = 0
    FP_SRC_OFF = 1    # byte offset of the field in a row
    FP_WIDTH = 2      # field width w
    FP_DECIMALS = 3   # d: digits after an implied decimal point when the field has none
    FP_DST_SIZE = 4   # bytes of one output value (4 or 8)
    FP_SCALED = 5     # 1: output float64 TZERO + TSCAL * value
    FP_TNULL_OFF = 6  # offset of the trimmed TNULL text in the tnull blob (-1: none)
    FP_TNULL_LEN = 7
    FP_OUT = 8        # address of the values output
    FP_VALID = 9      # address of the validity bitmap (0: undefined fields read as 0 / NaN)
    FP_OFFSETS = 10   # address of the int32 string offsets (FOP_STRING)
    FP_STRIP = 11     # STRIP_* mode (FOP_STRING)
    FP_NFIELDS = 12

cdef enum:
    FS_NULLS = 0
    FS_HIGH = 1       # 1 when a string field held a byte >= 0x80
    FS_BAD = 2        # first output row whose field does not parse (-1: none)
    FS_NFIELDS = 3

cdef enum:
    BLOCK = 256

OP_COPY = FOP_COPY
OP_STRING = FOP_STRING
OP_INT = FOP_INT
OP_FLOAT = FOP_FLOAT
P_OP = FP_OP
P_SRC_OFF = FP_SRC_OFF
P_WIDTH = FP_WIDTH
P_DECIMALS = FP_DECIMALS
P_DST_SIZE = FP_DST_SIZE
P_SCALED = FP_SCALED
P_TNULL_OFF = FP_TNULL_OFF
P_TNULL_LEN = FP_TNULL_LEN
P_OUT = FP_OUT
P_VALID = FP_VALID
P_OFFSETS = FP_OFFSETS
P_STRIP = FP_STRIP
P_NFIELDS = FP_NFIELDS
S_NULLS = FS_NULLS
S_HIGH = FS_HIGH
S_BAD = FS_BAD
S_NFIELDS = FS_NFIELDS


ctypedef struct Col:
    int op
    int dst_size
    int scaled
    int strip
    Py_ssize_t src_off
    Py_ssize_t width
    Py_ssize_t decimals
    const uint8_t* tnull
    Py_ssize_t tnull_len
    double scal
    double zero
    uint8_t* out
    uint8_t* valid
    int32_t* offsets
    Py_ssize_t pos
    int64_t nulls
    int64_t high
    int64_t bad


cdef inline bint is_blank(uint8_t ch) noexcept nogil:
    return ch == 32 or ch == 0


cdef inline bint is_digit(uint8_t ch) noexcept nogil:
    return 48 <= ch <= 57


cdef inline bint trim(const uint8_t* s, Py_ssize_t w, Py_ssize_t* a, Py_ssize_t* b) noexcept nogil:
    """Bounds of the field without leading/trailing blanks; False when the field is blank."""
    cdef Py_ssize_t i = 0, j = w
    while i < j and is_blank(s[i]):
        i += 1
    while j > i and is_blank(s[j - 1]):
        j -= 1
    a[0] = i
    b[0] = j
    return j > i


cdef inline bint parse_int(const uint8_t* s, Py_ssize_t n, int64_t* out) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef uint8_t d
    cdef int64_t v = 0
    if s[0] == 43 or s[0] == 45:    # '+', '-'
        neg = s[0] == 45
        i = 1
    if i >= n:
        return False
    while i < n:
        if not is_digit(s[i]):
            return False
        d = s[i] - 48
        # Accumulate negatively so INT64_MIN itself parses.
        if v < (-INT64_MAX - 1 + d) // 10:
            return False
        v = v * 10 - d
        i += 1
    if not neg:
        if v == -INT64_MAX - 1:
            return False
        v = -v
    out[0] = v
    return True


cdef bint parse_real(const uint8_t* s, Py_ssize_t n, Py_ssize_t decimals, char* buf,
                     double* out) noexcept nogil:
    """Parse a Fortran real: optional sign, digits with an optional point, an optional exponent
    introduced by E, D or a bare sign. Without a point, the last ``decimals`` digits are the
    fraction (the Fortran rule the FITS standard adopts). ``buf`` holds n + decimals + 8 bytes.
    """
    cdef Py_ssize_t i = 0, k = 0, j, ndig = 0, dig0
    cdef bint point = False
    cdef char* end
    if s[0] == 43 or s[0] == 45:
        buf[k] = <char>s[0]
        k += 1
        i = 1
    dig0 = k
    while i < n and (is_digit(s[i]) or s[i] == 46):
        if s[i] == 46:
            if point:
                return False
            point = True
        else:
            ndig += 1
        buf[k] = <char>s[i]
        k += 1
        i += 1
    if ndig == 0:
        # Not a Fortran number; strtod still reads inf/nan spellings some writers use.
        memcpy(buf, s, n)
        buf[n] = 0
        out[0] = strtod(buf, &end)
        return end == buf + n and n > 0
    if not point and decimals > 0:
        # Insert the implied point `decimals` digits from the right, zero-padding on the left.
        if ndig <= decimals:
            for j in range(k - 1, dig0 - 1, -1):
                buf[j + 2 + decimals - ndig] = buf[j]
            buf[dig0] = 48
            buf[dig0 + 1] = 46
            for j in range(decimals - ndig):
                buf[dig0 + 2 + j] = 48
            k += 2 + decimals - ndig
        else:
            for j in range(k - 1, k - 1 - decimals, -1):
                buf[j + 1] = buf[j]
            buf[k - decimals] = 46
            k += 1
    if i < n:
        if s[i] == 69 or s[i] == 101 or s[i] == 68 or s[i] == 100:   # E e D d
            i += 1
        elif not (s[i] == 43 or s[i] == 45):
            return False
        buf[k] = 69
        k += 1
        if i < n and (s[i] == 43 or s[i] == 45):
            buf[k] = <char>s[i]
            k += 1
            i += 1
        if i >= n:
            return False
        while i < n:
            if not is_digit(s[i]):
                return False
            buf[k] = <char>s[i]
            k += 1
            i += 1
    buf[k] = 0
    out[0] = strtod(buf, &end)
    return end == buf + k


cdef inline bint matches(const uint8_t* s, Py_ssize_t n,
                         const uint8_t* t, Py_ssize_t tn) noexcept nogil:
    cdef Py_ssize_t i
    if n != tn:
        return False
    for i in range(n):
        if s[i] != t[i]:
            return False
    return True


cdef void run_number(Col* c, const uint8_t* field, Py_ssize_t idx, char* buf) noexcept nogil:
    cdef Py_ssize_t a, b
    cdef int64_t iv = 0
    cdef double dv = 0.0
    cdef bint ok, undefined
    cdef bint nonblank = trim(field, c.width, &a, &b)
    undefined = not nonblank or (
        c.tnull != NULL and matches(field + a, b - a, c.tnull, c.tnull_len))
    if undefined and c.valid != NULL:
        c.nulls += 1
        ok = False
    else:
        if c.op == FOP_INT:
            ok = nonblank and parse_int(field + a, b - a, &iv)
            if ok and c.dst_size == 4 and not c.scaled and (iv < INT32_MIN or iv > INT32_MAX):
                ok = False
        else:
            ok = nonblank and parse_real(field + a, b - a, c.decimals, buf, &dv)
        if not ok and not undefined and c.bad < 0:
            c.bad = idx
        if c.valid != NULL:
            if ok:
                set_bit(c.valid, idx)
            else:
                c.nulls += 1
    # An undefined field reads as 0 (integers) or NaN (reals) in its value slot.
    if c.scaled:
        if not ok:
            (<double*>c.out)[idx] = NAN
        elif c.op == FOP_INT:
            (<double*>c.out)[idx] = <double>iv * c.scal + c.zero
        else:
            (<double*>c.out)[idx] = dv * c.scal + c.zero
    elif c.op == FOP_INT:
        if c.dst_size == 4:
            (<int32_t*>c.out)[idx] = <int32_t>iv if ok else 0
        else:
            (<int64_t*>c.out)[idx] = iv if ok else 0
    elif c.dst_size == 4:
        (<float*>c.out)[idx] = <float>dv if ok else <float>NAN
    else:
        (<double*>c.out)[idx] = dv if ok else NAN


def decode_rows(const uint8_t[::1] data, Py_ssize_t row_bytes, Py_ssize_t first_row,
                const int64_t[::1] rows, Py_ssize_t out_start, Py_ssize_t nrows,
                const int64_t[:, ::1] prog, const double[:, ::1] scale,
                const uint8_t[::1] tnulls, int64_t[:, ::1] stats) -> None:
    """Decode output rows ``out_start .. out_start + nrows`` of every column in ``prog``.

    Row selection and bounds follow ``torchfits._kernels._bintable.decode_rows``. ``tnulls`` holds the
    trimmed TNULL texts the program points into. ``stats`` receives null counts, the non-ASCII
    flag and the first output row whose field does not parse (caller-initialised to -1).
    """
    cdef Py_ssize_t ncols = prog.shape[0]
    cdef Py_ssize_t b, k, m, i, maxw = 0
    cdef const uint8_t* base
    cdef const uint8_t* rp[BLOCK]
    cdef const uint8_t* field
    cdef bint use_rows = rows is not None
    cdef const int64_t* rix = NULL
    cdef Col* cols
    cdef Col* c
    cdef char* buf
    if nrows <= 0 or ncols == 0:
        return
    if prog.shape[1] < FP_NFIELDS or scale.shape[0] != ncols or stats.shape[0] != ncols:
        raise ValueError("malformed column program")
    if use_rows:
        rix = &rows[0]
    base = &data[0]
    cols = <Col*>malloc(ncols * sizeof(Col))
    if cols == NULL:
        raise MemoryError()
    for i in range(ncols):
        c = &cols[i]
        c.op = <int>prog[i, FP_OP]
        c.src_off = prog[i, FP_SRC_OFF]
        c.width = prog[i, FP_WIDTH]
        c.decimals = prog[i, FP_DECIMALS]
        c.dst_size = <int>prog[i, FP_DST_SIZE]
        c.scaled = <int>prog[i, FP_SCALED]
        c.tnull = &tnulls[0] + prog[i, FP_TNULL_OFF] if prog[i, FP_TNULL_OFF] >= 0 else NULL
        c.tnull_len = prog[i, FP_TNULL_LEN]
        c.out = <uint8_t*><Py_ssize_t>prog[i, FP_OUT]
        c.valid = <uint8_t*><Py_ssize_t>prog[i, FP_VALID]
        c.offsets = <int32_t*><Py_ssize_t>prog[i, FP_OFFSETS]
        c.strip = <int>prog[i, FP_STRIP]
        c.scal = scale[i, 0]
        c.zero = scale[i, 1]
        c.pos = out_start * c.width
        c.nulls = 0
        c.high = 0
        c.bad = -1
        if c.width + c.decimals > maxw:
            maxw = c.width + c.decimals
    buf = <char*>malloc(maxw + 16)
    if buf == NULL:
        free(cols)
        raise MemoryError()
    try:
        with nogil:
            b = 0
            while b < nrows:
                m = nrows - b if nrows - b < BLOCK else BLOCK
                for k in range(m):
                    if use_rows:
                        rp[k] = base + rix[out_start + b + k] * row_bytes
                    else:
                        rp[k] = base + (first_row + out_start + b + k) * row_bytes
                for i in range(ncols):
                    c = &cols[i]
                    if c.op == FOP_STRING:
                        for k in range(m):
                            c.pos = put_string(rp[k] + c.src_off, c.width, c.strip, c.out, c.pos,
                                               c.offsets, out_start + b + k, &c.high)
                    elif c.op == FOP_COPY:
                        for k in range(m):
                            memcpy(c.out + (out_start + b + k) * c.width, rp[k] + c.src_off,
                                   c.width)
                    else:
                        for k in range(m):
                            field = rp[k] + c.src_off
                            run_number(c, field, out_start + b + k, buf)
                b += m
        for i in range(ncols):
            stats[i, FS_NULLS] += cols[i].nulls
            stats[i, FS_HIGH] |= cols[i].high
            if cols[i].bad >= 0 and (stats[i, FS_BAD] < 0 or cols[i].bad < stats[i, FS_BAD]):
                stats[i, FS_BAD] = cols[i].bad
    finally:
        free(buf)
        free(cols)

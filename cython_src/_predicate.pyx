# cython: language_level=3
"""Predicate kernel: evaluate a compiled where-program on raw big-endian table rows.

Three-valued logic per row (false, true, unknown); only rows that end true are selected.
The program is planned in Python (`torchfits.query.pushdown`); this module only runs it, GIL-free.
`select_rows` runs any program (three-valued, a stack of 1,024-row blocks); `select_conjunction`
runs the common case, an AND of simple tests, with every test of a block evaluated while the
block is in cache.
"""
from libc.stdint cimport uint8_t, int64_t, uint64_t
from libc.string cimport memset

from _bswap cimport load_i16, load_i32, load_i64, load_f32, load_f64
from _conjunction cimport (Test, load_bits, load_float, keep_indexed, select_block, load_tests,
                           in_ra_window, TEST_INTS, TEST_FLOATS)

# opcodes
OP_CONST = 0
OP_CMP_INT = 1
OP_CMP_FLOAT = 2
OP_CMP_BOOL = 3
OP_ISNULL = 4
OP_AND = 5
OP_OR = 6
OP_NOT = 7
OP_RA_WINDOW = 8  # an RA window of a cone's box (floats: TSCAL, TZERO, start, width)

# stored element types
SRC_U8 = 1
SRC_I16 = 2
SRC_I32 = 3
SRC_I64 = 4
SRC_F32 = 5
SRC_F64 = 6
SRC_L = 7

# comparison operators
CMP_EQ = 0
CMP_NE = 1
CMP_LT = 2
CMP_LE = 3
CMP_GT = 4
CMP_GE = 5

# instruction fields (columns of the int64 program)
F_OP = 0
F_OFFSET = 1
F_SRC = 2
F_CMP = 3
F_HAS_NULL = 4
F_NULL = 5
F_LIT = 6
F_BITS = 7
F_SCALED = 8
NFIELDS = 9

cdef enum:
    FALSE = 0
    TRUE = 1
    UNKNOWN = 2
    CHUNK = 1024
    MAX_DEPTH = 64


cdef inline uint8_t _cmp_i(int64_t a, int op, int64_t b) noexcept nogil:
    if op == 0:
        return a == b
    if op == 1:
        return a != b
    if op == 2:
        return a < b
    if op == 3:
        return a <= b
    if op == 4:
        return a > b
    return a >= b


cdef inline uint8_t _cmp_f(double a, int op, double b) noexcept nogil:
    if op == 0:
        return a == b
    if op == 1:
        return a != b
    if op == 2:
        return a < b
    if op == 3:
        return a <= b
    if op == 4:
        return a > b
    return a >= b


cdef inline void _lut(int cmp, uint8_t* lut) noexcept nogil:
    """Result by comparison class: index 1 = less, 2 = equal, 4 = greater, 0 = NaN (unknown)."""
    cdef int c
    for c in range(8):
        lut[c] = UNKNOWN
    lut[1] = cmp == 1 or cmp == 2 or cmp == 3
    lut[2] = cmp == 0 or cmp == 3 or cmp == 5
    lut[4] = cmp == 1 or cmp == 4 or cmp == 5


cdef inline const uint8_t* _row(const uint8_t* data, Py_ssize_t row_bytes, const int64_t* rows,
                                int64_t first, Py_ssize_t k) noexcept nogil:
    return data + (rows[k] if rows != NULL else first + k) * row_bytes


cdef void _leaf(const int64_t* ins, double scal, double zero, double flit, double flit2,
                const uint8_t* data, Py_ssize_t row_bytes, const int64_t* rows, int64_t first,
                Py_ssize_t n, uint8_t* st) noexcept nogil:
    cdef int op = <int>ins[0]
    cdef int64_t off = ins[1]
    cdef int src = <int>ins[2]
    cdef int cmp = <int>ins[3]
    cdef bint has_null = ins[4] != 0
    cdef uint64_t tnull = <uint64_t>ins[5]
    cdef int64_t lit = ins[6]
    cdef int bits = <int>ins[7]
    cdef bint scaled = ins[8] != 0
    cdef Py_ssize_t k
    cdef const uint8_t* p
    cdef double v
    cdef float f
    cdef int64_t iv
    cdef uint8_t lut[8]
    cdef uint8_t b
    data = data + off
    if op == 3:  # logical: 'T' true, 'F' false, a zero byte undefined
        _lut(cmp, lut)
        for k in range(n):
            b = _row(data, row_bytes, rows, first, k)[0]
            iv = 1 if b == 84 else 0
            st[k] = (UNKNOWN if (b == 0 and has_null)
                     else lut[(iv < lit) + 2 * (iv == lit) + 4 * (iv > lit)])
        return
    if op == 4:  # IS NULL (lit holds 1 for IS NOT NULL)
        for k in range(n):
            p = _row(data, row_bytes, rows, first, k)
            if src == 7:
                b = has_null and p[0] == 0
            else:
                b = has_null and load_bits(p, src) == tnull
            st[k] = b ^ (lit != 0)
        return
    _lut(cmp, lut)
    if op == 8:  # the value (as the decoder makes it) in the RA window [flit, flit + flit2]
        for k in range(n):
            p = _row(data, row_bytes, rows, first, k)
            if scaled:
                v = load_float(p, src) * scal + zero
                if bits == 32:
                    f = <float>v
                    v = f
            else:
                v = load_f32(p) if src == 5 else load_f64(p)
            st[k] = in_ra_window(v, flit, flit2)
    # One tight loop per stored type: the class (less/equal/greater/NaN) indexes the table.
    elif op == 1:
        if src == 1:
            for k in range(n):
                iv = _row(data, row_bytes, rows, first, k)[0]
                st[k] = lut[(iv < lit) + 2 * (iv == lit) + 4 * (iv > lit)]
        elif src == 2:
            for k in range(n):
                iv = load_i16(_row(data, row_bytes, rows, first, k))
                st[k] = lut[(iv < lit) + 2 * (iv == lit) + 4 * (iv > lit)]
        elif src == 3:
            for k in range(n):
                iv = load_i32(_row(data, row_bytes, rows, first, k))
                st[k] = lut[(iv < lit) + 2 * (iv == lit) + 4 * (iv > lit)]
        else:
            for k in range(n):
                iv = load_i64(_row(data, row_bytes, rows, first, k))
                st[k] = lut[(iv < lit) + 2 * (iv == lit) + 4 * (iv > lit)]
    elif src == 5 and not scaled:
        for k in range(n):
            v = load_f32(_row(data, row_bytes, rows, first, k))
            st[k] = lut[(v < flit) + 2 * (v == flit) + 4 * (v > flit)]
    elif src == 6 and not scaled:
        for k in range(n):
            v = load_f64(_row(data, row_bytes, rows, first, k))
            st[k] = lut[(v < flit) + 2 * (v == flit) + 4 * (v > flit)]
    else:
        # Scaled values, exactly as the decoder computes them (stored * TSCAL + TZERO).
        for k in range(n):
            v = load_float(_row(data, row_bytes, rows, first, k), src) * scal + zero
            if bits == 32:
                f = <float>v
                v = f
            st[k] = lut[(v < flit) + 2 * (v == flit) + 4 * (v > flit)]
    if has_null:
        for k in range(n):
            if load_bits(_row(data, row_bytes, rows, first, k), src) == tnull:
                st[k] = UNKNOWN


cdef inline void _and(uint8_t* a, const uint8_t* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        if a[k] == FALSE or b[k] == FALSE:
            a[k] = FALSE
        elif a[k] == TRUE and b[k] == TRUE:
            a[k] = TRUE
        else:
            a[k] = UNKNOWN


cdef inline void _or(uint8_t* a, const uint8_t* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        if a[k] == TRUE or b[k] == TRUE:
            a[k] = TRUE
        elif a[k] == FALSE and b[k] == FALSE:
            a[k] = FALSE
        else:
            a[k] = UNKNOWN


cdef inline void _not(uint8_t* a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        if a[k] != UNKNOWN:
            a[k] = 1 - a[k]


def select_rows(const uint8_t[::1] data, Py_ssize_t row_bytes, const int64_t[:, ::1] program,
                const double[:, ::1] floats, int64_t first, Py_ssize_t nrows,
                const int64_t[::1] rows, int64_t[::1] out):
    """Evaluate ``program`` on table rows ``first .. first+nrows`` (or on ``rows`` when it is
    not empty) and write the row numbers that are true into ``out``; return their count.

    ``floats[i]`` holds (TSCAL, TZERO, float literal, second float literal) of instruction
    ``i``. The caller checks
    every row lies inside ``data`` and that the program is well formed.
    """
    cdef Py_ssize_t nins = program.shape[0]
    cdef Py_ssize_t total = rows.shape[0] if rows.shape[0] > 0 else nrows
    cdef Py_ssize_t done = 0, n, k, i, found = 0
    cdef int depth, op
    cdef uint8_t stack[MAX_DEPTH][CHUNK]
    cdef const int64_t* rp = NULL
    cdef const uint8_t* base = &data[0] if data.shape[0] > 0 else NULL
    if program.shape[1] != NFIELDS or floats.shape[0] != nins or floats.shape[1] != 4:
        raise ValueError("malformed predicate program")
    if out.shape[0] < total:
        raise ValueError("output buffer too small")
    depth = 0
    for i in range(nins):
        op = <int>program[i, 0]
        if op <= 4 or op == 8:
            depth += 1
        elif op == 7:
            if depth < 1:
                raise ValueError("malformed predicate program")
        else:
            depth -= 1
            if depth < 1:
                raise ValueError("malformed predicate program")
        if depth > MAX_DEPTH:
            raise ValueError("predicate too deeply nested for the kernel")
    if depth != 1:
        raise ValueError("malformed predicate program")
    if total == 0:
        return 0
    with nogil:
        while done < total:
            n = total - done if total - done < CHUNK else CHUNK
            if rows.shape[0] > 0:
                rp = &rows[done]
            depth = 0
            for i in range(nins):
                op = <int>program[i, 0]
                if op == 0:
                    memset(stack[depth], <int>program[i, 6], n)
                    depth += 1
                elif op <= 4 or op == 8:
                    _leaf(&program[i, 0], floats[i, 0], floats[i, 1], floats[i, 2], floats[i, 3],
                          base, row_bytes, rp, first + done, n, stack[depth])
                    depth += 1
                elif op == 5:
                    _and(stack[depth - 2], stack[depth - 1], n)
                    depth -= 1
                elif op == 6:
                    _or(stack[depth - 2], stack[depth - 1], n)
                    depth -= 1
                else:
                    _not(stack[depth - 1], n)
            for k in range(n):
                if stack[0][k] == TRUE:
                    out[found] = rp[k] if rp != NULL else first + done + k
                    found += 1
            done += n
    return found


# ---------------------------------------------------------------------------------------------
# Conjunctions of simple tests: the common where-clause (``a < 1 AND b BETWEEN 2 AND 3 ...``).
#
# Every test of a block of rows runs while the block is in cache; the first test lists the rows
# of the block that pass, each later test keeps those of the list that pass it too (branch-free
# compaction), so a selective first test leaves little work for the rest. A row is selected when
# every test is TRUE; in a conjunction an unknown (null, NaN) never selects, so the tests are
# two-valued. Ranges are inclusive: the planner turns strict bounds into inclusive ones and
# merges the tests of one column (BETWEEN, ``a > 1 AND a < 5``) into a single range test.

# test kinds
T_FALSE = 0       # no row passes (a constant false or unknown term)
T_INT_RANGE = 1   # lo <= stored integer <= hi
T_INT_NE = 2      # stored integer != lit
T_FLOAT_RANGE = 3  # flo <= value <= fhi (NaN fails)
T_FLOAT_NE = 4    # value != flit and value is not NaN
T_BOOL = 5        # logical: ('T' == 1) == lit (EQ) or != lit (NE); undefined fails if nullable
T_ISNULL = 6      # (is null) != lit
T_RA_WINDOW = 7   # value in the RA window of width fhi from flo, across 360/0 (NaN fails)

# integer fields of a test row
T_KIND = 0
T_OFFSET = 1
T_SRC = 2
T_HAS_NULL = 3
T_NULL = 4
T_LO = 5
T_HI = 6
T_LIT = 7
T_SCALED = 8
T_BITS = 9
T_CMP = 10
T_NFIELDS = TEST_INTS
# float fields
D_SCAL = 0
D_ZERO = 1
D_LO = 2
D_HI = 3
D_NFIELDS = TEST_FLOATS


def select_conjunction(const uint8_t[::1] data, Py_ssize_t row_bytes, const int64_t[:, ::1] tests,
                       const double[:, ::1] floats, int64_t first, Py_ssize_t nrows,
                       const int64_t[::1] rows, int64_t[::1] out):
    """Select the rows that pass every test of ``tests`` (rows of ``T_NFIELDS`` integers, with
    ``floats`` rows of ``D_NFIELDS``), among rows ``first .. first+nrows`` or among ``rows``
    when it is not empty; write their row numbers to ``out`` and return their count.

    The caller checks that every row and every tested field lies inside ``data``.
    """
    cdef Py_ssize_t ntests = tests.shape[0]
    cdef Py_ssize_t total = rows.shape[0] if rows.shape[0] > 0 else nrows
    cdef Py_ssize_t done = 0, n, k, i, m, found = 0
    cdef Py_ssize_t idx[CHUNK]
    cdef const uint8_t* ptr[CHUNK]
    cdef const uint8_t* base = &data[0] if data.shape[0] > 0 else NULL
    cdef bytearray ts_bytes = bytearray(max(ntests, 1) * sizeof(Test))
    cdef Test* ts = <Test*><char*>ts_bytes
    load_tests(tests, floats, ts)
    if out.shape[0] < total:
        raise ValueError("output buffer too small")
    if total == 0:
        return 0
    with nogil:
        while done < total:
            n = total - done if total - done < CHUNK else CHUNK
            if rows.shape[0] > 0:
                for k in range(n):
                    idx[k] = k
                    ptr[k] = base + rows[done + k] * row_bytes
                m = n
                for i in range(ntests):
                    m = keep_indexed(&ts[i], ptr, idx, m)
                    if m == 0:
                        break
                for k in range(m):
                    out[found + k] = rows[done + idx[k]]
            else:
                # A contiguous block: each test addresses its rows by stride.
                m = select_block(ts, ntests, base + (first + done) * row_bytes, row_bytes, idx, n)
                for k in range(m):
                    out[found + k] = first + done + idx[k]
            found += m
            done += n
    return found

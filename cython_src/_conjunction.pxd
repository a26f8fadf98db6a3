# Conjunctions of simple tests on raw big-endian table rows, shared by the predicate kernel
# (_predicate.pyx: row selection) and the table decoder (_bintable.pyx: selection and decode of
# the survivors in one pass). See _predicate.pyx for the test kinds and their fields.
from libc.math cimport fabs, fmod
from libc.stdint cimport uint8_t, int64_t, uint64_t

from _bswap cimport load_u16, load_u32, load_u64, load_i16, load_i32, load_i64, load_f32, load_f64

cdef enum:
    TEST_INTS = 11    # int64 fields of a planned test (_predicate.T_NFIELDS)
    TEST_FLOATS = 4   # float64 fields of a planned test (_predicate.D_NFIELDS)


cdef inline int64_t load_int(const uint8_t* p, int src) noexcept nogil:
    if src == 1:
        return p[0]
    if src == 2:
        return load_i16(p)
    if src == 3:
        return load_i32(p)
    return load_i64(p)


cdef inline uint64_t load_bits(const uint8_t* p, int src) noexcept nogil:
    if src == 1:
        return p[0]
    if src == 2:
        return load_u16(p)
    if src == 3 or src == 5:
        return load_u32(p)
    return load_u64(p)


cdef inline double load_float(const uint8_t* p, int src) noexcept nogil:
    if src == 5:
        return load_f32(p)
    if src == 6:
        return load_f64(p)
    return <double>load_int(p, src)


ctypedef struct Test:
    int kind
    int src
    int64_t off
    bint has_null
    uint64_t tnull
    int64_t lo
    int64_t hi
    int64_t lit
    bint scaled
    int bits
    int cmp
    double scal
    double zero
    double flo
    double fhi


cdef inline double test_value(const Test* t, const uint8_t* p) noexcept nogil:
    """The value the decoder produces for a float-typed column (scaled as it scales)."""
    cdef double v
    cdef float f
    if not t.scaled:
        return load_f32(p) if t.src == 5 else load_f64(p)
    v = load_float(p, t.src) * t.scal + t.zero
    if t.bits == 32:
        f = <float>v
        v = f
    return v


cdef inline bint in_ra_window(double v, double start, double width) noexcept nogil:
    """Whether angle ``v`` (degrees, any turn) lies in the window of ``width`` degrees that
    starts at ``start`` and runs up in angle, across 360/0. NaN fails; values beyond 1e6 in
    magnitude (where the subtraction's rounding outgrows the window's margin) and infinities pass,
    for the exact test to decide."""
    cdef double d = fmod(v - start, 360.0)
    if d < 0:
        d += 360.0
    return (d <= width) | ((fabs(v) > 1e6) & (v == v))


cdef inline bint passes(const Test* t, const uint8_t* p) noexcept nogil:
    """The generic test of one row (``p`` points at the column's bytes)."""
    cdef int64_t iv
    cdef double v
    cdef uint8_t b
    cdef bint isnull
    if t.kind == 6:
        if t.src == 7:
            isnull = t.has_null and p[0] == 0
        else:
            isnull = t.has_null and load_bits(p, t.src) == t.tnull
        return isnull != (t.lit != 0)
    if t.kind == 5:
        b = p[0]
        if t.has_null and b == 0:
            return 0
        iv = 1 if b == 84 else 0
        return (iv == t.lit) if t.cmp == 0 else (iv != t.lit)
    if t.has_null and load_bits(p, t.src) == t.tnull:
        return 0
    if t.kind == 1:
        iv = load_int(p, t.src)
        return (iv >= t.lo) & (iv <= t.hi)
    if t.kind == 2:
        return load_int(p, t.src) != t.lit
    if t.kind == 3:
        v = test_value(t, p)
        return (v >= t.flo) & (v <= t.fhi)
    if t.kind == 4:
        v = test_value(t, p)
        return (v != t.fhi) & (v == v)
    if t.kind == 7:
        return in_ra_window(test_value(t, p), t.flo, t.fhi)
    return 0


cdef inline Py_ssize_t keep_indexed(const Test* t, const uint8_t** ptr, Py_ssize_t* idx,
                                    Py_ssize_t m) noexcept nogil:
    """Keep the entries ``idx[:m]`` whose rows pass ``t``; return how many are left."""
    cdef Py_ssize_t j = 0, i, k
    cdef int64_t off = t.off, lo = t.lo, hi = t.hi, iv
    cdef double flo = t.flo, fhi = t.fhi, v
    if t.kind == 0:
        return 0
    # Tight loops for the common unscaled, non-nullable ranges; everything else is generic.
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 6:
        for i in range(m):
            k = idx[i]
            v = load_f64(ptr[k] + off)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 5:
        for i in range(m):
            k = idx[i]
            v = load_f32(ptr[k] + off)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 3:
        for i in range(m):
            k = idx[i]
            iv = load_i32(ptr[k] + off)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 4:
        for i in range(m):
            k = idx[i]
            iv = load_i64(ptr[k] + off)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    for i in range(m):
        k = idx[i]
        idx[j] = k
        j += passes(t, ptr[k] + off)
    return j


cdef inline Py_ssize_t first_strided(const Test* t, const uint8_t* p0, Py_ssize_t stride,
                                     Py_ssize_t* idx, Py_ssize_t n) noexcept nogil:
    """The first test of a contiguous block of ``n`` rows: row ``k``'s field is at
    ``p0 + k * stride``; the numbers of the rows that pass go to ``idx``. Addresses do not
    depend on a load, so the loads of many rows are in flight at once."""
    cdef Py_ssize_t j = 0, k
    cdef int64_t lo = t.lo, hi = t.hi, iv
    cdef double flo = t.flo, fhi = t.fhi, v
    p0 += t.off
    if t.kind == 0:
        return 0
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 6:
        for k in range(n):
            v = load_f64(p0 + k * stride)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 5:
        for k in range(n):
            v = load_f32(p0 + k * stride)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 3:
        for k in range(n):
            iv = load_i32(p0 + k * stride)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 4:
        for k in range(n):
            iv = load_i64(p0 + k * stride)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    for k in range(n):
        idx[j] = k
        j += passes(t, p0 + k * stride)
    return j


cdef inline Py_ssize_t keep_strided(const Test* t, const uint8_t* p0, Py_ssize_t stride,
                                    Py_ssize_t* idx, Py_ssize_t m) noexcept nogil:
    """`keep_indexed` for a contiguous block of rows: row ``k``'s field is at
    ``p0 + k * stride``, so no table of row pointers is built or read."""
    cdef Py_ssize_t j = 0, i, k
    cdef int64_t lo = t.lo, hi = t.hi, iv
    cdef double flo = t.flo, fhi = t.fhi, v
    p0 += t.off
    if t.kind == 0:
        return 0
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 6:
        for i in range(m):
            k = idx[i]
            v = load_f64(p0 + k * stride)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 3 and not t.scaled and not t.has_null and t.src == 5:
        for i in range(m):
            k = idx[i]
            v = load_f32(p0 + k * stride)
            idx[j] = k
            j += (v >= flo) & (v <= fhi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 3:
        for i in range(m):
            k = idx[i]
            iv = load_i32(p0 + k * stride)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    if t.kind == 1 and not t.has_null and t.src == 4:
        for i in range(m):
            k = idx[i]
            iv = load_i64(p0 + k * stride)
            idx[j] = k
            j += (iv >= lo) & (iv <= hi)
        return j
    for i in range(m):
        k = idx[i]
        idx[j] = k
        j += passes(t, p0 + k * stride)
    return j


cdef inline Py_ssize_t select_block(const Test* ts, Py_ssize_t ntests, const uint8_t* p0,
                                    Py_ssize_t stride, Py_ssize_t* idx,
                                    Py_ssize_t n) noexcept nogil:
    """The rows of a contiguous block of ``n`` rows (row ``k`` at ``p0 + k * stride``) that pass
    every test, as block-relative numbers in ``idx``; returns their count. The first test lists
    the rows that pass it, each later one keeps those of the list that pass it too."""
    cdef Py_ssize_t i, m = first_strided(&ts[0], p0, stride, idx, n)
    for i in range(1, ntests):
        if m == 0:
            break
        m = keep_strided(&ts[i], p0, stride, idx, m)
    return m


cdef inline int load_tests(const int64_t[:, ::1] tests, const double[:, ::1] floats,
                           Test* ts) except -1:
    """Check the (TEST_INTS ints, TEST_FLOATS floats) rows of a planned conjunction (one test
    at least) and unpack them into ``ts``."""
    cdef Py_ssize_t i
    if (tests.shape[0] < 1 or tests.shape[1] != TEST_INTS or floats.shape[0] != tests.shape[0]
            or floats.shape[1] != TEST_FLOATS):
        raise ValueError("malformed predicate tests")
    for i in range(tests.shape[0]):
        if not 0 <= tests[i, 0] <= 7 or not 1 <= tests[i, 2] <= 7:
            raise ValueError("malformed predicate tests")
        ts[i].kind = <int>tests[i, 0]
        ts[i].off = tests[i, 1]
        ts[i].src = <int>tests[i, 2]
        ts[i].has_null = tests[i, 3] != 0
        ts[i].tnull = <uint64_t>tests[i, 4]
        ts[i].lo = tests[i, 5]
        ts[i].hi = tests[i, 6]
        ts[i].lit = tests[i, 7]
        ts[i].scaled = tests[i, 8] != 0
        ts[i].bits = <int>tests[i, 9]
        ts[i].cmp = <int>tests[i, 10]
        ts[i].scal = floats[i, 0]
        ts[i].zero = floats[i, 1]
        ts[i].flo = floats[i, 2]
        ts[i].fhi = floats[i, 3]
    return 0

# cython: language_level=3
"""Floating-point quantisation of the tiled image compression convention, the noise estimate
that sets its step, and the GZIP_2 byte shuffle.

Quantised tiles store integers ``i``; values are ``(i - r + 0.5) * ZSCALE + ZZERO`` with the
subtractive dither ``r`` drawn from the convention's 10,000-value random sequence (``r = 0.5``
without dithering), ``C_NULL_VALUE`` for NaN and ``C_ZERO_VALUE`` for exact zeros
(SUBTRACTIVE_DITHER_2).
"""
from libc.math cimport fabs, floor, isnan
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc

from _dequant cimport dequant_tile

import numpy as np

cimport numpy as cnp

cnp.import_array()

cdef enum:
    C_NULL_VALUE = -2147483647
    C_ZERO_VALUE = -2147483646

NULL_VALUE = C_NULL_VALUE
ZERO_VALUE = C_ZERO_VALUE

N_RANDOM = 10000
NO_DITHER = 0
SUBTRACTIVE_DITHER_1 = 1
SUBTRACTIVE_DITHER_2 = 2

# The convention's random sequence, in single precision as its reference code keeps it: built
# once at import into a read-only array that random_table() hands out, read by the loops below
# through ``_rand``.
_TABLE = np.empty(10000, np.float32)
cdef float* _rand = <float*>cnp.PyArray_DATA(_TABLE)


cdef void _init_random(float* table) noexcept nogil:
    # Park & Miller's minimal standard generator (a = 16807, m = 2^31 - 1), seed 1.
    cdef double a = 16807.0, m = 2147483647.0, seed = 1.0, temp
    cdef int i
    for i in range(10000):
        temp = a * seed
        seed = temp - m * <double>(<long long>(temp / m))
        table[i] = <float>(seed / m)


_init_random(_rand)
_TABLE.flags.writeable = False


def random_table() -> np.ndarray:
    """The convention's random sequence as the float32 values the dequantisers use (the one
    read-only table; `_rice.decode_many_dequant` takes it)."""
    return _TABLE


def random_sequence() -> np.ndarray:
    """The convention's 10,000 uniform random numbers in (0, 1) (a float64 copy of the table)."""
    return _TABLE.astype(np.float64)


def dither_seed(Py_ssize_t tile_index, long long zdither0) -> int:
    """Start index into the random sequence for 0-based tile ``tile_index`` (ZDITHER0 1-based)."""
    return <int>((tile_index + zdither0 - 1) % 10000)


cdef inline void _dequant(const int32_t* src, Py_ssize_t n, void* out, int is64, double scale,
                          double zero, int method, int iseed, int has_null,
                          int32_t null_value) noexcept nogil:
    dequant_tile(src, n, out, is64, scale, zero, method, iseed, has_null, null_value, _rand)


def dequantize(const int32_t[::1] src, cnp.ndarray out, double scale, double zero, int method,
               int iseed, bint has_null, int null_value) -> None:
    """Undo the quantisation of one tile into the float32/float64 ``out`` (same size)."""
    cdef Py_ssize_t n = src.shape[0]
    cdef int is64 = out.dtype.itemsize == 8
    cdef void* o = cnp.PyArray_DATA(out)
    if out.size != n or not out.flags.c_contiguous or out.dtype.kind != "f":
        raise ValueError("out must be a C-contiguous float array of the tile size")
    if not 0 <= iseed < 10000:
        raise ValueError("iseed must be in 0..9999")
    if n == 0:
        return
    with nogil:
        _dequant(&src[0], n, o, is64, scale, zero, method, iseed, has_null, <int32_t>null_value)


cdef int _quant(const void* src, int is64, Py_ssize_t n, int32_t* out, double scale, double zero,
                int method, int iseed) noexcept nogil:
    cdef Py_ssize_t i
    cdef int nextrand = 0
    cdef double v, r, q
    cdef int has_null = 0
    if method != 0:
        nextrand = <int>(_rand[iseed] * 500)
    for i in range(n):
        v = (<const double*>src)[i] if is64 else <double>(<const float*>src)[i]
        if isnan(v):
            out[i] = C_NULL_VALUE
            has_null = 1
        elif method == 2 and v == 0.0:
            out[i] = C_ZERO_VALUE
        else:
            r = 0.5 if method == 0 else _rand[nextrand]
            q = floor((v - zero) / scale + r - 0.5 + 0.5)
            out[i] = <int32_t>q
        if method != 0:
            nextrand += 1
            if nextrand == 10000:
                iseed += 1
                if iseed == 10000:
                    iseed = 0
                nextrand = <int>(_rand[iseed] * 500)
    return has_null


def quantize(cnp.ndarray src, cnp.ndarray out, double scale, double zero, int method,
             int iseed) -> bool:
    """Quantise the float tile ``src`` into int32 ``out``; returns whether a NaN was seen.

    The caller checks that ``(value - zero) / scale`` fits well inside int32 and that no value
    is infinite.
    """
    cdef Py_ssize_t n = src.size
    cdef int is64 = src.dtype.itemsize == 8
    cdef const void* s = cnp.PyArray_DATA(src)
    cdef int32_t* o = <int32_t*>cnp.PyArray_DATA(out)
    cdef int rc
    if out.size != n or out.dtype != np.int32 or not out.flags.c_contiguous \
            or not src.flags.c_contiguous or src.dtype.kind != "f":
        raise ValueError("src must be a C-contiguous float tile and out an int32 array of its size")
    with nogil:
        rc = _quant(s, is64, n, o, scale, zero, method, iseed)
    return rc != 0


def shuffle(const uint8_t[::1] src, int itemsize) -> bytes:
    """GZIP_2 byte shuffle: all first bytes of the elements, then all second bytes, ..."""
    cdef Py_ssize_t n = src.shape[0] // itemsize, i
    cdef int k
    cdef bytearray buf = bytearray(src.shape[0])
    cdef uint8_t* o = <uint8_t*>(<char*>buf)
    if n * itemsize != src.shape[0]:
        raise ValueError("buffer size is not a multiple of the element size")
    with nogil:
        for k in range(itemsize):
            for i in range(n):
                o[k * n + i] = src[i * itemsize + k]
    return bytes(buf)


def unshuffle(const uint8_t[::1] src, uint8_t[::1] out, int itemsize) -> None:
    """Undo :func:`shuffle` into ``out`` (same length as ``src``)."""
    cdef Py_ssize_t n = src.shape[0] // itemsize, i
    cdef int k
    if n * itemsize != src.shape[0] or out.shape[0] != src.shape[0]:
        raise ValueError("buffer sizes disagree with the element size")
    with nogil:
        for k in range(itemsize):
            for i in range(n):
                out[i * itemsize + k] = src[k * n + i]


def dequantize_many(const int32_t[::1] ints, cnp.ndarray out, const int64_t[::1] dest,
                    const int64_t[::1] npix, const double[::1] zscale, const double[::1] zzero,
                    const int64_t[::1] tile_index, int method, long long zdither0,
                    bint has_null, int null_value, const int64_t[::1] src=None) -> None:
    """Dequantise several tiles at once, GIL-free: tile i occupies ``[dest[i], dest[i] + npix[i])``
    of the flat float ``out`` and the same range of the flat int32 ``ints`` — or, when ``src``
    is given, ``[src[i], src[i] + npix[i])`` of ``ints`` (a smaller scratch buffer)."""
    cdef Py_ssize_t n = dest.shape[0], i
    cdef int is64 = out.dtype.itemsize == 8
    cdef char* o = <char*>cnp.PyArray_DATA(out)
    cdef Py_ssize_t size = out.size, isize = ints.shape[0]
    cdef const int64_t* sp = &dest[0] if n else NULL
    cdef int iseed
    if not out.flags.c_contiguous or out.dtype.kind != "f" or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous float array")
    if src is None and size != isize:
        raise ValueError("out must be the size of ints when src is not given")
    if npix.shape[0] != n or zscale.shape[0] != n or zzero.shape[0] != n \
            or tile_index.shape[0] != n or (src is not None and src.shape[0] != n):
        raise ValueError(
            "dest, npix, zscale, zzero, tile_index (and src) must have the same length")
    if src is not None and n:
        sp = &src[0]
    for i in range(n):
        if dest[i] < 0 or npix[i] < 0 or dest[i] + npix[i] > size or sp[i] < 0 \
                or sp[i] + npix[i] > isize:
            raise ValueError("tile range outside the buffers")
    with nogil:
        for i in range(n):
            if npix[i] == 0:
                continue
            iseed = <int>((tile_index[i] + zdither0 - 1) % 10000) if method else 0
            _dequant(&ints[sp[i]], npix[i], o + dest[i] * (8 if is64 else 4), is64, zscale[i],
                     zzero[i], method, iseed, has_null, <int32_t>null_value)


cdef double _select(double* a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    # The k-th smallest of a[0..n) (0-based), by Hoare partitioning; reorders a.
    cdef Py_ssize_t lo = 0, hi = n - 1, i, j
    cdef double pivot, t
    while hi > lo:
        pivot = a[lo + (hi - lo) // 2]
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                t = a[i]
                a[i] = a[j]
                a[j] = t
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


cdef double _middle(double* a, Py_ssize_t n) noexcept nogil:
    # The median of a[0..n) (the mean of the two middle values for even n); 0 when empty.
    cdef double low, high
    if n == 0:
        return 0.0
    low = _select(a, n, (n - 1) // 2)
    high = _select(a, n, n // 2)
    return (low + high) / 2.0


def noise_medians(const double[:, ::1] rows) -> tuple:
    """The median absolute differences behind a tile's noise estimate, unscaled.

    For each row of ``rows`` (NaN pixels skipped, so the pixels either side of a hole are
    neighbours; rows with fewer than 9 other pixels skipped), over the 9-pixel windows
    ``v1..v9``: the 2nd order ``|v5 - v7|`` (windows where ``v5 = v6 = v7`` left out) and the
    3rd and 5th order ``|2 v5 - v3 - v7|`` and ``|6 v5 - 4 v3 - 4 v7 + v1 + v9|`` (windows
    where ``v3 .. v7`` are equal left out); each row gives the low median of each. Returns the
    medians over rows ``(d2, d3, d5)`` (0.0 where no row gave a value); a row counts for
    ``d2`` when it has more than one 2nd order value, or one of each order.
    """
    cdef Py_ssize_t ny = rows.shape[0], nx = rows.shape[1]
    cdef Py_ssize_t r, i, n, n2, n3, k2 = 0, k3 = 0
    cdef double x, v1, v3, v4, v5, v6, v7, v9, out2 = 0.0, out3 = 0.0, out5 = 0.0
    cdef double* buf
    cdef double *v, *d2, *d3, *d5, *m2, *m3, *m5
    if nx < 9 or ny == 0:
        return 0.0, 0.0, 0.0
    buf = <double*>malloc((4 * nx + 3 * ny) * sizeof(double))
    if buf == NULL:
        raise MemoryError()
    v, d2, d3, d5 = buf, buf + nx, buf + 2 * nx, buf + 3 * nx
    m2, m3, m5 = buf + 4 * nx, buf + 4 * nx + ny, buf + 4 * nx + 2 * ny
    try:
        with nogil:
            for r in range(ny):
                n = 0
                for i in range(nx):
                    x = rows[r, i]
                    if not isnan(x):
                        v[n] = x
                        n += 1
                if n < 9:
                    continue
                n2 = 0
                n3 = 0
                for i in range(n - 8):
                    v1, v3, v4, v5 = v[i], v[i + 2], v[i + 3], v[i + 4]
                    v6, v7, v9 = v[i + 5], v[i + 6], v[i + 8]
                    if not (v5 == v6 and v6 == v7):
                        d2[n2] = fabs(v5 - v7)
                        n2 += 1
                    if not (v3 == v4 and v4 == v5 and v5 == v6 and v6 == v7):
                        d3[n3] = fabs(2 * v5 - v3 - v7)
                        d5[n3] = fabs(6 * v5 - 4 * v3 - 4 * v7 + v1 + v9)
                        n3 += 1
                if n3 == 0:
                    continue
                m3[k3] = _select(d3, n3, (n3 - 1) // 2)
                m5[k3] = _select(d5, n3, (n3 - 1) // 2)
                k3 += 1
                if n2 > 1 or (n2 == 1 and n3 == 1):
                    m2[k2] = _select(d2, n2, (n2 - 1) // 2)
                    k2 += 1
            out2 = _middle(m2, k2)
            out3 = _middle(m3, k3)
            out5 = _middle(m5, k3)
    finally:
        free(buf)
    return out2, out3, out5

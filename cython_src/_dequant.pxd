# Shared inline dequantisation of the tiled image compression convention: `_quantize` (one tile,
# many tiles from a scratch) and `_rice` (decode and dequantise each tile while it is in cache)
# run the same arithmetic, so their pixels agree bit for bit with CFITSIO's.
from libc.math cimport NAN
from libc.stdint cimport int32_t

cdef enum:
    DQ_NULL_VALUE = -2147483647
    DQ_ZERO_VALUE = -2147483646


cdef inline void dequant_run(const int32_t* src, Py_ssize_t n, float* o32, double* o64,
                             const float* r, double scale, double zero, int method, int has_null,
                             int32_t null_value) noexcept nogil:
    # One run of pixels whose dither values are r[0..n) (r is NULL without dithering), with no
    # branch on the method inside the loop so the compiler can vectorise it. The arithmetic is
    # the convention's, in the same order, so results stay bit for bit those of CFITSIO.
    cdef Py_ssize_t i
    cdef double v
    cdef int32_t s
    if r == NULL:
        if o64 != NULL:
            for i in range(n):
                s = src[i]
                v = <double>s * scale + zero
                o64[i] = NAN if has_null and s == null_value else v
        else:
            for i in range(n):
                s = src[i]
                v = <double>s * scale + zero
                o32[i] = NAN if has_null and s == null_value else <float>v
    elif o64 != NULL:
        for i in range(n):
            s = src[i]
            v = (<double>s - r[i] + 0.5) * scale + zero
            if method == 2 and s == DQ_ZERO_VALUE:
                v = 0.0
            o64[i] = NAN if has_null and s == null_value else v
    else:
        for i in range(n):
            s = src[i]
            v = (<double>s - r[i] + 0.5) * scale + zero
            if method == 2 and s == DQ_ZERO_VALUE:
                v = 0.0
            o32[i] = NAN if has_null and s == null_value else <float>v


cdef inline void dequant_tile(const int32_t* src, Py_ssize_t n, void* out, int is64, double scale,
                              double zero, int method, int iseed, int has_null,
                              int32_t null_value, const float* rand) noexcept nogil:
    # One tile: ``rand`` is the convention's 10,000-value sequence, ``iseed`` the tile's start.
    cdef Py_ssize_t done = 0, run
    cdef int nextrand
    cdef float* o32 = NULL if is64 else <float*>out
    cdef double* o64 = <double*>out if is64 else NULL
    if method == 0:
        dequant_run(src, n, o32, o64, NULL, scale, zero, 0, has_null, null_value)
        return
    # The dither sequence restarts at a new seed every 10,000 - start values: one run each.
    nextrand = <int>(rand[iseed] * 500)
    while done < n:
        run = min(n - done, 10000 - nextrand)
        dequant_run(src + done, run, NULL if is64 else o32 + done, o64 + done if is64 else NULL,
                    &rand[nextrand], scale, zero, method, has_null, null_value)
        done += run
        iseed += 1
        if iseed == 10000:
            iseed = 0
        nextrand = <int>(rand[iseed] * 500)

# Shared inline dequantisation of the tiled image compression convention: `_quantize` (one tile,
# many tiles from a scratch) and `_rice` (decode and dequantise each tile while it is in cache)
# run the same arithmetic, so their pixels agree bit for bit with CFITSIO's.
from libc.math cimport NAN
from libc.stdint cimport int32_t

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include "_portable.h"
    #ifdef TF_X86_DISPATCH
    #include <immintrin.h>
    /* The dithered dequantisation four pixels a step with AVX2 (the x86-64 baseline the wheels
       build for converts two at a time, and the compiler left the selects scalar). The same
       double arithmetic in the same order, without fused multiply-adds, rounded to float by the
       same conversion: the pixels are bit for bit the scalar loop's. Returns the pixels done (a
       multiple of 4; 0 without AVX2); the caller finishes the rest. */
    TF_TARGET("avx2")
    static Py_ssize_t tf_dq_dither_avx2_impl(const int32_t *src, Py_ssize_t n, float *o32,
                                             double *o64, const float *r, double scale,
                                             double zero, int zero_code, int has_null,
                                             int32_t null_value) {
        const __m256d vs = _mm256_set1_pd(scale), vz = _mm256_set1_pd(zero),
                      half = _mm256_set1_pd(0.5);
        const __m128i zc = _mm_set1_epi32(-2147483646), nv = _mm_set1_epi32(null_value);
        Py_ssize_t i;
        for (i = 0; i + 4 <= n; i += 4) {
            __m128i s = _mm_loadu_si128((const __m128i *)(src + i));
            __m256d d = _mm256_cvtepi32_pd(s);
            __m256d rr = _mm256_cvtps_pd(_mm_loadu_ps(r + i));
            __m256d v = _mm256_add_pd(_mm256_mul_pd(_mm256_add_pd(_mm256_sub_pd(d, rr), half), vs), vz);
            if (o64 != NULL) {
                if (zero_code) {
                    __m256d m = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpeq_epi32(s, zc)));
                    v = _mm256_andnot_pd(m, v);
                }
                if (has_null) {
                    __m256d m = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpeq_epi32(s, nv)));
                    v = _mm256_blendv_pd(v, _mm256_set1_pd((double)NAN), m);
                }
                _mm256_storeu_pd(o64 + i, v);
            } else {
                __m128 f = _mm256_cvtpd_ps(v);
                if (zero_code)
                    f = _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(s, zc)), f);
                if (has_null)
                    f = _mm_blendv_ps(f, _mm_set1_ps((float)NAN), _mm_castsi128_ps(_mm_cmpeq_epi32(s, nv)));
                _mm_storeu_ps(o32 + i, f);
            }
        }
        return i;
    }
    static int tf_dq_avx2 = -1;
    #endif

    static Py_ssize_t tf_dq_dither_avx2(const int32_t *src, Py_ssize_t n, float *o32, double *o64,
                                        const float *r, double scale, double zero, int zero_code,
                                        int has_null, int32_t null_value) {
    #ifdef TF_X86_DISPATCH
        if (tf_dq_avx2 < 0) tf_dq_avx2 = TF_CPU_AVX2() ? 1 : 0;
        if (tf_dq_avx2)
            return tf_dq_dither_avx2_impl(src, n, o32, o64, r, scale, zero, zero_code, has_null,
                                          null_value);
    #endif
        return 0;
    }
    """
    Py_ssize_t tf_dq_dither_avx2(const int32_t* src, Py_ssize_t n, float* o32, double* o64,
                                 const float* r, double scale, double zero, int zero_code,
                                 int has_null, int32_t null_value) noexcept nogil

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
    cdef Py_ssize_t done
    if r != NULL:
        done = tf_dq_dither_avx2(src, n, o32, o64, r, scale, zero, method == 2, has_null,
                                 null_value)
        if done:
            src += done
            r += done
            n -= done
            if o64 != NULL:
                o64 += done
            else:
                o32 += done
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

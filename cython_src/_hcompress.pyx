# cython: language_level=3
"""HCOMPRESS_1 kernels: the H-transform image codec (White 1992) of the tiled image convention.

Stream: magic 0xDD 0x99, then nx, ny, scale as big-endian int32 (nx is the slow axis), the sum of
all pixels as a big-endian int64, the bit-plane counts of the three coefficient quadrants (one
byte each), the quadtree-coded bit planes of the coefficient magnitudes (4-bit Huffman codes),
an end nybble of zero, and one sign bit per non-zero coefficient. Decoding multiplies by
``scale``, then inverts the H-transform (optionally smoothing the coefficients when scale > 1).

The decoder reads the stream through a 64-bit bit buffer; decodes a quadtree bit plane level by
level from the list of its non-zero nodes, so a sparse plane costs its non-zero nodes, not its
area; and inverts the H-transform out of place: each level reads its sums from the previous
level's output and its differences where the stream left them (no shuffling passes), and the
last level writes the caller's pixel type. 8- and 16-bit images are decoded in 32-bit
arithmetic, as CFITSIO decodes them; the others in 64-bit.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from _tilestatus cimport TILE_OK, TILE_MISMATCH, TILE_STOPPED, tile_skipped
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import numpy as np

cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include "_portable.h"
    /* Eight stream bytes as one big-endian 64-bit value. */
    static inline uint64_t tf_hc_load_be64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return v;
    #else
        return TF_BSWAP64(v);
    #endif
    }

    /* A directly written bit plane, 8 blocks at a time: 32 stream bits (block j in bits
       31 - 4j .. 28 - 4j) → 16 pixels of the upper row (pixel 2j + d: bit 31 - 4j - d) and 16
       of the lower row (bit 29 - 4j - d); each pixel ORs in bv where its bit is set. */
    static const uint32_t tf_hc_upper[16] = {
        1u << 31, 1u << 30, 1u << 27, 1u << 26, 1u << 23, 1u << 22, 1u << 19, 1u << 18,
        1u << 15, 1u << 14, 1u << 11, 1u << 10, 1u << 7, 1u << 6, 1u << 3, 1u << 2};
    static const uint32_t tf_hc_lower[16] = {
        1u << 29, 1u << 28, 1u << 25, 1u << 24, 1u << 21, 1u << 20, 1u << 17, 1u << 16,
        1u << 13, 1u << 12, 1u << 9, 1u << 8, 1u << 5, 1u << 4, 1u << 1, 1u << 0};
    #if (defined(__SSE2__) || defined(_M_X64)) && !defined(TF_HC_NO_SIMD)
    #include <emmintrin.h>
    static inline void tf_hc_or16_i32(int32_t *p, uint32_t w, const uint32_t *m, int32_t bv) {
        const __m128i W = _mm_set1_epi32((int32_t)w), B = _mm_set1_epi32(bv);
        const __m128i Z = _mm_setzero_si128();
        int q;
        for (q = 0; q < 16; q += 4) {
            __m128i clear = _mm_cmpeq_epi32(
                _mm_and_si128(W, _mm_loadu_si128((const __m128i *)(m + q))), Z);
            __m128i *d = (__m128i *)(p + q);
            _mm_storeu_si128(d, _mm_or_si128(_mm_loadu_si128(d), _mm_andnot_si128(clear, B)));
        }
    }
    static inline void tf_hc_or16_i64(int64_t *p, uint32_t w, const uint32_t *m, int64_t bv) {
        /* two 64-bit lanes: test the low halves, copy the result to the high halves */
        const __m128i W = _mm_set1_epi32((int32_t)w), B = _mm_set1_epi64x(bv);
        const __m128i Z = _mm_setzero_si128();
        int q;
        for (q = 0; q < 16; q += 4) {
            __m128i clear = _mm_cmpeq_epi32(
                _mm_and_si128(W, _mm_loadu_si128((const __m128i *)(m + q))), Z);
            __m128i lo = _mm_shuffle_epi32(clear, _MM_SHUFFLE(1, 1, 0, 0));
            __m128i hi = _mm_shuffle_epi32(clear, _MM_SHUFFLE(3, 3, 2, 2));
            __m128i *d = (__m128i *)(p + q);
            _mm_storeu_si128(d, _mm_or_si128(_mm_loadu_si128(d), _mm_andnot_si128(lo, B)));
            _mm_storeu_si128(d + 1, _mm_or_si128(_mm_loadu_si128(d + 1), _mm_andnot_si128(hi, B)));
        }
    }
    /* Sign bits, four 32-bit coefficients at a time: the non-zero lanes take the next bits of
       the stream in lane order; tf_hc_dep[nonzero lanes][next 4 bits] = the lanes to negate. */
    static uint8_t tf_hc_dep[16][16];
    static __m128i tf_hc_lanes[16];
    static void tf_hc_init_signs(void) {
        int m, b, i, r, out;
        for (m = 0; m < 16; m++)
            for (b = 0; b < 16; b++) {
                for (i = 0, r = 0, out = 0; i < 4; i++)
                    if (m >> i & 1) {
                        if (b >> (3 - r) & 1) out |= 1 << i;
                        r++;
                    }
                tf_hc_dep[m][b] = (uint8_t)out;
            }
        for (m = 0; m < 16; m++)
            tf_hc_lanes[m] = _mm_set_epi32(-(m >> 3 & 1), -(m >> 2 & 1), -(m >> 1 & 1), -(m & 1));
    }
    /* Signs of a[0:*j] for *j up to count, in groups of 4 while bits q .. q + 15 of signs stay
       below qmax; returns the new q. */
    static inline Py_ssize_t tf_hc_signs_i32(int32_t *a, Py_ssize_t count, Py_ssize_t *j,
                                             const uint8_t *signs, Py_ssize_t q, Py_ssize_t qmax) {
        static const uint8_t pop4[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
        const __m128i Z = _mm_setzero_si128();
        Py_ssize_t k = 0;
        while (k + 4 <= count && q + 16 <= qmax) {
            __m128i v = _mm_loadu_si128((const __m128i *)(a + k));
            int nz = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v, Z))) ^ 15;
            unsigned next = ((unsigned)signs[q >> 3] << 8 | signs[(q >> 3) + 1]) << (q & 7);
            __m128i neg = tf_hc_lanes[tf_hc_dep[nz][(next >> 12) & 15]];
            _mm_storeu_si128((__m128i *)(a + k), _mm_sub_epi32(_mm_xor_si128(v, neg), neg));
            q += pop4[nz];
            k += 4;
        }
        *j = k;
        return q;
    }
    #else
    static void tf_hc_init_signs(void) {}
    static inline Py_ssize_t tf_hc_signs_i32(int32_t *a, Py_ssize_t count, Py_ssize_t *j,
                                             const uint8_t *signs, Py_ssize_t q, Py_ssize_t qmax) {
        *j = 0;
        return q;
    }
    static inline void tf_hc_or16_i32(int32_t *p, uint32_t w, const uint32_t *m, int32_t bv) {
        int q;
        for (q = 0; q < 16; q++) p[q] |= bv & -(int32_t)((w & m[q]) != 0);
    }
    static inline void tf_hc_or16_i64(int64_t *p, uint32_t w, const uint32_t *m, int64_t bv) {
        int q;
        for (q = 0; q < 16; q++) p[q] |= bv & -(int64_t)((w & m[q]) != 0);
    }
    #endif
    static inline void tf_hc_upper_i32(int32_t *p, uint32_t w, int32_t bv) {
        tf_hc_or16_i32(p, w, tf_hc_upper, bv);
    }
    static inline void tf_hc_lower_i32(int32_t *p, uint32_t w, int32_t bv) {
        tf_hc_or16_i32(p, w, tf_hc_lower, bv);
    }
    static inline void tf_hc_upper_i64(int64_t *p, uint32_t w, int64_t bv) {
        tf_hc_or16_i64(p, w, tf_hc_upper, bv);
    }
    static inline void tf_hc_lower_i64(int64_t *p, uint32_t w, int64_t bv) {
        tf_hc_or16_i64(p, w, tf_hc_lower, bv);
    }
    """
    uint64_t _load_be64 "tf_hc_load_be64"(const uint8_t* p) noexcept nogil
    void _init_signs "tf_hc_init_signs"() noexcept nogil
    Py_ssize_t _signs_i32 "tf_hc_signs_i32"(
        int32_t* a, Py_ssize_t count, Py_ssize_t* j, const uint8_t* signs, Py_ssize_t q,
        Py_ssize_t qmax) noexcept nogil
    void _upper_i32 "tf_hc_upper_i32"(int32_t* p, uint32_t w, int32_t bv) noexcept nogil
    void _lower_i32 "tf_hc_lower_i32"(int32_t* p, uint32_t w, int32_t bv) noexcept nogil
    void _upper_i64 "tf_hc_upper_i64"(int64_t* p, uint32_t w, int64_t bv) noexcept nogil
    void _lower_i64 "tf_hc_lower_i64"(int64_t* p, uint32_t w, int64_t bv) noexcept nogil

cdef enum:
    C_ERR_TRUNCATED = -1
    C_ERR_CORRUPT = -2
    C_ERR_MEMORY = -3

ERR_TRUNCATED = C_ERR_TRUNCATED
ERR_CORRUPT = C_ERR_CORRUPT
ERR_MEMORY = C_ERR_MEMORY

# Per-tile status of decode_many (cython_src/_tilestatus.pxd).
OK = TILE_OK
MISMATCH = TILE_MISMATCH
STOPPED = TILE_STOPPED

# The decoder's arithmetic: 32-bit for 8- and 16-bit images (CFITSIO's fits_hdecompress), else
# 64-bit (fits_hdecompress64).
ctypedef fused hint:
    int32_t
    int64_t

# The caller's pixel type.
ctypedef fused pix:
    uint8_t
    int16_t
    int32_t
    int64_t

# The 4-bit Huffman code of the quadtree nodes: code and length of each value.
cdef int _CODE[16]
cdef int _NCODE[16]
_CODE[:] = [0x3e, 0x00, 0x01, 0x08, 0x02, 0x09, 0x1a, 0x1b, 0x03, 0x1c, 0x0a, 0x1d, 0x0b, 0x1e,
            0x3f, 0x0c]
_NCODE[:] = [6, 3, 3, 4, 3, 4, 5, 5, 3, 5, 4, 5, 4, 5, 6, 4]
# The next 6 stream bits → value | length << 4 (the code is complete: every entry is set).
cdef uint8_t _HUFF[64]


cdef void _init_huffman() noexcept:
    cdef int v, s, length
    for v in range(16):
        length = _NCODE[v]
        for s in range(1 << (6 - length)):
            _HUFF[(_CODE[v] << (6 - length)) | s] = <uint8_t>(v | (length << 4))


_init_huffman()
_init_signs()


cdef int _log2up(int n) noexcept nogil:
    # smallest k with 2^k >= n
    cdef int k = 0
    while (1 << k) < n:
        k += 1
    return k


# -- bit input ----------------------------------------------------------------------------------
cdef struct _Bits:
    const uint8_t* p  # next byte to load
    const uint8_t* end
    uint64_t buf  # the next n stream bits at the top; below them, possibly the bits after them
    int n
    Py_ssize_t over  # zero bytes loaded past the end of the stream


cdef inline void _refill(_Bits* b) noexcept nogil:
    # at least 57 valid bits afterwards
    cdef uint8_t byte
    if b.end - b.p >= 8:
        b.buf |= _load_be64(b.p) >> b.n
        b.p += (63 - b.n) >> 3
        b.n |= 56
        return
    while b.n <= 56:
        if b.p < b.end:
            byte = b.p[0]
            b.p += 1
        else:
            byte = 0
            b.over += 1
        b.buf |= (<uint64_t>byte) << (56 - b.n)
        b.n += 8


cdef inline uint64_t _get(_Bits* b, int k) noexcept nogil:
    # the next k bits, 1 <= k <= 56
    cdef uint64_t v
    if b.n < k:
        _refill(b)
    v = b.buf >> (64 - k)
    b.buf <<= k
    b.n -= k
    return v


cdef inline int _huffman(_Bits* b) noexcept nogil:
    cdef int e
    if b.n < 6:
        _refill(b)
    e = _HUFF[b.buf >> 58]
    b.buf <<= e >> 4
    b.n -= e >> 4
    return e & 15


cdef inline bint _overrun(const _Bits* b) noexcept nogil:
    # more bits taken than the stream holds
    return b.over * 8 > b.n


# -- quadtree bit planes --------------------------------------------------------------------------
cdef struct _Nodes:
    # non-zero nodes of one quadtree level, row-major: position and 4-bit value
    int32_t* row
    int32_t* col
    uint8_t* val
    Py_ssize_t cap


cdef inline uint64_t _bitval(int v, int k, int bit) noexcept nogil:
    # bit k of v, moved to bit plane `bit` (unsigned: a hostile plane count is no UB)
    return (<uint64_t>((v >> k) & 1)) << bit


cdef void _direct(_Bits* bs, hint* a, Py_ssize_t n, int nqx, int nqy, int bit) noexcept nogil:
    # a plane written directly: one 4-bit value per 2 x 2 block, row-major
    cdef int i = 0, j, v
    cdef hint* p0
    cdef hint* p1
    cdef uint32_t w
    cdef hint bv = <hint>((<uint64_t>1) << bit)
    while i < nqx:
        p0 = a + <Py_ssize_t>i * n
        if i + 1 < nqx:
            p1 = p0 + n
            j = 0
            while j + 16 <= nqy:
                w = <uint32_t>_get(bs, 32)
                if hint is int32_t:
                    _upper_i32(p0 + j, w, bv)
                    _lower_i32(p1 + j, w, bv)
                else:
                    _upper_i64(p0 + j, w, bv)
                    _lower_i64(p1 + j, w, bv)
                j += 16
            while j + 1 < nqy:
                v = <int>_get(bs, 4)
                p0[j] |= <hint>_bitval(v, 3, bit)
                p0[j + 1] |= <hint>_bitval(v, 2, bit)
                p1[j] |= <hint>_bitval(v, 1, bit)
                p1[j + 1] |= <hint>_bitval(v, 0, bit)
                j += 2
            if j < nqy:
                v = <int>_get(bs, 4)
                p0[j] |= <hint>_bitval(v, 3, bit)
                p1[j] |= <hint>_bitval(v, 1, bit)
        else:
            j = 0
            while j + 16 <= nqy:
                w = <uint32_t>_get(bs, 32)
                if hint is int32_t:
                    _upper_i32(p0 + j, w, bv)
                else:
                    _upper_i64(p0 + j, w, bv)
                j += 16
            while j + 1 < nqy:
                v = <int>_get(bs, 4)
                p0[j] |= <hint>_bitval(v, 3, bit)
                p0[j + 1] |= <hint>_bitval(v, 2, bit)
                j += 2
            if j < nqy:
                v = <int>_get(bs, 4)
                p0[j] |= <hint>_bitval(v, 3, bit)
        i += 2


cdef inline int _huffman_if(_Bits* b, int present) noexcept nogil:
    # the next node value when present (0 or 1), else 0 and no bits taken; branch-free
    cdef int e, length
    if b.n < 6:
        _refill(b)
    e = _HUFF[b.buf >> 58]
    length = (e >> 4) & -present
    b.buf <<= length
    b.n -= length
    return e & 15 & -present


cdef inline void _or_block(hint* a, Py_ssize_t n, int nqx, int nqy, int r, int c, int v,
                           int bit) noexcept nogil:
    # OR the 4 bits of v into the 2 x 2 block at pixel (r, c), clipped to the quadrant
    cdef hint* p = a + <Py_ssize_t>r * n + c
    if r >= nqx or c >= nqy:
        return  # a quadrant with no rows or columns
    p[0] |= <hint>_bitval(v, 3, bit)
    if c + 1 < nqy:
        p[1] |= <hint>_bitval(v, 2, bit)
    if r + 1 < nqx:
        p[n] |= <hint>_bitval(v, 1, bit)
        if c + 1 < nqy:
            p[n + 1] |= <hint>_bitval(v, 0, bit)


cdef Py_ssize_t _children(_Bits* bs, const _Nodes* par, Py_ssize_t cnt, _Nodes* kid, int nx, int ny,
                          hint* a, Py_ssize_t n, int nqx, int nqy, int bit) noexcept nogil:
    """Read the values of the children of the non-zero nodes par[0:cnt] (row-major) of a
    level of nx x ny nodes, in reverse row-major order as they are stored.

    The last level (``a`` not NULL) ORs them into the bit plane; otherwise the non-zero ones are
    kept at the end of kid (which holds more entries than the level has nodes), in row-major
    order, and the position of the first is returned.
    """
    cdef Py_ssize_t t = cnt - 1, t1, u, w = kid.cap
    cdef int row, r2, col, v, x, right
    cdef int32_t* qr = kid.row
    cdef int32_t* qc = kid.col
    cdef uint8_t* qv = kid.val
    while t >= 0:
        row = par.row[t]
        t1 = t
        while t1 >= 0 and par.row[t1] == row:
            t1 -= 1
        r2 = 2 * row
        # the lower child row, then the upper one; right to left; the child of bit b of a value
        # sits at (r2 + 1 - (b >> 1), col + 1 - (b & 1))
        if r2 + 1 < nx:
            for u in range(t, t1, -1):
                v = par.val[u]
                col = 2 * par.col[u]
                right = col + 1 < ny
                x = _huffman_if(bs, v & right)
                if a != NULL:
                    _or_block(a, n, nqx, nqy, 2 * (r2 + 1), 2 * (col + 1), x, bit)
                else:
                    qr[w - 1] = r2 + 1
                    qc[w - 1] = col + 1
                    qv[w - 1] = <uint8_t>x
                    w -= x != 0
                x = _huffman_if(bs, (v >> 1) & 1)
                if a != NULL:
                    _or_block(a, n, nqx, nqy, 2 * (r2 + 1), 2 * col, x, bit)
                else:
                    qr[w - 1] = r2 + 1
                    qc[w - 1] = col
                    qv[w - 1] = <uint8_t>x
                    w -= x != 0
        for u in range(t, t1, -1):
            v = par.val[u]
            col = 2 * par.col[u]
            right = col + 1 < ny
            x = _huffman_if(bs, (v >> 2) & right)
            if a != NULL:
                _or_block(a, n, nqx, nqy, 2 * r2, 2 * (col + 1), x, bit)
            else:
                qr[w - 1] = r2
                qc[w - 1] = col + 1
                qv[w - 1] = <uint8_t>x
                w -= x != 0
            x = _huffman_if(bs, (v >> 3) & 1)
            if a != NULL:
                _or_block(a, n, nqx, nqy, 2 * r2, 2 * col, x, bit)
            else:
                qr[w - 1] = r2
                qc[w - 1] = col
                qv[w - 1] = <uint8_t>x
                w -= x != 0
        t = t1
    return w


cdef int _qtree(_Bits* bs, hint* a, Py_ssize_t n, int nqx, int nqy, int nbitplanes,
                _Nodes* bufs) noexcept nogil:
    """OR the bit planes of one nqx x nqy quadrant (row stride n) into a, top plane first.

    A quadtree plane: the root's value, then level by level the values of the children of the
    non-zero nodes, read in reverse row-major order of the level; the values of the last level
    are the bits of 2 x 2 pixel blocks. ``bufs``: two node lists (ping-pong), each longer than
    max(1, ceil(nqx/2)) * max(1, ceil(nqy/2)).
    """
    cdef int log2n, bit, code, lvl, nx, ny, nfx, nfy, c, side, v
    cdef Py_ssize_t cnt, w
    cdef _Nodes par
    if nqx < 0 or nqy < 0:
        return C_ERR_CORRUPT
    log2n = _log2up(nqx if nqx > nqy else nqy)
    for bit in range(nbitplanes - 1, -1, -1):
        code = <int>_get(bs, 4)
        if code == 0:
            _direct(bs, a, n, nqx, nqy, bit)
        elif code != 0xF:
            return C_ERR_TRUNCATED if _overrun(bs) else C_ERR_CORRUPT
        else:
            v = _huffman(bs)
            if log2n <= 1:
                _or_block(a, n, nqx, nqy, 0, 0, v, bit)  # the root is the only block
            par = bufs[0]
            par.row[0] = 0
            par.col[0] = 0
            par.val[0] = <uint8_t>v
            cnt = v != 0
            side = 1
            nx = 1
            ny = 1
            nfx = nqx
            nfy = nqy
            c = 1 << log2n
            for lvl in range(1, log2n):
                # the level's size (as the encoder halved the quadrant, rounding up)
                c >>= 1
                nx <<= 1
                ny <<= 1
                if nfx <= c:
                    nx -= 1
                else:
                    nfx -= c
                if nfy <= c:
                    ny -= 1
                else:
                    nfy -= c
                if cnt == 0:
                    continue
                if lvl == log2n - 1:
                    _children(bs, &par, cnt, &bufs[side], nx, ny, a, n, nqx, nqy, bit)
                else:
                    w = _children(bs, &par, cnt, &bufs[side], nx, ny, <hint*>NULL, n, nqx, nqy, bit)
                    cnt = bufs[side].cap - w
                    par.row = bufs[side].row + w
                    par.col = bufs[side].col + w
                    par.val = bufs[side].val + w
                    side ^= 1
        if _overrun(bs):
            return C_ERR_TRUNCATED
    return 0


# -- inverse H-transform ----------------------------------------------------------------------------
cdef inline hint _min(hint a, hint b) noexcept nogil:
    return a if a < b else b


cdef inline hint _max(hint a, hint b) noexcept nogil:
    return a if a > b else b


cdef void _hsmooth(const hint* H, Py_ssize_t hs, hint* a, Py_ssize_t ny, int nxtop, int nytop,
                   int scale) noexcept nogil:
    """Smooth the differences of one level (nxtop x nytop) before it is inverted.

    H: the level's sums (row stride hs); its x, y and cross differences are the quadrants of
    a (row stride ny) right of, below and diagonal to the sums' ((nxtop + 1) // 2 rows,
    (nytop + 1) // 2 columns). Differences move toward the interpolation of the neighbouring
    sums, by at most scale / 2, and never past a local extremum.
    """
    cdef int nxh = (nxtop + 1) >> 1, nyh = (nytop + 1) >> 1, i, j
    cdef hint smax = <hint>(scale >> 1), hm, h0, hp, hmm, hpm, hmp, hpp, hx2, hy2, diff, dmax, dmin
    cdef hint s, m1, m2
    cdef hint* HX = a + <Py_ssize_t>nxh * ny
    cdef hint* HY = a + nyh
    cdef hint* HC = HX + nyh
    cdef const hint* h
    if smax <= 0:
        return
    # x differences
    i = 1
    while 2 * i < nxtop - 2:
        h = H + i * hs
        for j in range(nyh):
            hm = h[j - hs]
            h0 = h[j]
            hp = h[j + hs]
            diff = hp - hm
            dmax = _max(_min(hp - h0, h0 - hm), <hint>0) << 2
            dmin = _min(_max(hp - h0, h0 - hm), <hint>0) << 2
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (HX[i * ny + j] << 3)
                s = (s >> 3) if s >= 0 else ((s + 7) >> 3)
                HX[i * ny + j] += _max(_min(s, smax), -smax)
        i += 1
    # y differences
    for i in range(nxh):
        h = H + i * hs
        j = 1
        while 2 * j < nytop - 2:
            hm = h[j - 1]
            h0 = h[j]
            hp = h[j + 1]
            diff = hp - hm
            dmax = _max(_min(hp - h0, h0 - hm), <hint>0) << 2
            dmin = _min(_max(hp - h0, h0 - hm), <hint>0) << 2
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (HY[i * ny + j] << 3)
                s = (s >> 3) if s >= 0 else ((s + 7) >> 3)
                HY[i * ny + j] += _max(_min(s, smax), -smax)
            j += 1
    # cross differences
    i = 1
    while 2 * i < nxtop - 2:
        h = H + i * hs
        j = 1
        while 2 * j < nytop - 2:
            hmm = h[j - hs - 1]
            hpm = h[j + hs - 1]
            hmp = h[j - hs + 1]
            hpp = h[j + hs + 1]
            h0 = h[j]
            diff = hpp + hmm - hmp - hpm
            hx2 = HX[i * ny + j] << 1
            hy2 = HY[i * ny + j] << 1
            m1 = _min(_max(hpp - h0, <hint>0) - hx2 - hy2, _max(h0 - hpm, <hint>0) + hx2 - hy2)
            m2 = _min(_max(h0 - hmp, <hint>0) - hx2 + hy2, _max(hmm - h0, <hint>0) + hx2 + hy2)
            dmax = _min(m1, m2) << 4
            m1 = _max(_min(hpp - h0, <hint>0) - hx2 - hy2, _min(h0 - hpm, <hint>0) + hx2 - hy2)
            m2 = _max(_min(h0 - hmp, <hint>0) - hx2 + hy2, _min(hmm - h0, <hint>0) + hx2 + hy2)
            dmin = _max(m1, m2) << 4
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (HC[i * ny + j] << 6)
                s = (s >> 6) if s >= 0 else ((s + 63) >> 6)
                HC[i * ny + j] += _max(_min(s, smax), -smax)
            j += 1
        i += 1


cdef void _level(const hint* H, Py_ssize_t hs, const hint* a, Py_ssize_t ny, int nxtop, int nytop,
                 pix* dst, Py_ssize_t os, int shift, hint bit0, hint bit1, hint mask0, hint mask1,
                 hint prnd0, hint prnd1, hint neg0) noexcept nogil:
    """One level of the inverse: the sums H (row stride hs) and the differences in a (see
    _hsmooth) → the nxtop x nytop sums of the level below, in dst (row stride os).

    Branch-free forms of the rounding: x + (p if x >= 0 else p - 1) is x + p - (x < 0), and
    x - b if x >= 0 else x + b is x - ((b ^ s) - s) with s = -(x < 0).
    """
    cdef int nxh = (nxtop + 1) >> 1, nyh = (nytop + 1) >> 1, nx2 = nxtop >> 1, ny2 = nytop >> 1
    cdef int i, j
    cdef const hint* h
    cdef const hint* hxr
    cdef const hint* hyr
    cdef const hint* hcr
    cdef pix* o0
    cdef pix* o1
    cdef hint h0, hx, hy, hc, lowbit0, lowbit1, s, m
    for i in range(nx2):
        h = H + i * hs
        hxr = a + (nxh + i) * ny
        hyr = a + i * ny + nyh
        hcr = hxr + nyh
        o0 = dst + 2 * i * os
        o1 = o0 + os
        for j in range(ny2):
            h0 = h[j]
            hx = hxr[j]
            hy = hyr[j]
            hc = hcr[j]
            hx = (hx + prnd1 - (hx < 0)) & mask1
            hy = (hy + prnd1 - (hy < 0)) & mask1
            hc = (hc + prnd0 - ((hc < 0) & neg0)) & mask0
            lowbit0 = hc & bit0
            s = -(hx < 0)
            hx = hx - ((lowbit0 ^ s) - s)
            s = -(hy < 0)
            hy = hy - ((lowbit0 ^ s) - s)
            lowbit1 = (hc ^ hx ^ hy) & bit1
            # h0 + lowbit0 - lowbit1, but + lowbit1 when h0 < 0 and lowbit0 == 0
            m = ((h0 < 0) & (lowbit0 == 0)) - 1
            h0 = h0 + lowbit0 + ((lowbit1 ^ m) - m)
            o1[2 * j + 1] = <pix>((h0 + hx + hy + hc) >> shift)
            o1[2 * j] = <pix>((h0 + hx - hy - hc) >> shift)
            o0[2 * j + 1] = <pix>((h0 - hx + hy - hc) >> shift)
            o0[2 * j] = <pix>((h0 - hx - hy + hc) >> shift)
        if ny2 < nyh:  # an odd last column: no y or cross difference
            h0 = h[ny2]
            hx = (hxr[ny2] + prnd1 - (hxr[ny2] < 0)) & mask1
            lowbit1 = hx & bit1
            s = -(h0 < 0)
            h0 = h0 - ((lowbit1 ^ s) - s)
            o1[2 * ny2] = <pix>((h0 + hx) >> shift)
            o0[2 * ny2] = <pix>((h0 - hx) >> shift)
    if nx2 < nxh:  # an odd last row: no x or cross difference
        h = H + nx2 * hs
        hyr = a + nx2 * ny + nyh
        o0 = dst + 2 * nx2 * os
        for j in range(ny2):
            h0 = h[j]
            hy = (hyr[j] + prnd1 - (hyr[j] < 0)) & mask1
            lowbit1 = hy & bit1
            s = -(h0 < 0)
            h0 = h0 - ((lowbit1 ^ s) - s)
            o0[2 * j + 1] = <pix>((h0 + hy) >> shift)
            o0[2 * j] = <pix>((h0 - hy) >> shift)
        if ny2 < nyh:
            o0[2 * ny2] = <pix>(h[ny2] >> shift)


cdef void _hinv(hint* a, int nx, int ny, bint smooth, int scale, hint* odd, hint* even,
                pix* out) noexcept nogil:
    """Invert the H-transform of the nx x ny coefficients in a (a is changed) into out.

    odd, even: the outputs of the odd and even levels above the last, of ceil(nx/2) *
    ceil(ny/2) and ceil(nx/4) * ceil(ny/4) values (level k has ceil(nx/2^k) x ceil(ny/2^k)).
    """
    cdef int nmax = nx if nx > ny else ny
    cdef int log2n = _log2up(nmax), k, nxtop = 1, nytop = 1, nxf = nx, nyf = ny, c, shift = 1
    cdef int64_t b0
    cdef hint bit0, bit1, mask0, mask1, prnd0, prnd1, prnd2, mask2, neg0 = 1
    cdef const hint* H = a
    cdef Py_ssize_t hs = ny
    cdef hint* dst
    if log2n == 0:
        out[0] = <pix>a[0]
        return
    b0 = (<int64_t>1) << (log2n - 1)
    bit0 = <hint>b0
    bit1 = <hint>(b0 << 1)
    mask0 = <hint>(-b0)
    mask1 = <hint>(-(b0 << 1))
    mask2 = <hint>(-(b0 << 2))
    prnd0 = <hint>(b0 >> 1)
    prnd1 = <hint>b0
    prnd2 = <hint>(b0 << 1)
    a[0] = (a[0] + prnd2 - (a[0] < 0)) & mask2
    c = 1 << log2n
    for k in range(log2n - 1, -1, -1):
        c >>= 1
        nxtop <<= 1
        nytop <<= 1
        if nxf <= c:
            nxtop -= 1
        else:
            nxf -= c
        if nyf <= c:
            nytop -= 1
        else:
            nyf -= c
        if k == 0:
            neg0 = 0  # the last level rounds hc by nothing
            shift = 2
        if smooth:
            _hsmooth(H, hs, a, ny, nxtop, nytop, scale)
        if k == 0:
            _level(H, hs, a, ny, nxtop, nytop, out, ny, shift, bit0, bit1, mask0, mask1, prnd0,
                   prnd1, neg0)
        else:
            dst = odd if k & 1 else even
            _level(H, hs, a, ny, nxtop, nytop, dst, nytop, shift, bit0, bit1, mask0, mask1, prnd0,
                   prnd1, neg0)
            H = dst
            hs = nytop
        bit1 = bit0
        bit0 = bit0 >> 1
        mask1 = mask0
        mask0 = mask0 >> 1
        prnd1 = prnd0
        prnd0 = prnd0 >> 1


# -- one tile -------------------------------------------------------------------------------------
cdef int64_t _be(const uint8_t* p, int k) noexcept nogil:
    cdef int64_t v = 0
    cdef int i
    for i in range(k):
        v = (v << 8) | p[i]
    return v


cdef struct _Work:
    # scratch for a run of tiles, sized for the largest and for 64-bit arithmetic
    void* coef  # the coefficients (nel)
    void* odd  # outputs of the odd levels above the last (ceil(nx/2) * ceil(ny/2))
    void* even  # outputs of the even levels above the last (ceil(nx/4) * ceil(ny/4))
    _Nodes nodes[2]  # quadtree node lists (ceil(nx/4) * ceil(ny/4), at least 1 per side)
    void* block


cdef struct _Need:
    Py_ssize_t nel
    Py_ssize_t nodd
    Py_ssize_t neven
    Py_ssize_t nodes


cdef void _need(_Need* need, int nx, int ny) noexcept nogil:
    # raise need to what an nx x ny tile takes
    cdef Py_ssize_t v
    v = <Py_ssize_t>nx * ny
    if v > need.nel:
        need.nel = v
    v = <Py_ssize_t>((nx + 1) // 2) * ((ny + 1) // 2)
    if v > need.nodd:
        need.nodd = v
    v = <Py_ssize_t>((nx + 3) // 4) * ((ny + 3) // 4)
    if v > need.neven:
        need.neven = v
    v = <Py_ssize_t>(nx // 4 + 2) * (ny // 4 + 2)
    if v > need.nodes:
        need.nodes = v


cdef int _work_alloc(_Work* w, const _Need* need) noexcept nogil:
    # 0, or C_ERR_MEMORY (then w.block is NULL)
    cdef Py_ssize_t cap = need.nodes
    cdef uint8_t* p
    cdef int k
    p = <uint8_t*>malloc(8 * (need.nel + need.nodd + need.neven + 3) + 2 * 9 * cap + 64)
    w.block = p
    if p == NULL:
        return C_ERR_MEMORY
    w.coef = p
    p += 8 * (need.nel + 1)
    w.odd = p
    p += 8 * (need.nodd + 1)
    w.even = p
    p += 8 * (need.neven + 1)
    for k in range(2):
        w.nodes[k].row = <int32_t*>p
        p += 4 * cap
        w.nodes[k].col = <int32_t*>p
        p += 4 * cap
        w.nodes[k].val = p
        w.nodes[k].cap = cap
        p += cap
    return 0


cdef int _decode(const uint8_t* src, Py_ssize_t n, int nx, int ny, bint smooth, hint* a,
                 hint* odd, hint* even, _Nodes* nodes, pix* out) noexcept nogil:
    """Decode one stream of nx x ny pixels into out; 0 or a negative error code. a, odd, even,
    nodes: scratch of _work_init(nx, ny) at least."""
    cdef int scale, nb0, nb1, nb2, rc, nx2, ny2
    cdef int64_t sumall
    cdef Py_ssize_t i, j, lim, pos, q, qmax, nel = <Py_ssize_t>nx * ny
    cdef const uint8_t* signs
    cdef hint v, s, mult
    cdef _Bits bs
    if n < 2 + 12 + 8 + 3:
        return C_ERR_TRUNCATED
    if src[0] != 0xDD or src[1] != 0x99:
        return C_ERR_CORRUPT
    if <int32_t>_be(src + 2, 4) != nx or <int32_t>_be(src + 6, 4) != ny:
        return C_ERR_CORRUPT
    scale = <int32_t>_be(src + 10, 4)
    sumall = _be(src + 14, 8)
    nb0 = src[22]
    nb1 = src[23]
    nb2 = src[24]
    if nb0 > 63 or nb1 > 63 or nb2 > 63:
        return C_ERR_CORRUPT
    memset(a, 0, nel * sizeof(hint))
    nx2 = (nx + 1) // 2
    ny2 = (ny + 1) // 2
    bs.p = src + 25
    bs.end = src + n
    bs.buf = 0
    bs.n = 0
    bs.over = 0
    rc = _qtree(&bs, a, ny, nx2, ny2, nb0, nodes)
    if rc == 0:
        rc = _qtree(&bs, a + ny2, ny, nx2, ny // 2, nb1, nodes)
    if rc == 0:
        rc = _qtree(&bs, a + <Py_ssize_t>ny * nx2, ny, nx // 2, ny2, nb1, nodes)
    if rc == 0:
        rc = _qtree(&bs, a + <Py_ssize_t>ny * nx2 + ny2, ny, nx // 2, ny // 2, nb2, nodes)
    if rc != 0:
        return rc
    if _get(&bs, 4) != 0 or _overrun(&bs):
        return C_ERR_CORRUPT
    # The sign bits start on the byte after the planes: one per non-zero coefficient, in order.
    # Read by index (the only dependency from pixel to pixel is the count of signs taken),
    # in runs that cannot pass the end of the stream.
    pos = (bs.p - src) + bs.over - (bs.n >> 3)
    signs = src + pos
    qmax = 8 * (n - pos) if n > pos else 0
    q = 0
    mult = <hint>scale if scale > 1 else 1
    i = 0
    if hint is int32_t:
        if mult == 1:
            q = _signs_i32(a, nel, &i, signs, q, qmax)
    while i < nel and q < qmax:
        lim = i + (qmax - q)
        if lim > nel:
            lim = nel
        for j in range(i, lim):
            v = a[j]
            s = -<hint>((signs[q >> 3] >> (7 - (q & 7))) & 1)
            a[j] = ((v ^ s) - s) * mult
            q += v != 0
        i = lim
    for j in range(i, nel):
        if a[j] != 0:
            return C_ERR_TRUNCATED
    a[0] = (<hint>sumall) * mult
    _hinv(a, nx, ny, smooth, scale, odd, even, out)
    return 0


# -- encoding ---------------------------------------------------------------------------------------
cdef void _shuffle(int64_t* a, int n, int n2, int64_t* tmp) noexcept nogil:
    # even elements to the first half, odd ones to the second half
    cdef int i, k = 0
    cdef Py_ssize_t p
    i = 1
    while i < n:
        tmp[k] = a[<Py_ssize_t>n2 * i]
        k += 1
        i += 2
    p = 1
    i = 2
    while i < n:
        a[<Py_ssize_t>n2 * p] = a[<Py_ssize_t>n2 * i]
        p += 1
        i += 2
    for i in range(k):
        a[<Py_ssize_t>n2 * (p + i)] = tmp[i]


cdef int _htrans(int64_t* a, int nx, int ny) noexcept nogil:
    cdef int nmax = nx if nx > ny else ny
    cdef int log2n = _log2up(nmax), _level_k, i, j, nxtop = nx, nytop = ny, oddx, oddy, shift = 0
    cdef int64_t mask = -2, mask2, prnd = 1, prnd2, nrnd2, h0, hx, hy, hc
    cdef Py_ssize_t s00, s10
    cdef int64_t* tmp = <int64_t*>malloc(sizeof(int64_t) * ((nmax + 1) // 2 + 1))
    if tmp == NULL:
        return C_ERR_MEMORY
    mask2 = mask << 1
    prnd2 = prnd << 1
    nrnd2 = prnd2 - 1
    for _level_k in range(log2n):
        oddx = nxtop % 2
        oddy = nytop % 2
        i = 0
        while i < nxtop - oddx:
            s00 = <Py_ssize_t>i * ny
            s10 = s00 + ny
            j = 0
            while j < nytop - oddy:
                h0 = (a[s10 + 1] + a[s10] + a[s00 + 1] + a[s00]) >> shift
                hx = (a[s10 + 1] + a[s10] - a[s00 + 1] - a[s00]) >> shift
                hy = (a[s10 + 1] - a[s10] + a[s00 + 1] - a[s00]) >> shift
                hc = (a[s10 + 1] - a[s10] - a[s00 + 1] + a[s00]) >> shift
                a[s10 + 1] = hc
                a[s10] = ((hx + prnd) if hx >= 0 else hx) & mask
                a[s00 + 1] = ((hy + prnd) if hy >= 0 else hy) & mask
                a[s00] = ((h0 + prnd2) if h0 >= 0 else (h0 + nrnd2)) & mask2
                s00 += 2
                s10 += 2
                j += 2
            if oddy:
                h0 = (a[s10] + a[s00]) << (1 - shift)
                hx = (a[s10] - a[s00]) << (1 - shift)
                a[s10] = ((hx + prnd) if hx >= 0 else hx) & mask
                a[s00] = ((h0 + prnd2) if h0 >= 0 else (h0 + nrnd2)) & mask2
            i += 2
        if oddx:
            s00 = <Py_ssize_t>i * ny
            j = 0
            while j < nytop - oddy:
                h0 = (a[s00 + 1] + a[s00]) << (1 - shift)
                hy = (a[s00 + 1] - a[s00]) << (1 - shift)
                a[s00 + 1] = ((hy + prnd) if hy >= 0 else hy) & mask
                a[s00] = ((h0 + prnd2) if h0 >= 0 else (h0 + nrnd2)) & mask2
                s00 += 2
                j += 2
            if oddy:
                h0 = a[s00] << (2 - shift)
                a[s00] = ((h0 + prnd2) if h0 >= 0 else (h0 + nrnd2)) & mask2
        for i in range(nxtop):
            _shuffle(&a[<Py_ssize_t>ny * i], nytop, 1, tmp)
        for j in range(nytop):
            _shuffle(&a[j], nxtop, ny, tmp)
        nxtop = (nxtop + 1) >> 1
        nytop = (nytop + 1) >> 1
        shift = 1
        mask = mask2
        prnd = prnd2
        mask2 = mask2 << 1
        prnd2 = prnd2 << 1
        nrnd2 = prnd2 - 1
    free(tmp)
    return 0


cdef struct _Out:
    uint8_t* buf
    Py_ssize_t cap
    Py_ssize_t pos
    int acc
    int nacc
    int failed


cdef inline void _out_bits(_Out* o, int64_t value, int n) noexcept nogil:
    # n <= 24
    o.acc = (o.acc << n) | <int>(value & ((1 << n) - 1))
    o.nacc += n
    while o.nacc >= 8:
        o.nacc -= 8
        if o.pos >= o.cap:
            o.failed = 1
            return
        o.buf[o.pos] = <uint8_t>((o.acc >> o.nacc) & 0xFF)
        o.pos += 1
    o.acc &= (1 << o.nacc) - 1


cdef inline void _out_flush(_Out* o) noexcept nogil:
    if o.nacc > 0:
        _out_bits(o, 0, 8 - o.nacc)


cdef void _onebit(const int64_t* a, int n, int nx, int ny, uint8_t* b, int bit) noexcept nogil:
    cdef int i = 0, j
    cdef Py_ssize_t k = 0, s00, s10
    while i < nx - 1:
        s00 = <Py_ssize_t>n * i
        s10 = s00 + n
        j = 0
        while j < ny - 1:
            b[k] = <uint8_t>((((a[s00] >> bit) & 1) << 3) | (((a[s00 + 1] >> bit) & 1) << 2)
                             | (((a[s10] >> bit) & 1) << 1) | ((a[s10 + 1] >> bit) & 1))
            k += 1
            s00 += 2
            s10 += 2
            j += 2
        if j < ny:
            b[k] = <uint8_t>((((a[s00] >> bit) & 1) << 3) | (((a[s10] >> bit) & 1) << 1))
            k += 1
        i += 2
    if i < nx:
        s00 = <Py_ssize_t>n * i
        j = 0
        while j < ny - 1:
            b[k] = <uint8_t>((((a[s00] >> bit) & 1) << 3) | (((a[s00 + 1] >> bit) & 1) << 2))
            k += 1
            s00 += 2
            j += 2
        if j < ny:
            b[k] = <uint8_t>(((a[s00] >> bit) & 1) << 3)
            k += 1


cdef void _reduce(uint8_t* a, int n, int nx, int ny, uint8_t* b) noexcept nogil:
    cdef int i = 0, j
    cdef Py_ssize_t k = 0, s00, s10
    while i < nx - 1:
        s00 = <Py_ssize_t>n * i
        s10 = s00 + n
        j = 0
        while j < ny - 1:
            b[k] = <uint8_t>(((a[s00] != 0) << 3) | ((a[s00 + 1] != 0) << 2)
                             | ((a[s10] != 0) << 1) | (a[s10 + 1] != 0))
            k += 1
            s00 += 2
            s10 += 2
            j += 2
        if j < ny:
            b[k] = <uint8_t>(((a[s00] != 0) << 3) | ((a[s10] != 0) << 1))
            k += 1
        i += 2
    if i < nx:
        s00 = <Py_ssize_t>n * i
        j = 0
        while j < ny - 1:
            b[k] = <uint8_t>(((a[s00] != 0) << 3) | ((a[s00 + 1] != 0) << 2))
            k += 1
            s00 += 2
            j += 2
        if j < ny:
            b[k] = <uint8_t>((a[s00] != 0) << 3)
            k += 1


cdef int _qtree_encode(_Out* o, const int64_t* a, int n, int nqx, int nqy, int nbitplanes,
                       uint8_t* scratch, uint8_t* codes) noexcept nogil:
    # codes: scratch space for the non-zero 4-bit values of every level, in emission order reversed
    cdef int nqmax = nqx if nqx > nqy else nqy
    cdef int log2n, bit, k, nx, ny
    cdef Py_ssize_t ncodes, nbits, limit, i, m, nq
    if nqx < 0 or nqy < 0:
        return C_ERR_CORRUPT
    log2n = _log2up(nqmax)
    nq = <Py_ssize_t>((nqx + 1) // 2) * ((nqy + 1) // 2)
    limit = 8 * ((nq + 1) // 2)
    for bit in range(nbitplanes - 1, -1, -1):
        _onebit(a, n, nqx, nqy, scratch, bit)
        nx = (nqx + 1) >> 1
        ny = (nqy + 1) >> 1
        ncodes = 0
        nbits = 0
        for m in range(<Py_ssize_t>nx * ny):
            if scratch[m]:
                codes[ncodes] = scratch[m]
                ncodes += 1
                nbits += _NCODE[scratch[m]]
        k = 1
        while k < log2n and nbits < limit:
            _reduce(scratch, ny, nx, ny, scratch)
            nx = (nx + 1) >> 1
            ny = (ny + 1) >> 1
            for m in range(<Py_ssize_t>nx * ny):
                if scratch[m]:
                    codes[ncodes] = scratch[m]
                    ncodes += 1
                    nbits += _NCODE[scratch[m]]
            k += 1
        if nbits >= limit:
            # the quadtree would expand this bit plane: write it directly, 4 bits per 2x2 block
            _out_bits(o, 0, 4)
            _onebit(a, n, nqx, nqy, scratch, bit)
            for m in range(nq):
                _out_bits(o, scratch[m], 4)
        else:
            _out_bits(o, 0xF, 4)
            if ncodes == 0:
                _out_bits(o, _CODE[0], _NCODE[0])
            else:
                for i in range(ncodes - 1, -1, -1):
                    _out_bits(o, _CODE[codes[i]], _NCODE[codes[i]])
        if o.failed:
            return C_ERR_MEMORY
    return 0


cdef Py_ssize_t _encode(int64_t* a, int nx, int ny, int scale, uint8_t* out, Py_ssize_t cap) noexcept nogil:
    cdef Py_ssize_t nel = <Py_ssize_t>nx * ny, i, nsign = 0
    cdef int nx2 = (nx + 1) // 2, ny2 = (ny + 1) // 2, q, j, k, rc
    cdef int nb[3]
    cdef int64_t vmax[3]
    cdef int64_t d, sumall, v
    cdef uint8_t* scratch
    cdef uint8_t* codes
    cdef uint8_t* signs
    cdef int signbits = 0, nsb = 0
    cdef _Out o
    rc = _htrans(a, nx, ny)
    if rc != 0:
        return rc
    if scale > 1:
        d = (scale + 1) // 2 - 1
        for i in range(nel):
            v = (a[i] + d) if a[i] > 0 else (a[i] - d)
            # C division truncates toward zero
            a[i] = v // scale if v >= 0 else -((-v) // scale)
    if cap < 25:
        return C_ERR_MEMORY
    out[0] = 0xDD
    out[1] = 0x99
    for k in range(4):
        out[2 + k] = <uint8_t>((nx >> (24 - 8 * k)) & 0xFF)
        out[6 + k] = <uint8_t>((ny >> (24 - 8 * k)) & 0xFF)
        out[10 + k] = <uint8_t>((scale >> (24 - 8 * k)) & 0xFF)
    sumall = a[0]
    for k in range(8):
        out[14 + k] = <uint8_t>((sumall >> (56 - 8 * k)) & 0xFF)
    a[0] = 0
    signs = <uint8_t*>malloc(nel // 8 + 2)
    if signs == NULL:
        return C_ERR_MEMORY
    for i in range(nel):
        if a[i] != 0:
            signbits = (signbits << 1) | (1 if a[i] < 0 else 0)
            nsb += 1
            if a[i] < 0:
                a[i] = -a[i]
            if nsb == 8:
                signs[nsign] = <uint8_t>signbits
                nsign += 1
                signbits = 0
                nsb = 0
    if nsb:
        signs[nsign] = <uint8_t>(signbits << (8 - nsb))
        nsign += 1
    vmax[0] = vmax[1] = vmax[2] = 0
    j = 0
    k = 0
    for i in range(nel):
        q = (j >= ny2) + (k >= nx2)
        if vmax[q] < a[i]:
            vmax[q] = a[i]
        j += 1
        if j >= ny:
            j = 0
            k += 1
    for q in range(3):
        nb[q] = 0
        while vmax[q] > 0:
            vmax[q] >>= 1
            nb[q] += 1
        out[22 + q] = <uint8_t>nb[q]
    scratch = <uint8_t*>malloc(<Py_ssize_t>((nx2 + 1) // 2 + 1) * ((ny2 + 1) // 2 + 1) + 16)
    codes = <uint8_t*>malloc(<Py_ssize_t>((nx2 + 1) // 2 + 1) * ((ny2 + 1) // 2 + 1) * 2 + 16)
    if scratch == NULL or codes == NULL:
        free(scratch)
        free(codes)
        free(signs)
        return C_ERR_MEMORY
    o.buf = out
    o.cap = cap
    o.pos = 25
    o.acc = 0
    o.nacc = 0
    o.failed = 0
    rc = _qtree_encode(&o, a, ny, nx2, ny2, nb[0], scratch, codes)
    if rc == 0:
        rc = _qtree_encode(&o, a + ny2, ny, nx2, ny // 2, nb[1], scratch, codes)
    if rc == 0:
        rc = _qtree_encode(&o, a + <Py_ssize_t>ny * nx2, ny, nx // 2, ny2, nb[1], scratch, codes)
    if rc == 0:
        rc = _qtree_encode(&o, a + <Py_ssize_t>ny * nx2 + ny2, ny, nx // 2, ny // 2, nb[2], scratch, codes)
    free(scratch)
    free(codes)
    if rc == 0:
        _out_bits(&o, 0, 4)
        _out_flush(&o)
        if o.failed or o.pos + nsign > cap:
            rc = C_ERR_MEMORY
        else:
            for i in range(nsign):
                out[o.pos + i] = signs[i]
            o.pos += nsign
    free(signs)
    if rc != 0:
        return rc
    return o.pos


def encode(cnp.ndarray src, int scale) -> bytes:
    """Encode a 2-D integer tile (C order: nx slow × ny fast) as one HCOMPRESS_1 stream.

    ``scale`` > 1 divides the coefficients (lossy); 0 or 1 is lossless.
    """
    cdef cnp.ndarray a = np.array(src, dtype=np.int64, order="C", copy=True)
    cdef int nx, ny
    cdef Py_ssize_t cap, rc
    cdef bytearray buf
    if a.ndim != 2:
        raise ValueError("HCOMPRESS_1 tiles are 2-D")
    nx = <int>a.shape[0]
    ny = <int>a.shape[1]
    cap = a.size * 9 + 1024
    buf = bytearray(cap)
    cdef int64_t* pa = <int64_t*>cnp.PyArray_DATA(a)
    cdef uint8_t* pb = <uint8_t*>(<char*>buf)
    with nogil:
        rc = _encode(pa, nx, ny, scale, pb, cap)
    if rc < 0:
        raise ValueError(f"HCOMPRESS_1 encode failed (code {rc})")
    return bytes(buf[:rc])


def decode(const uint8_t[::1] src, cnp.ndarray out, int nx, int ny, bint smooth,
           bint narrow=False) -> int:
    """Decode one HCOMPRESS_1 tile of ``nx`` (slow) × ``ny`` (fast) pixels into int64 ``out``.

    ``narrow``: 32-bit arithmetic, as CFITSIO decodes 8- and 16-bit images (64-bit otherwise).
    Returns 0 or a negative error code.
    """
    cdef Py_ssize_t n = src.shape[0]
    cdef int rc
    cdef int64_t* o
    cdef _Work w
    cdef _Need need
    if out.dtype != np.int64 or not out.flags.c_contiguous or not out.flags.writeable \
            or out.size != <Py_ssize_t>nx * ny:
        raise ValueError("out must be a writable C-contiguous int64 array of nx * ny pixels")
    if nx <= 0 or ny <= 0:
        return 0
    if n == 0:
        return C_ERR_TRUNCATED
    o = <int64_t*>cnp.PyArray_DATA(out)
    need.nel = need.nodd = need.neven = need.nodes = 0
    with nogil:
        _need(&need, nx, ny)
        rc = _work_alloc(&w, &need)
        if rc == 0:
            if narrow:
                rc = _decode(&src[0], n, nx, ny, smooth, <int32_t*>w.coef, <int32_t*>w.odd,
                             <int32_t*>w.even, w.nodes, o)
            else:
                rc = _decode(&src[0], n, nx, ny, smooth, <int64_t*>w.coef, <int64_t*>w.odd,
                             <int64_t*>w.even, w.nodes, o)
        free(w.block)
    return rc


cdef int _decode_into(const uint8_t* src, Py_ssize_t n, int nx, int ny, bint smooth, bint narrow,
                      _Work* w, uint8_t* target, int itemsize) noexcept nogil:
    # one tile into `target`, a run of nx * ny pixels of `itemsize` bytes
    if narrow:
        if itemsize == 1:
            return _decode(src, n, nx, ny, smooth, <int32_t*>w.coef, <int32_t*>w.odd,
                           <int32_t*>w.even, w.nodes, target)
        if itemsize == 2:
            return _decode(src, n, nx, ny, smooth, <int32_t*>w.coef, <int32_t*>w.odd,
                           <int32_t*>w.even, w.nodes, <int16_t*>target)
        if itemsize == 4:
            return _decode(src, n, nx, ny, smooth, <int32_t*>w.coef, <int32_t*>w.odd,
                           <int32_t*>w.even, w.nodes, <int32_t*>target)
        return _decode(src, n, nx, ny, smooth, <int32_t*>w.coef, <int32_t*>w.odd,
                       <int32_t*>w.even, w.nodes, <int64_t*>target)
    if itemsize == 1:
        return _decode(src, n, nx, ny, smooth, <int64_t*>w.coef, <int64_t*>w.odd,
                       <int64_t*>w.even, w.nodes, target)
    if itemsize == 2:
        return _decode(src, n, nx, ny, smooth, <int64_t*>w.coef, <int64_t*>w.odd,
                       <int64_t*>w.even, w.nodes, <int16_t*>target)
    if itemsize == 4:
        return _decode(src, n, nx, ny, smooth, <int64_t*>w.coef, <int64_t*>w.odd,
                       <int64_t*>w.even, w.nodes, <int32_t*>target)
    return _decode(src, n, nx, ny, smooth, <int64_t*>w.coef, <int64_t*>w.odd,
                   <int64_t*>w.even, w.nodes, <int64_t*>target)


def decode_many(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] sizes,
                const int64_t[::1] nrows, const int64_t[::1] ncols, const int64_t[::1] dest,
                cnp.ndarray out, bint smooth, bint narrow, uint8_t[::1] status,
                const uint8_t[::1] stop) -> int:
    """Decode tiles into the flat integer array ``out`` (itemsize 1, 2, 4 or 8) in one GIL-free
    loop.

    Tile i is ``sizes[i]`` bytes at ``offsets[i]`` of ``buf``, ``nrows[i]`` × ``ncols[i]``
    pixels, written at element ``dest[i]`` of ``out`` (cast as CFITSIO casts: truncated).
    ``narrow``: 32-bit arithmetic, as CFITSIO decodes 8- and 16-bit images (64-bit otherwise).
    ``status[i]`` becomes OK, MISMATCH (bad bounds, or a stream that does not decode to the
    tile) or STOPPED; the loop stops early once ``stop[0]`` is non-zero (another chunk failed).
    Returns the number of tiles not OK.
    """
    cdef Py_ssize_t n = offsets.shape[0], i, blen = buf.shape[0], olen = out.size
    cdef int itemsize = out.itemsize
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef Py_ssize_t bad = 0
    cdef int64_t nx, ny, npx
    cdef int rc
    cdef _Work w
    cdef _Need need
    if itemsize not in (1, 2, 4, 8) or out.dtype.kind not in "iu" or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous integer array")
    if sizes.shape[0] != n or nrows.shape[0] != n or ncols.shape[0] != n or dest.shape[0] != n \
            or status.shape[0] != n:
        raise ValueError("offsets, sizes, nrows, ncols, dest and status must have the same length")
    if stop.shape[0] < 1:
        raise ValueError("stop must hold one byte")
    need.nel = need.nodd = need.neven = need.nodes = 0
    for i in range(n):
        if 0 < nrows[i] <= 0x7FFFFFFF and 0 < ncols[i] <= 0x7FFFFFFF \
                and nrows[i] * ncols[i] <= 0x7FFFFFFF:
            _need(&need, <int>nrows[i], <int>ncols[i])
    if _work_alloc(&w, &need) != 0:
        raise MemoryError()
    try:
        with nogil:
            for i in range(n):
                nx = nrows[i]
                ny = ncols[i]
                # a tile shape past 32 bits or an empty stream: -1 pixels, which is MISMATCH
                npx = nx * ny if 0 < nx <= 0x7FFFFFFF and 0 < ny <= 0x7FFFFFFF \
                    and nx * ny <= 0x7FFFFFFF and sizes[i] != 0 else -1
                if tile_skipped(stop, status, i, offsets[i], sizes[i], blen, dest[i], npx, olen):
                    bad += 1
                    continue
                rc = _decode_into(b + offsets[i], sizes[i], <int>nx, <int>ny, smooth, narrow, &w,
                                  o + dest[i] * itemsize, itemsize)
                status[i] = TILE_OK if rc == 0 else TILE_MISMATCH
                bad += rc != 0
    finally:
        free(w.block)
    return bad

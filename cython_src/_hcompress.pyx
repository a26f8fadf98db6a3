# cython: language_level=3
"""HCOMPRESS_1 kernels: the H-transform image codec (White 1992) of the tiled image convention.

Stream: magic 0xDD 0x99, then nx, ny, scale as big-endian int32 (nx is the slow axis), the sum of
all pixels as a big-endian int64, the bit-plane counts of the three coefficient quadrants (one
byte each), the quadtree-coded bit planes of the coefficient magnitudes (4-bit Huffman codes),
an end nybble of zero, and one sign bit per non-zero coefficient. Decoding multiplies by
``scale``, then inverts the H-transform (optionally smoothing the coefficients when scale > 1).
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc

import numpy as np

cimport numpy as cnp

cnp.import_array()

cdef enum:
    C_ERR_TRUNCATED = -1
    C_ERR_CORRUPT = -2
    C_ERR_MEMORY = -3

ERR_TRUNCATED = C_ERR_TRUNCATED
ERR_CORRUPT = C_ERR_CORRUPT
ERR_MEMORY = C_ERR_MEMORY



cdef struct _Bits:
    const uint8_t* src
    Py_ssize_t n
    Py_ssize_t pos
    int buf
    int nbits
    int failed


cdef inline int _bit(_Bits* b) noexcept nogil:
    if b.nbits == 0:
        if b.pos >= b.n:
            b.failed = 1
            return 0
        b.buf = b.src[b.pos]
        b.pos += 1
        b.nbits = 8
    b.nbits -= 1
    return (b.buf >> b.nbits) & 1


cdef inline int _nbits(_Bits* b, int k) noexcept nogil:
    cdef int v = 0, i
    for i in range(k):
        v = (v << 1) | _bit(b)
    return v


cdef inline int _huffman(_Bits* b) noexcept nogil:
    cdef int c = _nbits(b, 3)
    if c < 4:
        return 1 << c
    c = _bit(b) | (c << 1)
    if c == 8:
        return 3
    if c == 9:
        return 5
    if c == 10:
        return 10
    if c == 11:
        return 12
    if c == 12:
        return 15
    c = _bit(b) | (c << 1)
    if c == 26:
        return 6
    if c == 27:
        return 7
    if c == 28:
        return 9
    if c == 29:
        return 11
    if c == 30:
        return 13
    c = _bit(b) | (c << 1)
    return 0 if c == 62 else 14


cdef int _log2up(int n) noexcept nogil:
    # smallest k with 2^k >= n
    cdef int k = 0
    while (1 << k) < n:
        k += 1
    return k


cdef void _qtree_copy(uint8_t* a, int nx, int ny, uint8_t* b, int n) noexcept nogil:
    # Expand the ((nx+1)/2, (ny+1)/2) 4-bit codes of a into single bits of b (row stride n).
    cdef int nx2 = (nx + 1) // 2, ny2 = (ny + 1) // 2
    cdef int i, j, v
    cdef Py_ssize_t k = <Py_ssize_t>ny2 * (nx2 - 1) + ny2 - 1, s00, s10
    for i in range(nx2 - 1, -1, -1):
        s00 = 2 * (<Py_ssize_t>n * i + ny2 - 1)
        for j in range(ny2 - 1, -1, -1):
            b[s00] = a[k]
            k -= 1
            s00 -= 2
    i = 0
    while i < nx - 1:
        s00 = <Py_ssize_t>n * i
        s10 = s00 + n
        j = 0
        while j < ny - 1:
            v = b[s00]
            b[s10 + 1] = v & 1
            b[s10] = (v >> 1) & 1
            b[s00 + 1] = (v >> 2) & 1
            b[s00] = (v >> 3) & 1
            s00 += 2
            s10 += 2
            j += 2
        if j < ny:
            v = b[s00]
            b[s10] = (v >> 1) & 1
            b[s00] = (v >> 3) & 1
        i += 2
    if i < nx:
        s00 = <Py_ssize_t>n * i
        j = 0
        while j < ny - 1:
            v = b[s00]
            b[s00 + 1] = (v >> 2) & 1
            b[s00] = (v >> 3) & 1
            s00 += 2
            j += 2
        if j < ny:
            b[s00] = (b[s00] >> 3) & 1


cdef void _qtree_bitins(const uint8_t* a, int nx, int ny, int64_t* b, int n, int bit) noexcept nogil:
    # OR the 4-bit codes of a, expanded to 2x2 blocks, into bit plane `bit` of b (row stride n).
    cdef int i, j
    cdef int64_t v, one = 1
    cdef Py_ssize_t k = 0, s00, s10
    i = 0
    while i < nx - 1:
        s00 = <Py_ssize_t>n * i
        s10 = s00 + n
        j = 0
        while j < ny - 1:
            v = a[k]
            b[s10 + 1] |= (v & 1) << bit
            b[s10] |= ((v >> 1) & 1) << bit
            b[s00 + 1] |= ((v >> 2) & 1) << bit
            b[s00] |= ((v >> 3) & 1) << bit
            s00 += 2
            s10 += 2
            k += 1
            j += 2
        if j < ny:
            v = a[k]
            b[s10] |= ((v >> 1) & 1) << bit
            b[s00] |= ((v >> 3) & 1) << bit
            k += 1
        i += 2
    if i < nx:
        s00 = <Py_ssize_t>n * i
        j = 0
        while j < ny - 1:
            v = a[k]
            b[s00 + 1] |= ((v >> 2) & 1) << bit
            b[s00] |= ((v >> 3) & 1) << bit
            s00 += 2
            k += 1
            j += 2
        if j < ny:
            v = a[k]
            b[s00] |= ((v >> 3) & 1) << bit
            k += 1


cdef int _qtree_decode(_Bits* bs, int64_t* a, int n, int nqx, int nqy, int nbitplanes,
                       uint8_t* scratch) noexcept nogil:
    cdef int log2n, bit, code, k, nx, ny, nfx, nfy, c, i
    cdef Py_ssize_t m
    cdef int nqmax = nqx if nqx > nqy else nqy
    if nqx < 0 or nqy < 0:
        return C_ERR_CORRUPT
    log2n = _log2up(nqmax)
    for bit in range(nbitplanes - 1, -1, -1):
        code = _nbits(bs, 4)
        if bs.failed:
            return C_ERR_TRUNCATED
        if code == 0:
            m = <Py_ssize_t>((nqx + 1) // 2) * ((nqy + 1) // 2)
            for i in range(m):
                scratch[i] = <uint8_t>_nbits(bs, 4)
            _qtree_bitins(scratch, nqx, nqy, a, n, bit)
        elif code != 0xF:
            return C_ERR_CORRUPT
        else:
            scratch[0] = <uint8_t>_huffman(bs)
            nx = 1
            ny = 1
            nfx = nqx
            nfy = nqy
            c = 1 << log2n
            for k in range(1, log2n):
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
                _qtree_copy(scratch, nx, ny, scratch, ny)
                for m in range(<Py_ssize_t>nx * ny - 1, -1, -1):
                    if scratch[m]:
                        scratch[m] = <uint8_t>_huffman(bs)
            _qtree_bitins(scratch, nqx, nqy, a, n, bit)
        if bs.failed:
            return C_ERR_TRUNCATED
    return 0


cdef void _unshuffle(int64_t* a, int n, int n2, int64_t* tmp) noexcept nogil:
    # a[0], a[n2], ...: first half holds the even elements, second half the odd ones; interleave.
    cdef int nhalf = (n + 1) >> 1, i
    cdef Py_ssize_t k
    for i in range(nhalf, n):
        tmp[i - nhalf] = a[<Py_ssize_t>n2 * i]
    for i in range(nhalf - 1, -1, -1):
        a[<Py_ssize_t>2 * n2 * i] = a[<Py_ssize_t>n2 * i]
    k = 0
    i = 1
    while i < n:
        a[<Py_ssize_t>n2 * i] = tmp[k]
        k += 1
        i += 2


cdef inline int64_t _min(int64_t a, int64_t b) noexcept nogil:
    return a if a < b else b


cdef inline int64_t _max(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


cdef void _hsmooth(int64_t* a, int nxtop, int nytop, int ny, int scale) noexcept nogil:
    cdef int64_t smax = scale >> 1, hm, h0, hp, hmm, hpm, hmp, hpp, hx2, hy2, diff, dmax, dmin, s
    cdef int64_t m1, m2
    cdef Py_ssize_t s00, s10, ny2 = 2 * <Py_ssize_t>ny
    cdef int i, j
    if smax <= 0:
        return
    # x differences
    i = 2
    while i < nxtop - 2:
        s00 = <Py_ssize_t>ny * i
        s10 = s00 + ny
        j = 0
        while j < nytop:
            hm = a[s00 - ny2]
            h0 = a[s00]
            hp = a[s00 + ny2]
            diff = hp - hm
            dmax = _max(_min(hp - h0, h0 - hm), 0) << 2
            dmin = _min(_max(hp - h0, h0 - hm), 0) << 2
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (a[s10] << 3)
                s = (s >> 3) if s >= 0 else ((s + 7) >> 3)
                s = _max(_min(s, smax), -smax)
                a[s10] = a[s10] + s
            s00 += 2
            s10 += 2
            j += 2
        i += 2
    # y differences
    i = 0
    while i < nxtop:
        s00 = <Py_ssize_t>ny * i + 2
        j = 2
        while j < nytop - 2:
            hm = a[s00 - 2]
            h0 = a[s00]
            hp = a[s00 + 2]
            diff = hp - hm
            dmax = _max(_min(hp - h0, h0 - hm), 0) << 2
            dmin = _min(_max(hp - h0, h0 - hm), 0) << 2
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (a[s00 + 1] << 3)
                s = (s >> 3) if s >= 0 else ((s + 7) >> 3)
                s = _max(_min(s, smax), -smax)
                a[s00 + 1] = a[s00 + 1] + s
            s00 += 2
            j += 2
        i += 2
    # cross differences
    i = 2
    while i < nxtop - 2:
        s00 = <Py_ssize_t>ny * i + 2
        s10 = s00 + ny
        j = 2
        while j < nytop - 2:
            hmm = a[s00 - ny2 - 2]
            hpm = a[s00 + ny2 - 2]
            hmp = a[s00 - ny2 + 2]
            hpp = a[s00 + ny2 + 2]
            h0 = a[s00]
            diff = hpp + hmm - hmp - hpm
            hx2 = a[s10] << 1
            hy2 = a[s00 + 1] << 1
            m1 = _min(_max(hpp - h0, 0) - hx2 - hy2, _max(h0 - hpm, 0) + hx2 - hy2)
            m2 = _min(_max(h0 - hmp, 0) - hx2 + hy2, _max(hmm - h0, 0) + hx2 + hy2)
            dmax = _min(m1, m2) << 4
            m1 = _max(_min(hpp - h0, 0) - hx2 - hy2, _min(h0 - hpm, 0) + hx2 - hy2)
            m2 = _max(_min(h0 - hmp, 0) - hx2 + hy2, _min(hmm - h0, 0) + hx2 + hy2)
            dmin = _max(m1, m2) << 4
            if dmin < dmax:
                diff = _max(_min(diff, dmax), dmin)
                s = diff - (a[s10 + 1] << 6)
                s = (s >> 6) if s >= 0 else ((s + 63) >> 6)
                s = _max(_min(s, smax), -smax)
                a[s10 + 1] = a[s10 + 1] + s
            s00 += 2
            s10 += 2
            j += 2
        i += 2


cdef int _hinv(int64_t* a, int nx, int ny, int smooth, int scale) noexcept nogil:
    cdef int nmax = nx if nx > ny else ny
    cdef int log2n = _log2up(nmax), k, i, j, nxtop, nytop, nxf, nyf, c, oddx, oddy, shift = 1
    cdef int64_t bit0, bit1, bit2, mask0, mask1, mask2, prnd0, prnd1, prnd2, nrnd0, nrnd1, nrnd2
    cdef int64_t h0, hx, hy, hc, lowbit0, lowbit1
    cdef Py_ssize_t s00, s10
    cdef int64_t* tmp
    if log2n == 0:
        return 0
    tmp = <int64_t*>malloc(sizeof(int64_t) * ((nmax + 1) // 2 + 1))
    if tmp == NULL:
        return C_ERR_MEMORY
    bit0 = (<int64_t>1) << (log2n - 1)
    bit1 = bit0 << 1
    bit2 = bit0 << 2
    mask0 = -bit0
    mask1 = mask0 << 1
    mask2 = mask0 << 2
    prnd0 = bit0 >> 1
    prnd1 = bit1 >> 1
    prnd2 = bit2 >> 1
    nrnd0 = prnd0 - 1
    nrnd1 = prnd1 - 1
    nrnd2 = prnd2 - 1
    a[0] = (a[0] + (prnd2 if a[0] >= 0 else nrnd2)) & mask2
    nxtop = 1
    nytop = 1
    nxf = nx
    nyf = ny
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
            nrnd0 = 0
            shift = 2
        for i in range(nxtop):
            _unshuffle(&a[<Py_ssize_t>ny * i], nytop, 1, tmp)
        for j in range(nytop):
            _unshuffle(&a[j], nxtop, ny, tmp)
        if smooth:
            _hsmooth(a, nxtop, nytop, ny, scale)
        oddx = nxtop % 2
        oddy = nytop % 2
        i = 0
        while i < nxtop - oddx:
            s00 = <Py_ssize_t>ny * i
            s10 = s00 + ny
            j = 0
            while j < nytop - oddy:
                h0 = a[s00]
                hx = a[s10]
                hy = a[s00 + 1]
                hc = a[s10 + 1]
                hx = (hx + (prnd1 if hx >= 0 else nrnd1)) & mask1
                hy = (hy + (prnd1 if hy >= 0 else nrnd1)) & mask1
                hc = (hc + (prnd0 if hc >= 0 else nrnd0)) & mask0
                lowbit0 = hc & bit0
                hx = (hx - lowbit0) if hx >= 0 else (hx + lowbit0)
                hy = (hy - lowbit0) if hy >= 0 else (hy + lowbit0)
                lowbit1 = (hc ^ hx ^ hy) & bit1
                if h0 >= 0:
                    h0 = h0 + lowbit0 - lowbit1
                else:
                    h0 = h0 + (lowbit1 if lowbit0 == 0 else (lowbit0 - lowbit1))
                a[s10 + 1] = (h0 + hx + hy + hc) >> shift
                a[s10] = (h0 + hx - hy - hc) >> shift
                a[s00 + 1] = (h0 - hx + hy - hc) >> shift
                a[s00] = (h0 - hx - hy + hc) >> shift
                s00 += 2
                s10 += 2
                j += 2
            if oddy:
                h0 = a[s00]
                hx = a[s10]
                hx = (hx + (prnd1 if hx >= 0 else nrnd1)) & mask1
                lowbit1 = hx & bit1
                h0 = (h0 - lowbit1) if h0 >= 0 else (h0 + lowbit1)
                a[s10] = (h0 + hx) >> shift
                a[s00] = (h0 - hx) >> shift
            i += 2
        if oddx:
            s00 = <Py_ssize_t>ny * i
            j = 0
            while j < nytop - oddy:
                h0 = a[s00]
                hy = a[s00 + 1]
                hy = (hy + (prnd1 if hy >= 0 else nrnd1)) & mask1
                lowbit1 = hy & bit1
                h0 = (h0 - lowbit1) if h0 >= 0 else (h0 + lowbit1)
                a[s00 + 1] = (h0 + hy) >> shift
                a[s00] = (h0 - hy) >> shift
                s00 += 2
                j += 2
            if oddy:
                h0 = a[s00]
                a[s00] = h0 >> shift
        bit2 = bit1
        bit1 = bit0
        bit0 = bit0 >> 1
        mask1 = mask0
        mask0 = mask0 >> 1
        prnd1 = prnd0
        prnd0 = prnd0 >> 1
        nrnd1 = nrnd0
        nrnd0 = prnd0 - 1
    free(tmp)
    return 0


cdef int64_t _be(const uint8_t* p, int k) noexcept nogil:
    cdef int64_t v = 0
    cdef int i
    for i in range(k):
        v = (v << 8) | p[i]
    return v


cdef int _decode(const uint8_t* src, Py_ssize_t n, int64_t* a, int nx, int ny, int smooth) noexcept nogil:
    cdef int scale, nb0, nb1, nb2, rc, nx2, ny2
    cdef int64_t sumall
    cdef Py_ssize_t i, nel = <Py_ssize_t>nx * ny
    cdef _Bits bs
    cdef uint8_t* scratch
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
    for i in range(nel):
        a[i] = 0
    nx2 = (nx + 1) // 2
    ny2 = (ny + 1) // 2
    scratch = <uint8_t*>malloc(<Py_ssize_t>((nx2 + 1) // 2 + 1) * ((ny2 + 1) // 2 + 1) * 4 + 16)
    if scratch == NULL:
        return C_ERR_MEMORY
    bs.src = src
    bs.n = n
    bs.pos = 25
    bs.buf = 0
    bs.nbits = 0
    bs.failed = 0
    rc = _qtree_decode(&bs, a, ny, nx2, ny2, nb0, scratch)
    if rc == 0:
        rc = _qtree_decode(&bs, a + ny2, ny, nx2, ny // 2, nb1, scratch)
    if rc == 0:
        rc = _qtree_decode(&bs, a + <Py_ssize_t>ny * nx2, ny, nx // 2, ny2, nb1, scratch)
    if rc == 0:
        rc = _qtree_decode(&bs, a + <Py_ssize_t>ny * nx2 + ny2, ny, nx // 2, ny // 2, nb2, scratch)
    free(scratch)
    if rc != 0:
        return rc
    if _nbits(&bs, 4) != 0 or bs.failed:
        return C_ERR_CORRUPT
    # sign bits start on a fresh byte
    bs.nbits = 0
    for i in range(nel):
        if a[i] != 0:
            if _bit(&bs):
                a[i] = -a[i]
    if bs.failed:
        return C_ERR_TRUNCATED
    a[0] = sumall
    if scale > 1:
        for i in range(nel):
            a[i] *= scale
    return _hinv(a, nx, ny, smooth, scale)


def decode(const uint8_t[::1] src, cnp.ndarray out, int nx, int ny, bint smooth) -> int:
    """Decode one HCOMPRESS_1 tile of ``nx`` (slow) × ``ny`` (fast) pixels into int64 ``out``.

    Returns 0 or a negative error code.
    """
    cdef int64_t* a = <int64_t*>cnp.PyArray_DATA(out)
    cdef Py_ssize_t n = src.shape[0]
    cdef int rc
    if out.dtype != np.int64 or not out.flags.c_contiguous or out.size != <Py_ssize_t>nx * ny:
        raise ValueError("out must be a C-contiguous int64 array of nx * ny pixels")
    if nx <= 0 or ny <= 0:
        return 0
    if n == 0:
        return C_ERR_TRUNCATED
    with nogil:
        rc = _decode(&src[0], n, a, nx, ny, smooth)
    return rc


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
    cdef int log2n = _log2up(nmax), k, i, j, nxtop = nx, nytop = ny, oddx, oddy, shift = 0
    cdef int64_t mask = -2, mask2, prnd = 1, prnd2, nrnd2, h0, hx, hy, hc
    cdef Py_ssize_t s00, s10
    cdef int64_t* tmp = <int64_t*>malloc(sizeof(int64_t) * ((nmax + 1) // 2 + 1))
    if tmp == NULL:
        return C_ERR_MEMORY
    mask2 = mask << 1
    prnd2 = prnd << 1
    nrnd2 = prnd2 - 1
    for k in range(log2n):
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


cdef int _CODE[16]
cdef int _NCODE[16]
_CODE[:] = [0x3e, 0x00, 0x01, 0x08, 0x02, 0x09, 0x1a, 0x1b, 0x03, 0x1c, 0x0a, 0x1d, 0x0b, 0x1e,
            0x3f, 0x0c]
_NCODE[:] = [6, 3, 3, 4, 3, 4, 5, 5, 3, 5, 4, 5, 4, 5, 6, 4]


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


def decode_many(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] sizes,
                const int64_t[::1] nrows, int ncols, const int64_t[::1] dest, cnp.ndarray out,
                bint smooth) -> int:
    """Decode several HCOMPRESS_1 tiles (tile i: ``nrows[i]`` × ``ncols``) of ``buf`` into the
    flat integer ``out`` (itemsize 1, 2, 4 or 8), GIL-free. Returns -1 or the position of the
    first failing tile."""
    cdef Py_ssize_t n = offsets.shape[0], i, j, blen = buf.shape[0], olen = out.size, most = 0
    cdef Py_ssize_t npix
    cdef int itemsize = out.itemsize
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef int64_t* scratch
    cdef int rc
    cdef Py_ssize_t failed = -1
    if itemsize not in (1, 2, 4, 8) or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous integer array")
    for i in range(n):
        if nrows[i] * ncols > most:
            most = nrows[i] * ncols
    scratch = <int64_t*>malloc(sizeof(int64_t) * (most + 1))
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            npix = nrows[i] * ncols
            if offsets[i] < 0 or sizes[i] <= 0 or offsets[i] + sizes[i] > blen \
                    or dest[i] < 0 or nrows[i] <= 0 or ncols <= 0 or dest[i] + npix > olen:
                failed = i
                break
            rc = _decode(b + offsets[i], sizes[i], scratch, <int>nrows[i], ncols, smooth)
            if rc != 0:
                failed = i
                break
            for j in range(npix):
                if itemsize == 1:
                    o[dest[i] + j] = <uint8_t>scratch[j]
                elif itemsize == 2:
                    (<int16_t*>o)[dest[i] + j] = <int16_t>scratch[j]
                elif itemsize == 4:
                    (<int32_t*>o)[dest[i] + j] = <int32_t>scratch[j]
                else:
                    (<int64_t*>o)[dest[i] + j] = scratch[j]
    free(scratch)
    return failed

# cython: language_level=3
"""RICE_1 kernels of the FITS tiled image compression convention (Rice coding of pixel
differences in blocks), for 1-, 2-, 4- and 8-byte integer pixels.

Bitstream (MSB first): the first pixel raw in BYTEPIX big-endian bytes, then for each block of
BLOCKSIZE pixels a code of FSBITS bits (3/4/5/6 for BYTEPIX 1/2/4/8): 0 means every difference
is zero, FSMAX+1 means each mapped difference follows raw in 8*BYTEPIX bits, k+1 means each
mapped difference is ``(q zeros, a one, k low bits)`` with value ``q << k | low``. Differences
d are mapped to non-negative integers as ``2d`` (d >= 0) or ``-2d-1`` (d < 0), modulo 2^(8*BYTEPIX).
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from _dequant cimport dequant_tile
from _tilestatus cimport TILE_OK, TILE_MISMATCH, TILE_STOPPED, tile_skipped

cimport numpy as cnp

cnp.import_array()

cdef enum:
    C_ERR_TRUNCATED = -1
    C_ERR_OVERFLOW = -2

ERR_TRUNCATED = C_ERR_TRUNCATED
ERR_OVERFLOW = C_ERR_OVERFLOW
# Per-tile status of decode_many (cython_src/_tilestatus.pxd).
OK = TILE_OK
MISMATCH = TILE_MISMATCH
STOPPED = TILE_STOPPED


cdef extern from *:
    """
    #include "_portable.h"
    static inline int tf_clz64(unsigned long long v) { return TF_CLZ64(v); }
    """
    int tf_clz64(unsigned long long v) noexcept nogil


cdef inline int _params(int bytepix, int* fsbits, int* fsmax) noexcept nogil:
    if bytepix == 1:
        fsbits[0] = 3
        fsmax[0] = 6
    elif bytepix == 2:
        fsbits[0] = 4
        fsmax[0] = 14
    elif bytepix == 4:
        fsbits[0] = 5
        fsmax[0] = 25
    elif bytepix == 8:
        fsbits[0] = 6
        fsmax[0] = 58
    else:
        return -1
    return 0


cdef inline void _store(uint8_t* out, Py_ssize_t i, uint64_t v, int bytepix) noexcept nogil:
    if bytepix == 1:
        out[i] = <uint8_t>v
    elif bytepix == 2:
        (<int16_t*>out)[i] = <int16_t>v
    elif bytepix == 4:
        (<int32_t*>out)[i] = <int32_t>v
    else:
        (<int64_t*>out)[i] = <int64_t>v


cdef inline uint64_t _load(const uint8_t* src, Py_ssize_t i, int bytepix) noexcept nogil:
    if bytepix == 1:
        return src[i]
    elif bytepix == 2:
        return <uint64_t><uint16_t>(<const int16_t*>src)[i]
    elif bytepix == 4:
        return <uint64_t><uint32_t>(<const int32_t*>src)[i]
    return <uint64_t>(<const int64_t*>src)[i]


cdef struct _Reader:
    const uint8_t* src
    Py_ssize_t n
    Py_ssize_t p
    uint64_t b      # unread bits, left-aligned (the next bit is the MSB)
    int nbits


cdef inline void _refill(_Reader* r) noexcept nogil:
    while r.nbits <= 56 and r.p < r.n:
        r.b |= (<uint64_t>r.src[r.p]) << (56 - r.nbits)
        r.p += 1
        r.nbits += 8


cdef inline int _take(_Reader* r, int k, uint64_t* value) noexcept nogil:
    # k in 1..32
    if r.nbits < k:
        _refill(r)
        if r.nbits < k:
            return -1
    value[0] = r.b >> (64 - k)
    r.b = r.b << k
    r.nbits -= k
    return 0


cdef inline int _zeros(_Reader* r, uint64_t* count) noexcept nogil:
    # count the zero bits before the next one bit, and consume that one bit
    cdef uint64_t nz = 0
    cdef int z
    while True:
        if r.nbits == 0:
            _refill(r)
            if r.nbits == 0:
                return -1
        if r.b == 0:
            nz += r.nbits
            r.nbits = 0
            continue
        z = tf_clz64(r.b)
        if z >= r.nbits:  # cannot happen for well-formed state; treat as exhausted bits
            nz += r.nbits
            r.nbits = 0
            r.b = 0
            continue
        nz += z
        r.nbits -= z + 1
        r.b = (r.b << z) << 1
        count[0] = nz
        return 0


cdef extern from *:
    """
    static inline unsigned long long tf_load_be64(const unsigned char *p) {
        unsigned long long v;
        TF_MEMCPY(&v, p, 8);
        return TF_BSWAP64(v);
    }
    """
    unsigned long long tf_load_be64(const uint8_t* p) noexcept nogil


cdef extern from *:
    """
    #include <stdint.h>
    #include "_portable.h"
    #ifdef TF_X86_DISPATCH
    #define TF_RICE_X86 1
    #define TF_RICE_LZ TF_TARGET("lzcnt,bmi2")
    #endif

    /* Split-code blocks (q zeros, a one, fs low bits) of 2- and 4-byte pixels, while a whole
       8-byte load stays inside the stream (p <= stop). The buffer b holds nbits unread bits,
       left-aligned; a refill ORs in the next 8 bytes at bit nbits and advances p by whole
       bytes only, so the bits below nbits that came with it are the stream's own next bits
       (Giesen's branch-free refill). kmax codes are decoded per refill (about 40 bits of
       typical codes), each checked to lie below nbits; the loop's critical path is then one
       leading-zero count and two shifts per code. A code that does not fit right after a
       refill (a long run of zeros) is left to the careful loop. On return b is cut back to
       its nbits (the careful loop's `_refill` and `_zeros` expect zeros past them); last is
       the running pixel modulo 2^64, which the caller masks. */
    static const unsigned char tf_rice_kmax[32] = {  /* 40 / (fs + 3), at least 1 */
        13, 10, 8, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

    #define TF_RICE_SPLIT(NAME, T, ATTR)                                                     \\
    static ATTR Py_ssize_t NAME(const unsigned char *src, Py_ssize_t *pp, Py_ssize_t stop,     \\
                                uint64_t *pb, int *pnbits, T *out, Py_ssize_t i,                \\
                                Py_ssize_t imax, int fs, uint64_t *plast) {                     \\
        Py_ssize_t p = *pp;                                                                     \\
        uint64_t b = *pb, last = *plast, b1, diff, z, used;                                     \\
        const uint64_t base = (uint64_t)1 << fs, c = (uint64_t)fs + 1, hi = 63 - fs;            \\
        int nbits = *pnbits, k, kmax = tf_rice_kmax[fs & 31];                                   \\
        while (i < imax && p <= stop) {                                                         \\
            b |= tf_load_be64(src + p) >> nbits;                                                \\
            p += (63 - nbits) >> 3;                                                             \\
            nbits |= 56;                                                                        \\
            for (k = 0; k < kmax; k++) {                                                        \\
                z = b ? TF_CLZ64(b) : 64;                                                       \\
                used = z + c;                                                                   \\
                if (used > (uint64_t)nbits) {                                                   \\
                    if (k == 0) goto done;                                                      \\
                    break;                                                                      \\
                }                                                                               \\
                b1 = b << z;                                                                    \\
                diff = (z << fs) + (b1 >> hi) - base;                                           \\
                b <<= used;                                                                     \\
                nbits -= (int)used;                                                             \\
                last += (diff >> 1) ^ ((uint64_t)0 - (diff & 1));                               \\
                out[i++] = (T)last;                                                             \\
                if (i >= imax) goto done;                                                       \\
            }                                                                                   \\
        }                                                                                       \\
    done:                                                                                       \\
        b = nbits ? b & (~(uint64_t)0 << (64 - nbits)) : 0;                                     \\
        *pp = p;                                                                                \\
        *pb = b;                                                                                \\
        *pnbits = nbits;                                                                        \\
        *plast = last;                                                                          \\
        return i;                                                                               \\
    }

    TF_RICE_SPLIT(tf_rice_split16_any, uint16_t, )
    TF_RICE_SPLIT(tf_rice_split32_any, uint32_t, )
    #ifdef TF_RICE_X86
    TF_RICE_SPLIT(tf_rice_split16_lz, uint16_t, TF_RICE_LZ)
    TF_RICE_SPLIT(tf_rice_split32_lz, uint32_t, TF_RICE_LZ)
    #endif

    /* LZCNT and BMI2 (shifts by a register without the CL dance): the x86-64 baseline that
       the wheels build for lacks them, and BSR (its leading-zero count) costs 3-4 cycles on
       the critical path of every code. Checked once, at import. */
    static int tf_rice_use_lz = 0;

    static int tf_rice_init(int want) {
    #ifdef TF_RICE_X86
        tf_rice_use_lz = want && TF_CPU_LZCNT_BMI2();
    #endif
        return tf_rice_use_lz;
    }

    static Py_ssize_t tf_rice_split16(const unsigned char *src, Py_ssize_t *pp, Py_ssize_t stop,
                                      uint64_t *pb, int *pnbits, uint16_t *out, Py_ssize_t i,
                                      Py_ssize_t imax, int fs, uint64_t *plast) {
    #ifdef TF_RICE_X86
        if (tf_rice_use_lz)
            return tf_rice_split16_lz(src, pp, stop, pb, pnbits, out, i, imax, fs, plast);
    #endif
        return tf_rice_split16_any(src, pp, stop, pb, pnbits, out, i, imax, fs, plast);
    }

    static Py_ssize_t tf_rice_split32(const unsigned char *src, Py_ssize_t *pp, Py_ssize_t stop,
                                      uint64_t *pb, int *pnbits, uint32_t *out, Py_ssize_t i,
                                      Py_ssize_t imax, int fs, uint64_t *plast) {
    #ifdef TF_RICE_X86
        if (tf_rice_use_lz)
            return tf_rice_split32_lz(src, pp, stop, pb, pnbits, out, i, imax, fs, plast);
    #endif
        return tf_rice_split32_any(src, pp, stop, pb, pnbits, out, i, imax, fs, plast);
    }
    """
    int tf_rice_init(int want) noexcept nogil
    Py_ssize_t tf_rice_split16(const uint8_t* src, Py_ssize_t* pp, Py_ssize_t stop, uint64_t* pb,
                               int* pnbits, uint16_t* out, Py_ssize_t i, Py_ssize_t imax, int fs,
                               uint64_t* plast) noexcept nogil
    Py_ssize_t tf_rice_split32(const uint8_t* src, Py_ssize_t* pp, Py_ssize_t stop, uint64_t* pb,
                               int* pnbits, uint32_t* out, Py_ssize_t i, Py_ssize_t imax, int fs,
                               uint64_t* plast) noexcept nogil


tf_rice_init(1)


def use_lzcnt(bint on) -> bool:
    """Decode split-code blocks with the LZCNT/BMI2 loop when ``on`` and the CPU has them
    (the default, set at import), else with the portable loop; both give the same pixels (the
    tests run both). Not to be switched while a decode runs. Returns whether LZCNT is used."""
    return bool(tf_rice_init(on))


cdef inline Py_ssize_t _split_block(_Reader* r, uint8_t* out, Py_ssize_t i, Py_ssize_t imax,
                                    int fs, uint64_t* lastpix, uint64_t vmask,
                                    int bytepix) noexcept nogil:
    """The pixels ``i .. imax`` of a block of split codes (q zeros, a one, ``fs`` low bits), as
    far as each code lies whole in the buffer after a refill by one 8-byte load; returns the
    next pixel for the careful loop. The reader lives in locals meanwhile (stores to ``out``
    could alias it), and with ``bytepix`` a constant at each call `_store` is one typed write.
    Bits past ``nbits`` stay zero, as `_refill` leaves them."""
    cdef const uint8_t* src = r.src
    cdef Py_ssize_t p = r.p, stop = r.n - 8
    cdef uint64_t b = r.b, diff, v, last = lastpix[0]
    cdef int nbits = r.nbits, z, used, nbytes
    while i < imax and p <= stop:
        if nbits < 32:  # most codes are shorter: one load serves two or three of them
            nbytes = (63 - nbits) >> 3
            b |= (tf_load_be64(src + p) >> (64 - 8 * nbytes)) << (64 - nbits - 8 * nbytes)
            p += nbytes
            nbits += 8 * nbytes
        if b == 0:
            break  # a run of zeros past the buffer: the careful loop counts it
        z = tf_clz64(b)
        used = z + 1 + fs
        if used > nbits:
            break
        if fs:
            diff = (<uint64_t>z << fs) | ((b << (z + 1)) >> (64 - fs))
        else:
            diff = <uint64_t>z
        b <<= used
        nbits -= used
        v = (~(diff >> 1)) if (diff & 1) else (diff >> 1)
        last = (last + v) & vmask
        _store(out, i, last, bytepix)
        i += 1
    r.p = p
    r.b = b
    r.nbits = nbits
    lastpix[0] = last
    return i


cdef int _decode(const uint8_t* src, Py_ssize_t n, uint8_t* out, Py_ssize_t npix, int bytepix,
                 int nblock) noexcept nogil:
    cdef int fsbits, fsmax, fs, k
    cdef int bbits = 8 * bytepix
    cdef uint64_t vmask = (~(<uint64_t>0)) if bytepix == 8 else ((<uint64_t>1 << bbits) - 1)
    cdef uint64_t lastpix = 0, diff, v, low, nzero, code, hi
    cdef Py_ssize_t i = 0, imax
    cdef _Reader r
    if _params(bytepix, &fsbits, &fsmax) < 0 or nblock <= 0:
        return C_ERR_OVERFLOW
    if npix <= 0:
        return 0
    if n < bytepix:
        return C_ERR_TRUNCATED
    for k in range(bytepix):
        lastpix = (lastpix << 8) | src[k]
    r.src = src
    r.n = n
    r.p = bytepix
    r.b = 0
    r.nbits = 0
    while i < npix:
        if _take(&r, fsbits, &code) < 0:
            return C_ERR_TRUNCATED
        fs = <int>code - 1
        imax = i + nblock
        if imax > npix:
            imax = npix
        if fs < 0:
            while i < imax:
                _store(out, i, lastpix, bytepix)
                i += 1
        elif fs == fsmax:
            while i < imax:
                if bbits == 64:
                    if _take(&r, 32, &hi) < 0 or _take(&r, 32, &low) < 0:
                        return C_ERR_TRUNCATED
                    diff = (hi << 32) | low
                elif _take(&r, bbits, &diff) < 0:
                    return C_ERR_TRUNCATED
                if diff & 1:
                    v = ~(diff >> 1)
                else:
                    v = diff >> 1
                lastpix = (lastpix + v) & vmask
                _store(out, i, lastpix, bytepix)
                i += 1
        elif fs > fsmax:
            return C_ERR_OVERFLOW
        elif bytepix == 2:
            if r.n >= 8:
                i = tf_rice_split16(r.src, &r.p, r.n - 8, &r.b, &r.nbits, <uint16_t*>out, i,
                                    imax, fs, &lastpix)
                lastpix &= vmask
            while i < imax:
                if _zeros(&r, &nzero) < 0:
                    return C_ERR_TRUNCATED
                if fs:
                    if _take(&r, fs, &low) < 0:
                        return C_ERR_TRUNCATED
                    diff = (nzero << fs) | low
                else:
                    diff = nzero
                v = (~(diff >> 1)) if (diff & 1) else (diff >> 1)
                lastpix = (lastpix + v) & vmask
                (<int16_t*>out)[i] = <int16_t>lastpix
                i += 1
        elif bytepix == 4:
            if r.n >= 8:
                i = tf_rice_split32(r.src, &r.p, r.n - 8, &r.b, &r.nbits, <uint32_t*>out, i,
                                    imax, fs, &lastpix)
                lastpix &= vmask
            while i < imax:
                if _zeros(&r, &nzero) < 0:
                    return C_ERR_TRUNCATED
                if fs:
                    if _take(&r, fs, &low) < 0:
                        return C_ERR_TRUNCATED
                    diff = (nzero << fs) | low
                else:
                    diff = nzero
                v = (~(diff >> 1)) if (diff & 1) else (diff >> 1)
                lastpix = (lastpix + v) & vmask
                (<int32_t*>out)[i] = <int32_t>lastpix
                i += 1
        else:
            if bytepix == 1:
                i = _split_block(&r, out, i, imax, fs, &lastpix, vmask, 1)
            else:
                i = _split_block(&r, out, i, imax, fs, &lastpix, vmask, 8)
            while i < imax:
                if _zeros(&r, &nzero) < 0:
                    return C_ERR_TRUNCATED
                if fs:
                    if _take(&r, fs, &low) < 0:
                        return C_ERR_TRUNCATED
                    diff = (nzero << fs) | low
                else:
                    diff = nzero
                v = (~(diff >> 1)) if (diff & 1) else (diff >> 1)
                lastpix = (lastpix + v) & vmask
                _store(out, i, lastpix, bytepix)
                i += 1
    return 0


cdef struct _Writer:
    uint8_t* out
    Py_ssize_t cap
    Py_ssize_t pos
    uint64_t acc
    int nacc
    int failed


cdef inline void _put(_Writer* w, uint64_t value, int nbits) noexcept nogil:
    # nbits <= 32 per call
    w.acc = (w.acc << nbits) | (value & ((<uint64_t>1 << nbits) - 1))
    w.nacc += nbits
    while w.nacc >= 8:
        if w.pos >= w.cap:
            w.failed = 1
            w.nacc = 0
            return
        w.nacc -= 8
        w.out[w.pos] = <uint8_t>(w.acc >> w.nacc)
        w.pos += 1


cdef inline void _put_wide(_Writer* w, uint64_t value, int nbits) noexcept nogil:
    if nbits > 32:
        _put(w, value >> 32, nbits - 32)
        _put(w, value & <uint64_t>0xFFFFFFFF, 32)
    else:
        _put(w, value, nbits)


cdef Py_ssize_t _encode(const uint8_t* src, Py_ssize_t npix, uint8_t* out, Py_ssize_t cap,
                        int bytepix, int nblock) noexcept nogil:
    cdef int fsbits, fsmax, fs, k
    cdef int bbits = 8 * bytepix
    cdef uint64_t vmask = (~(<uint64_t>0)) if bytepix == 8 else ((<uint64_t>1 << bbits) - 1)
    cdef uint64_t signbit = <uint64_t>1 << (bbits - 1)
    cdef uint64_t lastpix, nextpix, d, top, psum
    cdef uint64_t diffs[4096]
    cdef double pixelsum, dpsum
    cdef Py_ssize_t i = 0, j, nthis
    cdef _Writer w
    if _params(bytepix, &fsbits, &fsmax) < 0 or nblock <= 0 or nblock > 4096:
        return C_ERR_OVERFLOW
    w.out = out
    w.cap = cap
    w.pos = 0
    w.acc = 0
    w.nacc = 0
    w.failed = 0
    if npix <= 0:
        return 0
    lastpix = _load(src, 0, bytepix) & vmask
    for k in range(bytepix):
        _put(&w, lastpix >> (8 * (bytepix - 1 - k)), 8)
    while i < npix:
        nthis = nblock if npix - i > nblock else npix - i
        pixelsum = 0.0
        for j in range(nthis):
            nextpix = _load(src, i + j, bytepix) & vmask
            d = (nextpix - lastpix) & vmask
            # signed difference modulo 2^bbits, then the zig-zag mapping
            if d & signbit:
                d = (~(d << 1)) & vmask
            else:
                d = (d << 1) & vmask
            diffs[j] = d
            pixelsum += <double>d
            lastpix = nextpix
        dpsum = (pixelsum - <double>(nthis // 2) - 1.0) / <double>nthis
        if dpsum < 0:
            dpsum = 0.0
        psum = (<uint64_t>dpsum) >> 1
        fs = 0
        while psum > 0:
            fs += 1
            psum >>= 1
        if fs >= fsmax:
            _put(&w, fsmax + 1, fsbits)
            for j in range(nthis):
                _put_wide(&w, diffs[j], bbits)
        elif fs == 0 and pixelsum == 0:
            _put(&w, 0, fsbits)
        else:
            _put(&w, fs + 1, fsbits)
            for j in range(nthis):
                top = diffs[j] >> fs
                while top >= 32:
                    _put(&w, 0, 32)
                    top -= 32
                _put(&w, 1, <int>top + 1)
                if fs:
                    _put_wide(&w, diffs[j], fs)
        if w.failed:
            return C_ERR_OVERFLOW
        i += nthis
    if w.nacc > 0:
        _put(&w, 0, 8 - w.nacc)
    if w.failed:
        return C_ERR_OVERFLOW
    return w.pos


def decode(const uint8_t[::1] src, cnp.ndarray out, int bytepix, int blocksize) -> int:
    """Decode one RICE_1 tile into ``out`` (C-contiguous, itemsize == ``bytepix``).

    Returns 0, or a negative error code (``C_ERR_TRUNCATED``, ``C_ERR_OVERFLOW``).
    """
    cdef Py_ssize_t npix = out.size
    cdef Py_ssize_t n = src.shape[0]
    cdef const uint8_t* s = &src[0] if n else NULL
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef int rc
    if out.itemsize != bytepix or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous array of itemsize BYTEPIX")
    with nogil:
        rc = _decode(s, n, o, npix, bytepix, blocksize)
    return rc


def encode(cnp.ndarray src, int bytepix, int blocksize) -> bytes:
    """Encode the native-order integers of ``src`` (itemsize == ``bytepix``) as one RICE_1 tile."""
    cdef Py_ssize_t npix = src.size
    cdef Py_ssize_t cap = 2 * npix * bytepix + 64
    cdef const uint8_t* s = <const uint8_t*>cnp.PyArray_DATA(src)
    cdef bytearray buf
    cdef uint8_t* o
    cdef Py_ssize_t rc
    if src.itemsize != bytepix or not src.flags.c_contiguous:
        raise ValueError("src must be a C-contiguous array of itemsize BYTEPIX")
    if blocksize <= 0 or blocksize > 4096:
        raise ValueError(f"BLOCKSIZE must be in 1..4096, not {blocksize}")
    buf = bytearray(cap)
    o = <uint8_t*>(<char*>buf)
    with nogil:
        rc = _encode(s, npix, o, cap, bytepix, blocksize)
    if rc < 0:
        raise ValueError("RICE_1 encode failed (output overflow or bad BYTEPIX)")
    return bytes(buf[:rc])


def decode_many(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] sizes,
                const int64_t[::1] npix, const int64_t[::1] dest, cnp.ndarray out, int bytepix,
                int blocksize, uint8_t[::1] status, const uint8_t[::1] stop) -> int:
    """Decode several tiles of one file buffer into ``out`` in one GIL-free pass.

    Tile i is ``sizes[i]`` bytes at ``offsets[i]`` of ``buf`` and holds ``npix[i]`` pixels,
    written at element ``dest[i]`` of the flat ``out`` (itemsize ``bytepix``). ``status[i]``
    becomes OK, MISMATCH (bad bounds or a decode error) or STOPPED; the loop stops early once
    ``stop[0]`` is non-zero (another chunk failed). Returns the number of tiles not OK.
    """
    cdef Py_ssize_t n = offsets.shape[0], i, blen = buf.shape[0]
    cdef Py_ssize_t olen = out.size
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef int rc
    cdef Py_ssize_t bad = 0
    if out.itemsize != bytepix or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous array of itemsize BYTEPIX")
    if sizes.shape[0] != n or npix.shape[0] != n or dest.shape[0] != n or status.shape[0] != n:
        raise ValueError("offsets, sizes, npix, dest and status must have the same length")
    if stop.shape[0] < 1:
        raise ValueError("stop must hold one byte")
    with nogil:
        for i in range(n):
            if tile_skipped(stop, status, i, offsets[i], sizes[i], blen, dest[i], npix[i], olen):
                bad += 1
                continue
            rc = _decode(b + offsets[i], sizes[i], o + dest[i] * bytepix, npix[i], bytepix,
                         blocksize)
            status[i] = TILE_OK if rc == 0 else TILE_MISMATCH
            bad += rc != 0
    return bad


def decode_many_dequant(const uint8_t[::1] buf, const int64_t[::1] offsets,
                        const int64_t[::1] sizes, const int64_t[::1] npix,
                        const int64_t[::1] dest, cnp.ndarray out, int blocksize,
                        uint8_t[::1] status, const uint8_t[::1] stop, const double[::1] zscale,
                        const double[::1] zzero, const int64_t[::1] tile_index, int method,
                        long long zdither0, bint has_null, int null_value,
                        const float[::1] rand) -> int:
    """Decode several quantised tiles (4-byte RICE_1 integers) and dequantise each while it is
    in cache, in one GIL-free pass: `decode_many` into a tile-sized scratch, then the
    dequantisation of `_quantize.dequantize_many` (tile i with ``zscale[i]``, ``zzero[i]`` and
    the dither seed of tile ``tile_index[i]``; ``rand`` is `_quantize.random_table()`) into
    element ``dest[i]`` of the flat float32/float64 ``out``. Statuses and the return value as
    in `decode_many`; a tile that is not OK leaves its output range undefined.
    """
    cdef Py_ssize_t n = offsets.shape[0], i, blen = buf.shape[0]
    cdef Py_ssize_t olen = out.size, most = 0
    cdef int is64 = out.dtype.itemsize == 8
    cdef char* o = <char*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef int32_t* scratch
    cdef int rc, iseed
    cdef Py_ssize_t bad = 0
    if not out.flags.c_contiguous or out.dtype.kind != "f" or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous float array")
    if sizes.shape[0] != n or npix.shape[0] != n or dest.shape[0] != n or status.shape[0] != n \
            or zscale.shape[0] != n or zzero.shape[0] != n or tile_index.shape[0] != n:
        raise ValueError("offsets, sizes, npix, dest, status, zscale, zzero and tile_index must "
                         "have the same length")
    if stop.shape[0] < 1:
        raise ValueError("stop must hold one byte")
    if rand.shape[0] != 10000:
        raise ValueError("rand must hold the 10,000 values of the random sequence")
    for i in range(n):
        if npix[i] > most:
            most = npix[i]
    scratch = <int32_t*>malloc(max(most, 1) * sizeof(int32_t))
    if scratch == NULL:
        raise MemoryError()
    try:
        with nogil:
            for i in range(n):
                if tile_skipped(stop, status, i, offsets[i], sizes[i], blen, dest[i], npix[i], olen):
                    bad += 1
                    continue
                rc = _decode(b + offsets[i], sizes[i], <uint8_t*>scratch, npix[i], 4, blocksize)
                if rc != 0:
                    status[i] = TILE_MISMATCH
                    bad += 1
                    continue
                status[i] = TILE_OK
                if npix[i] == 0:
                    continue
                iseed = <int>((tile_index[i] + zdither0 - 1) % 10000) if method else 0
                dequant_tile(scratch, npix[i], o + dest[i] * (8 if is64 else 4), is64, zscale[i],
                             zzero[i], method, iseed, has_null, <int32_t>null_value, &rand[0])
    finally:
        free(scratch)
    return bad

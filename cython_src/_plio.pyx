# cython: language_level=3
"""PLIO_1 kernels: the IRAF pixel-list "line list" encoding of non-negative integer masks.

A line list is a sequence of 16-bit words after a short header; each word holds a 4-bit opcode
and 12 bits of data. Opcodes: 0 ZN (N zeros), 1 SH (set the high value from the next word and the
data), 2 IH / 3 DH (increment / decrement the high value), 4 HN (N pixels of the high value),
5 PN (N-1 zeros then one high pixel), 6 IS / 7 DS (increment / decrement and store one pixel).
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t
from _tilestatus cimport TILE_OK, TILE_MISMATCH, TILE_STOPPED, tile_skipped
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import numpy as np

cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    /* Fill n int32 with v. Runs of a line list are a few dozen pixels: eight pixels a store
       group (the compiler's vector stores), the last group overlapping the one before, so no
       pixel-by-pixel tail and few loop exits to mispredict. */
    static inline void tf_plio_fill(int32_t *p, ptrdiff_t n, int32_t v) {
        int j;
        if (n >= 8) {
            int32_t *last = p + n - 8;
            for (; p < last; p += 8)
                for (j = 0; j < 8; j++) p[j] = v;
            for (j = 0; j < 8; j++) last[j] = v;
        } else if (n >= 4) {
            for (j = 0; j < 4; j++) p[j] = v;
            for (j = 0; j < 4; j++) p[n - 4 + j] = v;
        } else {
            for (j = 0; j < n; j++) p[j] = v;
        }
    }
    """
    void tf_plio_fill(int32_t* p, Py_ssize_t n, int32_t v) nogil

cdef enum:
    C_ERR_TRUNCATED = -1
    C_ERR_CORRUPT = -2
    C_HEADER_WORDS = 7

ERR_TRUNCATED = C_ERR_TRUNCATED
ERR_CORRUPT = C_ERR_CORRUPT
HEADER_WORDS = C_HEADER_WORDS
# Per-tile status of decode_many (cython_src/_tilestatus.pxd).
OK = TILE_OK
MISMATCH = TILE_MISMATCH
STOPPED = TILE_STOPPED


cdef inline int _word(const uint8_t* src, Py_ssize_t k) noexcept nogil:
    return <int><int16_t>(<uint16_t>(src[2 * k] << 8 | src[2 * k + 1]))


cdef int _decode(const uint8_t* src, Py_ssize_t nwords, int32_t* out,
                 Py_ssize_t npix) noexcept nogil:
    cdef Py_ssize_t first, last, ip, op = 0, run
    cdef int opcode, data, w
    cdef int64_t pv = 1
    if nwords < 3:
        return C_ERR_TRUNCATED
    if _word(src, 2) > 0:
        # old-style header: the length is in word 2, data start at word 3
        last = _word(src, 2)
        first = 3
    else:
        if nwords < 5:
            return C_ERR_TRUNCATED
        last = (<Py_ssize_t>_word(src, 4) << 15) + _word(src, 3)
        first = _word(src, 1)
        if first < 3:
            return C_ERR_CORRUPT
    if last > nwords:
        return C_ERR_TRUNCATED
    ip = first
    while ip < last and op < npix:
        w = <int>(<uint16_t>_word(src, ip))
        opcode = w >> 12
        data = w & 4095
        if opcode == 0 or opcode == 4 or opcode == 5:
            run = data
            if run > npix - op:
                run = npix - op
            if opcode == 4:
                tf_plio_fill(out + op, run, <int32_t>pv)
            elif run > 0:
                memset(out + op, 0, run * sizeof(int32_t))  # zero runs are long: memset's stores
            if opcode == 5 and run == data and run > 0:
                out[op + run - 1] = <int32_t>pv
            op += run
        elif opcode == 1:
            if ip + 1 >= last:
                return C_ERR_TRUNCATED
            pv = (<int64_t>(<uint16_t>_word(src, ip + 1)) << 12) + data
            ip += 1
        elif opcode == 2:
            pv += data
        elif opcode == 3:
            pv -= data
        elif opcode == 6 or opcode == 7:
            if opcode == 6:
                pv += data
            else:
                pv -= data
            out[op] = <int32_t>pv
            op += 1
        else:
            return C_ERR_CORRUPT
        ip += 1
    if op < npix:
        memset(out + op, 0, (npix - op) * sizeof(int32_t))  # a line list that ends early
    return 0


def decode(const uint8_t[::1] src, int32_t[::1] out) -> int:
    """Decode one PLIO_1 tile (big-endian 16-bit words) into ``out``; 0 or a negative code."""
    cdef Py_ssize_t nwords = src.shape[0] // 2
    cdef Py_ssize_t npix = out.shape[0]
    cdef int rc
    if npix == 0:
        return 0
    if nwords == 0:
        return C_ERR_TRUNCATED
    with nogil:
        rc = _decode(&src[0], nwords, &out[0], npix)
    return rc


cdef inline void _emit(int16_t* ll, Py_ssize_t* n, int opcode, int data) noexcept nogil:
    ll[n[0]] = <int16_t>((opcode << 12) | data)
    n[0] += 1


cdef Py_ssize_t _encode(const int32_t* src, Py_ssize_t npix, int16_t* ll) noexcept nogil:
    cdef Py_ssize_t n = C_HEADER_WORDS, i = 0, j, run, chunk
    cdef int64_t pv = 1, v, dv
    while i < npix:
        v = src[i]
        j = i + 1
        while j < npix and src[j] == v:
            j += 1
        run = j - i
        if v == 0:
            while run > 0:
                chunk = run if run < 4095 else 4095
                _emit(ll, &n, 0, <int>chunk)
                run -= chunk
        else:
            dv = v - pv
            if dv != 0:
                if run == 1 and -4095 <= dv <= 4095:
                    # increment/decrement and store one pixel
                    _emit(ll, &n, 6 if dv > 0 else 7, <int>(dv if dv > 0 else -dv))
                    pv = v
                    i = j
                    continue
                if -4095 <= dv <= 4095:
                    _emit(ll, &n, 2 if dv > 0 else 3, <int>(dv if dv > 0 else -dv))
                else:
                    _emit(ll, &n, 1, <int>(v & 4095))
                    ll[n] = <int16_t>(v >> 12)
                    n += 1
                pv = v
            while run > 0:
                chunk = run if run < 4095 else 4095
                _emit(ll, &n, 4, <int>chunk)
                run -= chunk
        i = j
    # header: [0, header length 7, version -100, length low 15 bits, length high bits, 0, 0]
    ll[0] = 0
    ll[1] = C_HEADER_WORDS
    ll[2] = -100
    ll[3] = <int16_t>(n & 0x7FFF)
    ll[4] = <int16_t>(n >> 15)
    ll[5] = 0
    ll[6] = 0
    return n


def encode(const int32_t[::1] src) -> bytes:
    """Encode non-negative values < 2^24 as a PLIO_1 line list (big-endian 16-bit words).

    The caller checks the value range.
    """
    cdef Py_ssize_t npix = src.shape[0]
    # worst case: three words per pixel (SH pair + HN) plus the header
    cdef cnp.ndarray[int16_t, ndim=1] ll = np.zeros(3 * npix + C_HEADER_WORDS + 1, np.int16)
    cdef Py_ssize_t n
    if npix == 0:
        n = C_HEADER_WORDS
        ll[1] = C_HEADER_WORDS
        ll[2] = -100
        ll[3] = C_HEADER_WORDS
        return ll[:n].astype(">i2").tobytes()
    with nogil:
        n = _encode(&src[0], npix, <int16_t*>cnp.PyArray_DATA(ll))
    return ll[:n].astype(">i2").tobytes()


def decode_many(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] sizes,
                const int64_t[::1] npix, const int64_t[::1] dest, cnp.ndarray out,
                uint8_t[::1] status, const uint8_t[::1] stop) -> int:
    """Decode several PLIO_1 tiles of ``buf`` into the flat integer ``out`` (itemsize 1, 2, 4
    or 8), GIL-free. ``status[i]`` becomes OK, MISMATCH (bad bounds or a decode error) or
    STOPPED; the loop stops early once ``stop[0]`` is non-zero (another chunk failed). Returns
    the number of tiles not OK."""
    cdef Py_ssize_t n = offsets.shape[0], i, j, blen = buf.shape[0], olen = out.size, most = 0
    cdef int itemsize = out.itemsize
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef int32_t* scratch
    cdef int rc
    cdef Py_ssize_t bad = 0
    if itemsize not in (1, 2, 4, 8) or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous integer array")
    if sizes.shape[0] != n or npix.shape[0] != n or dest.shape[0] != n or status.shape[0] != n:
        raise ValueError("offsets, sizes, npix, dest and status must have the same length")
    if stop.shape[0] < 1:
        raise ValueError("stop must hold one byte")
    for i in range(n):
        if npix[i] > most:
            most = npix[i]
    scratch = <int32_t*>malloc(sizeof(int32_t) * (most + 1))
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            if tile_skipped(stop, status, i, offsets[i], sizes[i], blen, dest[i], npix[i], olen):
                bad += 1
                continue
            if itemsize == 4:  # the decoder's own type: straight into the output
                rc = _decode(b + offsets[i], sizes[i] // 2, (<int32_t*>o) + dest[i], npix[i])
            else:
                rc = _decode(b + offsets[i], sizes[i] // 2, scratch, npix[i])
            if rc != 0:
                status[i] = TILE_MISMATCH
                bad += 1
                continue
            # One loop per width (no width test per pixel).
            if itemsize == 1:
                for j in range(npix[i]):
                    o[dest[i] + j] = <uint8_t>scratch[j]
            elif itemsize == 2:
                for j in range(npix[i]):
                    (<int16_t*>o)[dest[i] + j] = <int16_t>scratch[j]
            elif itemsize == 8:
                for j in range(npix[i]):
                    (<int64_t*>o)[dest[i] + j] = scratch[j]
            status[i] = TILE_OK
    free(scratch)
    return bad

# cython: language_level=3
"""FITS checksum kernel: the 32-bit ones'-complement sum of big-endian words (FITS 4.0 App. J).

The caller passes whole 2880-byte blocks (always a multiple of four bytes) and chains sums of
consecutive pieces through ``initial``; encoding the 16-character CHECKSUM lives in Python.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t


cdef inline uint32_t _fold(uint64_t hi, uint64_t lo) noexcept nogil:
    # Carries out of each 16-bit half wrap round into the other half (end-around carry).
    cdef uint64_t carry, hi_c, lo_c
    while True:
        carry = (hi >> 16) | (lo >> 16)
        if carry == 0:
            break
        hi_c = hi >> 16
        lo_c = lo >> 16
        hi = (hi & 0xFFFF) + lo_c
        lo = (lo & 0xFFFF) + hi_c
    return <uint32_t>((hi << 16) | lo)


cdef uint32_t _sum_words(const uint8_t* p, Py_ssize_t nwords, uint32_t initial) noexcept nogil:
    cdef uint64_t hi = initial >> 16
    cdef uint64_t lo = initial & 0xFFFF
    cdef Py_ssize_t _word
    # 16-bit halves summed in 64-bit accumulators cannot overflow below 2**48 words.
    for _word in range(nwords):
        hi += (<uint64_t>p[0] << 8) | p[1]
        lo += (<uint64_t>p[2] << 8) | p[3]
        p += 4
    return _fold(hi, lo)


cpdef uint32_t ones_sum32(const uint8_t[::1] buf, uint32_t initial=0):
    """Ones'-complement sum of ``buf`` (length a multiple of 4) added to ``initial``."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef uint32_t result
    if n % 4:
        raise ValueError("checksum input must be a multiple of 4 bytes")
    if n == 0:
        return initial
    with nogil:
        result = _sum_words(&buf[0], n // 4, initial)
    return result

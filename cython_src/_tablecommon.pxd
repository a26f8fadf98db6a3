# Shared inline helpers of the table kernels (_bintable.pyx, _asciitable.pyx): validity bits
# and fixed-width strings stripped into an Arrow (offsets, data) pair.
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t
from libc.string cimport memcpy

# Strip modes of a fixed-width character field.
cdef enum:
    STRIP_NONE = 0     # keep every byte (raw)
    STRIP_NUL = 1      # drop trailing NULs
    STRIP_BLANK = 2    # drop trailing NULs and spaces, in any mixture


cdef inline void set_bit(uint8_t* bits, Py_ssize_t i) noexcept nogil:
    # Outputs are zero-filled by the caller and chunk boundaries fall on multiples of 8 rows,
    # so OR-ing bits in never races with another thread.
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef extern from "_portable.h":
    int TF_CLZ64(unsigned long long) nogil


cdef inline Py_ssize_t stripped_length(const uint8_t* s, Py_ssize_t w, int strip) noexcept nogil:
    # Padding sits at the end, so test the last 8 bytes as one word first: OR-ing 0x20 into
    # every byte maps both NUL and space to 0x20, and the highest byte still differing from
    # 0x20 is the last kept one (words are little-endian: byte i holds bits 8i..8i+7).
    cdef Py_ssize_t n = w
    cdef uint64_t word, rest
    cdef uint64_t fold = 0x2020202020202020ULL if strip == STRIP_BLANK else 0
    if strip == STRIP_NONE:
        return w
    while n >= 8:
        memcpy(&word, s + n - 8, 8)
        rest = (word | fold) ^ fold
        if rest:
            return n - 8 + ((63 - TF_CLZ64(rest)) >> 3) + 1
        n -= 8
    if strip == STRIP_BLANK:
        while n > 0 and (s[n - 1] == 32 or s[n - 1] == 0):
            n -= 1
    else:
        while n > 0 and s[n - 1] == 0:
            n -= 1
    return n


cdef inline uint8_t high_bits(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # OR of every byte: bit 7 set means the field is not plain ASCII.
    cdef uint8_t acc = 0
    cdef Py_ssize_t i
    for i in range(n):
        acc |= s[i]
    return acc & 0x80


cdef inline Py_ssize_t put_string(const uint8_t* s, Py_ssize_t w, int strip, uint8_t* data,
                                  Py_ssize_t pos, int32_t* offsets, Py_ssize_t idx,
                                  int64_t* high) noexcept nogil:
    """Append one stripped field at data[pos]; record its end in offsets[idx + 1].

    All w bytes are copied (in 8-byte words where possible) and the stripped tail is then
    overwritten by the next field: callers size data so that pos + w never passes the end.
    Bytes >= 0x80 anywhere in the field set *high; padding bytes (space, NUL) never do.
    """
    cdef Py_ssize_t j = 0
    cdef uint64_t word, acc = 0
    cdef uint8_t tail = 0
    while j + 8 <= w:
        memcpy(&word, s + j, 8)
        memcpy(data + pos + j, &word, 8)
        acc |= word
        j += 8
    while j < w:
        data[pos + j] = s[j]
        tail |= s[j]
        j += 1
    if (acc & 0x8080808080808080ULL) or (tail & 0x80):
        high[0] = 1
    pos += stripped_length(s, w, strip)
    offsets[idx + 1] = <int32_t>pos
    return pos

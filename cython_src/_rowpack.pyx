# cython: language_level=3
"""Row packing for binary-table writes: interleave column cells into FITS rows, byte-swapping
each element to big-endian, in one pass over the output (rows are row-major in FITS)."""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcpy, memset

cdef extern from "_portable.h":
    uint16_t TF_PACK_BSWAP16 "TF_BSWAP16"(uint16_t) nogil
    uint32_t TF_PACK_BSWAP32 "TF_BSWAP32"(uint32_t) nogil
    uint64_t TF_PACK_BSWAP64 "TF_BSWAP64"(uint64_t) nogil


cdef inline void _copy_swapped(const uint8_t* s, uint8_t* d, Py_ssize_t nbytes,
                               int64_t size) noexcept nogil:
    cdef Py_ssize_t k
    cdef uint16_t v16
    cdef uint32_t v32
    cdef uint64_t v64
    if size == 1:
        memcpy(d, s, nbytes)
    elif size == 2:
        for k in range(0, nbytes, 2):
            memcpy(&v16, s + k, 2)
            v16 = TF_PACK_BSWAP16(v16)
            memcpy(d + k, &v16, 2)
    elif size == 4:
        for k in range(0, nbytes, 4):
            memcpy(&v32, s + k, 4)
            v32 = TF_PACK_BSWAP32(v32)
            memcpy(d + k, &v32, 4)
    else:
        for k in range(0, nbytes, 8):
            memcpy(&v64, s + k, 8)
            v64 = TF_PACK_BSWAP64(v64)
            memcpy(d + k, &v64, 8)


def pack_rows(const uint64_t[::1] src_ptrs, const int64_t[::1] cell_bytes,
              const int64_t[::1] elem_size, const int64_t[::1] offsets, uint8_t[:, ::1] out):
    """Fill ``out`` (nrows × row_bytes) from native-endian, C-contiguous column buffers.

    ``src_ptrs[c]`` is the address of column ``c``'s first cell (the caller keeps the arrays
    alive), each ``cell_bytes[c]`` long; elements of ``elem_size[c]`` bytes (1, 2, 4, 8) are
    byte-swapped; the cell lands at ``offsets[c]`` within the row. The caller has checked that
    every cell fits its row and every buffer holds ``nrows`` cells.
    """
    cdef Py_ssize_t nrows = out.shape[0]
    cdef Py_ssize_t ncols = src_ptrs.shape[0]
    cdef Py_ssize_t r, c
    cdef uint8_t* row
    if nrows == 0 or ncols == 0:
        return
    with nogil:
        for r in range(nrows):
            row = &out[r, 0]
            for c in range(ncols):
                _copy_swapped(<const uint8_t*><size_t>src_ptrs[c] + r * cell_bytes[c],
                              row + offsets[c], cell_bytes[c], elem_size[c])


def pack_strings(const int64_t[::1] starts, const int64_t[::1] lengths, const uint8_t[::1] values,
                 uint8_t[:, ::1] out):
    """Copy string ``r`` (``values[starts[r]:starts[r] + lengths[r]]``) into row ``r`` of
    ``out``, zero-filling the rest of the row; the caller guarantees every length ≤ the row
    width and every range inside ``values``."""
    cdef Py_ssize_t n = out.shape[0]
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t r, length
    if n == 0 or width == 0:
        return
    with nogil:
        for r in range(n):
            length = lengths[r]
            if length > 0:
                memcpy(&out[r, 0], &values[starts[r]], length)
            if length < width:
                memset(&out[r, length], 0, width - length)

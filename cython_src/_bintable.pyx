# cython: language_level=3
"""Binary-table decode kernels: big-endian FITS rows → native column buffers, one pass for all.

The caller (torchfits._table_decode) plans a small "column program", allocates every output at
its final size and checks every bound; these kernels run without the GIL and only write.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int32_t, int64_t
from libc.string cimport memcpy, memmove
from libc.stdlib cimport malloc, free

from _bswap cimport load_u16, load_u32, load_u64, load_i16, load_i32, load_i64, load_f32, load_f64
from _tablecommon cimport set_bit, put_string, stripped_length, STRIP_NONE, STRIP_BLANK
from _conjunction cimport Test, select_block, load_tests

# Operations of a column program (one row of the int64 program array per projected column).
cdef enum:
    FOP_COPY = 0           # raw bytes: B as uint8, A as fixed-width binary or a uint8 matrix
    FOP_SWAP = 1           # byte swap (element size 1/2/4/8), then XOR the unsigned sign bit
    FOP_SCALE = 2          # TZERO + TSCAL * stored, as float32 or float64
    FOP_LOGICAL = 3        # L → Arrow bit-packed bool (+ validity for zero bytes)
    FOP_LOGICAL_BYTES = 4  # L → one byte per value (NumPy bool)
    FOP_BITS = 5           # X → Arrow bit-packed bool, MSB first
    FOP_BITS_BYTES = 6     # X → one byte per bit (NumPy bool)
    FOP_STRING = 7         # A → Arrow string (int32 offsets + data), trailing padding stripped

# Stored element types of FOP_SCALE.
cdef enum:
    FSRC_U8 = 0
    FSRC_I16 = 1
    FSRC_I32 = 2
    FSRC_I64 = 3
    FSRC_F32 = 4
    FSRC_F64 = 5
    FSRC_U64_FLIP = 6    # K with TZERO = 2**63: the exact unsigned value, rounded once

# Columns of the int64 program array.
cdef enum:
    FP_OP = 0
    FP_SRC_OFF = 1       # byte offset of the field in a row
    FP_COUNT = 2         # elements per row (bits for X, strings for A)
    FP_ESIZE = 3         # element bytes (SWAP), string width (STRING), bytes per row (COPY)
    FP_SRC_TYPE = 4      # SRC_* for FOP_SCALE
    FP_DST_SIZE = 5      # 4 (float32) or 8 (float64) for FOP_SCALE
    FP_FLIP = 6          # XOR mask applied after the swap (sign bit for unsigned conventions)
    FP_HAS_TNULL = 7     # 1: elements whose stored bits equal FP_TNULL are null
    FP_TNULL = 8         # stored bit pattern of TNULL (unsigned, element-size wide)
    FP_OUT = 9           # address of the values output
    FP_VALID = 10        # address of the validity bitmap (0: none)
    FP_OFFSETS = 11      # address of the int32 string offsets (FOP_STRING)
    FP_STRIP = 12        # STRIP_* mode (FOP_STRING)
    FP_ZERO_NULL = 13    # 1: an L zero byte is null (FOP_LOGICAL)
    FP_NFIELDS = 14

# Columns of the int64 stats array (one row per column, summed over chunks by the caller).
cdef enum:
    FS_NULLS = 0
    FS_HIGH = 1          # 1 when a string field held a byte >= 0x80
    FS_NFIELDS = 2

# The same numbers for the Python planner.
OP_COPY = FOP_COPY
OP_SWAP = FOP_SWAP
OP_SCALE = FOP_SCALE
OP_LOGICAL = FOP_LOGICAL
OP_LOGICAL_BYTES = FOP_LOGICAL_BYTES
OP_BITS = FOP_BITS
OP_BITS_BYTES = FOP_BITS_BYTES
OP_STRING = FOP_STRING
SRC_U8 = FSRC_U8
SRC_I16 = FSRC_I16
SRC_I32 = FSRC_I32
SRC_I64 = FSRC_I64
SRC_F32 = FSRC_F32
SRC_F64 = FSRC_F64
SRC_U64_FLIP = FSRC_U64_FLIP
P_OP = FP_OP
P_SRC_OFF = FP_SRC_OFF
P_COUNT = FP_COUNT
P_ESIZE = FP_ESIZE
P_SRC_TYPE = FP_SRC_TYPE
P_DST_SIZE = FP_DST_SIZE
P_FLIP = FP_FLIP
P_HAS_TNULL = FP_HAS_TNULL
P_TNULL = FP_TNULL
P_OUT = FP_OUT
P_VALID = FP_VALID
P_OFFSETS = FP_OFFSETS
P_STRIP = FP_STRIP
P_ZERO_NULL = FP_ZERO_NULL
P_NFIELDS = FP_NFIELDS
S_NULLS = FS_NULLS
S_HIGH = FS_HIGH
S_NFIELDS = FS_NFIELDS

cdef enum:
    BLOCK_MAX = 1024    # most rows per block (the size of the row-pointer table)
    BLOCK_BYTES = 16384  # a block this big stays in L1 (32+ KiB) while every column reads it


ctypedef struct Blk:
    const uint8_t** rp      # row pointers of a gathered block, or NULL for a contiguous range
    const uint8_t* base     # first row of a contiguous block
    Py_ssize_t stride


cdef inline const uint8_t* row_at(const Blk* bl, Py_ssize_t k) noexcept nogil:
    # Contiguous ranges skip the pointer table so the compiler sees a plain strided loop
    # (and unswitches the test out of it).
    if bl.rp != NULL:
        return bl.rp[k]
    return bl.base + k * bl.stride


ctypedef struct Col:
    int op
    int esize
    int src_type
    int dst_size
    int strip
    int zero_null
    int has_tnull
    Py_ssize_t src_off
    Py_ssize_t count
    uint64_t flip
    uint64_t tnull
    double scal
    double zero
    uint8_t* out
    uint8_t* valid
    int32_t* offsets
    Py_ssize_t pos
    int64_t nulls
    int64_t high


# ----------------------------------------------------------------------------- element helpers


cdef inline void swap_elements(const uint8_t* s, Py_ssize_t n, int esize, uint64_t flip,
                               uint8_t* d) noexcept nogil:
    cdef Py_ssize_t j
    cdef uint8_t f8 = <uint8_t>flip
    cdef uint16_t v16, f16 = <uint16_t>flip
    cdef uint32_t v32, f32 = <uint32_t>flip
    cdef uint64_t v64
    if esize == 1:
        for j in range(n):
            d[j] = s[j] ^ f8
    elif esize == 2:
        for j in range(n):
            v16 = load_u16(s + 2 * j) ^ f16
            memcpy(d + 2 * j, &v16, 2)
    elif esize == 4:
        for j in range(n):
            v32 = load_u32(s + 4 * j) ^ f32
            memcpy(d + 4 * j, &v32, 4)
    else:
        for j in range(n):
            v64 = load_u64(s + 8 * j) ^ flip
            memcpy(d + 8 * j, &v64, 8)


cdef inline double stored_value(const uint8_t* p, int src_type) noexcept nogil:
    if src_type == FSRC_U8:
        return <double>p[0]
    elif src_type == FSRC_I16:
        return <double>load_i16(p)
    elif src_type == FSRC_I32:
        return <double>load_i32(p)
    elif src_type == FSRC_I64:
        return <double>load_i64(p)
    elif src_type == FSRC_F32:
        return <double>load_f32(p)
    elif src_type == FSRC_U64_FLIP:
        return <double>(load_u64(p) ^ 0x8000000000000000ULL)
    return load_f64(p)


cdef inline void scale_elements(const uint8_t* s, Py_ssize_t n, int esize, int src_type,
                                double scal, double zero, int dst_size, uint8_t* d) noexcept nogil:
    cdef Py_ssize_t j
    cdef float* o32 = <float*>d
    cdef double* o64 = <double*>d
    if dst_size == 4:
        for j in range(n):
            o32[j] = <float>(stored_value(s + j * esize, src_type) * scal + zero)
    else:
        for j in range(n):
            o64[j] = stored_value(s + j * esize, src_type) * scal + zero


cdef inline int64_t tnull_elements(const uint8_t* s, Py_ssize_t n, int esize, uint64_t tnull,
                                   uint8_t* valid, Py_ssize_t bit) noexcept nogil:
    # Compared on the stored bits, as the standard defines TNULL on the stored value.
    cdef Py_ssize_t j
    cdef uint64_t v
    cdef int64_t nulls = 0
    for j in range(n):
        if esize == 1:
            v = s[j]
        elif esize == 2:
            v = load_u16(s + 2 * j)
        elif esize == 4:
            v = load_u32(s + 4 * j)
        else:
            v = load_u64(s + 8 * j)
        if v == tnull:
            nulls += 1
        else:
            set_bit(valid, bit + j)
    return nulls


cdef inline int64_t logical_elements(const uint8_t* s, Py_ssize_t n, uint8_t* bits, uint8_t* valid,
                                     Py_ssize_t bit) noexcept nogil:
    # 'T' is true; a zero byte is undefined (null when a validity bitmap is given); else false.
    cdef Py_ssize_t j
    cdef int64_t nulls = 0
    for j in range(n):
        if s[j] == 84:
            set_bit(bits, bit + j)
        if valid != NULL:
            if s[j] == 0:
                nulls += 1
            else:
                set_bit(valid, bit + j)
    return nulls


cdef inline void logical_bytes(const uint8_t* s, Py_ssize_t n, uint8_t* d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        d[j] = 1 if s[j] == 84 else 0


cdef inline void bit_elements(const uint8_t* s, Py_ssize_t nbits, uint8_t* bits,
                              Py_ssize_t bit) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(nbits):
        if (s[j >> 3] >> (7 - (j & 7))) & 1:
            set_bit(bits, bit + j)


cdef inline void bit_bytes(const uint8_t* s, Py_ssize_t nbits, uint8_t* d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(nbits):
        d[j] = (s[j >> 3] >> (7 - (j & 7))) & 1


# ----------------------------------------------------------------------------- fixed-width columns


cdef void run_swap(Col* c, const Blk* bl, Py_ssize_t m, Py_ssize_t o) noexcept nogil:
    cdef Py_ssize_t k
    cdef Py_ssize_t off = c.src_off
    cdef Py_ssize_t n = c.count
    cdef uint8_t* d
    cdef uint16_t* d16
    cdef uint32_t* d32
    cdef uint64_t* d64
    cdef uint8_t f8 = <uint8_t>c.flip
    cdef uint16_t f16 = <uint16_t>c.flip
    cdef uint32_t f32 = <uint32_t>c.flip
    cdef uint64_t f64 = c.flip
    cdef const uint8_t* p
    cdef const uint8_t** rp
    cdef Py_ssize_t stride
    if n == 1 and bl.rp == NULL:
        # Scalar columns of a row range are the common case: a plain strided loop per element
        # size, with every pointer in a local so no store can force a reload.
        p = bl.base + off
        stride = bl.stride
        if c.esize == 1:
            d = c.out + o
            for k in range(m):
                d[k] = p[k * stride] ^ f8
        elif c.esize == 2:
            d16 = (<uint16_t*>c.out) + o
            for k in range(m):
                d16[k] = load_u16(p + k * stride) ^ f16
        elif c.esize == 4:
            d32 = (<uint32_t*>c.out) + o
            for k in range(m):
                d32[k] = load_u32(p + k * stride) ^ f32
        else:
            d64 = (<uint64_t*>c.out) + o
            for k in range(m):
                d64[k] = load_u64(p + k * stride) ^ f64
    elif n == 1:
        rp = bl.rp
        if c.esize == 1:
            d = c.out + o
            for k in range(m):
                d[k] = rp[k][off] ^ f8
        elif c.esize == 2:
            d16 = (<uint16_t*>c.out) + o
            for k in range(m):
                d16[k] = load_u16(rp[k] + off) ^ f16
        elif c.esize == 4:
            d32 = (<uint32_t*>c.out) + o
            for k in range(m):
                d32[k] = load_u32(rp[k] + off) ^ f32
        else:
            d64 = (<uint64_t*>c.out) + o
            for k in range(m):
                d64[k] = load_u64(rp[k] + off) ^ f64
    else:
        d = c.out + o * n * c.esize
        for k in range(m):
            swap_elements(row_at(bl, k) + off, n, c.esize, c.flip, d + k * n * c.esize)
    if c.has_tnull:
        for k in range(m):
            c.nulls += tnull_elements(row_at(bl, k) + off, n, c.esize, c.tnull, c.valid,
                                      (o + k) * n)


cdef void run_scale(Col* c, const Blk* bl, Py_ssize_t m, Py_ssize_t o) noexcept nogil:
    cdef Py_ssize_t k
    cdef Py_ssize_t n = c.count
    cdef Py_ssize_t row_out = n * c.dst_size
    cdef uint8_t* d = c.out + o * row_out
    for k in range(m):
        scale_elements(row_at(bl, k) + c.src_off, n, c.esize, c.src_type, c.scal, c.zero,
                       c.dst_size, d + k * row_out)
    if c.has_tnull:
        for k in range(m):
            c.nulls += tnull_elements(row_at(bl, k) + c.src_off, n, c.esize, c.tnull, c.valid,
                                      (o + k) * n)


cdef extern from *:
    """
    #include "_portable.h"
    /* A fixed-width field of w <= 8 bytes as one little-endian word, zero-extended, and back:
       two overlapping loads (stores) of a power-of-two size, so no byte outside the field is
       touched and no call to a variable-length memcpy is made. */
    static inline uint64_t tf_load_short(const uint8_t *s, Py_ssize_t w) {
        uint32_t a4, b4; uint16_t a2, b2; uint64_t v;
        switch (w) {
        case 8: memcpy(&v, s, 8); return v;
        case 4: case 5: case 6: case 7:
            memcpy(&a4, s, 4); memcpy(&b4, s + w - 4, 4);
            return (uint64_t)a4 | ((uint64_t)b4 << (8 * (w - 4)));
        case 2: case 3:
            memcpy(&a2, s, 2); memcpy(&b2, s + w - 2, 2);
            return (uint64_t)a2 | ((uint64_t)b2 << (8 * (w - 2)));
        default: return s[0];
        }
    }
    static inline void tf_store_short(uint8_t *d, uint64_t v, Py_ssize_t w) {
        uint32_t a4, b4; uint16_t a2, b2;
        switch (w) {
        case 8: memcpy(d, &v, 8); return;
        case 4: case 5: case 6: case 7:
            a4 = (uint32_t)v; b4 = (uint32_t)(v >> (8 * (w - 4)));
            memcpy(d, &a4, 4); memcpy(d + w - 4, &b4, 4); return;
        case 2: case 3:
            a2 = (uint16_t)v; b2 = (uint16_t)(v >> (8 * (w - 2)));
            memcpy(d, &a2, 2); memcpy(d + w - 2, &b2, 2); return;
        default: d[0] = (uint8_t)v;
        }
    }
    /* Bytes kept of a little-endian word once trailing padding is dropped: OR-ing `fold`
       (0x20 in every byte for blanks, 0 for NULs only) maps padding to `fold`, and the highest
       byte still differing is the last kept one. */
    static inline Py_ssize_t tf_word_kept(uint64_t v, uint64_t fold) {
        uint64_t rest = (v | fold) ^ fold;
        return rest ? (Py_ssize_t)((71 - TF_CLZ64(rest)) >> 3) : 0;
    }
    """
    uint64_t tf_load_short(const uint8_t* s, Py_ssize_t w) noexcept nogil
    void tf_store_short(uint8_t* d, uint64_t v, Py_ssize_t w) noexcept nogil
    Py_ssize_t tf_word_kept(uint64_t v, uint64_t fold) noexcept nogil


cdef void run_strings(Col* c, const Blk* bl, Py_ssize_t m, Py_ssize_t o) noexcept nogil:
    # One pass per field: copy its w bytes to the end of the data written so far, find its
    # stripped length in the words just loaded, and record the new end as the next offset; the
    # next field overwrites the stripped tail. Fields of up to 8 bytes are one word each.
    # Every field of c is in a local: stores into the output bytes could alias *c (char
    # aliasing), which would make the compiler reload c's fields for every string.
    cdef Py_ssize_t k, j, t
    cdef Py_ssize_t w = c.esize, n = c.count, off = c.src_off, pos = c.pos
    cdef int strip = c.strip
    cdef uint8_t* out = c.out
    cdef int32_t* ends = c.offsets + o * n + 1
    cdef uint64_t fold = 0x2020202020202020ULL if strip == STRIP_BLANK else 0
    cdef uint64_t word, acc = 0
    cdef const uint8_t* s
    cdef const uint8_t* p
    if w == 8 and n == 1 and strip != STRIP_NONE:
        # The common short label (8A): one load, one store, one offset per row.
        for k in range(m):
            memcpy(&word, row_at(bl, k) + off, 8)
            acc |= word
            memcpy(out + pos, &word, 8)
            pos += tf_word_kept(word, fold)
            ends[k] = <int32_t>pos
    elif w <= 8:
        for k in range(m):
            s = row_at(bl, k) + off
            for j in range(n):
                word = tf_load_short(s + j * w, w)
                acc |= word
                tf_store_short(out + pos, word, w)
                pos += w if strip == STRIP_NONE else tf_word_kept(word, fold)
                ends[k * n + j] = <int32_t>pos
    else:
        for k in range(m):
            s = row_at(bl, k) + off
            for j in range(n):
                p = s + j * w
                t = 0
                while t + 8 < w:
                    memcpy(&word, p + t, 8)
                    memcpy(out + pos + t, &word, 8)
                    acc |= word
                    t += 8
                # The last 8 bytes (overlapping the previous word): padding sits there.
                memcpy(&word, p + w - 8, 8)
                memcpy(out + pos + w - 8, &word, 8)
                acc |= word
                if strip == STRIP_NONE:
                    pos += w
                else:
                    t = tf_word_kept(word, fold)
                    pos += w - 8 + t if t else stripped_length(p, w - 8, strip)
                ends[k * n + j] = <int32_t>pos
    c.pos = pos
    # Padding (space, NUL) never has bit 7 set; any other byte >= 0x80 marks non-ASCII text.
    if acc & 0x8080808080808080ULL:
        c.high = 1


cdef void run_logical1(Col* c, const Blk* bl, Py_ssize_t m, Py_ssize_t o) noexcept nogil:
    # Scalar logical column: whole output bytes of 8 rows at a time ('T' true; a zero byte
    # null when a validity bitmap is kept), single bits only at the block's ragged ends.
    cdef Py_ssize_t k = 0, j
    cdef Py_ssize_t off = c.src_off
    cdef uint8_t* bits = c.out
    cdef uint8_t* valid = c.valid if c.zero_null else NULL
    cdef int64_t nulls = 0
    cdef uint8_t b, v, x
    while k < m and ((o + k) & 7) != 0:
        nulls += logical_elements(row_at(bl, k) + off, 1, bits, valid, o + k)
        k += 1
    while k + 8 <= m:
        b = 0
        v = 0
        for j in range(8):
            x = row_at(bl, k + j)[off]
            b |= <uint8_t>((x == 84) << j)
            v |= <uint8_t>((x != 0) << j)
        bits[(o + k) >> 3] = b
        if valid != NULL:
            valid[(o + k) >> 3] = v
            for j in range(8):
                nulls += ((v >> j) & 1) == 0
        k += 8
    while k < m:
        nulls += logical_elements(row_at(bl, k) + off, 1, bits, valid, o + k)
        k += 1
    c.nulls += nulls


cdef void run_column(Col* c, const Blk* bl, Py_ssize_t m, Py_ssize_t o) noexcept nogil:
    cdef Py_ssize_t k, w
    cdef Py_ssize_t n = c.count
    if c.op == FOP_SWAP:
        run_swap(c, bl, m, o)
    elif c.op == FOP_SCALE:
        run_scale(c, bl, m, o)
    elif c.op == FOP_COPY:  # esize holds the bytes per row
        w = c.esize
        if w == 1:
            for k in range(m):
                c.out[o + k] = row_at(bl, k)[c.src_off]
        else:
            for k in range(m):
                memcpy(c.out + (o + k) * w, row_at(bl, k) + c.src_off, w)
    elif c.op == FOP_LOGICAL:
        if n == 1:
            run_logical1(c, bl, m, o)
        else:
            for k in range(m):
                c.nulls += logical_elements(row_at(bl, k) + c.src_off, n, c.out,
                                            c.valid if c.zero_null else NULL, (o + k) * n)
    elif c.op == FOP_LOGICAL_BYTES:
        for k in range(m):
            logical_bytes(row_at(bl, k) + c.src_off, n, c.out + (o + k) * n)
    elif c.op == FOP_BITS:
        for k in range(m):
            bit_elements(row_at(bl, k) + c.src_off, n, c.out, (o + k) * n)
    elif c.op == FOP_BITS_BYTES:
        for k in range(m):
            bit_bytes(row_at(bl, k) + c.src_off, n, c.out + (o + k) * n)
    elif c.op == FOP_STRING:  # n strings of esize bytes per row
        run_strings(c, bl, m, o)


cdef int load_program(const int64_t[:, ::1] prog, const double[:, ::1] scale, Col* cols,
                      Py_ssize_t out_start) except -1:
    cdef Py_ssize_t i
    for i in range(prog.shape[0]):
        cols[i].op = <int>prog[i, FP_OP]
        cols[i].src_off = prog[i, FP_SRC_OFF]
        cols[i].count = prog[i, FP_COUNT]
        cols[i].esize = <int>prog[i, FP_ESIZE]
        cols[i].src_type = <int>prog[i, FP_SRC_TYPE]
        cols[i].dst_size = <int>prog[i, FP_DST_SIZE]
        cols[i].flip = <uint64_t>prog[i, FP_FLIP]
        cols[i].has_tnull = <int>prog[i, FP_HAS_TNULL]
        cols[i].tnull = <uint64_t>prog[i, FP_TNULL]
        cols[i].out = <uint8_t*><Py_ssize_t>prog[i, FP_OUT]
        cols[i].valid = <uint8_t*><Py_ssize_t>prog[i, FP_VALID]
        cols[i].offsets = <int32_t*><Py_ssize_t>prog[i, FP_OFFSETS]
        cols[i].strip = <int>prog[i, FP_STRIP]
        cols[i].zero_null = <int>prog[i, FP_ZERO_NULL]
        cols[i].scal = scale[i, 0]
        cols[i].zero = scale[i, 1]
        # Each chunk writes its strings from the first byte its rows could need, so chunks
        # never overlap; compact_strings closes the gaps afterwards.
        cols[i].pos = out_start * cols[i].count * cols[i].esize
        cols[i].nulls = 0
        cols[i].high = 0
    return 0


cdef inline void run_block(Col* cols, Py_ssize_t ncols, const Blk* bl, Py_ssize_t m,
                           Py_ssize_t o) noexcept nogil:
    """Every column of a block of ``m`` rows, written from output row ``o`` on."""
    cdef Py_ssize_t i
    for i in range(ncols):
        run_column(&cols[i], bl, m, o)


cdef void add_stats(const Col* cols, Py_ssize_t ncols, int64_t[:, ::1] stats):
    cdef Py_ssize_t i
    for i in range(ncols):
        stats[i, FS_NULLS] += cols[i].nulls
        stats[i, FS_HIGH] |= cols[i].high


def decode_rows(const uint8_t[::1] data, Py_ssize_t row_bytes, Py_ssize_t first_row,
                const int64_t[::1] rows, Py_ssize_t out_start, Py_ssize_t nrows,
                const int64_t[:, ::1] prog, const double[:, ::1] scale,
                int64_t[:, ::1] stats) -> None:
    """Decode output rows ``out_start .. out_start + nrows`` of every column in ``prog``.

    Output row ``k`` comes from table row ``rows[k]`` when ``rows`` is given, else from
    ``first_row + k``. The caller has checked that every such row lies inside ``data`` and
    allocated every output (zero-filled bitmaps) for all output rows; ``stats`` receives the
    null count and the non-ASCII flag of each column for this call.
    """
    cdef Py_ssize_t ncols = prog.shape[0]
    cdef Py_ssize_t b, k, m
    cdef const uint8_t* base
    cdef const uint8_t* rp[BLOCK_MAX]
    cdef bint use_rows = rows is not None
    cdef const int64_t* rix = NULL
    cdef Col* cols
    cdef Blk bl
    cdef Py_ssize_t block = BLOCK_BYTES // row_bytes if row_bytes > 0 else BLOCK_MAX
    if nrows <= 0 or ncols == 0:
        return
    block = 16 if block < 16 else (BLOCK_MAX if block > BLOCK_MAX else block)
    bl.rp = NULL
    bl.base = NULL
    bl.stride = row_bytes
    if prog.shape[1] < FP_NFIELDS or scale.shape[0] != ncols or stats.shape[0] != ncols:
        raise ValueError("malformed column program")
    if use_rows:
        rix = &rows[0]
    base = &data[0]
    cols = <Col*>malloc(ncols * sizeof(Col))
    if cols == NULL:
        raise MemoryError()
    try:
        load_program(prog, scale, cols, out_start)
        with nogil:
            # Rows outer in blocks, columns inner: the block is read from memory once and every
            # column then runs a tight loop over it while it sits in cache.
            b = 0
            while b < nrows:
                m = nrows - b if nrows - b < block else block
                if use_rows:
                    for k in range(m):
                        rp[k] = base + rix[out_start + b + k] * row_bytes
                    bl.rp = rp
                else:
                    bl.rp = NULL
                    bl.base = base + (first_row + out_start + b) * row_bytes
                    bl.stride = row_bytes
                run_block(cols, ncols, &bl, m, out_start + b)
                b += m
        add_stats(cols, ncols, stats)
    finally:
        free(cols)


def select_decode_rows(const uint8_t[::1] data, Py_ssize_t row_bytes, Py_ssize_t first_row,
                       Py_ssize_t nrows, const int64_t[:, ::1] tests, const double[:, ::1] floats,
                       const int64_t[:, ::1] prog, const double[:, ::1] scale,
                       int64_t[:, ::1] stats) -> int:
    """Select rows ``first_row .. first_row + nrows`` with a conjunction of tests (the rows of
    `_predicate.select_conjunction`) and decode every column in ``prog`` of the rows that pass,
    in one pass: each block of rows is tested and its survivors decoded while it is in cache.

    Outputs are allocated for ``nrows`` rows (zero-filled bitmaps); the survivors fill them
    from output row 0 on. Returns their count. The caller has checked that every row lies
    inside ``data``.
    """
    cdef Py_ssize_t ncols = prog.shape[0], ntests = tests.shape[0]
    cdef Py_ssize_t done = 0, n, k, m, found = 0
    cdef Py_ssize_t idx[BLOCK_MAX]
    cdef const uint8_t* rp[BLOCK_MAX]
    cdef const uint8_t* block
    cdef Py_ssize_t chunk = BLOCK_BYTES // row_bytes if row_bytes > 0 else BLOCK_MAX
    cdef bytearray ts_bytes = bytearray(max(ntests, 1) * sizeof(Test))
    cdef Test* ts = <Test*><char*>ts_bytes
    cdef Col* cols
    cdef Blk bl
    load_tests(tests, floats, ts)
    if prog.shape[1] < FP_NFIELDS or scale.shape[0] != ncols or stats.shape[0] != ncols:
        raise ValueError("malformed column program")
    if nrows <= 0:
        return 0
    # Blocks of at least 64 rows keep the tests' loops long; a block stays in L1/L2.
    chunk = 64 if chunk < 64 else (BLOCK_MAX if chunk > BLOCK_MAX else chunk)
    cols = <Col*>malloc(max(ncols, 1) * sizeof(Col))
    if cols == NULL:
        raise MemoryError()
    bl.rp = rp
    bl.base = NULL
    bl.stride = row_bytes
    try:
        load_program(prog, scale, cols, 0)
        with nogil:
            while done < nrows:
                n = nrows - done if nrows - done < chunk else chunk
                block = &data[0] + (first_row + done) * row_bytes
                m = select_block(ts, ntests, block, row_bytes, idx, n)
                if m > 0:
                    for k in range(m):
                        rp[k] = block + idx[k] * row_bytes
                    run_block(cols, ncols, &bl, m, found)
                    found += m
                done += n
        add_stats(cols, ncols, stats)
    finally:
        free(cols)
    return found


def compact_strings(uint8_t[::1] data, int32_t[::1] offsets, const int64_t[::1] bounds,
                    Py_ssize_t per_item) -> None:
    """Close the gaps that chunked string decoding leaves between chunks.

    ``bounds`` holds the first output item of every chunk and then the item count; chunk ``c``
    wrote its strings from byte ``bounds[c] * per_item`` on.
    """
    cdef Py_ssize_t c, j, start, stop, shift, end
    with nogil:
        for c in range(1, bounds.shape[0] - 1):
            start = bounds[c]
            stop = bounds[c + 1]
            end = offsets[start]
            shift = start * per_item - end
            if shift == 0 or stop == start:
                continue
            memmove(&data[0] + end, &data[0] + start * per_item, offsets[stop] - start * per_item)
            for j in range(start + 1, stop + 1):
                offsets[j] -= <int32_t>shift


# ------------------------------------------------------------------------ variable-length arrays


def vla_descriptors(const uint8_t[::1] data, Py_ssize_t row_bytes, Py_ssize_t first_row,
                    const int64_t[::1] rows, Py_ssize_t nrows, Py_ssize_t src_off, bint q_desc,
                    Py_ssize_t elem_bits, Py_ssize_t heap_size, int64_t[::1] counts,
                    int64_t[::1] heap_offsets) -> int:
    """Read and check the heap descriptors of one variable-length column.

    Writes each row's element count and heap byte offset. ``elem_bits`` is the stored size of
    one element in bits (1 for ``X``). Returns -1 when every descriptor lies inside the heap,
    else the output row of the first that does not (negative counts or offsets included).
    """
    cdef Py_ssize_t k
    cdef int64_t n, off, nbytes
    cdef const uint8_t* p
    cdef const uint8_t* base
    cdef bint use_rows = rows is not None
    cdef Py_ssize_t bad = -1
    if nrows <= 0:
        return -1
    base = &data[0]
    with nogil:
        for k in range(nrows):
            if use_rows:
                p = base + rows[k] * row_bytes + src_off
            else:
                p = base + (first_row + k) * row_bytes + src_off
            if q_desc:
                n = load_i64(p)
                off = load_i64(p + 8)
            else:
                # P descriptors are signed 32-bit in the standard; negative values are corrupt.
                n = load_i32(p)
                off = load_i32(p + 4)
            if n < 0 or off < 0 or off > heap_size:
                bad = k
                break
            # Divide instead of multiplying so absurd counts cannot overflow.
            if elem_bits == 1:
                nbytes = (n + 7) // 8
                if nbytes > heap_size - off:
                    bad = k
                    break
            elif n > (heap_size - off) // (elem_bits // 8):
                bad = k
                break
            counts[k] = n
            heap_offsets[k] = off
    return bad


def vla_gather(const uint8_t[::1] heap, const int64_t[::1] heap_offsets,
               const int64_t[::1] offsets, const int64_t[:, ::1] prog,
               const double[:, ::1] scale, int64_t[:, ::1] stats) -> None:
    """Decode every row's elements from the heap into one flat values buffer.

    Row ``k`` holds elements ``offsets[k] .. offsets[k + 1]`` of the output; ``prog`` is a
    one-row column program whose count is the reals per element (2 for complex, else 1).
    For OP_STRING each row is one string and the int32 string offsets are rewritten as the
    stripped bytes are packed.
    """
    cdef Py_ssize_t nrows = heap_offsets.shape[0]
    cdef Py_ssize_t k, n, e, mult
    cdef const uint8_t* s
    cdef const uint8_t* hp
    cdef Col c
    if nrows == 0:
        return
    load_program(prog, scale, &c, 0)
    mult = c.count if c.count > 0 else 1
    hp = &heap[0] if heap.shape[0] > 0 else NULL
    with nogil:
        for k in range(nrows):
            e = offsets[k]
            n = offsets[k + 1] - e
            if n == 0:
                if c.op == FOP_STRING:
                    c.offsets[k + 1] = <int32_t>c.pos
                continue
            s = hp + heap_offsets[k]
            if c.op == FOP_SWAP:
                # A complex element is two swapped reals (the program's count says 2).
                swap_elements(s, n * mult, c.esize, c.flip, c.out + e * mult * c.esize)
                if c.has_tnull:
                    c.nulls += tnull_elements(s, n, c.esize, c.tnull, c.valid, e)
            elif c.op == FOP_SCALE:
                scale_elements(s, n, c.esize, c.src_type, c.scal, c.zero, c.dst_size,
                               c.out + e * c.dst_size)
                if c.has_tnull:
                    c.nulls += tnull_elements(s, n, c.esize, c.tnull, c.valid, e)
            elif c.op == FOP_COPY:
                memcpy(c.out + e * c.esize, s, n * c.esize)
            elif c.op == FOP_LOGICAL:
                c.nulls += logical_elements(s, n, c.out, c.valid if c.zero_null else NULL, e)
            elif c.op == FOP_LOGICAL_BYTES:
                logical_bytes(s, n, c.out + e)
            elif c.op == FOP_BITS:
                bit_elements(s, n, c.out, e)
            elif c.op == FOP_BITS_BYTES:
                bit_bytes(s, n, c.out + e)
            elif c.op == FOP_STRING:
                c.pos = put_string(s, n, c.strip, c.out, c.pos, c.offsets, k, &c.high)
    stats[0, FS_NULLS] += c.nulls
    stats[0, FS_HIGH] |= c.high

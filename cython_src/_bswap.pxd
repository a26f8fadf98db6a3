# Shared inline helpers: load big-endian scalars from unaligned bytes.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int16_t, int32_t, int64_t
from libc.string cimport memcpy

cdef extern from "_portable.h":
    uint16_t TF_BSWAP16(uint16_t) nogil
    uint32_t TF_BSWAP32(uint32_t) nogil
    uint64_t TF_BSWAP64(uint64_t) nogil


cdef inline uint16_t load_u16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return TF_BSWAP16(v)


cdef inline uint32_t load_u32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return TF_BSWAP32(v)


cdef inline uint64_t load_u64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return TF_BSWAP64(v)


cdef inline int16_t load_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>load_u16(p)


cdef inline int32_t load_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>load_u32(p)


cdef inline int64_t load_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>load_u64(p)


cdef inline float load_f32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v = load_u32(p)
    cdef float f
    memcpy(&f, &v, 4)
    return f


cdef inline double load_f64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = load_u64(p)
    cdef double d
    memcpy(&d, &v, 8)
    return d

# cython: language_level=3
"""Image decode kernel: big-endian FITS pixels of any N-D region → native values, scaled or not.

The caller plans the region and validates every bound against the buffer; the kernel runs
without the GIL and writes into an output buffer the caller allocated.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcpy
from cpython.ref cimport Py_INCREF
from libc.math cimport NAN

import os as _os

import numpy as np

cimport numpy as cnp

from _bswap cimport (load_u16, load_u32, load_u64, load_i16, load_i32, load_i64,
                     load_f32, load_f64)

cnp.import_array()

MODE_RAW = 0     # byte swap only: the storage type in native order
MODE_FLIP = 1    # byte swap and flip the sign bit: unsigned (BZERO=2^(n-1)) and signed-byte
# MODE_SCALE: physical = BZERO + BSCALE * stored, BLANK → NaN; float32 for 8/16/-32, else float64
MODE_SCALE = 2

cdef enum:
    MAX_NDIM = 999


cdef extern from "_swap.h" nogil:
    void tf_swap_copy16(const uint8_t* s, uint8_t* d, size_t n, uint16_t flip)
    void tf_swap_copy32(const uint8_t* s, uint8_t* d, size_t n, uint32_t flip)
    void tf_swap_copy64(const uint8_t* s, uint8_t* d, size_t n, uint64_t flip)
    void tf_swap_inplace16(uint8_t* d, size_t n, uint16_t flip)
    void tf_swap_inplace32(uint8_t* d, size_t n, uint32_t flip)
    void tf_swap_inplace64(uint8_t* d, size_t n, uint64_t flip)
    int tf_swap_copy_nt(const uint8_t* s, uint8_t* d, size_t nbytes, int size, uint64_t flip)
    void tf_stream_fence()


cdef void _run_raw(const uint8_t* s, Py_ssize_t n, Py_ssize_t stride, uint8_t* d,
                   int size, uint64_t flip) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint16_t v16
    cdef uint32_t v32
    cdef uint64_t v64
    cdef uint8_t f8 = <uint8_t>flip
    if size == 1:
        if stride == 1 and f8 == 0:
            memcpy(d, s, n)
        else:
            for i in range(n):
                d[i] = s[i * stride] ^ f8
    elif stride == size:
        if size == 2:
            tf_swap_copy16(s, d, n, <uint16_t>flip)
        elif size == 4:
            tf_swap_copy32(s, d, n, <uint32_t>flip)
        else:
            tf_swap_copy64(s, d, n, flip)
    elif size == 2:
        for i in range(n):
            v16 = load_u16(s + i * stride) ^ <uint16_t>flip
            memcpy(d + 2 * i, &v16, 2)
    elif size == 4:
        for i in range(n):
            v32 = load_u32(s + i * stride) ^ <uint32_t>flip
            memcpy(d + 4 * i, &v32, 4)
    else:
        for i in range(n):
            v64 = load_u64(s + i * stride) ^ flip
            memcpy(d + 8 * i, &v64, 8)


cdef void _swap_inplace(uint8_t* d, Py_ssize_t n, int size, uint64_t flip) noexcept nogil:
    if size == 1:
        if <uint8_t>flip:
            for i in range(n):
                d[i] ^= <uint8_t>flip
    elif size == 2:
        tf_swap_inplace16(d, n, <uint16_t>flip)
    elif size == 4:
        tf_swap_inplace32(d, n, <uint32_t>flip)
    else:
        tf_swap_inplace64(d, n, flip)


cdef void _run_scale(const uint8_t* s, Py_ssize_t n, Py_ssize_t stride, uint8_t* d, int bitpix,
                     double bscale, double bzero, bint has_blank, int64_t blank) noexcept nogil:
    cdef Py_ssize_t i
    cdef float* o32 = <float*>d
    cdef double* o64 = <double*>d
    cdef int64_t v
    if bitpix == 8:
        for i in range(n):
            v = s[i * stride]
            o32[i] = NAN if (has_blank and v == blank) else <float>(bzero + bscale * <double>v)
    elif bitpix == 16:
        for i in range(n):
            v = load_i16(s + i * stride)
            o32[i] = NAN if (has_blank and v == blank) else <float>(bzero + bscale * <double>v)
    elif bitpix == 32:
        for i in range(n):
            v = load_i32(s + i * stride)
            o64[i] = NAN if (has_blank and v == blank) else bzero + bscale * <double>v
    elif bitpix == 64:
        for i in range(n):
            v = load_i64(s + i * stride)
            o64[i] = NAN if (has_blank and v == blank) else bzero + bscale * <double>v
    elif bitpix == -32:
        for i in range(n):
            o32[i] = <float>(bzero + bscale * <double>load_f32(s + i * stride))
    else:
        for i in range(n):
            o64[i] = bzero + bscale * load_f64(s + i * stride)


cdef inline void _run(const uint8_t* s, Py_ssize_t n, Py_ssize_t stride, uint8_t* d, int bitpix,
                      int mode, int size, double bscale, double bzero, bint has_blank,
                      int64_t blank) noexcept nogil:
    if mode == 2:
        _run_scale(s, n, stride, d, bitpix, bscale, bzero, has_blank, blank)
    elif mode == 1:
        _run_raw(s, n, stride, d, size, (<uint64_t>1) << (8 * size - 1))
    else:
        _run_raw(s, n, stride, d, size, 0)


cdef inline int _out_size(int bitpix, int mode) noexcept nogil:
    if mode != 2:
        return abs(bitpix) // 8
    return 4 if (bitpix == 8 or bitpix == 16 or bitpix == -32) else 8


cdef extern from "_portable.h":
    void TF_PREFETCH(const void*) nogil

cdef enum:
    # How far ahead a cutout asks for its rows (each row a miss of 4-5 lines of its own): both
    # distances measured, further ahead was slower (docs/benchmarks.md, "Measured choices").
    PREFETCH_ROWS = 6
    BATCH_PREFETCH_ROWS = 4


cdef inline void _prefetch_run(const uint8_t* p, Py_ssize_t nbytes) noexcept nogil:
    # Every cache line the run touches: from the line holding its first byte to the one
    # holding its last (a run that does not start on a line boundary spans one more line).
    cdef const uint8_t* line = <const uint8_t*>(<size_t>p & ~(<size_t>63))
    cdef const uint8_t* end = p + nbytes
    while line < end:
        TF_PREFETCH(line)
        line += 64


cdef inline int64_t _run_offset(int ndim, const int64_t* start, const int64_t* step,
                                const int64_t* idx, const int64_t* stride_bytes) noexcept nogil:
    """Byte offset of the inner run selected by the outer-axis counters ``idx``."""
    cdef int k
    cdef int64_t base = start[ndim - 1] * stride_bytes[ndim - 1]
    for k in range(ndim - 1):
        base += (start[k] + idx[k] * step[k]) * stride_bytes[k]
    return base


cdef inline void _advance(int ndim, int64_t* idx, const int64_t* count) noexcept nogil:
    """Odometer step over the outer axes (all but the last)."""
    cdef int k = ndim - 2
    while k >= 0:
        idx[k] += 1
        if idx[k] < count[k]:
            return
        idx[k] = 0
        k -= 1


cdef int _decode_nd(const uint8_t* src, Py_ssize_t src_len, uint8_t* out, Py_ssize_t out_len,
                    int ndim, int64_t* shape, int64_t* start, int64_t* step, int64_t* count,
                    int bitpix, int mode, double bscale, double bzero, bint has_blank,
                    int64_t blank) noexcept nogil:
    """Decode an N-D strided region. The small arrays are modified (axes merged in place).
    Returns 0, or -1 when the region does not fit the buffers (nothing is written then)."""
    cdef int size = abs(bitpix) // 8
    cdef int out_size = _out_size(bitpix, mode)
    cdef int64_t stride_bytes[MAX_NDIM]
    cdef int64_t idx[MAX_NDIM]
    cdef int k, m = 0
    cdef int64_t nruns = 1, run, _run_i, total = 1, hi = 0, first, last, rowstride, nbytes, off
    cdef const uint8_t* p
    cdef Py_ssize_t inner_n, inner_stride
    cdef uint8_t* d = out
    if ndim <= 0:
        return 0
    # Merge trailing axes read whole and contiguous, so inner runs are long.
    for k in range(ndim):
        shape[m] = shape[k]
        start[m] = start[k]
        step[m] = step[k]
        count[m] = count[k]
        m += 1
        while (m >= 2 and step[m - 1] == 1 and start[m - 1] == 0
               and count[m - 1] == shape[m - 1] and step[m - 2] == 1):
            shape[m - 2] *= shape[m - 1]
            start[m - 2] *= shape[m - 1]
            count[m - 2] *= shape[m - 1]
            m -= 1
    ndim = m
    for k in range(ndim):
        if count[k] <= 0:
            return 0
    stride_bytes[ndim - 1] = size
    for k in range(ndim - 2, -1, -1):
        stride_bytes[k] = stride_bytes[k + 1] * shape[k + 1]
    for k in range(ndim):
        total *= count[k]
        first = start[k]
        last = start[k] + (count[k] - 1) * step[k]
        if first < 0 or last < 0 or first >= shape[k] or last >= shape[k]:
            return -1
        hi += (first if first > last else last) * stride_bytes[k]
    if total * out_size > out_len or hi + size > src_len:
        return -1
    for k in range(ndim - 1):
        nruns *= count[k]
        idx[k] = 0
    inner_n = count[ndim - 1]
    inner_stride = step[ndim - 1] * size
    if mode != 2 and nruns > 1 and inner_stride == size and inner_n * size <= 4096:
        # Short rows scattered over the file (cutouts) are bound by memory latency: copy every
        # row first (plain copies keep many cache misses in flight at once), then swap the
        # whole output while it is hot in cache.
        if ndim == 2:
            # Rows at a constant stride: ask for the rows PREFETCH_ROWS ahead while copying.
            rowstride = step[0] * stride_bytes[0]
            p = src + start[0] * stride_bytes[0] + start[1] * size
            nbytes = inner_n * size
            for run in range(nruns if nruns < PREFETCH_ROWS else PREFETCH_ROWS):
                off = 0
                while off < nbytes:
                    TF_PREFETCH(p + run * rowstride + off)
                    off += 64
            for run in range(nruns):
                if run + PREFETCH_ROWS < nruns:
                    off = 0
                    while off < nbytes:
                        TF_PREFETCH(p + PREFETCH_ROWS * rowstride + off)
                        off += 64
                memcpy(d, p, nbytes)
                d += nbytes
                p += rowstride
        else:
            for _run_i in range(nruns):
                memcpy(d, src + _run_offset(ndim, start, step, idx, stride_bytes), inner_n * size)
                d += inner_n * size
                _advance(ndim, idx, count)
        _swap_inplace(out, total, size, (<uint64_t>1) << (8 * size - 1) if mode == 1 else 0)
        return 0
    for _run_i in range(nruns):
        _run(src + _run_offset(ndim, start, step, idx, stride_bytes), inner_n, inner_stride, d,
             bitpix, mode, size, bscale, bzero, has_blank, blank)
        d += inner_n * out_size
        _advance(ndim, idx, count)
    return 0


cdef inline uint8_t* _writable_data(cnp.ndarray out) except NULL:
    if not cnp.PyArray_IS_C_CONTIGUOUS(out) or not cnp.PyArray_ISWRITEABLE(out):
        raise ValueError("out must be a writable C-contiguous array")
    return <uint8_t*>cnp.PyArray_DATA(out)


def decode_region(const uint8_t[::1] src, Py_ssize_t data_offset, cnp.ndarray out,
                  int bitpix, int mode, tuple shape, tuple start, tuple step, tuple count,
                  double bscale=1.0, double bzero=0.0, bint has_blank=False, int64_t blank=0):
    """Decode the region ``start + step*k, k < count`` (C order axes) of an image whose pixels
    begin at ``src[data_offset]`` with C-order ``shape``, into ``out``.

    ``out`` is a C-contiguous writable array of ``prod(count)`` values of the result type.
    Bounds are planned by the caller; they are re-checked here so a planning bug raises
    instead of touching memory outside the buffers.
    """
    cdef int ndim = len(shape)
    cdef int64_t c_shape[MAX_NDIM]
    cdef int64_t c_start[MAX_NDIM]
    cdef int64_t c_step[MAX_NDIM]
    cdef int64_t c_count[MAX_NDIM]
    cdef int k, rc
    cdef uint8_t* d = _writable_data(out)
    cdef Py_ssize_t out_len = cnp.PyArray_NBYTES(out)
    if ndim == 0:
        return
    if ndim > MAX_NDIM or len(start) != ndim or len(step) != ndim or len(count) != ndim:
        raise ValueError("region and shape disagree in their number of axes")
    if data_offset < 0 or data_offset > src.shape[0]:
        raise ValueError("data offset outside the buffer")
    for k in range(ndim):
        c_shape[k] = shape[k]
        c_start[k] = start[k]
        c_step[k] = step[k]
        c_count[k] = count[k]
    with nogil:
        rc = _decode_nd(&src[0] + data_offset, src.shape[0] - data_offset, d, out_len, ndim,
                        c_shape, c_start, c_step, c_count, bitpix, mode, bscale, bzero,
                        has_blank, blank)
    if rc != 0:
        raise ValueError("region outside the image or the buffers")


# -- cutout memory ---------------------------------------------------------------------------------
# Fresh memory costs a page fault per 4 KiB page on first touch, as much as the decode of a small
# cutout. Cutouts (and the arrays of batched calls, `cutout_array`) come from blocks that return
# to a bounded free list when their array dies, so a loop that keeps a batch of cutouts, drops it
# and reads the next one reuses memory already faulted in. The list holds at most 64 MiB;
# release_cutout_memory() empties it. Reads of 1 MiB and more have a list of their own
# (`output_array`).
from libc.stdlib cimport realloc, free


cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* A block of `size` bytes; big ones on 2 MiB boundaries with transparent huge pages asked
       for (as NumPy does for its large arrays): fewer faults and TLB misses on first use.
       Small ones on a cache line: malloc's 16-byte alignment left every other cutout off the
       32-byte boundary of the AVX2 streaming copy, on its 8-byte fallback.
       Windows has no posix_memalign (its aligned blocks need their own free): malloc there. */
    static void *tf_block_alloc(size_t size) {
    #if defined(_WIN32)
        return malloc(size);
    #else
        void *p = NULL;
        if (size < ((size_t)4 << 20)) return posix_memalign(&p, 64, size) == 0 ? p : NULL;
        if (posix_memalign(&p, (size_t)2 << 20, size) != 0) return NULL;
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(p, size, MADV_HUGEPAGE);
    #endif
        return p;
    #endif
    }
    """
    void* tf_block_alloc(size_t size) nogil

cdef enum:
    POOL_CLASSES = 8

cdef struct _FreeList:
    Py_ssize_t size
    Py_ssize_t n
    Py_ssize_t cap
    void** items

# A free list of blocks by exact size: up to POOL_CLASSES sizes, ``kept`` bytes in all, at most
# ``max_kept``; blocks over ``max_block`` go back to the system.
cdef struct _Pool:
    _FreeList classes[POOL_CLASSES]
    Py_ssize_t kept
    Py_ssize_t max_kept
    Py_ssize_t max_block
    Py_ssize_t min_block  # smaller arrays are plain NumPy ones (malloc recycles those well)
    bint counts_live  # its blocks in use count in _live_bytes (cutouts the caller keeps)
    bint drop_on_miss  # a size it does not hold frees what it holds before a new block is made

# Cutouts, single and batched: a batch's array up to half the pool is kept too.
cdef _Pool _cutout_pool
# Whole-image outputs of 1 MiB and more (reads and their scratch): a loop of reads of one size
# reuses the last output's pages instead of faulting in fresh ones, which the kernel zeroes. A
# read of another size frees what is kept first, so the pool never adds to a peak
# (docs/architecture.md, "Image outputs are recycled").
cdef _Pool _output_pool


cdef void _pool_init(_Pool* pool, Py_ssize_t max_kept, Py_ssize_t max_block, Py_ssize_t min_block,
                     bint counts_live, bint drop_on_miss):
    cdef int k
    for k in range(POOL_CLASSES):
        pool.classes[k].size = 0
        pool.classes[k].n = 0
        pool.classes[k].cap = 0
        pool.classes[k].items = NULL
    pool.kept = 0
    pool.max_kept = max_kept
    pool.max_block = max_block
    pool.min_block = min_block
    pool.counts_live = counts_live
    pool.drop_on_miss = drop_on_miss


OUTPUT_MEMORY_DEFAULT = 256 << 20  # bytes of dropped read outputs kept unless told otherwise
_pool_init(&_cutout_pool, 64 << 20, 32 << 20, 0, True, False)
_pool_init(&_output_pool, OUTPUT_MEMORY_DEFAULT, OUTPUT_MEMORY_DEFAULT, 1 << 20, False, True)


# Bytes of cutout memory handed out and not given back yet: the results the caller keeps. Once
# they outgrow the caches (STREAM_MIN_BYTES), the next results are written with streaming stores:
# a kept result goes to memory anyway, and a plain store would first read each of its lines.
cdef Py_ssize_t _live_bytes = 0
cdef Py_ssize_t _STREAM_MIN = 4 << 20


def set_stream_min_bytes(Py_ssize_t nbytes):
    """Set the kept-cutout bytes (and batch size) from which cutouts are written with streaming
    stores (default 4 MiB, about a last-level cache); returns the previous value. For benchmarks:
    a huge value turns streaming off, 0 turns it always on."""
    global _STREAM_MIN
    old = _STREAM_MIN
    _STREAM_MIN = nbytes
    return old


cdef Py_ssize_t _release(_Pool* pool) noexcept:
    cdef int k
    cdef Py_ssize_t freed = pool.kept
    for k in range(POOL_CLASSES):
        while pool.classes[k].n > 0:
            pool.classes[k].n -= 1
            free(pool.classes[k].items[pool.classes[k].n])
    pool.kept = 0
    return freed


cdef void* _take(_Pool* pool, Py_ssize_t size) noexcept:
    global _live_bytes
    cdef int k
    cdef void* ptr = NULL
    for k in range(POOL_CLASSES):
        if pool.classes[k].size == size and pool.classes[k].n > 0:
            pool.classes[k].n -= 1
            pool.kept -= size
            ptr = pool.classes[k].items[pool.classes[k].n]
            break
    if ptr == NULL:
        if pool.drop_on_miss:
            _release(pool)
        ptr = tf_block_alloc(size)
    if ptr != NULL and pool.counts_live:
        _live_bytes += size
    return ptr


cdef void _give(_Pool* pool, void* ptr, Py_ssize_t size) noexcept:
    global _live_bytes
    cdef int k, slot = -1
    cdef void** grown
    cdef Py_ssize_t cap
    cdef _FreeList* c
    if pool.counts_live:
        _live_bytes -= size
    if size <= pool.max_block and pool.kept + size <= pool.max_kept:
        for k in range(POOL_CLASSES):
            if pool.classes[k].size == size:
                slot = k
                break
        if slot < 0:
            for k in range(POOL_CLASSES):
                if pool.classes[k].n == 0:  # an empty class takes the new size
                    pool.classes[k].size = size
                    slot = k
                    break
        if slot >= 0:
            c = &pool.classes[slot]
            if c.n == c.cap:
                cap = 64 if c.cap == 0 else 2 * c.cap
                grown = <void**>realloc(c.items, cap * sizeof(void*))
                if grown != NULL:
                    c.items = grown
                    c.cap = cap
            if c.n < c.cap:
                c.items[c.n] = ptr
                c.n += 1
                pool.kept += size
                return
    free(ptr)


def release_cutout_memory():
    """Free the memory kept for reuse by cutouts that were dropped; returns the bytes freed."""
    return _release(&_cutout_pool)


def cutout_memory_kept():
    """Bytes of dropped cutouts kept for reuse (at most 64 MiB)."""
    return _cutout_pool.kept


def release_output_memory():
    """Free the memory kept for reuse by whole-image outputs that were dropped; returns the
    bytes freed."""
    return _release(&_output_pool)


def output_memory_kept():
    """Bytes of dropped read outputs kept for reuse."""
    return _output_pool.kept


def set_output_memory_limit(Py_ssize_t nbytes):
    """Keep at most ``nbytes`` of dropped read outputs for reuse (0: none, every output is freed
    when it dies); what is kept beyond it is freed now. Returns the previous limit (the default
    is `OUTPUT_MEMORY_DEFAULT`; reads apply ``TORCHFITS_OUTPUT_POOL_MB`` through
    `image.plain.output_array`)."""
    old = _output_pool.max_kept
    nbytes = max(0, nbytes)
    _output_pool.max_kept = nbytes
    _output_pool.max_block = nbytes
    if _output_pool.kept > nbytes:
        _release(&_output_pool)
    return old


def owns(array):
    """Whether the NumPy ``array`` holds its own memory: NumPy's, or a pooled block."""
    return bool(array.flags.owndata) or type(array.base) is _PooledMemory


def _release_in_child():
    # A forked child (a DataLoader worker) would copy every page of the parent's kept blocks
    # it wrote into; it starts with none.
    _release(&_cutout_pool)
    _release(&_output_pool)


cdef class _PooledMemory:
    """Owner of one pooled block (the base of its array); gives it back when the array dies."""
    cdef void* ptr
    cdef Py_ssize_t size
    cdef _Pool* pool

    def __dealloc__(self):
        if self.ptr != NULL:
            _give(self.pool, self.ptr, self.size)
            self.ptr = NULL


cdef _PooledMemory _pooled(_Pool* pool, Py_ssize_t size):
    cdef _PooledMemory mem = _PooledMemory.__new__(_PooledMemory)
    mem.size = size
    mem.pool = pool
    mem.ptr = _take(pool, size)
    if mem.ptr == NULL:
        raise MemoryError()
    return mem


cdef cnp.ndarray _owned_by(int ndim, cnp.npy_intp* dims, int typenum, _PooledMemory mem):
    cdef cnp.ndarray out = cnp.PyArray_SimpleNewFromData(ndim, dims, typenum, mem.ptr)
    Py_INCREF(mem)  # PyArray_SetBaseObject steals a reference
    cnp.PyArray_SetBaseObject(out, mem)
    return out


cdef class CutoutReader:
    """Rectangular cutouts of the last two axes (all leading planes) of one mapped image,
    with every per-call cost in C: clamping, allocation and the decode."""

    cdef const uint8_t[::1] src
    cdef Py_ssize_t data_offset
    cdef int bitpix, mode, ndim
    cdef double bscale, bzero
    cdef bint has_blank
    cdef int64_t blank
    cdef int64_t height, width, planes
    cdef object dtype
    cdef int typenum, out_size
    cdef object wrap, faults, on_fault
    cdef bint ready
    cdef tuple lead
    cdef int64_t c_shape[MAX_NDIM]
    cdef int64_t touched, touch_limit, touch_granule
    cdef object on_touched

    def __init__(self, const uint8_t[::1] src, Py_ssize_t data_offset, int bitpix, int mode,
                 tuple shape, object dtype, double bscale=1.0, double bzero=0.0,
                 bint has_blank=False, int64_t blank=0):
        cdef int k
        if len(shape) < 2 or len(shape) > MAX_NDIM:
            raise ValueError("cutouts need an image of 2 or more axes")
        self.src = src
        self.data_offset = data_offset
        self.bitpix = bitpix
        self.mode = mode
        self.ndim = len(shape)
        self.planes = 1
        for k in range(self.ndim):
            self.c_shape[k] = shape[k]
            if k < self.ndim - 2:
                self.planes *= shape[k]
        self.height = shape[self.ndim - 2]
        self.width = shape[self.ndim - 1]
        self.lead = tuple(shape[:len(shape) - 2])
        self.dtype = np.dtype(dtype)
        self.typenum = self.dtype.num
        self.out_size = self.dtype.itemsize
        if self.out_size != _out_size(bitpix, mode):
            raise ValueError(f"dtype {self.dtype} does not match BITPIX={bitpix} in mode {mode}")
        self.bscale = bscale
        self.bzero = bzero
        self.has_blank = has_blank
        self.blank = blank
        self.ready = True

    cdef int _decode_scaled(self, uint8_t* out, Py_ssize_t out_len, int64_t x1, int64_t y1,
                            int64_t nx, int64_t ny) noexcept nogil:
        """The general N-D decode (scaled cutouts); 0, or -1 when the box does not fit."""
        cdef int64_t c_shape[MAX_NDIM]
        cdef int64_t c_start[MAX_NDIM]
        cdef int64_t c_step[MAX_NDIM]
        cdef int64_t c_count[MAX_NDIM]
        cdef int k, n = self.ndim
        # Fresh arrays on every call: _decode_nd merges axes in them in place.
        for k in range(n):
            c_shape[k] = self.c_shape[k]
            c_start[k] = 0
            c_step[k] = 1
            c_count[k] = self.c_shape[k]
        c_start[n - 2] = y1
        c_start[n - 1] = x1
        c_count[n - 2] = ny
        c_count[n - 1] = nx
        return _decode_nd(&self.src[0] + self.data_offset, self.src.shape[0] - self.data_offset,
                          out, out_len, n, c_shape, c_start, c_step, c_count, self.bitpix,
                          self.mode, self.bscale, self.bzero, self.has_blank, self.blank)

    cdef int _decode_box(self, uint8_t* out, Py_ssize_t out_len, int64_t x1, int64_t y1,
                         int64_t nx, int64_t ny, bint stream) noexcept nogil:
        """Decode ``image[..., y1:y1+ny, x1:x1+nx]`` (every leading plane; a box inside the
        image, nx and ny > 0) into ``out``. Returns 0, or -1 when the box does not fit the
        buffers (nothing is written then). The decode of `cutout` (and of scaled batches).
        ``stream``: unscaled rows are written with streaming stores (see `_live_bytes`)."""
        cdef int size = abs(self.bitpix) // 8
        cdef int64_t row_stride, plane_stride, plane, r, last
        cdef Py_ssize_t nbytes
        cdef uint64_t flip
        cdef const uint8_t* s
        cdef const uint8_t* row
        cdef uint8_t* d = out
        if self.mode == 2:
            return self._decode_scaled(out, out_len, x1, y1, nx, ny)
        # Rows of the last two axes, plane after plane: one byte-swapping copy per row,
        # asking for the row PREFETCH_ROWS ahead (rows lie a whole image row apart).
        row_stride = self.width * size
        plane_stride = self.height * row_stride
        last = (self.planes - 1) * plane_stride + (y1 + ny - 1) * row_stride + (x1 + nx) * size
        if last > self.src.shape[0] - self.data_offset or self.planes * ny * nx * size > out_len:
            return -1
        flip = (<uint64_t>1) << (8 * size - 1) if self.mode == 1 else 0
        nbytes = nx * size
        s = &self.src[0] + self.data_offset + y1 * row_stride + x1 * size
        for plane in range(self.planes):
            row = s + plane * plane_stride
            for r in range(ny if ny < PREFETCH_ROWS else PREFETCH_ROWS):
                _prefetch_run(row + r * row_stride, nbytes)
            for r in range(ny):
                if r + PREFETCH_ROWS < ny:
                    _prefetch_run(row + PREFETCH_ROWS * row_stride, nbytes)
                if not (stream and tf_swap_copy_nt(row, d, nbytes, size, flip)):
                    _run_raw(row, nx, size, d, size, flip)
                d += nbytes
                row += row_stride
        if stream:
            tf_stream_fence()
        return 0

    def set_residency(self, int64_t limit, on_touched=None, int64_t granule=4096):
        """Call ``on_touched()`` after every ``limit`` bytes of file pages the cutouts read (a
        page or more per row; ``limit <= 0``: never). Random boxes leave no finished range
        behind them, so a loop over an image larger than memory releases the image's map pages
        from there (they map again, the same bytes, on the next read). ``granule``: the size of
        a mapped page (2 MiB where the map may hold huge pages: a box then maps its whole band)."""
        self.touch_limit = limit if on_touched is not None else 0
        self.on_touched = on_touched
        self.touched = 0
        self.touch_granule = granule if granule > 0 else 4096

    cdef void _touch(self, int64_t boxes, int64_t ny, int64_t nx) except *:
        """Count the pages that ``boxes`` boxes of ``ny`` rows of ``nx`` pixels map (at most);
        run ``on_touched`` past the limit."""
        cdef int64_t g = self.touch_granule, size = abs(self.bitpix) // 8
        cdef int64_t nbytes = nx * size, rows, band
        if self.touch_limit <= 0:
            return
        rows = ny * (nbytes // g + 1)  # every row on pages of its own
        band = ((ny - 1) * self.width * size + nbytes) // g + 2  # rows sharing pages
        self.touched += boxes * self.planes * (rows if rows < band else band) * g
        if self.touched >= self.touch_limit:
            self.touched = 0
            self.on_touched()

    def set_result(self, wrap=None, faults=None, on_fault=None):
        """How :meth:`read` and calls finish a cutout: ``wrap(array)`` makes the result (e.g. a
        tensor); after the decode, ``on_fault()`` runs when ``faults()`` says a map faulted.
        ``wrap=None`` sends calls to the subclass's ``read_subset``."""
        self.wrap, self.faults, self.on_fault = wrap, faults, on_fault

    def read(self, int64_t x1, int64_t y1, int64_t x2, int64_t y2):
        """:meth:`cutout`, then the fault check and ``wrap`` set by :meth:`set_result`."""
        arr = self._cut(x1, y1, x2, y2)
        if self.faults is not None and self.faults():
            self.on_fault()
        return arr if self.wrap is None else self.wrap(arr)

    def __call__(self, x1, y1, x2, y2, *, out=None):
        """``read(x1, y1, x2, y2)`` once :meth:`set_result` gave a ``wrap``; otherwise (and with
        ``out``) the subclass's ``read_subset(x1, y1, x2, y2, out=out)``."""
        if out is None and self.wrap is not None:
            arr = self._cut(x1, y1, x2, y2)
            if self.faults is not None and self.faults():
                self.on_fault()
            return self.wrap(arr)
        return self.read_subset(x1, y1, x2, y2, out=out)

    def cutout(self, int64_t x1, int64_t y1, int64_t x2, int64_t y2):
        """``image[..., y1:y2, x1:x2]`` with coordinates clamped to the image (0-based), as a
        new C-contiguous array that owns its memory."""
        return self._cut(x1, y1, x2, y2)

    cdef object _cut(self, int64_t x1, int64_t y1, int64_t x2, int64_t y2):
        cdef cnp.npy_intp dims[MAX_NDIM]
        cdef int k, rc, n = self.ndim
        cdef int64_t nx, ny, total
        cdef _PooledMemory mem
        if not self.ready:
            raise ValueError("this reader has no uncompressed image to cut")
        x1 = 0 if x1 < 0 else (self.width if x1 > self.width else x1)
        x2 = 0 if x2 < 0 else (self.width if x2 > self.width else x2)
        y1 = 0 if y1 < 0 else (self.height if y1 > self.height else y1)
        y2 = 0 if y2 < 0 else (self.height if y2 > self.height else y2)
        nx = x2 - x1 if x2 > x1 else 0
        ny = y2 - y1 if y2 > y1 else 0
        for k in range(n - 2):
            dims[k] = self.c_shape[k]
        dims[n - 2] = ny
        dims[n - 1] = nx
        total = self.planes * ny * nx
        if total == 0:
            return np.empty(self.lead + (ny, nx), self.dtype)
        mem = _pooled(&_cutout_pool, total * self.out_size)
        with nogil:
            rc = self._decode_box(<uint8_t*>mem.ptr, mem.size, x1, y1, nx, ny,
                                  _live_bytes >= _STREAM_MIN)
        if rc != 0:
            raise ValueError("cutout outside the image or the buffer")
        if self.touch_limit > 0:
            self._touch(1, ny, nx)
        return _owned_by(n, dims, self.typenum, mem)


cdef inline const uint8_t* _batch_row(const uint8_t* base, const int64_t[:, ::1] boxes,
                                      int64_t j, int64_t per_box, int64_t height,
                                      int64_t row_stride, int64_t plane_stride,
                                      int size) noexcept nogil:
    """Row ``j`` of a batch read box after box (each box: its planes' rows in order)."""
    cdef int64_t i = j // per_box, k = j % per_box
    return (base + (k // height) * plane_stride + (boxes[i, 2] + k % height) * row_stride
            + boxes[i, 1] * size)


cdef void _batch_raw(CutoutReader reader, const int64_t[:, ::1] boxes, int64_t height,
                     int64_t width, uint8_t* out, Py_ssize_t slot_bytes, bint stream) noexcept nogil:
    """Unscaled boxes (checked inside the image and the buffers), row after row of box after
    box, asking for the row BATCH_PREFETCH_ROWS ahead across box boundaries, so the next box's first
    rows are on their way while the last ones of this box copy. ``stream``: stores that bypass
    the caches (an output larger than them is not read before it is written)."""
    cdef int size = abs(reader.bitpix) // 8
    cdef int64_t row_stride = reader.width * size
    cdef int64_t plane_stride = reader.height * row_stride
    cdef int64_t per_box = reader.planes * height
    cdef int64_t total = boxes.shape[0] * per_box, j, k, i
    cdef Py_ssize_t nbytes = width * size
    cdef uint64_t flip = (<uint64_t>1) << (8 * size - 1) if reader.mode == 1 else 0
    cdef const uint8_t* base = &reader.src[0] + reader.data_offset
    cdef const uint8_t* row
    cdef uint8_t* d
    for j in range(total if total < BATCH_PREFETCH_ROWS else BATCH_PREFETCH_ROWS):
        _prefetch_run(_batch_row(base, boxes, j, per_box, height, row_stride, plane_stride, size),
                      nbytes)
    j = 0
    for i in range(boxes.shape[0]):
        d = out + boxes[i, 0] * slot_bytes
        row = base + boxes[i, 2] * row_stride + boxes[i, 1] * size
        for k in range(per_box):
            if j + BATCH_PREFETCH_ROWS < total:
                _prefetch_run(_batch_row(base, boxes, j + BATCH_PREFETCH_ROWS, per_box, height,
                                         row_stride, plane_stride, size), nbytes)
            if not (stream and tf_swap_copy_nt(row + (k // height) * plane_stride
                                               + (k % height) * row_stride, d, nbytes, size, flip)):
                _run_raw(row + (k // height) * plane_stride + (k % height) * row_stride, width,
                         size, d, size, flip)
            d += nbytes
            j += 1
    if stream:
        tf_stream_fence()


def cutout_batch(CutoutReader reader, const int64_t[:, ::1] boxes, int64_t height,
                 int64_t width, cnp.ndarray out):
    """Decode many same-size cutouts of one image in one call (a DataLoader batch).

    Each row of ``boxes`` is ``(slot, x1, y1)``: ``out[slot]`` receives
    ``image[..., y1:y1+height, x1:x1+width]`` (every leading plane). ``out`` is a writable
    C-contiguous array of the reader's dtype shaped ``(M, *lead, height, width)``. Boxes must lie
    inside the image (boxes the edges clamp are cut one by one with `CutoutReader.cutout`).
    Every check runs first; then the whole batch decodes without the GIL.
    """
    cdef int rc = 0
    cdef Py_ssize_t i, nboxes = boxes.shape[0], slots
    cdef Py_ssize_t slot_bytes
    cdef int64_t slot, x1, y1, size, last
    cdef uint8_t* d = _writable_data(out)
    cdef object arr = out
    cdef bint stream
    if not reader.ready:
        raise ValueError("this reader has no uncompressed image to cut")
    if arr.dtype != reader.dtype:
        raise ValueError(f"out has dtype {arr.dtype}, the cutouts {reader.dtype}")
    if tuple(arr.shape[1:]) != reader.lead + (height, width):
        raise ValueError(f"out has shape {tuple(arr.shape)}, cutouts need (M,) + "
                         f"{reader.lead + (height, width)}")
    if nboxes and boxes.shape[1] != 3:
        raise ValueError("boxes must be rows of (slot, x1, y1)")
    if height <= 0 or width <= 0:
        raise ValueError("cutouts must have a positive height and width")
    slots = arr.shape[0]
    slot_bytes = cnp.PyArray_NBYTES(out) // slots if slots else 0
    size = abs(reader.bitpix) // 8
    for i in range(nboxes):
        slot, x1, y1 = boxes[i, 0], boxes[i, 1], boxes[i, 2]
        if not (0 <= slot < slots and 0 <= x1 and x1 + width <= reader.width
                and 0 <= y1 and y1 + height <= reader.height):
            raise ValueError(f"box {i} (slot {slot}, x {x1}, y {y1}, {height}x{width}) is outside "
                             f"the image ({reader.height}x{reader.width}) or the output")
        last = (((reader.planes - 1) * reader.height + y1 + height - 1) * reader.width
                + x1 + width) * size
        if last > reader.src.shape[0] - reader.data_offset:
            raise ValueError("cutout outside the image or the buffer")
    if reader.mode != 2:
        stream = nboxes * slot_bytes >= _STREAM_MIN or _live_bytes >= _STREAM_MIN
        with nogil:
            _batch_raw(reader, boxes, height, width, d, slot_bytes, stream)
    else:
        with nogil:
            for i in range(nboxes):
                rc = reader._decode_box(d + boxes[i, 0] * slot_bytes, slot_bytes, boxes[i, 1],
                                        boxes[i, 2], width, height, False)
                if rc != 0:
                    break
        if rc != 0:
            raise ValueError("cutout outside the image or the buffer")
    if reader.touch_limit > 0:
        reader._touch(nboxes, height, width)


cdef object _pooled_array(_Pool* pool, tuple shape, dtype):
    cdef cnp.npy_intp dims[MAX_NDIM]
    cdef int k, n = len(shape)
    cdef Py_ssize_t nbytes
    dt = np.dtype(dtype)
    if n > MAX_NDIM or dt.kind not in "biufc" or not dt.isnative:  # plain numbers only
        return np.empty(shape, dt)
    nbytes = dt.itemsize
    for k in range(n):
        dims[k] = shape[k]
        if dims[k] < 0:
            raise ValueError(f"negative dimension in {shape}")
        nbytes *= dims[k]
    if nbytes == 0 or nbytes < pool.min_block:
        return np.empty(shape, dt)
    return _owned_by(n, dims, dt.num, _pooled(pool, nbytes))


def cutout_array(tuple shape, dtype):
    """An uninitialised C-contiguous array of ``shape`` and the (native, built-in) ``dtype``, on
    memory from the cutout pool: given back for reuse when the array dies, so a loop of batched
    calls that drops each result writes into memory already faulted in."""
    return _pooled_array(&_cutout_pool, shape, dtype)


def output_array(tuple shape, dtype):
    """`cutout_array` from the pool of whole-image outputs, from 1 MiB (a plain ``np.empty``
    below): up to 256 MiB of dropped ones are kept, so a loop of reads of one size writes into
    pages faulted in once, not fresh zeroed ones; a size the pool does not hold frees them."""
    return _pooled_array(&_output_pool, shape, dtype)


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_release_in_child)

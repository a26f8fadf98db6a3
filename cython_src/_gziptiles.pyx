# cython: language_level=3
"""GZIP_1 / GZIP_2 tiles of the tiled image compression convention, many per call.

One GIL-free loop inflates each tile, then byte-swaps it to native order — for GZIP_2
un-shuffling the byte planes in the same pass — straight into the caller's flat output. No
Python object is made per tile.

A tile is a whole stream in memory whose inflated size is known, the case libdeflate is built
for: when the build found it (``setup.py`` looks for ``libdeflate.h``), tiles inflate through
it, which is faster than zlib (docs/benchmarks.md, "Measured choices in the code"). zlib's C API
(a stream reset per tile, not rebuilt) is the fallback, and has the last word on any tile
libdeflate refuses, so both give the same verdicts. `load_libdeflate` switches at run time to
another copy of libdeflate's stable ABI (torchfits offers it the one the ``deflate`` package
ships, a newer release that inflates faster than the system's).
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from _tilestatus cimport TILE_OK, TILE_MISMATCH, TILE_STOPPED, tile_skipped
from libc.stdlib cimport free, malloc
from libc.string cimport memset

cimport numpy as cnp

cnp.import_array()

cdef extern from "zlib.h" nogil:
    ctypedef struct z_stream:
        unsigned char* next_in
        unsigned int avail_in
        unsigned long total_in
        unsigned char* next_out
        unsigned int avail_out
        unsigned long total_out
    int inflateInit2(z_stream* strm, int window_bits)
    int inflateReset(z_stream* strm)
    int inflate(z_stream* strm, int flush)
    int inflateEnd(z_stream* strm)
    const char* zlibVersion()
    int Z_OK
    int Z_STREAM_END
    int Z_FINISH

cdef extern from *:
    """
    /* libdeflate's one-call API through pointers: the build-linked library by default, or
       another copy of the same stable ABI that load_libdeflate() found at run time (a newer
       release inflates faster). */
    typedef void *(*tf_ld_alloc_fn)(void);
    typedef void (*tf_ld_free_fn)(void *);
    typedef int (*tf_ld_dec_fn)(void *, const void *, size_t, void *, size_t, size_t *, size_t *);
    typedef struct { tf_ld_alloc_fn alloc; tf_ld_free_fn free; tf_ld_dec_fn gzip, zlib; } tf_ld_api;
    #ifdef TF_HAVE_LIBDEFLATE
    #include <libdeflate.h>
    #define TF_LD_FN(T, f) ((T)(void (*)(void))(f))
    static tf_ld_api tf_ld_cur = {
        TF_LD_FN(tf_ld_alloc_fn, libdeflate_alloc_decompressor),
        TF_LD_FN(tf_ld_free_fn, libdeflate_free_decompressor),
        TF_LD_FN(tf_ld_dec_fn, libdeflate_gzip_decompress_ex),
        TF_LD_FN(tf_ld_dec_fn, libdeflate_zlib_decompress_ex)};
    static const char *tf_ld_version(void) { return LIBDEFLATE_VERSION_STRING; }
    #else
    static tf_ld_api tf_ld_cur = {NULL, NULL, NULL, NULL};
    static const char *tf_ld_version(void) { return NULL; }
    #endif
    /* A decode call copies the table (with the GIL held, as tf_ld_load writes it) and uses its
       copy throughout, so a switch never pairs one library's decompressor with another's. */
    static tf_ld_api tf_ld_snapshot(void) { return tf_ld_cur; }
    static void *tf_ld_alloc(const tf_ld_api *api) { return api->alloc ? api->alloc() : NULL; }
    static void tf_ld_free(const tf_ld_api *api, void *d) { if (d) api->free(d); }
    /* 0 when the gzip- or zlib-framed stream inflates to exactly `want` bytes (0 is
       LIBDEFLATE_SUCCESS). Bytes after the stream are ignored, as zlib ignores them. */
    static int tf_ld_inflate(const tf_ld_api *api, void *d, const uint8_t *src, size_t n,
                             uint8_t *dst, size_t want) {
        size_t used = 0, got = 0;
        int r;
        if (n >= 2 && src[0] == 0x1f && src[1] == 0x8b)
            r = api->gzip(d, src, n, dst, want, &used, &got);
        else
            r = api->zlib(d, src, n, dst, want, &used, &got);
        return (r == 0 && got == want) ? 0 : 1;
    }
    #if defined(__unix__) || defined(__APPLE__)
    #include <dlfcn.h>
    #include <string.h>
    /* Switch to the libdeflate in the shared library at `path`: 0 when it has the four entry
       points and inflates a known stream right; 1 (nothing changed) otherwise. RTLD_LOCAL: its
       symbols do not leak into the process's namespace. */
    static int tf_ld_load(const char *path) {
        static const uint8_t probe[] = {  /* zlib stream of "torchfits" */
            0x78, 0x9c, 0x2b, 0xc9, 0x2f, 0x4a, 0xce, 0x48, 0xcb, 0x2c, 0x29, 0x06, 0x00,
            0x13, 0x3b, 0x03, 0xd7};
        uint8_t got[9];
        size_t used = 0, n = 0;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        tf_ld_alloc_fn a; tf_ld_free_fn f; tf_ld_dec_fn g, z;
        void *d;
        int r;
        if (h == NULL) return 1;
        a = (tf_ld_alloc_fn)dlsym(h, "libdeflate_alloc_decompressor");
        f = (tf_ld_free_fn)dlsym(h, "libdeflate_free_decompressor");
        g = (tf_ld_dec_fn)dlsym(h, "libdeflate_gzip_decompress_ex");
        z = (tf_ld_dec_fn)dlsym(h, "libdeflate_zlib_decompress_ex");
        if (!a || !f || !g || !z || (d = a()) == NULL) { dlclose(h); return 1; }
        r = z(d, probe, sizeof probe, got, sizeof got, &used, &n);
        f(d);
        if (r != 0 || n != sizeof got || memcmp(got, "torchfits", sizeof got) != 0) {
            dlclose(h);
            return 1;
        }
        tf_ld_cur.alloc = a; tf_ld_cur.free = f; tf_ld_cur.gzip = g; tf_ld_cur.zlib = z;
        return 0;  /* the handle stays open for the life of the process */
    }
    #else
    static int tf_ld_load(const char *path) { (void)path; return 1; }
    #endif
    """
    ctypedef struct tf_ld_api:
        void* alloc
    tf_ld_api tf_ld_snapshot()
    void* tf_ld_alloc(const tf_ld_api* api) nogil
    void tf_ld_free(const tf_ld_api* api, void* d) nogil
    int tf_ld_inflate(const tf_ld_api* api, void* d, const uint8_t* src, size_t n, uint8_t* dst,
                      size_t want) nogil
    const char* tf_ld_version()
    int tf_ld_load(const char* path)

cdef extern from "_swap.h" nogil:
    void tf_swap_inplace16(uint8_t* d, size_t n, uint16_t flip)
    void tf_swap_inplace32(uint8_t* d, size_t n, uint32_t flip)
    void tf_swap_inplace64(uint8_t* d, size_t n, uint64_t flip)
    void tf_stream_fence()

cdef extern from "_unshuffle.h" nogil:
    void tf_unshuffle_swap(const uint8_t* s, uint8_t* d, size_t n, int size, int stream)

# Per-tile status of decode_many (cython_src/_tilestatus.pxd).
OK = TILE_OK
MISMATCH = TILE_MISMATCH
STOPPED = TILE_STOPPED


def zlib_version() -> str:
    """The version of the zlib library the kernel is linked with."""
    return zlibVersion().decode()


cdef bint _libdeflate_on = True
cdef object _loaded = None  # (path, label) of the libdeflate load_libdeflate switched to


def libdeflate_version():
    """The version of the libdeflate that inflates tiles: the build's, the ``label`` given to
    `load_libdeflate` after a load, or None (zlib only)."""
    if _loaded is not None:
        return _loaded[1]
    v = tf_ld_version()
    return None if v == NULL else v.decode()


def load_libdeflate(path, label) -> bool:
    """Inflate through the libdeflate in the shared library ``path`` from now on (``label``
    names it in `inflater`); returns whether it did. Nothing changes when the file does not
    load, lacks one of the entry points, or inflates a known stream wrong. Call it with no
    decode running (torchfits does once, at the first GZIP full read)."""
    global _loaded
    if tf_ld_load(str(path).encode()) != 0:
        return False
    _loaded = (str(path), str(label))
    return True


def use_libdeflate(bint enabled) -> bool:
    """Inflate through libdeflate when the build has it (the default) or through zlib only;
    returns the previous setting. Tests and benchmarks compare the two."""
    global _libdeflate_on
    previous = _libdeflate_on
    _libdeflate_on = enabled
    return previous


def inflater() -> str:
    """The library that inflates tiles now: ``"libdeflate <version>"`` or ``"zlib <version>"``."""
    v = libdeflate_version()
    return f"libdeflate {v}" if v is not None and _libdeflate_on else f"zlib {zlib_version()}"


cdef int _inflate_exact(z_stream* zs, const tf_ld_api* api, void* ld, const uint8_t* src, int64_t n,
                        uint8_t* dst, int64_t want) noexcept nogil:
    """Inflate one gzip- or zlib-framed stream into exactly ``want`` bytes; 0 on success.
    libdeflate first when ``ld`` is one; zlib decides every tile it refuses."""
    cdef int rc
    if ld != NULL and tf_ld_inflate(api, ld, src, <size_t>n, dst, <size_t>want) == 0:
        return 0
    if n > <int64_t>0xFFFFFFFF or want > <int64_t>0xFFFFFFFF:
        return 1
    if inflateReset(zs) != Z_OK:
        return 1
    zs.next_in = <unsigned char*>src
    zs.avail_in = <unsigned int>n
    zs.next_out = dst
    zs.avail_out = <unsigned int>want
    rc = inflate(zs, Z_FINISH)
    if rc == Z_STREAM_END:
        return 0 if zs.total_out == <unsigned long>want else 1
    if rc < 0 or zs.avail_out != 0:
        return 1  # corrupt or short
    # The output is full but the stream has not ended: it would inflate to more bytes.
    return 1


def decode_many(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] sizes,
                const int64_t[::1] npix, const int64_t[::1] dest, cnp.ndarray out, int itemsize,
                bint shuffled, uint8_t[::1] status, const uint8_t[::1] stop, bint stream=False) -> int:
    """Decode tiles into the flat native-order array ``out`` in one GIL-free loop.

    Tile i is ``sizes[i]`` bytes at ``offsets[i]`` of ``buf``, inflates to ``npix[i]`` big-endian
    elements of ``itemsize`` bytes (byte-shuffled when ``shuffled``: GZIP_2), and is written at
    element ``dest[i]`` of ``out``. ``status[i]`` becomes OK, MISMATCH or STOPPED; the loop
    stops early once ``stop[0]`` is non-zero (another chunk failed). Returns the number of tiles
    not OK. ``stream``: shuffled tiles are written with streaming stores (x86-64; for an output
    far larger than the caches whose pages are faulted in already).
    """
    cdef Py_ssize_t n = offsets.shape[0], i, blen = buf.shape[0]
    cdef Py_ssize_t olen = out.size
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out)
    cdef const uint8_t* b = &buf[0] if blen else NULL
    cdef int64_t want, largest = 0, bad = 0
    cdef uint8_t* scratch = NULL
    cdef uint8_t* target
    cdef z_stream zs
    cdef void* ld = NULL
    cdef tf_ld_api api = tf_ld_snapshot()
    if out.itemsize != itemsize or itemsize not in (1, 2, 4, 8) or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError("out must be a writable C-contiguous array of itemsize 1, 2, 4 or 8")
    if sizes.shape[0] != n or npix.shape[0] != n or dest.shape[0] != n or status.shape[0] != n:
        raise ValueError("offsets, sizes, npix, dest and status must have the same length")
    if stop.shape[0] < 1:
        raise ValueError("stop must hold one byte")
    for i in range(n):
        if npix[i] > largest:
            largest = npix[i]
    if shuffled and itemsize > 1 and largest > 0:
        scratch = <uint8_t*>malloc(largest * itemsize)
        if scratch == NULL:
            raise MemoryError()
    memset(&zs, 0, sizeof(zs))
    if inflateInit2(&zs, 47) != Z_OK:  # 32 + 15: gzip or zlib framing, 32 KiB window
        free(scratch)
        raise MemoryError("zlib could not start an inflate stream")
    if _libdeflate_on:
        ld = tf_ld_alloc(&api)  # one per call: a decompressor is not shared between threads
    try:
        with nogil:
            for i in range(n):
                if tile_skipped(stop, status, i, offsets[i], sizes[i], blen, dest[i], npix[i], olen):
                    bad += 1
                    continue
                want = npix[i] * itemsize
                if want == 0:
                    status[i] = TILE_OK
                    continue
                target = o + dest[i] * itemsize
                if scratch != NULL:
                    if _inflate_exact(&zs, &api, ld, b + offsets[i], sizes[i], scratch, want):
                        status[i] = TILE_MISMATCH
                        bad += 1
                        continue
                    tf_unshuffle_swap(scratch, target, npix[i], itemsize, stream)
                else:
                    if _inflate_exact(&zs, &api, ld, b + offsets[i], sizes[i], target, want):
                        status[i] = TILE_MISMATCH
                        bad += 1
                        continue
                    if itemsize == 2:
                        tf_swap_inplace16(target, npix[i], 0)
                    elif itemsize == 4:
                        tf_swap_inplace32(target, npix[i], 0)
                    elif itemsize == 8:
                        tf_swap_inplace64(target, npix[i], 0)
                status[i] = TILE_OK
            if stream:
                tf_stream_fence()
    finally:
        inflateEnd(&zs)
        tf_ld_free(&api, ld)
        free(scratch)
    return bad

/* GZIP_2's un-shuffle: a tile's byte planes gathered back into native elements, in one pass
 * (cython_src/_gziptiles.pyx calls it per tile, from the inflated tile still in cache). */
#ifndef TORCHFITS_UNSHUFFLE_H
#define TORCHFITS_UNSHUFFLE_H
#include <stdint.h>
#include <stddef.h>
#include "_portable.h"
#define TF_GZ_CLONES TF_TARGET_CLONES_AVX2
#if (defined(__SSE2__) || defined(_M_X64)) && !defined(TF_PORTABLE_GENERIC)
#include <emmintrin.h>
#define TF_GZ_SSE2 1
#endif
/* GZIP_2 stores byte plane j (the j-th most significant byte of every element) after plane
   j - 1; gather elements [a, b) of the planes back into native-order elements. */
static void tf_unshuffle_range(const uint8_t *s, uint8_t *d, size_t n, int size, size_t a,
                               size_t b) {
    size_t i;
    if (size == 2) {
        for (i = a; i < b; i++) ((uint16_t *)d)[i] = (uint16_t)((s[i] << 8) | s[n + i]);
    } else if (size == 4) {
        for (i = a; i < b; i++)
            ((uint32_t *)d)[i] = ((uint32_t)s[i] << 24) | ((uint32_t)s[n + i] << 16)
                                 | ((uint32_t)s[2 * n + i] << 8) | s[3 * n + i];
    } else if (size == 8) {
        for (i = a; i < b; i++) {
            uint64_t v = 0;
            for (int j = 0; j < 8; j++) v = (v << 8) | s[(size_t)j * n + i];
            ((uint64_t *)d)[i] = v;
        }
    } else {
        for (i = a; i < b; i++) d[i] = s[i];
    }
}
#ifdef TF_GZ_SSE2
#define TF_LD(p) _mm_loadu_si128((const __m128i *)(p))
/* stream: non-temporal stores (aligned, so the elements before the first 16-byte boundary
   go one at a time); the caller fences after the last tile. */
#define TF_PUT(p, v) do { if (stream) _mm_stream_si128((__m128i *)(p), (v)); \
                          else _mm_storeu_si128((__m128i *)(p), (v)); } while (0)
#endif
/* All n elements of a tile. On x86-64 (SSE2 is baseline there, and x86 is little-endian)
   16 elements a step: interleaving the planes from the least significant up is a byte
   transpose, a few unpacks per 16 elements where the compiler's loop widened and shifted
   each byte; the scalar loop finishes the ends and is the whole decoder elsewhere.
   stream: write with streaming stores (for outputs much larger than the caches and already
   faulted in: no output line is read from memory before it is written). */
TF_GZ_CLONES static void tf_unshuffle_swap(const uint8_t *s, uint8_t *d, size_t n, int size,
                                            int stream) {
    size_t i = 0;
#ifndef TF_X86_DISPATCH
    stream = 0;  /* the fence after the last tile (_swap.h's tf_stream_fence) is there only */
#endif
#ifdef TF_GZ_SSE2
    if (size == 2 || size == 4 || size == 8) {
        size_t mis = (uintptr_t)d & 15;
        if (stream && mis % size != 0)
            stream = 0;
        if (stream) {
            i = ((16 - mis) & 15) / size;
            if (i > n) i = n;
            tf_unshuffle_range(s, d, n, size, 0, i);
        }
    }
    if (size == 2) {
        const uint8_t *p0 = s, *p1 = s + n;
        uint16_t *o = (uint16_t *)d;
        for (; i + 16 <= n; i += 16) {
            __m128i b0 = TF_LD(p0 + i), b1 = TF_LD(p1 + i);
            TF_PUT(o + i, _mm_unpacklo_epi8(b1, b0));
            TF_PUT(o + i + 8, _mm_unpackhi_epi8(b1, b0));
        }
    } else if (size == 4) {
        const uint8_t *p0 = s, *p1 = s + n, *p2 = s + 2 * n, *p3 = s + 3 * n;
        uint32_t *o = (uint32_t *)d;
        for (; i + 16 <= n; i += 16) {
            __m128i b0 = TF_LD(p0 + i), b1 = TF_LD(p1 + i), b2 = TF_LD(p2 + i), b3 = TF_LD(p3 + i);
            __m128i l32 = _mm_unpacklo_epi8(b3, b2), h32 = _mm_unpackhi_epi8(b3, b2);
            __m128i l10 = _mm_unpacklo_epi8(b1, b0), h10 = _mm_unpackhi_epi8(b1, b0);
            TF_PUT(o + i, _mm_unpacklo_epi16(l32, l10));
            TF_PUT(o + i + 4, _mm_unpackhi_epi16(l32, l10));
            TF_PUT(o + i + 8, _mm_unpacklo_epi16(h32, h10));
            TF_PUT(o + i + 12, _mm_unpackhi_epi16(h32, h10));
        }
    } else if (size == 8) {
        uint64_t *o = (uint64_t *)d;
        for (; i + 16 <= n; i += 16) {
            __m128i a[8], b[8], c[8];
            int j;
            /* a: byte pairs (planes 7|6, 5|4, 3|2, 1|0), b: byte quads (7..4, 3..0) */
            for (j = 0; j < 4; j++) {
                __m128i hi = TF_LD(s + (size_t)(7 - 2 * j) * n + i);
                __m128i lo = TF_LD(s + (size_t)(6 - 2 * j) * n + i);
                a[2 * j] = _mm_unpacklo_epi8(hi, lo);
                a[2 * j + 1] = _mm_unpackhi_epi8(hi, lo);
            }
            for (j = 0; j < 2; j++) {
                b[4 * j] = _mm_unpacklo_epi16(a[4 * j], a[4 * j + 2]);
                b[4 * j + 1] = _mm_unpackhi_epi16(a[4 * j], a[4 * j + 2]);
                b[4 * j + 2] = _mm_unpacklo_epi16(a[4 * j + 1], a[4 * j + 3]);
                b[4 * j + 3] = _mm_unpackhi_epi16(a[4 * j + 1], a[4 * j + 3]);
            }
            for (j = 0; j < 4; j++) {
                c[2 * j] = _mm_unpacklo_epi32(b[j], b[4 + j]);
                c[2 * j + 1] = _mm_unpackhi_epi32(b[j], b[4 + j]);
            }
            for (j = 0; j < 8; j++) TF_PUT(o + i + 2 * j, c[j]);
        }
    }
#else
    (void)stream;
#endif
    tf_unshuffle_range(s, d, n, size, i, n);
}
#endif

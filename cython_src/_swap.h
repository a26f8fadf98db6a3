/* Byte-swap kernels (big-endian FITS → native), compiled once per instruction set.
 * On x86-64 Linux GCC builds an AVX2 clone (vpshufb) next to the baseline one and picks at load
 * time; elsewhere the plain loops are used (_portable.h). `flip` XORs the sign bit for offset-binary integers. */
#ifndef TORCHFITS_SWAP_H
#define TORCHFITS_SWAP_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "_portable.h"

#define TF_CLONES TF_TARGET_CLONES_AVX2

TF_CLONES static void tf_swap_copy16(const uint8_t *s, uint8_t *d, size_t n, uint16_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v; memcpy(&v, s + 2 * i, 2); v = (uint16_t)(TF_BSWAP16(v) ^ flip); memcpy(d + 2 * i, &v, 2);
    }
}
TF_CLONES static void tf_swap_copy32(const uint8_t *s, uint8_t *d, size_t n, uint32_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint32_t v; memcpy(&v, s + 4 * i, 4); v = TF_BSWAP32(v) ^ flip; memcpy(d + 4 * i, &v, 4);
    }
}
TF_CLONES static void tf_swap_copy64(const uint8_t *s, uint8_t *d, size_t n, uint64_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v; memcpy(&v, s + 8 * i, 8); v = TF_BSWAP64(v) ^ flip; memcpy(d + 8 * i, &v, 8);
    }
}
TF_CLONES static void tf_swap_inplace16(uint8_t *d, size_t n, uint16_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v; memcpy(&v, d + 2 * i, 2); v = (uint16_t)(TF_BSWAP16(v) ^ flip); memcpy(d + 2 * i, &v, 2);
    }
}
TF_CLONES static void tf_swap_inplace32(uint8_t *d, size_t n, uint32_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint32_t v; memcpy(&v, d + 4 * i, 4); v = TF_BSWAP32(v) ^ flip; memcpy(d + 4 * i, &v, 4);
    }
}
TF_CLONES static void tf_swap_inplace64(uint8_t *d, size_t n, uint64_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v; memcpy(&v, d + 8 * i, 8); v = TF_BSWAP64(v) ^ flip; memcpy(d + 8 * i, &v, 8);
    }
}
/* Streaming (non-temporal) swap-copies for outputs larger than the caches: the stores bypass
 * the caches, so no output line is read from memory before it is written (a plain store first
 * reads the line it fills). Whole 8-byte words, 8-byte aligned destination; returns 0 when
 * it cannot (another CPU, an unaligned run): the caller copies with the plain kernels then.
 * Call tf_stream_fence() after the last one. */
#ifdef TF_X86_DISPATCH
#include <immintrin.h>
/* 32 bytes at a time (vpshufb, vmovntdq): a 32-byte aligned destination, whole 32-byte words. */
TF_TARGET("avx2") static int tf_swap_copy_nt_avx2(const uint8_t *s, uint8_t *d,
                                                    size_t nbytes, int size, uint64_t f) {
    __m256i mask, v, fv = _mm256_set1_epi64x((long long)f);
    if (size == 2)
        mask = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14,
                                1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    else if (size == 4)
        mask = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                                3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    else
        mask = _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8,
                                7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
    for (size_t i = 0; i < nbytes; i += 32) {
        v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(s + i)), mask);
        _mm256_stream_si256((__m256i *)(d + i), _mm256_xor_si256(v, fv));
    }
    return 1;
}
static inline int tf_swap_copy_nt(const uint8_t *s, uint8_t *d, size_t nbytes, int size, uint64_t flip) {
    uint64_t v, f;
    if (size < 2 || (nbytes & 7) != 0 || ((uintptr_t)d & 7) != 0) return 0;
    f = size == 2 ? 0x0001000100010001ULL * (flip & 0xFFFF)
        : size == 4 ? 0x0000000100000001ULL * (flip & 0xFFFFFFFFULL) : flip;
    if (TF_CPU_AVX2() && (nbytes & 31) == 0 && ((uintptr_t)d & 31) == 0)
        return tf_swap_copy_nt_avx2(s, d, nbytes, size, f);
    for (size_t i = 0; i < nbytes; i += 8) {
        memcpy(&v, s + i, 8);
        if (size == 2)
            v = ((v & 0x00FF00FF00FF00FFULL) << 8) | ((v >> 8) & 0x00FF00FF00FF00FFULL);
        else if (size == 4)
            v = TF_BSWAP64(v), v = (v << 32) | (v >> 32);
        else
            v = TF_BSWAP64(v);
        _mm_stream_si64((long long *)(d + i), (long long)(v ^ f));
    }
    return 1;
}
static inline void tf_stream_fence(void) { _mm_sfence(); }
#else
static inline int tf_swap_copy_nt(const uint8_t *s, uint8_t *d, size_t nbytes, int size, uint64_t flip) {
    (void)s; (void)d; (void)nbytes; (void)size; (void)flip;
    return 0;
}
static inline void tf_stream_fence(void) {}
#endif
#endif

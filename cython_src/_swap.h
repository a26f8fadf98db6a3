/* Byte-swap kernels (big-endian FITS → native), compiled once per instruction set.
 * On x86-64 GCC builds an AVX2 clone (vpshufb) next to the baseline one and picks at load time;
 * elsewhere the plain loops are used. `flip` XORs the sign bit for offset-binary integers. */
#ifndef TORCHFITS_SWAP_H
#define TORCHFITS_SWAP_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define TF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TF_CLONES
#endif

TF_CLONES static void tf_swap_copy16(const uint8_t *s, uint8_t *d, size_t n, uint16_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v; memcpy(&v, s + 2 * i, 2); v = (uint16_t)(__builtin_bswap16(v) ^ flip); memcpy(d + 2 * i, &v, 2);
    }
}
TF_CLONES static void tf_swap_copy32(const uint8_t *s, uint8_t *d, size_t n, uint32_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint32_t v; memcpy(&v, s + 4 * i, 4); v = __builtin_bswap32(v) ^ flip; memcpy(d + 4 * i, &v, 4);
    }
}
TF_CLONES static void tf_swap_copy64(const uint8_t *s, uint8_t *d, size_t n, uint64_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v; memcpy(&v, s + 8 * i, 8); v = __builtin_bswap64(v) ^ flip; memcpy(d + 8 * i, &v, 8);
    }
}
TF_CLONES static void tf_swap_inplace16(uint8_t *d, size_t n, uint16_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v; memcpy(&v, d + 2 * i, 2); v = (uint16_t)(__builtin_bswap16(v) ^ flip); memcpy(d + 2 * i, &v, 2);
    }
}
TF_CLONES static void tf_swap_inplace32(uint8_t *d, size_t n, uint32_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint32_t v; memcpy(&v, d + 4 * i, 4); v = __builtin_bswap32(v) ^ flip; memcpy(d + 4 * i, &v, 4);
    }
}
TF_CLONES static void tf_swap_inplace64(uint8_t *d, size_t n, uint64_t flip) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v; memcpy(&v, d + 8 * i, 8); v = __builtin_bswap64(v) ^ flip; memcpy(d + 8 * i, &v, 8);
    }
}
#endif

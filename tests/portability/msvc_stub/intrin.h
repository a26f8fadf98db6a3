/* Stand-ins for the MSVC intrinsics cython_src/_portable.h uses, with MSVC's semantics
 * (unsigned long is 32 bits there), written as plain loops so they are an independent oracle:
 * tests/portability/test_portable.py builds _portable.h's MSVC branch against this header with the
 * host's C compiler and runs it. Not MSVC's header. */
#ifndef TF_MSVC_STUB_INTRIN_H
#define TF_MSVC_STUB_INTRIN_H
#include <stdint.h>

static __inline unsigned short _byteswap_ushort(unsigned short v) {
    return (unsigned short)(((v & 0xFFu) << 8) | ((v >> 8) & 0xFFu));
}
static __inline unsigned long _byteswap_ulong(unsigned long v) {
    uint32_t x = (uint32_t)v, r = 0;
    for (int k = 0; k < 4; k++) r = (r << 8) | ((x >> (8 * k)) & 0xFFu);
    return r;
}
static __inline unsigned long long _byteswap_uint64(unsigned long long v) {
    unsigned long long r = 0;
    for (int k = 0; k < 8; k++) r = (r << 8) | ((v >> (8 * k)) & 0xFFu);
    return r;
}
static __inline unsigned char _BitScanReverse(unsigned long *index, unsigned long mask) {
    uint32_t m = (uint32_t)mask;
    if (!m) return 0;
    for (int k = 31; k >= 0; k--) if ((m >> k) & 1u) { *index = (unsigned long)k; break; }
    return 1;
}
static __inline unsigned char _BitScanForward(unsigned long *index, unsigned long mask) {
    uint32_t m = (uint32_t)mask;
    if (!m) return 0;
    for (int k = 0; k < 32; k++) if ((m >> k) & 1u) { *index = (unsigned long)k; break; }
    return 1;
}
#if defined(_M_X64) || defined(_M_ARM64) || defined(_M_AMD64)
static __inline unsigned char _BitScanReverse64(unsigned long *index, unsigned long long mask) {
    if (!mask) return 0;
    for (int k = 63; k >= 0; k--) if ((mask >> k) & 1u) { *index = (unsigned long)k; break; }
    return 1;
}
static __inline unsigned char _BitScanForward64(unsigned long *index, unsigned long long mask) {
    if (!mask) return 0;
    for (int k = 0; k < 64; k++) if ((mask >> k) & 1u) { *index = (unsigned long)k; break; }
    return 1;
}
#endif
#if defined(_M_X64) || defined(_M_IX86) || defined(_M_AMD64)
#define _MM_HINT_T0 1
static __inline void _mm_prefetch(const char *p, int hint) { (void)p; (void)hint; }
static __inline void _mm_mfence(void) {}
#else
#define _ARM64_BARRIER_SY 0xF
static __inline void __dmb(unsigned int type) { (void)type; }
#endif
#endif

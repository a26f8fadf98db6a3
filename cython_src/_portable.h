/* Compiler intrinsics of the kernels behind one set of macros, so they build with GCC/Clang,
 * MSVC and any other C99 compiler.
 *
 *   TF_BSWAP16/32/64(x)   byte swap of a uint16_t/uint32_t/uint64_t
 *   TF_CLZ32/64(x)        leading zero bits of a nonzero 32/64-bit value (undefined for 0)
 *   TF_CTZ32/64(x)        trailing zero bits of a nonzero 32/64-bit value (undefined for 0)
 *   TF_LIKELY/UNLIKELY(c) branch hints
 *   TF_PREFETCH(p)        read prefetch into all cache levels (a no-op where there is none)
 *   TF_MEMCPY             memcpy the compiler may expand inline
 *   TF_FENCE()            full memory barrier
 *   TF_X86_DISPATCH       defined where the x86-64 target attributes and run-time CPU checks
 *                         below exist (GCC/Clang on x86-64); elsewhere only baseline loops build:
 *   TF_TARGET(s)          a function compiled for instruction set `s` ("avx2", "lzcnt,bmi2")
 *   TF_TARGET_CLONES_AVX2 a function compiled twice (AVX2 and baseline), picked at load time
 *                         (GCC on x86-64 Linux only, where ifuncs exist); empty elsewhere
 *   TF_CPU_AVX2()         whether this CPU runs AVX2 (0 without TF_X86_DISPATCH)
 *   TF_CPU_LZCNT_BMI2()   whether this CPU runs LZCNT and BMI2 (0 without TF_X86_DISPATCH)
 *
 * One branch is chosen: TF_PORTABLE_GENERIC (plain C; define it to force that branch under any
 * compiler, as the tests do), TF_PORTABLE_MSVC (MSVC and clang-cl: <intrin.h>, no target
 * attributes; define it to force that branch), TF_PORTABLE_GNU (GCC and Clang: the builtins,
 * unchanged code). Exactly one of the three is defined after this header. */
#ifndef TORCHFITS_PORTABLE_H
#define TORCHFITS_PORTABLE_H
#include <stdint.h>
#include <string.h>

#if defined(TF_PORTABLE_GENERIC)
#undef TF_PORTABLE_MSVC
#undef TF_PORTABLE_GNU
#elif defined(TF_PORTABLE_MSVC)
#undef TF_PORTABLE_GNU
#elif defined(__GNUC__)
#define TF_PORTABLE_GNU 1
#elif defined(_MSC_VER)
#define TF_PORTABLE_MSVC 1
#else
#define TF_PORTABLE_GENERIC 1
#endif

/* ---- GCC and Clang: the builtins ---------------------------------------------------------- */
#if defined(TF_PORTABLE_GNU)
#define TF_BSWAP16(x) __builtin_bswap16(x)
#define TF_BSWAP32(x) __builtin_bswap32(x)
#define TF_BSWAP64(x) __builtin_bswap64(x)
#define TF_CLZ32(x) __builtin_clz(x)
#define TF_CLZ64(x) __builtin_clzll(x)
#define TF_CTZ32(x) __builtin_ctz(x)
#define TF_CTZ64(x) __builtin_ctzll(x)
#define TF_LIKELY(c) __builtin_expect(!!(c), 1)
#define TF_UNLIKELY(c) __builtin_expect(!!(c), 0)
#define TF_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#define TF_MEMCPY __builtin_memcpy
#define TF_FENCE() __sync_synchronize()
#if defined(__x86_64__)
#include <cpuid.h>
#define TF_X86_DISPATCH 1
#define TF_TARGET(s) __attribute__((target(s)))
#define TF_CPU_AVX2() __builtin_cpu_supports("avx2")
static inline int tf_port_cpu_lzcnt_bmi2(void) {
    unsigned int a, b, c, d;
    int lz = 0, bmi2 = 0;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) lz = (c >> 5) & 1;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) bmi2 = (b >> 8) & 1;
    return lz && bmi2;
}
#define TF_CPU_LZCNT_BMI2() tf_port_cpu_lzcnt_bmi2()
#if !defined(__clang__) && defined(__linux__)
#define TF_TARGET_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#endif
#endif

/* ---- MSVC (and clang-cl): <intrin.h> ------------------------------------------------------ */
#elif defined(TF_PORTABLE_MSVC)
#include <stdlib.h>
#include <intrin.h>
#define TF_BSWAP16(x) _byteswap_ushort(x)
#define TF_BSWAP32(x) _byteswap_ulong(x)
#define TF_BSWAP64(x) _byteswap_uint64(x)
static __inline int tf_port_clz32(uint32_t v) {
    unsigned long i = 0;
    _BitScanReverse(&i, v);
    return 31 - (int)i;
}
static __inline int tf_port_ctz32(uint32_t v) {
    unsigned long i = 0;
    _BitScanForward(&i, v);
    return (int)i;
}
#if defined(_M_X64) || defined(_M_ARM64) || defined(_M_AMD64)
static __inline int tf_port_clz64(uint64_t v) {
    unsigned long i = 0;
    _BitScanReverse64(&i, v);
    return 63 - (int)i;
}
static __inline int tf_port_ctz64(uint64_t v) {
    unsigned long i = 0;
    _BitScanForward64(&i, v);
    return (int)i;
}
#else  /* 32-bit targets: no 64-bit scans */
static __inline int tf_port_clz64(uint64_t v) {
    return (v >> 32) ? tf_port_clz32((uint32_t)(v >> 32)) : 32 + tf_port_clz32((uint32_t)v);
}
static __inline int tf_port_ctz64(uint64_t v) {
    return (uint32_t)v ? tf_port_ctz32((uint32_t)v) : 32 + tf_port_ctz32((uint32_t)(v >> 32));
}
#endif
#define TF_CLZ32(x) tf_port_clz32(x)
#define TF_CLZ64(x) tf_port_clz64(x)
#define TF_CTZ32(x) tf_port_ctz32(x)
#define TF_CTZ64(x) tf_port_ctz64(x)
#define TF_LIKELY(c) (c)
#define TF_UNLIKELY(c) (c)
#if defined(_M_X64) || defined(_M_IX86) || defined(_M_AMD64)
#define TF_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define TF_FENCE() _mm_mfence()
#else
#define TF_PREFETCH(p) ((void)(p))
#define TF_FENCE() __dmb(_ARM64_BARRIER_SY)
#endif
#define TF_MEMCPY memcpy

/* ---- anything else: plain C ----------------------------------------------------------------- */
#else
static inline uint16_t tf_port_bswap16(uint16_t v) { return (uint16_t)((v << 8) | (v >> 8)); }
static inline uint32_t tf_port_bswap32(uint32_t v) {
    return (v << 24) | ((v << 8) & 0x00FF0000u) | ((v >> 8) & 0x0000FF00u) | (v >> 24);
}
static inline uint64_t tf_port_bswap64(uint64_t v) {
    return ((uint64_t)tf_port_bswap32((uint32_t)v) << 32) | tf_port_bswap32((uint32_t)(v >> 32));
}
static inline int tf_port_clz64(uint64_t v) {
    int n = 0;
    if (!(v >> 32)) { n += 32; v <<= 32; }
    if (!(v >> 48)) { n += 16; v <<= 16; }
    if (!(v >> 56)) { n += 8; v <<= 8; }
    if (!(v >> 60)) { n += 4; v <<= 4; }
    if (!(v >> 62)) { n += 2; v <<= 2; }
    if (!(v >> 63)) { n += 1; }
    return n;
}
static inline int tf_port_ctz64(uint64_t v) {
    int n = 0;
    if (!(v & 0xFFFFFFFFu)) { n += 32; v >>= 32; }
    if (!(v & 0xFFFFu)) { n += 16; v >>= 16; }
    if (!(v & 0xFFu)) { n += 8; v >>= 8; }
    if (!(v & 0xFu)) { n += 4; v >>= 4; }
    if (!(v & 0x3u)) { n += 2; v >>= 2; }
    if (!(v & 0x1u)) { n += 1; }
    return n;
}
#define TF_BSWAP16(x) tf_port_bswap16(x)
#define TF_BSWAP32(x) tf_port_bswap32(x)
#define TF_BSWAP64(x) tf_port_bswap64(x)
#define TF_CLZ32(x) (tf_port_clz64((uint64_t)(uint32_t)(x)) - 32)
#define TF_CLZ64(x) tf_port_clz64(x)
#define TF_CTZ32(x) tf_port_ctz64((uint64_t)(uint32_t)(x))
#define TF_CTZ64(x) tf_port_ctz64(x)
#define TF_LIKELY(c) (c)
#define TF_UNLIKELY(c) (c)
#define TF_PREFETCH(p) ((void)(p))
#define TF_MEMCPY memcpy
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#define TF_FENCE() atomic_thread_fence(memory_order_seq_cst)
#else
#define TF_FENCE() ((void)0)  /* a pre-C11 compiler: none portable to ask for */
#endif
#endif

/* ---- x86 dispatch: none outside the GNU branch on x86-64 ---------------------------------- */
#ifndef TF_X86_DISPATCH
#define TF_TARGET(s)
#define TF_CPU_AVX2() 0
#define TF_CPU_LZCNT_BMI2() 0
#endif
#ifndef TF_TARGET_CLONES_AVX2
#define TF_TARGET_CLONES_AVX2
#endif

#endif

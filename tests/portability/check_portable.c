/* Prints every macro of cython_src/_portable.h (and the swap kernels of _swap.h) on the inputs of
 * values.h, one "name input result" line each, for tests/portability/test_portable.py to compare with
 * values computed in Python. Built once per branch of _portable.h. */
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
#include "_swap.h"
#include "values.h"  /* TF_VALUES: uint64_t inputs; written by the test */

#if defined(TF_PORTABLE_GNU) + defined(TF_PORTABLE_MSVC) + defined(TF_PORTABLE_GENERIC) != 1
#error "exactly one branch of _portable.h must be selected"
#endif
#if defined(TF_PORTABLE_GNU)
#define BRANCH "gnu"
#elif defined(TF_PORTABLE_MSVC)
#define BRANCH "msvc"
#else
#define BRANCH "generic"
#endif
#ifdef TF_X86_DISPATCH
#define DISPATCH 1
/* A function built for AVX2 must compile; called only where the CPU runs it. */
TF_TARGET("avx2") static int tf_check_target(int x) { return x + 1; }
#else
#define DISPATCH 0
static int tf_check_target(int x) { return x + 1; }
#endif

/* A clone-dispatched function must compile in every branch. */
TF_TARGET_CLONES_AVX2 static uint64_t tf_check_clones(uint64_t x) { return x ^ 1; }

static const uint64_t values[] = {TF_VALUES};

int main(void) {
    size_t i, n = sizeof values / sizeof values[0];
    uint8_t src[24], dst[24];
    uint64_t nt[4] = {0};
    uint64_t word;
    volatile int cpu_avx2 = TF_CPU_AVX2(), cpu_lz = TF_CPU_LZCNT_BMI2();
    printf("branch %s %d\n", BRANCH, DISPATCH);
    printf("cpu %d %d\n", cpu_avx2 ? 1 : 0, cpu_lz ? 1 : 0);
    printf("target %d\n", (DISPATCH && !cpu_avx2) ? 2 : tf_check_target(1));
    printf("clones %" PRIu64 "\n", tf_check_clones(2));
    for (i = 0; i < n; i++) {
        uint64_t v = values[i];
        uint32_t v32 = (uint32_t)v;
        uint16_t v16 = (uint16_t)v;
        printf("bswap16 %" PRIu64 " %u\n", v, (unsigned)(uint16_t)TF_BSWAP16(v16));
        printf("bswap32 %" PRIu64 " %" PRIu32 "\n", v, (uint32_t)TF_BSWAP32(v32));
        printf("bswap64 %" PRIu64 " %" PRIu64 "\n", v, (uint64_t)TF_BSWAP64(v));
        printf("likely %" PRIu64 " %d\n", v, TF_LIKELY(v != 0) ? 1 : 0);
        printf("unlikely %" PRIu64 " %d\n", v, TF_UNLIKELY(v == 0) ? 1 : 0);
        if (v) {
            printf("clz64 %" PRIu64 " %d\n", v, (int)TF_CLZ64(v));
            printf("ctz64 %" PRIu64 " %d\n", v, (int)TF_CTZ64(v));
        }
        if (v32) {
            printf("clz32 %" PRIu64 " %d\n", v, (int)TF_CLZ32(v32));
            printf("ctz32 %" PRIu64 " %d\n", v, (int)TF_CTZ32(v32));
        }
        TF_PREFETCH(&values[i]);
        TF_MEMCPY(&word, &values[i], 8);
        printf("memcpy %" PRIu64 " %" PRIu64 "\n", v, word);
        /* The swap kernels: 24 bytes (3 words) from v, big-endian in, native out, sign bit
           flipped for the 16- and 32-bit ones. */
        for (int k = 0; k < 24; k++) src[k] = (uint8_t)(v >> (8 * (k % 8)));
        tf_swap_copy16(src, dst, 12, 0x8000);
        printf("swap16 %" PRIu64 " %u\n", v, (unsigned)(dst[0] | dst[1] << 8));
        tf_swap_copy32(src, dst, 6, 0x80000000u);
        printf("swap32 %" PRIu64 " %" PRIu32 "\n", v,
               (uint32_t)dst[0] | (uint32_t)dst[1] << 8 | (uint32_t)dst[2] << 16 | (uint32_t)dst[3] << 24);
        tf_swap_copy64(src, dst, 3, 0);
        memcpy(&word, dst + 16, 8);
        printf("swap64 %" PRIu64 " %" PRIu64 "\n", v, word);
        tf_swap_inplace64(src, 3, 0);
        printf("inplace64 %d\n", memcmp(src, dst, 24) == 0);
        tf_swap_inplace64(src, 3, 0);  /* back to the input bytes */
        tf_swap_copy32(src, dst, 6, 0x80000000u);
        tf_swap_inplace32(src, 6, 0x80000000u);
        printf("inplace32 %d\n", memcmp(src, dst, 24) == 0);
        tf_swap_inplace32(src, 6, 0x80000000u);
        tf_swap_copy16(src, dst, 12, 0x8000);
        tf_swap_inplace16(src, 12, 0x8000);
        printf("inplace16 %d\n", memcmp(src, dst, 24) == 0);
        /* Streaming copies exist only with TF_X86_DISPATCH; elsewhere they decline (0). */
        printf("stream %d\n", tf_swap_copy_nt(src, (uint8_t *)nt, 16, 8, 0) == DISPATCH);
    }
    tf_stream_fence();
    TF_FENCE();
    printf("done\n");
    return 0;
}

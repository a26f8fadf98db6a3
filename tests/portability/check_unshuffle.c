/* GZIP_2's un-shuffle (cython_src/_unshuffle.h) outside Python: every element size, tile
 * lengths around the 16-element step, every destination offset within 16 bytes, plain and
 * streaming stores, against the definition: byte plane k holds every element's k-th most
 * significant byte. Prints "checked N" or the first wrong case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "_unshuffle.h"

static uint32_t tf_rand_state = 29u;
static uint8_t next_byte(void) {
    tf_rand_state ^= tf_rand_state << 13;
    tf_rand_state ^= tf_rand_state >> 17;
    tf_rand_state ^= tf_rand_state << 5;
    return (uint8_t)(tf_rand_state >> 24);
}

/* Element i as a native integer of `size` bytes (1 to 8), read without alignment. */
static uint64_t element(const uint8_t *d, size_t i, int size) {
    uint8_t b1; uint16_t b2; uint32_t b4; uint64_t b8;
    switch (size) {
    case 1: memcpy(&b1, d + i, 1); return b1;
    case 2: memcpy(&b2, d + 2 * i, 2); return b2;
    case 4: memcpy(&b4, d + 4 * i, 4); return b4;
    default: memcpy(&b8, d + 8 * i, 8); return b8;
    }
}

int main(void) {
    static const int sizes[] = {1, 2, 4, 8};
    static const size_t longer[] = {255, 256, 257, 4095, 4096, 4097};
    long checked = 0;
    for (int si = 0; si < 4; si++) {
        int size = sizes[si];
        for (int stream = 0; stream < 2; stream++) {
            for (size_t t = 0; t < 70 + sizeof longer / sizeof longer[0]; t++) {
                size_t n = t < 70 ? t : longer[t - 70];
                for (size_t off = 0; off < 16; off += (size_t)size) {
                    uint8_t *s = malloc(n * size + 1), *d = malloc(n * size + 48);
                    size_t i, k;
                    if (s == NULL || d == NULL) return 2;
                    for (i = 0; i < n * size; i++) s[i] = next_byte();
                    memset(d, 0xA5, n * size + 48);
                    tf_unshuffle_swap(s, d + 16 + off, n, size, stream);
                    for (i = 0; i < 16 + off; i++)
                        if (d[i] != 0xA5) goto bad;
                    for (i = 16 + off + n * size; i < n * size + 48; i++)
                        if (d[i] != 0xA5) goto bad;
                    for (i = 0; i < n; i++) {
                        uint64_t want = 0;
                        for (k = 0; k < (size_t)size; k++) want = (want << 8) | s[k * n + i];
                        if (element(d + 16 + off, i, size) != want) goto bad;
                    }
                    free(s);
                    free(d);
                    checked++;
                    continue;
                bad:
                    printf("wrong size %d n %zu offset %zu stream %d\n", size, n, off, stream);
                    return 1;
                }
            }
        }
    }
    printf("checked %ld\n", checked);
    return 0;
}

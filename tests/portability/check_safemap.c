/* Exercises cython_src/_safemap.h's platform branch outside Python: map a file, read it, drop
 * its pages, and (Windows) check that the OS refuses to truncate it while it is mapped, which is
 * why that branch needs no fault handler. argv[1]: a file of 3 pages + 5 bytes, byte i = i*7;
 * argv[2]: an empty file. Prints "name value" lines for tests/portability/test_portable.py. */
#include <fcntl.h>
#include <stdio.h>
#include "_safemap.h"
#ifdef _WIN32
#include <io.h>
#define tf_open(p, f) _open(p, (f) | _O_BINARY)
#define tf_close _close
#else
#include <unistd.h>
#define tf_open(p, f) open(p, f)
#define tf_close close
#endif

static int bytes_ok(const unsigned char *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7)) return 0;
    return 1;
}

int main(int argc, char **argv) {
    int64_t size = -1, empty = -1;
    long err = 0;
    int fd, slot;
    unsigned char *p;
    if (argc != 3) return 2;
    printf("install %d\n", tf_install());
    fd = tf_open(argv[1], O_RDONLY);
    printf("size_rc %d\n", tf_file_size(fd, &size));
    printf("size %lld\n", (long long)size);
    p = (unsigned char *)tf_map(fd, (size_t)size, &err);
    tf_close(fd);  /* the map stays valid */
    printf("map %d %ld\n", p != NULL, err);
    if (p == NULL) return 1;
    slot = tf_register((uintptr_t)p, (size_t)size);
    printf("slot %d\n", slot >= 0);
    printf("bytes %d\n", bytes_ok(p, size));
    printf("page %ld\n", tf_page);
    printf("release %d\n", tf_release(p, (size_t)tf_page));
    printf("bytes_after_release %d\n", bytes_ok(p, size));
    printf("huge %d\n", tf_advise_huge(p, (size_t)size) == 0 || tf_advise_huge(p, (size_t)size) == -1);
#ifdef _WIN32
    {   /* a mapped file cannot shrink: SetEndOfFile fails (ERROR_USER_MAPPED_FILE) */
        int w = _open(argv[1], _O_RDWR | _O_BINARY);
        printf("truncate_refused %d\n", _chsize_s(w, 10) != 0);
        _close(w);
    }
#endif
    printf("faulted %d %d\n", (int)tf_faulted[slot], (int)tf_faults);
    tf_unregister(slot);
    tf_unmap(p, (size_t)size);
#ifdef _WIN32
    {
        int w = _open(argv[1], _O_RDWR | _O_BINARY);
        printf("truncate_unmapped %d\n", _chsize_s(w, 10) == 0);
        _close(w);
    }
#endif
    fd = tf_open(argv[2], O_RDONLY);
    printf("empty_rc %d\n", tf_file_size(fd, &empty));
    printf("empty_size %lld\n", (long long)empty);
    err = 0;
    p = (unsigned char *)tf_map(fd, 0, &err);  /* nothing to map: fails with a cause */
    printf("empty_map %d %d\n", p == NULL, err != 0);
    tf_close(fd);
    printf("done\n");
    return 0;
}

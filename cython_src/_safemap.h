/* Read-only whole-file maps for _safemap.pyx, one branch per platform.
 *
 * POSIX: mmap/munmap/madvise, and a process-wide SIGBUS handler that turns an access past the
 * end of a file truncated under its map into zero pages and a per-map flag (_safemap.pyx).
 * Windows (_WIN32): CreateFileMapping/MapViewOfFile. The OS refuses to truncate a file while a
 * view of it is mapped (SetEndOfFile fails with ERROR_USER_MAPPED_FILE), so the truncation this
 * guard is for cannot happen there: no handler, the flags stay 0 (a view of a file on a network
 * or removable drive can still raise EXCEPTION_IN_PAGE_ERROR on a read error; not handled).
 *
 *   tf_install()               install the SIGBUS handler (again); 0, or -1 when that failed
 *   tf_register(start, len)    slot of a new map in the handler's table, -1 when it is full
 *   tf_unregister(slot)
 *   tf_faulted[slot], tf_faults   a map's flag; faults absorbed in this process
 *   tf_page                    the page size (after tf_install)
 *   tf_file_size(fd, &size)    0, or an errno (errno is set too)
 *   tf_map(fd, size, &err)     a read-only shared map of the file's first size bytes; NULL on
 *                              failure, with the cause in err (an errno on POSIX, a
 *                              GetLastError() code on Windows: TF_MAP_WINERROR says which)
 *   tf_unmap(p, size)
 *   tf_release(p, len)         drop the pages from this process's resident set (they stay in
 *                              the page cache); 0 when done
 *   tf_advise_huge(p, len)     ask for transparent huge pages; 0 when done, -1 where none */
#ifndef TORCHFITS_SAFEMAP_H
#define TORCHFITS_SAFEMAP_H
#include <stddef.h>
#include <stdint.h>
#include "_portable.h"

#define TF_SLOTS 8192

#if defined(_WIN32)
/* ---- Windows ------------------------------------------------------------------------------ */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <errno.h>
#include <io.h>
#include <sys/stat.h>
#include <sys/types.h>

#define TF_MAP_WINERROR 1
static volatile int tf_faulted[TF_SLOTS];  /* never set: a mapped file cannot shrink */
static volatile int tf_faults = 0;
static long tf_page = 4096;

static int tf_install(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    if (si.dwPageSize > 0) tf_page = (long)si.dwPageSize;
    return 0;
}
static int tf_register(uintptr_t start, size_t len) { (void)start; (void)len; return 0; }
static void tf_unregister(int slot) { (void)slot; }

static int tf_file_size(int fd, int64_t *size) {
    struct _stati64 st;
    if (_fstati64(fd, &st) != 0) return errno;
    *size = (int64_t)st.st_size;
    return 0;
}

static void *tf_map(int fd, size_t size, long *err) {
    HANDLE fh = (HANDLE)_get_osfhandle(fd), m;
    void *p;
    if (fh == INVALID_HANDLE_VALUE) {
        *err = ERROR_INVALID_HANDLE;
        return NULL;
    }
    /* Maximum size 0: the file's size now. The view keeps the mapping object alive. */
    m = CreateFileMappingW(fh, NULL, PAGE_READONLY, 0, 0, NULL);
    if (m == NULL) {
        *err = (long)GetLastError();
        return NULL;
    }
    p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, size);
    if (p == NULL) *err = (long)GetLastError();
    CloseHandle(m);
    return p;
}
static void tf_unmap(void *p, size_t size) { (void)size; UnmapViewOfFile(p); }

/* VirtualUnlock on pages that are not locked takes them out of the working set (and fails with
   ERROR_NOT_LOCKED, which is the expected outcome); a file view's pages stay in the cache. */
static int tf_release(void *p, size_t len) {
    if (VirtualUnlock(p, len)) return 0;
    return GetLastError() == ERROR_NOT_LOCKED ? 0 : -1;
}
static int tf_advise_huge(void *addr, size_t len) { (void)addr; (void)len; return -1; }

#else
/* ---- POSIX -------------------------------------------------------------------------------- */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TF_MAP_WINERROR 0
static volatile uintptr_t tf_start[TF_SLOTS];
static volatile size_t tf_len[TF_SLOTS];
static volatile sig_atomic_t tf_faulted[TF_SLOTS];
static volatile int tf_high = 0;          /* slots [0, tf_high) may be in use */
static volatile sig_atomic_t tf_faults = 0;
static struct sigaction tf_prev;
static volatile sig_atomic_t tf_installed = 0;
static volatile sig_atomic_t tf_foreign = 0;
static long tf_page = 4096;

static void tf_handler(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (si != NULL && si->si_code > 0) {  /* raised by the kernel for a memory access */
        uintptr_t a = (uintptr_t)si->si_addr;
        int high = tf_high;
        for (int i = 0; i < high; i++) {
            size_t len = tf_len[i];
            uintptr_t s = tf_start[i];
            if (len && a >= s && a < s + len) {
                uintptr_t page = a & ~((uintptr_t)tf_page - 1);
                uintptr_t end = s + len;
                end = (end + (uintptr_t)tf_page - 1) & ~((uintptr_t)tf_page - 1);
                void *r = mmap((void *)page, (size_t)(end - page), PROT_READ,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                if (r != MAP_FAILED) {
                    tf_faulted[i] = 1;
                    tf_faults++;
                    return;
                }
                break;
            }
        }
    }
    /* Not ours: hand the signal to whoever was installed before us, once. A second foreign
       signal (handlers bouncing between each other) falls back to the default action. */
    if (tf_foreign) {
        signal(sig, SIG_DFL);
    } else {
        tf_foreign = 1;
        sigaction(SIGBUS, &tf_prev, NULL);
    }
    if (si == NULL || si->si_code <= 0) {
        raise(sig);  /* a sent signal does not repeat by itself */
    }
    /* A real fault repeats when we return, now reaching the restored handler. */
}

static int tf_install(void) {
    struct sigaction cur, act;
    tf_page = sysconf(_SC_PAGESIZE);
    if (tf_page <= 0) tf_page = 4096;
    if (sigaction(SIGBUS, NULL, &cur) != 0) return -1;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == tf_handler) return 0;
    memset(&act, 0, sizeof(act));
    act.sa_sigaction = tf_handler;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&act.sa_mask);
    tf_prev = cur;
    tf_foreign = 0;
    if (sigaction(SIGBUS, &act, NULL) != 0) return -1;
    tf_installed = 1;
    return 0;
}

static int tf_register(uintptr_t start, size_t len) {
    for (int i = 0; i < TF_SLOTS; i++) {
        if (tf_len[i] == 0) {
            tf_faulted[i] = 0;
            tf_start[i] = start;
            TF_FENCE();
            tf_len[i] = len;
            if (i >= tf_high) tf_high = i + 1;
            return i;
        }
    }
    return -1;
}

static void tf_unregister(int i) {
    tf_len[i] = 0;
    TF_FENCE();
}

static int tf_file_size(int fd, int64_t *size) {
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    *size = (int64_t)st.st_size;
    return 0;
}

static void *tf_map(int fd, size_t size, long *err) {
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
    return p;
}
static void tf_unmap(void *p, size_t size) { munmap(p, size); }

static int tf_release(void *p, size_t len) { return madvise(p, len, MADV_DONTNEED); }

/* madvise(MADV_HUGEPAGE) where the platform has it; -1 elsewhere. */
static int tf_advise_huge(void *addr, size_t len) {
#ifdef MADV_HUGEPAGE
    return madvise(addr, len, MADV_HUGEPAGE);
#else
    (void)addr; (void)len;
    return -1;
#endif
}
#endif
#endif

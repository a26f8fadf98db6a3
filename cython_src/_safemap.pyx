# cython: language_level=3
"""Read-only file maps that survive truncation: a fault inside one becomes a flag, not SIGBUS.

A file truncated (or rewritten shorter) by another process while it is mapped makes every access
to a page past the new end raise SIGBUS, which kills the interpreter. Each ``SafeMap`` registers
its address range in a fixed table that a process-wide SIGBUS handler consults: for a fault inside
a registered range the handler maps anonymous zero pages over the rest of that map (MAP_FIXED),
sets the map's ``faulted`` flag and returns, so the faulting instruction completes (reading zeros)
and the Python caller, which checks the flag after decoding, raises ``TruncatedFileError``. Any
other SIGBUS goes to the handler that was installed before ours. The happy path costs nothing: no
per-access check, only one flag read per call.
"""
from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport uintptr_t

cdef extern from *:
    """
    #include <signal.h>
    #include <string.h>
    #include <sys/mman.h>
    #include <unistd.h>

    #define TF_SLOTS 8192
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
                __sync_synchronize();
                tf_len[i] = len;
                if (i >= tf_high) tf_high = i + 1;
                return i;
            }
        }
        return -1;
    }

    static void tf_unregister(int i) {
        tf_len[i] = 0;
        __sync_synchronize();
    }

    /* madvise(MADV_HUGEPAGE) where the platform has it; -1 elsewhere. */
    static int tf_advise_huge(void *addr, size_t len) {
    #ifdef MADV_HUGEPAGE
        return madvise(addr, len, MADV_HUGEPAGE);
    #else
        (void)addr; (void)len;
        return -1;
    #endif
    }
    """
    int tf_install() nogil
    int tf_register(uintptr_t start, size_t length) nogil
    void tf_unregister(int slot) nogil
    int tf_advise_huge(void *addr, size_t length) nogil
    int tf_faulted[8192]
    int tf_faults
    long tf_page

cdef extern from "<sys/mman.h>" nogil:
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void *addr, size_t length)
    int madvise(void *addr, size_t length, int advice)
    int MADV_DONTNEED
    int PROT_READ
    int MAP_SHARED
    int MAP_FAILED_INT "((intptr_t)MAP_FAILED)"

cdef extern from "<stdint.h>":
    ctypedef long intptr_t

cdef extern from "<sys/stat.h>" nogil:
    cdef struct stat:
        long st_size
    int fstat(int fd, stat *buf)

cdef extern from "<errno.h>":
    int errno

from os import strerror as _strerror


def install_handler():
    """Install the SIGBUS handler (again, when something replaced it); False when that failed."""
    return tf_install() == 0


def fault_count():
    """How many faults inside our maps the handler has absorbed in this process."""
    return tf_faults


cdef class SafeMap:
    """A read-only shared map of a whole file, exposing the buffer protocol.

    Parameters
    ----------
    fd : int
        An open file descriptor; the map stays valid after it is closed.
    size : int
        Bytes to map (at most the file's size now); 0 gives an empty buffer.
    """
    cdef char *addr
    cdef Py_ssize_t length
    cdef int slot
    cdef Py_ssize_t exports
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self, int fd, Py_ssize_t size):
        cdef stat st
        cdef void *p
        self.addr = NULL
        self.length = 0
        self.slot = -1
        self.exports = 0
        if size < 0:
            raise ValueError("size must be >= 0")
        if fstat(fd, &st) != 0:
            raise OSError(errno, _strerror(errno))
        if size > st.st_size:
            size = st.st_size
        if size == 0:
            return
        tf_install()
        p = mmap(NULL, <size_t>size, PROT_READ, MAP_SHARED, fd, 0)
        if <intptr_t>p == MAP_FAILED_INT:
            raise OSError(errno, _strerror(errno))
        self.slot = tf_register(<uintptr_t>p, <size_t>size)
        if self.slot < 0:
            munmap(p, <size_t>size)
            raise OSError("too many open file maps (8192)")
        self.addr = <char *>p
        self.length = size

    def __dealloc__(self):
        if self.addr != NULL:
            tf_unregister(self.slot)
            munmap(self.addr, <size_t>self.length)
            self.addr = NULL

    def __len__(self):
        return self.length

    def release(self, Py_ssize_t offset, Py_ssize_t size):
        """Drop this process's pages of ``[offset, offset + size)`` (whole pages inside it).

        ``madvise(MADV_DONTNEED)`` on a shared read-only file map: the pages leave this
        process's resident set (RSS) but stay in the page cache, and the next access maps them
        again with the file's bytes, so a view over a released range still reads its data.
        Returns the bytes released (0 when the range holds no whole page).
        """
        cdef Py_ssize_t page = tf_page, lo, hi
        cdef int rc
        if self.addr == NULL or size <= 0:
            return 0
        if offset < 0:
            size += offset
            offset = 0
        if offset + size > self.length:
            size = self.length - offset
        lo = (offset + page - 1) // page * page
        hi = (offset + size) // page * page
        if offset + size == self.length:
            hi = offset + size  # the map's last page, partial or not, is this map's own
        if hi <= lo:
            return 0
        with nogil:
            rc = madvise(self.addr + lo, <size_t>(hi - lo), MADV_DONTNEED)
        return hi - lo if rc == 0 else 0

    def advise_huge(self, Py_ssize_t offset, Py_ssize_t size):
        """Ask for transparent huge pages on the whole 2 MiB pages inside ``[offset, offset + size)``.

        ``madvise(MADV_HUGEPAGE)`` on a file map: a read that faults a page in from disk fills
        the page cache with 2 MiB folios, and every map of those (in any process) is then made
        of 2 MiB entries, so reads that jump between pages (cutout rows, a whole image row
        apart) walk no page tables. Pages already cached stay as they are. Returns the bytes
        advised (0 when the range holds no whole 2 MiB page, or the platform has no such hint).
        """
        cdef Py_ssize_t huge = 2 << 20, lo, hi
        cdef int rc
        if self.addr == NULL or size <= 0:
            return 0
        if offset < 0:
            size += offset
            offset = 0
        if offset + size > self.length:
            size = self.length - offset
        lo = (offset + huge - 1) // huge * huge
        hi = (offset + size) // huge * huge
        if hi <= lo:
            return 0
        with nogil:
            rc = tf_advise_huge(self.addr + lo, <size_t>(hi - lo))
        return hi - lo if rc == 0 else 0

    @property
    def faulted(self):
        """True once an access past the file's current end was absorbed (the file shrank)."""
        return self.slot >= 0 and tf_faulted[self.slot] != 0

    def __getbuffer__(self, Py_buffer *view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("SafeMap is read-only")
        self.shape[0] = self.length
        self.strides[0] = 1
        view.buf = <void *>self.addr if self.addr != NULL else <void *>&self.shape[0]
        view.obj = self
        view.len = self.length
        view.readonly = 1
        view.itemsize = 1
        view.format = b"B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1

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

On Windows the OS refuses to truncate a file while a view of it is mapped, so no access can
fault: the map is a MapViewOfFile view, there is no handler, and ``faulted`` stays False.
"""
from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport uintptr_t, int64_t

# The platform's half (POSIX: mmap and the SIGBUS handler; Windows: MapViewOfFile, where a
# mapped file cannot be truncated, so nothing faults) is in _safemap.h.
cdef extern from "_safemap.h" nogil:
    int tf_install()
    int tf_register(uintptr_t start, size_t length)
    void tf_unregister(int slot)
    int tf_file_size(int fd, int64_t *size)
    void *tf_map(int fd, size_t size, long *err)
    void tf_unmap(void *p, size_t size)
    int tf_release(void *addr, size_t length)
    int tf_advise_huge(void *addr, size_t length)
    int tf_faulted[8192]
    int tf_faults
    long tf_page
    int TF_MAP_WINERROR

from os import strerror as _strerror


cdef object _map_error(long code):
    """The OSError of a failed map: ``code`` is an errno, or on Windows a GetLastError() code."""
    if TF_MAP_WINERROR:
        import ctypes
        return OSError(None, ctypes.FormatError(code), None, code)  # errno from winerror
    return OSError(code, _strerror(code))


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
        cdef int64_t file_size = 0
        cdef long err = 0
        cdef int rc
        cdef void *p
        self.addr = NULL
        self.length = 0
        self.slot = -1
        self.exports = 0
        if size < 0:
            raise ValueError("size must be >= 0")
        rc = tf_file_size(fd, &file_size)
        if rc != 0:
            raise OSError(rc, _strerror(rc))
        if size > file_size:
            size = <Py_ssize_t>file_size
        if size == 0:
            return
        tf_install()
        p = tf_map(fd, <size_t>size, &err)
        if p == NULL:
            raise _map_error(err)
        self.slot = tf_register(<uintptr_t>p, <size_t>size)
        if self.slot < 0:
            tf_unmap(p, <size_t>size)
            raise OSError("too many open file maps (8192)")
        self.addr = <char *>p
        self.length = size

    def __dealloc__(self):
        if self.addr != NULL:
            tf_unregister(self.slot)
            tf_unmap(self.addr, <size_t>self.length)
            self.addr = NULL

    def __len__(self):
        return self.length

    def release(self, Py_ssize_t offset, Py_ssize_t size):
        """Drop this process's pages of ``[offset, offset + size)`` (whole pages inside it).

        ``madvise(MADV_DONTNEED)`` on a shared read-only file map (``VirtualUnlock`` on
        Windows): the pages leave this process's resident set (RSS) but stay in the page cache,
        and the next access maps them again with the file's bytes, so a view over a released
        range still reads its data.
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
            rc = tf_release(self.addr + lo, <size_t>(hi - lo))
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

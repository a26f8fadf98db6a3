# cython: language_level=3
"""Cross-match kernel: the right points near each left point, on a 3-D grid of unit vectors.

The caller (torchfits/sky/crossmatch.py) sorts the right points by cell and describes the
occupied cells (sorted keys, first position, count); it passes the left points sorted by cell
too, so consecutive lookups touch neighbouring memory. A point's sphere of chord ``reach`` (in
cell units, below one half) reaches a neighbour cell along an axis only when the point lies
within ``reach`` of that face, so most points look in their own cell only. The kernel keeps
pairs whose squared chord is at most ``chord2`` and reports that squared chord. A cell's key
is ``(cx * n + cy) * n + cz`` for cell indices below ``n`` (the caller's ``_keys``);
``argsort_keys`` sorts such keys by radix, in linear time.
"""
from libc.math cimport M_PI, cos, floor, sin
from libc.stdint cimport int64_t


cdef inline Py_ssize_t _find(const int64_t[::1] keys, int64_t key) noexcept nogil:
    # position of key in the sorted keys, or -1
    cdef Py_ssize_t lo = 0, hi = keys.shape[0], mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.shape[0] and keys[lo] == key:
        return lo
    return -1


def unit_vectors(const double[::1] ra, const double[::1] dec, double[:, ::1] out):
    """(n, 3) unit vectors of RA and Dec in degrees into ``out``: one pass, no temporaries."""
    cdef Py_ssize_t i
    cdef double a, d, cd
    with nogil:
        for i in range(ra.shape[0]):
            a = ra[i] * (M_PI / 180.0)
            d = dec[i] * (M_PI / 180.0)
            cd = cos(d)
            out[i, 0] = cd * cos(a)
            out[i, 1] = cd * sin(a)
            out[i, 2] = sin(d)


cdef inline int64_t _key(int64_t cx, int64_t cy, int64_t cz, int64_t n) noexcept nogil:
    return (cx * n + cy) * n + cz


def cell_keys(const double[:, ::1] xyz, double h, int64_t n, int64_t[::1] out):
    """The key of each unit vector's cell (side ``h``, ``n`` cells an axis, indices from 1)."""
    cdef Py_ssize_t i
    cdef double inv_h = 1.0 / h
    cdef int64_t cx, cy, cz
    with nogil:
        for i in range(xyz.shape[0]):
            cx = <int64_t>floor((xyz[i, 0] + 1.0) * inv_h) + 1
            cy = <int64_t>floor((xyz[i, 1] + 1.0) * inv_h) + 1
            cz = <int64_t>floor((xyz[i, 2] + 1.0) * inv_h) + 1
            out[i] = _key(cx, cy, cz, n)


cdef Py_ssize_t _scan(const double[:, ::1] lxyz, const double[:, ::1] rxyz, const int64_t[::1] rrow,
                      const int64_t[::1] cell_keys, const int64_t[::1] cell_start,
                      const int64_t[::1] cell_count, int64_t n, double h, double reach, double chord2,
                      int mode, int64_t[::1] out_a, int64_t[::1] out_b, double[::1] out_d2) noexcept nogil:
    # mode 0: nearest right position of each left point into out_a (-1: none)
    # mode 1: the number of pairs of each left point into out_a
    # mode 2: pairs into out_b from the offsets in out_a (the exclusive cumulative counts)
    cdef Py_ssize_t i, j, c, end, best, total = 0, pos
    cdef int dx, dy, dz, lo_x, hi_x, lo_y, hi_y, lo_z, hi_z
    cdef double x, y, z, fx, fy, fz, ddx, ddy, ddz, d2, best_d2
    cdef int64_t cx, cy, cz
    cdef double inv_h = 1.0 / h
    for i in range(lxyz.shape[0]):
        x = lxyz[i, 0]
        y = lxyz[i, 1]
        z = lxyz[i, 2]
        fx = (x + 1.0) * inv_h
        fy = (y + 1.0) * inv_h
        fz = (z + 1.0) * inv_h
        cx = <int64_t>floor(fx)
        cy = <int64_t>floor(fy)
        cz = <int64_t>floor(fz)
        fx -= cx
        fy -= cy
        fz -= cz
        lo_x = -1 if fx < reach else 0
        hi_x = 1 if fx > 1.0 - reach else 0
        lo_y = -1 if fy < reach else 0
        hi_y = 1 if fy > 1.0 - reach else 0
        lo_z = -1 if fz < reach else 0
        hi_z = 1 if fz > 1.0 - reach else 0
        best = -1
        best_d2 = chord2
        pos = out_a[i] if mode == 2 else 0
        for dx in range(lo_x, hi_x + 1):
            for dy in range(lo_y, hi_y + 1):
                for dz in range(lo_z, hi_z + 1):
                    c = _find(cell_keys, _key(cx + 1 + dx, cy + 1 + dy, cz + 1 + dz, n))
                    if c < 0:
                        continue
                    end = cell_start[c] + cell_count[c]
                    for j in range(cell_start[c], end):
                        ddx = x - rxyz[j, 0]
                        ddy = y - rxyz[j, 1]
                        ddz = z - rxyz[j, 2]
                        d2 = ddx * ddx + ddy * ddy + ddz * ddz
                        if d2 > chord2:
                            continue
                        if mode == 0:
                            if d2 < best_d2 or best < 0 or (d2 == best_d2 and rrow[j] < rrow[best]):
                                best = j
                                best_d2 = d2
                        elif mode == 1:
                            pos += 1
                        else:
                            out_b[pos] = j
                            out_d2[pos] = d2
                            pos += 1
        if mode == 0:
            out_a[i] = best
            out_d2[i] = best_d2
            total += best >= 0
        elif mode == 1:
            out_a[i] = pos
            total += pos
    return total


def nearest(const double[:, ::1] lxyz, const double[:, ::1] rxyz, const int64_t[::1] rrow,
            const int64_t[::1] cell_keys, const int64_t[::1] cell_start, const int64_t[::1] cell_count,
            int64_t n, double h, double reach, double chord2, int64_t[::1] out, double[::1] out_d2):
    """The nearest right position within ``chord2`` of each left point into ``out`` (-1: none;
    ties: the lowest ``rrow``) and its squared chord into ``out_d2``; returns how many left
    points have one."""
    cdef Py_ssize_t found
    with nogil:
        found = _scan(lxyz, rxyz, rrow, cell_keys, cell_start, cell_count, n, h, reach, chord2, 0,
                      out, out, out_d2)
    return found


def count_pairs(const double[:, ::1] lxyz, const double[:, ::1] rxyz, const int64_t[::1] rrow,
                const int64_t[::1] cell_keys, const int64_t[::1] cell_start, const int64_t[::1] cell_count,
                int64_t n, double h, double reach, double chord2, int64_t[::1] out):
    """The number of right points within ``chord2`` of each left point into ``out``; returns
    their sum."""
    cdef Py_ssize_t total
    cdef double[::1] unused = None
    with nogil:
        total = _scan(lxyz, rxyz, rrow, cell_keys, cell_start, cell_count, n, h, reach, chord2, 1,
                      out, out, unused)
    return total


def fill_pairs(const double[:, ::1] lxyz, const double[:, ::1] rxyz, const int64_t[::1] rrow,
               const int64_t[::1] cell_keys, const int64_t[::1] cell_start, const int64_t[::1] cell_count,
               int64_t n, double h, double reach, double chord2, int64_t[::1] offsets, int64_t[::1] out,
               double[::1] out_d2):
    """The right positions within ``chord2`` of each left point and their squared chords,
    written from the left point's offset (the exclusive cumulative sum of ``count_pairs``)."""
    with nogil:
        _scan(lxyz, rxyz, rrow, cell_keys, cell_start, cell_count, n, h, reach, chord2, 2,
              offsets, out, out_d2)


def argsort_keys(const int64_t[::1] keys, int bits, int64_t[::1] out, int64_t[:, ::1] tmp,
                 int64_t[::1] counts):
    """The stable sorting permutation of non-negative ``keys`` below ``2**bits`` into ``out``:
    least-significant-digit radix passes of 16 bits over (key, position) pairs (``tmp``: a
    (2, 2 * len(keys)) scratch array, ``counts``: 65,537 items)."""
    cdef Py_ssize_t i, n = keys.shape[0], d
    cdef int shift = 0
    cdef int64_t digit, acc, c, k
    cdef int64_t *src_k
    cdef int64_t *src_i
    cdef int64_t *dst_k
    cdef int64_t *dst_i
    cdef int64_t *swap
    if n == 0:
        return
    src_k = &tmp[0, 0]
    src_i = &tmp[0, n]
    dst_k = &tmp[1, 0]
    dst_i = &tmp[1, n]
    with nogil:
        for i in range(n):
            src_k[i] = keys[i]
            src_i[i] = i
        while shift < bits:
            for d in range(65537):
                counts[d] = 0
            for i in range(n):
                counts[((src_k[i] >> shift) & 0xFFFF) + 1] += 1
            acc = 0
            for d in range(65537):
                c = counts[d]
                counts[d] = acc + c
                acc += c
            for i in range(n):
                k = src_k[i]
                digit = (k >> shift) & 0xFFFF
                dst_k[counts[digit]] = k
                dst_i[counts[digit]] = src_i[i]
                counts[digit] += 1
            swap = src_k
            src_k = dst_k
            dst_k = swap
            swap = src_i
            src_i = dst_i
            dst_i = swap
            shift += 16
        for i in range(n):
            out[i] = src_i[i]

# The per-tile status protocol of the batched tile decoders (_rice, _plio, _gziptiles, _hcompress):
# decode_many writes one status per tile, and a raised stop flag (another chunk failed) ends the
# batch with the tiles not attempted marked STOPPED. The caller decodes a non-OK tile the slow
# way, which either handles it or raises an error naming the tile.
from libc.stdint cimport uint8_t

cdef enum:
    TILE_OK = 0
    TILE_MISMATCH = 1  # bad bounds, or a stream that does not decode to exactly the tile
    TILE_STOPPED = 2   # not attempted: the stop flag was raised by another chunk


cdef inline Py_ssize_t stop_rest(uint8_t[::1] status, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Mark tiles ``i .. n-1`` STOPPED; returns how many."""
    cdef Py_ssize_t j
    for j in range(i, n):
        status[j] = TILE_STOPPED
    return n - i

# The per-tile status protocol of the batched tile decoders (_rice, _plio, _gziptiles, _hcompress):
# decode_many writes one status per tile, and a raised stop flag (another chunk failed) ends the
# batch with the tiles not attempted marked STOPPED (`tile_skipped`). The caller decodes a non-OK
# tile the slow way, which either handles it or raises an error naming the tile.
from libc.stdint cimport int64_t, uint8_t

cdef enum:
    TILE_OK = 0
    TILE_MISMATCH = 1  # bad bounds, or a stream that does not decode to exactly the tile
    TILE_STOPPED = 2   # not attempted: the stop flag was raised by another chunk


cdef inline bint tile_skipped(const uint8_t[::1] stop, uint8_t[::1] status, Py_ssize_t i,
                              int64_t offset, int64_t size, Py_ssize_t blen, int64_t dest,
                              int64_t npix, Py_ssize_t olen) noexcept nogil:
    """Whether tile ``i`` is not to be decoded, with its status set: STOPPED once ``stop[0]`` is
    raised (another chunk failed; the stop flag is never lowered, so every later tile of the
    loop is STOPPED too), MISMATCH when its ``size`` bytes at ``offset`` leave the ``blen``
    compressed bytes or its ``npix`` pixels at element ``dest`` leave the ``olen`` output
    elements (compared so that no sum overflows; a negative ``npix`` is always MISMATCH)."""
    if stop[0]:
        status[i] = TILE_STOPPED
        return True
    if offset < 0 or size < 0 or offset > blen - size or dest < 0 or npix < 0 or dest > olen - npix:
        status[i] = TILE_MISMATCH
        return True
    return False

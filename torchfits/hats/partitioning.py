"""HEALPix partitioning of a HATS catalog: the ``_healpix_29`` spatial index, pixel counts, and
the threshold rule that gives each partition its order (hats-import's default rule).

Everything here works on sparse arrays (the non-empty pixels only), so a histogram at order 10
never costs the 12.6 million bins of the full map.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SPATIAL_INDEX_COLUMN", "SPATIAL_INDEX_ORDER", "MAX_ORDER", "spatial_index",
           "PixelCounts", "Partition", "choose_partitions", "breadth_first_key",
           "sky_fraction", "pixel_directory"]

SPATIAL_INDEX_COLUMN = "_healpix_29"
SPATIAL_INDEX_ORDER = 29
# hats-import refuses mapping orders above 19; so do we (the histogram order)
MAX_ORDER = 19


def spatial_index(ra: np.ndarray, dec: np.ndarray, *, where: str = "") -> np.ndarray:
    """The nested HEALPix pixel at order 29 of every (ra, dec) in degrees, as int64.

    The pixel is cdshealpix's (the library hats computes ``_healpix_29`` with), from
    astropy angles, so the values equal hats-import's bit for bit. RA wraps into [0, 360);
    a NaN or infinite coordinate, or a declination outside [-90, 90], raises ValueError
    naming ``where``.
    """
    import cdshealpix
    from astropy.coordinates import Latitude, Longitude

    ra = np.asarray(ra, dtype=np.float64)
    dec = np.asarray(dec, dtype=np.float64)
    bad = ~(np.isfinite(ra) & np.isfinite(dec))
    if bad.any():
        raise ValueError(f"{where}: {int(bad.sum())} rows have a NaN or infinite position "
                         f"(first at row {int(np.flatnonzero(bad)[0])}); HATS needs a position "
                         "for every row")
    outside = np.abs(dec) > 90.0
    if outside.any():
        raise ValueError(f"{where}: declination {dec[outside][0]!r} is outside [-90, 90]")
    if ra.size == 0:
        return np.empty(0, dtype=np.int64)
    pix = cdshealpix.nested.lonlat_to_healpix(Longitude(ra, unit="deg"), Latitude(dec, unit="deg"),
                                              SPATIAL_INDEX_ORDER)
    return np.asarray(pix).astype(np.int64)


class PixelCounts:
    """Rows per non-empty HEALPix pixel at one order, summed over many sorted index arrays."""

    def __init__(self, order: int) -> None:
        self.order = order
        self._pixels: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []

    def add_sorted(self, index29: np.ndarray) -> None:
        """Count the rows of one ascending ``_healpix_29`` array."""
        if index29.size == 0:
            return
        pixels = index29 >> (2 * (SPATIAL_INDEX_ORDER - self.order))
        starts = np.concatenate(([0], np.flatnonzero(np.diff(pixels)) + 1))
        self._pixels.append(pixels[starts])
        self._counts.append(np.diff(np.append(starts, pixels.size)))

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """(pixels ascending, rows in each), both int64."""
        if not self._pixels:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return _sum_by(np.concatenate(self._pixels), np.concatenate(self._counts))


def _sum_by(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys ascending and the sum of ``values`` of each."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(keys)) + 1)) if keys.size else keys
    return keys[starts].astype(np.int64), np.add.reduceat(values, starts).astype(np.int64)


class Partition(tuple):  # type: ignore[type-arg]
    """One partition: ``(order, pixel, rows)``."""

    __slots__ = ()

    def __new__(cls, order: int, pixel: int, rows: int) -> Partition:
        return super().__new__(cls, (int(order), int(pixel), int(rows)))

    @property
    def order(self) -> int:
        return int(self[0])

    @property
    def pixel(self) -> int:
        return int(self[1])

    @property
    def rows(self) -> int:
        return int(self[2])

    def index_range(self) -> tuple[int, int]:
        """The half-open ``_healpix_29`` range this pixel covers."""
        shift = 2 * (SPATIAL_INDEX_ORDER - self.order)
        return self.pixel << shift, (self.pixel + 1) << shift


def choose_partitions(pixels: np.ndarray, counts: np.ndarray, *, highest_order: int,
                      lowest_order: int, threshold: int) -> list[Partition]:
    """The partitions of a catalog from its row counts at ``highest_order``.

    The rule is hats-import's default (``drop_empty_siblings=True``): first the mapping order
    comes down to the lowest order (above ``lowest_order``) at which no pixel holds more than
    ``threshold`` rows; then every pixel merges into the lowest ancestor (not below
    ``lowest_order``) that holds at most ``threshold`` rows and has rows in more than one of its
    four children. A pixel alone among empty siblings keeps its small area.

    When ``lowest_order == highest_order`` every non-empty pixel of that order is a partition,
    whatever it holds (hats-import's constant order). Returns the partitions in breadth-first
    order (by the ``_healpix_29`` range they start at).

    Raises
    ------
    ValueError
        When one pixel at ``highest_order`` alone holds more than ``threshold`` rows.
    """
    if highest_order == lowest_order:  # one order for all: hats-import ignores the threshold
        return [Partition(highest_order, p, n) for p, n in zip(pixels.tolist(), counts.tolist())]
    if counts.size and int(counts.max()) > threshold:
        raise ValueError(f"one HEALPix pixel of order {highest_order} holds {int(counts.max())} rows, "
                         f"more than pixel_threshold={threshold}; raise highest_order or "
                         "pixel_threshold")
    top = highest_order
    for order in range(highest_order, lowest_order, -1):
        _, sums = _sum_by(pixels >> (2 * (highest_order - order)), counts)
        if sums.size and int(sums.max()) > threshold:
            break
        top = order
    leaves, leaf_rows = _sum_by(pixels >> (2 * (highest_order - top)), counts)
    leaf_order = np.full(leaves.size, top, dtype=np.int64)
    for order in range(top - 1, lowest_order - 1, -1):
        parents = leaves >> (2 * (top - order))
        children = leaves >> (2 * (top - order - 1))
        parent_keys, parent_rows = _sum_by(parents, leaf_rows)
        # children with rows, per parent: distinct child pixels (leaves are sorted, so runs)
        child_keys = np.unique(children)
        _, kids = _sum_by(child_keys >> 2, np.ones(child_keys.size, dtype=np.int64))
        merge = (parent_rows <= threshold) & (kids >= 2)
        merged_parents = parent_keys[merge]
        # hats assigns the lowest qualifying ancestor: orders run downwards, so overwrite
        leaf_order[np.isin(parents, merged_parents)] = order
    parts = leaves >> (2 * (top - leaf_order))
    # (order, pixel) pairs as one key: the start of the pixel's range at order ``top``
    key = (parts << (2 * (top - leaf_order))) * 32 + leaf_order
    keys, rows = _sum_by(key, leaf_rows)
    out = []
    for k, n in zip(keys.tolist(), rows.tolist()):
        order = k % 32
        out.append(Partition(order, (k // 32) >> (2 * (top - order)), n))
    out.sort(key=lambda p: breadth_first_key(p.order, p.pixel))
    return out


def breadth_first_key(order: int, pixel: int) -> int:
    """Sort key of a pixel in hats' breadth-first order: the first order-29 index it covers."""
    return pixel << (2 * (SPATIAL_INDEX_ORDER - order))


def sky_fraction(partitions: Sequence[Partition]) -> float:
    """The fraction of the sky the partitions cover (HEALPix pixels of order k: 1/(12*4**k))."""
    return float(sum(4.0 ** -p.order for p in partitions) / 12.0)


def pixel_directory(order: int, pixel: int) -> str:
    """``Norder=K/Dir=D`` of a partition (D: the pixel rounded down to 10,000s)."""
    return f"Norder={order}/Dir={pixel // 10_000 * 10_000}"

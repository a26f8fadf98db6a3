"""Image extensions by name: `BandInfo` and `discover_bands` (photometric keywords included)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..fits.hdu_index import KIND_COMPRESSED, get_index

__all__ = ["BandInfo", "discover_bands", "band_role", "IVAR_SUFFIXES", "MASK_SUFFIXES",
           "DQ_SUFFIXES"]

# Zeropoint keywords, most specific first (surveys name the same quantity differently).
_ZEROPOINT_KEYS = ("PHOTZEROPOINT", "PHOTZP", "ZP", "MAGZERO", "MAGZP", "ABMAGZERO", "ZEROPOINT")
IVAR_SUFFIXES = ("_IVAR", "IVAR")
MASK_SUFFIXES = ("_MASK", "_DQ", "MASK", "DQ")
DQ_SUFFIXES = ("_DQ", "DQ")
_WAVELENGTH_SUFFIXES = ("_WAVELENGTH", "_WAVE", "WAVELENGTH", "WAVE")
_DTYPES = {8: "uint8", 16: "int16", 32: "int32", 64: "int64", -32: "float32", -64: "float64"}


@dataclass(frozen=True)
class BandInfo:
    """One image extension of a multi-band file (see `discover_bands`).

    ``zeropoint`` follows ``mag = -2.5 log10(counts) + ZP``.
    """

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = "flux"  # "flux", "ivar", "mask" or "wavelength"
    bitpix: int | None = None
    zeropoint: float | None = None
    photflam: float | None = None
    photplam: float | None = None
    exptime: float | None = None

    def flux_scale(self, *, exptime_normalized: bool = True) -> float | None:
        """The factor ``10**(-0.4 * ZP)`` turning counts into flux (None without a zeropoint).

        With ``exptime_normalized=False`` the counts are exposure totals and the factor is
        divided by ``EXPTIME`` (which must then be positive, else ``ValueError``).
        """
        if self.zeropoint is None:
            return None
        scale = 10.0 ** (-0.4 * float(self.zeropoint))
        if not exptime_normalized:
            if self.exptime is None or self.exptime <= 0:
                raise ValueError(f"exptime_normalized=False needs a positive EXPTIME; band "
                                 f"{self.name!r} has EXPTIME={self.exptime!r}")
            scale /= float(self.exptime)
        return scale

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return {k: getattr(self, k) for k in ("index", "name", "shape", "dtype", "role", "bitpix",
                                              "zeropoint", "photflam", "photplam", "exptime")}


def band_role(name: str) -> str:
    """Classify an extension by its companion-style suffix (``G_IVAR`` → ``"ivar"``)."""
    upper = name.upper()
    for suffixes, role in ((IVAR_SUFFIXES, "ivar"), (MASK_SUFFIXES, "mask"),
                           (_WAVELENGTH_SUFFIXES, "wavelength")):
        if any(upper.endswith(s) for s in suffixes):
            return role
    return "flux"


def _float(header: Any, key: str) -> float | None:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def discover_bands(path: Any, *, extra_keys: Sequence[str] = ()) -> list[BandInfo]:
    """The image extensions of 2 or more axes in ``path``, in file order, with their names,
    roles (from name suffixes) and photometric keywords.

    Parameters
    ----------
    path : str or os.PathLike
        A FITS file.
    extra_keys : sequence of str
        More keywords to take a band name from when an HDU has no EXTNAME (after
        ``FILTER`` and ``BAND``).

    Returns
    -------
    list of BandInfo
    """
    index = get_index(path)
    out = []
    for entry in index.entries:
        if not (entry.is_image or entry.kind == KIND_COMPRESSED):
            continue
        bitpix, naxes = entry.image_layout
        shape = tuple(reversed(naxes))
        if len(shape) < 2:
            continue
        header = index.header_view(entry)
        name = entry.extname.strip() if entry.extname else None
        if not name:
            for key in ("FILTER", "BAND", *extra_keys):
                value = header.get(key)
                if value not in (None, ""):
                    name = str(value).strip()
                    break
        name = name or f"HDU{entry.index}"
        zeropoint = next((z for z in (_float(header, k) for k in _ZEROPOINT_KEYS) if z is not None),
                         None)
        out.append(BandInfo(index=entry.index, name=name, shape=shape,
                            dtype=_DTYPES.get(bitpix, f"BITPIX{bitpix}"), role=band_role(name),
                            bitpix=bitpix, zeropoint=zeropoint, photflam=_float(header, "PHOTFLAM"),
                            photplam=_float(header, "PHOTPLAM"), exptime=_float(header, "EXPTIME")))
    return out

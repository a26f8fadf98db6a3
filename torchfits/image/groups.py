"""Random-groups HDUs: GCOUNT groups, each PCOUNT parameters followed by one array, all of BITPIX.

`GroupsImage` reads the arrays as one image of shape (GCOUNT, NAXISn..NAXIS2) (what `read_numpy`
and `open_image` give); `read_groups` adds the parameters, scaled by PSCALn/PZEROn.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .._kernels import _image
from ..errors import HDUTypeError
from ..fits.aliases import HduArg, PathArg
from ..fits.hdu_index import HduIndex, get_index
from ..fits.header import Header
from ..fits.image_plan import groups_layout, groups_plans
from ..fits.paths import parse_path, with_storage_options
from .plain import Image, Region, check_out, decode_region, region_from_key

__all__ = ["GroupsImage", "RandomGroups", "read_groups"]

GROUPS_ENGINE = "groups"  # the key of `Image._engines` for random-groups HDUs


class GroupsImage(Image):
    """The arrays of a random-groups HDU as one image of shape (GCOUNT, NAXISn..NAXIS2).

    Reads, slices, ``out=`` buffers, ``dtype=`` and pickling behave as for `Image`; only the
    groups a slice selects are decoded.
    """

    def __init__(self, source: Any, hdu: Any = 0, *, raw_scale: bool = False,
                 uint64_as_float: bool = False, index: HduIndex | None = None) -> None:
        self._index = index if index is not None else get_index(source)
        self._entry = self._index.resolve(hdu)
        if not self._entry.is_groups:
            raise HDUTypeError(f"{self._index.path}: HDU {self._entry.index} is not a random-groups HDU")
        header = self._index.header_view(self._entry)
        self._plan, self._rows = groups_plans(self._entry, header, raw_scale)
        self._raw_scale, self._uint64_as_float = raw_scale, uint64_as_float

    def _zero_copy_ok(self) -> bool:
        return False  # the arrays are interleaved with the parameters: never one view

    def _cutout_reader(self) -> Any:
        return None

    def prefetch_cutout(self, x0: int, y0: int, x1: int, y1: int) -> None:
        return None  # decode_region fetches the rows of the groups it decodes

    def _decode_groups(self, first: int, step: int, count: int) -> np.ndarray:
        """The arrays of ``count`` groups from ``first`` by ``step``, as (count, N)."""
        _, pcount, n, _ = groups_layout(self._entry)
        region = ((first, pcount), (step, 1), (count, n))
        return decode_region(self._index, self._entry, self._rows, region, None,
                             out_shape=(count, n))

    def _read_native(self, out: Any = None, *, threads: int | None = None,
                     copy: bool = True) -> np.ndarray:
        shape = self.shape
        if out is not None:
            out = check_out(out, shape, self._plan.dtype)
        gcount, pcount, n, _ = groups_layout(self._entry)
        region = ((0, pcount), (1, 1), (gcount, n))
        flat = None if out is None else out.reshape(gcount, n)
        arr = decode_region(self._index, self._entry, self._rows, region, flat, threads,
                            out_shape=(gcount, n))
        return out if out is not None else arr.reshape(shape)

    def _read_region_native(self, region: Region, out_shape: tuple[int, ...],
                            out: Any = None) -> np.ndarray:
        starts, steps, counts = region
        if out is not None:
            out = check_out(out, out_shape, self._plan.dtype)
        groups = self._decode_groups(starts[0], steps[0], counts[0])
        groups = groups.reshape((counts[0],) + self.shape[1:])
        key = (slice(None),) + tuple(slice(s, s + c * st if s + c * st >= 0 else None, st)
                                     for s, st, c in zip(starts[1:], steps[1:], counts[1:]))
        part = groups[key].reshape(out_shape)
        if out is None:
            return np.ascontiguousarray(part)
        np.copyto(out, part)
        return out  # type: ignore[no-any-return]

    def _getitem_native(self, key: Any) -> np.ndarray:
        region, out_shape = region_from_key(self.shape, key)
        return self._read_region_native(region, out_shape)

    def __repr__(self) -> str:
        return (f"GroupsImage(path={self.path!r}, hdu={self.hdu}, shape={self.shape}, "
                f"dtype={self.dtype})")

    def _repr_png_(self) -> bytes | None:
        """None: the group arrays of a random-groups HDU (visibilities, mostly) are no picture."""
        return None


Image._engines[GROUPS_ENGINE] = GroupsImage


def _param_scaling(header: Header, k: int) -> tuple[float, float]:
    scal = header.get(f"PSCAL{k}", 1.0)
    zero = header.get(f"PZERO{k}", 0.0)
    scal = 1.0 if isinstance(scal, bool) or not isinstance(scal, (int, float)) else float(scal)
    zero = 0.0 if isinstance(zero, bool) or not isinstance(zero, (int, float)) else float(zero)
    return scal, zero


class RandomGroups:
    """A random-groups HDU read whole: parameters by name or position, and the arrays.

    Attributes
    ----------
    names : tuple of str
        PTYPEn in order (a name may repeat: AIPS splits one value over two parameters).
    data : numpy.ndarray
        The arrays, shape (GCOUNT, NAXISn..NAXIS2), BSCALE/BZERO/BLANK applied with the image
        dtype rules (docs/images.md).
    header : Header
        The HDU's header.
    """

    def __init__(self, names: tuple[str, ...], parameters: list[np.ndarray], data: np.ndarray,
                 header: Header) -> None:
        self.names = names
        self._parameters = parameters
        self.data = data
        self.header = header

    @property
    def gcount(self) -> int:
        """The number of groups (GCOUNT)."""
        return int(self.data.shape[0])

    @property
    def pcount(self) -> int:
        """The number of parameters per group (PCOUNT)."""
        return len(self._parameters)

    def par(self, key: int | str) -> np.ndarray:
        """One parameter of every group, PSCALn/PZEROn applied.

        ``key`` is a position (0-based) or a PTYPE name (case-insensitive). A name given to
        several parameters returns their sum in float64, as astropy's ``GroupData.par`` does
        (the AIPS convention for a value split over two parameters for precision).
        """
        if isinstance(key, str):
            wanted = key.strip().upper()
            hits = [i for i, n in enumerate(self.names) if n.upper() == wanted]
            if not hits:
                raise KeyError(f"random groups have no parameter {key!r}; the parameters are "
                               f"{list(self.names)}")
            if len(hits) == 1:
                return self._parameters[hits[0]]
            total = self._parameters[hits[0]].astype(np.float64)
            for i in hits[1:]:
                total += self._parameters[i]
            return total  # type: ignore[no-any-return]
        if isinstance(key, bool) or not hasattr(key, "__index__"):
            raise TypeError(f"a parameter is named by position or PTYPE name, not {type(key).__name__}")
        return self._parameters[int(key.__index__())]

    def column_names(self) -> list[str]:
        """One name per parameter (a repeated name gets a ``_`` prefix per earlier use, as
        astropy names its fields) and ``DATA``."""
        seen: dict[str, int] = {}
        out = []
        for name in self.names:
            k = seen.get(name.upper(), 0)
            seen[name.upper()] = k + 1
            out.append("_" * k + name)
        return out + ["DATA"]

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table``: one row per group, one column per parameter and a ``DATA``
        column of nested fixed-size lists (C order) holding each group's array. Needs pyarrow."""
        import pyarrow as pa

        columns: list[Any] = [pa.array(p) for p in self._parameters]
        arr: Any = pa.array(np.ascontiguousarray(self.data).reshape(-1))
        for size in reversed(self.data.shape[1:]):
            arr = pa.FixedSizeListArray.from_arrays(arr, size)
        columns.append(arr)
        return pa.Table.from_arrays(columns, names=self.column_names())

    def __repr__(self) -> str:
        return (f"RandomGroups(gcount={self.gcount}, parameters={list(self.names)}, "
                f"shape={self.data.shape[1:]}, dtype={self.data.dtype})")


def read_groups(source: PathArg, hdu: HduArg = 0, *, raw_scale: bool = False,
                storage_options: dict[str, Any] | None = None) -> RandomGroups:
    """Read a random-groups HDU: every group's parameters and array.

    Parameters
    ----------
    source : str or os.PathLike
        The FITS file (a CFITSIO ``[0]`` suffix is accepted).
    hdu : int or str
        The HDU: random groups live in the primary HDU, so 0.
    raw_scale : bool
        Stored values: no PSCALn/PZEROn on parameters, no BSCALE/BZERO on the arrays.
    storage_options : dict, optional
        fsspec options for URLs (see ``docs/remote.md``).

    Returns
    -------
    RandomGroups
        ``par(name_or_position)``, ``names``, ``data`` (GCOUNT, NAXISn..NAXIS2), ``header``,
        ``to_arrow()``.
    """
    fp = parse_path(with_storage_options(source, storage_options))
    index = get_index(fp.path)
    entry = index.resolve(fp.hdu if fp.hdu is not None and hdu == 0 else hdu)
    if not entry.is_groups:
        raise HDUTypeError(f"{index.path}: HDU {entry.index} is not a random-groups HDU "
                           "(GROUPS=T with NAXIS1=0 in the primary header)")
    image = GroupsImage(fp.path, entry.index, raw_scale=raw_scale, index=index)
    header = index.header(entry)
    gcount, pcount, _, _ = groups_layout(entry)
    stored = replace(image._rows, mode=_image.MODE_RAW, dtype=image._rows.storage_dtype)
    raw = decode_region(index, entry, stored, ((0, 0), (1, 1), (gcount, pcount)), None,
                        out_shape=(gcount, pcount))
    names = []
    params = []
    for k in range(1, pcount + 1):
        name = header.get(f"PTYPE{k}", "")
        names.append(name.strip() if isinstance(name, str) else "")
        values = np.ascontiguousarray(raw[:, k - 1])
        scal, zero = _param_scaling(header, k)
        if not raw_scale and (scal != 1.0 or zero != 0.0):
            values = values.astype(np.float64) * scal + zero
        params.append(values)
    return RandomGroups(tuple(names), params, image.read(), header)

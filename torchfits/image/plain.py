"""Uncompressed images: plan the scaling and the region, then run the decode kernel.

`open_image` gives an open-once `Image` with NumPy-style slicing; `read_numpy` reads a whole HDU.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels import _image
from ..errors import FitsError, HDUTypeError, TooManyAxesError
from ..fits.aliases import HduArg, PathArg
from ..fits.hdu_index import HduEntry, HduIndex, get_index
from ..fits.header import Header
from ..fits.image_plan import ImagePlan, plan_image
from ..fits.paths import FitsPath, parse_path, with_storage_options
from ..fits.settings import mib_from_env
from ..fits.sources import residency
from ..fits.sources.base import faults_seen
from ..fits.threads import default_threads, run_parallel
from .boxes import cut_boxes

_MAX_AXES = 64  # NumPy's limit on array dimensions

__all__ = ["Image", "ImagePlan", "open_image", "read_numpy", "plan_image", "result_dtype", "check_out"]

_PARALLEL_BYTES = 4 << 20  # below this a thread hand-off costs more than it saves
_BAND_BYTES = 8 << 20  # file bytes per band of a whole read that releases its map behind it
_pool_limit = _image.OUTPUT_MEMORY_DEFAULT  # the limit last given to the pool


def output_array(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A new read's output: of 1 MiB and more, memory a dropped output of the same size gave
    back (docs/architecture.md, "Image outputs are recycled"), at most
    ``$TORCHFITS_OUTPUT_POOL_MB`` MiB of them kept (default 256; ``0`` keeps none).

    Raises
    ------
    ValueError
        The variable is not a number >= 0.
    """
    global _pool_limit
    limit = mib_from_env("TORCHFITS_OUTPUT_POOL_MB", _image.OUTPUT_MEMORY_DEFAULT)
    if limit != _pool_limit:
        _image.set_output_memory_limit(limit)
        _pool_limit = limit
    return _image.output_array(tuple(shape), dtype)


# -- regions ------------------------------------------------------------------------------------
Region = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # start, step, count per axis


def full_region(shape: Sequence[int]) -> Region:
    n = len(shape)
    return (0,) * n, (1,) * n, tuple(shape)


def region_from_key(shape: Sequence[int], key: Any) -> tuple[Region, tuple[int, ...]]:
    """NumPy basic indexing → (region, result shape). Ints drop their axis."""
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = len(key) - n_ell
    if n_real > len(shape):
        raise IndexError(f"too many indices for image: image is {len(shape)}-dimensional, "
                         f"but {n_real} were indexed")
    if n_ell:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - n_real) + key[i + 1:]
    key = key + (slice(None),) * (len(shape) - len(key))
    starts, steps, counts, out_shape = [], [], [], []
    for axis, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            starts.append(start if count else 0)
            steps.append(step)
            counts.append(count)
            out_shape.append(count)
            continue
        if k is None or isinstance(k, (bool, np.bool_)) or not hasattr(k, "__index__"):
            raise TypeError("image indices must be integers, slices or Ellipsis, "
                            f"not {type(k).__name__}")
        i = int(k.__index__())
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        starts.append(i % n)
        steps.append(1)
        counts.append(1)
    return (tuple(starts), tuple(steps), tuple(counts)), tuple(out_shape)


def _last_byte(region: Region, shape: Sequence[int], itemsize: int) -> int:
    """One past the highest byte offset (relative to the data start) that the region touches."""
    starts, steps, counts = region
    if any(c == 0 for c in counts):
        return 0
    stride, top = itemsize, 0
    for start, step, count, n in zip(reversed(starts), reversed(steps), reversed(counts),
                                     reversed(shape)):
        top += max(start, start + (count - 1) * step) * stride
        stride *= n
    return top + itemsize


def region_ranges(region: Region, shape: Sequence[int], itemsize: int) -> list[tuple[int, int]]:
    """Byte ranges (relative to the data start) that ``region`` touches: one per row run.

    Many rows collapse into the single span from the first to the last byte touched.
    """
    starts, steps, counts = region
    if not shape or any(c == 0 for c in counts):
        return []
    lead = counts[:-1]
    last_start = starts[-1] + min(0, (counts[-1] - 1) * steps[-1])
    run = (abs(steps[-1]) * (counts[-1] - 1) + 1) * itemsize
    if math.prod(lead) > 4096:
        first = 0
        stride = itemsize
        for start, step, count, n in zip(reversed(starts), reversed(steps), reversed(counts),
                                         reversed(shape)):
            first += min(start, start + (count - 1) * step) * stride
            stride *= n
        return [(first, _last_byte(region, shape, itemsize) - first)]
    strides = [itemsize] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    offsets = np.zeros(1, np.int64)
    for k in range(len(shape) - 1):
        axis = (starts[k] + steps[k] * np.arange(counts[k], dtype=np.int64)) * strides[k]
        offsets = (offsets[:, None] + axis[None, :]).reshape(-1)
    base = last_start * itemsize
    return [(int(o) + base, run) for o in np.sort(offsets)]


def decode_region(index: HduIndex, entry: HduEntry, plan: ImagePlan, region: Region,
                  out: np.ndarray | None, threads: int | None = None,
                  out_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Decode ``region`` of the image into the C-contiguous ``out`` (size already checked), or
    into a new array of ``out_shape`` allocated only once the file is known to hold the bytes."""
    starts, steps, counts = region
    if out is None:
        if all(counts):
            index.check_data(entry, _last_byte(region, plan.shape, plan.storage_dtype.itemsize))
        # recycled (docs/architecture.md, "Image outputs are recycled")
        out = output_array(out_shape if out_shape is not None else counts, plan.dtype)
        if out.size == 0:
            return out
    else:
        if out.size == 0:
            return out
        index.check_data(entry, _last_byte(region, plan.shape, plan.storage_dtype.itemsize))
    if index.lazy:
        buf = index.data_view(entry, region_ranges(region, plan.shape, plan.storage_dtype.itemsize))
    else:
        buf = index.source.buffer()  # the local map: nothing to fetch
    out_bytes = out.reshape(-1).view(np.uint8)
    shape = plan.shape
    if starts == (0,) * len(shape) and steps == (1,) * len(shape) and counts == tuple(shape):
        # A whole image is one long run: split it flat.
        shape, starts, steps, counts = (out.size,), (0,), (1,), (out.size,)
    blank = plan.blank if plan.blank is not None else 0
    args = (plan.bitpix, plan.mode)
    tail: tuple[Any, ...] = (plan.bscale, plan.bzero, plan.blank is not None, blank)
    small = out.nbytes < _PARALLEL_BYTES or counts[0] < 2
    nthreads = 1 if small else default_threads() if threads is None else max(1, int(threads))
    if nthreads == 1:
        _image.decode_region(buf, entry.data_offset, out_bytes, *args, shape, starts, steps,
                             counts, *tail)
        if faults_seen():
            index.source.check()
        return out
    per_row = out.nbytes // counts[0]
    bounds = [counts[0] * k // nthreads for k in range(nthreads + 1)]

    def band(k: int) -> None:
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            return
        _image.decode_region(buf, entry.data_offset, out_bytes[a * per_row:b * per_row], *args,
                             shape, (starts[0] + a * steps[0],) + starts[1:], steps,
                             (b - a,) + counts[1:], *tail)

    run_parallel(band, range(nthreads))
    if faults_seen():
        index.source.check()
    return out


def result_dtype(dtype: Any) -> np.dtype | None:
    """A requested result dtype as a NumPy dtype (None stays None).

    Accepts NumPy dtypes and their names, Python types and ``torch.<dtype>`` objects (read by
    name, so torch is not imported). ``bfloat16`` has no NumPy dtype: ask a tensor reader
    (``torchfits.read(..., dtype=torch.bfloat16)``) for it.
    """
    if dtype is None:
        return None
    if type(dtype).__module__ == "torch" or str(dtype).startswith("torch."):
        dtype = str(dtype).rpartition(".")[2]
    if isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
        raise TypeError("bfloat16 has no NumPy dtype: read a tensor instead "
                        "(torchfits.read(..., dtype=torch.bfloat16) or to_torch(dtype=...))")
    if isinstance(dtype, str) and dtype.lower() in ("half", "fp16"):
        dtype = "float16"
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype {dtype!r} is not a NumPy or torch dtype") from None
    if dt.kind not in "biuf":
        raise TypeError(f"images read as booleans, integers or floats, not {dt}")
    return dt  # type: ignore[no-any-return]


def check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``out`` as an ndarray a read may fill: of ``dtype`` and ``shape``, C-contiguous and writable
    (TypeError or ValueError naming what differs)."""
    arr = out if isinstance(out, np.ndarray) else np.asarray(out)
    if arr.dtype != dtype:
        raise TypeError(f"out has dtype {arr.dtype}, the image reads as {dtype}")
    if arr.shape != shape:
        raise ValueError(f"out has shape {arr.shape}, the image reads as {shape}")
    if not arr.flags.c_contiguous or not arr.flags.writeable:
        raise ValueError("out must be a writable C-contiguous array")
    return arr


# -- the public engine ---------------------------------------------------------------------------
class Image:
    """An open image HDU: metadata up front, pixels decoded on demand (only what is indexed).

    Parameters
    ----------
    source : str or os.PathLike
        The FITS file.
    hdu : int or str
        HDU index or EXTNAME (case-insensitive).
    raw_scale : bool
        Return stored values (storage dtype) instead of physical values.
    """

    #: Engines for other kinds of image HDU, keyed by HDU kind and registered by their own
    #: modules (tile-compressed images by :mod:`.compressed`, which the package imports with this
    #: one), so ``Image(...)`` gives the right engine behind one interface without an import cycle.
    _engines: dict[str, type] = {}

    # Result dtype asked for with `astype` / ``dtype=`` (None: the FITS rules of `plan_image`).
    _out_dtype: np.dtype | None = None
    _raw_scale: bool = False
    _uint64_as_float: bool = False
    # The notebook thumbnail, drawn once: (PNG bytes or None,).
    _thumbnail: tuple[bytes | None] | None = None

    def __new__(cls, source: Any = None, hdu: Any = 0, *, index: HduIndex | None = None,
                **kwargs: Any) -> Image:
        if cls is Image:
            idx = index if index is not None else get_index(source)
            entry = idx.resolve(hdu)
            engine = Image._engines.get("groups" if entry.is_groups else entry.kind)
            if engine is not None:
                return super().__new__(engine)
        return super().__new__(cls)

    def __init__(self, source: Any, hdu: Any = 0, *, raw_scale: bool = False,
                 uint64_as_float: bool = False, index: HduIndex | None = None) -> None:
        self._index = index if index is not None else get_index(source)
        self._entry = self._index.resolve(hdu)
        if not self._entry.is_image:
            raise HDUTypeError(
                f"{self._index.path}: HDU {self._entry.index} is a {self._entry.kind}, not an "
                "image: Could not read image parameters"
            )
        if len(self._entry.naxes) > _MAX_AXES:
            raise TooManyAxesError(
                f"{self._index.path}: HDU {self._entry.index} has {len(self._entry.naxes)} axes; "
                f"NumPy arrays and tensors hold at most {_MAX_AXES} (the FITS standard allows 999)")
        # The parsed header, not the index's first-card structural keywords: a repeated
        # BSCALE/BZERO/BLANK applies its last card and garbled values are refused (as fitsio).
        self._plan = plan_image(self._entry, self._index.header_view(self._entry),
                                raw_scale=raw_scale, uint64_as_float=uint64_as_float)
        self._raw_scale, self._uint64_as_float = raw_scale, uint64_as_float

    # -- pickling: (path, HDU, options); the map is reopened in the receiving process ------------
    def _reopen_args(self) -> dict[str, Any]:
        return {"raw_scale": self._raw_scale, "uint64_as_float": self._uint64_as_float}

    def __reduce__(self) -> Any:
        return (_reopen_image, (self.path, self.hdu, self._reopen_args(), self._out_dtype))

    def astype(self, dtype: Any) -> Image:
        """The same open image whose reads (``read``, slicing, ``to_torch``) give ``dtype``.

        Parameters
        ----------
        dtype : numpy dtype, str, or torch dtype
            The result type (``float16`` included; ``bfloat16`` only through tensor reads).
        """
        clone = copy.copy(self)
        clone.__dict__.pop("_cutouts", None)
        clone.__dict__.pop("_thumbnail", None)
        clone._out_dtype = result_dtype(dtype)
        return clone

    def _want(self, dtype: Any = None) -> np.dtype | None:
        """The dtype to cast decoded pixels to, or None when the decode already gives it."""
        want = result_dtype(dtype) if dtype is not None else self._out_dtype
        return None if want is None or want == self._plan.dtype else want

    def _result(self, arr: np.ndarray, dtype: Any = None) -> np.ndarray:
        want = self._want(dtype)
        return arr if want is None else arr.astype(want)

    @property
    def path(self) -> str:
        return self._index.path

    @property
    def hdu(self) -> int:
        return self._entry.index

    @property
    def shape(self) -> tuple[int, ...]:
        return self._plan.shape

    @property
    def ndim(self) -> int:
        return len(self._plan.shape)

    @property
    def dtype(self) -> np.dtype:
        """The dtype reads give: the requested one, else the FITS rules (docs/images.md)."""
        return self._out_dtype if self._out_dtype is not None else self._plan.dtype

    @property
    def header(self) -> Header:
        return self._index.header(self._entry)

    @property
    def plan(self) -> ImagePlan:
        return self._plan

    def _zero_copy_ok(self) -> bool:
        # Zero copy needs every byte readable; a lazily fetched source decodes what is asked.
        return self._plan.mode == _image.MODE_RAW and self._plan.bitpix == 8 \
            and not self._index.lazy

    def _mapped_bytes(self) -> np.ndarray:
        """The unscaled BITPIX=8 pixels as a read-only view of the file map."""
        n = math.prod(self.shape)
        self._index.check_data(self._entry, n)
        return np.frombuffer(self._index.source.buffer(), np.uint8, n,
                             self._entry.data_offset).reshape(self.shape)

    def read(self, out: Any = None, *, threads: int | None = None, dtype: Any = None,
             copy: bool = True) -> np.ndarray:
        """Decode the whole image (into ``out`` when given).

        ``dtype`` overrides the result type for this call (see `astype`); ``out`` must then
        have that dtype. ``copy=False`` returns unscaled BITPIX=8 pixels as a read-only view of
        the file map (no copy; it shares the file's fate: a later in-place rewrite changes it, a
        truncation turns the lost bytes into zeros). Every other result is owned memory.
        """
        want = self._want(dtype)
        if want is None:
            return self._read_native(out, threads=threads, copy=copy)
        if out is None:
            return self._read_native(None, threads=threads).astype(want)
        out = check_out(out, self.shape, want)
        np.copyto(out, self._read_native(None, threads=threads), casting="unsafe")
        return out  # type: ignore[no-any-return]

    def read_region(self, region: Region, out_shape: tuple[int, ...], out: Any = None, *,
                    dtype: Any = None) -> np.ndarray:
        """Decode ``(starts, steps, counts)`` into an array of ``out_shape``."""
        want = self._want(dtype)
        if want is None:
            return self._read_region_native(region, out_shape, out)
        if out is None:
            return self._read_region_native(region, out_shape).astype(want)
        out = check_out(out, out_shape, want)
        np.copyto(out, self._read_region_native(region, out_shape), casting="unsafe")
        return out  # type: ignore[no-any-return]

    def _read_native(self, out: Any = None, *, threads: int | None = None,
                     copy: bool = True) -> np.ndarray:
        if out is None and not copy and self._zero_copy_ok():
            view = self._mapped_bytes()
            if faults_seen():
                self._index.source.check()
            return view
        if out is not None:
            out = check_out(out, self.shape, self._plan.dtype)
        index, entry, plan = self._index, self._entry, self._plan
        if not index.lazy and index.source.maps_file and len(self.shape) > 1 \
                and entry.data_size >= max(residency.budget(), _BAND_BYTES):
            return self._read_banded(out, threads)
        # Without ``out``, the array is allocated once the file is known to hold the pixels.
        pixels = decode_region(index, entry, plan, full_region(self.shape), out, threads, self.shape)
        # The result is a copy: the image's map pages may leave RSS beyond the residency budget
        # (an epoch over many images keeps RSS bounded; docs/architecture.md, "Bounded memory").
        residency.done(index.source, entry.data_offset, entry.data_size)
        return pixels

    def _read_banded(self, out: np.ndarray | None, threads: int | None) -> np.ndarray:
        """A whole image at least the residency budget, decoded in bands of rows of about
        `_BAND_BYTES` of the file, each band's map pages released once it is decoded: the read
        peaks at the result plus one band, not the result plus the image's map (kept, it would
        displace every other finished range anyway; docs/architecture.md, "Bounded memory")."""
        index, entry, plan, shape = self._index, self._entry, self._plan, self.shape
        index.check_data(entry, math.prod(shape) * plan.storage_dtype.itemsize)
        if out is None:
            out = output_array(shape, plan.dtype)
        row = math.prod(shape[1:]) * plan.storage_dtype.itemsize  # file bytes of one first-axis row
        step = max(1, _BAND_BYTES // max(1, row))
        rest = tuple(shape[1:])
        for a in range(0, shape[0], step):
            b = min(a + step, shape[0])
            region = ((a,) + (0,) * len(rest), (1,) * len(shape), (b - a,) + rest)
            decode_region(index, entry, plan, region, out[a:b], threads)
            residency.release(index.source, entry.data_offset + a * row, (b - a) * row)
        return out

    def _read_region_native(self, region: Region, out_shape: tuple[int, ...],
                            out: Any = None) -> np.ndarray:
        if out is not None:
            out = check_out(out, out_shape, self._plan.dtype)
        return decode_region(self._index, self._entry, self._plan, region, out,
                             out_shape=out_shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        if self._out_dtype is not None:
            return self._result(self._getitem_native(key))
        return self._getitem_native(key)

    def _getitem_native(self, key: Any) -> np.ndarray:
        if self._zero_copy_ok():
            # An owned copy of just the indexed pixels (never a view the file can pull away).
            part = np.array(self._mapped_bytes()[key], copy=True)
            if faults_seen():
                self._index.source.check()
            return part
        if (type(key) is tuple and len(key) == 2 and len(self.shape) == 2
                and type(key[0]) is slice and type(key[1]) is slice
                and key[0].step is None and key[1].step is None):
            # The common cutout img[y0:y1, x0:x1]: one C call does bounds, allocation and copy.
            cutouts = self._cutout_reader()
            if cutouts is not None:
                h, w = self.shape
                y0, y1, _ = key[0].indices(h)
                x0, x1, _ = key[1].indices(w)
                if self._index.lazy:
                    self.prefetch_cutout(x0, y0, x1, y1)
                part = cutouts.cutout(x0, y0, x1, y1)
                if faults_seen():
                    self._index.source.check()
                return part  # type: ignore[no-any-return]
        region, out_shape = region_from_key(self.shape, key)
        return self._read_region_native(region, out_shape)

    def cutouts(self, boxes: Any, *, edge: str = "raise",
                pad_value: Any = None) -> np.ndarray | list[np.ndarray]:
        """Many cutouts at once: box ``i`` is ``image[..., y1:y2, x1:x2]``.

        Boxes of one size inside the image decode in one kernel call (the GIL released) into
        one array, a large batch split among the threads (``$TORCHFITS_THREADS``, else every
        core); compressed images cut box by box through their tile cache.

        Parameters
        ----------
        boxes : array_like of int, shape (N, 4)
            ``(x1, y1, x2, y2)`` per box: 0-based, half-open (the corner convention of
            ``prefetch_cutout`` and `torchfits.data.FitsCutoutDataset`).
        edge : {"raise", "pad", "clamp"}
            A box that leaves the image: raise `CutoutEdgeError` (the default), fill the
            outside with ``pad_value``, or cut the box at the edge (that stamp is smaller).
        pad_value : number, optional
            The fill of ``edge="pad"``: NaN for floating images and 0 for integer ones by
            default.

        Returns
        -------
        numpy.ndarray or list of numpy.ndarray
            An ``(N, *lead, h, w)`` array when every stamp has one shape; a list of arrays when
            boxes differ in size or ``edge="clamp"`` cut one at an edge.
        """
        return cut_boxes(self, boxes, edge=edge, pad_value=pad_value)

    def prefetch_cutout(self, x0: int, y0: int, x1: int, y1: int) -> None:
        """Fetch the rows of the cutout ``[y0:y1, x0:x1]`` (all leading planes) of a lazy source."""
        shape = self.shape
        if len(shape) < 2:
            return
        h, w = shape[-2:]
        x0, x1 = max(0, min(x0, w)), max(0, min(x1, w))
        y0, y1 = max(0, min(y0, h)), max(0, min(y1, h))
        if x1 <= x0 or y1 <= y0:
            return
        lead = shape[:-2]
        region = ((0,) * len(lead) + (y0, x0), (1,) * len(shape), tuple(lead) + (y1 - y0, x1 - x0))
        self._index.data_view(self._entry, region_ranges(region, shape,
                                                          self._plan.storage_dtype.itemsize))

    def _cutout_reader(self) -> Any:
        """The C cutout reader over the file map (None for a file cut short)."""
        reader = self.__dict__.get("_cutouts", False)
        if reader is False:
            e, plan = self._entry, self._plan
            reader = None
            if e.data_offset + e.data_size <= self._index.size:
                reader = _image.CutoutReader(
                    self._index.source.view(), e.data_offset, plan.bitpix, plan.mode, plan.shape,
                    plan.dtype, plan.bscale, plan.bzero, plan.blank is not None,
                    plan.blank if plan.blank is not None else 0)
                watch_residency(reader, self._index.source, e.data_offset, e.data_size)
            self.__dict__["_cutouts"] = reader
        return reader

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.read()
        return arr if dtype is None else arr.astype(dtype)

    def to_torch(self, device: Any = "cpu", dtype: Any = None) -> Any:
        """The whole image as a ``torch.Tensor`` on ``device`` (needs torch).

        ``dtype`` (a torch or NumPy dtype, ``torch.bfloat16`` included) sets the tensor type.
        """
        from .._torch_adapter import image_tensor

        return image_tensor(self, device=device, dtype=dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-dimensional image")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Image(path={self.path!r}, hdu={self.hdu}, shape={self.shape}, dtype={self.dtype})"

    def _repr_png_(self) -> bytes | None:
        """A zscale/asinh thumbnail, longest side 256 px, decoded from a strided sample of the
        pixels (Jupyter); None when it cannot be drawn (no Pillow or torch, fewer than two axes
        longer than 1, no finite pixel, an unreadable file)."""
        cached = self._thumbnail
        if cached is None:
            from .thumbnail import thumbnail_png

            try:
                cached = (thumbnail_png(self),)
            except (FitsError, OSError):  # a display must not raise, even for a vanished file
                cached = (None,)
            self._thumbnail = cached  # Jupyter asks for the PNG and the HTML of one display
        return cached[0]

    def _repr_html_(self) -> str:
        from ..fits.notebook_html import html_summary

        return html_summary("Image", [("path", self.path), ("HDU", self.hdu),
                                      ("shape", self.shape), ("dtype", self.dtype)],
                            self._repr_png_())


def watch_residency(reader: Any, source: Any, offset: int, size: int) -> None:
    """Bound the map pages a cutout loop keeps resident: once an image larger than the residency
    budget has had that many bytes of pages read by ``reader``'s cutouts, its range goes to
    `residency.done` (released beyond the budget; docs/architecture.md, "Bounded memory").
    Images within the budget keep their pages, as whole reads do. On a map with huge pages
    (``source.huge_pages``) a box maps its rows' 2 MiB pages, and they are counted so."""
    limit = residency.budget()
    if source.maps_file and size > limit:
        reader.set_residency(limit, lambda: residency.done(source, offset, size),
                             (2 << 20) if source.huge_pages else 4096)


def _reopen_image(path: str, hdu: int, options: dict[str, Any], out_dtype: np.dtype | None) -> Image:
    """Unpickle an `Image`: reopen (path, HDU) in this process with the same options."""
    img = Image(path, hdu, **options)
    if out_dtype is not None:
        img._out_dtype = out_dtype
    return img


def open_image(source: PathArg, hdu: HduArg | None = None, *, raw_scale: bool = False,
               dtype: Any = None, storage_options: dict[str, Any] | None = None) -> Image:
    """Open an image HDU for NumPy-style slicing; only the indexed pixels are decoded.

    Parameters
    ----------
    source : str or os.PathLike
        The FITS file.
    hdu : int, str, (str, int) or None
        HDU index, EXTNAME (case-insensitive) or (EXTNAME, EXTVER); default: the first HDU
        with data (as ``fitsio.read`` and ``astropy.io.fits.getdata``), an error if that is a
        table.
    raw_scale : bool
        Return stored values instead of physical ones.
    dtype : numpy dtype, str or torch dtype, optional
        Result type of every read (see `Image.astype`); default: the FITS rules.
    storage_options : dict, optional
        fsspec options for URLs plus torchfits's remote options (see ``docs/remote.md``).

    Returns
    -------
    Image
        Picklable: it pickles as (path, HDU, options) and reopens the file where it is
        unpickled (DataLoader workers, fork or spawn).
    """
    fp = parse_path(with_storage_options(source, storage_options))
    if fp.section is not None:
        raise ValueError(f"open_image takes no image section ({source!r}): slice the Image instead")
    index, k = _native_hdu(fp, hdu)
    img = Image(fp.path, k, raw_scale=raw_scale, index=index)
    return img if dtype is None else img.astype(dtype)


def _suffix_hdu(fp: FitsPath, hdu: Any, default: Any) -> Any:
    """The HDU a CFITSIO suffix (``file.fits[1]``, ``[SCI]``) names, unless ``hdu`` was given."""
    if fp.hdu is None:
        return hdu
    if hdu != default and hdu != fp.hdu:
        raise ValueError(f"{fp.path}: the path selects HDU {fp.hdu!r} and hdu={hdu!r} another")
    return fp.hdu


def _native_hdu(fp: FitsPath, hdu: Any) -> tuple[HduIndex, int]:
    """The index and HDU number a native image read uses: the one named (argument or path
    suffix), else the first HDU with data. That one being a table is an error naming it."""
    index = get_index(fp.path)
    wanted = _suffix_hdu(fp, hdu, None)
    entry = index.resolve(wanted, first_with_data=True)
    if wanted is None and entry.is_table:
        name = f" ({entry.extname})" if entry.extname else ""
        raise HDUTypeError(
            f"{index.path}: no hdu given and the first HDU with data, HDU {entry.index}{name}, is "
            f"{'an ASCII' if entry.kind == 'table' else 'a binary'} table: image reads need an "
            "image HDU (pass hdu=), tables read with torchfits.scan")
    return index, entry.index


def read_numpy(source: PathArg, hdu: HduArg | None = None, *, raw_scale: bool = False,
               out: Any = None, threads: int | None = None, dtype: Any = None, copy: bool = True,
               storage_options: dict[str, Any] | None = None) -> np.ndarray:
    """Read a whole image HDU into a NumPy array.

    Parameters
    ----------
    source : str or os.PathLike
        The FITS file; a CFITSIO suffix selects the HDU (``f.fits[1]``, ``f.fits[SCI]``) and an
        image section (``f.fits[1][11:74,21:84]``, 1-based, inclusive, optional ``:step``).
    hdu : int, str, (str, int) or None
        HDU index, EXTNAME (case-insensitive) or (EXTNAME, EXTVER); default: the first HDU
        with data (as ``fitsio.read`` and ``astropy.io.fits.getdata``), an error if that is a
        table.
    raw_scale : bool
        Return stored values in the storage dtype instead of physical values.
    out : numpy.ndarray, optional
        A writable C-contiguous array of the result shape and dtype to read into.
    threads : int, optional
        Decode threads for large images (default: all cores).
    dtype : numpy dtype, str or torch dtype, optional
        Result type (``float16`` included). Default: the FITS rules. ``bfloat16`` has no
        NumPy dtype and raises ``TypeError``; tensor reads give it.
    copy : bool
        ``False`` lets an unscaled BITPIX=8 image come back as a read-only zero-copy view of the
        file map, which shares the file's fate (an in-place rewrite changes it; bytes lost to a
        truncation read as zeros). Other images are always decoded into owned memory.
    storage_options : dict, optional
        fsspec options for URLs plus torchfits's remote options (see ``docs/remote.md``).

    Returns
    -------
    numpy.ndarray
        Physical values with the dtype rules of docs/images.md, in owned memory by default.
    """
    fp = parse_path(with_storage_options(source, storage_options))
    index, k = _native_hdu(fp, hdu)
    img = Image(fp.path, k, raw_scale=raw_scale, index=index)
    if fp.section is None:
        return img.read(out, threads=threads, dtype=dtype, copy=copy)
    region, shape = region_from_key(img.shape, fp.section)
    return img.read_region(region, shape, out=out, dtype=dtype)

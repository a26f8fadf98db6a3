"""The torchfits 1.x read functions (docs/compatibility.md) over the native image engine.

Thin by design: argument checks, 1.x error wording and the torch conversion; decoding is the
engine's (`torchfits.image`). Table HDUs are handed to `torchfits.table`.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .._kernels import _image
from .._torch_adapter import image_tensor, to_tensor, validate_device
from ..errors import FitsError, HDUNotFoundError, HDUTypeError
from ..fits.aliases import DeviceArg, HduArg, InputArg, MmapArg, TensorRead
from ..fits.hdu_index import check_hdu_arg, get_index
from ..fits.paths import FitsPath, display_name, fspath, parse_path, with_storage_options
from ..fits.section_header import section_header
from ..fits.sources.base import faults_seen
from ..image.compressed import CompressedImage
from ..image.plain import Image, region_from_key, watch_residency
from .common import check_mmap

if TYPE_CHECKING:  # typing only: torch stays optional
    import torch

    from ..fits.header import Header

__all__ = [
    "read",
    "read_tensor",
    "read_hdus",
    "read_batch",
    "read_batch_info",
    "read_subset",
    "open_subset_reader",
    "SubsetReader",
    "cache_subsystem_policy",
    "clear_cache_subsystem",
]

_READ_OPTIONS: dict[str, Any] = {
    "fp16": False,
    "bf16": False,
    "raw_scale": False,
    "scale_on_device": True,
    "use_cache": None,
    "columns": None,
    "start_row": 1,
    "num_rows": -1,
    "cache_capacity": 10,
    "handle_cache_capacity": None,
    "fast_header": True,
    "storage_options": None,
}


def _reraise(exc: FitsError, prefix: str) -> FitsError:
    """The same error class with torchfits 1.x context in front of the message."""
    new = type(exc)(f"{prefix}{exc}")
    new.__cause__ = exc.__cause__
    return new


def _check_dtype(dtype: Any, fp16: bool, bf16: bool) -> None:
    if dtype is not None and (fp16 or bf16):
        raise ValueError("give either dtype= or fp16/bf16, not both")


def _cast_columns(result: Any, dtype: Any) -> Any:
    """``dtype=`` on a table read: floating columns take it (others keep their type)."""
    from .._torch_adapter import torch_dtype

    tdt = torch_dtype(dtype)
    cols = result[0] if isinstance(result, tuple) else result
    for name, t in list(cols.items()):
        if getattr(t, "is_floating_point", lambda: False)():
            cols[name] = t.to(tdt)
    return result


def _half(fp16: bool, bf16: bool) -> str | None:
    # As torchfits 1.2.3 resolves them: bf16 wins when both are given.
    return "bf16" if bf16 else ("fp16" if fp16 else None)


def _image_tensor(fp: FitsPath, hdu: Any, *, device: str, raw_scale: bool, half: str | None,
                  allow_auto: bool = False, out: Any = None, dtype: Any = None) -> tuple[Any, Image]:
    index = get_index(fp.path)
    entry = index.resolve(fp.hdu if fp.hdu is not None and hdu in (0, None, "auto") else hdu,
                          allow_auto=allow_auto)
    img = Image(fp.path, entry.index, raw_scale=raw_scale, uint64_as_float=True, index=index)
    if dtype is not None:
        # Decoded straight into the requested type when NumPy has it (bfloat16: via float32).
        tensor = image_tensor(img, device, dtype, key=fp.section)
        if out is not None:
            _check_out_tensor(out, tensor)
            out.copy_(tensor)
            return out, img
        return tensor, img
    if out is not None and half is None:
        return _read_into(out, lambda buf: img.read(buf) if fp.section is None
                          else img.read_region(*_section_region(img, fp.section), out=buf)), img
    arr = img.read() if fp.section is None else img[fp.section]
    if not arr.flags.writeable:
        arr = arr.copy()  # tensors are writable; the file map is not
    tensor = to_tensor(arr, device, half=half)
    if out is not None:
        _check_out_tensor(out, tensor)
        out.copy_(tensor)
        return out, img
    return tensor, img


def _header_of(img: Image, fp: FitsPath) -> Any:
    """The header 1.x returns: the HDU's header as stored (for a tile-compressed image the binary
    table's, with ZIMAGE, ZCMPTYPE, ..., as `read_header` gives it); for a section suffix, the
    section's image header (NAXISn, CRPIX and the WCS follow)."""
    if fp.section is None:
        return img.compressed_header if isinstance(img, CompressedImage) else img.header
    (starts, steps, counts), _ = _section_region(img, fp.section)
    return section_header(img.header, starts, steps, counts)


def _section_region(img: Image, key: Any) -> tuple[Any, tuple[int, ...]]:

    return region_from_key(img.shape, key)


def _check_out_tensor(out: Any, result: Any) -> None:
    if tuple(out.shape) != tuple(result.shape) or out.dtype != result.dtype:
        raise ValueError(f"out has shape {tuple(out.shape)} and dtype {out.dtype}; the read gives "
                         f"{tuple(result.shape)} {result.dtype}")


def _read_into(out: Any, fill: Callable[[np.ndarray], Any]) -> Any:
    """Decode straight into a caller's tensor (CPU: its memory; elsewhere: via the host)."""
    from .._torch_adapter import is_tensor, tensor_to_numpy

    if not is_tensor(out):
        raise TypeError("out must be a torch.Tensor")
    if out.device.type == "cpu" and out.is_contiguous():
        fill(out.numpy())
        return out
    host = np.empty(tuple(out.shape), tensor_to_numpy(out[:0] if out.dim() else out).dtype)
    fill(host)
    out.copy_(to_tensor(host, "cpu"))
    return out


def _check_path_list(paths: Any) -> None:
    """Every item of a path list is a path (str or PathLike), checked before any file is opened."""
    if not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise ValueError("Path must be a string or list of strings")


def _validate_hdu_arg(hdu: Any) -> None:
    if isinstance(hdu, str) and hdu.lower() == "auto":
        raise ValueError("hdu must be a non-negative integer or an EXTNAME; use read() for hdu='auto'")
    if hdu is None or isinstance(hdu, float):
        raise ValueError("hdu must be an integer or string")
    check_hdu_arg(hdu)


def _name_error(exc: HDUNotFoundError, hdu: Any) -> HDUNotFoundError:
    if isinstance(hdu, str):
        return HDUNotFoundError(f"{exc} (Could not resolve HDU name '{hdu}')")
    return exc


def read_tensor(path: InputArg, hdu: HduArg = 0, device: DeviceArg = "cpu", mmap: MmapArg = True,
                fp16: bool = False,
                bf16: bool = False, raw_scale: bool = False, return_header: bool = False,
                fallback_get_header: Callable | None = None, *, out: torch.Tensor | None = None,
                dtype: Any = None, storage_options: dict | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, Header]:
    """Read an image HDU into a ``torch.Tensor`` (or ``(tensor, Header)``).

    ``out`` is a preallocated tensor of the result shape and dtype to read into (returned).
    ``dtype`` (a torch or NumPy dtype; ``torch.bfloat16`` and ``torch.float16`` included)
    sets the result type. ``fallback_get_header`` is accepted for compatibility and ignored.
    ``storage_options`` go to fsspec for URLs (see ``docs/remote.md``).
    """
    _check_dtype(dtype, fp16, bf16)
    _validate_hdu_arg(hdu)
    device = validate_device(device)
    check_mmap(mmap)
    fp = parse_path(with_storage_options(path, storage_options))
    try:
        tensor, img = _image_tensor(fp, hdu, device=device, raw_scale=raw_scale, half=_half(fp16, bf16),
                                    out=out, dtype=dtype)
    except HDUNotFoundError as exc:
        raise _name_error(exc, hdu) from None
    return (tensor, _header_of(img, fp)) if return_header else tensor


def read(path: InputArg | Sequence[InputArg], hdu: HduArg | None | Sequence[HduArg] = 0,
         device: DeviceArg = "cpu", mmap: MmapArg = "auto", mode: str = "auto",
         options: dict | None = None, return_header: bool = False, *,
         out: torch.Tensor | None = None, dtype: Any = None, **kwargs: Any) -> TensorRead:
    """Read an image or table HDU (torchfits 1.x ``read``).

    Images → ``torch.Tensor`` (dtype rules of docs/images.md); tables → ``dict`` of
    tensors. ``path`` may be a list of paths and ``hdu`` a list of HDUs (both return lists).
    ``dtype`` (torch or NumPy dtype, ``torch.bfloat16``/``torch.float16`` included) sets the
    image tensor type; on tables it applies to the floating-point columns.
    """
    opts = dict(_READ_OPTIONS)
    if options is not None:
        overlap = set(options) & set(kwargs)
        if overlap:
            raise TypeError(f"read() got options given twice: {sorted(overlap)}")
        kwargs = {**options, **kwargs}
    unknown = set(kwargs) - set(_READ_OPTIONS)
    if unknown:
        raise TypeError(f"read() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if kwargs.get("handle_cache_capacity") is not None:
        import warnings

        warnings.warn("handle_cache_capacity is deprecated and ignored", DeprecationWarning, stacklevel=2)
    opts.update(kwargs)
    if mode not in ("auto", "image", "table"):
        raise ValueError("mode must be 'auto', 'image' or 'table'")
    if mode == "image" and (opts["columns"] is not None or opts["start_row"] != 1 or opts["num_rows"] != -1):
        raise ValueError("table options (columns, start_row, num_rows) cannot be used with mode='image'")
    device = validate_device(device)
    check_mmap(mmap)
    check_hdu_arg(hdu)
    if isinstance(path, (list, tuple)):
        if isinstance(hdu, (list, tuple)):
            raise ValueError("Batch read requires a single integer HDU")
        _check_path_list(path)
        return [read(p, hdu, device, mmap, mode, None, return_header, dtype=dtype, **kwargs)
                for p in path]
    if isinstance(path, str) and not path:
        raise ValueError("Path must be a non-empty string")
    if path is None or isinstance(path, (int, float, dict)):
        raise ValueError("Path must be a string or list of strings")
    if isinstance(hdu, (list, tuple)):
        return [read(path, h, device, mmap, mode, None, return_header, dtype=dtype, **kwargs)
                for h in hdu]
    fp = parse_path(with_storage_options(path, opts["storage_options"]))
    prefix = f"Failed to read FITS file '{display_name(fp.path)}': "
    try:
        index = get_index(fp.path)
        entry = index.resolve(fp.hdu if fp.hdu is not None and hdu in (0, None, "auto") else hdu,
                              allow_auto=True)
        if entry.is_table:
            if mode == "image":
                raise HDUTypeError(
                    f"{fp.path}: HDU {entry.index} is a table: Could not read image parameters")
            from . import table

            result = table.read_torch_for_read(fp.path, entry.index, device=device, opts=opts,
                                               return_header=return_header)
            return result if dtype is None else _cast_columns(result, dtype)
        if mode == "table":
            raise HDUTypeError(f"{fp.path}: HDU {entry.index} is an image: Failed to get table dimensions")
        _check_dtype(dtype, opts["fp16"], opts["bf16"])
        tensor, img = _image_tensor(fp, entry.index, device=device, raw_scale=opts["raw_scale"],
                                    half=_half(opts["fp16"], opts["bf16"]), out=out, dtype=dtype)
    except HDUNotFoundError as exc:
        raise _reraise(_name_error(exc, hdu), prefix) from None
    except FitsError as exc:
        raise _reraise(exc, prefix) from None
    return (tensor, _header_of(img, fp)) if return_header else tensor


def read_hdus(path: Any, hdus: Any, *, device: Any = "cpu", mmap: Any = True,
              return_header: bool = False) -> Any:
    """Read several image HDUs of one file: ``list[Tensor]`` (and ``list[Header]``)."""
    if not isinstance(hdus, (list, tuple)) or not hdus:
        raise ValueError("hdus must be a non-empty list/tuple of HDU indices or EXTNAMEs")
    check_hdu_arg(hdus)
    tensors, headers = [], []
    for h in hdus:
        t, hdr = read_tensor(path, h, device=device, mmap=mmap, return_header=True)
        tensors.append(t)
        headers.append(hdr)
    return (tensors, headers) if return_header else tensors


def read_batch(file_paths: Any, hdu: Any = 0, device: Any = "cpu", *, strict: bool = False) -> list:
    """One tensor per path, in order; a failing path raises (never a shorter list)."""
    validate_device(device)
    paths = list(file_paths)
    _check_path_list(paths)
    check_hdu_arg(hdu)
    out = []
    for i, p in enumerate(paths):
        try:
            out.append(read(p, hdu, device=device))
        except Exception as exc:
            if strict:
                if isinstance(exc, FitsError):
                    raise _reraise(exc, f"Error reading {fspath(p)}: ") from None
                raise
            raise RuntimeError(
                f"read_batch: failed to read '{fspath(p)}' ({i} of {len(paths)} files read before "
                f"the failure): {exc}"
            ) from exc
    return out


def read_batch_info(file_paths: Any) -> dict[str, int]:
    """``{"num_files", "existing_files"}``; local paths only, filters stripped; opens nothing."""
    paths = list(file_paths)
    existing = 0
    for p in paths:
        text = fspath(p)
        if "://" in text or text.startswith(("vos:", "vault:")):
            continue
        if os.path.isfile(text) or os.path.isfile(text.split("[", 1)[0]):
            existing += 1
    return {"num_files": len(paths), "existing_files": existing}


def _clamp(v: int, n: int) -> int:
    return 0 if v < 0 else (n if v > n else v)


class SubsetReader(_image.CutoutReader):
    """An image HDU opened once for many rectangular cutouts (torchfits 1.x
    ``open_subset_reader``): the file is mapped once and each call copies only the rows the
    cutout touches. Coordinates are 0-based, half-open, clamped to the image.

    It extends the kernel's cutout reader so that the common call (a complete local file, a CPU
    tensor, no ``out``) runs in C from the call itself: clamp, allocate, decode, fault check and
    tensor wrap; every other call goes through :meth:`read_subset`."""

    def __init__(self, path: Any, hdu: Any = 0, device: Any = "cpu", *,
                 storage_options: dict | None = None) -> None:
        self._device = validate_device(device)
        check_hdu_arg(hdu)
        fp = parse_path(with_storage_options(path, storage_options))
        index = get_index(fp.path)
        try:
            entry = index.resolve(fp.hdu if fp.hdu is not None and hdu == 0 else hdu)
        except HDUNotFoundError as exc:
            raise _name_error(exc, hdu) from None
        self._image = Image(fp.path, entry.index, uint64_as_float=True, index=index)
        if self._image.ndim < 2:
            raise HDUTypeError("SubsetReader requires at least 2D image HDU")
        plan = self._image.plan
        self.hdu = entry.index
        self.shape = plan.shape
        self._closed = False
        self._lazy = index.lazy
        self._complete = entry.data_offset + entry.data_size <= index.size
        self._lead = plan.shape[:-2]
        self._cut_ok = not getattr(self._image, "is_compressed", False)
        if not self._cut_ok:
            # Tile-compressed: cutouts go through the image's tile cache (read_region).
            self._complete = False
        else:
            _image.CutoutReader.__init__(
                self, index.source.view(), entry.data_offset, plan.bitpix, plan.mode, plan.shape,
                plan.dtype, plan.bscale, plan.bzero, plan.blank is not None,
                plan.blank if plan.blank is not None else 0)
            watch_residency(self, index.source, entry.data_offset, entry.data_size)
        self._fast = self._device == "cpu" and plan.dtype != np.uint64
        if self._fast:
            from .._torch_adapter import require_torch

            self._from_numpy = require_torch().from_numpy
            if self._complete and not self._lazy:
                self.set_result(self._from_numpy, faults_seen, index.source.check)

    def read_subset(self, x1: int, y1: int, x2: int, y2: int, *, out: Any = None) -> Any:
        """The cutout ``[y1:y2, x1:x2]`` of the last two axes (all leading planes); with
        ``out``, decoded into that tensor and returned."""
        if self._closed:
            raise RuntimeError("SubsetReader is closed")
        if out is not None:
            return self._read_subset_into(out, x1, y1, x2, y2)
        if self._complete:
            if self._lazy:
                self._image.prefetch_cutout(x1, y1, x2, y2)
            out = self.cutout(x1, y1, x2, y2)
            if faults_seen():
                self._image._index.source.check()
        else:
            out = self._truncated_cutout(x1, y1, x2, y2)
        if self._fast:
            return self._from_numpy(out)
        return to_tensor(out, self._device)

    def _region(self, x1: int, y1: int, x2: int, y2: int) -> tuple[Any, tuple[int, ...]]:
        """The clamped cutout as an image region (all leading planes) and its shape."""
        h, w = self.shape[-2:]
        x1, x2, y1, y2 = _clamp(x1, w), _clamp(x2, w), _clamp(y1, h), _clamp(y2, h)
        shape = self._lead + (max(0, y2 - y1), max(0, x2 - x1))
        return ((0,) * len(self._lead) + (y1, x1), (1,) * len(self.shape), shape), shape

    def _read_subset_into(self, out: Any, x1: int, y1: int, x2: int, y2: int) -> Any:
        region, shape = self._region(x1, y1, x2, y2)
        if tuple(out.shape) != shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, the cutout is {shape}")
        return _read_into(out, lambda buf: self._image.read_region(region, shape, out=buf))

    def _truncated_cutout(self, x1: int, y1: int, x2: int, y2: int) -> np.ndarray:
        """Cutouts of a file cut short: the rows present read fine, the rest raise."""
        return self._image.read_region(*self._region(x1, y1, x2, y2))

    def close(self) -> None:
        self._closed = True
        self.set_result(None)  # calls now reach read_subset, which refuses

    def __enter__(self) -> SubsetReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SubsetReader(hdu={self.hdu}, shape={self.shape}, {state})"


def open_subset_reader(path: InputArg, hdu: HduArg = 0, device: DeviceArg = "cpu", *,
                       storage_options: dict | None = None) -> SubsetReader:
    """Open an image HDU once for many cutouts (see `SubsetReader`); for a URL each cutout
    fetches only the rows it touches."""
    return SubsetReader(path, hdu, device, storage_options=storage_options)


def read_subset(path: InputArg, hdu: HduArg, x1: int, y1: int, x2: int, y2: int, *,
                out: torch.Tensor | None = None,
                storage_options: dict | None = None) -> torch.Tensor:
    """One cutout ``[y1:y2, x1:x2]`` (0-based, half-open, clamped) of the last two axes;
    ``out`` is an optional tensor to decode into."""
    with SubsetReader(path, hdu, storage_options=storage_options) as reader:
        return reader.read_subset(x1, y1, x2, y2, out=out)


# -- 1.x cache subsystem names ------------------------------------------------------------------
_SUBSYSTEMS = ("all", "fits_header_hdu_metadata", "fits_header_metadata", "fits_image_data",
               "fits_table_data")


def cache_subsystem_policy(name: str) -> dict[str, Any]:
    """Describe how a 1.x cache subsystem maps onto this engine's single metadata cache."""
    if name not in _SUBSYSTEMS:
        raise KeyError(name)
    holds = name in ("all", "fits_header_hdu_metadata", "fits_header_metadata")
    return {"name": name, "cached": holds, "validated_by": "stat (path, inode, size, mtime_ns)"}


def clear_cache_subsystem(name: str) -> None:
    """Clear one 1.x cache subsystem (data caches do not exist: pixels are read from the map)."""
    from ..fits.hdu_index import clear_index_cache

    if name not in _SUBSYSTEMS:
        raise KeyError(name)
    if name in ("all", "fits_header_hdu_metadata", "fits_header_metadata"):
        clear_index_cache(stats=False)

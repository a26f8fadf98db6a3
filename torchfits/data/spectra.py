"""1-D spectra from image HDUs or table columns, one or several arms per file."""
from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, Callable

import numpy as np
import torch

from .._torch_adapter import NullValue, apply_null_rule, check_null_options, mask_name, validate_device
from ..errors import HDUTypeError
from ..fits.paths import fspath
from ..tables.scan import scan, tensor_null_columns
from .hdus import FileHdus, check_hdu
from .loader import finish_batch, item_position
from .readers import batch_images, image_reader, to_tensor_batch, validity_mask
from .resume import EpochMixin
from .sharding import check_even, file_order, reservoir, resolve_rank
from .sources import index_of, table_source, with_cache_dir

__all__ = ["FitsSpectrumDataset", "FitsSpectrumIterableDataset"]

_LAYOUTS = ("dict", "stack", "concat")


class _SpectrumPayloads(FileHdus):
    def _setup_spectra(self, paths: Any, hdu: Any, ivar_hdu: Any, mask_hdu: Any, column: Any,
                       ivar_column: Any, mask_column: Any, wavelength_column: Any,
                       wavelength_hdu: Any, row: Any, layout: str, transform: Any, device: Any,
                       mmap: Any, cache_dir: Any, mask_is_dq: bool, bad_bits: Any,
                       storage_options: Any, null_value: NullValue = None,
                       masks: bool = False) -> None:
        self._setup_hdus(paths, hdu, ivar_hdu, mask_hdu, storage_options)
        if wavelength_hdu is not None:
            check_hdu(wavelength_hdu)
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
        if row is not None and (isinstance(row, bool) or not isinstance(row, int) or row < 0):
            raise ValueError("row must be a non-negative integer (0-based) or None")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.column, self.ivar_column, self.mask_column = column, ivar_column, mask_column
        self.wavelength_column, self.wavelength_hdu = wavelength_column, wavelength_hdu
        self.row, self.layout, self.transform = row, layout, transform
        self.device = validate_device(device)
        self.mmap = mmap
        self.cache_dir = None if cache_dir is None else fspath(cache_dir)
        self.storage_options = with_cache_dir(self.storage_options, self.cache_dir)
        self.mask_is_dq, self.bad_bits = bool(mask_is_dq), bad_bits
        # The null rule of the native torch routes (docs/training.md, "Nulls"), on table parts.
        self.null_value, self.masks = null_value, bool(masks)
        names = [c for c in (column, ivar_column, mask_column, wavelength_column) if c is not None]
        check_null_options(null_value, False, names, {}, type(self).__name__)

    def _column(self, path: str, hdu: Any,
                name: str | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One table column as a tensor, after the null rule, and its validity
        tensor (``masks=True`` and an integer or logical column) or None."""
        if name is None:
            raise ValueError(f"{path}: HDU {hdu!r} is a table: give column= (and ivar_column=, "
                             "mask_column=, wavelength_column= for the companions)")
        rows = None if self.row is None else [self.row]
        scanner = scan(table_source(path, self.storage_options), hdu, columns=[name], rows=rows)
        asked, name = name, scanner.projection[0]  # the table's spelling
        fill = self.null_value
        if isinstance(fill, Mapping) and asked in fill:
            fill = {name: fill[asked]}
        nullable = tensor_null_columns(scanner.sources, scanner.schema, [name])
        raw = scanner.to_numpy()[name]
        if self.masks and name not in nullable and np.asarray(raw).dtype.kind in "biu":
            # Every integer or logical part gets its mask, so items of files with and without
            # a TNULL have the same keys.
            nullable[name] = (np.asarray(raw).dtype, "")
        cols = apply_null_rule({name: raw}, nullable, null_value=fill,
                               masks=self.masks, where=scanner.sources[0].label)
        arrays = [cols[name]] + ([cols[mask_name(name)]] if mask_name(name) in cols else [])
        out = []
        for arr in arrays:
            arr = np.asarray(arr)
            if arr.ndim > 1 and arr.shape[0] == 1:
                arr = arr[0]  # one row of a vector column: the spectrum itself
            out.append(torch.from_numpy(np.array(arr, order="C")).to(self.device))  # owned, writable
        return out[0], (out[1] if len(out) > 1 else None)

    def _arm(self, path: str, k: int, hdus: list[Any]) -> dict[str, torch.Tensor]:
        hdu = hdus[k]
        index = index_of(path, self.storage_options)
        is_table = index.resolve(hdu).is_table
        out: dict[str, torch.Tensor] = {}
        valid: dict[str, torch.Tensor] = {}

        def table_part(h: Any, column: str | None, part: str) -> torch.Tensor:
            t, ok = self._column(path, h, column)
            if ok is not None:
                valid[mask_name(part)] = ok
            return t

        def companion(hdus: list | None, column: str | None,
                      part: str) -> torch.Tensor | None:
            if hdus is not None:
                h = hdus[k] if len(hdus) > 1 else hdus[0]
                if index.resolve(h).is_table:
                    return table_part(h, column, part)
                return self._pixels(path, h)
            if is_table and column is not None:
                return table_part(hdu, column, part)
            return None

        out["flux"] = table_part(hdu, self.column, "flux") if is_table else \
            self._pixels(path, hdu)
        ivar = companion(self.ivar_hdus, self.ivar_column, "ivar")
        if ivar is not None:
            out["ivar"] = ivar
        mask = companion(self.mask_hdus, self.mask_column, "mask")
        if mask is not None:
            out["mask"] = validity_mask(mask, is_dq=self.mask_is_dq, bad_bits=self.bad_bits)
        wave = companion(None if self.wavelength_hdu is None else [self.wavelength_hdu],
                         self.wavelength_column, "wavelength")
        if wave is not None:
            out["wavelength"] = wave
        out.update(valid)
        for key, t in out.items():
            if key in valid:
                continue
            if key != "flux" and key != "wavelength" and tuple(t.shape) != tuple(out["flux"].shape):
                raise ValueError(f"{path}: {key} has shape {tuple(t.shape)} but the flux has shape "
                                 f"{tuple(out['flux'].shape)}")
        return out

    def _pixels(self, path: str, hdu: Any) -> torch.Tensor:
        if self.row is not None:
            return self._image_row(path, hdu)
        # The batch decoder on one file (a plain primary image is one pread, no `Image`).
        arr = batch_images([path], hdu, self.storage_options)
        assert arr is not None  # one file cannot disagree with itself
        return to_tensor_batch(arr, None, self.device)[0]

    def _image_row(self, path: str, hdu: Any) -> torch.Tensor:
        """Row ``self.row`` of a 2-D image HDU (one spectrum per row, the DESI layout: only that
        row is read); a 1-D image (a shared wavelength grid) whole."""
        row = self.row
        assert row is not None  # only called with row=
        img = image_reader(path, hdu, self.storage_options)
        shape = tuple(img.shape)
        if len(shape) == 1:
            arr = img[:]
        elif len(shape) == 2:
            if row >= shape[0]:
                raise IndexError(f"{path}: HDU {hdu!r} has {shape[0]} spectra (rows), row={row} "
                                 "is past the end")
            arr = img[row]
        else:
            raise ValueError(f"{path}: HDU {hdu!r} has shape {shape}; row= picks one row of a 2-D "
                             "image (one spectrum per row) or of a table column")
        return torch.from_numpy(np.array(arr, order="C")).to(self.device)

    def _arm_name(self, path: str, k: int) -> str:
        entry = index_of(path, self.storage_options).resolve(self.hdus[k])
        return entry.extname or str(self.hdus[k])

    def _payload(self, path: str) -> Any:
        payload = self._arms(*self._target(path))
        return self.transform(payload) if self.transform is not None else payload

    def _image_parts(self) -> dict[str, Any] | None:
        """``{key: HDU}`` of a single-arm spectrum whose flux and companions are all image
        HDUs of every file (what a batch decodes at once), or None."""
        if len(self.hdus) != 1 or len(self.files) == 0:
            return None
        parts = {"flux": self.hdus[0]}
        if self.ivar_hdus is not None:
            parts["ivar"] = self.ivar_hdus[0]
        if self.mask_hdus is not None:
            parts["mask"] = self.mask_hdus[0]
        if self.wavelength_hdu is not None:
            parts["wavelength"] = self.wavelength_hdu
        return parts

    def _batch(self, paths: list[str]) -> dict[str, torch.Tensor] | None:
        """The payloads of ``paths`` stacked (``{"flux": (N, nwave), ...}``), each part decoded
        into one array (plain primary images read with one ``pread`` per file), or None where
        the files take the per-item path: table HDUs, several arms, parts whose shapes differ
        between files or from the flux."""
        parts = self._image_parts()
        if parts is None or self.row is not None or not paths or any(p in self._targets for p in paths):
            return None  # suffixed paths (each its own HDU) go item by item
        out: dict[str, torch.Tensor] = {}
        for key, hdu in parts.items():
            try:
                arr = batch_images(paths, hdu, self.storage_options)
            except HDUTypeError:
                return None  # a table HDU: its columns are read file by file
            if arr is None:
                return None
            t = to_tensor_batch(arr, None, self.device)
            if key in ("ivar", "mask") and tuple(t.shape) != tuple(out["flux"].shape):
                return None  # the per-item path names the file and both shapes
            out[key] = validity_mask(t, is_dq=self.mask_is_dq, bad_bits=self.bad_bits) \
                if key == "mask" else t
        return out

    def _arms(self, path: str, hdus: list[Any]) -> Any:
        arms = [self._arm(path, k, hdus) for k in range(len(hdus))]
        if len(arms) == 1:
            payload: Any = arms[0]
        elif self.layout == "dict":
            payload = {self._arm_name(path, k): a for k, a in enumerate(arms)}
        else:
            keys = [k for k in arms[0] if all(k in a for a in arms)]
            if self.layout == "stack":
                sizes = [a["flux"].shape[-1] for a in arms]
                if len(set(sizes)) > 1:
                    raise ValueError(f"layout='stack' requires equal nwave per arm; {path} has "
                                     f"{sizes} (use layout='dict' or 'concat')")
                payload = {k: torch.stack([a[k] for a in arms]) for k in keys}
            else:
                payload = {k: torch.cat([a[k].reshape(-1) for a in arms]) for k in keys}
        return payload


_SETUP_NAMES = tuple(inspect.signature(_SpectrumPayloads._setup_spectra).parameters)[1:]


def _setup_arguments(given: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``_setup_spectra`` among a constructor's ``locals()``: both spectrum
    datasets take them under the same names, and pass them on by name."""
    return {name: given[name] for name in _SETUP_NAMES}


class FitsSpectrumDataset(_SpectrumPayloads, torch.utils.data.Dataset):
    """One spectrum payload per file (no label): ``{"flux", "ivar"?, "mask"?, "wavelength"?}``.

    Several arms (``hdu=[...]``): ``layout="dict"`` gives ``{arm_name: {...}}``, ``"stack"``
    stacks the arms (``flux`` of shape ``(C, nwave)``; equal lengths required), ``"concat"``
    concatenates them. Table HDUs take ``column``/``ivar_column``/``mask_column``/
    ``wavelength_column``; ``row`` (0-based) picks one row of a vector column, and of 2-D image
    HDUs (one spectrum per row, with IVAR/MASK companions of the same shape: the DESI layout;
    a 1-D wavelength HDU is taken whole). fsspec URLs in
    ``paths`` read through the remote byte sources with ``storage_options`` (the dataset
    pickles as its URLs and options; each DataLoader worker opens its own connections).
    """

    def __init__(self, paths: Any, hdu: Any = 0, ivar_hdu: Any = None, mask_hdu: Any = None,
                 column: str | None = None, ivar_column: str | None = None,
                 mask_column: str | None = None, wavelength_column: str | None = None,
                 wavelength_hdu: Any = None, row: int | None = None, layout: str = "dict",
                 label_key: str | None = None, labels: Any = None,
                 transform: Callable | None = None, device: Any = "cpu", mmap: Any = True,
                 cache_dir: Any = None, *, mask_is_dq: bool = False, bad_bits: Any = None,
                 storage_options: dict | None = None, null_value: NullValue = None,
                 masks: bool = False) -> None:
        self._setup_spectra(**_setup_arguments(locals()))
        self.labels = self._file_labels(label_key, labels)

    def __len__(self) -> int:
        return len(self.files)

    def _position(self, i: Any) -> int:
        return item_position(i, len(self.files))

    def __getitem__(self, i: int) -> Any:
        return self._payload(self.files[self._position(i)])

    def __getitems__(self, indices: list) -> list:
        """A DataLoader batch decoded part by part into stacked tensors (a `FitsBatch` that
        `fits_collate_fn` passes through) when every file holds one arm of image HDUs with
        equal shapes; table spectra, several arms and files whose shapes differ are read item
        by item. Equal to ``[self[i] for i in indices]`` either way."""
        positions = [self._position(i) for i in indices]
        batch = self._batch([self.files[p] for p in positions])
        if batch is None:
            return [self[p] for p in positions]
        return finish_batch(batch, self.transform)


class FitsSpectrumIterableDataset(_SpectrumPayloads, EpochMixin, torch.utils.data.IterableDataset):
    """`FitsSpectrumDataset` payloads streamed with the sharding (``even=``), shuffles and
    resume state of `FitsTensorIterableDataset` (URLs with ``storage_options`` as there)."""

    def __init__(self, paths: Any, hdu: Any = 0, ivar_hdu: Any = None, mask_hdu: Any = None,
                 column: str | None = None, ivar_column: str | None = None,
                 mask_column: str | None = None, wavelength_column: str | None = None,
                 wavelength_hdu: Any = None, row: int | None = None, layout: str = "dict",
                 transform: Callable | None = None, device: Any = "cpu", mmap: Any = True,
                 shuffle: bool = False, shuffle_buffer_size: int | None = None, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None,
                 cache_dir: Any = None, *, mask_is_dq: bool = False, bad_bits: Any = None,
                 storage_options: dict | None = None, null_value: NullValue = None,
                 masks: bool = False, even: str | None = None) -> None:
        self._setup_spectra(**_setup_arguments(locals()))
        self.shuffle, self.shuffle_buffer_size, self.seed = bool(shuffle), shuffle_buffer_size, int(seed)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.even = check_even(even)
        self._init_passes()

    def __iter__(self) -> Iterator[Any]:
        epoch, skip = self._begin_pass()
        order, rng = file_order(len(self.files), self.rank, self.world_size, self.seed, epoch,
                                self.shuffle, self.even)
        keys = islice(reservoir(order, self.shuffle_buffer_size, rng), skip, None)
        return self._counted(self._payload(self.files[i]) for i in keys)

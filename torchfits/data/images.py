"""Image, cube and generic tensor datasets (map-style and iterable) over FITS files.

Each item is read through a per-process open-once `Image` (the HDU index is cached per file
version); datasets pickle as their arguments, so DataLoader workers (fork or spawn) reopen the
files themselves.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, Callable

import torch

from .._torch_adapter import torch_dtype, validate_device
from ..fits.paths import fspath, hdu_suffix
from .bands import DQ_SUFFIXES, IVAR_SUFFIXES, MASK_SUFFIXES, discover_bands
from .hdus import FileHdus, resolve_paths
from .loader import finish_batch, item_position
from .readahead import will_need
from .readers import batch_images, read_pixels, to_tensor_batch, validity_mask
from .resume import EpochMixin
from .sharding import check_even, file_order, reservoir, resolve_rank
from .sources import with_cache_dir

__all__ = ["ImagePayloads", "FitsTensorDataset", "FitsTensorIterableDataset", "FitsImageDataset",
           "FitsImageIterableDataset", "FitsCubeDataset", "FitsCubeIterableDataset"]

class ImagePayloads(FileHdus):
    """What every image dataset shares: argument checks and building one file's payload."""

    _lead: tuple = ()
    _default_channel_dim = False

    def _setup(self, paths: Any, hdu: Any, ivar_hdu: Any, mask_hdu: Any, transform: Any,
               device: Any, mmap: Any, add_channel_dim: bool, cache_dir: Any, mask_is_dq: bool,
               bad_bits: Any, dtype: Any, scale_on_device: bool,
               storage_options: dict | None = None) -> None:
        self._setup_hdus(paths, hdu, ivar_hdu, mask_hdu, storage_options)
        self.ivar_hdu, self.mask_hdu = ivar_hdu, mask_hdu
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.transform = transform
        self.device = validate_device(device)
        if not (isinstance(mmap, bool) or (isinstance(mmap, str) and mmap.lower() == "auto")):
            raise ValueError("mmap must be bool or 'auto'")
        self.mmap = mmap
        self.add_channel_dim = bool(add_channel_dim)
        if cache_dir is not None:
            cache_dir = fspath(cache_dir)
        self.cache_dir = cache_dir
        self.storage_options = with_cache_dir(self.storage_options, self.cache_dir)
        self.mask_is_dq = bool(mask_is_dq)
        self.bad_bits = bad_bits
        torch_dtype(dtype)  # a bad dtype fails here, not in a worker
        self.dtype = dtype
        self.scale_on_device = bool(scale_on_device)

    # -- reading -----------------------------------------------------------------------------------
    def _read(self, path: str, hdu: Any, dtype: Any) -> torch.Tensor:
        return read_pixels(path, hdu, dtype=dtype, device=self.device, lead=self._lead,
                           scale_on_device=self.scale_on_device,
                           storage_options=self.storage_options)

    def _stack(self, path: str, hdus: list[Any], dtype: Any) -> torch.Tensor:
        parts = [self._read(path, h, dtype) for h in hdus]
        if len(parts) == 1:
            return parts[0]
        shapes = {tuple(p.shape) for p in parts}
        if len(shapes) > 1:
            raise ValueError(f"{path}: HDUs {hdus} have different shapes {sorted(shapes)}; "
                             "stacked HDUs must match")
        return torch.stack(parts)

    def _payload(self, path: str) -> Any:
        path, hdus = self._target(path)
        if self.mask_hdus is None and self.ivar_hdus is None:
            if len(hdus) == 1 and not self._lead and not self.scale_on_device \
                    and self.dtype is None:
                # The batch decoder on one file: a plain primary image is one pread and a C
                # header scan, no `Image` to build (the same values as read_pixels).
                arr = batch_images([path], hdus[0], self.storage_options)
                assert arr is not None  # one file cannot disagree with itself
                return self._channel(to_tensor_batch(arr, None, self.device)[0])
            flux = self._stack(path, hdus, self.dtype)
            return self._channel(flux)
        flux = self._stack(path, hdus, self.dtype)
        out = {"flux": flux}
        if self.ivar_hdus is not None:
            ivar = self._companion(path, self.ivar_hdus, self.dtype)
            self._check_shape(path, flux, ivar, "ivar", self.ivar_hdus)
            out["ivar"] = ivar
        if self.mask_hdus is not None:
            raw = self._companion(path, self.mask_hdus, None)
            self._check_shape(path, flux, raw, "mask", self.mask_hdus)
            out["mask"] = validity_mask(raw, is_dq=self.mask_is_dq, bad_bits=self.bad_bits)
        return {k: self._channel(v) for k, v in out.items()}

    def _companion(self, path: str, hdus: list[Any], dtype: Any) -> torch.Tensor:
        if len(hdus) == 1 and len(self.hdus) > 1:
            one = self._read(path, hdus[0], dtype)  # one shared companion for every flux HDU
            return one.expand((len(self.hdus),) + tuple(one.shape)).clone()
        return self._stack(path, hdus, dtype)

    def _check_shape(self, path: str, flux: torch.Tensor, comp: torch.Tensor, kind: str,
                     hdus: list[Any]) -> None:
        if tuple(comp.shape) != tuple(flux.shape):
            raise ValueError(f"{path}: {kind} HDU {hdus if len(hdus) > 1 else hdus[0]!r} has shape "
                             f"{tuple(comp.shape)} but the flux has shape {tuple(flux.shape)}")

    def _channel(self, t: torch.Tensor) -> torch.Tensor:
        return t.unsqueeze(0) if self.add_channel_dim and t.dim() == 2 else t

    def _finish(self, payload: Any) -> Any:
        return self.transform(payload) if self.transform is not None else payload


class FitsTensorDataset(ImagePayloads, torch.utils.data.Dataset):
    """One item per file: ``(payload, label)``.

    The payload is the HDU's tensor (several HDUs stacked on a new dim 0), or
    ``{"flux", "ivar", "mask"}`` when companions are given (``mask``: bool, True = valid).
    The label is a 0-d int64 tensor: ``labels[i]``, else ``int(header[label_key])`` read at
    construction, else 0.

    Parameters
    ----------
    paths : str, os.PathLike, glob pattern or list of them
    hdu : int, str or list of them
    ivar_hdu, mask_hdu : int, str or list, optional
        Companions: one shared HDU or one per flux HDU; shapes must match the flux.
    label_key : str, optional
    labels : sequence of int, optional
    transform : callable, optional
        Called with the payload.
    device : str
    mmap : bool or "auto"
        Accepted for compatibility (reads always go through the file map).
    add_channel_dim : bool
        Prepend ``C=1`` to 2-D flux and companions.
    cache_dir : str, optional
        Where the dataset's URLs are cached: whole-file copies (`make_loader` prefetches them)
        and block mirrors; default the remote cache root. Local files are read in place.
    mask_is_dq : bool
        Decode masks as data-quality bitfields (0 = good).
    bad_bits : int or sequence of int, optional
        With ``mask_is_dq``: the fatal bit positions (default: any bit set is bad).
    dtype : torch or NumPy dtype, optional
        Flux and ivar type (``torch.bfloat16`` and ``torch.float16`` included).
    scale_on_device : bool
        Copy raw big-endian bytes to ``device`` and swap/scale there (uncompressed images).
    storage_options : dict, optional
        For fsspec URLs in ``paths`` (``https://``, ``s3://``...): passed to the remote byte
        sources like ``torchfits.read(url, storage_options=...)``. The dataset pickles as its
        URLs and options; each DataLoader worker opens its own connections.
    """

    def __init__(self, paths: Any, hdu: Any = 0, ivar_hdu: Any = None, mask_hdu: Any = None,
                 label_key: str | None = None, labels: Any = None,
                 transform: Callable | None = None, device: Any = "cpu", mmap: Any = True,
                 add_channel_dim: bool = False, cache_dir: Any = None, *, mask_is_dq: bool = False,
                 bad_bits: Any = None, dtype: Any = None, scale_on_device: bool = False,
                 storage_options: dict | None = None) -> None:
        self._setup(paths, hdu, ivar_hdu, mask_hdu, transform, device, mmap, add_channel_dim,
                    cache_dir, mask_is_dq, bad_bits, dtype, scale_on_device, storage_options)
        self.label_key = label_key
        self.labels = self._file_labels(label_key, labels)
        self._label_values = self.labels if self.labels is not None else \
            torch.zeros(len(self.files), dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.files)

    def _position(self, i: Any) -> int:
        return item_position(i, len(self.files))

    def __getitem__(self, i: int) -> tuple[Any, torch.Tensor]:
        i = self._position(i)
        payload = self._finish(self._payload(self.files[i]))
        return payload, self._label_values[i].clone()

    def __getitems__(self, indices: list) -> list:
        """A DataLoader batch decoded into one stacked tensor (a `FitsBatch` that
        `fits_collate_fn` passes through): plain primary images of small local files are read
        with one ``pread`` each and decoded straight into their slot, other files through their
        open-once reader. Batches with companions, several HDUs, plane selections,
        ``scale_on_device`` or files of different shapes are read item by item. Equal to
        ``[self[i] for i in indices]`` either way."""
        positions = [self._position(i) for i in indices]
        if len(positions) > 1:
            # Every file's disk read starts now, while the first ones decode (a cold cache).
            will_need([self._target(self.files[p])[0] for p in positions])
        arr = None
        if (positions and len(self.hdus) == 1 and self.ivar_hdus is None
                and self.mask_hdus is None and not self._lead and not self.scale_on_device
                and not any(self.files[p] in self._targets for p in positions)):
            arr = batch_images([self.files[p] for p in positions], self.hdus[0],
                               self.storage_options)
        if arr is None:
            return [self[p] for p in positions]
        t = to_tensor_batch(arr, self.dtype, self.device)
        if self.add_channel_dim and t.dim() == 3:
            t = t.unsqueeze(1)
        return finish_batch(t, self.transform, self._label_values[positions])


class FitsImageDataset(FitsTensorDataset):
    """2-D images as ``(C, H, W)`` (channel dim on by default); see `FitsTensorDataset`."""

    def __init__(self, paths: Any, hdu: Any = 0, *, add_channel_dim: bool = True, **kw: Any) -> None:
        super().__init__(paths, hdu, add_channel_dim=add_channel_dim, **kw)

    @classmethod
    def from_bands(cls, paths: Any, bands: Sequence[str] | None = None, *,
                   ivar_suffixes: Sequence[str] = IVAR_SUFFIXES,
                   mask_suffixes: Sequence[str] = MASK_SUFFIXES, mask_is_dq: bool | None = None,
                   bad_bits: Any = None, **kw: Any) -> FitsImageDataset:
        """Bands by EXTNAME (``"G"``, ``"R"``...), stacked as channels, with ``<band>_IVAR`` and
        ``<band>_MASK``/``<band>_DQ`` companions attached when every band has one (``_DQ``
        companions decode as bitfields unless ``mask_is_dq=False``). ``bands=None`` takes every
        extension that is not a companion."""
        files = resolve_paths(paths)
        suffixed = [f for f in files if hdu_suffix(f) is not None]
        if suffixed:
            raise ValueError(f"from_bands picks each file's HDUs by band name: give the files "
                             f"without an HDU suffix (got {suffixed[0]!r})")
        infos = discover_bands(files[0])
        available = [b.name for b in infos]
        if bands is None:
            selected = [b.name for b in infos if b.role == "flux"] or available
        else:
            selected = list(bands)
            missing = [b for b in selected if b not in available]
            if missing:
                raise ValueError(f"bands not found in {files[0]!r}: {missing}; available: {available}")
        if not selected:
            raise ValueError(f"no image bands found in {files[0]!r}")

        def companion(band: str, suffixes: Sequence[str]) -> tuple[str, str] | None:
            return next(((band + s, s) for s in suffixes if band + s in available), None)

        ivar = [companion(b, ivar_suffixes) for b in selected]
        mask = [companion(b, mask_suffixes) for b in selected]
        ivar_hdu = [h[0] for h in ivar if h] if all(ivar) else None
        mask_hdu = None
        detected = False
        if all(mask):
            kinds = {h[1] in DQ_SUFFIXES for h in mask if h}
            if len(kinds) > 1:
                raise ValueError("mask companions mix DQ bitfields and plain masks across bands; "
                                 "give mask_hdu= and mask_is_dq= explicitly")
            detected = kinds.pop()
            mask_hdu = [h[0] for h in mask if h]
        return cls(files, selected, ivar_hdu=ivar_hdu, mask_hdu=mask_hdu,
                   mask_is_dq=detected if mask_is_dq is None else mask_is_dq, bad_bits=bad_bits,
                   **kw)

    def band_zeropoints(self) -> dict[str, float | None]:
        """``{band: zeropoint}`` of the flux HDUs (from the first file's headers)."""
        names = {h.upper() for h in self.hdus if isinstance(h, str)}
        indices = {h for h in self.hdus if isinstance(h, int)}
        return {b.name: b.zeropoint for b in discover_bands(self._target(self.files[0])[0])
                if b.name.upper() in names or b.index in indices}


def _cube_lead(slice_index: int | None, spectral_slice: Any) -> tuple:
    if slice_index is not None and spectral_slice is not None:
        raise ValueError("give slice_index or spectral_slice, not both")
    if slice_index is not None:
        if isinstance(slice_index, bool) or not isinstance(slice_index, int):
            raise ValueError("slice_index must be an integer")
        return (slice_index,)
    if spectral_slice is not None:
        try:
            a, b = spectral_slice
        except (TypeError, ValueError):
            raise ValueError("spectral_slice must be a (start, stop) pair") from None
        return (slice(int(a), int(b)),)
    return ()


class FitsCubeDataset(FitsTensorDataset):
    """Data cubes; ``slice_index`` picks one plane of the leading axis, ``spectral_slice=(a, b)``
    keeps planes ``a..b-1``. Only the selected planes are decoded."""

    def __init__(self, paths: Any, hdu: Any = 0, slice_index: int | None = None,
                 spectral_slice: tuple[int, int] | None = None, *, add_channel_dim: bool = False,
                 **kw: Any) -> None:
        self._lead = _cube_lead(slice_index, spectral_slice)
        self.slice_index, self.spectral_slice = slice_index, spectral_slice
        super().__init__(paths, hdu, add_channel_dim=add_channel_dim, **kw)


class FitsTensorIterableDataset(ImagePayloads, EpochMixin, torch.utils.data.IterableDataset):
    """Payloads streamed file by file (no label), sharded by rank then DataLoader worker.

    Files go ``files[rank::world_size]``, then contiguous near-equal blocks per worker;
    ``even="pad"`` or ``"drop"`` gives every rank the same number of files (repeating files
    from the start, or leaving the last ones). ``shuffle=True`` permutes each worker's block
    with an order fixed by ``(seed, epoch, rank, worker)``; the epoch advances on every pass,
    in DataLoader workers too (see ``set_epoch``). ``shuffle_buffer_size > 1`` adds a reservoir
    shuffle over the stream (of file indices: a file is read when it leaves the buffer).
    ``state_dict()``/``load_state_dict()`` resume an interrupted pass (torchdata's
    ``StatefulDataLoader``) without reading the files it had yielded. Other arguments as in
    `FitsTensorDataset`.
    """

    def __init__(self, paths: Any, hdu: Any = 0, ivar_hdu: Any = None, mask_hdu: Any = None,
                 transform: Callable | None = None, device: Any = "cpu", mmap: Any = True,
                 shuffle: bool = False, shuffle_buffer_size: int | None = None, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None,
                 add_channel_dim: bool = False, cache_dir: Any = None, *, mask_is_dq: bool = False,
                 bad_bits: Any = None, dtype: Any = None, scale_on_device: bool = False,
                 storage_options: dict | None = None, even: str | None = None) -> None:
        self._setup(paths, hdu, ivar_hdu, mask_hdu, transform, device, mmap, add_channel_dim,
                    cache_dir, mask_is_dq, bad_bits, dtype, scale_on_device, storage_options)
        self.shuffle = bool(shuffle)
        self.even = check_even(even)
        if shuffle_buffer_size is not None and (isinstance(shuffle_buffer_size, bool)
                                                or int(shuffle_buffer_size) < 0):
            raise ValueError("shuffle_buffer_size must be a non-negative integer or None")
        self.shuffle_buffer_size = shuffle_buffer_size
        self.seed = int(seed)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self._init_passes()

    def __iter__(self) -> Iterator[Any]:
        epoch, skip = self._begin_pass()
        order, rng = file_order(len(self.files), self.rank, self.world_size, self.seed, epoch,
                                self.shuffle, self.even)
        keys = islice(reservoir(order, self.shuffle_buffer_size, rng), skip, None)
        return self._counted(self._finish(self._payload(self.files[i])) for i in keys)


class FitsImageIterableDataset(FitsTensorIterableDataset):
    """`FitsTensorIterableDataset` with the channel dim on (``(C, H, W)`` images)."""

    def __init__(self, paths: Any, hdu: Any = 0, *, add_channel_dim: bool = True, **kw: Any) -> None:
        super().__init__(paths, hdu, add_channel_dim=add_channel_dim, **kw)


class FitsCubeIterableDataset(FitsTensorIterableDataset):
    """`FitsTensorIterableDataset` over cubes, with ``slice_index``/``spectral_slice`` as in
    `FitsCubeDataset`."""

    def __init__(self, paths: Any, hdu: Any = 0, slice_index: int | None = None,
                 spectral_slice: tuple[int, int] | None = None, *, add_channel_dim: bool = False,
                 **kw: Any) -> None:
        self._lead = _cube_lead(slice_index, spectral_slice)
        self.slice_index, self.spectral_slice = slice_index, spectral_slice
        super().__init__(paths, hdu, add_channel_dim=add_channel_dim, **kw)

"""Cutouts: a map-style dataset of explicit boxes and an iterable one of random stamps per
mosaic. Each worker keeps one open cutout reader per file (the C reader over the file map)."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np
import torch

from .._torch_adapter import torch_dtype, validate_device
from ..errors import CutoutEdgeError
from ..fits.paths import fspath
from ..fits.sources import open_source
from ..image.boxes import clamped, edge_args, edge_error, inside
from .hdus import check_hdu, dataset_repr, show_files
from .images import ImagePayloads
from .loader import finish_batch, item_position
from .readers import batch_cutouts, image_reader, is_remote, read_pixels, to_tensor_batch, validity_mask
from .resume import EpochMixin
from .sharding import check_even, epoch_rng, file_order, reservoir, reservoir_skip, resolve_rank
from .sources import storage_options_arg, suffix_file

__all__ = ["CutoutSpec", "FitsCutoutDataset", "FitsStagedCutoutIterableDataset"]

CutoutSpec = tuple[str, int, int, int, int, int]
_STAGE_CHUNK = 8 << 20
_SPEC_ERROR = "cutout must be (path, hdu, x, y, size) or (path, hdu, x1, y1, x2, y2)"
def _check_box(box: tuple[int, int, int, int], where: Any) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = box
    if x2 <= x1 or y2 <= y1:
        raise ValueError(f"{where}: cutout box (x1, y1, x2, y2) = {box} is empty "
                         "(x2 > x1 and y2 > y1 are required)")
    return box


def _fill_value(dtype: torch.dtype, pad_value: Any, path: str, hdu: Any) -> Any:
    """What pads a cutout of ``dtype``: ``pad_value``, else NaN for floats and 0 otherwise."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan") if pad_value is None else float(pad_value)
    if pad_value is None:
        return False if dtype == torch.bool else 0
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    value = float(pad_value)
    if not value.is_integer() or info is None or not info.min <= value <= info.max:
        raise CutoutEdgeError(f"{path}: HDU {hdu!r}: pad_value={pad_value!r} cannot be stored "
                              f"in the {str(dtype).replace('torch.', '')} cutout; give an "
                              "integer in its range, or dtype= a floating type")
    return int(value)


def _pad(t: torch.Tensor, box: tuple, shape: tuple, fill: Any) -> torch.Tensor:
    """``t`` (the read of the clamped box) placed in a ``box``-sized tensor filled with ``fill``."""
    x1, y1, x2, y2 = box
    out = torch.full(tuple(t.shape[:-2]) + (y2 - y1, x2 - x1), fill, dtype=t.dtype,
                     device=t.device)
    cx1, cy1, cx2, cy2 = clamped(box, shape)
    if cx2 > cx1 and cy2 > cy1:
        out[..., cy1 - y1:cy2 - y1, cx1 - x1:cx2 - x1] = t
    return out


_MEMO_HDU = (int, str, type(None))


def _spec_file(raw: Any, hdu: Any) -> tuple[str, Any]:
    """(file, HDU) of a spec's path and HDU: ``img.fits[SCI,2]`` (a path that does not exist
    whose part before the brackets does) names the HDU itself, with ``hdu`` None or naming the
    same HDU; any other ``hdu`` is refused."""
    text = fspath(raw)
    target = suffix_file(text, hdu, None, "a cutout names its box with (x, y, size) or "
                         "(x1, y1, x2, y2), not an image-section suffix; name the HDU alone "
                         "('img.fits[SCI,2]')")
    if target is None:
        check_hdu(hdu)
        return text, hdu
    return target


def _parse_spec(spec: Any, seen: dict | None = None) -> tuple[str, Any, tuple[int, int, int, int]]:
    """One spec → (path, hdu, (x1, y1, x2, y2)). ``seen`` memoizes the checked (path, hdu)
    pairs: thousands of boxes usually name a handful of files."""
    if not isinstance(spec, (tuple, list)) or len(spec) not in (5, 6):
        raise ValueError(_SPEC_ERROR)
    raw, hdu = spec[0], spec[1]
    try:
        checked = seen.get((raw, hdu)) if seen is not None and type(raw) is str \
            and type(hdu) in _MEMO_HDU else None
    except TypeError:
        checked = None
    if checked is None:
        checked = _spec_file(raw, hdu)
        if seen is not None and type(raw) is str and type(hdu) in _MEMO_HDU:
            seen[(raw, hdu)] = checked
    path, hdu = checked
    try:
        nums = [int(v) for v in spec[2:]]
    except (TypeError, ValueError):
        raise ValueError(f"{_SPEC_ERROR}; got {tuple(spec)!r}") from None
    if len(nums) == 3:
        x, y, size = nums
        if size <= 0:
            raise ValueError(f"cutout size must be positive, got {size}")
        return path, hdu, (x, y, x + size, y + size)
    return path, hdu, _check_box((nums[0], nums[1], nums[2], nums[3]), path)


class FitsCutoutDataset(torch.utils.data.Dataset):
    """One cutout per spec: ``(path, hdu, x, y, size)`` (top-left corner, square box
    ``[x, x+size) × [y, y+size)``) or ``(path, hdu, x1, y1, x2, y2)``; a path
    ``img.fits[SCI,2]`` names its HDU (``hdu`` then None or the same HDU). Items are the cutout
    tensor alone (``(1, h, w)`` with ``add_channel_dim``), always the box's size: a box that
    leaves the image raises `CutoutEdgeError` (naming the file, HDU, box and image shape)
    unless ``edge="pad"`` fills the outside with ``pad_value``.

    Parameters
    ----------
    cutouts : sequence of specs
    transform : callable, optional
    device : str
    add_channel_dim : bool
    dtype : torch or NumPy dtype, optional
        The tensor type (``torch.bfloat16``/``torch.float16`` included).
    scale_on_device : bool
        Ship the raw bytes of each box to ``device`` and decode there (uncompressed images).
    storage_options : dict, optional
        For fsspec URLs among the paths: passed to the remote byte sources (only the rows a
        box covers are fetched).
    edge : {"raise", "pad", "clamp"}
        A box that leaves the image: raise `CutoutEdgeError` (the default), pad it to its full
        size, or cut it at the edge (torchfits 1.x; items then differ in shape and do not
        collate).
    pad_value : number, optional
        The fill of ``edge="pad"``: NaN for floating results and 0 for integer ones by default.
    """

    _whole_file_prefetch = False  # make_loader leaves its URLs to ranged reads

    def __init__(self, cutouts: Any, transform: Callable | None = None, device: Any = "cpu",
                 add_channel_dim: bool = True, *, dtype: Any = None,
                 scale_on_device: bool = False, storage_options: dict | None = None,
                 edge: str = "raise", pad_value: Any = None) -> None:
        self.edge, self.pad_value = edge_args(edge, pad_value)
        self.storage_options = storage_options_arg(storage_options)
        seen: dict = {}
        specs = []
        for spec in cutouts:
            # The common (path, hdu, x, y, size) of a checked file, without the general parse.
            if type(spec) is tuple and len(spec) == 5:
                raw, hdu, x, y, size = spec
                if type(x) is int and type(y) is int and type(size) is int and size > 0 \
                        and type(raw) is str and type(hdu) in _MEMO_HDU:
                    checked = seen.get((raw, hdu))
                    if checked is not None:
                        specs.append((checked[0], checked[1], (x, y, x + size, y + size)))
                        continue
            specs.append(_parse_spec(spec, seen))
        self._specs = specs
        self.files = list(dict.fromkeys(p for p, _, _ in self._specs))
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.transform = transform
        self.device = validate_device(device)
        self.add_channel_dim = bool(add_channel_dim)
        torch_dtype(dtype)
        self.dtype, self.scale_on_device = dtype, bool(scale_on_device)

    def __len__(self) -> int:
        return len(self._specs)

    def _position(self, i: Any) -> int:
        return item_position(i, len(self._specs), "index {i} out of range for {n} cutouts")

    def __getitems__(self, indices: list) -> list:
        """A DataLoader batch: same-size boxes inside their images decode in one kernel call per
        file (GIL released) into one stacked tensor, returned as a `FitsBatch` that
        `fits_collate_fn` passes through; other batches (boxes an edge clamps, mixed sizes,
        compressed images, ``scale_on_device``) are read item by item. Equal to
        ``[self[i] for i in indices]`` either way."""
        positions = self._positions(indices)
        arr = None
        if not self.scale_on_device and len(positions):
            keys, key_ids, boxes = self._table()
            arr = batch_cutouts(keys, key_ids[positions], boxes[positions], self.storage_options)
        if arr is None:
            return [self[p] for p in positions.tolist()]
        t = to_tensor_batch(arr, self.dtype, self.device)
        if self.add_channel_dim and t.dim() == 3:
            t = t.unsqueeze(1)
        return finish_batch(t, self.transform)

    def _positions(self, indices: list) -> np.ndarray:
        """Batch indices as non-negative positions (the errors of ``self[i]`` for bad ones)."""
        n = len(self._specs)
        idx = np.asarray(indices)
        if idx.ndim != 1 or idx.dtype.kind not in "iu" or (idx.size and (idx.min() < -n or idx.max() >= n)):
            return np.array([self._position(i) for i in indices], dtype=np.int64)
        return np.where(idx < 0, idx + n, idx).astype(np.int64, copy=False)

    def _table(self) -> tuple[list, np.ndarray, np.ndarray]:
        """(distinct (path, hdu) pairs, pair index per spec, (n, 4) boxes): built once per
        process, not pickled."""
        table = self.__dict__.get("_spec_table")
        if table is None:
            ids: dict = {}
            key_ids = np.array([ids.setdefault((p, h), len(ids)) for p, h, _ in self._specs],
                               dtype=np.int64)
            boxes = np.array([b for _, _, b in self._specs], dtype=np.int64).reshape(-1, 4)
            table = self.__dict__["_spec_table"] = (list(ids), key_ids, boxes)
        return table

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_spec_table", None)
        return state

    def __getitem__(self, i: int) -> torch.Tensor:
        path, hdu, box = self._specs[self._position(i)]
        t = read_pixels(path, hdu, dtype=self.dtype, device=self.device, box=box,
                        scale_on_device=self.scale_on_device, storage_options=self.storage_options)
        if self.edge != "clamp" and t.dim() >= 2 and \
                tuple(t.shape[-2:]) != (box[3] - box[1], box[2] - box[0]):
            # The read clamps: a smaller result means the box left the image.
            t = self._edge(t, path, hdu, box)
        if self.add_channel_dim and t.dim() == 2:
            t = t.unsqueeze(0)
        return self.transform(t) if self.transform is not None else t

    def _edge(self, t: torch.Tensor, path: str, hdu: Any, box: tuple) -> torch.Tensor:
        shape = tuple(image_reader(path, hdu, self.storage_options).shape[-2:])
        if self.edge == "raise":
            raise edge_error(path, hdu, box, shape)
        return _pad(t, box, shape, _fill_value(t.dtype, self.pad_value, path, hdu))

    def __repr__(self) -> str:
        files = show_files(self.files).replace("n=", "n_files=", 1)
        return dataset_repr(self, f"n={len(self._specs)}", files, transform=self.transform,
                            edge=self.edge, device=self.device)


class FitsStagedCutoutIterableDataset(ImagePayloads, EpochMixin, torch.utils.data.IterableDataset):
    """``cutouts_per_file`` random stamps from each mosaic, streamed.

    Files are sharded like `FitsTensorIterableDataset` (``shuffle_files`` permutes each worker's
    block per epoch; ``even=`` as there). Stamps are ``cutout_size`` (int or ``(H, W)``) boxes
    drawn uniformly inside the image with a generator fixed by ``(seed, epoch, rank, worker,
    file)``, or chosen by ``cutout_generator(height, width, ch, cw) -> (x1, y1, x2, y2)``. Payloads follow
    `FitsTensorDataset` (companions cut with the same box). Remote mosaics (fsspec URLs, with
    ``storage_options``) are copied whole into ``staging_dir`` (``$SLURM_TMPDIR``/``$TMPDIR``)
    by the worker that reads them, and deleted after use when ``cleanup``; local files are read
    in place.

    A stamp that leaves the image (a ``cutout_size`` larger than an image, a generator's box
    across an edge) follows ``edge`` as in `FitsCutoutDataset`: raise `CutoutEdgeError` by
    default, or ``edge="pad"``: flux filled with ``pad_value`` (NaN/0), ivar with 0 and the
    validity mask False outside the image.

    ``state_dict()``/``load_state_dict()`` resume an interrupted pass (torchdata's
    ``StatefulDataLoader``): the files and stamps it had yielded are not read again (with a
    shuffle buffer, only the stamps that were still buffered are). A ``cutout_generator`` is
    called again for the boxes of the file the pass resumes in.
    """

    _whole_file_prefetch = False  # make_loader leaves its URLs to ranged reads

    def __init__(self, paths: Any, cutouts_per_file: int = 100, cutout_size: Any = 128,
                 hdu: Any = 0, ivar_hdu: Any = None, mask_hdu: Any = None, *,
                 staging_dir: Any = None, cleanup: bool = True,
                 cutout_generator: Callable | None = None, transform: Callable | None = None,
                 device: Any = "cpu", add_channel_dim: bool = True, shuffle_files: bool = False,
                 shuffle_buffer_size: int | None = None, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None,
                 mask_is_dq: bool = False, bad_bits: Any = None, dtype: Any = None,
                 scale_on_device: bool = False, storage_options: dict | None = None,
                 edge: str = "raise", pad_value: Any = None, even: str | None = None) -> None:
        if isinstance(hdu, (list, tuple)):
            raise ValueError("staged cutouts read one flux HDU per file")
        self.even = check_even(even)
        self.edge, self.pad_value = edge_args(edge, pad_value)
        self._setup(paths, hdu, ivar_hdu, mask_hdu, transform, device, True, add_channel_dim,
                    None, mask_is_dq, bad_bits, dtype, scale_on_device, storage_options)
        if isinstance(cutouts_per_file, bool) or not isinstance(cutouts_per_file, int) \
                or cutouts_per_file <= 0:
            raise ValueError("cutouts_per_file must be a positive integer")
        size = (cutout_size, cutout_size) if isinstance(cutout_size, int) else tuple(cutout_size)
        if len(size) != 2 or any(isinstance(s, bool) or int(s) <= 0 for s in size):
            raise ValueError("cutout_size must be a positive int or an (H, W) pair")
        if cutout_generator is not None and not callable(cutout_generator):
            raise TypeError("cutout_generator must be callable")
        self.cutouts_per_file, self.cutout_size = cutouts_per_file, (int(size[0]), int(size[1]))
        self.staging_dir = None if staging_dir is None else fspath(staging_dir)
        self.cleanup, self.cutout_generator = bool(cleanup), cutout_generator
        self.shuffle_files, self.shuffle_buffer_size = bool(shuffle_files), shuffle_buffer_size
        self.seed = int(seed)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self._init_passes()

    def _staging_root(self) -> str:
        return self.staging_dir or os.environ.get("SLURM_TMPDIR") or os.environ.get("TMPDIR") \
            or tempfile.gettempdir()

    def _stage(self, path: str) -> tuple[str, bool]:
        """A local path for ``path`` and whether it is a staged copy to clean up: a remote
        mosaic is copied whole (8 MiB reads through its own remote byte source, inflated when
        the whole file is compressed) into a fresh folder of the staging root, under its own file
        name."""
        if not is_remote(path):
            return path, False
        src = open_source(path, storage_options=self.storage_options, cache=False)
        folder = tempfile.mkdtemp(prefix="torchfits-stage-", dir=self._staging_root())
        local = os.path.join(folder, os.path.basename(path.split("?", 1)[0]) or "mosaic.fits")
        try:
            with open(local, "wb") as fh:
                for offset in range(0, src.size, _STAGE_CHUNK):
                    fh.write(src.read(offset, min(_STAGE_CHUNK, src.size - offset)))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            close = getattr(src, "close", None)
            if close is not None:
                close()
        return folder, True

    def _stamps(self, path: str, file_index: int, epoch: int, hdu: Any,
                which: Any = None) -> Iterator[Any]:
        """The stamps of one file (``which``: only those, by number; the boxes of the others
        are drawn and not read)."""
        h, w = image_reader(path, hdu).shape[-2:]
        ch, cw = self.cutout_size
        rng = epoch_rng(self.seed, epoch, self.rank, file_index)
        boxes = []
        for _ in range(self.cutouts_per_file):
            if self.cutout_generator is not None:
                box = tuple(int(v) for v in self.cutout_generator(h, w, ch, cw))
                if len(box) != 4:
                    raise ValueError("cutout_generator must return (x1, y1, x2, y2)")
            else:
                x1 = int(rng.integers(0, max(w - cw, 0) + 1))
                y1 = int(rng.integers(0, max(h - ch, 0) + 1))
                box = (x1, y1, x1 + cw, y1 + ch)
            _check_box(box, path)
            if self.edge == "raise" and not inside(box, (h, w)):
                raise edge_error(path, hdu, box, (h, w))
            boxes.append(box)
        if which is not None:
            boxes = [boxes[j] for j in which]
            if not boxes:
                return
        if self.ivar_hdus is None and self.mask_hdus is None and not self.scale_on_device:
            # Every stamp of the file in one kernel call (as FitsCutoutDataset batches do);
            # boxes an edge clamps, mixed sizes or compressed images go stamp by stamp.
            arr = batch_cutouts([(path, hdu)], np.zeros(len(boxes), np.int64),
                                np.asarray(boxes, np.int64).reshape(-1, 4))
            if arr is not None:
                for t in to_tensor_batch(arr, self.dtype, self.device).unbind(0):
                    yield self._finish(self._channel(t))
                return
        for box in boxes:
            yield self._finish(self._cut(path, box, (h, w), hdu))

    def _cut(self, path: str, box: tuple, shape: tuple, hdu: Any) -> Any:
        padded = self.edge == "pad" and not inside(box, shape)
        part_box = clamped(box, shape) if padded else box

        def read(part: Any, dtype: Any) -> torch.Tensor:
            return read_pixels(path, part, dtype=dtype, device=self.device, box=part_box,
                               scale_on_device=self.scale_on_device)

        def pad(t: torch.Tensor, fill: Any = None) -> torch.Tensor:
            if not padded:
                return t
            return _pad(t, box, shape, _fill_value(t.dtype, self.pad_value, path, hdu)
                        if fill is None else fill)

        flux = pad(read(hdu, self.dtype))
        if self.ivar_hdus is None and self.mask_hdus is None:
            return self._channel(flux)
        out = {"flux": flux}
        if self.ivar_hdus is not None:
            out["ivar"] = pad(read(self.ivar_hdus[0], self.dtype), 0)  # no information
        if self.mask_hdus is not None:
            out["mask"] = pad(validity_mask(read(self.mask_hdus[0], None),
                                            is_dq=self.mask_is_dq, bad_bits=self.bad_bits),
                              False)  # outside the image: not valid
        for key in ("ivar", "mask"):
            if key in out and tuple(out[key].shape) != tuple(flux.shape):
                raise ValueError(f"{path}: {key} cutout has shape {tuple(out[key].shape)} but the "
                                 f"flux cutout has shape {tuple(flux.shape)}")
        return {k: self._channel(v) for k, v in out.items()}

    def __iter__(self) -> Iterator[Any]:
        epoch, skip = self._begin_pass()
        order, rng = file_order(len(self.files), self.rank, self.world_size, self.seed, epoch,
                                self.shuffle_files, self.even)
        per = self.cutouts_per_file
        keys = [(q, j) for q in range(len(order)) for j in range(per)]  # (file position, stamp)
        p, buffered, drain = reservoir_skip(keys, self.shuffle_buffer_size, rng, skip)

        def read(wanted: list[tuple[int, int]]) -> Iterator[Any]:
            """The stamps of ``wanted`` keys, a file at a time (staged once per run of keys)."""
            k = 0
            while k < len(wanted):
                q = wanted[k][0]
                run = [wanted[k][1]]
                k += 1
                while k < len(wanted) and wanted[k][0] == q:
                    run.append(wanted[k][1])
                    k += 1
                yield from self._file_stamps(order[q], epoch,
                                             None if run == list(range(per)) else run)

        if drain is not None:
            return self._counted(read(drain))
        stream = reservoir(read(keys[p:]), self.shuffle_buffer_size, rng,
                           buffer=list(read(buffered)))
        return self._counted(stream)

    def _file_stamps(self, i: int, epoch: int, which: Any) -> Iterator[Any]:
        path, hdus = self._target(self.files[i])
        local, staged = self._stage(path)
        try:
            if staged:
                name = os.listdir(local)[0]
                yield from self._stamps(os.path.join(local, name), i, epoch, hdus[0], which)
            else:
                yield from self._stamps(local, i, epoch, hdus[0], which)
        finally:
            if staged and self.cleanup:
                shutil.rmtree(local, ignore_errors=True)

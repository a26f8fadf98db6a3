"""Cutout boxes of an image: the edge policy (raise, pad, clamp) every cutout route shares, and
many boxes cut in one call (`cut_boxes`: one kernel call for the boxes inside the image).

A box is ``(x1, y1, x2, y2)``: 0-based, half-open, ``image[..., y1:y2, x1:x2]``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import _image
from ..errors import CutoutEdgeError
from ..fits.sources.base import faults_seen
from ..fits.threads import default_threads, fault_in, run_parallel

__all__ = ["EDGES", "edge_args", "edge_error", "check_boxes", "clamped", "inside", "fill_value",
           "cut_boxes"]

EDGES = ("raise", "pad", "clamp")


def edge_args(edge: Any, pad_value: Any) -> tuple[str, Any]:
    """Checked ``edge`` and ``pad_value`` (a number, only with ``edge="pad"``)."""
    if not isinstance(edge, str) or edge not in EDGES:
        raise ValueError(f"edge must be 'raise', 'pad' or 'clamp', not {edge!r}")
    if pad_value is not None:
        if edge != "pad":
            raise ValueError(f"pad_value is used with edge='pad' only (edge={edge!r})")
        if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float, np.integer,
                                                                     np.floating)):
            raise TypeError(f"pad_value must be a number, not {type(pad_value).__name__}")
    return edge, pad_value


def edge_error(path: str, hdu: Any, box: tuple[int, ...], shape: tuple[int, ...]) -> CutoutEdgeError:
    """The `CutoutEdgeError` of ``box`` leaving an image of ``shape`` (h, w)."""
    h, w = shape
    return CutoutEdgeError(
        f"{path}: HDU {hdu!r}: cutout box (x1, y1, x2, y2) = {tuple(box)} is outside the "
        f"{h}x{w} image (x in [0, {w}), y in [0, {h})); pass edge='pad' to fill the outside "
        "with pad_value (NaN for floats, 0 for integers), or edge='clamp' to cut the box at "
        "the edge")


def check_boxes(boxes: Any) -> np.ndarray:
    """``boxes`` as an ``(N, 4)`` int64 array of non-empty ``(x1, y1, x2, y2)`` boxes."""
    arr = np.asarray(boxes)
    if arr.size == 0:
        arr = arr.reshape(0, 4)
    if arr.ndim == 1 and arr.shape[0] == 4:
        raise ValueError("boxes must be an (N, 4) array of (x1, y1, x2, y2); wrap one box "
                         "in a list")
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"boxes must be an (N, 4) array of (x1, y1, x2, y2), not shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.round(arr)).all():
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"boxes must hold integers, not {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    empty = (arr[:, 2] <= arr[:, 0]) | (arr[:, 3] <= arr[:, 1])
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise ValueError(f"box {i} (x1, y1, x2, y2) = {tuple(arr[i].tolist())} is empty "
                         "(x2 > x1 and y2 > y1 are required)")
    return arr


def clamped(box: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The part of ``box`` inside an image of ``shape`` (h, w); empty where it misses."""
    h, w = shape
    x1, y1 = min(max(box[0], 0), w), min(max(box[1], 0), h)
    return x1, y1, max(x1, min(max(box[2], 0), w)), max(y1, min(max(box[3], 0), h))


def inside(box: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``box`` lies inside an image of ``shape`` (h, w)."""
    return bool(box[0] >= 0 and box[1] >= 0 and box[2] <= shape[1] and box[3] <= shape[0])


def fill_value(dtype: np.dtype, pad_value: Any, path: str, hdu: Any) -> Any:
    """What pads a cutout of NumPy ``dtype``: ``pad_value``, else NaN for floats and 0 for
    integers (`CutoutEdgeError` for a value the type cannot hold)."""
    if dtype.kind in "fc":
        return float("nan") if pad_value is None else float(pad_value)
    if pad_value is None:
        return 0
    info = np.iinfo(dtype)
    value = float(pad_value)
    if not value.is_integer() or not info.min <= value <= info.max:
        raise CutoutEdgeError(f"{path}: HDU {hdu!r}: pad_value={pad_value!r} cannot be stored "
                              f"in the {dtype} cutout; give an integer in its range, or dtype= a "
                              "floating type")
    return int(value)


#: Boxes per thread below which a batch is cut on the calling thread alone.
_BOXES_PER_THREAD = 128


def _batch(reader: Any, rows: np.ndarray, height: int, width: int, out: np.ndarray) -> None:
    """`_image.cutout_batch` over ``rows``, split among the pool's threads when the batch is
    large (the kernel releases the GIL; each thread writes its own slots of ``out``)."""
    nthreads = min(default_threads(), len(rows) // _BOXES_PER_THREAD)
    if nthreads < 2:
        _image.cutout_batch(reader, rows, height, width, out)
        return
    fault_in(out)  # the fresh output's huge pages, once, before the threads write them
    bounds = [len(rows) * i // nthreads for i in range(nthreads + 1)]
    run_parallel(lambda k: _image.cutout_batch(reader, rows[bounds[k]:bounds[k + 1]], height, width, out),
                 range(nthreads))


def cut_boxes(image: Any, boxes: Any, *, edge: str = "raise",
              pad_value: Any = None) -> np.ndarray | list[np.ndarray]:
    """The cutouts of ``boxes`` from ``image`` (an `Image`): see `Image.cutouts`."""
    edge, pad_value = edge_args(edge, pad_value)
    arr = check_boxes(boxes)
    shape = image.shape
    if len(shape) < 2:
        raise ValueError(f"{image.path}: HDU {image.hdu}: cutouts need an image of 2 or more "
                         f"axes, not shape {shape}")
    lead, (h, w) = tuple(shape[:-2]), shape[-2:]
    ok = (arr[:, 0] >= 0) & (arr[:, 1] >= 0) & (arr[:, 2] <= w) & (arr[:, 3] <= h)
    if edge == "raise" and not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise edge_error(image.path, image.hdu, tuple(arr[i].tolist()), (h, w))
    widths, heights = arr[:, 2] - arr[:, 0], arr[:, 3] - arr[:, 1]
    one_size = len(arr) == 0 or ((widths == widths[0]).all() and (heights == heights[0]).all())
    if not one_size or (edge == "clamp" and not ok.all()):
        return [_one(image, tuple(b), (h, w), edge, pad_value) for b in arr.tolist()]
    bw, bh = (int(widths[0]), int(heights[0])) if len(arr) else (0, 0)
    dtype = image.dtype
    inner = np.flatnonzero(ok)
    reader = _batch_reader(image)
    # The kernel's output comes from the cutout memory pool: a loop of batched calls that
    # drops each result writes into memory faulted in once (fresh pages cost as much as the copy).
    alloc = _image.cutout_array if reader is not None and len(inner) else np.empty
    out = alloc((len(arr),) + lead + (bh, bw), dtype)
    if reader is not None and len(inner):
        rows = np.stack([inner, arr[inner, 0], arr[inner, 1]], axis=1).astype(np.int64)
        # In row order (then column): boxes that share image rows follow each other, so their
        # pages are still in the TLB; each box still lands in its own slot of ``out``.
        rows = np.ascontiguousarray(rows[np.argsort(rows[:, 2] * w + rows[:, 1], kind="stable")])
        if image._index.lazy:  # a remote image: fetch the rows the boxes cover first
            for x1, y1, x2, y2 in arr[inner].tolist():
                image.prefetch_cutout(x1, y1, x2, y2)
        if dtype == image.plan.dtype:
            _batch(reader, rows, bh, bw, out)
        else:  # astype(): decode in the file's type, then cast
            native = alloc((len(arr),) + lead + (bh, bw), image.plan.dtype)
            _batch(reader, rows, bh, bw, native)
            out[inner] = native[inner]
        if faults_seen():
            image._index.source.check()
    else:
        for i in inner.tolist():
            x1, y1, x2, y2 = arr[i].tolist()
            out[i] = image[_key(len(shape), y1, y2, x1, x2)]
    for i in np.flatnonzero(~ok).tolist():
        out[i] = _one(image, tuple(arr[i].tolist()), (h, w), edge, pad_value)
    return out


def _batch_reader(image: Any) -> Any:
    """The C cutout reader behind the batch kernel, or None (compressed images, random groups,
    uint64 results, files cut short: those cut box by box)."""
    if getattr(image, "is_compressed", False) or image.plan.dtype == np.uint64:
        return None
    return image._cutout_reader()


def _key(ndim: int, y1: int, y2: int, x1: int, x2: int) -> tuple[Any, ...]:
    """The index of a box (a plain pair of slices for a 2-D image: the C cutout path)."""
    rows, cols = slice(y1, y2), slice(x1, x2)
    return (rows, cols) if ndim == 2 else (Ellipsis, rows, cols)


def _one(image: Any, box: tuple[int, ...], shape: tuple[int, ...], edge: str, pad_value: Any) -> np.ndarray:
    """One box: read inside the image, then padded to the box (``edge="pad"``) or as cut."""
    x1, y1, x2, y2 = box
    cx1, cy1, cx2, cy2 = clamped(box, shape)
    lead = tuple(image.shape[:-2])
    if cx2 > cx1 and cy2 > cy1:
        part = image[_key(len(lead) + 2, cy1, cy2, cx1, cx2)]
    else:
        part = np.empty(lead + (max(cy2 - cy1, 0), max(cx2 - cx1, 0)), image.dtype)
    if edge != "pad" or (cx1, cy1, cx2, cy2) == box:
        return part  # type: ignore[no-any-return]
    out = np.full(lead + (y2 - y1, x2 - x1),
                  fill_value(np.dtype(image.dtype), pad_value, image.path, image.hdu), image.dtype)
    if cx2 > cx1 and cy2 > cy1:
        out[..., cy1 - y1:cy2 - y1, cx1 - x1:cx2 - x1] = part
    return out

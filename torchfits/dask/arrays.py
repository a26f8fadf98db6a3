"""FITS images as Dask arrays: every block decodes only its own region of one file.

`read_images` builds the array with ``dask.array.from_array`` over a small picklable stand-in
(`ImageBlocks`) that holds paths, HDU, shape and dtype, reopens the file in the worker, and
answers each block's slice with a region decode (only the tiles a block touches, for a
tile-compressed HDU). Shapes and dtypes come from the headers; no pixel is read to build the
graph.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..fits.paths import is_glob, with_storage_options
from ..fits.threads import run_parallel
from ..image.plain import Image, open_image
from ..tables.source import resolve_sources
from .partitions import task_threads

__all__ = ["read_images", "ImageBlocks"]


def _open(path: str, hdu: Any, raw_scale: bool, storage_options: dict | None) -> Image:
    return open_image(path, hdu, raw_scale=raw_scale, storage_options=storage_options)


class ImageBlocks:
    """The same-shaped image HDUs of ``paths`` as one array (stacked on a new first axis when
    ``stack``), sliced lazily: what ``dask.array.from_array`` asks for blocks.

    Pickles as paths, HDU, shape, dtype and options; images are opened in the process that
    slices (file indexes are cached per process, so reopening costs a ``stat``).
    """

    def __init__(self, paths: Sequence[str], hdu: Any, image_shape: tuple[int, ...], dtype: Any,
                 *, stack: bool, raw_scale: bool = False, storage_options: dict | None = None,
                 threads: int | None = None) -> None:
        self.paths = [str(p) for p in paths]
        self.hdu = hdu
        self.image_shape = tuple(int(n) for n in image_shape)
        self.dtype = np.dtype(dtype)
        self.stack = bool(stack)
        self.raw_scale = bool(raw_scale)
        self.storage_options = storage_options
        self.threads = None if threads is None else int(threads)
        self.shape = ((len(self.paths),) if self.stack else ()) + self.image_shape
        self.ndim = len(self.shape)

    def __reduce__(self) -> Any:
        return (_rebuild_blocks, (self.paths, self.hdu, self.image_shape, self.dtype.str, self.stack,
                                  self.raw_scale, self.storage_options, self.threads))

    def __dask_tokenize__(self) -> Any:
        stamps: list[tuple[str, int | None, int | None]] = []
        for p in self.paths:
            try:
                st = os.stat(p)
                stamps.append((p, st.st_size, st.st_mtime_ns))
            except OSError:  # remote or gone: the name is all we know
                stamps.append((p, None, None))
        return ("torchfits.ImageBlocks", stamps, self.hdu, self.image_shape, self.dtype.str, self.stack,
                self.raw_scale, repr(self.storage_options))

    def _image(self, k: int) -> Image:
        return _open(self.paths[k], self.hdu, self.raw_scale, self.storage_options)

    def _region(self, image: Image, key: tuple) -> np.ndarray:
        # a region decode is one thread; a whole read obeys the worker's share (`task_threads`)
        out = image[key] if key else image.read(threads=task_threads(self.threads))
        if not isinstance(out, np.ndarray) or not out.flags.writeable:
            out = np.array(out)  # a view of the file map must not outlive this task
        return out

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        if not self.stack:
            return self._region(self._image(0), key)
        first, rest = (key[0], key[1:]) if key else (slice(None), ())
        if isinstance(first, (int, np.integer)):
            return self._region(self._image(int(first) % len(self.paths)), rest)
        if not isinstance(first, slice):
            raise TypeError(f"the stack axis takes an int or a slice, not {type(first).__name__}")
        ks = range(*first.indices(len(self.paths)))
        parts = [self._region(self._image(k), rest) for k in ks]
        if not parts:
            probe = np.empty(self.image_shape, self.dtype)
            if rest:
                probe = probe[rest]
            return np.empty((0,) + probe.shape, self.dtype)
        return np.stack(parts)

    def __repr__(self) -> str:
        return f"<ImageBlocks {len(self.paths)} file(s) hdu={self.hdu} shape={self.shape} dtype={self.dtype}>"


def _rebuild_blocks(paths: list, hdu: Any, image_shape: tuple, dtype: str, stack: bool, raw_scale: bool,
                    storage_options: dict | None, threads: int | None = None) -> ImageBlocks:
    return ImageBlocks(paths, hdu, image_shape, dtype, stack=stack, raw_scale=raw_scale,
                       storage_options=storage_options, threads=threads)


def _auto_chunks(image: Image, stack: int, dtype: np.dtype) -> tuple:
    """Dask's "auto" block size (``array.chunk-size``), shaped for cheap decodes: whole tiles
    of a compressed image; whole rows (contiguous bytes) of a plain one where they fit."""
    from dask.array.core import normalize_chunks

    shape = tuple(image.shape)
    lead = ((stack,) if stack else ())
    full = lead + shape
    layout = getattr(image, "layout", None)
    if layout is not None:  # tile-compressed: blocks are whole multiples of the tile shape
        tile = tuple(min(t, n) for t, n in zip(layout.tile, shape))
        return normalize_chunks("auto", full, dtype=dtype, previous_chunks=((1,) if stack else ()) + tile)
    from dask.utils import parse_bytes

    from dask import config

    limit = parse_bytes(config.get("array.chunk-size"))
    row_bytes = math.prod(shape[1:]) * dtype.itemsize if len(shape) > 1 else dtype.itemsize
    if shape and row_bytes <= limit:
        if stack:
            per_image = math.prod(shape) * dtype.itemsize
            if per_image <= limit:  # several whole images per block
                return normalize_chunks(("auto",) + shape, full, dtype=dtype)
            return normalize_chunks((1, "auto") + shape[1:], full, dtype=dtype)
        return normalize_chunks(("auto",) + shape[1:], full, dtype=dtype)
    return normalize_chunks("auto", full, dtype=dtype)


def read_images(source: Any, hdu: Any = None, *, chunks: Any = "auto", raw_scale: bool = False,
                storage_options: dict | None = None, threads: int | None = None) -> Any:
    """Image HDUs as a ``dask.array.Array`` whose blocks decode only their own region.

    Parameters
    ----------
    source : str, os.PathLike, glob, directory, URL or list
        One file: its image, chunked into blocks. Several files (a list, a glob or a directory):
        their same-shaped images stacked along a new first axis. URLs are opened through
        torchfits' byte sources, in the caller for the headers and in every worker for blocks.
    hdu : int, str, (str, int) or None
        The image HDU (index, EXTNAME or (EXTNAME, EXTVER)) in every file; a tile-compressed
        HDU works too. Default: each file's first HDU with data, as ``read_numpy``.
    chunks : "auto", int, tuple or dict
        Dask block sizes. "auto" uses Dask's ``array.chunk-size`` with blocks made of whole
        tiles (compressed images) or whole rows (plain ones).
    raw_scale : bool
        Stored values instead of physical ones (no BSCALE/BZERO).
    storage_options : dict, optional
        fsspec options for remote sources plus torchfits' own (see docs/remote.md); they
        travel with the blocks, and every worker reopens the URLs with them.
    threads : int, optional
        Decode threads of a block read whole. Default: 1 inside a ``distributed`` worker,
        the shared default elsewhere (a region is always decoded by one thread).

    Returns
    -------
    dask.array.Array

    Raises
    ------
    ValueError
        When the images do not all have the same shape and dtype.
    """
    try:
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("torchfits.dask needs Dask: pip install 'torchfits[dask]'") from exc

    if isinstance(source, (list, tuple)):
        stack, paths = True, [str(p) for p in source]
    else:
        stack = _many(source)
        if stack and _is_remote(source):  # a remote glob or directory: listed through fsspec
            paths = [str(p) for p in resolve_sources(with_storage_options(str(source), storage_options))]
        elif _is_remote(source):
            paths = [str(source)]
        else:
            paths = resolve_sources(source)
    if not paths:
        raise FileNotFoundError(f"no files in {source!r}")
    images = run_parallel(lambda p: _open(p, hdu, raw_scale, storage_options), paths)
    first = images[0]
    for img in images[1:]:
        if img.shape != first.shape or img.dtype != first.dtype:
            raise ValueError(f"images differ: {first.path} HDU {first.hdu} is {first.shape} {first.dtype}, "
                             f"{img.path} HDU {img.hdu} is {img.shape} {img.dtype}; read_images stacks "
                             "same-shaped images only")
    dtype = np.dtype(first.dtype)
    if threads is not None and (isinstance(threads, bool) or int(threads) <= 0):
        raise ValueError("threads must be a positive integer")
    blocks = ImageBlocks(paths, hdu, first.shape, dtype, stack=stack, raw_scale=raw_scale,
                         storage_options=storage_options, threads=threads)
    if isinstance(chunks, str) and chunks == "auto":
        chunks = _auto_chunks(first, len(paths) if stack else 0, dtype)
    return da.from_array(blocks, chunks=chunks, name=f"read-fits-images-{_token(blocks)}", lock=False,
                         asarray=False, fancy=False, meta=np.empty((0,) * blocks.ndim, dtype))


def _is_remote(source: Any) -> bool:
    return not isinstance(source, os.PathLike) and "://" in str(source)


def _many(source: Any) -> bool:
    """Whether a single ``source`` names several files (a directory or a glob; for a URL, a
    glob or a path ending in ``/``)."""
    text = os.fspath(source) if isinstance(source, os.PathLike) else str(source)
    if _is_remote(source):
        rest = text.partition("://")[2]
        return rest.endswith("/") or is_glob(rest)
    return os.path.isdir(text) or (not os.path.exists(text) and is_glob(text))


def _token(blocks: ImageBlocks) -> str:
    from dask.base import tokenize

    return tokenize(blocks)

"""Batching: `fits_collate_fn` and `make_loader` (a DataLoader, or torchdata's
``StatefulDataLoader`` with ``stateful=True``, that given a CUDA device pins host batches and
copies them with ``non_blocking``); what the map-style
datasets' ``__getitem__``/``__getitems__`` share (`item_position`, `finish_batch`); how batches
leave a DataLoader worker (`for_transfer`: by value, or through the worker's ring of shared-memory
slots, `torchfits.data.worker_transfer`)."""
from __future__ import annotations

import warnings
import weakref
from collections import deque
from typing import Any

import torch

from .._torch_adapter import validate_device
from .remote import is_http_url, prefetch_urls
from .worker_transfer import (
    RING_MAX_SLOT,
    SMALL_SLOT,
    drop_replaced,
    forget_gone_workers,
    make_ring,
    ring_fits,
    ring_mark,
    ring_on,
    tensor_from_array,  # unpickles `_ByValue` too: one way back to a tensor
)

__all__ = ["fits_collate_fn", "make_loader", "FitsDataLoader", "FitsBatch", "item_position",
           "for_transfer"]

# Bytes; the most a tensor the ring does not take sends by value (a larger one takes torch's
# shared memory). Per batch the main process pays ~2 ms per MiB to read and unpickle bytes
# against ~1.3 ms flat for a shared-memory segment; the two meet near 512 KiB
# (benchmarks/run_transfer.py; docs/architecture.md, "Small batches leave a worker by value").
_BY_VALUE_MAX = SMALL_SLOT  # 512 KiB: the ring's small slots are those that could go by value
# Bytes; a larger contiguous tensor goes through the worker's ring (by value, then torch's
# shared memory, where the ring cannot take it). The two cost the main process the same at
# 16 KiB and the ring half or less from 64 KiB (32 KiB lies between, not measured); a batch
# then crosses the pipe as a few hundred bytes: the main process does not wait on the worker's
# feeder thread to write each 64 KiB pipe-full.
_RING_MIN = 32 << 10
# What leaves a worker by value or through its ring (both send the tensor's bytes).
TRANSFER_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                             torch.int64, torch.uint16, torch.uint32, torch.uint64, torch.float16,
                             torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                             torch.complex128})


class _ByValue(torch.Tensor):
    """A batch tensor on its way out of a DataLoader worker: it pickles as its bytes (through
    the worker's result pipe) and unpickles as a plain tensor. torch's own reduction moves
    every tensor into a new shared-memory segment whose descriptor the main process then
    fetches from the worker over a socket, a round trip per tensor that waits on the worker
    being scheduled; for tensors up to half a megabyte copying the bytes costs less.
    Operations on it give plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]
    # the bytes to send and the torch dtype NumPy lacks, taken on the worker's thread (`_mark`)
    _tf_array: Any
    _tf_dtype: str | None

    def __reduce_ex__(self, protocol: Any) -> Any:
        # The worker's queue pickles this on its feeder thread, which the interpreter may stop
        # at exit mid-call; a torch call there can abort the worker (see `_KEEP`), so the array
        # was taken on the worker's own thread when the tensor was marked.
        array = self.__dict__.get("_tf_array")
        if array is None:  # not made by `_mark`
            return (tensor_from_array, _numpy_of(self.as_subclass(torch.Tensor)))
        return (tensor_from_array, (array, self._tf_dtype))


def _numpy_of(t: torch.Tensor) -> tuple[Any, str | None]:
    """A NumPy view of ``t``'s values, and the dtype to view them as again (bfloat16: its bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bfloat16"
    return t.numpy(), None


# A worker's queue pickles and then drops each batch on a daemon feeder thread. When the loader
# shuts its workers down, a spawned worker's interpreter exits while that thread may still be on
# the last batches, and Python stops a daemon thread that asks for the GIL at exit mid-call: in
# a tensor's C++ deallocation that kills the worker ("terminate called without an active
# exception", SIGABRT). The last marked batches are held here, so their last reference, and the
# deallocation, fall on the worker's own thread. Enough for the batches a worker has in flight
# (prefetch_factor per worker; 2 by default).
_KEEP: deque[Any] = deque(maxlen=16)


def _sendable(t: torch.Tensor) -> bool:
    """A tensor whose bytes can leave by value or through the ring (else torch's path)."""
    return (type(t) is torch.Tensor and t.device.type == "cpu" and t.layout == torch.strided
            and not t.requires_grad and t.dtype in TRANSFER_DTYPES and not t.is_conj()
            and not t.is_neg())


def for_transfer(obj: Any) -> Any:
    """``obj`` (a tensor, or dicts, lists and tuples of them) with its CPU tensors marked to
    leave this DataLoader worker: contiguous ones above 32 KiB through the worker's ring of
    shared-memory slots (`worker_transfer.ring_mark`), others of up to 512 KiB by value
    (`_ByValue`); unchanged outside a worker. The main process receives plain tensors with the
    same values, shapes and dtypes."""
    if torch.utils.data.get_worker_info() is None:
        return obj
    # The batch's ring sizes, gathered in the same walk (they size a first ring, or a ring of
    # larger slots once the batch outgrows small ones).
    sizes: list[int] | None = [] if ring_on() else None
    drop_replaced()
    marked = _mark(obj, sizes)
    if sizes:
        make_ring(sizes)  # or not: its tensors take the other paths when pickled
    _KEEP.append(marked)
    return marked


def _mark(obj: Any, sizes: list[int] | None = None) -> Any:
    if torch.is_tensor(obj):
        if not _sendable(obj):
            return obj
        nbytes = obj.numel() * obj.element_size()
        if _RING_MIN < nbytes <= RING_MAX_SLOT and obj.is_contiguous() and ring_on() \
                and ring_fits(nbytes):
            if sizes is not None:
                sizes.append(nbytes)
            return ring_mark(obj, by_value=nbytes <= _BY_VALUE_MAX)
        if nbytes > _BY_VALUE_MAX:
            return obj
        marked = obj.as_subclass(_ByValue)
        # here, on the worker's thread: see __reduce_ex__
        marked._tf_array, marked._tf_dtype = _numpy_of(obj)
        return marked
    if type(obj) is dict:
        return {k: _mark(v, sizes) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_mark(v, sizes) for v in obj)
    return obj


def item_position(i: Any, n: int,
                  out_of_range: str = "index {i} out of range for a dataset of {n} files") -> int:
    """A map-style dataset's index ``i`` (an integer, negative from the end) as a position among
    its ``n`` items; an IndexError says ``out_of_range`` (``{i}`` and ``{n}`` filled in)."""
    if isinstance(i, bool) or not hasattr(i, "__index__"):
        raise TypeError(f"dataset indices must be integers, not {type(i).__name__}")
    i = int(i)
    if not -n <= i < n:
        raise IndexError(out_of_range.format(i=i, n=n))
    return i % n


class FitsBatch(list):
    """The items of one DataLoader batch (what ``__getitems__`` returns) together with their
    collated form, decoded at once by a batch kernel.

    It is a list of the items, so any ``collate_fn`` works on it; `fits_collate_fn` returns
    ``collated`` as is instead of stacking the items again. The items are views of the
    collated tensors (no copy).
    """

    collated: Any = None

    @classmethod
    def of(cls, collated: Any) -> FitsBatch:
        """The batch whose collated form is ``collated`` (a tensor with the batch on dim 0, a dict
        of them, or a ``(payloads, labels)`` pair); the items are its per-sample views."""
        batch = cls(_unbind(collated))
        batch.collated = collated
        return batch


def finish_batch(payloads: Any, transform: Any, labels: Any = None) -> list:
    """A batch decoded at once → what ``__getitems__`` returns.

    A transform whose ``batchable`` attribute is true (it gives on a batch exactly what it gives
    on each item, e.g. the pointwise stretches) runs once on the batch; any other runs item by
    item on views of the batch (the plain list then goes through the usual collation).
    """
    if transform is not None and not getattr(transform, "batchable", False):
        items = [transform(p) for p in _unbind(payloads)]
        return items if labels is None else list(zip(items, labels.unbind(0)))
    if transform is not None:
        payloads = transform(payloads)
    return FitsBatch.of(payloads if labels is None else (payloads, labels))


def _unbind(collated: Any) -> list:
    if torch.is_tensor(collated):
        return list(collated.unbind(0))
    if isinstance(collated, dict):
        cols = {k: _unbind(v) for k, v in collated.items()}
        n = len(next(iter(cols.values()))) if cols else 0
        return [{k: v[i] for k, v in cols.items()} for i in range(n)]
    payloads, labels = collated
    return list(zip(_unbind(payloads), labels.unbind(0)))


def _stack_values(values: list, name: str) -> Any:
    first = values[0]
    if isinstance(first, dict):
        return {k: _stack_values([v[k] for v in values], f"{name}.{k}") for k in first}
    if not all(torch.is_tensor(v) for v in values):
        bad = next(type(v).__name__ for v in values if not torch.is_tensor(v))
        raise ValueError(f"non-tensor column {name!r} (holds {bad} values) cannot be stacked by "
                         "fits_collate_fn; pass a custom collate_fn to the DataLoader")
    return torch.stack(values)


def fits_collate_fn(batch: list) -> Any:
    """Collate dataset items: tensors are stacked, dicts become dicts of stacks (nested dicts
    too), ``(payload, label)`` pairs become ``(payloads, labels)``. A `FitsBatch` (what the
    map-style datasets' ``__getitems__`` return) is already collated and costs nothing.

    Raises
    ------
    ValueError
        A dict value that is not a tensor ("non-tensor column", naming it).
    TypeError
        Items of another kind ("Unsupported sample type").
    RuntimeError
        Tensors of different shapes (from ``torch.stack``).
    """
    if isinstance(batch, FitsBatch) and batch.collated is not None:
        return for_transfer(batch.collated)  # decoded as one batch already (__getitems__)
    return for_transfer(_collate(batch))


def _collate(batch: list) -> Any:
    if not batch:
        return []
    first = batch[0]
    if torch.is_tensor(first):
        return torch.stack(batch)
    if isinstance(first, dict):
        return {k: _stack_values([item[k] for item in batch], k) for k in first}
    if isinstance(first, tuple) and len(first) == 2 and torch.is_tensor(first[1]):
        payloads = _collate([item[0] for item in batch])
        return payloads, torch.stack([item[1] for item in batch])
    raise TypeError(f"Unsupported sample type {type(first).__name__} for fits_collate_fn; pass a "
                    "custom collate_fn")


def _to_device(obj: Any, device: str) -> Any:
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_device(v, device) for v in obj)
    return obj


class _LoaderMixin:
    """What both torchfits loaders add to theirs: batches moved to ``target_device``, a repr."""

    dataset: Any
    batch_size: int | None
    num_workers: int
    target_device: str | None

    def __iter__(self) -> Any:
        forget_gone_workers()  # the rings of past loaders' exited workers
        it = super().__iter__()  # type: ignore[misc]
        if getattr(it, "_workers", None) and not hasattr(it, "_tf_rings_go"):
            # Once the iterator is gone its workers have usually been shut down (torch joins
            # them in its __del__, which runs before this callback when the iterator dies by
            # reference count; collected in a cycle, the callback may come first and the rings
            # wait for the next pass). Persistent workers reuse the iterator: one callback.
            it._tf_rings_go = weakref.finalize(it, forget_gone_workers)
        if self.target_device is None:
            return it
        return (_to_device(batch, self.target_device) for batch in it)

    def __repr__(self) -> str:
        device = "" if self.target_device is None else f", device={self.target_device!r}"
        return (f"{type(self).__name__}(dataset={self.dataset!r}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}{device})")


class FitsDataLoader(_LoaderMixin, torch.utils.data.DataLoader):
    """A ``DataLoader`` that optionally moves batches to ``device``. Iterable datasets count
    their epochs themselves (in workers too), so every pass shuffles anew."""

    def __init__(self, dataset: Any, *args: Any, device: str | None = None, **kwargs: Any) -> None:
        super().__init__(dataset, *args, **kwargs)
        self.target_device = device


_STATEFUL: list[type] = []


def stateful_loader_class() -> type:
    """`FitsDataLoader`'s peer over torchdata's ``StatefulDataLoader`` (``state_dict()`` /
    ``load_state_dict()`` resume mid-epoch); ImportError without torchdata."""
    if not _STATEFUL:
        try:
            from torchdata.stateful_dataloader import StatefulDataLoader
        except ImportError as exc:
            raise ImportError("make_loader(stateful=True) needs torchdata's StatefulDataLoader: "
                              "pip install torchdata") from exc

        class FitsStatefulDataLoader(_LoaderMixin, StatefulDataLoader):
            """torchdata's ``StatefulDataLoader`` that optionally moves batches to ``device``."""

            def __init__(self, dataset: Any, *args: Any, device: str | None = None,
                         **kwargs: Any) -> None:
                with warnings.catch_warnings():  # torchdata 0.11 calls torch's deprecated set_vital
                    warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
                    super().__init__(dataset, *args, **kwargs)
                self.target_device = device

        _STATEFUL.append(FitsStatefulDataLoader)
    return _STATEFUL[0]


def _prefetch(dataset: Any) -> None:
    """Start whole-file downloads of a dataset's http(s) URLs (not for cutout datasets)."""
    files = getattr(dataset, "files", None)
    if not files or not getattr(dataset, "_whole_file_prefetch", True):
        return
    urls = [f for f in files if is_http_url(f)]
    if urls:
        options = getattr(dataset, "storage_options", None)
        prefetch_urls(urls, (options or {}).get("cache_dir") or getattr(dataset, "cache_dir", None),
                      storage_options=options)


def make_loader(dataset: Any, batch_size: int | None = 32, shuffle: bool | None = None,
                num_workers: int = 0, pin_memory: bool = False, prefetch_factor: int | None = 2,
                drop_last: bool = False, *, optimize_cache: bool = True,
                avg_file_size_mb: float = 10.0, device: Any = None, stateful: bool = False,
                **loader_kwargs: Any) -> torch.utils.data.DataLoader:
    """A DataLoader for a torchfits dataset.

    Parameters
    ----------
    dataset : Dataset or IterableDataset
    batch_size : int or None
        None turns automatic batching off (for datasets that yield whole batches).
    shuffle : bool, optional
        Default: True for map-style datasets, False for iterable ones (they shuffle themselves)
        and when a ``sampler`` or ``batch_sampler`` is given (e.g. ``DistributedSampler``).
    num_workers, pin_memory, prefetch_factor, drop_last
        As in ``DataLoader``; ``prefetch_factor`` is dropped when ``num_workers == 0``.
    optimize_cache, avg_file_size_mb
        ``optimize_cache`` (default True) starts background whole-file downloads of the
        dataset's ``http(s)`` URLs into its cache (`torchfits.data.remote.prefetch_urls`; the
        dataset's ``cache_dir``, else the remote cache root), as 1.x did; items read from a
        copy once it is complete and by ranged reads until then. Cutout datasets keep ranged
        reads (a cutout needs a few rows of a large file). Local files need nothing;
        ``avg_file_size_mb`` is accepted and unused.
    device : str, optional
        Move every batch there. For CUDA (when available) host batches are pinned and copied
        with ``non_blocking=True``; pair it with ``scale_on_device=True`` datasets to decode on
        the GPU instead.
    stateful : bool
        Build the loader on torchdata's ``StatefulDataLoader`` (needs torchdata): its
        ``state_dict()`` saved mid-epoch and loaded into a new loader resumes where the pass
        stopped (docs/training.md, "Resuming mid-epoch").
    **loader_kwargs
        Passed to ``DataLoader`` (``collate_fn`` defaults to `fits_collate_fn`).
    """
    iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    if shuffle is None:
        shuffle = not iterable and loader_kwargs.get("sampler") is None \
            and loader_kwargs.get("batch_sampler") is None
    kwargs = dict(loader_kwargs)
    if batch_size is not None:
        kwargs.setdefault("collate_fn", fits_collate_fn)
    if num_workers > 0 and prefetch_factor is not None:
        kwargs["prefetch_factor"] = prefetch_factor
    if optimize_cache:
        _prefetch(dataset)
    target = None
    if device is not None:
        target = validate_device(device)
        if target.startswith("cuda") and torch.cuda.is_available():
            pin_memory = True
    cls = stateful_loader_class() if stateful else FitsDataLoader
    return cls(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
               pin_memory=pin_memory, drop_last=drop_last, device=target, **kwargs)

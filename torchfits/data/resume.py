"""Passes of the iterable datasets: which epoch a pass shuffles with, and where an interrupted pass
resumes (the ``state_dict``/``load_state_dict`` protocol of torchdata's ``StatefulDataLoader``).

The epoch of a pass comes from counters in shared memory, one per DataLoader worker id and one
for the main process: a worker reads its counter when its pass starts and advances it. Worker
copies of a dataset are made anew each epoch (pickled with spawn, forked otherwise) but the
counters are shared with the dataset they were copied from, so a plain ``DataLoader`` with
workers reshuffles every epoch, and the same ``(seed, epoch)`` gives the same order in any run.
"""
from __future__ import annotations

import multiprocessing.context
from collections.abc import Iterable, Iterator
from multiprocessing.sharedctypes import RawArray
from typing import Any

from .._torch_adapter import worker_slot
from .loader import for_transfer

__all__ = ["EpochMixin", "MAX_WORKERS"]

MAX_WORKERS = 256  # worker ids past this share counters (modulo); orders stay deterministic


def _counters(values: Iterable[int] | None = None) -> Any:
    array = RawArray("q", MAX_WORKERS + 1)
    for k, v in enumerate(values or ()):
        array[k] = v
    return array


class EpochMixin:
    """An epoch counter shared with the dataset's worker copies, and the resume state of a pass.

    ``state_dict()`` is ``{"epoch", "yielded", "slot"}``: the epoch of the pass under way (or of
    the next one, between passes), how many items it has yielded, and the (rank, world size,
    worker, workers, items) it was cut for. ``load_state_dict`` makes the next pass that epoch's
    and skip the items already yielded, without reading them (subclasses say how they skip).
    """

    _passes: Any = None
    _pass: dict[str, Any] | None = None
    _resume: dict[str, Any] | None = None

    def _init_passes(self) -> None:
        self._passes = _counters()
        self._pass = None
        self._resume = None

    # -- the epoch ------------------------------------------------------------------------------------
    def _shared(self) -> Any:
        if self._passes is None:  # a subclass that set `epoch` before `_init_passes`
            self._passes = _counters()
        return self._passes

    @property
    def epoch(self) -> int:
        """The epoch of the next pass of the main process (and of workers that have not run one
        since the last `set_epoch`)."""
        return int(max(self._shared()))

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.set_epoch(value)

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass, in this process and in every DataLoader worker
        (shuffles are fixed by ``(seed, epoch)``); later passes count on from it."""
        epoch = int(epoch)
        passes = self._shared()
        for k in range(len(passes)):
            passes[k] = epoch

    def _begin_pass(self) -> tuple[int, int]:
        """Start a pass: (its epoch, the items it skips). A loaded state gives both (checked
        against the slot it was cut for, and used once); else the epoch is this worker's
        counter (the main process's: the highest), which then advances, and nothing is
        skipped."""
        worker, _ = worker_slot()
        in_worker = _in_worker()
        passes = self._shared()
        resume, self._resume = self._resume, None
        slot = self._slot()
        skip = 0
        if resume is not None:
            saved = resume.get("slot")
            if saved is not None and list(saved) != slot:
                raise ValueError(
                    f"{type(self).__name__}: the state was saved for (rank, world_size, worker, "
                    f"num_workers, items) = {tuple(saved)} but this pass is {tuple(slot)}; "
                    "resume with the same files, ranks and num_workers")
            epoch, skip = int(resume["epoch"]), int(resume["yielded"])
        elif in_worker:
            epoch = int(passes[1 + worker % MAX_WORKERS])
        else:
            epoch = int(max(passes))
        if in_worker:
            passes[1 + worker % MAX_WORKERS] = epoch + 1
        else:
            self.set_epoch(epoch + 1)
        self._pass = {"epoch": epoch, "yielded": skip, "slot": slot}
        return epoch, skip

    def _next_epoch(self) -> int:
        """`_begin_pass` for a dataset that cannot skip: the epoch alone (a loaded state's items
        are then yielded again)."""
        epoch = self._begin_pass()[0]
        assert self._pass is not None
        self._pass["yielded"] = 0
        return epoch

    def _slot(self) -> list[int]:
        worker, workers = worker_slot()
        rank, world = getattr(self, "rank", 0), getattr(self, "world_size", 1)
        return [int(rank), int(world), worker, workers, self._items()]

    def _items(self) -> int:
        """What the state is cut over (the file or row count); a different dataset refuses it."""
        return len(getattr(self, "files", ()))

    def _counted(self, stream: Iterable[Any]) -> Iterator[Any]:
        """``stream``, counting what it yields into the pass's state (in a DataLoader worker its
        tensors leave by value or through the worker's ring: `for_transfer`)."""
        state = self._pass
        assert state is not None
        for item in stream:
            state["yielded"] += 1
            yield for_transfer(item)

    # -- the StatefulDataLoader protocol --------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where this process's pass stands: ``{"epoch", "yielded", "slot"}`` (before any pass,
        the next epoch and 0 yielded)."""
        if self._resume is not None:
            return dict(self._resume)
        if self._pass is None:
            return {"epoch": self.epoch, "yielded": 0, "slot": None}
        return {"epoch": self._pass["epoch"], "yielded": self._pass["yielded"],
                "slot": list(self._pass["slot"])}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from ``state_dict`` (from `state_dict`): the next pass is its epoch, and skips
        the items it had yielded."""
        if not isinstance(state_dict, dict) or not {"epoch", "yielded"} <= set(state_dict):
            raise ValueError(f"{type(self).__name__}.load_state_dict takes the dict state_dict() "
                             f"returns, with 'epoch' and 'yielded'; got {state_dict!r}")
        self._resume = {"epoch": int(state_dict["epoch"]), "yielded": int(state_dict["yielded"]),
                        "slot": state_dict.get("slot")}
        self._pass = None

    # -- pickling: the counters stay shared with worker copies ----------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if multiprocessing.context.get_spawning_popen() is None and state.get("_passes") is not None:
            state["_passes"] = list(state["_passes"])  # a plain copy (pickle, deepcopy)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        passes = state.get("_passes")
        if isinstance(passes, list):
            state["_passes"] = _counters(passes)
        self.__dict__.update(state)


def _in_worker() -> bool:
    import sys

    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None

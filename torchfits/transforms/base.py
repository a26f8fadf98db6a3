"""The transform protocol (:class:`FITSTransform`), :class:`Compose`, and the ``nn.Module``
adapter (:class:`AsModule` / :func:`as_module`)."""
from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..errors import TransformError, TransformInverseError
from ._common import View, make_view

__all__ = ["FITSTransform", "Compose", "AsModule", "as_module"]


class FITSTransform:
    """Base of every transform: ``forward``, ``inverse`` and ``__call__`` (= ``forward``).

    Inputs are a tensor of any shape -- ``(H, W)``, ``(C, H, W)``, ``(B, C, H, W)`` -- or the
    ``{"flux": T, "ivar"?: T, "mask"?: T}`` payload the datasets yield; the result has the
    same form, on the same device. ``mask`` (boolean, True = valid, broadcast to the flux)
    overrides the payload's own mask. Masked and non-finite pixels are left out of every
    statistic and come back NaN: a mask means *no data there*. Linear transforms propagate
    ``ivar`` exactly (``ivar / scale**2``); nonlinear ones pass it through and warn once.

    Statistics a transform needs for ``inverse`` are remembered per thread, from the last
    ``forward`` on that thread; they are not pickled, so a transform sent to a DataLoader
    worker starts fresh there.
    """

    #: False when the transform has no inverse at all.
    invertible: bool = True
    #: True when ``forward`` on a batch gives, bit for bit, the stack of ``forward`` on each
    #: item (pointwise maps with fixed parameters): the datasets then run it once per batch.
    batchable: bool = False

    def __new__(cls, *args: Any, **kwargs: Any) -> FITSTransform:
        obj = super().__new__(cls)
        obj._tls = threading.local()
        return obj

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_tls", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tls = threading.local()

    # -- protocol ------------------------------------------------------------------------
    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        raise NotImplementedError

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        raise TransformInverseError(f"{type(self).__name__} has no inverse")

    def __call__(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        return self.forward(x, mask=mask)

    # -- helpers for subclasses ----------------------------------------------------------
    def _view(self, x: Any, mask: torch.Tensor | None) -> View:
        return make_view(x, mask, type(self).__name__)

    def _remember(self, **values: Any) -> None:
        self._tls.__dict__.update(values)

    def _recall(self, *names: str) -> Any:
        try:
            got = tuple(self._tls.__dict__[n] for n in names)
        except KeyError:
            raise TransformInverseError(
                f"{type(self).__name__}.inverse() needs the statistics of a forward() call "
                f"on this thread first") from None
        return got if len(got) > 1 else got[0]

    def _warn_ivar(self) -> None:
        if not getattr(self, "_warned_ivar", False):
            self._warned_ivar = True
            warnings.warn(f"{type(self).__name__} is nonlinear: the payload's 'ivar' is passed "
                          "through unchanged (pass propagate_ivar=True where offered, or drop "
                          "ivar)", UserWarning, stacklevel=4)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._repr_args().items())
        return f"{type(self).__name__}({args})"

    def _repr_args(self) -> dict[str, Any]:
        return {}


class Compose(FITSTransform):
    """Apply transforms in order; ``inverse`` undoes them in reverse order.

    Parameters
    ----------
    transforms : sequence
        :class:`FITSTransform` instances (or any callables taking ``(x, mask=None)``).
    """

    def __init__(self, transforms: Sequence[Any]) -> None:
        if isinstance(transforms, (FITSTransform, torch.Tensor)) or not hasattr(transforms, "__iter__"):
            raise TransformError("Compose takes a sequence of transforms, got "
                                 f"{type(transforms).__name__}")
        self.transforms = list(transforms)
        for i, t in enumerate(self.transforms):
            if not callable(t):
                raise TransformError(f"Compose: item {i} is not callable: {t!r}")
        self.invertible = all(getattr(t, "invertible", False) and hasattr(t, "inverse")
                              for t in self.transforms)
        self.batchable = all(getattr(t, "batchable", False) for t in self.transforms)

    def __len__(self) -> int:
        return len(self.transforms)

    def __getitem__(self, index: int) -> Any:
        return self.transforms[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.transforms)

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        for t in self.transforms:
            x = t(x, mask=mask) if isinstance(t, FITSTransform) else _call(t, x, mask)
        return x

    def inverse(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        for t in reversed(self.transforms):
            if not hasattr(t, "inverse"):
                raise TransformInverseError(f"Compose: {t!r} has no inverse")
            x = t.inverse(x, mask=mask)
        return x

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(t) for t in self.transforms)
        return f"Compose([\n    {inner}\n])" if inner else "Compose([])"


def _call(t: Any, x: Any, mask: torch.Tensor | None) -> Any:
    return t(x) if mask is None else t(x, mask=mask)


class AsModule(torch.nn.Module):
    """A :class:`FITSTransform` as a ``torch.nn.Module`` (forward pass only).

    Lets a preprocessing pipeline sit in ``torch.nn.Sequential(AsModule(pipeline), model)``;
    use the wrapped ``transform.inverse`` to undo it. The transform has no parameters or
    buffers, so ``.to(device)`` moves nothing: it runs on whatever device its input is on.
    """

    def __init__(self, transform: Any) -> None:
        super().__init__()
        if not callable(transform):
            raise TransformError(f"AsModule needs a callable transform, got {transform!r}")
        self.transform = transform

    def forward(self, x: Any, mask: torch.Tensor | None = None) -> Any:
        return _call(self.transform, x, mask)

    def extra_repr(self) -> str:
        return repr(self.transform)


def as_module(transform: Any) -> AsModule:
    """Wrap ``transform`` as an :class:`AsModule` for ``torch.nn.Sequential``."""
    return AsModule(transform)

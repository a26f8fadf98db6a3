"""Shared plumbing of the transforms: payload views, dtype rules, reduction dims.

Private; the public names live in the sibling modules and ``torchfits.transforms``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import torch

from ..errors import TransformError

Dims = Union[int, Sequence[int], None]
_KEEP: Any = object()


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic and statistics run in for an input of ``dtype``.

    float32/float64 stay; float16/bfloat16 compute in float32 (quantiles and eps floors
    underflow in half precision); integers promote to float32, or float64 for 32/64-bit
    integers whose values float32 would round.
    """
    if dtype in (torch.float32, torch.float64):
        return dtype
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if dtype.is_complex:
        raise TransformError(f"transforms take real data, got {dtype}; take .real or .abs() first")
    if dtype in (torch.int32, torch.int64, torch.uint32, torch.uint64):
        return torch.float64
    return torch.float32


def out_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a transform returns: the input's floating dtype, else :func:`work_dtype`.

    An integer result would truncate a stretch or a normalization to a few levels.
    """
    return dtype if dtype.is_floating_point else work_dtype(dtype)


def as_work(x: torch.Tensor) -> torch.Tensor:
    """``x`` converted to its work dtype (no copy when it already is)."""
    return x.to(work_dtype(x.dtype))


def reduce_dims(ndim: int, dim: Dims, who: str) -> tuple[int, ...]:
    """Sorted non-negative reduction dims; ``None`` or ``()`` means every dim."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    out = set()
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TransformError(f"{who}: dim entries must be integers, got {d!r}")
        norm = d + ndim if d < 0 else d
        if not 0 <= norm < ndim:
            raise TransformError(
                f"{who}: dim {d} is out of range for a {ndim}-D input "
                f"(shape needs at least {max(-d, d + 1)} dims)")
        out.add(norm)
    return tuple(sorted(out))


def check_dim_param(dim: Dims, who: str) -> tuple[int, ...] | None:
    """Validate a ``dim=`` constructor argument; return it as a tuple (None stays None)."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TransformError(f"{who}: dim entries must be integers, got {d!r}")
    if len(set(dims)) != len(dims):
        raise TransformError(f"{who}: dim has repeated entries: {dims}")
    return dims


def positive(value: Any, name: str, who: str, *, allow_zero: bool = False) -> float:
    """``value`` as a finite float > 0 (or >= 0), else :class:`TransformError`."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TransformError(f"{who}: {name} must be a number, got {value!r}") from None
    ok = v >= 0 if allow_zero else v > 0
    if not (ok and math.isfinite(v)):
        bound = ">= 0" if allow_zero else "> 0"
        raise TransformError(f"{who}: {name} must be finite and {bound}, got {value!r}")
    return v


def choice(value: Any, allowed: Sequence[str], name: str, who: str) -> str:
    if value not in allowed:
        raise TransformError(f"{who}: {name} must be one of {', '.join(map(repr, allowed))}, "
                             f"got {value!r}")
    return str(value)


@dataclass
class View:
    """One code path for a bare tensor and a ``{"flux", "ivar"?, "mask"?}`` payload.

    ``valid`` is True where a pixel is data: inside the caller's mask (or the payload's own
    mask) and finite. Statistics skip the rest, and :meth:`rebuild` blanks them to NaN in the
    result: a masked pixel is *no data*, and scaling it by limits computed without it would
    hand back a plausible-looking, usually amplified number.
    """

    original: Any
    flux: torch.Tensor
    ivar: torch.Tensor | None
    valid: torch.Tensor

    def rebuild(self, flux: torch.Tensor, *, ivar: Any = _KEEP, blank: bool = True) -> Any:
        """The caller's container with ``flux`` (and ``ivar``) replaced."""
        if blank and flux.is_floating_point():
            flux = torch.where(self.valid, flux, flux.new_full((), float("nan")))
        if not isinstance(self.original, dict):
            return flux
        out = dict(self.original)
        out["flux"] = flux
        if ivar is not _KEEP:
            out["ivar"] = ivar
        if blank and isinstance(out.get("ivar"), torch.Tensor):
            iv = out["ivar"]
            out["ivar"] = torch.where(self.valid, iv, iv.new_zeros(()))
        return out


def make_view(x: Any, mask: torch.Tensor | None, who: str) -> View:
    """Split ``x`` into flux/ivar/validity; check the payload and mask shapes."""
    ivar: torch.Tensor | None = None
    own_mask: torch.Tensor | None = None
    if isinstance(x, torch.Tensor):
        flux = x
    elif isinstance(x, dict):
        entry = x.get("flux")
        if not isinstance(entry, torch.Tensor):
            keys = ", ".join(sorted(map(str, x))) or "none"
            raise TransformError(f"{who}: a dict payload needs a tensor 'flux' entry "
                                 f"(keys present: {keys})")
        flux = entry
        ivar = x.get("ivar") if isinstance(x.get("ivar"), torch.Tensor) else None
        own_mask = x.get("mask") if isinstance(x.get("mask"), torch.Tensor) else None
    else:
        raise TransformError(f"{who}: expected a torch.Tensor or a {{'flux': tensor, ...}} "
                             f"payload, got {type(x).__name__}")
    if flux.dtype.is_complex:
        raise TransformError(f"{who}: transforms take real data, got {flux.dtype}")
    if ivar is not None and ivar.shape != flux.shape:
        raise TransformError(f"{who}: ivar shape {tuple(ivar.shape)} != flux shape "
                             f"{tuple(flux.shape)}")
    chosen = mask if mask is not None else own_mask
    valid = torch.isfinite(flux) if flux.is_floating_point() else \
        torch.ones_like(flux, dtype=torch.bool)
    if chosen is not None:
        if not isinstance(chosen, torch.Tensor):
            raise TransformError(f"{who}: mask must be a boolean tensor, got "
                                 f"{type(chosen).__name__}")
        try:
            m = torch.broadcast_to(chosen.to(device=flux.device, dtype=torch.bool), flux.shape)
        except RuntimeError:
            raise TransformError(f"{who}: mask shape {tuple(chosen.shape)} does not broadcast "
                                 f"to flux shape {tuple(flux.shape)}") from None
        valid = valid & m
    return View(x, flux, ivar, valid)

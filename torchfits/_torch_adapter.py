"""The torch boundary: NumPy buffers become tensors here and nowhere else (torch is optional).

Conversion goes through ``torch.from_numpy`` (DLPack-equivalent, no copy) on the CPU.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

__all__ = ["require_torch", "to_tensor", "validate_device", "is_tensor", "tensor_to_numpy", "torch_dtype",
           "numpy_decode_dtype", "image_tensor", "iterable_dataset", "worker_slot"]

# torchfits 1.2.3's wording; 'mps:N' is accepted as well.
_DEVICE_ERROR = "device must be 'cpu', 'cuda', 'mps' or 'cuda:N' (or 'mps:N')"


def require_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "torch is required for tensor results: pip install 'torchfits[torch]' "
            "(NumPy and Arrow reads work without it)"
        ) from exc
    return torch


def validate_device(device: Any) -> str:
    """Check a device spec without importing torch; return it as a string."""
    text = str(device)
    base, _, index = text.partition(":")
    if base not in ("cpu", "cuda", "mps") or (index and not index.isdigit()) or (
        base == "cpu" and index
    ):
        raise ValueError(_DEVICE_ERROR)
    return text


def is_tensor(obj: Any) -> bool:
    """True for a torch.Tensor, checked without importing torch."""
    cls = type(obj)
    return cls.__module__.startswith("torch") and hasattr(obj, "data_ptr")


def tensor_to_numpy(t: Any) -> np.ndarray:
    """A CPU NumPy view of a tensor (copied to host first if needed)."""
    if t.device.type != "cpu":
        t = t.cpu()
    return t.detach().numpy()


def to_tensor(arr: np.ndarray, device: Any = "cpu", *, half: Optional[str] = None,
              non_blocking: bool = False) -> Any:
    """Wrap ``arr`` as a tensor without copying (copying only read-only or non-native arrays),
    optionally cast to float16/bfloat16, then move it to ``device``."""
    torch = require_torch()
    device = validate_device(device)
    if not arr.flags.writeable or not arr.dtype.isnative:
        arr = np.array(arr, dtype=arr.dtype.newbyteorder("=")) if not arr.dtype.isnative else arr.copy()
    if arr.dtype == np.uint64 and not hasattr(torch, "uint64"):
        arr = arr.astype(np.float64)
    t = torch.from_numpy(arr)
    if half == "fp16":
        t = t.to(torch.float16)
    elif half == "bf16":
        t = t.to(torch.bfloat16)
    if device != "cpu":
        if device.startswith("mps") and t.dtype in (torch.float64, torch.complex128):
            import warnings

            warnings.warn("MPS has no 64-bit floats: downcasting to 32-bit", UserWarning, stacklevel=3)
            t = t.to(torch.float32 if t.dtype == torch.float64 else torch.complex64)
        t = t.to(device, non_blocking=non_blocking)
    return t


# -- dtypes ---------------------------------------------------------------------------------------
def torch_dtype(spec: Any) -> Any:
    """A dtype request (torch dtype, NumPy dtype, or a name such as ``"bfloat16"``) as a
    ``torch.dtype``; None stays None."""
    if spec is None:
        return None
    torch = require_torch()
    if isinstance(spec, torch.dtype):
        return spec
    name = spec.lower() if isinstance(spec, str) else None
    if name in ("bfloat16", "bf16"):
        return torch.bfloat16
    if name in ("half", "fp16"):
        return torch.float16
    try:
        dt = np.dtype(spec)
    except TypeError:
        raise TypeError(f"dtype {spec!r} is not a torch or NumPy dtype") from None
    return torch.from_numpy(np.empty(0, dt)).dtype


def numpy_decode_dtype(tdtype: Any) -> np.dtype:
    """The NumPy dtype to decode into for a tensor of ``tdtype`` (float32 for bfloat16, which
    NumPy lacks; the cast to bfloat16 then happens in torch)."""
    name = str(tdtype).rpartition(".")[2]
    return np.dtype("float32" if name == "bfloat16" else name)


def image_tensor(img: Any, device: Any = "cpu", dtype: Any = None, *, key: Any = None,
                 non_blocking: bool = False) -> Any:
    """An `Image` (or the region ``img[key]``) as a tensor of ``dtype`` on ``device``."""
    tdt = torch_dtype(dtype)
    if tdt is None:
        arr = img.read() if key is None else img[key]
    else:
        want = numpy_decode_dtype(tdt)
        arr = img.read(dtype=want) if key is None else img[key].astype(want, copy=False)
    t = to_tensor(arr, device, non_blocking=non_blocking)
    return t if tdt is None or t.dtype == tdt else t.to(tdt)


# -- IterableDataset wrapper ----------------------------------------------------------------------
_ITERABLE_CLASS: Any = None


def iterable_dataset(source: Any) -> Any:
    """Wrap an iterable (re-iterable, picklable) object as a ``torch.utils.data.IterableDataset``
    so a DataLoader takes it directly. The wrapper pickles as its source."""
    global _ITERABLE_CLASS
    torch = require_torch()
    if _ITERABLE_CLASS is None:
        class TorchIterable(torch.utils.data.IterableDataset):  # type: ignore[misc, name-defined]
            """An IterableDataset over a torchfits stream (see its ``source``)."""

            def __init__(self, source: Any) -> None:
                self.source = source

            def __iter__(self) -> Any:
                return iter(self.source)

            def __reduce__(self) -> Any:
                return (iterable_dataset, (self.source,))

            def __repr__(self) -> str:
                return f"TorchIterable({self.source!r})"

        _ITERABLE_CLASS = TorchIterable
    return _ITERABLE_CLASS(source)


def worker_slot() -> tuple[int, int]:
    """(worker id, number of workers) of the current DataLoader worker; (0, 1) outside one.
    Does not import torch when nothing has."""
    import sys

    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    return (0, 1) if info is None else (int(info.id), int(info.num_workers))

"""The torch boundary: NumPy buffers become tensors here and nowhere else (torch is optional).

Conversion goes through ``torch.from_numpy`` (DLPack-equivalent, no copy) on the CPU.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

__all__ = ["require_torch", "to_tensor", "validate_device", "is_tensor", "tensor_to_numpy"]

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

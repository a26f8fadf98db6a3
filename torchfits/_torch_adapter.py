"""The torch boundary: NumPy buffers become tensors here and nowhere else (torch is optional).

Conversion goes through ``torch.from_numpy`` (DLPack-equivalent, no copy) on the CPU.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from .errors import ColumnNotFoundError, NullValueError

__all__ = ["require_torch", "to_tensor", "validate_device", "is_tensor", "tensor_to_numpy", "torch_dtype",
           "numpy_decode_dtype", "image_tensor", "iterable_dataset", "worker_slot",
           "NullValue", "mask_name", "check_null_options", "apply_null_rule"]

#: What ``null_value=`` takes on the native torch routes: one fill for every integer and logical
#: column, or a fill per column name.
NullValue = Union[None, bool, int, float, Mapping[str, Union[bool, int, float]]]

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


def to_tensor(arr: np.ndarray, device: Any = "cpu", *, half: str | None = None,
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


# -- the null rule of the native torch routes -------------------------------------------------------
# An integer or logical null has no tensor form: it raises `NullValueError` unless the caller
# says what to put there (``null_value=``) or asks for a validity tensor beside the values
# (``masks=True``). Float nulls are NaN. The nullable columns (``nullable``: name -> (leaf
# NumPy dtype, what makes a value null)) come from the headers, so every batch of a stream has
# the same mask columns whether or not it holds a null.

def mask_name(column: str) -> str:
    """The key of ``column``'s validity tensor when ``masks=True``."""
    return f"{column}_mask"


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def check_null_options(null_value: NullValue, masks: Any, names: Sequence[str],
                       nullable: Mapping[str, Any], where: str) -> None:
    """Refuse a ``null_value`` of the wrong kind, one naming a column not read, and mask keys
    that a column of the table already uses."""
    if isinstance(null_value, Mapping):
        for key, value in null_value.items():
            if key not in names:
                raise ColumnNotFoundError(f"{where}: null_value names column {key!r}, which is not "
                                          f"among the columns read: {list(names)}")
            if not _is_number(value):
                raise TypeError(f"null_value for column {key!r} must be a number or a bool, "
                                f"not {type(value).__name__}")
    elif null_value is not None and not _is_number(null_value):
        raise TypeError("null_value must be None, a number, a bool or a {column: value} dict, "
                        f"not {type(null_value).__name__}")
    if masks:
        taken = [mask_name(n) for n in nullable if mask_name(n) in names]
        if taken:
            raise ValueError(f"{where}: masks=True would add {taken[0]!r}, which is already a column "
                             "of the table; leave that column out of columns= or pass masks=False")


def _fill_for(name: str, dtype: np.dtype, value: Any, where: str) -> Any:
    """``value`` as a fill of ``dtype`` (an integer or bool leaf), or a NullValueError."""
    if dtype.kind == "b":
        if isinstance(value, (bool, np.bool_)) or (not isinstance(value, (float, np.floating))
                                                   and int(value) in (0, 1)):
            return bool(value)
        raise NullValueError(f"{where}: column {name!r} (logical) cannot take null_value {value!r}: "
                             f"give True or False (a dict such as {{{name!r}: False}} fills one column)")
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise NullValueError(f"{where}: column {name!r} ({dtype}) cannot take null_value {value!r}: "
                             "it is not an integer")
    info = np.iinfo(dtype)
    if not info.min <= int(value) <= info.max:
        raise NullValueError(f"{where}: column {name!r} ({dtype}) cannot take null_value {value!r}: "
                             f"it is outside {dtype}'s range")
    return int(value)


def _null_error(name: str, dtype: np.dtype, note: str, count: int, where: str) -> NullValueError:
    logical = dtype.kind == "b"
    kind = "logical" if logical else f"integer, {dtype}"
    example = "False" if logical else ("0" if dtype.kind == "u" else "-1")
    zero = "False" if logical else "0"
    why = f"; {note}" if note else ""
    values = "value" if count == 1 else "values"
    return NullValueError(
        f"{where}: column {name!r} ({kind}{why}) has nulls ({count} {values}), which a tensor cannot "
        f"hold: pass null_value= to fill them (null_value={example} or null_value={{{name!r}: "
        f"{example}}}), or masks=True to fill them with {zero} and add a bool tensor "
        f"{mask_name(name)!r} (True where a value is present); where='{name} IS NOT NULL' leaves "
        "those rows out")


def apply_null_rule(columns: Mapping[str, np.ndarray], nullable: Mapping[str, tuple[np.dtype, str]],
                    *, null_value: NullValue = None, masks: bool = False,
                    where: str = "") -> dict[str, np.ndarray]:
    """Scanner columns (``to_numpy`` form: nulls as masked arrays, variable-length cells as
    object arrays holding ``None`` for null elements) → plain arrays ready for tensors.

    Integer and logical nulls are filled with ``null_value`` (a number, or a per-column dict),
    or with 0/False when ``masks`` is true; otherwise they raise `NullValueError` naming
    ``where`` (file and HDU) and the column. With ``masks``, every ``nullable`` column gets a
    bool array ``<name>_mask`` beside it, True where a value is present. Float nulls are NaN
    already and are left alone.
    """
    out: dict[str, np.ndarray] = {}
    for name, arr in columns.items():
        leaf, note = nullable.get(name, (None, ""))
        fill = null_value.get(name) if isinstance(null_value, Mapping) else null_value
        if isinstance(arr, np.ma.MaskedArray):
            leaf = arr.dtype
        if leaf is not None and leaf.kind not in "biu":
            leaf = None  # float nulls are NaN: nothing to fill, no mask
        if leaf is not None and fill is not None:
            fill = _fill_for(name, leaf, fill, where)
        elif leaf is not None and masks:
            fill = False if leaf.kind == "b" else 0
        valid: Any = None
        if isinstance(arr, np.ma.MaskedArray):
            invalid = np.ma.getmaskarray(arr)
            count = int(invalid.sum())
            if count and fill is None:
                raise _null_error(name, arr.dtype, note, count, where)
            valid = ~invalid
            arr = arr.filled(fill) if count else np.asarray(arr.data)
        elif leaf is not None and arr.dtype == object:  # variable-length cells
            arr, valid = _fill_cells(name, arr, leaf, note, fill, where)
        out[name] = arr
        if masks and name in nullable and leaf is not None:
            if valid is None:
                valid = np.ones(arr.shape, dtype=bool)
            out[mask_name(name)] = valid
    return out


def _fill_cells(name: str, cells: np.ndarray, leaf: np.dtype, note: str, fill: Any,
                where: str) -> tuple[np.ndarray, np.ndarray]:
    """A variable-length column (object array of 1-D arrays; a cell with a null element is an
    object array holding None) filled, and its per-cell validity arrays."""
    out = np.empty(len(cells), dtype=object)
    valid = np.empty(len(cells), dtype=object)
    missing = 0
    for i, cell in enumerate(cells):
        if cell is None:
            out[i], valid[i] = np.zeros(0, leaf), np.zeros(0, bool)
            continue
        cell = np.asarray(cell)
        if cell.dtype != object:
            out[i], valid[i] = cell, np.ones(cell.shape, bool)
            continue
        ok = np.array([v is not None for v in cell], dtype=bool)
        missing += int((~ok).sum())
        if fill is not None:
            out[i] = np.array([v if v is not None else fill for v in cell], dtype=leaf)
        valid[i] = ok
    if missing and fill is None:
        raise _null_error(name, leaf, note, missing, where)
    return out, valid

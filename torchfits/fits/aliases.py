"""Type aliases for public signatures (typing only; nothing here is imported at run time by
users)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Union

if TYPE_CHECKING:  # typing only: torch stays optional
    import torch

__all__ = ["PathArg", "HduArg", "SourceArg", "InputArg", "DeviceArg", "MmapArg", "TensorRead"]

#: A file: a path string or an ``os.PathLike`` (CFITSIO ``[...]`` suffixes allowed where noted).
PathArg = Union[str, "os.PathLike[str]"]
#: An HDU: a 0-based index, an EXTNAME (case-insensitive; ``"SCI,2"`` adds an EXTVER) or an
#: ``(EXTNAME, EXTVER)`` pair.
HduArg = Union[int, str, tuple[str, int]]
#: One file, a glob, a directory, or a sequence of them.
SourceArg = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
#: Anything the byte-source layer opens: a path or URL, the file's bytes, or a binary file object.
InputArg = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]
#: A torch device, by name (``"cpu"``, ``"cuda:0"``) or object.
DeviceArg = Union[str, "torch.device"]
#: The 1.x ``mmap=`` switch: ``True``, ``False`` or ``"auto"``.
MmapArg = Union[bool, str]
#: What the 1.x ``read`` gives: a tensor (image), a dict of tensors (table), either with its
#: header as a pair, or a list of those for a list of paths or HDUs.
TensorRead = Union["torch.Tensor", dict[str, Any], tuple[Any, Any], list[Any]]

"""Type aliases for public signatures (typing only; nothing here is imported at run time by
users)."""
from __future__ import annotations

import os
from typing import Sequence, Union

__all__ = ["PathArg", "HduArg", "SourceArg"]

#: A file: a path string or an ``os.PathLike`` (CFITSIO ``[...]`` suffixes allowed where noted).
PathArg = Union[str, "os.PathLike[str]"]
#: An HDU: a 0-based index or an EXTNAME (case-insensitive).
HduArg = Union[int, str]
#: One file, a glob, a directory, or a sequence of them.
SourceArg = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

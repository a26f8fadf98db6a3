"""Type stub for the compiled checksum kernel (cython_src/_checksum.pyx)."""
from typing import Any

def ones_sum32(buf: Any, initial: int = ...) -> int: ...

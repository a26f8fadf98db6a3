"""Type stub for the PLIO_1 kernels (cython_src/_plio.pyx)."""
from typing import Any

import numpy as np

ERR_TRUNCATED: int
ERR_CORRUPT: int
HEADER_WORDS: int
OK: int
MISMATCH: int
STOPPED: int

def decode(src: bytes | np.ndarray | memoryview, out: np.ndarray) -> int: ...
def encode(src: np.ndarray) -> bytes: ...
def decode_many(buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray, dest: np.ndarray,
                out: np.ndarray, status: np.ndarray, stop: np.ndarray) -> int: ...

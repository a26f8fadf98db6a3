"""Type stub for the HCOMPRESS_1 kernels (cython_src/_hcompress.pyx)."""
from typing import Any

import numpy as np

ERR_TRUNCATED: int
ERR_CORRUPT: int
ERR_MEMORY: int
OK: int
MISMATCH: int
STOPPED: int

def decode(src: bytes | np.ndarray | memoryview, out: np.ndarray, nx: int, ny: int, smooth: bool,
           narrow: bool = False) -> int: ...
def encode(src: np.ndarray, scale: int) -> bytes: ...
def decode_many(buf: Any, offsets: np.ndarray, sizes: np.ndarray, nrows: np.ndarray,
                ncols: np.ndarray, dest: np.ndarray, out: np.ndarray, smooth: bool, narrow: bool,
                status: np.ndarray, stop: np.ndarray) -> int: ...

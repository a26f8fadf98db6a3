"""Type stub for the batched GZIP_1 / GZIP_2 tile decoder (cython_src/_gziptiles.pyx)."""
from typing import Any

import numpy as np

OK: int
MISMATCH: int
STOPPED: int

def zlib_version() -> str: ...
def decode_many(buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray, dest: np.ndarray,
                out: np.ndarray, itemsize: int, shuffled: bool, status: np.ndarray,
                stop: np.ndarray) -> int: ...

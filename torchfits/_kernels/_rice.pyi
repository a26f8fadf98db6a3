"""Type stub for the RICE_1 kernels (cython_src/_rice.pyx)."""
from typing import Any

import numpy as np

ERR_TRUNCATED: int
ERR_OVERFLOW: int
OK: int
MISMATCH: int
STOPPED: int

def decode(src: bytes | np.ndarray | memoryview, out: np.ndarray, bytepix: int, blocksize: int) -> int: ...
def encode(src: np.ndarray, bytepix: int, blocksize: int) -> bytes: ...
def decode_many(buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray, dest: np.ndarray,
                out: np.ndarray, bytepix: int, blocksize: int, status: np.ndarray,
                stop: np.ndarray) -> int: ...
def decode_many_dequant(buf: Any, offsets: np.ndarray, sizes: np.ndarray, npix: np.ndarray,
                        dest: np.ndarray, out: np.ndarray, blocksize: int, status: np.ndarray,
                        stop: np.ndarray, zscale: np.ndarray, zzero: np.ndarray,
                        tile_index: np.ndarray, method: int, zdither0: int, has_null: bool,
                        null_value: int, rand: np.ndarray) -> int: ...
def use_lzcnt(on: bool) -> bool: ...

"""Type stub for the compiled image decode kernel (cython_src/_image.pyx)."""
from typing import Any

import numpy as np

MODE_RAW: int
MODE_FLIP: int
MODE_SCALE: int
OUTPUT_MEMORY_DEFAULT: int

def decode_region(
    src: Any,
    data_offset: int,
    out: np.ndarray,
    bitpix: int,
    mode: int,
    shape: tuple[int, ...],
    start: tuple[int, ...],
    step: tuple[int, ...],
    count: tuple[int, ...],
    bscale: float = ...,
    bzero: float = ...,
    has_blank: bool = ...,
    blank: int = ...,
) -> None: ...

class CutoutReader:
    def __init__(
        self,
        src: Any,
        data_offset: int,
        bitpix: int,
        mode: int,
        shape: tuple[int, ...],
        dtype: Any,
        bscale: float = ...,
        bzero: float = ...,
        has_blank: bool = ...,
        blank: int = ...,
    ) -> None: ...
    def cutout(self, x1: int, y1: int, x2: int, y2: int) -> np.ndarray: ...
    def set_result(self, wrap: Any = ..., faults: Any = ..., on_fault: Any = ...) -> None: ...
    def set_residency(self, limit: int, on_touched: Any = ..., granule: int = ...) -> None: ...
    def read(self, x1: int, y1: int, x2: int, y2: int) -> Any: ...
    def __call__(self, x1: int, y1: int, x2: int, y2: int, *, out: Any = ...) -> Any: ...

def release_cutout_memory() -> int: ...
def cutout_memory_kept() -> int: ...
def release_output_memory() -> int: ...
def output_memory_kept() -> int: ...
def set_output_memory_limit(nbytes: int) -> int: ...
def owns(array: np.ndarray) -> bool: ...

def cutout_batch(
    reader: CutoutReader,
    boxes: Any,
    height: int,
    width: int,
    out: np.ndarray,
) -> None: ...

def set_stream_min_bytes(nbytes: int) -> int: ...

def cutout_array(shape: tuple[int, ...], dtype: Any) -> np.ndarray: ...
def output_array(shape: tuple[int, ...], dtype: Any) -> np.ndarray: ...

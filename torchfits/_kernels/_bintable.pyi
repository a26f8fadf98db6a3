"""Type stub for the compiled binary-table decode kernels (cython_src/_bintable.pyx)."""
from typing import Any

import numpy as np

# Operations of a column program.
OP_COPY: int
OP_SWAP: int
OP_SCALE: int
OP_LOGICAL: int
OP_LOGICAL_BYTES: int
OP_BITS: int
OP_BITS_BYTES: int
OP_STRING: int

# Stored element types of OP_SCALE.
SRC_U8: int
SRC_I16: int
SRC_I32: int
SRC_I64: int
SRC_F32: int
SRC_F64: int
SRC_U64_FLIP: int

# Fields of one row of the int64 column program.
P_OP: int
P_SRC_OFF: int
P_COUNT: int
P_ESIZE: int
P_SRC_TYPE: int
P_DST_SIZE: int
P_FLIP: int
P_HAS_TNULL: int
P_TNULL: int
P_OUT: int
P_VALID: int
P_OFFSETS: int
P_STRIP: int
P_ZERO_NULL: int
P_NFIELDS: int

# Fields of one row of the int64 stats array.
S_NULLS: int
S_HIGH: int
S_NFIELDS: int

def decode_rows(
    data: Any,
    row_bytes: int,
    first_row: int,
    rows: np.ndarray | None,
    out_start: int,
    nrows: int,
    prog: np.ndarray,
    scale: np.ndarray,
    stats: np.ndarray,
) -> None: ...
def select_decode_rows(
    data: Any,
    row_bytes: int,
    first_row: int,
    nrows: int,
    tests: np.ndarray,
    floats: np.ndarray,
    prog: np.ndarray,
    scale: np.ndarray,
    stats: np.ndarray,
) -> int: ...
def compact_strings(data: np.ndarray, offsets: np.ndarray, bounds: np.ndarray, per_item: int) -> None: ...
def vla_descriptors(
    data: Any,
    row_bytes: int,
    first_row: int,
    rows: np.ndarray | None,
    nrows: int,
    src_off: int,
    q_desc: bool,
    elem_bits: int,
    heap_size: int,
    counts: np.ndarray,
    heap_offsets: np.ndarray,
) -> int: ...
def vla_gather(
    heap: Any,
    heap_offsets: np.ndarray,
    offsets: np.ndarray,
    prog: np.ndarray,
    scale: np.ndarray,
    stats: np.ndarray,
) -> None: ...

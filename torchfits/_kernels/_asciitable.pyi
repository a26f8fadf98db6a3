"""Type stub for the compiled ASCII-table decode kernel (cython_src/_asciitable.pyx)."""
from typing import Any

import numpy as np

# Operations of a column program.
OP_COPY: int
OP_STRING: int
OP_INT: int
OP_FLOAT: int

# Fields of one row of the int64 column program.
P_OP: int
P_SRC_OFF: int
P_WIDTH: int
P_DECIMALS: int
P_DST_SIZE: int
P_SCALED: int
P_TNULL_OFF: int
P_TNULL_LEN: int
P_OUT: int
P_VALID: int
P_OFFSETS: int
P_STRIP: int
P_NFIELDS: int

# Fields of one row of the int64 stats array.
S_NULLS: int
S_HIGH: int
S_BAD: int
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
    tnulls: Any,
    stats: np.ndarray,
) -> None: ...

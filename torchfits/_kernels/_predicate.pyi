"""Type stub for the compiled where-kernel (cython_src/_predicate.pyx)."""
from typing import Any

import numpy as np

OP_CONST: int
OP_CMP_INT: int
OP_CMP_FLOAT: int
OP_CMP_BOOL: int
OP_ISNULL: int
OP_AND: int
OP_OR: int
OP_NOT: int
SRC_U8: int
SRC_I16: int
SRC_I32: int
SRC_I64: int
SRC_F32: int
SRC_F64: int
SRC_L: int
CMP_EQ: int
CMP_NE: int
CMP_LT: int
CMP_LE: int
CMP_GT: int
CMP_GE: int
F_OP: int
F_OFFSET: int
F_SRC: int
F_CMP: int
F_HAS_NULL: int
F_NULL: int
F_LIT: int
F_BITS: int
F_SCALED: int
NFIELDS: int

def select_rows(
    data: Any,
    row_bytes: int,
    program: np.ndarray,
    floats: np.ndarray,
    first: int,
    nrows: int,
    rows: np.ndarray,
    out: np.ndarray,
) -> int: ...

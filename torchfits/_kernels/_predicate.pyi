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
OP_RA_WINDOW: int
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
T_FALSE: int
T_INT_RANGE: int
T_INT_NE: int
T_FLOAT_RANGE: int
T_FLOAT_NE: int
T_BOOL: int
T_ISNULL: int
T_RA_WINDOW: int
T_KIND: int
T_OFFSET: int
T_SRC: int
T_HAS_NULL: int
T_NULL: int
T_LO: int
T_HI: int
T_LIT: int
T_SCALED: int
T_BITS: int
T_CMP: int
T_NFIELDS: int
D_SCAL: int
D_ZERO: int
D_LO: int
D_HI: int
D_NFIELDS: int

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

def select_conjunction(
    data: Any,
    row_bytes: int,
    tests: np.ndarray,
    floats: np.ndarray,
    first: int,
    nrows: int,
    rows: np.ndarray,
    out: np.ndarray,
) -> int: ...

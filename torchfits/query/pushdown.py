"""Plan where-pushdown: split a predicate into what the row kernel evaluates on raw bytes and a
residual for pyarrow, and compile the kernel part into a small postfix program.

The kernel must agree with `torchfits._expr.to_pyarrow` on the decoded table, row for row: it
compares the values exactly as the decoder produces them, with the same literal plans.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from . import expr as _expr
from .._kernels import _predicate as K
from ..fits.columns import ColumnSpec

__all__ = ["KernelPlan", "plan_pushdown"]

_CMP = {"==": K.CMP_EQ, "!=": K.CMP_NE, "<": K.CMP_LT, "<=": K.CMP_LE, ">": K.CMP_GT, ">=": K.CMP_GE}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
# stored element: (kernel source code, bytes, lowest stored, highest stored)
_STORED: dict[str, tuple[int, int, Optional[int], Optional[int]]] = {"B": (K.SRC_U8, 1, 0, 255), "I": (K.SRC_I16, 2, -(1 << 15), (1 << 15) - 1),
           "J": (K.SRC_I32, 4, -(1 << 31), (1 << 31) - 1), "K": (K.SRC_I64, 8, -(1 << 63), (1 << 63) - 1),
           "E": (K.SRC_F32, 4, None, None), "D": (K.SRC_F64, 8, None, None), "L": (K.SRC_L, 1, None, None)}
_BOOL_WORDS = {True: 1, False: 0, "true": 1, "false": 0}  # 1 and 0 hash as True and False


class _NotKernel(Exception):
    """The subtree needs pyarrow (strings, arithmetic, column-to-column, vectors, ...)."""


@dataclass
class KernelPlan:
    """A compiled predicate: int64 instructions, float operands, and the columns it reads."""

    program: np.ndarray  # (n, K.NFIELDS) int64
    floats: np.ndarray  # (n, 3) float64: TSCAL, TZERO, float literal
    columns: list[str]

    def select(self, data: Any, row_bytes: int, *, first: int = 0, count: int = 0,
               rows: Optional[np.ndarray] = None) -> np.ndarray:
        """Row numbers (absolute) that satisfy the predicate; bounds are the caller's."""
        idx = np.empty(0, np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
        out = np.empty(len(idx) if rows is not None else count, np.int64)
        n = K.select_rows(np.frombuffer(data, np.uint8), row_bytes, self.program, self.floats,
                          first, count, idx, out)
        return out[:n]


class _Compiler:
    def __init__(self, specs: dict[str, ColumnSpec], types: dict[str, Any], apply_nulls: bool,
                 mapping: str) -> None:
        self.specs = specs
        self.mapping = mapping
        self.types = types
        self.apply_nulls = apply_nulls
        self.ins: list[list[int]] = []
        self.flt: list[tuple[float, float, float]] = []
        self.used: list[str] = []

    def _emit(self, fields: dict[str, int], floats: tuple[float, float, float] = (1.0, 0.0, 0.0)) -> None:
        row = [0] * K.NFIELDS
        for name, value in fields.items():
            row[getattr(K, "F_" + name)] = value
        self.ins.append(row)
        self.flt.append(floats)

    def _const(self, value: Optional[bool]) -> None:
        self._emit({"OP": K.OP_CONST, "LIT": 2 if value is None else int(value)})

    def _column(self, node: Any) -> tuple[ColumnSpec, Any]:
        if not isinstance(node, _expr.Column) or node.name not in self.specs:
            raise _NotKernel
        spec = self.specs[node.name]
        if spec.kind != "bintable" or spec.is_vla or spec.repeat != 1 or spec.code not in _STORED:
            raise _NotKernel
        if node.name not in self.used:
            self.used.append(node.name)
        return spec, self.types[node.name]

    def _null_fields(self, spec: ColumnSpec) -> dict[str, int]:
        if not self.apply_nulls or not isinstance(spec.tnull, int) or spec.code not in "BIJK":
            return {"HAS_NULL": 0, "NULL": 0}
        nbytes = _STORED[spec.code][1]
        bits = spec.tnull & ((1 << (8 * nbytes)) - 1)
        return {"HAS_NULL": 1, "NULL": bits - (1 << 64) if bits >= 1 << 63 else bits}

    def compile(self, node: Any) -> None:

        if isinstance(node, _expr.And) or isinstance(node, _expr.Or):
            self.compile(node.left)
            self.compile(node.right)
            self._emit({"OP": K.OP_AND if isinstance(node, _expr.And) else K.OP_OR})
        elif isinstance(node, _expr.Not):
            self.compile(node.operand)
            self._emit({"OP": K.OP_NOT})
        elif isinstance(node, _expr.Between):
            if not isinstance(node.low, _expr.Literal) or not isinstance(node.high, _expr.Literal):
                raise _NotKernel
            self.compile(_expr.And(_expr.Compare(">=", node.operand, node.low),
                                   _expr.Compare("<=", node.operand, node.high)))
            if node.negated:
                self._emit({"OP": K.OP_NOT})
        elif isinstance(node, _expr.InList):
            if not node.values or any(v is None for v in node.values) \
                    or len(node.values) > _KERNEL_IN_MAX:
                # Long lists go to Arrow's hash-set membership: one lookup per row beats a
                # comparison per value.
                raise _NotKernel
            terms = [_expr.Compare("==", node.operand, _expr.Literal(v)) for v in node.values]
            self.compile(_expr.chain(_expr.Or, terms))
            if node.negated:
                self._emit({"OP": K.OP_NOT})
        elif isinstance(node, _expr.IsNull):
            spec, typ = self._column(node.operand)
            fields = self._null_fields(spec)
            if spec.code == "L":
                # A zero logical byte is null natively; torchfits 1.x reads it as False.
                fields = {"HAS_NULL": int(self.apply_nulls and self.mapping == "native"), "NULL": 0}
            self._emit({"OP": K.OP_ISNULL, "OFFSET": spec.offset, "SRC": _STORED[spec.code][0],
                        "LIT": int(node.negated), **fields})
        elif isinstance(node, _expr.Compare):
            self._compare(node)
        else:
            raise _NotKernel

    def _compare(self, node: Any) -> None:
        import pyarrow as pa

        op, left, right = node.op, node.left, node.right
        if isinstance(left, _expr.Literal) and isinstance(right, _expr.Column):
            op, left, right = _FLIP[op], right, left
        if not isinstance(right, _expr.Literal) or right.value is None:
            raise _NotKernel
        spec, typ = self._column(left)
        lit = right.value
        src, _, lo, hi = _STORED[spec.code]
        lo_i: int = lo if lo is not None else 0
        hi_i: int = hi if hi is not None else 0
        base = {"OFFSET": spec.offset, "SRC": src, **self._null_fields(spec)}
        if pa.types.is_boolean(typ):
            key = lit.lower() if isinstance(lit, str) else lit
            if op not in ("==", "!=") or key not in _BOOL_WORDS or isinstance(key, float):
                raise _NotKernel
            has_null = 1 if (self.apply_nulls and self.mapping == "native") else 0
            self._emit({"OP": K.OP_CMP_BOOL, "CMP": _CMP[op], "LIT": _BOOL_WORDS[key],
                        **{**base, "HAS_NULL": has_null, "NULL": 0}})
            return
        if isinstance(lit, (str, bool)):
            raise _NotKernel
        if pa.types.is_integer(typ):
            if spec.tscal != 1.0 or spec.tzero != int(spec.tzero) or lo is None:
                raise _NotKernel
            tz = int(spec.tzero)
            plan = _expr.integer_compare_plan(op, lit, lo_i + tz, hi_i + tz)
            if plan[0] == "const":
                self._const_or_unknown(plan[1], spec, typ, base)
                return
            self._emit({"OP": K.OP_CMP_INT, "CMP": _CMP[plan[1]], "LIT": plan[2] - tz, **base})
            return
        if pa.types.is_floating(typ):
            bits = 32 if pa.types.is_float32(typ) else 64
            plan = _expr.float_compare_plan(op, lit, bits)
            if plan[0] == "const":
                self._const_or_unknown(plan[1], spec, typ, base)
                return
            scaled = int(spec.tscal != 1.0 or spec.tzero != 0.0)
            self._emit({"OP": K.OP_CMP_FLOAT, "CMP": _CMP[plan[1]], "BITS": bits, "SCALED": scaled,
                        **base}, (float(spec.tscal), float(spec.tzero), float(plan[2])))
            return
        raise _NotKernel

    def _const_or_unknown(self, value: Optional[bool], spec: ColumnSpec, typ: Any, base: dict) -> None:
        """A comparison whose answer is the same for every value (a literal out of the column's
        range): still unknown on null and NaN rows, so emit a leaf that is true for every known
        value (NOT-ed for a false answer)."""
        import pyarrow as pa

        if value is None:
            self._const(None)
            return
        if pa.types.is_floating(typ):
            bits = 32 if pa.types.is_float32(typ) else 64
            scaled = int(spec.tscal != 1.0 or spec.tzero != 0.0)
            # v != NaN holds for every non-NaN v; the kernel makes NaN (and nulls) unknown.
            self._emit({"OP": K.OP_CMP_FLOAT, "CMP": K.CMP_NE, "BITS": bits, "SCALED": scaled, **base},
                       (float(spec.tscal), float(spec.tzero), float("nan")))
        else:
            self._emit({"OP": K.OP_CMP_INT, "CMP": K.CMP_GE, "LIT": _STORED[spec.code][2] or 0, **base})
        if not value:
            self._emit({"OP": K.OP_NOT})


_KERNEL_IN_MAX = 32


def _fold_equalities(term: Any) -> Any:
    """A long OR of ``col == literal`` on one column, as written by hand or generated, becomes
    ``col IN (...)`` (one hash lookup per row instead of one comparison per term)."""
    if not isinstance(term, _expr.Or):
        return term
    leaves: list[Any] = []
    stack: list[Any] = [term]
    while stack:
        node = stack.pop()
        if isinstance(node, _expr.Or):
            stack.append(node.right)
            stack.append(node.left)
        else:
            leaves.append(node)
    if len(leaves) <= _KERNEL_IN_MAX:
        return term
    name: Optional[str] = None
    values: list[Any] = []
    for leaf in leaves:
        if not isinstance(leaf, _expr.Compare) or leaf.op != "==":
            return term
        col, lit = leaf.left, leaf.right
        if isinstance(col, _expr.Literal):
            col, lit = lit, col
        if not isinstance(col, _expr.Column) or not isinstance(lit, _expr.Literal) \
                or lit.value is None or (name is not None and col.name != name):
            return term
        name = col.name
        values.append(lit.value)
    return _expr.InList(_expr.Column(str(name)), tuple(values))


def plan_pushdown(expr: Any, specs: Sequence[ColumnSpec], types: dict[str, Any], *,
                  mapping: str, apply_nulls: bool) -> tuple[list[KernelPlan], Optional[Any]]:
    """Split ``expr`` into kernel plans, one per top-level AND term the kernel can run (applied
    in turn, each to the rows the previous ones kept, so selective terms shrink the work of the
    rest), and the residual predicate for pyarrow (an `_expr` tree, or None)."""
    by_name = {s.name: s for s in specs}
    plans: list[KernelPlan] = []
    residual = []
    for term in _expr.conjuncts(expr):
        term = _fold_equalities(term)
        c = _Compiler(by_name, types, apply_nulls, mapping)
        try:
            c.compile(term)
        except _NotKernel:
            residual.append(term)
            continue
        plans.append(KernelPlan(np.array(c.ins, np.int64).reshape(-1, K.NFIELDS),
                                np.array(c.flt, np.float64).reshape(-1, 3), c.used))
    return plans, _expr.and_all(residual)

"""Plan where-pushdown: split a predicate into what the row kernel evaluates on raw bytes and a
residual for pyarrow, and compile the kernel part into a small postfix program.

The kernel must agree with `torchfits.query.expr.to_pyarrow` on the decoded table, row for row: it
compares the values exactly as the decoder produces them, with the same literal plans.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels import _predicate as K
from ..fits import threads as _threads
from ..fits.columns import ColumnSpec
from . import expr as _expr
from .tree import FLIPPED

__all__ = ["KernelPlan", "FusedPredicate", "fuse", "plan_pushdown"]

_CMP = {"==": K.CMP_EQ, "!=": K.CMP_NE, "<": K.CMP_LT, "<=": K.CMP_LE, ">": K.CMP_GT, ">=": K.CMP_GE}
# stored element: (kernel source code, bytes, lowest stored, highest stored)
_STORED: dict[str, tuple[int, int, int | None, int | None]] = {
    "B": (K.SRC_U8, 1, 0, 255), "I": (K.SRC_I16, 2, -(1 << 15), (1 << 15) - 1),
    "J": (K.SRC_I32, 4, -(1 << 31), (1 << 31) - 1), "K": (K.SRC_I64, 8, -(1 << 63), (1 << 63) - 1),
    "E": (K.SRC_F32, 4, None, None), "D": (K.SRC_F64, 8, None, None), "L": (K.SRC_L, 1, None, None),
}
_BOOL_WORDS = {True: 1, False: 0, "true": 1, "false": 0}  # 1 and 0 hash as True and False


class _NotKernel(Exception):
    """The subtree needs pyarrow (strings, arithmetic, column-to-column, vectors, ...)."""


class KernelPlan:
    """A compiled predicate: int64 instructions, float operands, and the columns it reads.
    (A plain class: a dataclass decorator costs milliseconds of a where-scan's first call.)"""

    __slots__ = ("program", "floats", "columns")

    def __init__(self, program: np.ndarray, floats: np.ndarray, columns: list[str]) -> None:
        self.program = program  # (n, K.NFIELDS) int64
        self.floats = floats  # (n, 4) float64: TSCAL, TZERO, float literal, second float literal
        self.columns = columns

    def __repr__(self) -> str:
        return f"KernelPlan(columns={self.columns!r}, {len(self.program)} instructions)"

    def select(self, data: Any, row_bytes: int, *, first: int = 0, count: int = 0,
               rows: np.ndarray | None = None) -> np.ndarray:
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
        self.flt: list[tuple[float, float, float, float]] = []
        self.used: list[str] = []

    def _emit(self, fields: dict[str, int], floats: tuple[float, ...] = (1.0, 0.0, 0.0)) -> None:
        row = [0] * K.NFIELDS
        for name, value in fields.items():
            row[getattr(K, "F_" + name)] = value
        self.ins.append(row)
        a, b, c, *d = floats
        self.flt.append((a, b, c, d[0] if d else 0.0))

    def _const(self, value: bool | None) -> None:
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

    def cone_box(self, node: Any) -> None:
        """The box of a cone (declination band AND RA window): a necessary condition only, so a
        top-level AND term alone; the exact test stays for pyarrow, on the rows the box keeps."""
        from .sky import cone_box

        box = cone_box(node.ra0, node.dec0, node.radius)
        self._compare(_expr.Compare(">=", node.dec, _expr.Literal(box.dec_lo)))
        self._compare(_expr.Compare("<=", node.dec, _expr.Literal(box.dec_hi)))
        self._emit({"OP": K.OP_AND})
        if box.ra_windows is None:
            return
        if len(box.ra_windows) == 1:
            start, stop = box.ra_windows[0]
            width = stop - start
        else:  # ((0, a), (b, 360)): the window from b up across 360/0 to a
            (_, a), (start, _) = box.ra_windows
            width = (360.0 - start) + a
        spec, typ = self._column(node.ra)
        import pyarrow as pa

        if not (pa.types.is_floating(typ) or pa.types.is_integer(typ)):
            raise _NotKernel
        bits = 32 if pa.types.is_float32(typ) else 64
        # integers are read as floats through the scaled path (x * 1 + 0 is exact)
        scaled = int(spec.tscal != 1.0 or spec.tzero != 0.0 or spec.code not in "ED")
        self._emit({"OP": K.OP_RA_WINDOW, "OFFSET": spec.offset, "SRC": _STORED[spec.code][0],
                    "BITS": bits, "SCALED": scaled, **self._null_fields(spec)},
                   (float(spec.tscal), float(spec.tzero), start, width))
        self._emit({"OP": K.OP_AND})

    def _compare(self, node: Any) -> None:
        import pyarrow as pa

        op, left, right = node.op, node.left, node.right
        if isinstance(left, _expr.Literal) and isinstance(right, _expr.Column):
            op, left, right = FLIPPED[op], right, left
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

    def _const_or_unknown(self, value: bool | None, spec: ColumnSpec, typ: Any, base: dict) -> None:
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
    name: str | None = None
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
                  mapping: str, apply_nulls: bool) -> tuple[list[KernelPlan], Any | None]:
    """Split ``expr`` into kernel plans, one per top-level AND term the kernel can run (applied
    in turn, each to the rows the previous ones kept, so selective terms shrink the work of the
    rest), and the residual predicate for pyarrow (a `query.tree` expression, or None)."""
    by_name = {s.name: s for s in specs}
    plans: list[KernelPlan] = []
    residual = []
    for term in _expr.conjuncts(expr):
        term = _fold_equalities(term)
        c = _Compiler(by_name, types, apply_nulls, mapping)
        try:
            if isinstance(term, _expr.Cone):
                residual.append(term)  # the exact test, on the rows the box keeps
                c.cone_box(term)
            else:
                c.compile(term)
        except _NotKernel:
            if not isinstance(term, _expr.Cone):
                residual.append(term)
            continue
        plans.append(KernelPlan(np.array(c.ins, np.int64).reshape(-1, K.NFIELDS),
                                np.array(c.flt, np.float64).reshape(-1, 4), c.used))
    return plans, _expr.and_all(residual)


# -- fused evaluation ---------------------------------------------------------------------------
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# Below this many row bytes a selection runs on the calling thread (as the decoder does).
_PARALLEL_MIN_BYTES = 4 << 20
# Parallel pieces start at multiples of this many rows (the kernel's block size).
_ALIGN = 1024
_PIECES_PER_THREAD = 4


def _false_test() -> tuple[list[int], list[float]]:
    ints = [0] * K.T_NFIELDS
    ints[K.T_KIND], ints[K.T_SRC] = K.T_FALSE, K.SRC_U8
    return ints, [1.0, 0.0, 0.0, 0.0]


def _test_of(ins: np.ndarray, flt: np.ndarray) -> tuple[list[int], list[float]]:
    """One leaf instruction as a two-valued test (TRUE passes; false and unknown fail)."""
    ints = [0] * K.T_NFIELDS
    floats = [float(flt[0]), float(flt[1]), 0.0, 0.0]
    op, cmp = int(ins[K.F_OP]), int(ins[K.F_CMP])
    ints[K.T_OFFSET], ints[K.T_SRC] = int(ins[K.F_OFFSET]), int(ins[K.F_SRC])
    ints[K.T_HAS_NULL], ints[K.T_NULL] = int(ins[K.F_HAS_NULL]), int(ins[K.F_NULL])
    ints[K.T_CMP], ints[K.T_LIT] = cmp, int(ins[K.F_LIT])
    if op == K.OP_CMP_BOOL:
        ints[K.T_KIND] = K.T_BOOL
    elif op == K.OP_ISNULL:
        ints[K.T_KIND] = K.T_ISNULL
    elif op == K.OP_CMP_INT:
        ilit = int(ins[K.F_LIT])
        if cmp == K.CMP_NE:
            ints[K.T_KIND] = K.T_INT_NE
            return ints, floats
        lo, hi = {K.CMP_EQ: (ilit, ilit), K.CMP_LT: (_I64_MIN, ilit - 1), K.CMP_LE: (_I64_MIN, ilit),
                  K.CMP_GT: (ilit + 1, _I64_MAX), K.CMP_GE: (ilit, _I64_MAX)}[cmp]
        if lo > _I64_MAX or hi < _I64_MIN:
            return _false_test()
        ints[K.T_KIND], ints[K.T_LO], ints[K.T_HI] = K.T_INT_RANGE, lo, hi
    elif op == K.OP_RA_WINDOW:
        ints[K.T_SCALED], ints[K.T_BITS] = int(ins[K.F_SCALED]), int(ins[K.F_BITS])
        ints[K.T_KIND] = K.T_RA_WINDOW
        floats[2], floats[3] = float(flt[2]), float(flt[3])
    elif op == K.OP_CMP_FLOAT:
        ints[K.T_SCALED], ints[K.T_BITS] = int(ins[K.F_SCALED]), int(ins[K.F_BITS])
        flit = float(flt[2])
        inf = float("inf")
        if cmp == K.CMP_NE:
            ints[K.T_KIND] = K.T_FLOAT_NE
            floats[3] = flit
            return ints, floats
        # Values are doubles (float32 values widen exactly), so a strict bound is the inclusive
        # bound one double further in; no value lies beyond an infinite strict bound.
        if (cmp == K.CMP_GT and flit == inf) or (cmp == K.CMP_LT and flit == -inf):
            return _false_test()
        flo, fhi = {K.CMP_EQ: (flit, flit), K.CMP_LT: (-inf, float(np.nextafter(flit, -inf))),
                    K.CMP_LE: (-inf, flit), K.CMP_GT: (float(np.nextafter(flit, inf)), inf),
                    K.CMP_GE: (flit, inf)}[cmp]
        ints[K.T_KIND] = K.T_FLOAT_RANGE
        floats[2], floats[3] = flo, fhi
    else:  # pragma: no cover - callers pass leaves only
        raise AssertionError(op)
    return ints, floats


def _conjunction(plans: Sequence[KernelPlan]) -> tuple[np.ndarray, np.ndarray] | None:
    """The plans as one list of two-valued tests when together they are a pure conjunction of
    leaves (no OR or NOT), with the range tests of one column merged into one; else None."""
    tests: list[tuple[list[int], list[float]]] = []
    merged: dict[tuple, int] = {}
    for plan in plans:
        for ins, flt in zip(plan.program, plan.floats):
            op = int(ins[K.F_OP])
            if op == K.OP_AND:
                continue
            if op == K.OP_CONST:
                if int(ins[K.F_LIT]) != 1:
                    tests.append(_false_test())
                continue
            if op in (K.OP_OR, K.OP_NOT):
                return None
            ints, floats = _test_of(ins, flt)
            kind = ints[K.T_KIND]
            if kind in (K.T_INT_RANGE, K.T_FLOAT_RANGE):
                key = (kind, ints[K.T_OFFSET], ints[K.T_SRC], ints[K.T_HAS_NULL], ints[K.T_NULL],
                       ints[K.T_SCALED], ints[K.T_BITS], floats[0], floats[1])
                if key in merged:  # BETWEEN, or a > 1 AND a < 5: one test, not two passes
                    prev_i, prev_f = tests[merged[key]]
                    if kind == K.T_INT_RANGE:
                        prev_i[K.T_LO] = max(prev_i[K.T_LO], ints[K.T_LO])
                        prev_i[K.T_HI] = min(prev_i[K.T_HI], ints[K.T_HI])
                    else:
                        prev_f[2], prev_f[3] = max(prev_f[2], floats[2]), min(prev_f[3], floats[3])
                    continue
                merged[key] = len(tests)
            tests.append((ints, floats))
    if not tests:  # every term was a constant TRUE
        tests.append(([0] * K.T_NFIELDS, [1.0, 0.0, 0.0, 0.0]))
        t = tests[0][0]
        t[K.T_KIND], t[K.T_SRC], t[K.T_LO], t[K.T_HI] = K.T_INT_RANGE, K.SRC_U8, _I64_MIN, _I64_MAX
    ints_arr = np.array([t[0] for t in tests], np.int64).reshape(-1, K.T_NFIELDS)
    floats_arr = np.array([t[1] for t in tests], np.float64).reshape(-1, K.D_NFIELDS)
    return ints_arr, floats_arr


class FusedPredicate:
    """Kernel plans ANDed into one evaluation: every term of a block of rows is tested while the
    block is in cache, and big selections run in pieces on the shared thread pool.

    Parameters
    ----------
    plans : sequence of KernelPlan
        The top-level AND terms, most selective first (the order the tests run in).
    """

    def __init__(self, plans: Sequence[KernelPlan]) -> None:
        if not plans:
            raise ValueError("nothing to fuse")
        self.columns = list(dict.fromkeys(c for p in plans for c in p.columns))
        self.conjunction = _conjunction(plans)
        and_row = np.zeros((1, K.NFIELDS), np.int64)
        and_row[0, K.F_OP] = K.OP_AND
        program, floats = [plans[0].program], [plans[0].floats]
        for p in plans[1:]:
            program += [p.program, and_row]
            floats += [p.floats, np.array([[1.0, 0.0, 0.0, 0.0]])]
        self.program = np.ascontiguousarray(np.concatenate(program), np.int64)
        self.floats = np.ascontiguousarray(np.concatenate(floats), np.float64)

    def _run(self, data: np.ndarray, row_bytes: int, first: int, count: int, rows: np.ndarray,
             out: np.ndarray) -> int:
        if self.conjunction is not None:
            return K.select_conjunction(data, row_bytes, self.conjunction[0], self.conjunction[1],
                                        first, count, rows, out)
        return K.select_rows(data, row_bytes, self.program, self.floats, first, count, rows, out)

    def select(self, data: Any, row_bytes: int, *, first: int = 0, count: int = 0,
               rows: np.ndarray | None = None, threads: int | None = None) -> np.ndarray:
        """Row numbers (absolute, in order) that satisfy every term; bounds are the caller's.

        ``threads`` (default: `torchfits.fits.threads.default_threads`) pieces run on the pool
        when the rows cover at least a few MiB.
        """
        buf = np.frombuffer(data, np.uint8)
        idx = np.empty(0, np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
        total = len(idx) if rows is not None else count
        out = np.empty(total, np.int64)
        nthreads = _threads.default_threads() if threads is None else max(1, int(threads))
        if nthreads <= 1 or total * max(row_bytes, 1) < _PARALLEL_MIN_BYTES or total < 2 * _ALIGN:
            return out[:self._run(buf, row_bytes, first, count, idx, out)]
        # A few pieces per thread, taken by whichever thread is free (`run_shared`).
        step = -(-total // (nthreads * _PIECES_PER_THREAD))
        step = -(-step // _ALIGN) * _ALIGN
        starts = list(range(0, total, step))

        def piece(a: int) -> int:
            b = min(a + step, total)
            if rows is not None:
                return self._run(buf, row_bytes, 0, 0, idx[a:b], out[a:b])
            return self._run(buf, row_bytes, first + a, b - a, idx, out[a:b])

        found = _threads.run_shared(piece, starts, nthreads)
        if len(starts) == 1:
            return out[:found[0]]
        return np.concatenate([out[a:a + n] for a, n in zip(starts, found)])


def fuse(plans: Sequence[KernelPlan]) -> FusedPredicate:
    """One `FusedPredicate` of ``plans`` (ANDed, evaluated in the order given)."""
    return FusedPredicate(plans)

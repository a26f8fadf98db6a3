"""The pyarrow side of where-expression trees: type checks and translation to and from filters.

Loaded by :mod:`torchfits.query.expr` only when a tree meets a schema or a pyarrow expression.
A type check (`validate_tree`) builds nothing: it runs the translator over stand-ins, so a
predicate the row kernel takes whole never imports ``pyarrow.compute``. `evaluate_tree` runs
the same translation on a batch's arrays (eager compute calls), where a filter on a table goes
through Acero, which imports ``pyarrow.dataset`` and pandas. Literals are built by
:mod:`.arrow_values`, since ``pyarrow.scalar`` imports pandas too.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from .arrow_values import arrow_array, arrow_scalar
from .lexing import number_or_none
from .tree import (
    FLIPPED,
    TOO_DEEP,
    Abs,
    And,
    Arith,
    Between,
    BitAnd,
    Column,
    Compare,
    Cone,
    Expr,
    InList,
    IsNan,
    IsNull,
    Like,
    Literal,
    LiteralValue,
    Neg,
    Not,
    Or,
    Predicate,
    Value,
    float_compare_plan,
    integer_compare_plan,
    to_string,
)


class _Val(NamedTuple):
    expr: Any  # pyarrow.compute.Expression; None for a literal
    kind: str  # int, float, bool, string, binary, literal
    type: Any  # pyarrow.DataType; None for a literal
    value: Any  # the literal's value
    label: str  # how messages name it


def _type_name(pa_type: Any) -> str:
    if pa.types.is_floating(pa_type):
        return f"float{pa_type.bit_width}"
    if pa.types.is_boolean(pa_type):
        return "bool"
    if pa.types.is_string(pa_type) or pa.types.is_large_string(pa_type):
        return "string"
    return str(pa_type)


def _column_kind(name: str, pa_type: Any) -> str:
    types = pa.types
    if types.is_boolean(pa_type):
        return "bool"
    if types.is_integer(pa_type):
        return "int"
    if types.is_floating(pa_type):
        return "float"
    if types.is_string(pa_type) or types.is_large_string(pa_type):
        return "string"
    if types.is_binary(pa_type) or types.is_large_binary(pa_type):
        return "binary"
    if types.is_fixed_size_binary(pa_type):
        return "binary"
    list_checks = (
        "is_list",
        "is_large_list",
        "is_fixed_size_list",
        "is_list_view",
        "is_large_list_view",
    )
    if any(getattr(types, check, lambda t: False)(pa_type) for check in list_checks):
        raise ValueError(f"where does not support list/VLA column '{name}'")
    raise ValueError(f"where does not support column '{name}' of type {pa_type}")


def _as_types(schema: Any) -> dict[str, Any]:
    if isinstance(schema, Mapping):
        return dict(schema)
    try:
        return {field.name: field.type for field in schema}
    except TypeError:
        raise TypeError(
            f"schema must be a pyarrow.Schema or a mapping of names to types, not {schema!r}"
        ) from None


_PC_COMPARE = {
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


class _Stub:
    """Stands for a pyarrow expression while a tree is only type-checked."""

    __slots__ = ()

    def cast(self, *args: Any, **kwargs: Any) -> _Stub:
        return self


_STUB = _Stub()


def _stub_call(*args: Any, **kwargs: Any) -> _Stub:
    return _STUB


class _StubCompute:
    """A ``pyarrow.compute`` whose every function returns the stand-in: the translator's type
    checks run unchanged and nothing is built (nor ``pyarrow.compute`` imported)."""

    def __getattr__(self, name: str) -> Any:
        return _stub_call


def _compute() -> Any:
    import pyarrow.compute

    return pyarrow.compute


class _ArrowCompiler:
    """Type-checks a tree against column types and builds the pyarrow expression.

    ``mode`` ``"expression"`` builds a ``pyarrow.compute.Expression``; ``"check"`` only type-checks
    (every compute call returns a stand-in); ``"eager"`` evaluates on the arrays of ``columns``
    (a record batch or table), returning a boolean array or scalar."""

    def __init__(self, types: Mapping[str, Any], mode: str = "expression", columns: Any = None) -> None:
        self.types = types
        self.mode = mode
        self.columns = columns
        self.pc: Any = _StubCompute() if mode == "check" else _compute()
        self.null_bool = self.scalar(None, pa.bool_())

    # -- helpers ----------------------------------------------------------------------------
    def scalar(self, value: Any, pa_type: Any) -> Any:
        if self.mode == "check":
            return _STUB
        scalar = arrow_scalar(value, pa_type)
        return scalar if self.mode == "eager" else self.pc.scalar(scalar)

    def field(self, name: str) -> Any:
        if self.mode == "eager":
            return self.columns.column(name)
        return self.pc.field(name)

    def call(self, name: str, *args: Any) -> Any:
        return getattr(self.pc, name)(*args)

    def const(self, val: _Val, result: bool | None) -> Any:
        """``result`` for the rows where ``val`` is valid, unknown elsewhere."""
        pc = self.pc
        if result is None:
            return self.null_bool
        return pc.if_else(pc.is_valid(val.expr), self.scalar(result, pa.bool_()), self.null_bool)

    def nan_to_null(self, val: _Val) -> Any:
        """NaN is unknown in comparisons (docs/where.md)."""
        if val.kind != "float":
            return val.expr
        pc = self.pc
        return pc.if_else(pc.is_nan(val.expr), self.scalar(None, val.type), val.expr)

    def cannot_compare(self, val: _Val, other: Any, why: str = "") -> ValueError:
        other_text = other.label if isinstance(other, _Val) else repr(other)
        return ValueError(f"where cannot compare {val.label} with {other_text}{why}")

    def number(self, val: _Val, literal: Any) -> Any:
        """A literal compared with a numeric operand, as a number."""
        if isinstance(literal, bool):
            return int(literal)
        if isinstance(literal, (int, float)):
            return literal
        if isinstance(literal, str):
            number = number_or_none(literal.strip())
            if number is not None:
                return number
        raise self.cannot_compare(val, literal, " (not a number)")

    def boolean(self, val: _Val, literal: Any) -> bool:
        if isinstance(literal, bool):
            return literal
        if isinstance(literal, (int, float)) and literal in (0, 1):
            return bool(literal)
        if isinstance(literal, str) and literal.strip().lower() in ("true", "false", "1", "0"):
            return literal.strip().lower() in ("true", "1")
        raise self.cannot_compare(val, literal, " (bool columns compare with True/False/1/0)")

    def text(self, val: _Val, literal: Any) -> Any:
        if val.kind == "string":
            if not isinstance(literal, str):
                raise self.cannot_compare(val, literal, " (not a string)")
            return literal.rstrip()
        if isinstance(literal, str):
            return literal.encode("utf-8")
        if isinstance(literal, bytes):
            return literal
        raise self.cannot_compare(val, literal, " (not a string)")

    def int_range(self, pa_type: Any) -> tuple[int, int]:
        info = np.iinfo(np.dtype(pa_type.to_pandas_dtype()))
        return int(info.min), int(info.max)

    def to_float64(self, val: _Val) -> Any:
        if val.kind == "literal":
            try:
                return self.scalar(float(val.value), pa.float64())
            except OverflowError:
                raise ValueError(f"where literal {val.value!r} does not fit a float64") from None
        if pa.types.is_float64(val.type):
            return val.expr
        # integers beyond 2**53 round to the nearest float64, as in NumPy and SQL engines
        return val.expr.cast(pa.float64(), safe=False)

    def to_int64(self, val: _Val) -> Any:
        if val.kind == "literal":
            if not -(2**63) <= val.value < 2**63:
                raise ValueError(f"where integer literal {val.value} does not fit int64 arithmetic")
            return self.scalar(val.value, pa.int64())
        if pa.types.is_int64(val.type):
            return val.expr
        return val.expr.cast(pa.int64())

    def is_numeric(self, val: _Val) -> bool:
        if val.kind == "literal":
            return isinstance(val.value, (int, float)) and not isinstance(val.value, bool)
        return val.kind in ("int", "float")

    def is_uint64(self, val: _Val) -> bool:
        return val.kind == "int" and pa.types.is_uint64(val.type)

    # -- values -----------------------------------------------------------------------------
    def value(self, expr: Expr) -> _Val:
        if isinstance(expr, Column):
            if expr.name not in self.types:
                raise ValueError(f"where references unknown column '{expr.name}'")
            pa_type = self.types[expr.name]
            kind = _column_kind(expr.name, pa_type)
            label = f"column '{expr.name}' ({_type_name(pa_type)})"
            return _Val(self.field(expr.name), kind, pa_type, None, label)
        if isinstance(expr, Literal):
            return _Val(None, "literal", None, expr.value, repr(expr.value))
        if isinstance(expr, Arith):
            return self.arith(expr)
        if isinstance(expr, (Neg, Abs)):
            val = self.value(expr.operand)
            name = "negate" if isinstance(expr, Neg) else "abs"
            if not self.is_numeric(val):
                raise ValueError(f"where {name} needs a numeric operand, got {val.label}")
            label = f"expression '{to_string(expr)}'"
            if val.kind == "literal":
                folded = -val.value if isinstance(expr, Neg) else abs(val.value)
                return _Val(None, "literal", None, folded, repr(folded))
            if val.kind == "float":
                return _Val(self.call(name, val.expr), "float", val.type, None, label)
            if self.is_uint64(val):
                result = self.call(name, self.to_float64(val))
                return _Val(result, "float", pa.float64(), None, label)
            result = self.call(name + "_checked", self.to_int64(val))
            return _Val(result, "int", pa.int64(), None, label)
        if isinstance(expr, BitAnd):
            val = self.value(expr.operand)
            if not (val.kind == "int" or (val.kind == "literal" and type(val.value) is int)):
                raise ValueError(f"where bitand() needs an integer operand, got {val.label}")
            mask = expr.mask
            if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
                raise ValueError(f"where bitand() needs a non-negative integer mask, got {mask!r}")
            label = f"expression '{to_string(expr)}'"
            if val.kind == "literal":
                return _Val(None, "literal", None, val.value & mask, repr(val.value & mask))
            if self.is_uint64(val):
                if mask >= 2**64:
                    raise ValueError(f"where bitand() mask {mask} does not fit uint64")
                result = self.pc.bit_wise_and(val.expr, self.scalar(mask, pa.uint64()))
                return _Val(result, "int", pa.uint64(), None, label)
            if mask >= 2**63:
                raise ValueError(f"where bitand() mask {mask} does not fit int64")
            result = self.pc.bit_wise_and(self.to_int64(val), self.scalar(mask, pa.int64()))
            return _Val(result, "int", pa.int64(), None, label)
        raise ValueError(f"where expects a value, got the condition '{to_string(expr)}'")

    def arith(self, expr: Arith) -> _Val:
        left, right = self.value(expr.left), self.value(expr.right)
        for side in (left, right):
            if not self.is_numeric(side):
                raise ValueError(
                    f"where arithmetic '{expr.op}' needs numeric operands, got {side.label}"
                )
        label = f"expression '{to_string(expr)}'"
        if left.kind == "literal" and right.kind == "literal":
            folded = _fold_arith(expr.op, left.value, right.value)
            return _Val(None, "literal", None, folded, repr(folded))
        floating = expr.op == "/" or any(
            side.kind == "float" or isinstance(side.value, float) or self.is_uint64(side)
            for side in (left, right)
        )
        if floating:
            name = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}[expr.op]
            result = self.call(name, self.to_float64(left), self.to_float64(right))
            return _Val(result, "float", pa.float64(), None, label)
        name = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}[expr.op]
        result = self.call(name, self.to_int64(left), self.to_int64(right))
        return _Val(result, "int", pa.int64(), None, label)

    # -- predicates -------------------------------------------------------------------------
    def predicate(self, expr: Expr) -> Any:
        if isinstance(expr, And):
            return self.pc.and_kleene(self.predicate(expr.left), self.predicate(expr.right))
        if isinstance(expr, Or):
            return self.pc.or_kleene(self.predicate(expr.left), self.predicate(expr.right))
        if isinstance(expr, Not):
            return self.pc.invert(self.predicate(expr.operand))
        if isinstance(expr, Compare):
            return self.compare(expr)
        if isinstance(expr, Between):
            low = self.compare(Compare(">=", expr.operand, expr.low))
            high = self.compare(Compare("<=", expr.operand, expr.high))
            both = self.pc.and_kleene(low, high)
            return self.pc.invert(both) if expr.negated else both
        if isinstance(expr, InList):
            return self.in_list(expr)
        if isinstance(expr, Cone):
            return self.cone(expr)
        if isinstance(expr, IsNull):
            val = self.value(expr.operand)
            if val.kind == "literal":
                raise ValueError(f"where IS NULL needs a column, got {val.label}")
            if expr.negated:
                return self.pc.is_valid(val.expr)
            return self.pc.is_null(val.expr, nan_is_null=False)
        if isinstance(expr, IsNan):
            val = self.value(expr.operand)
            if val.kind == "literal":
                raise ValueError(f"where isnan() needs a column, got {val.label}")
            if val.kind == "float":
                return self.pc.is_nan(val.expr)
            # only floats hold NaN; keep unknown for null rows so NOT isnan(x) stays SQL-like
            return self.const(val, False)
        if isinstance(expr, Like):
            val = self.value(expr.operand)
            if val.kind != "string":
                word = "ILIKE" if expr.ignore_case else "LIKE"
                raise ValueError(f"where {word} needs a string column, got {val.label}")
            matched = self.pc.match_like(val.expr, expr.pattern, ignore_case=expr.ignore_case)
            return self.pc.invert(matched) if expr.negated else matched
        if isinstance(expr, Column):
            raise ValueError(
                "where expects a comparison operator or IN/BETWEEN/IS NULL variants after "
                f"column identifier ('{expr.name}')"
            )
        raise ValueError(f"where expects a condition, got '{to_string(expr)}'")

    def cone(self, expr: Cone) -> Any:
        """The declination band (so dataset filters can prune on statistics) AND Vincenty's
        separation <= radius, in float64; NaN gives false, null unknown (docs/sky.md)."""
        types = []
        for node, what in ((expr.ra, "RA"), (expr.dec, "declination")):
            val = self.value(node)
            if val.kind not in ("int", "float"):
                raise ValueError(f"where cone() needs a numeric {what} column, got {val.label}")
            types.append(val.type)
        if self.mode == "check":
            return _STUB
        if self.mode == "eager":
            return _cone_test(expr, types[0], types[1], self.pc, self.field,
                              lambda value: arrow_scalar(value, pa.float64()), self.null_bool)
        # built once per cone and column types: some 30 compute calls take milliseconds, and a
        # scan validates and translates its filter more than once
        return _cone_expression(expr, types[0], types[1])

    def compare(self, expr: Compare) -> Any:
        op = expr.op
        left, right = self.value(expr.left), self.value(expr.right)
        if left.kind == "literal" and right.kind == "literal":
            raise ValueError(f"where comparison '{to_string(expr)}' references no column")
        if left.kind == "literal":
            left, right, op = right, left, FLIPPED[op]
        if right.kind == "literal":
            return self.compare_literal(op, left, right.value)
        return self.compare_values(op, left, right)

    def compare_literal(self, op: str, val: _Val, literal: Any) -> Any:
        fn = getattr(self.pc, _PC_COMPARE[op])
        if literal is None:
            if op not in ("==", "!="):
                raise ValueError("where NULL comparisons only support == and !=")
            return self.pc.is_null(val.expr, nan_is_null=False) if op == "==" else self.pc.is_valid(val.expr)
        if val.kind == "int":
            lo, hi = self.int_range(val.type)
            plan = integer_compare_plan(op, self.number(val, literal), lo, hi)
            if plan[0] == "const":
                return self.const(val, plan[1])
            return getattr(self.pc, _PC_COMPARE[plan[1]])(val.expr, self.scalar(plan[2], val.type))
        if val.kind == "float":
            plan = float_compare_plan(op, self.number(val, literal), val.type.bit_width)
            operand = self.nan_to_null(val)
            if plan[0] == "const":
                return self.const(val._replace(expr=operand), plan[1])
            value = plan[2]
            if val.type.bit_width == 16:
                value = np.float16(value)
            return getattr(self.pc, _PC_COMPARE[plan[1]])(operand, self.scalar(value, val.type))
        if val.kind == "bool":
            return fn(val.expr, self.scalar(self.boolean(val, literal), pa.bool_()))
        if val.kind == "string":
            return fn(val.expr, self.scalar(self.text(val, literal), val.type))
        # binary: compare the raw bytes as variable-width binary
        return fn(val.expr.cast(pa.binary()), self.scalar(self.text(val, literal), pa.binary()))

    def compare_values(self, op: str, left: _Val, right: _Val) -> Any:
        fn = getattr(self.pc, _PC_COMPARE[op])
        numeric = ("int", "float")
        if left.kind in numeric and right.kind in numeric:
            if left.kind == "int" and right.kind == "int":
                return self.compare_ints(op, left, right)
            return fn(
                self.nan_to_null(left._replace(expr=self.to_float64(left), type=pa.float64())),
                self.nan_to_null(right._replace(expr=self.to_float64(right), type=pa.float64())),
            )
        if left.kind == right.kind == "bool":
            return fn(left.expr, right.expr)
        if left.kind == right.kind == "string":
            return fn(left.expr.cast(pa.large_string()), right.expr.cast(pa.large_string()))
        if left.kind == right.kind == "binary":
            return fn(left.expr.cast(pa.large_binary()), right.expr.cast(pa.large_binary()))
        raise self.cannot_compare(left, right)

    def compare_ints(self, op: str, left: _Val, right: _Val) -> Any:
        signed = pa.types.is_signed_integer
        if self.is_uint64(right) and signed(left.type):
            left, right, op = right, left, FLIPPED[op]
        fn = getattr(self.pc, _PC_COMPARE[op])
        if self.is_uint64(left) and signed(right.type):
            # uint64 against signed: no common type, so split on the sign of the signed side
            exact = fn(left.expr, right.expr.cast(pa.uint64(), safe=False))
            below = self.pc.less(right.expr, self.scalar(0, right.type))
            always = self.pc.if_else(
                self.pc.is_valid(left.expr), self.scalar(op in (">", ">=", "!="), pa.bool_()), self.null_bool
            )
            return self.pc.if_else(below, always, exact)
        target = pa.uint64() if not (signed(left.type) or signed(right.type)) else pa.int64()
        return fn(left.expr.cast(target), right.expr.cast(target))

    def in_list(self, expr: InList) -> Any:
        val = self.value(expr.operand)
        if val.kind == "literal":
            raise ValueError(f"where IN needs a column on the left, got {val.label}")
        members: list[Any] = []
        unknown = False  # a NULL (or NaN) in the list: misses are unknown, not false
        bounds = self.int_range(val.type) if val.kind == "int" else None
        for literal in expr.values:
            if literal is None:
                unknown = True
                continue
            if val.kind == "int":
                number = self.number(val, literal)
                if isinstance(number, float) and math.isnan(number):
                    unknown = True
                    continue
                plan = integer_compare_plan("==", number, *bounds)  # type: ignore[misc]
                if plan[0] == "cmp":
                    members.append(plan[2])
            elif val.kind == "float":
                number = self.number(val, literal)
                plan = float_compare_plan("==", number, val.type.bit_width)
                if plan[0] == "const" and plan[1] is None:
                    unknown = True
                elif plan[0] == "cmp":
                    members.append(plan[2])
            elif val.kind == "bool":
                members.append(self.boolean(val, literal))
            else:
                members.append(self.text(val, literal))
        operand = self.nan_to_null(val)
        set_type = val.type
        if val.kind == "binary":
            operand, set_type = operand.cast(pa.binary()), pa.binary()
        if val.kind == "float" and val.type.bit_width == 16:
            members = [np.float16(m) for m in members]
        elif val.kind == "float":
            # is_in hashes bit patterns, so -0.0 would miss 0.0: adding +0.0 turns every zero
            # into +0.0 (IEEE round-to-nearest) and changes nothing else.
            operand = self.pc.add(operand, self.scalar(0.0, set_type))
            members = [m + 0.0 for m in members]
        value_set = _STUB if self.mode == "check" else arrow_array(members, set_type)
        hit = self.pc.is_in(operand, value_set=value_set)
        result = self.pc.if_else(self.pc.is_valid(operand), hit, self.null_bool)
        if unknown:
            result = self.pc.or_kleene(result, self.null_bool)
        return self.pc.invert(result) if expr.negated else result


def _column_name(node: Value) -> str:
    if not isinstance(node, Column):
        raise ValueError(f"where cone() needs columns for RA and declination, got '{to_string(node)}'")
    return node.name


@functools.lru_cache(maxsize=64)
def _cone_expression(expr: Cone, ra_type: Any, dec_type: Any) -> Any:
    """`_ArrowCompiler.cone` for a cone whose coordinate columns have these (numeric) types."""
    pc = _compute()
    return _cone_test(expr, ra_type, dec_type, pc, pc.field,
                      lambda value: pc.scalar(arrow_scalar(value, pa.float64())),
                      pc.scalar(arrow_scalar(None, pa.bool_())))


def _cone_test(expr: Cone, ra_type: Any, dec_type: Any, pc: Any, field: Any, const: Any,
               null: Any) -> Any:
    """The cone's test built from ``pc`` calls on ``field(name)``, ``const(float)`` and the
    unknown ``null``: an expression, or (given arrays) its values."""
    f64 = pa.float64()
    ra, dec = (field(name) if pa.types.is_float64(typ) else field(name).cast(f64, safe=False)
               for name, typ in ((_column_name(expr.ra), ra_type), (_column_name(expr.dec), dec_type)))
    from .sky import cone_box

    box = cone_box(expr.ra0, expr.dec0, expr.radius)
    band = pc.and_kleene(pc.greater_equal(dec, const(box.dec_lo)),
                         pc.less_equal(dec, const(box.dec_hi)))
    rad = math.pi / 180.0
    lat2 = math.radians(expr.dec0)
    s2, c2 = math.sin(lat2), math.cos(lat2)
    lat1 = pc.multiply(dec, const(rad))
    dlon = pc.subtract(const(math.radians(expr.ra0)), pc.multiply(ra, const(rad)))
    sdl, cdl = pc.sin(dlon), pc.cos(dlon)
    s1, c1 = pc.sin(lat1), pc.cos(lat1)
    num1 = pc.multiply(sdl, const(c2))
    num2 = pc.subtract(pc.multiply(c1, const(s2)), pc.multiply(pc.multiply(s1, const(c2)), cdl))
    den = pc.add(pc.multiply(s1, const(s2)), pc.multiply(pc.multiply(c1, const(c2)), cdl))
    norm = pc.sqrt(pc.add(pc.multiply(num1, num1), pc.multiply(num2, num2)))
    sep = pc.multiply(pc.atan2(norm, den), const(180.0 / math.pi))
    inside = pc.and_kleene(band, pc.less_equal(sep, const(expr.radius)))
    # unknown when either coordinate is null (the band alone could say false)
    return pc.if_else(pc.and_kleene(pc.is_valid(ra), pc.is_valid(dec)), inside, null)


def _fold_arith(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(left) / np.float64(right))


def validate_tree(expr: Expr, types: Any) -> None:
    """Implementation of :func:`torchfits.query.expr.validate`: the translation's checks, with
    nothing built."""
    try:
        _ArrowCompiler(_as_types(types), mode="check").predicate(expr)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def evaluate_tree(expr: Expr, columns: Any, types: Any) -> Any:
    """The predicate's values on ``columns`` (a record batch or table holding the columns it
    names): a boolean array, null where unknown, as a filter with :func:`tree_to_pyarrow`'s
    expression would see them, without a query plan (``pyarrow.dataset``, pandas)."""
    try:
        result = _ArrowCompiler(_as_types(types), mode="eager", columns=columns).predicate(expr)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if not isinstance(result, (pa.Array, pa.ChunkedArray)):  # a constant: one value for all rows
        result = pa.repeat(result, columns.num_rows)
    return result


def tree_to_pyarrow(expr: Expr, schema: Any) -> Any:
    """Implementation of :func:`torchfits.query.expr.to_pyarrow`."""
    try:
        return _ArrowCompiler(_as_types(schema)).predicate(expr)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


# ---------------------------------------------------------------------------------------------
# Translation from pyarrow
# ---------------------------------------------------------------------------------------------



class _Unsupported(Exception):
    """Raised inside :func:`from_pyarrow` for a construct the tree cannot express exactly."""


# pyarrow's SetLookupOptions.null_matching_behavior
_MATCH, _SKIP, _EMIT_NULL, _INCONCLUSIVE = 0, 1, 2, 3
_FROM_PC_COMPARE = {v: k for k, v in _PC_COMPARE.items()}
_FROM_PC_ARITH = {
    "add": "+",
    "add_checked": "+",
    "subtract": "-",
    "subtract_checked": "-",
    "multiply": "*",
    "multiply_checked": "*",
    "divide": "/",
    "divide_checked": "/",
}

RawNode = tuple[Any, ...]


def _schema_metadata_items(schema: Any) -> list[tuple[bytes, bytes]]:
    """All key/value pairs of a schema's metadata, duplicates and order kept.

    ``Schema.metadata`` is a dict, which drops the repeated keys the expression encoding relies
    on, so the pairs are read from the Arrow C data interface export, whose metadata layout
    (int32 count, then length-prefixed keys and values) is part of the stable C ABI.
    """
    import ctypes

    capsule = schema.__arrow_c_schema__()
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    address = get_pointer(capsule, b"arrow_schema")
    # struct ArrowSchema { const char* format; const char* name; const char* metadata; ... }
    metadata = ctypes.c_void_p.from_address(address + 2 * ctypes.sizeof(ctypes.c_void_p)).value
    if not metadata:
        return []

    def read_int32(at: int) -> int:
        return ctypes.c_int32.from_address(at).value

    items: list[tuple[bytes, bytes]] = []
    offset = metadata + 4
    for _ in range(read_int32(metadata)):
        key_length = read_int32(offset)
        key = ctypes.string_at(offset + 4, key_length)
        offset += 4 + key_length
        value_length = read_int32(offset)
        value = ctypes.string_at(offset + 4, value_length)
        offset += 4 + value_length
        items.append((key, value))
    del capsule  # keeps the exported schema alive until the pairs are copied
    return items


def decode_arrow_expression(expression: Any) -> RawNode:
    """Decode a pyarrow expression into nested ``("field", name)``, ``("literal", scalar)`` and
    ``("call", function, [args], options_scalar)`` tuples.

    The bytes are those ``pickle`` uses (``Expression.__reduce__``): an Arrow IPC file whose
    schema metadata lists the tree in prefix order (``call``/``field_ref``/``literal``/
    ``options``/``end`` entries) and whose columns hold the literal and option scalars.
    """
    buffer = expression.__reduce__()[1][0]
    reader = pa.ipc.open_file(pa.BufferReader(buffer))
    batch = reader.get_batch(0) if reader.num_record_batches else None
    items = _schema_metadata_items(reader.schema)
    position = 0

    def scalar(index: bytes) -> Any:
        if batch is None:
            raise _Unsupported("literal without data")
        return batch.column(int(index))[0]

    def node() -> RawNode:
        nonlocal position
        if position >= len(items):
            raise _Unsupported("truncated expression")
        key, value = items[position]
        position += 1
        if key == b"literal":
            return ("literal", scalar(value))
        if key == b"field_ref":
            return ("field", value.decode("utf-8"))
        if key != b"call":
            raise _Unsupported(key.decode("utf-8", "replace"))  # nested field refs and the like
        function = value.decode("utf-8")
        args: list[RawNode] = []
        options = None
        while True:
            if position >= len(items):
                raise _Unsupported("truncated expression")
            key, value = items[position]
            if key == b"end":
                position += 1
                break
            if key == b"options":
                options = scalar(value)
                position += 1
                continue
            args.append(node())
        return ("call", function, args, options)

    root = node()
    if position != len(items):
        raise _Unsupported("trailing entries")
    return root


class _FromArrow:
    """Translate decoded pyarrow expressions, keeping the rows a filter selects unchanged.

    pyarrow compares NaN by IEEE rules and ``is_in`` never returns null, where the tree treats
    both as unknown. Each predicate is translated for a polarity: under an even number of NOTs
    the rows where it is true must match pyarrow's, under an odd number the rows where it is
    false; guards (``isnan``, ``IS NOT NULL``) are added only where that differs.
    """

    def __init__(self, types: Mapping[str, Any] | None) -> None:
        self.types = types

    def column_is_float(self, name: str) -> bool | None:
        if self.types is None or name not in self.types:
            return None
        return bool(pa.types.is_floating(self.types[name]))

    def maybe_float(self, expr: Value) -> bool:
        if isinstance(expr, Column):
            known = self.column_is_float(expr.name)
            return True if known is None else known
        if isinstance(expr, Arith):
            return self.maybe_float(expr.left) or self.maybe_float(expr.right)
        if isinstance(expr, (Neg, Abs)):
            return self.maybe_float(expr.operand)
        return False

    def surely_float(self, expr: Value) -> bool:
        if isinstance(expr, Literal):
            return isinstance(expr.value, float)
        if isinstance(expr, Column):
            return bool(self.column_is_float(expr.name))
        if isinstance(expr, Arith):
            return self.surely_float(expr.left) or self.surely_float(expr.right)
        if isinstance(expr, (Neg, Abs)):
            return self.surely_float(expr.operand)
        return False

    def literal(self, scalar: Any) -> LiteralValue:
        types = pa.types
        pa_type = scalar.type
        if not (
            types.is_integer(pa_type)
            or types.is_floating(pa_type)
            or types.is_boolean(pa_type)
            or types.is_string(pa_type)
            or types.is_large_string(pa_type)
        ):
            raise _Unsupported(f"literal of type {pa_type}")
        value = scalar.as_py()
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise _Unsupported("null or NaN literal")
        if isinstance(value, str) and value != value.rstrip():
            raise _Unsupported("string literal with trailing blanks")  # we strip, pyarrow not
        if isinstance(value, float) and types.is_float16(pa_type):
            value = float(value)
        return value

    # -- values -----------------------------------------------------------------------------
    def value(self, raw: RawNode) -> Value:
        if raw[0] == "field":
            return Column(raw[1])
        if raw[0] == "literal":
            return Literal(self.literal(raw[1]))
        _, function, args, _options = raw
        if function in _FROM_PC_ARITH and len(args) == 2:
            left, right = self.value(args[0]), self.value(args[1])
            op = _FROM_PC_ARITH[function]
            # pyarrow divides integers by integer division; the tree always divides exactly
            if op == "/" and not (self.surely_float(left) or self.surely_float(right)):
                raise _Unsupported("integer division")
            return Arith(op, left, right)
        if function in ("negate", "negate_checked") and len(args) == 1:
            return Neg(self.value(args[0]))
        if function in ("abs", "abs_checked") and len(args) == 1:
            return Abs(self.value(args[0]))
        if function == "bit_wise_and" and len(args) == 2:
            left, right = self.value(args[0]), self.value(args[1])
            if isinstance(left, Literal):
                left, right = right, left
            if isinstance(right, Literal) and type(right.value) is int and right.value >= 0:
                return BitAnd(left, right.value)
        raise _Unsupported(function)

    # -- predicates -------------------------------------------------------------------------
    def nan_rows(self, left: Value, right: Value) -> Predicate | None:
        """True exactly where pyarrow sees a NaN operand and no null one."""
        terms: list[Predicate] = []
        for side, other in ((left, right), (right, left)):
            if not self.maybe_float(side) or _non_numeric_literal(other):
                continue
            term: Predicate = IsNan(side)
            if not isinstance(other, Literal):
                term = And(term, IsNull(other, negated=True))
            terms.append(term)
        if not terms:
            return None
        result = terms[0]
        for term in terms[1:]:
            result = Or(result, term)
        return result

    def narrow_float_column(self, expr: Value) -> bool:
        """A float16/float32 column (pyarrow widens it to float64 against a float64 literal)."""
        if not isinstance(expr, Column) or self.types is None or expr.name not in self.types:
            return False
        pa_type = self.types[expr.name]
        return bool(pa.types.is_float16(pa_type) or pa.types.is_float32(pa_type))

    def widened_compare(self, op: str, left: Value, right: Value) -> Predicate:
        """``left op right`` as pyarrow computes it, also where a narrow float column meets a
        float64 literal its type cannot hold (``e > 0.1`` on float32).

        pyarrow widens the column to float64; the tree rounds the literal to the column's
        width. Between the two neighbouring float32 values ``lo < literal < hi`` no float32
        lies, so the comparison is rewritten on them: ``> L`` is ``> lo``, ``< L`` is ``< hi``,
        ``== L`` holds for no number and ``!= L`` for every one. NaN and null rows stay
        unknown, as in ``Compare`` (the caller adds the NaN guards).
        """
        column, literal, flipped = left, right, False
        if isinstance(left, Literal):
            column, literal, flipped = right, left, True
        if not (
            isinstance(literal, Literal)
            and isinstance(literal.value, float)
            and isinstance(column, Column)
            and self.narrow_float_column(column)
            and math.isfinite(literal.value)
        ):
            return Compare(op, left, right)
        assert self.types is not None  # narrow_float_column found the column's type
        width = np.float16 if pa.types.is_float16(self.types[column.name]) else np.float32
        with np.errstate(over="ignore"):
            nearest = width(literal.value)
        if float(nearest) == literal.value:
            return Compare(op, left, right)
        if float(nearest) > literal.value:
            hi, lo = nearest, np.nextafter(nearest, width(-np.inf))
        else:
            lo, hi = nearest, np.nextafter(nearest, width(np.inf))
        if flipped:
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        low, high = Literal(float(lo)), Literal(float(hi))
        if op in (">", ">="):
            return Compare(">", column, low)
        if op in ("<", "<="):
            return Compare("<", column, high)
        if op == "==":
            return And(Compare("<", column, high), Compare(">", column, low))  # never true
        return Or(Compare("<", column, high), Compare(">", column, low))  # "!=": every number

    def predicate(self, raw: RawNode, positive: bool) -> Predicate:
        if raw[0] == "field":
            return Compare("==", Column(raw[1]), Literal(True))  # a bool column as the filter
        if raw[0] == "literal":
            raise _Unsupported("constant filter")
        _, function, args, options = raw
        if function in _FROM_PC_COMPARE and len(args) == 2:
            op = _FROM_PC_COMPARE[function]
            left, right = self.value(args[0]), self.value(args[1])
            if isinstance(left, Literal) and isinstance(right, Literal):
                raise _Unsupported("comparison of two literals")
            base = self.widened_compare(op, left, right)
            nan = self.nan_rows(left, right)
            if nan is None:
                return base
            # pyarrow: NaN != x is true and every other comparison with NaN is false
            if op == "!=":
                return Or(base, nan) if positive else base
            return base if positive else And(base, Not(nan))
        if function in ("and_kleene", "or_kleene", "and", "or") and len(args) == 2:
            if function in ("and", "or") and not positive:
                raise _Unsupported("non-Kleene logic under negation")
            node = And if function.startswith("and") else Or
            return node(self.predicate(args[0], positive), self.predicate(args[1], positive))
        if function == "invert" and len(args) == 1:
            return Not(self.predicate(args[0], not positive))
        if function in ("is_null", "is_valid", "is_nan") and len(args) == 1:
            operand = self.value(args[0])
            if isinstance(operand, Literal):
                raise _Unsupported("null test of a literal")
            if function == "is_valid":
                return IsNull(operand, negated=True)
            if function == "is_nan":
                return IsNan(operand)
            nan_is_null = bool(options is not None and options.as_py().get("nan_is_null"))
            if nan_is_null and self.maybe_float(operand):
                return Or(IsNull(operand), IsNan(operand))
            return IsNull(operand)
        if function == "is_in" and len(args) == 1:
            return self.is_in(args[0], options, positive, sql_nulls=False)
        if function == "if_else" and len(args) == 3:
            # DuckDB spells SQL IN as if_else(is_valid(x), is_in(x, ...), null)
            test, then, otherwise = args
            if (
                test[0] == "call"
                and test[1] == "is_valid"
                and then[0] == "call"
                and then[1] == "is_in"
                and otherwise[0] == "literal"
                and not otherwise[1].is_valid
                and _same_raw(test[2][0], then[2][0])
            ):
                return self.is_in(then[2][0], then[3], positive, sql_nulls=True)
        raise _Unsupported(function)

    def is_in(
        self, raw_operand: RawNode, options: Any, positive: bool, sql_nulls: bool
    ) -> Predicate:
        operand = self.value(raw_operand)
        if isinstance(operand, Literal) or options is None:
            raise _Unsupported("is_in")
        opts = options.as_py()
        mode = opts.get("null_matching_behavior")
        if mode is None:
            mode = _SKIP if opts.get("skip_nulls") else _MATCH
        if sql_nulls and mode != _INCONCLUSIVE:
            mode = _EMIT_NULL  # null operands never reach is_in
        value_set = options["value_set"]
        value_type = value_set.type.value_type
        if not (
            pa.types.is_integer(value_type)
            or pa.types.is_floating(value_type)
            or pa.types.is_boolean(value_type)
            or pa.types.is_string(value_type)
            or pa.types.is_large_string(value_type)
        ):
            raise _Unsupported(f"is_in over {value_type}")
        values = list(opts["value_set"])
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            raise _Unsupported("NaN in is_in value set")  # pyarrow matches NaN with NaN
        if self.maybe_float(operand) and any(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0 for v in values
        ):
            # pyarrow's is_in hashes bit patterns: 0.0 misses -0.0 (and -0.0 misses 0.0), where
            # the tree compares values; pyarrow keeps the term (DuckDB already spells a zero
            # as ``x == 0`` beside the set)
            raise _Unsupported("signed zero in is_in value set")
        if any(isinstance(v, str) and v != v.rstrip() for v in values):
            raise _Unsupported("string with trailing blanks")
        has_null = any(v is None for v in values)
        members = tuple(v for v in values if v is not None)
        base = InList(operand, members)
        if mode == _INCONCLUSIVE and has_null:
            return InList(operand, members + (None,))  # SQL semantics exactly
        if positive:
            if mode == _MATCH and has_null:
                return Or(IsNull(operand), base)
            return base
        # false rows: misses, NaN (pyarrow answers false), and nulls unless they match or are null
        result: Predicate = base
        if self.maybe_float(operand) and not any(
            isinstance(v, (str, bool)) for v in members
        ):
            result = And(result, Not(IsNan(operand)))
        if mode == _SKIP or (mode == _MATCH and not has_null):
            result = And(result, IsNull(operand, negated=True))
        return result


def _non_numeric_literal(expr: Value) -> bool:
    """A str or bool literal: whatever it is compared with cannot hold NaN."""
    return isinstance(expr, Literal) and isinstance(expr.value, (str, bool))


def _same_raw(a: RawNode, b: RawNode) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "field":
        return bool(a[1] == b[1])
    if a[0] == "literal":
        return bool(a[1].equals(b[1]))
    return (
        a[1] == b[1]
        and len(a[2]) == len(b[2])
        and all(_same_raw(x, y) for x, y in zip(a[2], b[2]))
        and (a[3] is None) == (b[3] is None)
        and (a[3] is None or a[3].equals(b[3]))
    )


def tree_from_pyarrow(expression: Any, schema: Any) -> Predicate | None:
    """Implementation of :func:`torchfits.query.expr.from_pyarrow`."""
    if expression is None:
        return None

    pc = _compute()
    if not isinstance(expression, pc.Expression):
        raise TypeError(f"expected a pyarrow.compute.Expression, not {type(expression).__name__}")
    types = None if schema is None else _as_types(schema)
    try:
        raw = decode_arrow_expression(expression)
    except Exception:  # any surprise in an undocumented encoding means "cannot translate"
        return None
    try:
        tree = _FromArrow(types).predicate(raw, positive=True)
    except (_Unsupported, RecursionError):
        return None
    if types is not None:
        try:
            validate_tree(tree, types)
        except ValueError:
            return None
    return tree

"""The where-expression tree: nodes, traversal, exact comparison plans and rendering.

One tree serves both where dialects (:mod:`torchfits.query.parser`,
:mod:`torchfits.query.where_compat`) and pyarrow filters (:mod:`torchfits.query.arrow`).
The dialect and its semantics are described in docs/where.md.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Union

import numpy as np

from .lexing import RESERVED_WORDS

__all__ = [
    "Expr", "Value", "Predicate", "Column", "Literal", "Arith", "Neg", "Abs", "BitAnd", "Compare",
    "InList", "Between", "IsNull", "IsNan", "Like", "Cone", "And", "Or", "Not", "LiteralValue",
    "COMPARISON_OPS", "ARITH_OPS", "TOO_DEEP", "columns", "conjuncts", "and_all", "chain", "walk",
    "to_string", "integer_compare_plan", "float_compare_plan",
]

LiteralValue = Union[None, bool, int, float, str]
COMPARISON_OPS = ("==", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/")
#: each comparison operator with its operands swapped (``a < b`` is ``b > a``)
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
# parsers and translators recurse; a hostile string must fail as a ValueError, not crash
TOO_DEEP = "where expression nests too deeply"



# ---------------------------------------------------------------------------------------------
# The tree
# ---------------------------------------------------------------------------------------------


class Expr:
    """Base of every node; ``str(node)`` renders it in the native dialect."""

    def __str__(self) -> str:
        return to_string(self)


class Value(Expr):
    """A node that evaluates to one value per row (a column, a literal, arithmetic)."""


class Predicate(Expr):
    """A node that evaluates to true, false or unknown per row."""


class Node(Expr):
    """An immutable node with the fields ``FIELDS`` (``DEFAULTS`` for the optional ones): built
    positionally or by keyword, with the ``repr``, ``==``, hash, pickling and ``replace`` a
    frozen dataclass gives. Not a dataclass: decorating the 20 node classes ran ``exec`` some
    100 times, the largest import cost of a where-scan (docs/architecture.md, "Start-up")."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()
    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.FIELDS
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for name in names:
            if name not in values:
                if name not in self.DEFAULTS:
                    raise TypeError(f"{type(self).__name__}() missing argument {name!r}")
                values[name] = self.DEFAULTS[name]
            object.__setattr__(self, name, values[name])
        self._check()

    def _check(self) -> None:
        """Validate or normalise the fields (a dataclass's ``__post_init__``)."""

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def replace(self, **changes: Any) -> Node:
        """A copy with ``changes`` to some fields (``dataclasses.replace``)."""
        return type(self)(**{**dict(zip(self.FIELDS, self._values())), **changes})

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({body})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a {type(self).__name__}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), self._values()


class Column(Node, Value):
    """A column referenced by name (case-sensitive)."""

    FIELDS = ("name",)
    name: str


class Literal(Node, Value):
    """A constant: None (NULL), bool, int, float or str."""

    FIELDS = ("value",)
    value: LiteralValue

    def __eq__(self, other: object) -> bool:
        # 1 == True == 1.0 in Python; literals of different types are different expressions
        if not isinstance(other, Literal):
            return NotImplemented
        return type(self.value) is type(other.value) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


class _Binary(Node):
    """``left op right`` with ``op`` one of the class's ``OPS`` (a ValueError names another)."""

    FIELDS = ("op", "left", "right")
    op: str
    left: Value
    right: Value

    OPS: ClassVar[tuple[str, ...]] = ()
    KIND: ClassVar[str] = ""

    def _check(self) -> None:
        if self.op not in self.OPS:
            raise ValueError(f"unknown {self.KIND} operator {self.op!r}")


class _Unary(Node):
    """A function of one value."""

    FIELDS = ("operand",)
    operand: Value


class Arith(_Binary, Value):
    """``left op right`` with op one of ``+ - * /`` (``/`` is true division)."""

    OPS = ARITH_OPS
    KIND = "arithmetic"


class Neg(_Unary, Value):
    """Unary minus."""


class Abs(_Unary, Value):
    """Absolute value."""


class BitAnd(Node, Value):
    """``operand & mask`` on an integer value; ``mask`` is a non-negative int."""

    FIELDS = ("operand", "mask")
    operand: Value
    mask: int


class Compare(_Binary, Predicate):
    """``left op right`` with op one of ``== != < <= > >=``."""

    OPS = COMPARISON_OPS
    KIND = "comparison"


class InList(Node, Predicate):
    """``operand [NOT] IN (values...)``; a None among the values makes a miss unknown (SQL)."""

    FIELDS = ("operand", "values", "negated")
    DEFAULTS = {"negated": False}
    operand: Value
    values: tuple[LiteralValue, ...]
    negated: bool

    def _check(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))


class Between(Node, Predicate):
    """``operand [NOT] BETWEEN low AND high``, both bounds inclusive."""

    FIELDS = ("operand", "low", "high", "negated")
    DEFAULTS = {"negated": False}
    operand: Value
    low: Value
    high: Value
    negated: bool


class IsNull(Node, Predicate):
    """``operand IS [NOT] NULL``; never unknown, and NaN is not null."""

    FIELDS = ("operand", "negated")
    DEFAULTS = {"negated": False}
    operand: Value
    negated: bool


class IsNan(_Unary, Predicate):
    """True for NaN, false for any other value (of any type), unknown for null."""


class Like(Node, Predicate):
    """``operand [NOT] LIKE 'pattern'`` (SQL): ``%`` matches any run of characters, ``_`` one
    character, ``\\`` escapes either; ``ILIKE`` ignores case. Unknown for null; strings only."""

    FIELDS = ("operand", "pattern", "negated", "ignore_case")
    DEFAULTS = {"negated": False, "ignore_case": False}
    operand: Value
    pattern: str
    negated: bool
    ignore_case: bool


class Cone(Node, Predicate):
    """``cone(ra, dec, ra0, dec0, radius)``: the row's position lies within ``radius`` degrees of
    (``ra0``, ``dec0``) on the sky (boundary included). Unknown when either coordinate is null;
    false for NaN. The geometry is :mod:`torchfits.query.sky`'s (docs/sky.md)."""

    FIELDS = ("ra", "dec", "ra0", "dec0", "radius")
    ra: Value
    dec: Value
    ra0: float
    dec0: float
    radius: float


class _Connective(Node, Predicate):
    """Two conditions joined."""

    FIELDS = ("left", "right")
    left: Predicate
    right: Predicate


class And(_Connective):
    """Three-valued conjunction."""


class Or(_Connective):
    """Three-valued disjunction."""


class Not(Node, Predicate):
    """Three-valued negation: unknown stays unknown."""

    FIELDS = ("operand",)
    operand: Predicate


def _children(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, (Column, Literal)):
        return ()
    if isinstance(expr, (Arith, Compare, And, Or)):
        return (expr.left, expr.right)
    if isinstance(expr, Between):
        return (expr.operand, expr.low, expr.high)
    if isinstance(expr, Cone):
        return (expr.ra, expr.dec)
    if isinstance(expr, (Neg, Abs, BitAnd, InList, IsNull, IsNan, Like, Not)):
        return (expr.operand,)
    raise TypeError(f"not a where-expression node: {expr!r}")


def walk(expr: Expr) -> Iterator[Expr]:
    """Yield every node of a tree, parents before children, left to right.

    Parameters
    ----------
    expr : Expr
        The tree.

    Yields
    ------
    Expr
        Each node once per occurrence.
    """
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(_children(node)))


def conjuncts(expr: Expr) -> list[Expr]:
    """The top-level AND terms of a predicate, left to right (iterative: no recursion limit)."""
    terms: list[Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, And):
            stack.extend((node.right, node.left))
        else:
            terms.append(node)
    return terms


_BALANCE_FROM = 64  # chains longer than this become balanced trees


def chain(kind: Any, terms: list[Any]) -> Any:
    """``t0 op t1 op ... op tn`` for an associative ``And`` or ``Or``.

    Short chains nest to the left, as written; long ones (10,000 ORs, an IN list expanded for
    the kernel) become balanced trees of depth log2(n), so no recursive tree walk (translation
    to pyarrow, validation, the kernel compiler) ever nears Python's recursion limit.
    """
    if len(terms) <= _BALANCE_FROM:
        node = terms[0]
        for t in terms[1:]:
            node = kind(node, t)
        return node
    level = list(terms)
    while len(level) > 1:
        nxt = [kind(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def and_all(terms: Iterable[Expr]) -> Expr | None:
    """AND the terms together (left to right; balanced when long); None when there are none."""
    terms = list(terms)
    return chain(And, terms) if terms else None


def columns(expr: Expr) -> list[str]:
    """List the column names a tree references.

    Parameters
    ----------
    expr : Expr
        The tree.

    Returns
    -------
    list of str
        Unique names in first-seen (left to right) order.
    """
    seen: dict[str, None] = {}
    for node in walk(expr):
        if isinstance(node, Column):
            seen.setdefault(node.name, None)
    return list(seen)


# ---------------------------------------------------------------------------------------------
# Exact comparison plans (shared with torchfits.where and meant for the predicate kernels)
# ---------------------------------------------------------------------------------------------


def integer_compare_plan(op: str, value: Any, lo: int, hi: int) -> tuple[Any, ...]:
    """Rewrite ``x op value`` for integers ``x`` in ``[lo, hi]`` so that it needs no cast.

    Parameters
    ----------
    op : str
        Comparison operator.
    value : int, float or bool
        The literal.
    lo, hi : int
        Range of the integer type.

    Returns
    -------
    tuple
        ``("cmp", op, int_value)`` with ``lo <= int_value <= hi``, or ``("const", result)`` when
        every non-null ``x`` gives ``result`` (None: unknown, for a NaN literal).
    """
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ("const", None)
        if math.isinf(value):
            return _out_of_range(op, above=value > 0)
        if not value.is_integer():
            if op in ("==", "!="):
                return ("const", op == "!=")
            # no integer lies strictly between floor(value) and value
            if op in (">", ">="):
                op, value = ">=", math.floor(value) + 1
            else:
                op, value = "<=", math.floor(value)
        else:
            value = int(value)
    if value > hi:
        return _out_of_range(op, above=True)
    if value < lo:
        return _out_of_range(op, above=False)
    return ("cmp", op, int(value))


def _out_of_range(op: str, above: bool) -> tuple[Any, ...]:
    if op in ("==", "!="):
        return ("const", op == "!=")
    return ("const", (op in ("<", "<=")) == above)


def float_compare_plan(op: str, value: Any, bits: int) -> tuple[Any, ...]:
    """Rewrite ``x op value`` for floats ``x`` of ``bits`` width as a same-width comparison.

    Parameters
    ----------
    op : str
        Comparison operator.
    value : int, float or bool
        The literal.
    bits : int
        16, 32 or 64.

    Returns
    -------
    tuple
        ``("cmp", op, float_value)`` where ``float_value`` is the literal rounded to the column's
        width, or ``("const", result)`` (None: unknown, for a NaN literal). Literals beyond the
        finite range of the width become comparisons with infinity, so they stay exact.
    """
    if isinstance(value, float) and math.isnan(value):
        return ("const", None)
    try:
        as_float = float(value)
    except OverflowError:  # an int literal beyond float64
        as_float = math.inf if value > 0 else -math.inf
    finite_max = float(np.finfo(np.dtype(f"float{bits}")).max)
    literal_inf = isinstance(value, float) and math.isinf(value)
    if not literal_inf and (math.isinf(as_float) or abs(as_float) > finite_max):
        # beyond every finite value of the width: only infinities are on the far side
        if as_float > 0:
            if op in ("==", "!="):
                return ("const", op == "!=")
            return ("cmp", ">=" if op in (">", ">=") else "<", math.inf)
        if op in ("==", "!="):
            return ("const", op == "!=")
        return ("cmp", "<=" if op in ("<", "<=") else ">", -math.inf)
    if bits != 64:
        as_float = float(np.dtype(f"float{bits}").type(as_float))
    return ("cmp", op, as_float)


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _render_literal(value: LiteralValue) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "1e999" if value > 0 else "-1e999"
        return repr(value)  # NaN renders as "nan", which no dialect reads back as a number
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"unsupported literal {value!r}")


def _render_value(expr: Expr, literal_position: bool = False) -> str:
    if isinstance(expr, Column):
        name = expr.name
        plain = (
            _IDENT_RE.match(name)
            and name.upper() not in RESERVED_WORDS
            and name not in ("True", "False")
        )
        # in literal positions a bare word would read back as a string
        if plain and not literal_position:
            return name
        return "`" + name + "`"
    if isinstance(expr, Literal):
        return _render_literal(expr.value)
    if isinstance(expr, Arith):
        return f"({_render_value(expr.left)} {expr.op} {_render_value(expr.right)})"
    if isinstance(expr, Neg):
        if isinstance(expr.operand, Literal):
            # "-3" would read back as the literal -3
            return f"(-({_render_value(expr.operand)}))"
        return f"(-{_render_value(expr.operand)})"
    if isinstance(expr, Abs):
        return f"abs({_render_value(expr.operand)})"
    if isinstance(expr, BitAnd):
        return f"bitand({_render_value(expr.operand)}, {expr.mask})"
    raise TypeError(f"not a value node: {expr!r}")


def to_string(expr: Expr) -> str:
    """Render a tree in the native dialect, so that ``parse(to_string(e)) == e``.

    Parameters
    ----------
    expr : Expr
        The tree.

    Returns
    -------
    str
        Fully parenthesised text (NaN literals excepted: they have no spelling).
    """
    try:
        return _render(expr)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def _render(expr: Expr) -> str:
    if isinstance(expr, Value):
        return _render_value(expr)
    if isinstance(expr, Compare):
        return f"{_render_value(expr.left)} {expr.op} {_render_value(expr.right, True)}"
    if isinstance(expr, InList):
        values = ", ".join(_render_literal(v) for v in expr.values)
        return f"{_render_value(expr.operand)} {'NOT IN' if expr.negated else 'IN'} ({values})"
    if isinstance(expr, Between):
        word = "NOT BETWEEN" if expr.negated else "BETWEEN"
        return (
            f"{_render_value(expr.operand)} {word} {_render_value(expr.low, True)} AND "
            f"{_render_value(expr.high, True)}"
        )
    if isinstance(expr, IsNull):
        return f"{_render_value(expr.operand)} IS {'NOT NULL' if expr.negated else 'NULL'}"
    if isinstance(expr, IsNan):
        return f"isnan({_render_value(expr.operand)})"
    if isinstance(expr, Like):
        word = ("NOT " if expr.negated else "") + ("ILIKE" if expr.ignore_case else "LIKE")
        return f"{_render_value(expr.operand)} {word} {_render_literal(expr.pattern)}"
    if isinstance(expr, Cone):
        centre = ", ".join(_render_literal(float(v)) for v in (expr.ra0, expr.dec0, expr.radius))
        return f"cone({_render_value(expr.ra)}, {_render_value(expr.dec)}, {centre})"
    if isinstance(expr, And):
        return f"({_render(expr.left)}) AND ({_render(expr.right)})"
    if isinstance(expr, Or):
        return f"({_render(expr.left)}) OR ({_render(expr.right)})"
    if isinstance(expr, Not):
        return f"NOT ({_render(expr.operand)})"
    raise TypeError(f"not a where-expression node: {expr!r}")

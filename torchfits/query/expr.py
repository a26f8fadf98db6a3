"""Where-expression trees for the engine: one tree for both where dialects and pyarrow filters.

Parses where-strings, checks them against a schema and translates to and from pyarrow filters.

Native dialect
--------------
A superset of the 1.2.3 dialect (API.md Part 2 §9, see :mod:`torchfits.where`):

- comparisons between any two value expressions (``A < B``, ``5 > A``, ``FLUX / ERR > 5``);
- arithmetic ``+ - * /`` (usual precedence), unary minus, ``abs(x)``;
- ``isnan(x)``: true for NaN (which ``IS NULL`` does not match in table filters);
- bit tests, spelled as functions because ``&`` and ``|`` already mean AND and OR in the
  dialect: ``bitand(FLAGS, 0x0C)`` is the integer ``FLAGS & 0x0C`` (compare it:
  ``bitand(FLAGS, 0x0C) != 0`` for "any of these bits", ``bitand(FLAGS, 0x0C) == 0x0C`` for
  "all of them"), and ``bit(FLAGS, 3)`` is the condition "bit 3 (value 8, counted from the
  least significant bit 0) is set", i.e. ``bitand(FLAGS, 8) != 0``;
- backtick-quoted column names for names that are not identifiers: ```my-col` > 3``.

A bare word that stands alone on the right of a comparison, or as a BETWEEN bound, is a string
literal as in 1.2.3 (``NAME == obj3``), unless ``columns`` names it or the other side has no
column (``5 > A``); anywhere else a bare word is a column. IN lists hold literals only.

Semantics (API.md Part 2 §9.3, what :func:`to_pyarrow` implements and kernels must match)
------------------------------------------------------------------------------------------
- SQL three-valued logic: a comparison, IN or BETWEEN over a null operand is unknown; NOT of
  unknown is unknown; a filter keeps only rows that are true.
- NaN in a comparison, IN or BETWEEN is unknown as well (so ``!=`` and negations never select
  it), but ``IS NULL`` does not match NaN; ``isnan(x)`` does.
- Integers compare exactly with any literal (``S > 40000`` on int16 selects nothing), floats
  compare with a literal rounded to the column's float width (as NumPy, DuckDB and Polars do),
  strings compare with the literal's trailing blanks removed, bool columns accept ``True``,
  ``False``, ``1``, ``0`` and the words ``true``/``false``.
- Integer ``+ - *`` compute exactly in int64 (overflow raises); ``/`` and anything involving a
  float or a uint64 operand compute in float64. ``bitand`` works on the two's-complement value.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Tuple,
    Union,
)

import numpy as np

from ..errors import WhereSyntaxError

if TYPE_CHECKING:  # pragma: no cover - typing only; pyarrow is imported lazily
    import pyarrow
    import pyarrow.compute

__all__ = [
    "Expr",
    "Value",
    "Predicate",
    "Column",
    "Literal",
    "Arith",
    "Neg",
    "Abs",
    "BitAnd",
    "Compare",
    "InList",
    "Between",
    "IsNull",
    "IsNan",
    "And",
    "Or",
    "Not",
    "parse",
    "from_compat_ast",
    "columns",
    "walk",
    "to_string",
    "validate",
    "to_pyarrow",
    "from_pyarrow",
]

LiteralValue = Union[None, bool, int, float, str]
COMPARISON_OPS = ("==", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/")
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
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


@dataclass(frozen=True)
class Column(Value):
    """A column referenced by name (case-sensitive)."""

    name: str


@dataclass(frozen=True, eq=False)
class Literal(Value):
    """A constant: None (NULL), bool, int, float or str."""

    value: LiteralValue

    def __eq__(self, other: object) -> bool:
        # 1 == True == 1.0 in Python; literals of different types are different expressions
        if not isinstance(other, Literal):
            return NotImplemented
        return type(self.value) is type(other.value) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


@dataclass(frozen=True)
class Arith(Value):
    """``left op right`` with op one of ``+ - * /`` (``/`` is true division)."""

    op: str
    left: Value
    right: Value

    def __post_init__(self) -> None:
        if self.op not in ARITH_OPS:
            raise ValueError(f"unknown arithmetic operator {self.op!r}")


@dataclass(frozen=True)
class Neg(Value):
    """Unary minus."""

    operand: Value


@dataclass(frozen=True)
class Abs(Value):
    """Absolute value."""

    operand: Value


@dataclass(frozen=True)
class BitAnd(Value):
    """``operand & mask`` on an integer value; ``mask`` is a non-negative int."""

    operand: Value
    mask: int


@dataclass(frozen=True)
class Compare(Predicate):
    """``left op right`` with op one of ``== != < <= > >=``."""

    op: str
    left: Value
    right: Value

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}")


@dataclass(frozen=True)
class InList(Predicate):
    """``operand [NOT] IN (values...)``; a None among the values makes a miss unknown (SQL)."""

    operand: Value
    values: Tuple[LiteralValue, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))


@dataclass(frozen=True)
class Between(Predicate):
    """``operand [NOT] BETWEEN low AND high``, both bounds inclusive."""

    operand: Value
    low: Value
    high: Value
    negated: bool = False


@dataclass(frozen=True)
class IsNull(Predicate):
    """``operand IS [NOT] NULL``; never unknown, and NaN is not null."""

    operand: Value
    negated: bool = False


@dataclass(frozen=True)
class IsNan(Predicate):
    """True for NaN, false for any other value (of any type), unknown for null."""

    operand: Value


@dataclass(frozen=True)
class And(Predicate):
    """Three-valued conjunction."""

    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Or(Predicate):
    """Three-valued disjunction."""

    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Not(Predicate):
    """Three-valued negation: unknown stays unknown."""

    operand: Predicate


def _children(expr: Expr) -> Tuple[Expr, ...]:
    if isinstance(expr, (Column, Literal)):
        return ()
    if isinstance(expr, (Arith, Compare, And, Or)):
        return (expr.left, expr.right)
    if isinstance(expr, Between):
        return (expr.operand, expr.low, expr.high)
    if isinstance(expr, (Neg, Abs, BitAnd, InList, IsNull, IsNan, Not)):
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


def columns(expr: Expr) -> List[str]:
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
    seen: Dict[str, None] = {}
    for node in walk(expr):
        if isinstance(node, Column):
            seen.setdefault(node.name, None)
    return list(seen)


# ---------------------------------------------------------------------------------------------
# Exact comparison plans (shared with torchfits.where and meant for the predicate kernels)
# ---------------------------------------------------------------------------------------------


def integer_compare_plan(op: str, value: Any, lo: int, hi: int) -> Tuple[Any, ...]:
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


def _out_of_range(op: str, above: bool) -> Tuple[Any, ...]:
    if op in ("==", "!="):
        return ("const", op == "!=")
    return ("const", (op in ("<", "<=")) == above)


def float_compare_plan(op: str, value: Any, bits: int) -> Tuple[Any, ...]:
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
# Lexical pieces shared by both dialects
# ---------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_PREFIXED_INT_RE = re.compile(r"^([+-]?)0([xXoObB])([0-9A-Fa-f]+)$")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def _scan_quoted(text: str, start: int) -> Tuple[str, int]:
    """Read the quoted literal opening at ``start``; return its unescaped content and end offset."""
    quote = text[start]
    out: List[str] = []
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in (quote, "\\"):
            out.append(text[i + 1])
            i += 2
            continue
        if ch == quote:
            # FITS writes a quote inside a single-quoted string by doubling it
            if quote == "'" and i + 1 < n and text[i + 1] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise WhereSyntaxError(
        f"Unterminated quoted literal in where expression (quote opened at position {start})"
    )


def _number_or_none(text: str) -> Optional[Any]:
    """Return ``text`` as an int or float when it is spelled as one, else None."""
    if _INT_RE.match(text):
        try:
            return int(text)
        except ValueError:  # beyond Python's int-from-string digit limit
            return float(text)
    prefixed = _PREFIXED_INT_RE.match(text)
    if prefixed:
        sign, base_letter, digits = prefixed.groups()
        base = {"x": 16, "o": 8, "b": 2}[base_letter.lower()]
        try:
            value = int(digits, base)
        except ValueError:
            return None
        return -value if sign == "-" else value
    if _FLOAT_RE.match(text):
        return float(text)
    return None


# ---------------------------------------------------------------------------------------------
# Native parser
# ---------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:0[xX][0-9A-Fa-f]+|0[oO][0-7]+|0[bB][01]+
            |(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)(?![A-Za-z0-9_.]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|>=|<=|<>|>|<|=|!)
  | (?P<logic>&&|\|\||&|\||~)
  | (?P<arith>[-+*/])
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
    """,
    re.VERBOSE,
)
_RESERVED = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "NONE"})
_FUNCTIONS = ("abs", "bit", "bitand", "isnan")
_LOGIC_WORDS = {"&&": "AND", "&": "AND", "||": "OR", "|": "OR", "~": "NOT"}


class _Tok(NamedTuple):
    kind: str  # num str qident ident op logic arith lparen rparen comma
    text: str
    value: Any
    pos: int


def _native_tokens(text: str) -> List[_Tok]:
    tokens: List[_Tok] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            value, end = _scan_quoted(text, i)
            tokens.append(_Tok("str", text[i:end], value, i))
            i = end
            continue
        if ch == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise WhereSyntaxError(
                    f"Unterminated quoted literal in where expression (backtick at position {i})"
                )
            tokens.append(_Tok("qident", text[i : end + 1], text[i + 1 : end], i))
            i = end + 1
            continue
        match = _TOKEN_RE.match(text, i)
        if match is None:
            raise WhereSyntaxError(
                f"Unexpected character {ch!r} at position {i} in where expression"
            )
        kind = match.lastgroup
        word = match.group()
        if kind == "num":
            tokens.append(_Tok(kind, word, _number_or_none(word), i))
        elif kind == "logic":
            tokens.append(_Tok(kind, word, _LOGIC_WORDS[word], i))
        elif kind == "ident" and word.upper() in ("AND", "OR", "NOT"):
            tokens.append(_Tok("logic", word, word.upper(), i))
        elif kind != "ws":
            tokens.append(_Tok(str(kind), word, word, i))
        i = match.end()
    return tokens


@dataclass(frozen=True)
class _BareWord(Value):
    """A lone identifier whose role (column or string literal) depends on where it stands."""

    name: str
    pos: int


class _Parser:
    """Recursive descent with SQL precedence: OR < AND < NOT < comparison < + - < * / < unary."""

    def __init__(self, text: str, columns: Optional[FrozenSet[str]]) -> None:
        self.text = text
        self.tokens = _native_tokens(text)
        self.columns = columns
        self.i = 0

    # -- helpers ----------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Optional[_Tok]:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def advance(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at_word(self, *words: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        if tok is None:
            return False
        if tok.kind == "logic":
            return tok.value in words
        return tok.kind == "ident" and tok.text.upper() in words

    def at_arith(self, *ops: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "arith" and tok.text in ops

    def here(self) -> int:
        tok = self.peek()
        return tok.pos if tok is not None else len(self.text)

    def error(self, message: str, pos: Optional[int] = None) -> WhereSyntaxError:
        return WhereSyntaxError(f"{message} at position {self.here() if pos is None else pos}")

    def end_error(self) -> WhereSyntaxError:
        return self.error("Unexpected end of where expression")

    def condition(self, node: Expr, pos: int) -> Predicate:
        if isinstance(node, Predicate):
            return node
        if isinstance(node, _BareWord):
            raise self.error(
                "where expects a comparison operator or IN/BETWEEN/IS NULL variants after "
                "column identifier",
                pos=node.pos + len(node.name),
            )
        raise self.error("where expects a condition, not a value", pos=pos)

    def value(self, node: Expr, pos: int) -> Value:
        if isinstance(node, _BareWord):
            return Column(node.name)
        if isinstance(node, Value):
            return node
        raise self.error("where expects a value, not a condition", pos=pos)

    def literal_side(self, node: Expr, other: Value, pos: int) -> Value:
        """Resolve a value standing where 1.2.3 reads bare words as strings."""
        if isinstance(node, _BareWord):
            if self.columns is not None and node.name in self.columns:
                return Column(node.name)
            if not any(isinstance(n, Column) for n in walk(other)):
                return Column(node.name)
            return Literal(node.name)
        return self.value(node, pos)

    # -- grammar ----------------------------------------------------------------------------
    def parse(self) -> Predicate:
        if not self.tokens:
            raise WhereSyntaxError("where must be a non-empty string expression")
        self.check_parentheses()
        pos = self.here()
        node = self.parse_or()
        if self.peek() is not None:
            tok = self.peek()
            assert tok is not None
            raise self.error(f"Unexpected trailing tokens in where expression ({tok.text!r})")
        return self.condition(node, pos)

    def check_parentheses(self) -> None:
        opened: List[int] = []
        for tok in self.tokens:
            if tok.kind == "lparen":
                opened.append(tok.pos)
            elif tok.kind == "rparen":
                if not opened:
                    raise self.error("Unbalanced parentheses in where expression", pos=tok.pos)
                opened.pop()
        if opened:
            raise self.error("Unbalanced parentheses in where expression", pos=opened[-1])

    def parse_or(self) -> Expr:
        pos = self.here()
        node = self.parse_and()
        while self.at_word("OR"):
            self.advance()
            rpos = self.here()
            right = self.parse_and()
            node = Or(self.condition(node, pos), self.condition(right, rpos))
        return node

    def parse_and(self) -> Expr:
        pos = self.here()
        node = self.parse_not()
        while self.at_word("AND"):
            self.advance()
            rpos = self.here()
            right = self.parse_not()
            node = And(self.condition(node, pos), self.condition(right, rpos))
        return node

    def parse_not(self) -> Expr:
        if self.at_word("NOT"):
            self.advance()
            pos = self.here()
            return Not(self.condition(self.parse_not(), pos))
        return self.parse_comparison()

    def parse_comparison(self) -> Expr:
        pos = self.here()
        left = self.parse_sum()
        tok = self.peek()
        if tok is None:
            return left
        if tok.kind == "op":
            if tok.text in ("=", "<>", "!"):
                hint = {"=": "'=='", "<>": "'!='", "!": "'!='"}[tok.text]
                raise self.error(f"Unsupported operator {tok.text!r} (use {hint})", pos=tok.pos)
            self.advance()
            rpos = self.here()
            right = self.parse_sum()
            after = self.peek()
            if after is not None and after.kind == "op":
                raise self.error("where does not support chained comparisons", pos=after.pos)
            return self.make_compare(tok.text, left, right, pos, rpos, tok.pos)
        negated = False
        if self.at_word("NOT") and self.at_word("IN", "BETWEEN", "NULL", ahead=1):
            self.advance()
            negated = True
        if self.at_word("NULL") and negated:
            self.advance()
            return IsNull(self.value(left, pos), negated=True)
        if self.at_word("IN"):
            self.advance()
            return InList(self.value(left, pos), tuple(self.parse_in_values()), negated)
        if self.at_word("BETWEEN"):
            self.advance()
            operand = self.value(left, pos)
            lpos = self.here()
            low = self.literal_side(self.parse_sum(), operand, lpos)
            if self.peek() is None:
                raise self.end_error()
            if not self.at_word("AND"):
                raise self.error(
                    "Unexpected trailing tokens in where expression (BETWEEN needs 'low AND high')"
                )
            self.advance()
            hpos = self.here()
            high = self.literal_side(self.parse_sum(), operand, hpos)
            for bound, bpos in ((low, lpos), (high, hpos)):
                if isinstance(bound, Literal) and bound.value is None:
                    raise self.error("where NULL comparisons only support == and !=", pos=bpos)
            return Between(operand, low, high, negated)
        if self.at_word("IS"):
            self.advance()
            is_negated = False
            if self.at_word("NOT"):
                self.advance()
                is_negated = True
            if not self.at_word("NULL"):
                raise self.error("where expects NULL or NOT NULL after IS")
            self.advance()
            return IsNull(self.value(left, pos), is_negated)
        return left

    def make_compare(
        self, op: str, left: Expr, right: Expr, lpos: int, rpos: int, oppos: int
    ) -> Predicate:
        left_value = self.value(left, lpos)
        right_value = self.literal_side(right, left_value, rpos)
        for side, other in ((right_value, left_value), (left_value, right_value)):
            if isinstance(side, Literal) and side.value is None:
                if op not in ("==", "!="):
                    raise self.error("where NULL comparisons only support == and !=", pos=oppos)
                if isinstance(other, Literal):
                    raise self.error("where expects a column on one side of NULL", pos=lpos)
                return IsNull(other, negated=op == "!=")
        return Compare(op, left_value, right_value)

    def parse_in_values(self) -> List[LiteralValue]:
        if self.peek() is None:
            raise self.end_error()
        tok = self.peek()
        assert tok is not None
        if tok.kind != "lparen":
            return [self.parse_in_item()]
        self.advance()
        values: List[LiteralValue] = []
        if self.peek() is not None and self.peek().kind == "rparen":  # type: ignore[union-attr]
            self.advance()
            return values
        while True:
            values.append(self.parse_in_item())
            tok = self.peek()
            if tok is None:
                raise self.end_error()
            if tok.kind == "rparen":
                self.advance()
                return values
            if tok.kind != "comma":
                raise self.error(
                    f"Unexpected trailing tokens in where expression (expected ',' or ')' in "
                    f"IN list, got {tok.text!r})"
                )
            self.advance()

    def parse_in_item(self) -> LiteralValue:
        pos = self.here()
        node = self.parse_unary()
        if isinstance(node, _BareWord):
            return node.name
        if isinstance(node, Literal):
            return node.value
        raise self.error("where IN lists hold literals only", pos=pos)

    def parse_sum(self) -> Expr:
        pos = self.here()
        node = self.parse_term()
        while self.at_arith("+", "-"):
            op = self.advance().text
            rpos = self.here()
            right = self.parse_term()
            node = Arith(op, self.value(node, pos), self.value(right, rpos))
        return node

    def parse_term(self) -> Expr:
        pos = self.here()
        node = self.parse_unary()
        while self.at_arith("*", "/"):
            op = self.advance().text
            rpos = self.here()
            right = self.parse_unary()
            node = Arith(op, self.value(node, pos), self.value(right, rpos))
        return node

    def parse_unary(self) -> Expr:
        tok = self.peek()
        if tok is not None and tok.kind == "arith" and tok.text in "+-":
            self.advance()
            nxt = self.peek()
            if nxt is not None and nxt.kind == "num":
                # a signed number is one literal (so "-3" round-trips), not Neg(3)
                self.advance()
                return Literal(-nxt.value if tok.text == "-" else nxt.value)
            pos = self.here()
            operand = self.value(self.parse_unary(), pos)
            return Neg(operand) if tok.text == "-" else operand
        return self.parse_primary()

    def parse_primary(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise self.end_error()
        if tok.kind == "num":
            self.advance()
            return Literal(tok.value)
        if tok.kind == "str":
            self.advance()
            return Literal(tok.value)
        if tok.kind == "qident":
            self.advance()
            return Column(tok.value)
        if tok.kind == "lparen":
            self.advance()
            node = self.parse_or()
            closing = self.peek()
            if closing is None or closing.kind != "rparen":
                raise self.error(
                    "Unexpected trailing tokens in where expression (expected ')')"
                    if closing is not None
                    else "Unexpected end of where expression"
                )
            self.advance()
            return node
        if tok.kind == "ident":
            word = tok.text
            if word in ("True", "False"):
                self.advance()
                return Literal(word == "True")
            if word.upper() in ("NULL", "NONE"):
                self.advance()
                return Literal(None)
            if word.upper() in _RESERVED:
                raise self.error(f"where expects a value, got {word!r}", pos=tok.pos)
            nxt = self.peek(1)
            if nxt is not None and nxt.kind == "lparen":
                return self.parse_call()
            self.advance()
            return _BareWord(word, tok.pos)
        raise self.error(f"where expects a value, got {tok.text!r}", pos=tok.pos)

    def parse_call(self) -> Expr:
        name_tok = self.advance()
        name = name_tok.text.lower()
        if name not in _FUNCTIONS:
            raise self.error(
                f"where does not know the function {name_tok.text!r} (known: "
                f"{', '.join(_FUNCTIONS)})",
                pos=name_tok.pos,
            )
        self.advance()  # "("
        args: List[Tuple[Expr, int]] = []
        if self.peek() is not None and self.peek().kind != "rparen":  # type: ignore[union-attr]
            while True:
                apos = self.here()
                args.append((self.parse_sum(), apos))
                tok = self.peek()
                if tok is None:
                    raise self.end_error()
                if tok.kind == "comma":
                    self.advance()
                    continue
                break
        closing = self.peek()
        if closing is None:
            raise self.end_error()
        if closing.kind != "rparen":
            raise self.error(f"Unexpected trailing tokens in where expression ({closing.text!r})")
        self.advance()
        arity = 1 if name in ("abs", "isnan") else 2
        if len(args) != arity:
            raise self.error(
                f"where function {name}() takes {arity} argument{'s' if arity > 1 else ''}, "
                f"got {len(args)}",
                pos=name_tok.pos,
            )
        operand = self.value(args[0][0], args[0][1])
        if name == "abs":
            return Abs(operand)
        if name == "isnan":
            return IsNan(operand)
        number, npos = args[1]
        if not (isinstance(number, Literal) and type(number.value) is int and number.value >= 0):
            what = "bit number" if name == "bit" else "mask"
            raise self.error(f"where {name}() needs a non-negative integer {what}", pos=npos)
        if name == "bitand":
            return BitAnd(operand, number.value)
        if number.value > 63:
            raise self.error("where bit() numbers bits 0 to 63", pos=npos)
        return Compare("!=", BitAnd(operand, 1 << number.value), Literal(0))


def parse(
    text: str, columns: Optional[Iterable[str]] = None, *, dialect: str = "native"
) -> Predicate:
    """Parse a where-string into a tree.

    Parameters
    ----------
    text : str
        The expression.
    columns : iterable of str, optional
        The table's column names. A bare word on the right of a comparison that names one of
        them is read as that column instead of a string literal.
    dialect : {"native", "compat"}
        ``"compat"`` accepts exactly the 1.2.3 dialect (via
        :func:`torchfits.where.parse_where_expression`).

    Returns
    -------
    Predicate
        The tree (column names are not checked; see :func:`validate`).

    Raises
    ------
    WhereSyntaxError
        With the position of the offending token.
    """
    if dialect == "compat":
        from .where_compat import parse_where_expression

        return from_compat_ast(parse_where_expression(text))
    if dialect != "native":
        raise ValueError(f"dialect must be 'native' or 'compat', not {dialect!r}")
    if not isinstance(text, str) or not text.strip():
        raise WhereSyntaxError("where must be a non-empty string expression")
    if isinstance(columns, str):
        columns = [columns]  # one name, not its characters
    names = None if columns is None else frozenset(columns)
    try:
        return _Parser(text, names).parse()
    except RecursionError:
        raise WhereSyntaxError(TOO_DEEP) from None


def from_compat_ast(ast: Tuple[Any, ...]) -> Predicate:
    """Convert a :func:`torchfits.where.parse_where_expression` tuple AST into a tree.

    Parameters
    ----------
    ast : tuple
        The 1.2.3 AST.

    Returns
    -------
    Predicate
        The equivalent tree; ``("cmp", c, "==", None)`` becomes ``IsNull(c)`` and ``!=`` its
        negation.

    Raises
    ------
    ValueError
        ``"Invalid where AST"`` for a malformed node; a NULL compared with another operator.
    """
    try:
        return _from_compat(ast)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def _from_compat(ast: Tuple[Any, ...]) -> Predicate:
    from .where_compat import _check_node

    kind = _check_node(ast)
    if kind == "and":
        return And(_from_compat(ast[1]), _from_compat(ast[2]))
    if kind == "or":
        return Or(_from_compat(ast[1]), _from_compat(ast[2]))
    if kind == "not":
        return Not(_from_compat(ast[1]))
    column = Column(ast[1])
    if kind == "isnull":
        return IsNull(column, bool(ast[2]))
    if kind == "in":
        return InList(column, tuple(ast[2]), bool(ast[3]))
    if kind == "between":
        if ast[2] is None or ast[3] is None:
            raise WhereSyntaxError("where NULL comparisons only support == and !=")
        return Between(column, Literal(ast[2]), Literal(ast[3]), bool(ast[4]))
    op, value = ast[2], ast[3]
    if value is None:
        if op not in ("==", "!="):
            raise WhereSyntaxError("where NULL comparisons only support == and !=")
        return IsNull(column, negated=op == "!=")
    return Compare(op, column, Literal(value))


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
            and name.upper() not in _RESERVED
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
    if isinstance(expr, And):
        return f"({_render(expr.left)}) AND ({_render(expr.right)})"
    if isinstance(expr, Or):
        return f"({_render(expr.left)}) OR ({_render(expr.right)})"
    if isinstance(expr, Not):
        return f"NOT ({_render(expr.operand)})"
    raise TypeError(f"not a where-expression node: {expr!r}")


# ---------------------------------------------------------------------------------------------
# Schemas and pyarrow (implemented in torchfits._expr_arrow, loaded on first use)
# ---------------------------------------------------------------------------------------------


def validate(expr: Expr, types: Any) -> None:
    """Check a tree against column types.

    Parameters
    ----------
    expr : Expr
        The tree, normally from :func:`parse`.
    types : pyarrow.Schema or mapping of str to pyarrow.DataType
        The table's columns.

    Raises
    ------
    ValueError
        ``"where references unknown column 'X'"``, ``"where does not support list/VLA column
        'X'"``, ``"where cannot compare column 'ID' (int32) with 'MAG' (not a number)"``, or
        another message naming the offending column or expression.
    """
    from .arrow import validate_tree

    validate_tree(expr, types)


def to_pyarrow(expr: Expr, schema: Any) -> "pyarrow.compute.Expression":
    """Translate a tree into a pyarrow filter with the dialect's semantics.

    Parameters
    ----------
    expr : Expr
        The tree.
    schema : pyarrow.Schema or mapping of str to pyarrow.DataType
        The columns the filter will see (their types decide casts and literal handling).

    Returns
    -------
    pyarrow.compute.Expression
        A boolean expression for ``pyarrow.Table.filter`` or ``pyarrow.dataset``; rows where it
        is null are dropped, which together with Kleene AND/OR/NOT gives SQL semantics.

    Raises
    ------
    ValueError
        As :func:`validate`.
    """
    from .arrow import tree_to_pyarrow

    return tree_to_pyarrow(expr, schema)


def from_pyarrow(expression: Any, schema: Any = None) -> Optional[Predicate]:
    """Translate a pyarrow filter (as DuckDB or Polars hand it to a dataset) into a tree.

    Parameters
    ----------
    expression : pyarrow.compute.Expression or None
        The filter.
    schema : pyarrow.Schema or mapping of str to pyarrow.DataType, optional
        The dataset's columns. With it, guards for NaN are added only on float operands and the
        result is checked with :func:`validate`.

    Returns
    -------
    Predicate or None
        A tree that keeps exactly the rows pyarrow's filter keeps, or None when the expression
        uses anything it cannot express (casts, string functions, nested fields, NaN or null
        literals, integer division, ...); the caller then filters with pyarrow itself.

    Notes
    -----
    pyarrow has no public expression AST. Three routes exist: parsing ``str(expression)``
    (ambiguous for names and strings with quotes or newlines), Substrait
    (``expression.to_substrait(schema)``; needs a schema, an optional pyarrow component, a
    protobuf decoder, and refuses common expressions such as implicit casts in arithmetic),
    and the serialization pyarrow itself uses to pickle expressions. This function uses the
    last: ``Expression.__reduce__`` yields an Arrow IPC file listing the tree in prefix order in
    its schema metadata, with literals and function options as typed scalars in its columns.
    The format is Arrow's own (``arrow::compute::Serialize``) and has been stable since
    pyarrow 3; anything unexpected in it makes this function return None.

    Semantics follow pyarrow's result rows, with two deliberate exceptions shared by the
    dialect: integer overflow in arithmetic (pyarrow wraps or raises, the tree computes in
    int64) and float32 columns compared with wider literals (pyarrow widens the column, the
    tree rounds the literal to float32 as NumPy, DuckDB and Polars do).
    """
    from .arrow import tree_from_pyarrow

    return tree_from_pyarrow(expression, schema)

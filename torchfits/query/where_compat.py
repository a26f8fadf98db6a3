"""The torchfits 1.2.3 ``where=`` dialect: tokenizer, tuple-AST parser and NumPy evaluator.

The engine turns these ASTs into :mod:`torchfits.query.tree` trees (`from_compat_ast`); this
module keeps 1.2.3's names, ASTs and messages. docs/where.md describes both dialects.
"""
from __future__ import annotations

import math
import re
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..errors import WhereSyntaxError
from .lexing import RESERVED_WORDS, _number_or_none, _scan_quoted
from .tree import (
    TOO_DEEP,
    And,
    Between,
    Column,
    Compare,
    InList,
    IsNull,
    Literal as LiteralNode,
    Not,
    Or,
    Predicate,
    float_compare_plan,
    integer_compare_plan,
)

__all__ = [
    "evaluate_where",
    "normalize_where_syntax",
    "parse_where_expression",
    "parse_where_literal",
    "tokenize_where_expression",
    "where_identifier_re",
    "where_columns_from_ast",
]

#: A column name the dialect can reference: a bare identifier.
where_identifier_re = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_COMPARISON_OPS = ("==", "!=", ">=", "<=", ">", "<")
# an operator written back to front, and what was meant
_REVERSED_OPS = {"=<": "<=", "=>": ">=", "=!": "!="}
_WORD_RE = re.compile(r"[A-Za-z0-9_.+\-]+")
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

# messages fixed by the 1.2.3 contract (docs/where.md); positions are appended after them
_MSG_EMPTY = "where must be a non-empty string expression"
_MSG_UNBALANCED = "Unbalanced parentheses in where expression"
_MSG_TRAILING = "Unexpected trailing tokens in where expression"
_MSG_END = "Unexpected end of where expression"
_MSG_NEED_COLUMN = "where expects a column identifier before comparison operator"
_MSG_NEED_OPERATOR = (
    "where expects a comparison operator or IN/BETWEEN/IS NULL variants after column identifier"
)
_MSG_NULL_OPS = "where NULL comparisons only support == and !="
_MSG_BAD_AST = "Invalid where AST"

Literal = Any
WhereAst = Tuple[Any, ...]


class _Token(NamedTuple):
    kind: str  # WORD, OP, LPAREN, RPAREN, COMMA, LITERAL
    text: str
    pos: int  # offset of the token in the caller's string


# ---------------------------------------------------------------------------------------------
# Tokenizing
# ---------------------------------------------------------------------------------------------


def _standalone_tilde(text: str, i: int) -> bool:
    """1.2.3 reads ``~`` as NOT only when no identifier character touches it."""
    before = text[i - 1] if i > 0 else " "
    after = text[i + 1] if i + 1 < len(text) else " "
    return before not in _IDENT_CHARS and after not in _IDENT_CHARS


def _tokenize(text: str) -> List[_Token]:
    """Split ``text`` into tokens with their positions, reading ``&& || & | ~`` as AND/OR/NOT."""
    tokens: List[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "'\"":
            value, end = _scan_quoted(text, i)
            tokens.append(_Token("LITERAL", value, i))
            i = end
        elif text.startswith("&&", i) or text.startswith("||", i):
            tokens.append(_Token("WORD", "AND" if ch == "&" else "OR", i))
            i += 2
        elif ch in "&|":
            tokens.append(_Token("WORD", "AND" if ch == "&" else "OR", i))
            i += 1
        elif ch == "~":
            if not _standalone_tilde(text, i):
                raise WhereSyntaxError(
                    f"Unexpected character '~' at position {i} in where expression "
                    "('~' means NOT only when separated from names, e.g. '~ (A > 1)')"
                )
            tokens.append(_Token("WORD", "NOT", i))
            i += 1
        elif ch == "(":
            tokens.append(_Token("LPAREN", ch, i))
            i += 1
        elif ch == ")":
            tokens.append(_Token("RPAREN", ch, i))
            i += 1
        elif ch == ",":
            tokens.append(_Token("COMMA", ch, i))
            i += 1
        elif ch in "=!<>":
            pair = text[i : i + 2]
            if pair == "<>":
                raise WhereSyntaxError(
                    f"Unsupported operator '<>' at position {i} in where expression (use '!=')"
                )
            if pair in _REVERSED_OPS:
                raise WhereSyntaxError(
                    f"Unsupported operator '{pair}' at position {i} in where expression "
                    f"(use '{_REVERSED_OPS[pair]}')"
                )
            if pair in _COMPARISON_OPS:
                tokens.append(_Token("OP", pair, i))
                i += 2
            elif ch in "<>":
                tokens.append(_Token("OP", ch, i))
                i += 1
            else:
                hint = " (use '==')" if ch == "=" else ""
                raise WhereSyntaxError(
                    f"Unsupported operator '{ch}' at position {i} in where expression{hint}"
                )
        else:
            match = _WORD_RE.match(text, i)
            if match is None:
                raise WhereSyntaxError(
                    f"Unexpected character {ch!r} at position {i} in where expression"
                )
            tokens.append(_Token("WORD", match.group(), i))
            i = match.end()
    return tokens


def tokenize_where_expression(expression: str) -> List[Tuple[str, str]]:
    """Split a where-expression into ``(kind, text)`` tokens.

    Parameters
    ----------
    expression : str
        The where-expression.

    Returns
    -------
    list of tuple of (str, str)
        Kinds are ``WORD`` (identifiers, keywords, numbers, bare words), ``OP``
        (``== != >= <= > <``), ``LPAREN``, ``RPAREN``, ``COMMA`` and ``LITERAL`` (the unescaped
        content of a quoted string). ``&&``/``&``, ``||``/``|`` and a standalone ``~`` come back
        as the words ``AND``, ``OR`` and ``NOT``, as after :func:`normalize_where_syntax`.

    Raises
    ------
    WhereSyntaxError
        On an unterminated quote or a character the dialect does not use (``=``, ``<>``, ``*``...).
    """
    if not isinstance(expression, str):
        raise WhereSyntaxError(_MSG_EMPTY)
    return [(tok.kind, tok.text) for tok in _tokenize(expression)]


def normalize_where_syntax(expression: str) -> str:
    """Rewrite the symbolic logical operators as keywords, leaving quoted text alone.

    ``&&`` and ``&`` become ``" AND "``, ``||`` and ``|`` become ``" OR "``, a ``~`` that no
    identifier character touches becomes ``" NOT "``; FITS doubled quotes inside single-quoted
    literals (``'O''NEIL'``) become backslash escapes (``'O\\'NEIL'``).

    Parameters
    ----------
    expression : str
        The where-expression.

    Returns
    -------
    str
        The rewritten expression.
    """
    out: List[str] = []
    i = 0
    n = len(expression)
    while i < n:
        ch = expression[i]
        if ch in "'\"":
            # copy the quoted literal, normalising doubled single quotes to \'
            out.append(ch)
            i += 1
            while i < n:
                c = expression[i]
                if c == "\\" and i + 1 < n:
                    out.append(expression[i : i + 2])
                    i += 2
                    continue
                if c == ch:
                    if ch == "'" and i + 1 < n and expression[i + 1] == "'":
                        out.append("\\'")
                        i += 2
                        continue
                    out.append(c)
                    i += 1
                    break
                out.append(c)
                i += 1
            continue
        if expression.startswith("&&", i) or expression.startswith("||", i):
            out.append(" AND " if ch == "&" else " OR ")
            i += 2
        elif ch in "&|":
            out.append(" AND " if ch == "&" else " OR ")
            i += 1
        elif ch == "~" and _standalone_tilde(expression, i):
            out.append(" NOT ")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------------------------


def _unescape_quoted(inner: str, quote: str) -> str:
    """Undo ``\\'``-style escapes and FITS doubled single quotes inside a quoted literal."""
    out: List[str] = []
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner) and inner[i + 1] in (quote, "\\"):
            out.append(inner[i + 1])
            i += 2
        elif quote == "'" and ch == "'" and inner[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_where_literal(raw: str) -> Literal:
    """Convert the text of one literal to its value.

    Parameters
    ----------
    raw : str
        Literal text, quoted or bare.

    Returns
    -------
    str, bool, int, float or None
        A quoted literal gives its inner string (escaped quotes unescaped); ``true``/``false`` in
        any case give a bool; ``none``/``null`` in any case give None; integers (``42``, ``-3``,
        ``0x5``) and floats (``4.5``, ``.5``, ``1e3``) give numbers; anything else is the bare
        word itself.

    Raises
    ------
    WhereSyntaxError
        If ``raw`` is empty or blank.
    """
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise WhereSyntaxError("where literal cannot be empty")
    if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
        return _unescape_quoted(text[1:-1], text[0])
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    number = _number_or_none(text)
    return text if number is None else number


def _word_value(text: str) -> Literal:
    """Value of an unquoted word in an expression (only ``True``/``False`` spelled so are bools)."""
    if text in ("True", "False"):
        return text == "True"
    if text.upper() in ("NULL", "NONE"):
        return None
    number = _number_or_none(text)
    return text if number is None else number


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


class _CompatParser:
    """Recursive descent over the 1.2.3 grammar (docs/where.md)."""

    def __init__(self, text: str, tokens: List[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    # -- token helpers --------------------------------------------------------------------
    def peek(self) -> Optional[_Token]:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def is_keyword(self, tok: Optional[_Token], *words: str) -> bool:
        return tok is not None and tok.kind == "WORD" and tok.text.upper() in words

    def end_error(self) -> WhereSyntaxError:
        return WhereSyntaxError(f"{_MSG_END} (at position {len(self.text)})")

    # -- grammar --------------------------------------------------------------------------
    def parse(self) -> WhereAst:
        node = self.parse_or()
        tok = self.peek()
        if tok is not None:
            raise WhereSyntaxError(f"{_MSG_TRAILING} at position {tok.pos}: {tok.text!r}")
        return node

    def parse_or(self) -> WhereAst:
        node = self.parse_and()
        while self.is_keyword(self.peek(), "OR"):
            self.advance()
            node = ("or", node, self.parse_and())
        return node

    def parse_and(self) -> WhereAst:
        node = self.parse_not()
        while self.is_keyword(self.peek(), "AND"):
            self.advance()
            node = ("and", node, self.parse_not())
        return node

    def parse_not(self) -> WhereAst:
        if self.is_keyword(self.peek(), "NOT"):
            self.advance()
            return ("not", self.parse_not())
        return self.parse_atom()

    def parse_atom(self) -> WhereAst:
        tok = self.peek()
        if tok is not None and tok.kind == "LPAREN":
            self.advance()
            node = self.parse_or()
            closing = self.peek()
            if closing is None or closing.kind != "RPAREN":
                if closing is None:
                    raise WhereSyntaxError(f"{_MSG_UNBALANCED} (at position {tok.pos})")
                raise WhereSyntaxError(
                    f"{_MSG_TRAILING} at position {closing.pos}: {closing.text!r}"
                )
            self.advance()
            return node
        return self.parse_predicate()

    def parse_predicate(self) -> WhereAst:
        tok = self.peek()
        if tok is None:
            raise self.end_error()
        if (
            tok.kind != "WORD"
            or tok.text.upper() in RESERVED_WORDS
            or not where_identifier_re.match(tok.text)
        ):
            raise WhereSyntaxError(f"{_MSG_NEED_COLUMN} at position {tok.pos}: {tok.text!r}")
        column = self.advance().text
        tok = self.peek()
        if tok is None:
            raise WhereSyntaxError(f"{_MSG_NEED_OPERATOR} (at position {len(self.text)})")
        if tok.kind == "OP":
            op = self.advance().text
            value_tok = self.peek()
            value = self.parse_literal()
            if value is None and op not in ("==", "!="):
                assert value_tok is not None
                raise WhereSyntaxError(f"{_MSG_NULL_OPS} (got '{op}' at position {tok.pos})")
            return ("cmp", column, op, value)
        negated = False
        if self.is_keyword(tok, "NOT"):
            self.advance()
            negated = True
            tok = self.peek()
            if self.is_keyword(tok, "NULL"):
                self.advance()
                return ("isnull", column, True)
        if self.is_keyword(tok, "IN"):
            self.advance()
            return ("in", column, self.parse_in_values(), negated)
        if self.is_keyword(tok, "BETWEEN"):
            self.advance()
            low = self.parse_bound()
            and_tok = self.peek()
            if and_tok is None:
                raise self.end_error()
            if not self.is_keyword(and_tok, "AND"):
                raise WhereSyntaxError(
                    f"{_MSG_TRAILING} at position {and_tok.pos}: {and_tok.text!r} "
                    "(BETWEEN needs 'low AND high')"
                )
            self.advance()
            return ("between", column, low, self.parse_bound(), negated)
        if not negated and self.is_keyword(tok, "IS"):
            self.advance()
            is_negated = False
            if self.is_keyword(self.peek(), "NOT"):
                self.advance()
                is_negated = True
            if self.is_keyword(self.peek(), "NULL"):
                self.advance()
                return ("isnull", column, is_negated)
        where = self.peek()
        pos = where.pos if where is not None else len(self.text)
        raise WhereSyntaxError(f"{_MSG_NEED_OPERATOR} (at position {pos})")

    def parse_literal(self) -> Literal:
        tok = self.peek()
        if tok is None:
            raise self.end_error()
        if tok.kind == "LITERAL":
            self.advance()
            return tok.text
        if tok.kind == "WORD" and tok.text.upper() not in RESERVED_WORDS - {"NULL", "NONE"}:
            self.advance()
            return _word_value(tok.text)
        raise WhereSyntaxError(
            f"{_MSG_TRAILING} at position {tok.pos}: expected a literal, got {tok.text!r}"
        )

    def parse_bound(self) -> Literal:
        tok = self.peek()
        value = self.parse_literal()
        if value is None:
            assert tok is not None
            raise WhereSyntaxError(f"{_MSG_NULL_OPS} (NULL BETWEEN bound at position {tok.pos})")
        return value

    def parse_in_values(self) -> List[Literal]:
        tok = self.peek()
        if tok is None:
            raise self.end_error()
        if tok.kind != "LPAREN":
            return [self.parse_literal()]
        self.advance()
        values: List[Literal] = []
        if self.peek() is not None and self.peek().kind == "RPAREN":  # type: ignore[union-attr]
            self.advance()
            return values
        while True:
            values.append(self.parse_literal())
            tok = self.peek()
            if tok is None:
                raise self.end_error()
            if tok.kind == "RPAREN":
                self.advance()
                return values
            if tok.kind != "COMMA":
                raise WhereSyntaxError(
                    f"{_MSG_TRAILING} at position {tok.pos}: expected ',' or ')' in IN list, "
                    f"got {tok.text!r}"
                )
            self.advance()


def _check_parentheses(text: str, tokens: Sequence[_Token]) -> None:
    depth = 0
    opened: List[int] = []
    for tok in tokens:
        if tok.kind == "LPAREN":
            depth += 1
            opened.append(tok.pos)
        elif tok.kind == "RPAREN":
            depth -= 1
            if depth < 0:
                raise WhereSyntaxError(f"{_MSG_UNBALANCED} (unmatched ')' at position {tok.pos})")
            opened.pop()
    if depth:
        raise WhereSyntaxError(f"{_MSG_UNBALANCED} (unclosed '(' at position {opened[-1]})")


def parse_where_expression(expression: str) -> WhereAst:
    """Parse a where-expression into the 1.2.3 tuple AST.

    Parameters
    ----------
    expression : str
        The where-expression, e.g. ``"MAG < 20 AND NAME IN ('a', 'b')"``.

    Returns
    -------
    tuple
        Nodes are ``("cmp", col, op, literal)``, ``("in", col, [literals], negated)``,
        ``("between", col, low, high, negated)``, ``("isnull", col, negated)``,
        ``("and", l, r)``, ``("or", l, r)`` and ``("not", x)``; n-ary AND/OR fold to the left.
        ``COL == NULL`` stays ``("cmp", col, "==", None)``. Column names are not checked.

    Raises
    ------
    WhereSyntaxError
        A ``ValueError`` whose message carries the 1.2.3 keywords and the position of the
        offending token.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise WhereSyntaxError(_MSG_EMPTY)
    tokens = _tokenize(expression)
    _check_parentheses(expression, tokens)
    try:
        return _CompatParser(expression, tokens).parse()
    except RecursionError:
        raise WhereSyntaxError(TOO_DEEP) from None


_NODE_ARITY = {"cmp": 4, "in": 4, "between": 5, "isnull": 3, "and": 3, "or": 3, "not": 2}


def _check_node(node: Any) -> str:
    """Return the node kind, or raise ``Invalid where AST`` if ``node`` is malformed."""
    if not isinstance(node, tuple) or not node or node[0] not in _NODE_ARITY:
        raise ValueError(_MSG_BAD_AST)
    kind = node[0]
    if len(node) != _NODE_ARITY[kind]:
        raise ValueError(_MSG_BAD_AST)
    if kind in ("cmp", "in", "between", "isnull") and not isinstance(node[1], str):
        raise ValueError(_MSG_BAD_AST)
    if kind == "cmp" and node[2] not in _COMPARISON_OPS:
        raise ValueError(_MSG_BAD_AST)
    if kind == "in" and not isinstance(node[2], (list, tuple)):
        raise ValueError(_MSG_BAD_AST)
    return kind


def where_columns_from_ast(ast: WhereAst) -> List[str]:
    """List the columns a parsed where-expression references.

    Parameters
    ----------
    ast : tuple
        A tree from :func:`parse_where_expression`.

    Returns
    -------
    list of str
        Unique names in first-seen order.

    Raises
    ------
    ValueError
        ``"Invalid where AST"`` for a malformed node.
    """
    names: List[str] = []
    stack = [ast]
    while stack:
        node = stack.pop()
        kind = _check_node(node)
        if kind in ("and", "or"):
            stack.extend((node[2], node[1]))  # reversed so the left side is seen first
        elif kind == "not":
            stack.append(node[1])
        elif node[1] not in names:
            names.append(node[1])
    return names


# ---------------------------------------------------------------------------------------------
# Evaluation over in-memory arrays
# ---------------------------------------------------------------------------------------------


class _Column(NamedTuple):
    values: np.ndarray
    null: np.ndarray  # True where the row is null (None, NaN, masked)


def _to_numpy(name: str, data: Any) -> _Column:
    """Turn one column of array-like data into values and a null mask, without importing torch."""
    if hasattr(data, "detach") and hasattr(data, "cpu") and hasattr(data, "numpy"):
        tensor = data.detach().cpu()
        try:
            data = tensor.numpy()
        except TypeError:  # bfloat16 and friends have no NumPy dtype
            data = tensor.float().numpy()
    mask = None
    if isinstance(data, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(data)
        data = data.data
    values = np.asarray(data)
    if values.ndim != 1:
        raise ValueError(
            f"where does not support vector column '{name}' (shape {values.shape}); "
            "predicates need one value per row"
        )
    if values.dtype.kind == "f":
        null = np.isnan(values)
    elif values.dtype.kind == "O":
        null = np.fromiter(
            (v is None or (isinstance(v, float) and math.isnan(v)) for v in values),
            dtype=bool,
            count=len(values),
        )
    else:
        null = np.zeros(len(values), dtype=bool)
    if mask is not None:
        null = null | mask
    return _Column(values, null)


def _incomparable(value: Literal) -> ValueError:
    return ValueError(f"cannot compare column values with literal {value!r}")


def _coerce_for(values: np.ndarray, value: Literal) -> Literal:
    """Convert a literal to what the column's values compare with, as table filters do."""
    kind = values.dtype.kind
    if kind == "b":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, (int, float)) and value in (0, 1)
        ):
            return bool(value)
        raise _incomparable(value)
    if kind in "iuf":
        if isinstance(value, str):
            number = _number_or_none(value.strip())
            if number is None:
                raise _incomparable(value)
            return number
        if isinstance(value, (bool, int, float, np.number)):
            return value
        raise _incomparable(value)
    if kind in "US":
        if not isinstance(value, str):
            raise _incomparable(value)
        stripped = value.rstrip()
        return stripped.encode("ascii", "replace") if kind == "S" else stripped
    return value


def _compare(values: np.ndarray, op: str, value: Literal) -> np.ndarray:
    """Elementwise ``values <op> value``, exact for integer columns and wide literals."""
    kind = values.dtype.kind
    numeric_literal = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    if kind in "iu" and numeric_literal:
        info = np.iinfo(values.dtype)
        plan = integer_compare_plan(op, value, int(info.min), int(info.max))
        if plan[0] == "const":
            return np.full(len(values), bool(plan[1]), dtype=bool)
        op, value = plan[1], values.dtype.type(plan[2])
    elif kind == "f" and numeric_literal:
        plan = float_compare_plan(op, value, values.dtype.itemsize * 8)
        if plan[0] == "const":
            return np.full(len(values), bool(plan[1]), dtype=bool)
        op, value = plan[1], values.dtype.type(plan[2])
    elif kind in "US":
        values = np.char.rstrip(values)
    if kind == "O":
        out = np.zeros(len(values), dtype=bool)
        for i, item in enumerate(values):
            if item is None or (isinstance(item, float) and math.isnan(item)):
                continue
            other = value
            if isinstance(item, str) and isinstance(value, str):
                item, other = item.rstrip(), value.rstrip()
            try:
                out[i] = bool(_PY_OPS[op](item, other))
            except TypeError:
                raise _incomparable(value) from None
        return out
    try:
        with np.errstate(invalid="ignore"):
            result = _PY_OPS[op](values, value)
    except TypeError:  # NumPy's "no loop" and promotion errors derive from TypeError
        raise _incomparable(value) from None
    if not isinstance(result, np.ndarray) or result.dtype != bool:
        raise _incomparable(value)
    return result


_PY_OPS = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

# a three-valued truth array: (true rows, null rows); rows in neither are false
_Truth = Tuple[np.ndarray, np.ndarray]


def evaluate_where(ast: WhereAst, data: Mapping[str, Any]) -> np.ndarray:
    """Evaluate a parsed where-expression over in-memory columns.

    Parameters
    ----------
    ast : tuple
        A tree from :func:`parse_where_expression`.
    data : mapping of str to array-like
        Columns as NumPy arrays, lists, NumPy masked arrays or torch tensors (converted through
        their ``.numpy()`` method; torch is never imported here). All referenced columns must
        have the same length.

    Returns
    -------
    numpy.ndarray of bool
        True for the selected rows.

    Raises
    ------
    ValueError
        ``"Unknown column: Z"`` for a missing column; ``"... not supported on numeric ..."``
        for ``== NULL``/``!= NULL`` on numeric or bool columns; ``"cannot compare column values
        with literal ..."`` for a literal of the wrong kind; ``"Invalid where AST"`` for a
        malformed tree.

    Notes
    -----
    Unlike table filters, NaN counts as null here: ``IS NULL`` is true for NaN floats and for
    None in object arrays. Logic is three-valued (SQL): null rows never satisfy a comparison,
    ``IN``, ``BETWEEN`` or a negation.
    """
    cache: dict = {}
    length: List[int] = []

    def column(name: str) -> _Column:
        if name not in cache:
            if name not in data:
                raise ValueError(f"Unknown column: {name}")
            col = _to_numpy(name, data[name])
            if length and len(col.values) != length[0]:
                raise ValueError(
                    f"where columns differ in length: '{name}' has {len(col.values)} rows, "
                    f"expected {length[0]}"
                )
            length.append(len(col.values))
            cache[name] = col
        return cache[name]

    def truth(node: Any) -> _Truth:
        kind = _check_node(node)
        if kind == "and":
            (t1, n1), (t2, n2) = truth(node[1]), truth(node[2])
            false = (~t1 & ~n1) | (~t2 & ~n2)
            return t1 & t2, (n1 | n2) & ~false
        if kind == "or":
            (t1, n1), (t2, n2) = truth(node[1]), truth(node[2])
            true = t1 | t2
            return true, (n1 | n2) & ~true
        if kind == "not":
            t, n = truth(node[1])
            return ~t & ~n, n
        col = column(node[1])
        values, null = col.values, col.null
        if kind == "isnull":
            return (~null if node[2] else null.copy()), np.zeros(len(values), dtype=bool)
        if kind == "cmp":
            op, value = node[2], node[3]
            if isinstance(value, float) and math.isnan(value):
                return np.zeros(len(values), dtype=bool), np.ones(len(values), dtype=bool)
            if value is None:
                if values.dtype.kind in "biuf":
                    raise ValueError(
                        f"where '{node[1]} {op} NULL' is not supported on numeric or bool "
                        "columns; use IS NULL / IS NOT NULL"
                    )
                if op not in ("==", "!="):
                    raise ValueError(_MSG_NULL_OPS)
                hit = null if op == "==" else ~null
                return hit.copy(), np.zeros(len(values), dtype=bool)
            result = _compare(values, op, _coerce_for(values, value))
            return result & ~null, null
        if kind == "between":
            if node[2] is None or node[3] is None:
                raise ValueError(_MSG_NULL_OPS)
            low = _compare(values, ">=", _coerce_for(values, node[2]))
            high = _compare(values, "<=", _coerce_for(values, node[3]))
            t, n = low & high & ~null, null
            return (~t & ~n, n) if node[4] else (t, n)
        # "in": SQL semantics, a NULL in the list turns a miss into unknown
        hit = np.zeros(len(values), dtype=bool)
        has_null = False
        for value in node[2]:
            if value is None:
                has_null = True
                continue
            hit |= _compare(values, "==", _coerce_for(values, value))
        t = hit & ~null
        n = null | (~t if has_null else np.zeros(len(values), dtype=bool))
        return (~t & ~n, n) if node[3] else (t, n)

    try:
        true, _ = truth(ast)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    return np.asarray(true, dtype=bool)


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
        return Between(column, LiteralNode(ast[2]), LiteralNode(ast[3]), bool(ast[4]))
    op, value = ast[2], ast[3]
    if value is None:
        if op not in ("==", "!="):
            raise WhereSyntaxError("where NULL comparisons only support == and !=")
        return IsNull(column, negated=op == "!=")
    return Compare(op, column, LiteralNode(value))


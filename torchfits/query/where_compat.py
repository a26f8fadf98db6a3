"""The torchfits 1.2.3 ``where=`` dialect: tokenizer and tuple-AST parser.

The engine turns these ASTs into :mod:`torchfits.query.tree` trees (`from_compat_ast`); this
module keeps 1.2.3's names, ASTs and messages. The NumPy evaluator of the 1.x module
``torchfits.where`` (``evaluate_where``) serves only the 1.x API and lives in
:mod:`torchfits.compat.where_eval`. docs/where.md describes both dialects.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import WhereSyntaxError
from .lexing import (
    RESERVED_WORDS,
    in_list,
    number_or_none,
    quoted_end,
    scan_quoted,
    unescape_quoted,
)
from .sky import check_cone
from .tree import (
    TOO_DEEP,
    And,
    Between,
    Column,
    Compare,
    Cone,
    InList,
    IsNull,
    Not,
    Or,
    Predicate,
)
from .tree import (
    Literal as LiteralNode,
)

__all__ = [
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
# in a single-quoted literal: an escape pair (kept) or a doubled quote (rewritten as \')
_ESCAPE_OR_DOUBLED = re.compile(r"\\.|''", re.S)
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
#: The message for NULL with an operator other than ``==`` / ``!=`` (shared with the evaluator).
NULL_OPS_MESSAGE = "where NULL comparisons only support == and !="
_MSG_BAD_AST = "Invalid where AST"

Literal = Any
WhereAst = tuple[Any, ...]


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


def _tokenize(text: str) -> list[_Token]:
    """Split ``text`` into tokens with their positions, reading ``&& || & | ~`` as AND/OR/NOT."""
    tokens: list[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "'\"":
            value, end = scan_quoted(text, i)
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


def tokenize_where_expression(expression: str) -> list[tuple[str, str]]:
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


def _escape_doubled(match: re.Match[str]) -> str:
    return "\\'" if match.group() == "''" else match.group()


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
    out: list[str] = []
    i = 0
    n = len(expression)
    while i < n:
        ch = expression[i]
        if ch in "'\"":
            # copy the quoted literal (to the end if unterminated), doubled single quotes as \'
            end = quoted_end(expression, i)
            end = n if end < 0 else end
            body = expression[i + 1 : end]
            out.append(ch + (_ESCAPE_OR_DOUBLED.sub(_escape_doubled, body) if ch == "'" else body))
            i = end
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
        return unescape_quoted(text[1:-1], text[0])
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    number = number_or_none(text)
    return text if number is None else number


def _word_value(text: str) -> Literal:
    """Value of an unquoted word in an expression (only ``True``/``False`` spelled so are bools)."""
    if text in ("True", "False"):
        return text == "True"
    if text.upper() in ("NULL", "NONE"):
        return None
    number = number_or_none(text)
    return text if number is None else number


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


# the joining keywords, loosest first, and their AST tags
_JOINS = (("OR", "or"), ("AND", "and"))


class _CompatParser:
    """Recursive descent over the 1.2.3 grammar (docs/where.md)."""

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    # -- token helpers --------------------------------------------------------------------
    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def is_keyword(self, tok: _Token | None, *words: str) -> bool:
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

    def parse_or(self, level: int = 0) -> WhereAst:
        """OR of ANDs (``level`` 1 parses one AND term list), left-associative."""
        if level == len(_JOINS):
            return self.parse_not()
        word, kind = _JOINS[level]
        node = self.parse_or(level + 1)
        while self.is_keyword(self.peek(), word):
            self.advance()
            node = (kind, node, self.parse_or(level + 1))
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

    def at_call(self, ahead: int = 0) -> bool:
        """A ``cone(`` or ``separation(`` call starts ``ahead`` tokens on."""
        j = self.i + ahead
        return (j + 1 < len(self.tokens) and self.tokens[j].kind == "WORD"
                and self.tokens[j].text.lower() in ("cone", "separation")
                and self.tokens[j + 1].kind == "LPAREN")

    def parse_sky(self) -> WhereAst:
        """``cone(ra, dec, ra0, dec0, r)``, ``separation(ra, dec, ra0, dec0) < r`` (or ``<=``)
        and ``r > separation(...)`` (or ``>=``), all as ``("cone", ra, dec, ra0, dec0, r)``."""
        flipped: tuple[str, Any, int] | None = None
        if not self.at_call():  # r > separation(...)
            radius_tok = self.advance()
            op_tok = self.advance()
            flipped = (op_tok.text, _word_value(radius_tok.text), radius_tok.pos)
        name_tok = self.advance()
        name = name_tok.text.lower()
        self.advance()  # "("
        args: list[_Token] = []
        while True:
            tok = self.peek()
            if tok is None:
                raise self.end_error()
            if tok.kind != "WORD":
                raise WhereSyntaxError(
                    f"{_MSG_TRAILING} at position {tok.pos}: where {name}() takes column names "
                    f"and numbers, got {tok.text!r}")
            args.append(self.advance())
            tok = self.peek()
            if tok is None:
                raise self.end_error()
            self.advance()
            if tok.kind == "RPAREN":
                break
            if tok.kind != "COMMA":
                raise WhereSyntaxError(
                    f"{_MSG_TRAILING} at position {tok.pos}: expected ',' or ')' in {name}(), "
                    f"got {tok.text!r}")
        arity = 5 if name == "cone" else 4
        if len(args) != arity:
            raise WhereSyntaxError(f"where function {name}() takes {arity} arguments, got "
                                   f"{len(args)} (at position {name_tok.pos})")
        for tok, what in zip(args[:2], ("RA", "declination")):
            if tok.text.upper() in RESERVED_WORDS or not where_identifier_re.match(tok.text):
                raise WhereSyntaxError(
                    f"where {name}() needs a column for its {what} (at position {tok.pos})")
        numbers = [(_word_value(t.text), t.pos) for t in args[2:]]
        if name == "separation":
            if flipped is not None:
                op, radius, rpos = flipped[0], flipped[1], flipped[2]
                op = {">": "<", ">=": "<=", "<": ">", "<=": ">="}.get(op, op)
            else:
                next_tok = self.peek()
                if next_tok is None:
                    raise self.end_error()
                if next_tok.kind != "OP":
                    raise WhereSyntaxError(
                        f"where separation() must be compared with a radius: separation(ra, dec, "
                        f"ra0, dec0) < r (at position {next_tok.pos})")
                op = self.advance().text
                rtok = self.peek()
                radius, rpos = self.parse_literal(), rtok.pos if rtok is not None else 0
            if op not in ("<", "<="):
                raise WhereSyntaxError(
                    f"where separation() compares with a radius by < or <= (a cone), not {op!r};"
                    " for the points outside a cone write NOT cone(ra, dec, ra0, dec0, r)")
            numbers.append((radius, rpos))
        elif flipped is not None:
            raise WhereSyntaxError(f"{_MSG_NEED_COLUMN} at position {flipped[2]}")
        values = []
        for value, pos in numbers:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise WhereSyntaxError(
                    f"where {name}() needs numbers for the centre and radius, got {value!r} "
                    f"(at position {pos})")
            values.append(float(value))
        if name == "separation" and op == "<":
            if values[2] <= 0:
                raise WhereSyntaxError(
                    f"where separation() < {values[2]!r} selects nothing; the radius must be "
                    "positive")
            values[2] = math.nextafter(values[2], -math.inf)  # sep < r: sep <= the float below r
        try:
            ra0, dec0, radius = check_cone(*values)
        except ValueError as exc:
            raise WhereSyntaxError(f"where {name}(): {exc} (at position {name_tok.pos})") from None
        return ("cone", args[0].text, args[1].text, ra0, dec0, radius)

    def parse_predicate(self) -> WhereAst:
        tok = self.peek()
        if tok is None:
            raise self.end_error()
        if self.at_call() or (self.i + 2 < len(self.tokens) and self.tokens[self.i + 1].kind == "OP"
                              and self.at_call(2)):
            return self.parse_sky()
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
                raise WhereSyntaxError(f"{NULL_OPS_MESSAGE} (got '{op}' at position {tok.pos})")
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
            raise WhereSyntaxError(f"{NULL_OPS_MESSAGE} (NULL BETWEEN bound at position {tok.pos})")
        return value

    def parse_in_values(self) -> list[Literal]:
        return in_list(self, self.parse_literal, ("LPAREN", "RPAREN", "COMMA"), lambda tok: WhereSyntaxError(
            f"{_MSG_TRAILING} at position {tok.pos}: expected ',' or ')' in IN list, got {tok.text!r}"
        ))


def _check_parentheses(text: str, tokens: Sequence[_Token]) -> None:
    depth = 0
    opened: list[int] = []
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
        ``("cone", ra, dec, ra0, dec0, radius)`` (``cone()`` and ``separation() < r``),
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


_NODE_ARITY = {"cmp": 4, "in": 4, "between": 5, "isnull": 3, "and": 3, "or": 3, "not": 2,
               "cone": 6}


def check_node(node: Any) -> str:
    """Return the node kind, or raise ``Invalid where AST`` if ``node`` is malformed."""
    if not isinstance(node, tuple) or not node or node[0] not in _NODE_ARITY:
        raise ValueError(_MSG_BAD_AST)
    kind = node[0]
    if len(node) != _NODE_ARITY[kind]:
        raise ValueError(_MSG_BAD_AST)
    if kind in ("cmp", "in", "between", "isnull", "cone") and not isinstance(node[1], str):
        raise ValueError(_MSG_BAD_AST)
    if kind == "cone" and not isinstance(node[2], str):
        raise ValueError(_MSG_BAD_AST)
    if kind == "cmp" and node[2] not in _COMPARISON_OPS:
        raise ValueError(_MSG_BAD_AST)
    if kind == "in" and not isinstance(node[2], (list, tuple)):
        raise ValueError(_MSG_BAD_AST)
    return kind


def where_columns_from_ast(ast: WhereAst) -> list[str]:
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
    names: list[str] = []
    stack = [ast]
    while stack:
        node = stack.pop()
        kind = check_node(node)
        if kind in ("and", "or"):
            stack.extend((node[2], node[1]))  # reversed so the left side is seen first
        elif kind == "not":
            stack.append(node[1])
        else:
            for name in node[1:3] if kind == "cone" else node[1:2]:
                if name not in names:
                    names.append(name)
    return names


def from_compat_ast(ast: tuple[Any, ...]) -> Predicate:
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


def _from_compat(ast: tuple[Any, ...]) -> Predicate:
    kind = check_node(ast)
    if kind == "and":
        return And(_from_compat(ast[1]), _from_compat(ast[2]))
    if kind == "or":
        return Or(_from_compat(ast[1]), _from_compat(ast[2]))
    if kind == "not":
        return Not(_from_compat(ast[1]))
    column = Column(ast[1])
    if kind == "cone":
        return Cone(column, Column(ast[2]), *check_cone(*ast[3:]))
    if kind == "isnull":
        return IsNull(column, bool(ast[2]))
    if kind == "in":
        return InList(column, tuple(ast[2]), bool(ast[3]))
    if kind == "between":
        if ast[2] is None or ast[3] is None:
            raise WhereSyntaxError(NULL_OPS_MESSAGE)
        return Between(column, LiteralNode(ast[2]), LiteralNode(ast[3]), bool(ast[4]))
    op, value = ast[2], ast[3]
    if value is None:
        if op not in ("==", "!="):
            raise WhereSyntaxError(NULL_OPS_MESSAGE)
        return IsNull(column, negated=op == "!=")
    return Compare(op, column, LiteralNode(value))


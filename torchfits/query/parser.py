"""The native where dialect: tokenizer and recursive-descent parser into expression trees.

The dialect is a superset of the torchfits 1.x one; docs/where.md is its reference.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import (
    Any,
    NamedTuple,
)

import numpy as np

from ..errors import WhereSyntaxError
from .lexing import RESERVED_WORDS, in_list, number_or_none, scan_quoted
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
    Node,
    Not,
    Or,
    Predicate,
    Value,
    chain,
    walk,
)

# ---------------------------------------------------------------------------------------------
# Native parser
# ---------------------------------------------------------------------------------------------

# The tokens: words, numbers (decimal, or 0x / 0o / 0b integers) and the symbols, two-character
# spellings before one-character ones; a run of letters, digits, dots and exponent signs
# that starts like a number but is not one is a malformed number. Scanned by hand: the one
# regular expression they made was compiled in every process that parsed a where (1.6 ms, a
# tenth of the first where-scan's own imports; docs/architecture.md, "Start-up").
_DIGITS = frozenset("0123456789")
_WORD_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_WORD = _WORD_START | _DIGITS
_NUMBER_TAIL = _WORD | {"."}  # what may not follow a number
_PREFIXED_DIGITS = {"x": frozenset("0123456789abcdefABCDEF"), "o": frozenset("01234567"),
                    "b": frozenset("01")}
_SYMBOLS2 = {"==": "op", "!=": "op", ">=": "op", "<=": "op", "<>": "op", "=<": "op", "=>": "op",
             "=!": "op", "--": "comment", "&&": "logic", "||": "logic"}
_SYMBOLS1 = {">": "op", "<": "op", "=": "op", "!": "op", "&": "logic", "|": "logic", "~": "logic",
             "+": "arith", "-": "arith", "*": "arith", "/": "arith", "(": "lparen", ")": "rparen",
             ",": "comma"}
_FUNCTIONS = ("abs", "bit", "bitand", "isnan", "cone", "separation")
_ARITY = {"abs": 1, "isnan": 1, "bit": 2, "bitand": 2, "cone": 5, "separation": 4}
_LOGIC_WORDS = {"&&": "AND", "&": "AND", "||": "OR", "|": "OR", "~": "NOT"}
_SEPARATION_USE = (
    "where separation() must be compared with a radius: separation(ra, dec, ra0, dec0) < r"
)
# the arithmetic operators by precedence, loosest first
_ARITH_LEVELS = (("+", "-"), ("*", "/"))
# the joining keywords, loosest first, and their nodes
_JOINS: tuple[tuple[str, type[And | Or]], ...] = (("OR", Or), ("AND", And))


class _Tok(NamedTuple):
    kind: str  # num str qident ident op logic arith lparen rparen comma
    text: str
    value: Any
    pos: int


def _number_end(text: str, i: int) -> int:
    """The end of the longest number spelled from ``i`` (``0x1F``, ``0o17``, ``0b101``, ``42``,
    ``4.``, ``4.5``, ``.5``, each decimal with an optional ``e[+-]N``), or -1 when none is."""
    n = len(text)
    if text[i] == "0" and i + 1 < n and text[i + 1] in "xXoObB":
        digits = _PREFIXED_DIGITS[text[i + 1].lower()]
        j = i + 2
        while j < n and text[j] in digits:
            j += 1
        return j if j > i + 2 else -1  # "0x" then no digit: "0" before a letter is none either
    j = i
    while j < n and text[j] in _DIGITS:
        j += 1
    whole = j > i
    if j < n and text[j] == ".":
        k = j + 1
        while k < n and text[k] in _DIGITS:
            k += 1
        if not whole and k == j + 1:
            return -1
        j = k
    elif not whole:
        return -1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        m = k
        while m < n and text[m] in _DIGITS:
            m += 1
        if m > k:
            j = m
    return j


def _token_at(text: str, i: int) -> tuple[str, int]:
    """The kind and end of the token at ``i`` (quoted literals aside): ``ws``, ``num``,
    ``badnum``, ``ident``, ``op``, ``comment``, ``logic``, ``arith``, ``lparen``, ``rparen``
    or ``comma``; `WhereSyntaxError` for a character no token starts with."""
    n = len(text)
    ch = text[i]
    if ch.isspace():
        j = i + 1
        while j < n and text[j].isspace():
            j += 1
        return "ws", j
    if ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
        j = _number_end(text, i)
        if j > 0 and (j == n or text[j] not in _NUMBER_TAIL):
            return "num", j
        # a malformed number: the whole run of word characters, dots and exponent signs
        j = i + 1
        while j < n and (text[j] in _NUMBER_TAIL or (text[j] in "+-" and text[j - 1] in "eE")):
            j += 1
        return "badnum", j
    if ch in _WORD_START:
        j = i + 1
        while j < n and text[j] in _WORD:
            j += 1
        return "ident", j
    kind = _SYMBOLS2.get(text[i : i + 2])
    if kind is not None:
        return kind, i + 2
    kind = _SYMBOLS1.get(ch)
    if kind is not None:
        return kind, i + 1
    raise WhereSyntaxError(f"Unexpected character {ch!r} at position {i} in where expression")


def _native_tokens(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            value, end = scan_quoted(text, i)
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
        kind, end = _token_at(text, i)
        word = text[i:end]
        if kind == "badnum":
            raise WhereSyntaxError(
                f"Malformed number {word!r} at position {i} in where expression (numbers are "
                f"spelled 42, -3, 0x2A, 4.5, .5, 1e3, 1e-3)"
            )
        if kind == "comment":
            # SQL would read the rest as a comment, arithmetic as minus minus: refuse both
            raise WhereSyntaxError(
                f"where does not support '--' at position {i}: SQL comments are not part of the "
                f"where dialect (to subtract a negative number write 'x - -1')"
            )
        if kind == "num":
            tokens.append(_Tok(kind, word, number_or_none(word), i))
        elif kind == "logic":
            tokens.append(_Tok(kind, word, _LOGIC_WORDS[word], i))
        elif kind == "ident" and word.upper() in ("AND", "OR", "NOT"):
            tokens.append(_Tok("logic", word, word.upper(), i))
        elif kind != "ws":
            tokens.append(_Tok(kind, word, word, i))
        i = end
    return tokens


class _BareWord(Node, Value):
    """A lone identifier whose role (column or string literal) depends on where it stands."""

    FIELDS = ("name", "pos")
    name: str
    pos: int


class _Separation(Node, Value):
    """``separation(ra, dec, ra0, dec0)``: stands only where a comparison with a radius makes it
    a :class:`Cone`."""

    FIELDS = ("ra", "dec", "ra0", "dec0", "pos")
    ra: Value
    dec: Value
    ra0: float
    dec0: float
    pos: int


class _Parser:
    """Recursive descent with SQL precedence: OR < AND < NOT < comparison < + - < * / < unary."""

    def __init__(self, text: str, columns: frozenset[str] | None,
                 booleans: frozenset[str] | None = None) -> None:
        self.text = text
        self.tokens = _native_tokens(text)
        self.columns = columns
        self.booleans = booleans
        self.i = 0

    # -- helpers ----------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Tok | None:
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

    def error(self, message: str, pos: int | None = None) -> WhereSyntaxError:
        return WhereSyntaxError(f"{message} at position {self.here() if pos is None else pos}")

    def end_error(self) -> WhereSyntaxError:
        return self.error("Unexpected end of where expression")

    def condition(self, node: Expr, pos: int) -> Predicate:
        if isinstance(node, Predicate):
            return node
        if isinstance(node, _Separation):
            raise self.error(_SEPARATION_USE, pos=node.pos)
        if isinstance(node, (_BareWord, Column)):
            # A column alone is a condition on a boolean column (``star``, ``NOT star``): true
            # rows pass, false and null rows do not.
            if self.booleans is not None and node.name.casefold() not in self.booleans:
                raise self.error(
                    f"where uses column '{node.name}' alone as a condition, which needs a boolean "
                    f"column; compare it (e.g. '{node.name} > 0')",
                    pos=pos,
                )
            return Compare("==", Column(node.name), Literal(True))
        raise self.error("where expects a condition, not a value", pos=pos)

    def value(self, node: Expr, pos: int) -> Value:
        if isinstance(node, _Separation):
            raise self.error(_SEPARATION_USE, pos=node.pos)
        if isinstance(node, _BareWord):
            return Column(node.name)
        if isinstance(node, Value):
            return node
        raise self.error("where expects a value, not a condition", pos=pos)

    def literal_side(self, node: Expr, other: Value, pos: int) -> Value:
        """Resolve a value standing where 1.2.3 reads bare words as strings."""
        if isinstance(node, _BareWord):
            if self.columns is not None and (node.name in self.columns or node.name.casefold()
                                             in {c.casefold() for c in self.columns}):
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
        opened: list[int] = []
        for tok in self.tokens:
            if tok.kind == "lparen":
                opened.append(tok.pos)
            elif tok.kind == "rparen":
                if not opened:
                    raise self.error("Unbalanced parentheses in where expression", pos=tok.pos)
                opened.pop()
        if opened:
            raise self.error("Unbalanced parentheses in where expression", pos=opened[-1])

    def parse_or(self, level: int = 0) -> Expr:
        """OR of ANDs (``level`` 1 parses one AND term list); long chains come back balanced."""
        if level == len(_JOINS):
            return self.parse_not()
        word, kind = _JOINS[level]
        pos = self.here()
        node = self.parse_or(level + 1)
        if not self.at_word(word):
            return node
        terms = [self.condition(node, pos)]
        while self.at_word(word):
            self.advance()
            rpos = self.here()
            terms.append(self.condition(self.parse_or(level + 1), rpos))
        return chain(kind, terms)

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
            if tok.text in ("=", "<>", "!", "=<", "=>", "=!"):
                hint = {"=": "'=='", "<>": "'!='", "!": "'!='", "=<": "'<='", "=>": "'>='",
                        "=!": "'!='"}[tok.text]
                raise self.error(f"Unsupported operator {tok.text!r} (use {hint})", pos=tok.pos)
            self.advance()
            rpos = self.here()
            right = self.parse_sum()
            after = self.peek()
            if after is not None and after.kind == "op":
                raise self.error("where does not support chained comparisons", pos=after.pos)
            return self.make_compare(tok.text, left, right, pos, rpos, tok.pos)
        negated = False
        if self.at_word("NOT") and self.at_word("IN", "BETWEEN", "NULL", "LIKE", "ILIKE", ahead=1):
            self.advance()
            negated = True
        if self.at_word("LIKE", "ILIKE"):
            word = self.advance().text.upper()
            pattern = self.peek()
            if pattern is None:
                raise self.end_error()
            if pattern.kind != "str":
                raise self.error(f"where {word} needs a quoted string pattern", pos=pattern.pos)
            self.advance()
            return Like(self.value(left, pos), pattern.value, negated, word == "ILIKE")
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
        if isinstance(right, _Separation) and not isinstance(left, _Separation):
            left, right, lpos, rpos, op = right, left, rpos, lpos, FLIPPED[op]
        if isinstance(left, _Separation):
            return self.separation_compare(op, left, right, rpos, oppos)
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

    def separation_compare(self, op: str, sep: _Separation, radius: Expr, rpos: int,
                           oppos: int) -> Predicate:
        """``separation(...) < r`` and ``<= r`` are cones; ``<`` excludes the boundary exactly."""
        if op not in ("<", "<="):
            raise self.error(
                f"where separation() compares with a radius by < or <= (a cone), not {op!r}; "
                "for the points outside a cone write NOT cone(ra, dec, ra0, dec0, r)",
                pos=oppos,
            )
        r = self.cone_number("separation", "radius", radius, rpos)
        if op == "<":
            if r <= 0:
                raise self.error(f"where separation() < {r!r} selects nothing; the radius must be "
                                 "positive", pos=rpos)
            # sep < r is sep <= the float64 just below r, exactly
            r = float(np.nextafter(r, -np.inf))
        return self.make_cone("separation", sep.ra, sep.dec, sep.ra0, sep.dec0, r, rpos)

    def cone_number(self, name: str, what: str, node: Expr, pos: int) -> float:
        if isinstance(node, Literal) and type(node.value) in (int, float):
            return float(node.value)  # type: ignore[arg-type]
        raise self.error(f"where {name}() needs a number for its {what}", pos=pos)

    def make_cone(self, name: str, ra: Value, dec: Value, ra0: float, dec0: float, r: float,
                  pos: int) -> Cone:
        from .sky import check_cone

        try:
            ra0, dec0, r = check_cone(ra0, dec0, r)
        except ValueError as exc:
            raise self.error(f"where {name}(): {exc}", pos=pos) from None
        return Cone(ra, dec, ra0, dec0, r)

    def parse_in_values(self) -> list[LiteralValue]:
        return in_list(self, self.parse_in_item, ("lparen", "rparen", "comma"), lambda tok: self.error(
            "Unexpected trailing tokens in where expression (expected ',' or ')' in IN list, "
            f"got {tok.text!r})"
        ))

    def parse_in_item(self) -> LiteralValue:
        pos = self.here()
        node = self.parse_unary()
        if isinstance(node, _BareWord):
            return node.name
        if isinstance(node, Literal):
            return node.value
        raise self.error("where IN lists hold literals only", pos=pos)

    def parse_sum(self, level: int = 0) -> Expr:
        """Sums of products (``level`` 1 parses one product), left-associative."""
        if level == len(_ARITH_LEVELS):
            return self.parse_unary()
        pos = self.here()
        node = self.parse_sum(level + 1)
        while self.at_arith(*_ARITH_LEVELS[level]):
            op = self.advance().text
            rpos = self.here()
            right = self.parse_sum(level + 1)
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
            if word.upper() in RESERVED_WORDS:
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
        args: list[tuple[Expr, int]] = []
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
        arity = _ARITY[name]
        if len(args) != arity:
            raise self.error(
                f"where function {name}() takes {arity} argument{'s' if arity > 1 else ''}, "
                f"got {len(args)}",
                pos=name_tok.pos,
            )
        if name in ("cone", "separation"):
            return self.parse_sky_call(name, args, name_tok.pos)
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

    def parse_sky_call(self, name: str, args: list[tuple[Expr, int]], pos: int) -> Expr:
        coords: list[Value] = []
        for (node, apos), what in zip(args[:2], ("RA", "declination")):
            if isinstance(node, _BareWord):
                node = Column(node.name)
            if not isinstance(node, Column):
                raise self.error(f"where {name}() needs a column for its {what}", pos=apos)
            coords.append(node)
        ra0 = self.cone_number(name, "centre RA", *args[2])
        dec0 = self.cone_number(name, "centre declination", *args[3])
        if name == "separation":
            from .sky import check_cone

            try:
                check_cone(ra0, dec0, 0.0)
            except ValueError as exc:
                raise self.error(f"where separation(): {exc}", pos=pos) from None
            return _Separation(coords[0], coords[1], ra0, dec0, pos)
        r = self.cone_number(name, "radius", *args[4])
        return self.make_cone(name, coords[0], coords[1], ra0, dec0, r, pos)


def parse(
    text: str, columns: Iterable[str] | None = None, *, dialect: str = "native",
    booleans: Iterable[str] | None = None,
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
    booleans : iterable of str, optional
        The boolean columns: a column standing alone as a condition (``"star"``,
        ``"NOT star"``) must be one of them (any case). None accepts any name.

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
        from .where_compat import from_compat_ast, parse_where_expression

        return from_compat_ast(parse_where_expression(text))
    if dialect != "native":
        raise ValueError(f"dialect must be 'native' or 'compat', not {dialect!r}")
    if not isinstance(text, str) or not text.strip():
        raise WhereSyntaxError("where must be a non-empty string expression")
    if isinstance(columns, str):
        columns = [columns]  # one name, not its characters
    names = None if columns is None else frozenset(columns)
    flags = None if booleans is None else frozenset(b.casefold() for b in booleans)
    try:
        return _Parser(text, names, flags).parse()
    except RecursionError:
        raise WhereSyntaxError(TOO_DEEP) from None

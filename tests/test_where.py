"""Tests for the where dialects: ``torchfits.where`` (1.2.3 contract) and ``torchfits.query.expr``.

The property tests compare ``to_pyarrow`` with a plain-Python three-valued evaluator written here.
"""
from __future__ import annotations

import math
import operator
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

import torchfits.query.expr as E
from torchfits import where
from torchfits.errors import WhereSyntaxError

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError:  # pragma: no cover - pyarrow is an optional dependency
    pa = pc = None

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a test extra
    st = None

needs_arrow = pytest.mark.skipif(pa is None, reason="pyarrow not installed")
needs_hypothesis = pytest.mark.skipif(st is None or pa is None, reason="hypothesis/pyarrow missing")

P = where.parse_where_expression


# =============================================================================================
# torchfits.where — module surface
# =============================================================================================


def test_module_surface():
    assert set(where.__all__) == {
        "evaluate_where",
        "normalize_where_syntax",
        "parse_where_expression",
        "parse_where_literal",
        "tokenize_where_expression",
        "where_identifier_re",
        "where_columns_from_ast",
    }
    assert where.where_identifier_re.pattern == r"^[A-Za-z_][A-Za-z0-9_]*$"
    assert where.where_identifier_re.match("MAG_G2")
    assert not where.where_identifier_re.match("2MAG")
    assert not where.where_identifier_re.match("my-col")


def test_modules_import_neither_pyarrow_nor_torch():
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "pyarrow"):
                    raise ImportError("blocked " + name)
        sys.meta_path.insert(0, Block())
        import torchfits.where, torchfits.query.expr
        from torchfits.where import parse_where_expression, evaluate_where
        import torchfits.query.expr as E
        ast = parse_where_expression("A > 1")
        assert evaluate_where(ast, {"A": [0, 2]}).tolist() == [False, True]
        assert E.columns(E.parse("A + B > C", columns={"C"})) == ["A", "B", "C"]
        """
    )
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert result.returncode == 0, result.stderr


# =============================================================================================
# Tokenizer, normaliser, literals
# =============================================================================================


def test_tokenize_kinds():
    tokens = where.tokenize_where_expression("(MAG >= -3.5) AND NAME IN ('a', \"b\")")
    assert tokens == [
        ("LPAREN", "("),
        ("WORD", "MAG"),
        ("OP", ">="),
        ("WORD", "-3.5"),
        ("RPAREN", ")"),
        ("WORD", "AND"),
        ("WORD", "NAME"),
        ("WORD", "IN"),
        ("LPAREN", "("),
        ("LITERAL", "a"),
        ("COMMA", ","),
        ("LITERAL", "b"),
        ("RPAREN", ")"),
    ]


@pytest.mark.parametrize("op", ["==", "!=", ">=", "<=", ">", "<"])
def test_tokenize_operators(op):
    assert where.tokenize_where_expression(f"A{op}1") == [("WORD", "A"), ("OP", op), ("WORD", "1")]


def test_tokenize_symbolic_logic_and_quotes():
    tokens = where.tokenize_where_expression("A > 1 && B < 2 || ~ (C == 'AT&T|x~') & D | E")
    words = [text for kind, text in tokens if kind == "WORD"]
    assert words == ["A", "1", "AND", "B", "2", "OR", "NOT", "C", "AND", "D", "OR", "E"]
    assert ("LITERAL", "AT&T|x~") in tokens


@pytest.mark.parametrize(
    "text, literal",
    [
        ("'O''NEIL'", "O'NEIL"),
        (r"'O\'NEIL'", "O'NEIL"),
        (r'"say \"hi\""', 'say "hi"'),
        ("''", ""),
        ("'null'", "null"),
        (r"'C:\path'", r"C:\path"),
    ],
)
def test_tokenize_quoted_literals(text, literal):
    assert where.tokenize_where_expression(f"NAME == {text}")[-1] == ("LITERAL", literal)


def test_tokenize_errors():
    with pytest.raises(WhereSyntaxError, match="Unterminated quoted literal in where expression"):
        where.tokenize_where_expression("NAME == 'abc")
    with pytest.raises(ValueError, match="position 2"):
        where.tokenize_where_expression("A = 1")
    with pytest.raises(ValueError, match="'~'"):
        where.tokenize_where_expression("~A > 1")
    with pytest.raises(ValueError, match="position 4"):
        where.tokenize_where_expression("A > @")


def test_normalize_where_syntax():
    assert where.normalize_where_syntax("A && B") == "A  AND  B"
    assert where.normalize_where_syntax("A || B") == "A  OR  B"
    assert where.normalize_where_syntax("A & B|C") == "A  AND  B OR C"
    assert where.normalize_where_syntax("~ (A > 1)") == " NOT  (A > 1)"
    assert where.normalize_where_syntax("(~(A > 1))") == "( NOT (A > 1))"
    # ~ touching an identifier is not NOT (1.2.3), and quoted text is left alone
    assert where.normalize_where_syntax("~A") == "~A"
    assert where.normalize_where_syntax("N == 'AT&T' && M == \"a||b\"") == (
        "N == 'AT&T'  AND  M == \"a||b\""
    )
    assert where.normalize_where_syntax("N == 'O''NEIL'") == "N == 'O\\'NEIL'"
    assert where.normalize_where_syntax('N == "O\'\'NEIL"') == 'N == "O\'\'NEIL"'


def test_normalized_text_parses_the_same():
    text = "A > 1 && (B == 'x''y' || ~ (C < 2)) & D IS NULL"
    assert P(where.normalize_where_syntax(text)) == P(text)


@pytest.mark.parametrize(
    "raw, value",
    [
        ("'abc'", "abc"),
        ('"abc"', "abc"),
        (r"'it\'s'", "it's"),
        ("'it''s'", "it's"),
        ("true", True),
        ("FALSE", False),
        ("True", True),
        ("none", None),
        ("NULL", None),
        ("42", 42),
        ("-3", -3),
        ("+3", 3),
        ("0x5", 5),
        ("0X1f", 31),
        ("4.5", 4.5),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("-2.5E-1", -0.25),
        ("obj3", "obj3"),
        ("  padded  ", "padded"),
        ("'null'", "null"),
        ("nan", "nan"),
    ],
)
def test_parse_where_literal(raw, value):
    result = where.parse_where_literal(raw)
    assert result == value and type(result) is type(value)


@pytest.mark.parametrize("raw", ["", "   "])
def test_parse_where_literal_empty(raw):
    with pytest.raises(ValueError, match="where literal cannot be empty"):
        where.parse_where_literal(raw)


# =============================================================================================
# parse_where_expression — grammar
# =============================================================================================


@pytest.mark.parametrize(
    "text, ast",
    [
        ("A == 1", ("cmp", "A", "==", 1)),
        ("A != -3", ("cmp", "A", "!=", -3)),
        ("A < +3", ("cmp", "A", "<", 3)),
        ("A <= 0x5", ("cmp", "A", "<=", 5)),
        ("A > 4.5", ("cmp", "A", ">", 4.5)),
        ("A >= .5", ("cmp", "A", ">=", 0.5)),
        ("A>1e3", ("cmp", "A", ">", 1000.0)),
        ("FLAG == True", ("cmp", "FLAG", "==", True)),
        ("FLAG == False", ("cmp", "FLAG", "==", False)),
        ("FLAG == true", ("cmp", "FLAG", "==", "true")),
        ("FLAG == TRUE", ("cmp", "FLAG", "==", "TRUE")),
        ("NAME == obj3", ("cmp", "NAME", "==", "obj3")),
        ("NAME == 'obj3'", ("cmp", "NAME", "==", "obj3")),
        ("NAME == 'null'", ("cmp", "NAME", "==", "null")),
        ("NAME == 'AT&T'", ("cmp", "NAME", "==", "AT&T")),
        ("NAME == 'O''NEIL'", ("cmp", "NAME", "==", "O'NEIL")),
        ("ID > MAG", ("cmp", "ID", ">", "MAG")),
        ("A == NULL", ("cmp", "A", "==", None)),
        ("A != none", ("cmp", "A", "!=", None)),
        ("A IN (1, 2, 3)", ("in", "A", [1, 2, 3], False)),
        ("A IN 5", ("in", "A", [5], False)),
        ("A IN ()", ("in", "A", [], False)),
        ("A NOT IN ('x', NULL)", ("in", "A", ["x", None], True)),
        ("A in (1)", ("in", "A", [1], False)),
        ("A BETWEEN 1 AND 3", ("between", "A", 1, 3, False)),
        ("A not between -1 and 2.5", ("between", "A", -1, 2.5, True)),
        ("A IS NULL", ("isnull", "A", False)),
        ("A is not null", ("isnull", "A", True)),
        ("A NOT NULL", ("isnull", "A", True)),
        ("NOT A > 1", ("not", ("cmp", "A", ">", 1))),
        ("NOT NOT A > 1", ("not", ("not", ("cmp", "A", ">", 1)))),
        ("~ (A > 1)", ("not", ("cmp", "A", ">", 1))),
        ("not A > 1", ("not", ("cmp", "A", ">", 1))),
        ("((A > 1))", ("cmp", "A", ">", 1)),
        ("mag > 1", ("cmp", "mag", ">", 1)),
    ],
)
def test_parse_forms(text, ast):
    assert P(text) == ast


def test_parse_precedence_and_folding():
    a, b, c, d = (("cmp", n, ">", 1) for n in "ABCD")
    assert P("A > 1 AND B > 1 AND C > 1") == ("and", ("and", a, b), c)
    assert P("A > 1 OR B > 1 OR C > 1") == ("or", ("or", a, b), c)
    assert P("A > 1 OR B > 1 AND C > 1") == ("or", a, ("and", b, c))
    assert P("NOT A > 1 AND B > 1") == ("and", ("not", a), b)
    assert P("(A > 1 OR B > 1) AND C > 1") == ("and", ("or", a, b), c)
    assert P("A > 1 && B > 1 || C > 1 & D > 1") == ("or", ("and", a, b), ("and", c, d))
    assert P("A > 1 and B > 1 or C > 1") == ("or", ("and", a, b), c)
    assert P("A > 1 | B > 1") == ("or", a, b)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "where must be a non-empty string expression"),
        ("   ", "where must be a non-empty string expression"),
        ("(A > 1", "Unbalanced parentheses in where expression"),
        ("A > 1)", "Unbalanced parentheses in where expression"),
        ("((A > 1) AND (B < 2)", "Unbalanced parentheses in where expression"),
        ("ID >", "Unexpected (end of|trailing tokens in) where expression"),
        ("A > 5 B < 3", "Unexpected trailing tokens in where expression"),
        ("ID == 1 AND NOT", "Unexpected (end of|trailing tokens in) where expression"),
        ("ID BETWEEN 1 3", "Unexpected trailing tokens in where expression"),
        ("5 > A", "where expects a column identifier before comparison operator"),
        ("1 < A < 5", "where expects a column identifier before comparison operator"),
        ("'A' > 1", "where expects a column identifier before comparison operator"),
        ("FLAG", "where expects a comparison operator or IN/BETWEEN/IS NULL variants after"),
        ("A + 1 > 5", "where expects a comparison operator or IN/BETWEEN/IS NULL variants"),
        ("abs(A) > 1", "where expects a comparison operator or IN/BETWEEN/IS NULL variants"),
        ("A IS 5", "where expects a comparison operator or IN/BETWEEN/IS NULL variants"),
        ("A = 5", "Unsupported operator '='"),
        ("A <> 5", "Unsupported operator '<>'"),
        ("A == 1 == 2", "Unexpected trailing tokens in where expression"),
        ("A > NULL", "only support == and !="),
        ("A BETWEEN NULL AND 3", "only support == and !="),
        ("NAME == 'abc", "Unterminated quoted literal in where expression"),
        ("A IN (1 2)", "Unexpected trailing tokens in where expression"),
        ("A IN (1,", "Unbalanced parentheses in where expression"),
        ("A IN (1, )", "Unexpected trailing tokens in where expression"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(ValueError, match=message) as info:
        P(text)
    assert isinstance(info.value, WhereSyntaxError)


def test_parse_errors_carry_positions():
    with pytest.raises(WhereSyntaxError, match="at position 6"):
        P("A > 5 B < 3")
    with pytest.raises(WhereSyntaxError, match="position 0"):
        P("(A > 1")
    with pytest.raises(WhereSyntaxError, match="position 5"):
        P("A > 1)")


def test_parse_rejects_non_strings():
    with pytest.raises(ValueError, match="non-empty string"):
        P(None)  # type: ignore[arg-type]


def test_parse_does_not_validate_columns():
    assert P("NO_SUCH_COLUMN > 1") == ("cmp", "NO_SUCH_COLUMN", ">", 1)


def test_where_columns_from_ast():
    ast = P("B > 1 AND (A IN (1) OR B IS NULL) AND NOT C BETWEEN 1 AND 2 OR A == 3")
    assert where.where_columns_from_ast(ast) == ["B", "A", "C"]


@pytest.mark.parametrize(
    "ast",
    [
        ("cmp", "A", ">"),
        ("xor", ("cmp", "A", ">", 1), ("cmp", "A", ">", 1)),
        ("and", ("cmp", "A", ">", 1), "oops"),
        ("cmp", 3, ">", 1),
        ("cmp", "A", "=", 1),
        "A > 1",
        (),
    ],
)
def test_where_columns_from_ast_invalid(ast):
    with pytest.raises(ValueError, match="Invalid where AST"):
        where.where_columns_from_ast(ast)


# =============================================================================================
# evaluate_where
# =============================================================================================


def _rows(text: str, data: Dict[str, Any]) -> List[int]:
    return np.flatnonzero(where.evaluate_where(P(text), data)).tolist()


NUL_DATA = {"NUL": np.array([np.nan, 1, 2, np.nan, 4])}


@pytest.mark.parametrize(
    "text, rows",
    [
        ("NUL != 4", [1, 2]),
        ("NOT NUL > 3", [1, 2]),
        ("NUL > 1", [2, 4]),
        ("NUL IN (1, 4)", [1, 4]),
        ("NUL NOT IN (1, 4)", [2]),
        ("NUL BETWEEN 1 AND 2", [1, 2]),
        ("NUL NOT BETWEEN 1 AND 2", [4]),
        ("NUL IS NULL", [0, 3]),  # NaN counts as null in evaluate_where
        ("NUL IS NOT NULL", [1, 2, 4]),
        ("NOT NOT NUL == 2", [2]),
        ("NUL IN ()", []),
        ("NUL NOT IN ()", [1, 2, 4]),
    ],
)
def test_evaluate_null_semantics(text, rows):
    assert _rows(text, NUL_DATA) == rows


def test_evaluate_object_arrays_with_none():
    data = {"S": ["a", None, "b  ", "a"], "X": [1, None, 3, None]}
    assert _rows("S == 'b'", data) == [2]
    assert _rows("S != 'a'", data) == [2]
    assert _rows("S IS NULL", data) == [1]
    assert _rows("S == NULL", data) == [1]
    assert _rows("S != NULL", data) == [0, 2, 3]
    assert _rows("NOT S == 'a'", data) == [2]
    assert _rows("X > 1", data) == [2]
    assert _rows("X IS NULL", data) == [1, 3]


def test_evaluate_numeric_details():
    data = {
        "I": np.array([-32768, 0, 100, 32767], dtype=np.int16),
        "U": np.array([0, 65535, 7, 3], dtype=np.uint16),
        "F": np.array([0.1, 0.5, np.inf, -1.0], dtype=np.float32),
    }
    assert _rows("I > 40000", data) == []
    assert _rows("I != 40000", data) == [0, 1, 2, 3]
    assert _rows("I >= -32768", data) == [0, 1, 2, 3]
    assert _rows("I > 99.5", data) == [2, 3]
    assert _rows("I == 100.0", data) == [2]
    assert _rows("I IN (100, 2.5, 40000)", data) == [2]
    assert _rows("U > 65534", data) == [1]
    assert _rows("U > -1", data) == [0, 1, 2, 3]
    assert _rows("F == 0.1", data) == [0]  # the literal is rounded to float32, as NumPy does
    assert _rows("F > 1e39", data) == [2]
    assert _rows("F < -1e39", data) == []
    assert _rows("I > '50'", data) == [2, 3]


def test_evaluate_bool_and_string_columns():
    data = {"B": np.array([True, False, True]), "N": np.array(["x", "y  ", "z"])}
    for literal in ("True", "1", "true", "'TRUE'"):
        assert _rows(f"B == {literal}", data) == [0, 2]
    for literal in ("False", "0", "false"):
        assert _rows(f"B == {literal}", data) == [1]
    assert _rows("N == 'y'", data) == [1]
    assert _rows("N > x", data) == [1, 2]
    bytes_data = {"N": np.array([b"x", b"y "])}
    assert _rows("N == 'y'", bytes_data) == [1]


def test_evaluate_lists_masked_and_tensors(torch):
    assert _rows("A > 1", {"A": [0, 2, 3]}) == [1, 2]
    masked = np.ma.masked_array([1, 2, 3], mask=[False, True, False])
    assert _rows("A >= 2", {"A": masked}) == [2]
    assert _rows("A IS NULL", {"A": masked}) == [1]
    tensor = torch.tensor([1.0, float("nan"), 3.0])
    assert _rows("T != 1", {"T": tensor}) == [2]
    assert _rows("T IS NULL", {"T": tensor}) == [1]
    assert _rows("T > 1", {"T": torch.tensor([1.0, 2.0], dtype=torch.bfloat16)}) == [1]
    assert _rows("T == 2", {"T": torch.tensor([2, 3], dtype=torch.int64)}) == [0]


def test_evaluate_returns_bool_array():
    out = where.evaluate_where(P("A > 1"), {"A": np.arange(4)})
    assert out.dtype == bool and out.shape == (4,)


@pytest.mark.parametrize(
    "text, data, message",
    [
        ("Z > 1", {"A": [1]}, "Unknown column: Z"),
        ("A == NULL", {"A": np.array([1.0])}, "not supported on numeric"),
        ("A != NULL", {"A": np.array([1])}, "not supported on numeric"),
        ("A == NULL", {"A": np.array([True])}, "not supported on numeric"),
        ("A > MAG", {"A": np.array([1, 2])}, "cannot compare column values with literal"),
        ("S > 5", {"S": np.array(["a"])}, "cannot compare column values with literal"),
        ("B == 2", {"B": np.array([True])}, "cannot compare column values with literal"),
        ("A IN (1, x)", {"A": np.array([1])}, "cannot compare column values with literal"),
        ("A > 1 AND B > 1", {"A": [1, 2], "B": [1]}, "length"),
        ("A > 1", {"A": np.zeros((2, 3))}, "vector column 'A'"),
    ],
)
def test_evaluate_errors(text, data, message):
    with pytest.raises(ValueError, match=message):
        where.evaluate_where(P(text), data)


def test_evaluate_invalid_ast():
    with pytest.raises(ValueError, match="Invalid where AST"):
        where.evaluate_where(("cmp", "A"), {"A": [1]})


# =============================================================================================
# Native parser
# =============================================================================================

A, B, C, F = E.Column("A"), E.Column("B"), E.Column("C"), E.Column("FLAGS")


def L(value: Any) -> E.Literal:
    return E.Literal(value)


@pytest.mark.parametrize(
    "text, tree",
    [
        ("A > 1", E.Compare(">", A, L(1))),
        ("5 > A", E.Compare(">", L(5), A)),
        ("A + B * 2 > 3", E.Compare(">", E.Arith("+", A, E.Arith("*", B, L(2))), L(3))),
        ("(A + B) * 2 > 3", E.Compare(">", E.Arith("*", E.Arith("+", A, B), L(2)), L(3))),
        ("A - B - C > 0", E.Compare(">", E.Arith("-", E.Arith("-", A, B), C), L(0))),
        ("A / B / 2 > 0", E.Compare(">", E.Arith("/", E.Arith("/", A, B), L(2)), L(0))),
        ("-A > -3", E.Compare(">", E.Neg(A), L(-3))),
        ("- -A > 0", E.Compare(">", E.Neg(E.Neg(A)), L(0))),
        ("-(3) < A", E.Compare("<", E.Neg(L(3)), A)),
        ("abs(A - B) <= 0.5", E.Compare("<=", E.Abs(E.Arith("-", A, B)), L(0.5))),
        ("ABS(A) > 1", E.Compare(">", E.Abs(A), L(1))),
        ("A*2 IN (1, -2, x)", E.InList(E.Arith("*", A, L(2)), (1, -2, "x"))),
        ("A BETWEEN B AND C + 1", E.Between(A, L("B"), E.Arith("+", C, L(1)))),
        ("A + 1 IS NOT NULL", E.IsNull(E.Arith("+", A, L(1)), negated=True)),
        ("A NOT NULL", E.IsNull(A, negated=True)),
        ("A == NULL", E.IsNull(A)),
        ("NULL != A", E.IsNull(A, negated=True)),
        ("isnan(A) OR NOT A > 1", E.Or(E.IsNan(A), E.Not(E.Compare(">", A, L(1))))),
        ("`my col` != 2", E.Compare("!=", E.Column("my col"), L(2))),
        ("A == `B`", E.Compare("==", A, B)),
        ("NAME == obj3", E.Compare("==", E.Column("NAME"), L("obj3"))),
        ("A > 1 && B < 2 || ~ C == 1", E.Or(
            E.And(E.Compare(">", A, L(1)), E.Compare("<", B, L(2))),
            E.Not(E.Compare("==", C, L(1))),
        )),
        ("A == True", E.Compare("==", A, L(True))),
        ("A == true", E.Compare("==", A, L("true"))),
        ("A >= 0x10", E.Compare(">=", A, L(16))),
        ("A < 1e999", E.Compare("<", A, L(math.inf))),
    ],
)
def test_native_parse(text, tree):
    assert E.parse(text) == tree


@pytest.mark.parametrize(
    "text, tree",
    [
        ("bit(FLAGS, 3)", E.Compare("!=", E.BitAnd(F, 8), L(0))),
        ("bit(FLAGS, 0)", E.Compare("!=", E.BitAnd(F, 1), L(0))),
        ("BIT(FLAGS, 63)", E.Compare("!=", E.BitAnd(F, 1 << 63), L(0))),
        ("bitand(FLAGS, 0x0C) != 0", E.Compare("!=", E.BitAnd(F, 12), L(0))),
        ("bitand(FLAGS, 12) == 12", E.Compare("==", E.BitAnd(F, 12), L(12))),
        ("NOT bit(FLAGS, 1)", E.Not(E.Compare("!=", E.BitAnd(F, 2), L(0)))),
        ("bitand(FLAGS + 1, 4) > 0", E.Compare(">", E.BitAnd(E.Arith("+", F, L(1)), 4), L(0))),
    ],
)
def test_native_bit_tests(text, tree):
    assert E.parse(text) == tree


def test_native_bare_words_and_known_columns():
    # 1.2.3 reads a lone word on the right as a string ...
    assert E.parse("ID > MAG") == E.Compare(">", E.Column("ID"), L("MAG"))
    # ... unless the caller names it as a column,
    assert E.parse("ID > MAG", columns={"ID", "MAG"}) == E.Compare(
        ">", E.Column("ID"), E.Column("MAG")
    )
    assert E.parse("NAME == obj3", columns=["NAME"]) == E.Compare("==", E.Column("NAME"), L("obj3"))
    # ... or the other side holds no column.
    assert E.parse("5 > A") == E.Compare(">", L(5), A)
    # words inside arithmetic are always columns
    assert E.parse("A > B + 1") == E.Compare(">", A, E.Arith("+", B, L(1)))
    # BETWEEN bounds follow the right-hand rule; IN lists hold literals only
    between = E.parse("A BETWEEN lo AND hi", columns={"A", "lo"})
    assert between == E.Between(A, E.Column("lo"), L("hi"))
    assert E.parse("A IN (B)", columns={"A", "B"}) == E.InList(A, ("B",))


@pytest.mark.parametrize(
    "text, message, position",
    [
        ("", "where must be a non-empty string expression", None),
        ("A", "where expects a comparison operator or IN/BETWEEN/IS NULL variants", 1),
        ("A AND B > 1", "where expects a comparison operator or IN/BETWEEN/IS NULL variants", 1),
        ("A + 1", "where expects a condition", 0),
        ("A >", "Unexpected end of where expression", 3),
        ("A > 1 B", "Unexpected trailing tokens in where expression", 6),
        ("A BETWEEN 1 3", "Unexpected trailing tokens in where expression", 12),
        ("(A > 1", "Unbalanced parentheses in where expression", 0),
        ("A > 1)", "Unbalanced parentheses in where expression", 5),
        ("A = 1", "Unsupported operator '='", 2),
        ("A <> 1", "Unsupported operator '<>'", 2),
        ("1 < A < 3", "chained comparisons", 6),
        ("A > NULL", "only support == and !=", 2),
        ("A BETWEEN NULL AND 1", "only support == and !=", 10),
        ("foo(A) > 1", "function 'foo'", 0),
        ("abs(A, B) > 1", "takes 1 argument", 0),
        ("bit(FLAGS, -1)", "non-negative integer bit number", 11),
        ("bit(FLAGS, 64)", "bits 0 to 63", 11),
        ("bitand(FLAGS, B) > 0", "non-negative integer mask", 14),
        ("(A > 1) + 1 > 2", "where expects a value, not a condition", 0),
        ("A IS 5", "NULL or NOT NULL after IS", 5),
        ("A IN (-B)", "IN lists hold literals only", 6),
        ("A > 'x", "Unterminated quoted literal", None),
        ("A > $", "Unexpected character '\\$'", 4),
        ("NOT", "Unexpected end of where expression", 3),
        ("A > AND", "where expects a value", 4),
    ],
)
def test_native_parse_errors(text, message, position):
    with pytest.raises(WhereSyntaxError, match=message) as info:
        E.parse(text)
    if position is not None:
        assert f"at position {position}" in str(info.value)


def test_hostile_strings_fail_as_value_errors():
    deep = "(" * 5000 + "A > 1" + ")" * 5000
    with pytest.raises(WhereSyntaxError, match="nests too deeply"):
        P(deep)
    with pytest.raises(WhereSyntaxError, match="nests too deeply"):
        E.parse(deep)
    with pytest.raises(WhereSyntaxError, match="nests too deeply"):
        E.parse("NOT " * 5000 + "A > 1")
    chain = P(" AND ".join(["A > 1"] * 3000))  # folding is iterative; evaluation recurses
    with pytest.raises(ValueError, match="nests too deeply"):
        where.evaluate_where(chain, {"A": [1, 2]})
    with pytest.raises(ValueError, match="nests too deeply"):
        E.from_compat_ast(chain)
    assert E.parse("A > " + "9" * 5000).right == L(math.inf)


def test_native_parse_columns_as_a_single_string():
    assert E.parse("ID > MAG", columns="MAG") == E.Compare(">", E.Column("ID"), E.Column("MAG"))


def test_native_parse_dialect_switch():
    assert E.parse("A > 1 AND B IN (1, 2)", dialect="compat") == E.And(
        E.Compare(">", A, L(1)), E.InList(B, (1, 2))
    )
    with pytest.raises(WhereSyntaxError, match="column identifier"):
        E.parse("5 > A", dialect="compat")
    with pytest.raises(ValueError, match="dialect"):
        E.parse("A > 1", dialect="sql")


COMPAT_TEXTS = [
    "A == 1",
    "NAME == obj3",
    "A IN (1, 'x', NULL)",
    "A NOT IN ()",
    "A NOT BETWEEN 1 AND 2.5",
    "A IS NULL OR B IS NOT NULL AND NOT C != -2",
    "NOT NOT (A > 1 || B < 2) && C NOT NULL",
    "FLAG == true",
    "N == 'O''NEIL'",
    "A IN 5",
]


@pytest.mark.parametrize("text", COMPAT_TEXTS)
def test_native_parser_accepts_the_compat_dialect(text):
    assert E.parse(text) == E.from_compat_ast(P(text))


def test_from_compat_ast_nodes():
    assert E.from_compat_ast(("cmp", "A", "==", None)) == E.IsNull(A)
    assert E.from_compat_ast(("cmp", "A", "!=", None)) == E.IsNull(A, negated=True)
    assert E.from_compat_ast(("between", "A", 1, 2, True)) == E.Between(A, L(1), L(2), True)
    assert E.from_compat_ast(("in", "A", [1, None], True)) == E.InList(A, (1, None), True)
    with pytest.raises(ValueError, match="only support == and !="):
        E.from_compat_ast(("cmp", "A", ">", None))
    with pytest.raises(ValueError, match="Invalid where AST"):
        E.from_compat_ast(("nope", "A"))


def test_columns_and_walk():
    tree = E.parse("C > A + B AND bit(B, 1) OR isnan(D) AND A IN (1)", columns={"A"})
    assert E.columns(tree) == ["C", "A", "B", "D"]
    kinds = [type(node).__name__ for node in E.walk(E.parse("NOT A > 1"))]
    assert kinds == ["Not", "Compare", "Column", "Literal"]


def test_literal_equality_is_typed():
    assert L(1) != L(True)
    assert L(1) != L(1.0)
    assert L("1") != L(1)
    assert L(2) == L(2) and hash(L(2)) == hash(L(2))


@pytest.mark.parametrize(
    "text",
    [
        "A > 1",
        "5 > A",
        "A == `B`",
        "`odd name` <= -2.5",
        "`AND` == 1",
        "A IN (1, -2, 'x''y', NULL, True, 2.5)",
        "A NOT BETWEEN -1 AND (B * 2)",
        "abs((A + 1) / -B) >= 1e-05",
        "bit(F, 5) AND bitand(F, 3) == 3",
        "NOT (isnan(A) OR A IS NULL) AND S == 'back\\\\slash'",
        "-(3) < A",
        "A < 1e999 AND A > -1e999",
    ],
)
def test_to_string_round_trip(text):
    tree = E.parse(text)
    assert E.parse(E.to_string(tree)) == tree
    assert str(tree) == E.to_string(tree)


def test_node_validation():
    with pytest.raises(ValueError):
        E.Compare("=", A, L(1))
    with pytest.raises(ValueError):
        E.Arith("%", A, L(1))
    assert E.InList(A, [1, 2]).values == (1, 2)  # lists are frozen into tuples


def test_integer_compare_plan():
    plan = E.integer_compare_plan
    assert plan(">", 40000, -32768, 32767) == ("const", False)
    assert plan("!=", 40000, -32768, 32767) == ("const", True)
    assert plan("<", 40000, -32768, 32767) == ("const", True)
    assert plan(">", -40000, -32768, 32767) == ("const", True)
    assert plan("==", 2.5, 0, 10) == ("const", False)
    assert plan(">", 2.5, 0, 10) == ("cmp", ">=", 3)
    assert plan("<=", 2.5, 0, 10) == ("cmp", "<=", 2)
    assert plan("<", -2.5, -10, 10) == ("cmp", "<=", -3)
    assert plan(">=", 3.0, 0, 10) == ("cmp", ">=", 3)
    assert plan("<", math.inf, 0, 10) == ("const", True)
    assert plan("==", math.nan, 0, 10) == ("const", None)
    assert plan("==", True, 0, 10) == ("cmp", "==", 1)


def test_float_compare_plan():
    plan = E.float_compare_plan
    assert plan("==", 0.1, 32) == ("cmp", "==", float(np.float32(0.1)))
    assert plan("==", 0.1, 64) == ("cmp", "==", 0.1)
    assert plan(">", 1e39, 32) == ("cmp", ">=", math.inf)
    assert plan("<=", 1e39, 32) == ("cmp", "<", math.inf)
    assert plan("<", -1e39, 32) == ("cmp", "<=", -math.inf)
    assert plan("==", 1e39, 32) == ("const", False)
    assert plan("!=", 10**400, 64) == ("const", True)
    assert plan(">", math.inf, 32) == ("cmp", ">", math.inf)
    assert plan("<", math.nan, 64) == ("const", None)


# =============================================================================================
# validate / to_pyarrow on real tables
# =============================================================================================


def _table() -> "pa.Table":
    return pa.table(
        {
            "NUL": pa.array([None, 1, 2, None, 4], pa.int32()),
            "FN": pa.array([1.0, float("nan"), None, 3.0, 0.1], pa.float32()),
            "D": pa.array([1.0, float("nan"), None, 3.0, 1e300], pa.float64()),
            "S": pa.array([-32768, 0, 100, 32767, None], pa.int16()),
            "U16": pa.array([0, 65535, 7, None, 40000], pa.uint16()),
            "U": pa.array([0, 2**64 - 1, 5, None, 2**63], pa.uint64()),
            "I": pa.array([-5, 3, -(2**63), 2**63 - 1, None], pa.int64()),
            "NAME": pa.array(["a", "obj3", None, "O'NEIL", "AT&T"]),
            "B": pa.array([True, False, None, True, False]),
            "RAW": pa.array([b"ab", b"cd", None, b"ab", b"ef"], pa.binary(2)),
            "V": pa.array([[1], [2], [], None, [3]]),
            "FX": pa.array([[1, 2]] * 5, pa.list_(pa.int16(), 2)),
        }
    )


def _arrow_rows(text: str, table: "Optional[pa.Table]" = None) -> List[int]:
    table = _table() if table is None else table
    tree = E.parse(text, columns=table.column_names)
    expression = E.to_pyarrow(tree, table.schema)
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(expression)["__row"].to_pylist()


@needs_arrow
@pytest.mark.parametrize(
    "text, rows",
    [
        # docs/where.md examples and null semantics
        ("NUL != 4", [1, 2]),
        ("NOT NUL > 3", [1, 2]),
        ("NUL IN (1, 4)", [1, 4]),
        ("NUL NOT IN (1, 4)", [2]),
        ("NUL IN ()", []),
        ("NUL NOT IN ()", [1, 2, 4]),
        ("NUL IN (1, NULL)", [1]),
        ("NUL NOT IN (1, NULL)", []),
        ("NUL BETWEEN 1 AND 2", [1, 2]),
        ("NUL NOT BETWEEN 1 AND 2", [4]),
        ("NOT NOT NUL == 2", [2]),
        ("NUL == NULL", [0, 3]),
        ("NUL != NULL", [1, 2, 4]),
        ("NUL IS NULL", [0, 3]),
        ("NUL NOT NULL", [1, 2, 4]),
        ("NUL > 1 OR FN > 2", [2, 3, 4]),
        ("NOT (NUL > 1 AND FN > 2)", [0, 1, 4]),
        # NaN: never satisfies a comparison, and is not NULL
        ("FN != 3", [0, 4]),
        ("NOT FN > 2", [0, 4]),
        ("FN IS NULL", [2]),
        ("FN IS NOT NULL", [0, 1, 3, 4]),
        ("isnan(FN)", [1]),
        ("NOT isnan(FN)", [0, 3, 4]),
        ("FN BETWEEN 1 AND 3", [0, 3]),
        ("FN NOT BETWEEN 1 AND 3", [4]),
        ("FN IN (3, 0.1)", [3, 4]),
        ("FN NOT IN (3)", [0, 4]),
        ("FN == 0.1", [4]),
        ("D != 3", [0, 4]),
        ("D > 1e39", [4]),
        ("FN < 1e39", [0, 3, 4]),
        ("FN > 1e39", []),
        # integers wider than the column compare exactly
        ("S > 40000", []),
        ("S != 40000", [0, 1, 2, 3]),
        ("S < 40000", [0, 1, 2, 3]),
        ("S >= -32768", [0, 1, 2, 3]),
        ("S <= -40000", []),
        ("S > 99.5", [2, 3]),
        ("S == 100.0", [2]),
        ("S != 100.5", [0, 1, 2, 3]),
        ("S IN (100, 40000, 2.5)", [2]),
        ("U16 > 32767", [1, 4]),
        ("U > 9223372036854775807", [1, 4]),
        ("U == 18446744073709551615", [1]),
        ("U > -1", [0, 1, 2, 4]),
        ("U < 18446744073709551616", [0, 1, 2, 4]),
        ("I > 9223372036854775807", []),
        ("I < -9223372036854775809", []),
        ("I <= -9223372036854775808", [2]),
        # column against column, including uint64 against int64
        ("U > I", [0, 1, 2]),
        ("I < U", [0, 1, 2]),
        ("U == I", []),
        ("U != I", [0, 1, 2]),
        ("S >= U16", [2]),
        ("FN > NUL", []),
        ("D >= NUL", [4]),
        ("5 > NUL", [1, 2, 4]),
        ("NUL < 5", [1, 2, 4]),
        # strings (right-stripped literal), quotes, bare words
        ("NAME == 'O''NEIL'", [3]),
        ("NAME == 'AT&T'", [4]),
        ("NAME == obj3", [1]),
        ("NAME == 'a   '", [0]),
        ("NAME != 'a'", [1, 3, 4]),
        ("NAME > 'a'", [1]),
        ("NAME IN ('a', 'AT&T ')", [0, 4]),
        ("NOT NAME IN ('a')", [1, 3, 4]),
        ("RAW == 'ab'", [0, 3]),
        ("RAW IN ('cd', 'zz')", [1]),
        # bools
        ("B == True", [0, 3]),
        ("B == 1", [0, 3]),
        ("B == 'true'", [0, 3]),
        ("B == true", [0, 3]),
        ("B != False", [0, 3]),
        ("B == 0", [1, 4]),
        ("NOT B == True", [1, 4]),
        ("B IN (False)", [1, 4]),
        # arithmetic, abs, bit tests
        ("bit(S, 2)", [2, 3]),
        ("bitand(S, 0x8000) != 0", [0]),
        ("bitand(S, 6) == 6", [3]),
        ("bit(U, 63)", [1, 4]),
        ("bitand(I, 3) == 3", [0, 1, 3]),
        ("abs(S) > 100", [0, 3]),
        ("-S > 0", [0]),
        ("S / 0 > 1", [2, 3]),
        ("NUL * 2 == 4", [2]),
        ("NUL + FN > 4", [4]),
        ("S - 1 < -32768", [0]),
        ("U16 / 2 == 3.5", [2]),
        ("abs(FN - 1) < 0.5", [0]),
        ("(NUL + 1) IS NULL", [0, 3]),
    ],
)
def test_to_pyarrow_rows(text, rows):
    assert _arrow_rows(text) == rows


@needs_arrow
def test_to_pyarrow_compat_dialect_and_dataset():
    ds = pytest.importorskip("pyarrow.dataset")
    table = _table()
    tree = E.from_compat_ast(P("NOT NUL > 3 AND NAME != 'zzz'"))
    expression = E.to_pyarrow(tree, table.schema)
    got = ds.dataset(table).to_table(filter=expression, columns=["NUL"])
    assert got["NUL"].to_pylist() == [1]  # row 2 has a null NAME
    assert ds.dataset(table).count_rows(filter=expression) == 1


@needs_arrow
def test_to_pyarrow_accepts_a_mapping_of_types():
    expression = E.to_pyarrow(E.parse("A > 1"), {"A": pa.int8()})
    assert pa.table({"A": pa.array([1, 2], pa.int8())}).filter(expression).num_rows == 1


@needs_arrow
def test_to_pyarrow_integer_overflow_raises():
    table = _table()
    expression = E.to_pyarrow(E.parse("I + 1 > 0"), table.schema)
    with pytest.raises(pa.ArrowInvalid, match="overflow"):
        table.filter(expression)


@needs_arrow
@pytest.mark.parametrize(
    "text, message",
    [
        ("Z > 1", "where references unknown column 'Z'"),
        ("V > 1", "where does not support list/VLA column 'V'"),
        ("FX == 1", "where does not support list/VLA column 'FX'"),
        ("V IS NULL", "where does not support list/VLA column 'V'"),
        ("NUL > 'MAG'", r"where cannot compare column 'NUL' \(int32\) with 'MAG'"),
        ("NUL > MAG", r"where cannot compare column 'NUL' \(int32\) with 'MAG'"),
        ("FN == abc", r"where cannot compare column 'FN' \(float32\) with 'abc'"),
        ("NAME > 5", r"where cannot compare column 'NAME' \(string\) with 5"),
        ("B == 2", r"where cannot compare column 'B' \(bool\) with 2"),
        ("NAME == S", r"where cannot compare column 'NAME' \(string\) with column 'S'"),
        ("NAME + 1 > 2", "needs numeric operands"),
        ("5 > 3", "references no column"),
        ("bitand(FN, 1) > 0", "needs an integer operand"),
        ("bitand(I, 0x8000000000000000) > 0", "does not fit int64"),
        ("NAME < B", "where cannot compare column 'NAME'"),
    ],
)
def test_validate_errors(text, message):
    table = _table()
    tree = E.parse(text, columns=table.column_names)
    with pytest.raises(ValueError, match=message):
        E.validate(tree, table.schema)


@needs_arrow
def test_validate_messages_are_exact():
    with pytest.raises(ValueError) as info:
        E.validate(E.parse("X > 1"), {"A": pa.int32()})
    assert str(info.value) == "where references unknown column 'X'"
    with pytest.raises(ValueError) as info:
        E.validate(E.parse("V == 1"), {"V": pa.large_list(pa.float32())})
    assert str(info.value) == "where does not support list/VLA column 'V'"
    with pytest.raises(ValueError, match=r"^where cannot compare column 'ID' \(int32\) with 'MAG'"):
        E.validate(E.parse("ID > MAG"), {"ID": pa.int32()})
    E.validate(E.parse("ID > '5'"), {"ID": pa.int32()})  # numeric strings are numbers


@needs_arrow
def test_validate_rejects_values_as_conditions():
    with pytest.raises(ValueError, match="where expects"):
        E.validate(E.Column("A"), {"A": pa.bool_()})
    with pytest.raises(ValueError, match="where expects a condition"):
        E.validate(E.Arith("+", E.Column("A"), L(1)), {"A": pa.int8()})


@needs_arrow
def test_to_pyarrow_agrees_with_evaluate_where_without_nan():
    data = {
        "I": np.array([3, -1, 0, 7, 40000, 2], dtype=np.int32),
        "S": np.array(["x", "y", "", "x", "zz", "y"]),
        "B": np.array([True, False, True, True, False, False]),
    }
    table = pa.table({k: pa.array(v) for k, v in data.items()})
    for text in [
        "I > 2 AND NOT S == 'x'",
        "I IN (0, 7, 40000) OR B == False",
        "NOT (I BETWEEN 0 AND 3) AND S != y",
        "S IN () OR I NOT IN (3)",
        "B == true AND I < 100000",
    ]:
        expected = np.flatnonzero(where.evaluate_where(P(text), data)).tolist()
        assert _arrow_rows(text, table) == expected, text


# =============================================================================================
# from_pyarrow
# =============================================================================================


def _pa_rows(table: "pa.Table", expression: Any) -> List[int]:
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(expression)["__row"].to_pylist()


def _from_table() -> "pa.Table":
    return pa.table(
        {
            "a": pa.array([1, None, 3, -2, 7, 0], pa.int16()),
            "x": pa.array([1.0, float("nan"), None, 2.5, -1.0, 0.5], pa.float64()),
            "f": pa.array([0.5, 1.5, float("nan"), None, 2.0, -1.0], pa.float32()),
            "s": pa.array(["a", None, "b", "a", "c", ""]),
            "b": pa.array([True, None, False, True, False, True]),
        }
    )


def _null_bool():
    return pc.scalar(pa.scalar(None, pa.bool_()))


FIELD_EXPRESSIONS = [
    lambda f: f("a") > 2,
    lambda f: f("a") != 3,
    lambda f: f("x") != 1.0,
    lambda f: ~(f("x") > 0),
    lambda f: ~(f("x") != 1.0),
    lambda f: f("x") == f("f"),
    lambda f: ~(f("x") < f("f")),
    lambda f: f("x") != f("f"),
    lambda f: f("a").isin([1, 3]),
    lambda f: ~f("a").isin([1, 3]),
    lambda f: f("a").isin([1, None]),
    lambda f: ~f("a").isin([1, None]),
    lambda f: ~f("x").isin([1.0, 2.5]),
    lambda f: ~pc.is_in(f("a"), value_set=pa.array([1, None], pa.int16()), skip_nulls=True),
    lambda f: pc.if_else(
        f("a").is_valid(), pc.is_in(f("a"), value_set=pa.array([1, 7], pa.int16())), _null_bool()
    ),
    lambda f: ~pc.if_else(
        f("a").is_valid(), pc.is_in(f("a"), value_set=pa.array([1, 7], pa.int16())), _null_bool()
    ),
    lambda f: f("x").is_null(),
    lambda f: f("x").is_null(nan_is_null=True),
    lambda f: ~f("f").is_null(nan_is_null=True),
    lambda f: f("x").is_valid(),
    lambda f: f("f").is_nan(),
    lambda f: ~f("f").is_nan(),
    lambda f: f("b"),
    lambda f: ~f("b"),
    lambda f: (f("a") > 0) & (f("s") == "a") | f("x").is_nan(),
    lambda f: ~((f("a") > 0) | (f("s") != "a")),
    lambda f: (f("a") + 1) * 2 > 3.5,
    lambda f: ~(f("x") / 2.0 > 0.25),
    lambda f: pc.abs(f("a")) > 1,
    lambda f: pc.bit_wise_and(f("a"), 2) != 0,
    lambda f: f("a") > pc.scalar(pa.scalar(2, pa.int16())),
    lambda f: f("s") < "b",
]


@needs_arrow
@pytest.mark.parametrize("build", FIELD_EXPRESSIONS)
@pytest.mark.parametrize("with_schema", [True, False])
def test_from_pyarrow_keeps_pyarrow_rows(build, with_schema):
    table = _from_table()
    expression = build(pc.field)
    tree = E.from_pyarrow(expression, table.schema if with_schema else None)
    assert tree is not None, expression
    assert _pa_rows(table, E.to_pyarrow(tree, table.schema)) == _pa_rows(table, expression)


@needs_arrow
def test_from_pyarrow_trees():
    f = pc.field
    assert E.from_pyarrow(f("a") > 2) == E.Compare(">", E.Column("a"), L(2))
    schema = pa.schema([("a", pa.int16()), ("x", pa.float64())])
    assert E.from_pyarrow(f("a") != 2, schema) == E.Compare("!=", E.Column("a"), L(2))
    assert E.from_pyarrow(f("x") != 2, schema) == E.Or(
        E.Compare("!=", E.Column("x"), L(2)), E.IsNan(E.Column("x"))
    )
    assert E.from_pyarrow(f("a").isin([1, 2])) == E.InList(E.Column("a"), (1, 2))
    assert E.from_pyarrow(f("a").is_valid()) == E.IsNull(E.Column("a"), negated=True)
    assert E.from_pyarrow((f("a") > 1) & (f("x") < 2), schema) == E.And(
        E.Compare(">", E.Column("a"), L(1)), E.Compare("<", E.Column("x"), L(2))
    )
    assert E.from_pyarrow(None) is None
    with pytest.raises(TypeError):
        E.from_pyarrow("a > 1")


@needs_arrow
@pytest.mark.parametrize(
    "build",
    [
        lambda f: f("a").cast(pa.int64()) > 1,
        lambda f: pc.starts_with(f("s"), "a"),
        lambda f: f(("a", "b")) > 1,
        lambda f: f("a") / 2 > 1,  # integer division in pyarrow
        lambda f: f("x").isin([float("nan")]),
        lambda f: f("s") == "a ",
        lambda f: f("x") > float("nan"),
        lambda f: pc.scalar(True),
        lambda f: f("a") == pc.scalar(pa.scalar(None, pa.int16())),
        lambda f: pc.if_else(f("b"), f("a") > 1, f("a") < 0),
    ],
)
def test_from_pyarrow_unsupported(build):
    assert E.from_pyarrow(build(pc.field)) is None


@needs_arrow
def test_from_pyarrow_checks_against_the_schema():
    schema = pa.schema([("a", pa.int16()), ("v", pa.list_(pa.int16()))])
    assert E.from_pyarrow(pc.field("v") == 1, schema) is None
    assert E.from_pyarrow(pc.field("zzz") == 1, schema) is None
    assert E.from_pyarrow(pc.field("zzz") == 1) is not None


@needs_arrow
def test_from_pyarrow_duckdb_filters():
    duckdb = pytest.importorskip("duckdb")
    ds = pytest.importorskip("pyarrow.dataset")
    table = _from_table()
    seen: List[Any] = []

    class Recording(ds.Dataset):
        # only what DuckDB calls; enough to capture the filters it pushes down
        def __init__(self) -> None:
            self._inner = ds.dataset(table)

        @property
        def schema(self):
            return table.schema

        def scanner(self, *args, **kwargs):
            seen.append(kwargs.get("filter"))
            return self._inner.scanner(*args, **kwargs)

        def count_rows(self, **kwargs):
            return self._inner.count_rows(**kwargs)

        def to_batches(self, **kwargs):
            seen.append(kwargs.get("filter"))
            return self._inner.to_batches(**kwargs)

        def to_table(self, **kwargs):
            seen.append(kwargs.get("filter"))
            return self._inner.to_table(**kwargs)

        def get_fragments(self, **kwargs):
            return self._inner.get_fragments(**kwargs)

    recording = Recording()
    con = duckdb.connect()
    con.register("t", recording)
    for sql in [
        "a > 2",
        "a IN (1, 7)",
        "a NOT IN (1, 7)",
        "a BETWEEN 0 AND 3",
        "a IS NULL",
        "NOT (a > 2)",
        "s = 'a' AND a > 0",
        "a > 2 OR a < 0",
    ]:
        seen.clear()
        con.execute(f"SELECT a FROM t WHERE {sql}").fetchall()
        pushed = [expression for expression in seen if expression is not None]
        for expression in pushed:
            tree = E.from_pyarrow(expression, table.schema)
            assert tree is not None, (sql, expression)
            assert _pa_rows(table, E.to_pyarrow(tree, table.schema)) == _pa_rows(
                table, expression
            ), sql


# =============================================================================================
# Property tests
# =============================================================================================

# A plain-Python three-valued evaluator of trees: True, False or None (unknown) per row,
# written from docs/where.md and the `torchfits.query.expr` module docstring, independently of
# ``to_pyarrow``.

F32_MAX = float(np.finfo(np.float32).max)
PY_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

COLUMN_POOLS = {
    "i16": ("int16", [-32768, -1, 0, 1, 2, 7, 100, 32767]),
    "i64": ("int64", [-(2**63), -5, 0, 3, 2**53 + 1, 2**63 - 1]),
    "u64": ("uint64", [0, 1, 5, 2**63, 2**64 - 1]),
    "u8": ("uint8", [0, 1, 4, 255]),
    "f32": (
        "float32",
        [math.nan, -1.5, 0.0, float(np.float32(0.1)), 2.0, math.inf, -math.inf, F32_MAX],
    ),
    "f64": ("float64", [math.nan, -1.5, 0.0, 0.1, 2.0, 1e300, math.inf]),
    "s": ("string", ["", "a", "ab", "b", "O'N"]),
    "b": ("bool", [True, False]),
}
NUMERIC_COLUMNS = ["i16", "i64", "u64", "u8", "f32", "f64"]
SMALL_COLUMNS = ["i16", "u8", "f32", "f64"]  # safe inside int64 arithmetic
INT_COLUMNS = ["i16", "i64", "u64", "u8"]
NUMERIC_LITERALS = [
    0, 1, -1, 2, 7, 100, 40000, -40000, 2**63, 2**64, -(2**70),
    2.5, 0.1, -1.5, 2.0, 1e39, -1e39, math.inf, -math.inf, math.nan,
]


def _cls(name: str) -> str:
    kind = COLUMN_POOLS[name][0]
    if kind.startswith(("int", "uint")):
        return "int"
    return {"float32": "f32", "float64": "f64", "string": "str", "bool": "bool"}[kind]


def ref_value(expr: E.Value, row: Dict[str, Any]):
    """(value, class) with class in int/f32/f64/str/bool/lit; value None means null."""
    if isinstance(expr, E.Column):
        return row[expr.name], _cls(expr.name)
    if isinstance(expr, E.Literal):
        return expr.value, "lit"
    if isinstance(expr, (E.Neg, E.Abs)):
        value, cls = ref_value(expr.operand, row)
        if value is None:
            return None, cls
        return (-value if isinstance(expr, E.Neg) else abs(value)), cls
    if isinstance(expr, E.BitAnd):
        value, cls = ref_value(expr.operand, row)
        return (None if value is None else value & expr.mask), "int" if cls != "lit" else "lit"
    assert isinstance(expr, E.Arith)
    (lv, lc), (rv, rc) = ref_value(expr.left, row), ref_value(expr.right, row)
    cls = "lit" if lc == rc == "lit" else None
    if lv is None or rv is None:
        return None, cls or "f64"
    floating = (
        expr.op == "/" or "f32" in (lc, rc) or "f64" in (lc, rc)
        or isinstance(lv, float) or isinstance(rv, float)
    )
    if floating:
        with np.errstate(all="ignore"):
            a, b = np.float64(lv), np.float64(rv)
            result = {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[expr.op]
        return float(result), cls or "f64"
    return PY_OPS_ARITH[expr.op](lv, rv), cls or "int"


PY_OPS_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def ref_compare(op: str, left, right) -> Optional[bool]:
    (lv, lc), (rv, rc) = left, right
    if lc == "lit":
        (lv, lc), (rv, rc), op = (rv, rc), (lv, lc), FLIP[op]
    if lv is None or rv is None or _is_nan(lv) or _is_nan(rv):
        return None
    if rc == "lit":
        if lc == "str":
            return PY_OPS[op](lv, rv.rstrip())
        if lc == "bool":
            return PY_OPS[op](lv, bool(rv))
        if lc == "f32" and not math.isinf(rv) and abs(rv) <= F32_MAX:
            rv = float(np.float32(rv))  # the literal takes the column's width
        return PY_OPS[op](lv, rv)  # Python compares ints and floats exactly
    if lc == rc == "int" or lc == rc == "str" or lc == rc == "bool":
        return PY_OPS[op](lv, rv)
    return PY_OPS[op](float(lv), float(rv))


def ref_predicate(expr: E.Predicate, row: Dict[str, Any]) -> Optional[bool]:
    if isinstance(expr, E.And):
        a, b = ref_predicate(expr.left, row), ref_predicate(expr.right, row)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(expr, E.Or):
        a, b = ref_predicate(expr.left, row), ref_predicate(expr.right, row)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(expr, E.Not):
        a = ref_predicate(expr.operand, row)
        return None if a is None else not a
    if isinstance(expr, E.Compare):
        return ref_compare(expr.op, ref_value(expr.left, row), ref_value(expr.right, row))
    if isinstance(expr, E.Between):
        low = ref_compare(">=", ref_value(expr.operand, row), ref_value(expr.low, row))
        high = ref_compare("<=", ref_value(expr.operand, row), ref_value(expr.high, row))
        inside = False if False in (low, high) else None if None in (low, high) else True
        if expr.negated:
            return None if inside is None else not inside
        return inside
    if isinstance(expr, E.InList):
        operand = ref_value(expr.operand, row)
        result: Optional[bool] = False
        for item in expr.values:
            if item is None:
                result = None
                continue
            hit = ref_compare("==", operand, (item, "lit"))
            if hit is True:
                result = True
                break
            if hit is None:
                result = None
        if operand[0] is None or _is_nan(operand[0]):
            result = None
        if expr.negated:
            return None if result is None else not result
        return result
    if isinstance(expr, E.IsNull):
        value, _ = ref_value(expr.operand, row)
        return (value is not None) if expr.negated else (value is None)
    if isinstance(expr, E.IsNan):
        value, _ = ref_value(expr.operand, row)
        return None if value is None else _is_nan(value)
    raise AssertionError(expr)


def _make_table(data: Dict[str, List[Any]]) -> "pa.Table":
    return pa.table({name: pa.array(data[name], COLUMN_POOLS[name][0]) for name in COLUMN_POOLS})


if st is not None and pa is not None:

    @st.composite
    def tables(draw):
        n = draw(st.integers(0, 7))
        return {
            name: draw(st.lists(st.sampled_from(pool + [None]), min_size=n, max_size=n))
            for name, (_, pool) in COLUMN_POOLS.items()
        }

    ops = st.sampled_from(list(PY_OPS))
    numeric_literal = st.sampled_from(NUMERIC_LITERALS).map(E.Literal)
    small_literal = st.sampled_from([0, 1, -1, 2, 3, 0.5, -2.5]).map(E.Literal)
    arith = st.recursive(
        st.one_of(st.sampled_from(SMALL_COLUMNS).map(E.Column), small_literal),
        lambda inner: st.one_of(
            st.builds(E.Arith, st.sampled_from(["+", "-", "*", "/"]), inner, inner),
            st.builds(E.Neg, inner),
            st.builds(E.Abs, inner),
        ),
        max_leaves=3,
    ).filter(lambda e: bool(E.columns(e)))
    bitand = st.builds(
        E.BitAnd,
        st.sampled_from(INT_COLUMNS).map(E.Column),
        st.sampled_from([0, 1, 4, 6, 0x8000, 2**40]),
    )
    numeric_value = st.one_of(st.sampled_from(NUMERIC_COLUMNS).map(E.Column), arith, bitand)
    str_literal = st.sampled_from(["", "a", "ab ", "b", "O'N", "z"])
    bool_literal = st.sampled_from([True, False, 0, 1])

    leaf_predicates = st.one_of(
        st.builds(E.Compare, ops, numeric_value, st.one_of(numeric_literal, numeric_value)),
        st.builds(E.Compare, ops, numeric_literal, numeric_value),
        st.builds(E.Compare, ops, st.just(E.Column("s")), str_literal.map(E.Literal)),
        st.builds(E.Compare, st.sampled_from(["==", "!="]), st.just(E.Column("b")),
                  bool_literal.map(E.Literal)),
        st.builds(E.InList, numeric_value,
                  st.lists(st.sampled_from(NUMERIC_LITERALS + [None]), max_size=4).map(tuple),
                  st.booleans()),
        st.builds(E.InList, st.just(E.Column("s")),
                  st.lists(st.one_of(str_literal, st.none()), max_size=3).map(tuple),
                  st.booleans()),
        st.builds(E.Between, numeric_value, st.one_of(numeric_literal, numeric_value),
                  st.one_of(numeric_literal, numeric_value), st.booleans()),
        st.builds(E.IsNull, st.one_of(numeric_value, st.sampled_from(["s", "b"]).map(E.Column)),
                  st.booleans()),
        st.builds(E.IsNan, st.sampled_from(list(COLUMN_POOLS)).map(E.Column)),
    )
    predicates = st.recursive(
        leaf_predicates,
        lambda inner: st.one_of(
            st.builds(E.And, inner, inner), st.builds(E.Or, inner, inner), st.builds(E.Not, inner)
        ),
        max_leaves=5,
    )

    @needs_hypothesis
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=tables(), tree=predicates)
    def test_to_pyarrow_matches_reference(data, tree):
        table = _make_table(data)
        expected = [
            i
            for i in range(table.num_rows)
            if ref_predicate(tree, {name: data[name][i] for name in data}) is True
        ]
        assert _pa_rows(table, E.to_pyarrow(tree, table.schema)) == expected

    @needs_hypothesis
    @settings(max_examples=300, deadline=None)
    @given(tree=predicates)
    def test_to_string_round_trip_property(tree):
        if any(isinstance(n, E.Literal) and _is_nan(n.value) for n in E.walk(tree)):
            return  # NaN has no spelling
        if any(isinstance(n, E.InList) and any(_is_nan(v) for v in n.values) for n in E.walk(tree)):
            return
        assert E.parse(E.to_string(tree)) == tree

    def _pc_compare(op):
        return {
            "==": operator.eq, "!=": operator.ne, "<": operator.lt,
            "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        }[op]

    pa_numeric_fields = st.sampled_from(["a", "x", "f"])
    pa_literals = st.sampled_from([0, 1, -1, 2, 0.5, -1.5, 2.5, 7])
    pa_leaves = st.one_of(
        st.builds(lambda c, op, v: _pc_compare(op)(pc.field(c), v), pa_numeric_fields, ops,
                  pa_literals),
        st.builds(lambda c, op, d: _pc_compare(op)(pc.field(c), pc.field(d)), pa_numeric_fields,
                  ops, pa_numeric_fields),
        st.builds(lambda op, v: _pc_compare(op)(pc.field("s"), v), ops,
                  st.sampled_from(["a", "b", ""])),
        st.builds(lambda vals: pc.field("a").isin(vals),
                  st.lists(st.sampled_from([1, 3, 0, 7, None]), min_size=1, max_size=3)
                  .filter(lambda vals: any(v is not None for v in vals))),
        st.builds(lambda vals: pc.field("x").isin(pa.array(vals, pa.float64())),
                  st.lists(st.sampled_from([1.0, 2.5, -1.0, None]), max_size=3)),
        st.builds(
            lambda vals, skip: pc.is_in(
                pc.field("a"), value_set=pa.array(vals, pa.int16()), skip_nulls=skip
            ),
            st.lists(st.sampled_from([1, 3, 0, None]), max_size=3), st.booleans(),
        ),
        st.builds(
            lambda vals: pc.if_else(
                pc.field("a").is_valid(),
                pc.is_in(pc.field("a"), value_set=pa.array(vals, pa.int16())),
                _null_bool(),
            ),
            st.lists(st.sampled_from([1, 3, 0]), max_size=3),
        ),
        st.builds(lambda c, nan: pc.field(c).is_null(nan_is_null=nan),
                  st.sampled_from(["a", "x", "f", "s"]), st.booleans()),
        st.builds(lambda c: pc.field(c).is_valid(), st.sampled_from(["a", "x", "s", "b"])),
        st.builds(lambda c: pc.field(c).is_nan(), st.sampled_from(["x", "f"])),
        st.just(pc.field("b")),
    )
    pa_expressions = st.recursive(
        pa_leaves,
        lambda inner: st.one_of(
            st.builds(operator.and_, inner, inner),
            st.builds(operator.or_, inner, inner),
            st.builds(operator.invert, inner),
        ),
        max_leaves=5,
    )

    @needs_hypothesis
    @settings(max_examples=300, deadline=None)
    @given(expression=pa_expressions, with_schema=st.booleans())
    def test_from_pyarrow_property(expression, with_schema):
        table = _from_table()
        tree = E.from_pyarrow(expression, table.schema if with_schema else None)
        assert tree is not None, expression
        assert _pa_rows(table, E.to_pyarrow(tree, table.schema)) == _pa_rows(table, expression)

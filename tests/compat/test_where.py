"""Tests for the torchfits 1.x where dialect (`torchfits.where`): tokenizer, parser, evaluator.

"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _wherehelpers import P, where
from torchfits.errors import WhereSyntaxError

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
    root = Path(__file__).resolve().parents[2]
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


def _rows(text: str, data: dict[str, Any]) -> list[int]:
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

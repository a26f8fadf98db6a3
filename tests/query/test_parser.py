"""Tests for the native where parser and the expression tree (`torchfits.query`).

"""

from __future__ import annotations

import math

import numpy as np
import pytest

from _wherehelpers import E, L, P, where
from torchfits.errors import WhereSyntaxError

# =============================================================================================
# Native parser
# =============================================================================================

A, B, C, F = E.Column("A"), E.Column("B"), E.Column("C"), E.Column("FLAGS")


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


def test_bare_boolean_columns_and_like_parse():
    assert E.parse("star") == E.Compare("==", E.Column("star"), E.Literal(True))
    assert E.parse("NOT star AND A > 1") == E.And(
        E.Not(E.Compare("==", E.Column("star"), E.Literal(True))),
        E.Compare(">", E.Column("A"), E.Literal(1)))
    assert E.parse('`odd name`') == E.Compare("==", E.Column("odd name"), E.Literal(True))
    with pytest.raises(WhereSyntaxError, match="alone as a condition, which needs a boolean") as info:
        E.parse("A AND star", booleans=["STAR"])
    assert "at position 0" in str(info.value)
    assert E.parse("Star", booleans=["STAR"]) == E.Compare("==", E.Column("Star"), E.Literal(True))
    like = E.parse("name NOT LIKE 'NGC%'")
    assert like == E.Like(E.Column("name"), "NGC%", negated=True)
    assert E.to_string(like) == "name NOT LIKE 'NGC%'"
    assert E.parse(E.to_string(like)) == like
    assert E.parse("name ilike 'm_1'") == E.Like(E.Column("name"), "m_1", ignore_case=True)
    with pytest.raises(WhereSyntaxError, match="LIKE needs a quoted string pattern"):
        E.parse("name LIKE 3")
    with pytest.raises(WhereSyntaxError, match="Unexpected end"):
        E.parse("name LIKE")


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


# -- messages that point at the real mistake (issue 23) ---------------------------------------
@pytest.mark.parametrize(
    "text, message, position",
    [
        ("mag =< 16", r"Unsupported operator '=<' \(use '<='\)", 4),
        ("mag => 16", r"Unsupported operator '=>' \(use '>='\)", 4),
        ("mag =! 16", r"Unsupported operator '=!' \(use '!='\)", 4),
        ("mag = 16", r"Unsupported operator '=' \(use '=='\)", 4),
        ("mag < 1e", r"Malformed number '1e'", 6),
        ("mag < 1e+", r"Malformed number '1e\+'", 6),
        ("mag < 1.2.3", r"Malformed number '1.2.3'", 6),
        ("mag < 0x", r"Malformed number '0x'", 6),
        ("mag < 16abc", r"Malformed number '16abc'", 6),
        ("x < 16 -- note", r"'--'.*comments", 7),
        ("x < 16 --", r"'--'.*comments", 7),
        ("x--1 > 0", r"'--'.*comments", 1),
    ],
)
def test_native_parse_errors_point_at_the_mistake(text, message, position):
    with pytest.raises(WhereSyntaxError, match=message) as info:
        E.parse(text)
    assert f"at position {position}" in str(info.value)


def test_minus_a_negative_number_still_parses():
    assert E.parse("x - -1 > 0") == E.parse("x - (-1) > 0")
    assert E.parse("x > -1e3") == E.Compare(">", E.Column("x"), E.Literal(-1000.0))
    assert E.parse("x > 0x1E+1") == E.Compare(">", E.Column("x"), E.Arith("+", E.Literal(30), E.Literal(1)))


def test_column_names_match_exactly_first_then_ignoring_case(tmp_path):
    import pyarrow as pa

    import torchfits
    from torchfits.errors import ColumnNotFoundError

    path = str(tmp_path / "case.fits")
    torchfits.write(path, pa.table({"Ab": [1, 2, 3], "AB": [3, 2, 1], "c": [1, 1, 0]}), overwrite=True)

    def ids(where):
        return torchfits.scan(path, where=where).to_arrow().column("Ab").to_pylist()

    assert ids("Ab > 1") == [2, 3]       # each exact spelling names its own column
    assert ids("AB > 1") == [1, 2]
    assert ids("C > 0") == [1, 2]        # no exact match: the one column equal ignoring case
    with pytest.raises(ColumnNotFoundError, match=r"'ab' matches 'Ab' and 'AB' only by case"):
        torchfits.scan(path, where="ab > 1")


@pytest.mark.parametrize("op, meant", [("=<", "<="), ("=>", ">="), ("=!", "!=")])
def test_compat_dialect_suggests_the_operator_meant(op, meant):
    with pytest.raises(WhereSyntaxError, match=rf"Unsupported operator '{op}' .*\(use '{meant}'\)"):
        E.parse(f"mag {op} 16", dialect="compat")

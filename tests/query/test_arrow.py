"""Tests for where-trees to and from pyarrow filters (`torchfits.query.arrow`).

"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _wherehelpers import E, L, P, _from_table, _null_bool, _pa_rows, pa, pc, where

# =============================================================================================
# validate / to_pyarrow on real tables
# =============================================================================================


def _table() -> pa.Table:
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


def _arrow_rows(text: str, table: pa.Table | None = None) -> list[int]:
    table = _table() if table is None else table
    tree = E.parse(text, columns=table.column_names)
    expression = E.to_pyarrow(tree, table.schema)
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(expression)["__row"].to_pylist()


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


def test_to_pyarrow_compat_dialect_and_dataset():
    import pyarrow.dataset as ds
    table = _table()
    tree = E.from_compat_ast(P("NOT NUL > 3 AND NAME != 'zzz'"))
    expression = E.to_pyarrow(tree, table.schema)
    got = ds.dataset(table).to_table(filter=expression, columns=["NUL"])
    assert got["NUL"].to_pylist() == [1]  # row 2 has a null NAME
    assert ds.dataset(table).count_rows(filter=expression) == 1


def test_to_pyarrow_accepts_a_mapping_of_types():
    expression = E.to_pyarrow(E.parse("A > 1"), {"A": pa.int8()})
    assert pa.table({"A": pa.array([1, 2], pa.int8())}).filter(expression).num_rows == 1


@pytest.mark.parametrize("typ", ["float32", "float64"])
def test_to_pyarrow_in_list_treats_negative_zero_as_zero(typ):
    """IN compares values, not bit patterns: -0.0 IN (0) and 0.0 IN (-0.0) hold, like `==`."""
    table = pa.table({"f": pa.array([float("nan"), 0.0, -0.0, 1.5, None], typ)})

    def rows(text):
        return table.filter(E.to_pyarrow(E.parse(text), table.schema)).column("f").to_pylist()

    assert rows("-f IN (0)") == rows("-f == 0") == [0.0, -0.0]
    assert rows("f IN (-0.0, 1.5)") == [0.0, -0.0, 1.5]
    assert rows("f NOT IN (0)") == [1.5]


def test_to_pyarrow_integer_overflow_raises():
    table = _table()
    expression = E.to_pyarrow(E.parse("I + 1 > 0"), table.schema)
    with pytest.raises(pa.ArrowInvalid, match="overflow"):
        table.filter(expression)


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


def test_validate_rejects_values_as_conditions():
    with pytest.raises(ValueError, match="where expects"):
        E.validate(E.Column("A"), {"A": pa.bool_()})
    with pytest.raises(ValueError, match="where expects a condition"):
        E.validate(E.Arith("+", E.Column("A"), L(1)), {"A": pa.int8()})


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


@pytest.mark.parametrize("build", FIELD_EXPRESSIONS)
@pytest.mark.parametrize("with_schema", [True, False])
def test_from_pyarrow_keeps_pyarrow_rows(build, with_schema):
    table = _from_table()
    expression = build(pc.field)
    tree = E.from_pyarrow(expression, table.schema if with_schema else None)
    assert tree is not None, expression
    assert _pa_rows(table, E.to_pyarrow(tree, table.schema)) == _pa_rows(table, expression)


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


def test_from_pyarrow_checks_against_the_schema():
    schema = pa.schema([("a", pa.int16()), ("v", pa.list_(pa.int16()))])
    assert E.from_pyarrow(pc.field("v") == 1, schema) is None
    assert E.from_pyarrow(pc.field("zzz") == 1, schema) is None
    assert E.from_pyarrow(pc.field("zzz") == 1) is not None


def test_from_pyarrow_duckdb_filters():
    duckdb = pytest.importorskip("duckdb")
    import pyarrow.dataset as ds
    table = _from_table()
    seen: list[Any] = []

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

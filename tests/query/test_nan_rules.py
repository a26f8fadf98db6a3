"""NaN and NULL rules per route (docs/where.md, "NaN and NULL on each route").

Every route that pushes a filter into the FITS decoder must return the rows its own engine
returns on the same data held in memory without torchfits:

- the where dialect (``scan(where=)``): SQL three-valued logic with NaN unknown in comparisons;
  the oracle is DuckDB over the same data with each NaN turned into NULL (``isnan`` aside);
- pyarrow filters (``scan(filter=)``, ``FitsDataset.to_table(filter=)``): a
  ``pyarrow.dataset`` over the in-memory table;
- DuckDB (``torchfits.sql``, a `FitsDataset` named in a query): a native DuckDB table;
- Polars (``scan_polars``): a Polars DataFrame; ``pl.scan_pyarrow_dataset(ds)``: the same call
  over a ``pyarrow.dataset`` of the in-memory table.

Columns hold NaN, +-Inf, -0.0 and 0.0 (float64 and float32) and nulls (int32, written with TNULL).
"""
from __future__ import annotations

import math
import operator
import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import torchfits  # noqa: E402
from torchfits.tables.polars_source import scan_polars  # noqa: E402

NAN = float("nan")
INF = float("inf")
_FLOATS = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 2.0, 2.5, 0.1, 1 / 3]
_INTS: list[int | None] = [None, 0, 1, -1, 2, 3]
_LITERALS = [0.0, -0.0, 1.0, 2.0, -1.0, INF, -INF, 0.1, 1 / 3]  # 0.1, 1/3: not float32
_OPS = [">", "<", ">=", "<=", "==", "!="]

SETTINGS = settings(max_examples=int(os.environ.get("TORCHFITS_NAN_EXAMPLES", "30")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _write(rows: list[tuple], directory: str, split: int | None = None) -> tuple[str, str, Any]:
    """Write the rows (d: float64, e: float32, j: int32, nulls as TNULL) into one file, or
    with ``split`` into two files with a statistics sidecar of 2-row chunks; return the source
    for `scan`/`dataset`, the quoted path for `torchfits.sql`, and the table torchfits reads
    back (the in-memory data every engine is compared on)."""
    from torchfits.tables.stats_index import build_index

    n = len(rows)
    source = pa.table({"i": pa.array(range(n), pa.int64()),
                       "d": pa.array([r[0] for r in rows], pa.float64()),
                       "e": pa.array(np.array([r[1] for r in rows], np.float32)),
                       "j": pa.array([r[2] for r in rows], pa.int32())})
    if split is None or n < 2:
        path = os.path.join(directory, "nan_rules.fits")
        torchfits.write(path, source, overwrite=True)
        where, sql_path = path, path
    else:
        k = min(max(split, 1), n - 1)
        where = os.path.join(directory, "parts")
        os.mkdir(where)
        for part, piece in enumerate((source.slice(0, k), source.slice(k))):
            torchfits.write(os.path.join(where, f"part_{part}.fits"), piece, overwrite=True)
        build_index(where, chunk_rows=2)
        sql_path = os.path.join(where, "part_*.fits")
    table = torchfits.dataset(where, index=False).to_table()
    assert table.column("j").null_count == sum(r[2] is None for r in rows)
    return where, sql_path, table


rows_strategy = st.lists(
    st.tuples(st.sampled_from(_FLOATS), st.sampled_from(_FLOATS), st.sampled_from(_INTS)),
    min_size=1, max_size=12)
split_strategy = st.one_of(st.none(), st.integers(1, 11))


# -- predicates, one spec rendered for every engine -------------------------------------------
# ("cmp", col, op, lit) | ("between", col, lo, hi) | ("in", col, (lits)) |
# ("cols", col, op, col) | ("arith", col, aop, alit, op, lit) | ("not", p) | ("and", p, q) |
# ("or", p, q) | ("isnull", col) | ("isnan", col)

_ARITH = ["+", "-", "*", "/"]
_ARITH_LITERALS = [1.0, -1.0, 0.5, 2.0]  # never 0: pyarrow raises on integer division by zero


def _atoms(col_strategy: Any) -> Any:
    lit = st.sampled_from(_LITERALS)
    return st.one_of(
        st.tuples(st.just("cmp"), col_strategy, st.sampled_from(_OPS), lit),
        st.tuples(st.just("between"), col_strategy, lit, lit),
        st.tuples(st.just("in"), col_strategy,
                  st.lists(st.one_of(lit, st.none()), min_size=1, max_size=3).map(tuple)),
        st.tuples(st.just("cols"), col_strategy, st.sampled_from(_OPS), col_strategy),
        st.tuples(st.just("arith"), col_strategy, st.sampled_from(_ARITH),
                  st.sampled_from(_ARITH_LITERALS), st.sampled_from(_OPS), lit),
    )


def _predicates(with_null_tests: bool) -> Any:
    cols = st.sampled_from(["d", "e", "j"])
    atoms = _atoms(cols)
    if with_null_tests:
        atoms = st.one_of(atoms, st.tuples(st.just("isnull"), cols),
                          st.tuples(st.just("isnan"), st.sampled_from(["d", "e"])))
    return st.recursive(atoms, _combine, max_leaves=3)


def _combine(inner: Any) -> Any:
    return st.one_of(st.tuples(st.just("not"), inner),
                     st.tuples(st.sampled_from(["and", "or"]), inner, inner))


def _lit_for(col: str, value: float | None) -> Any:
    """Integer columns take integer literals (the infinities become big integers)."""
    if col != "j" or value is None:
        return value
    if math.isinf(value):
        return 10**6 if value > 0 else -10**6
    return int(value)


def _sql_lit(col: str, value: float | None, double: bool = True) -> str:
    """A DuckDB literal: ``::DOUBLE`` widens a FLOAT column, a decimal rounds to the column."""
    value = _lit_for(col, value)
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        # a DOUBLE bound would make DuckDB compare a BETWEEN's other (decimal) bound in float64
        cast = "::FLOAT" if col == "e" and not double else "::DOUBLE"
        return ("'inf'" if value > 0 else "'-inf'") + cast
    return repr(value) + ("::DOUBLE" if double else "")


def _where_lit(col: str, value: float | None) -> str:
    value = _lit_for(col, value)
    if value is None:
        return "NULL"
    if isinstance(value, float) and math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    return repr(value)


_SQL_OPS = {"==": "=", "!=": "<>"}


def _render(p: tuple, lit: Any, arith_lit: Any, ops: dict, arith_cast: str) -> str:
    """One text renderer for SQL and the where dialect: ``lit(col, value)`` writes a literal,
    ``arith_lit`` the one an arithmetic result is compared with, ``ops`` respells comparisons
    and ``arith_cast`` follows the arithmetic constant."""
    def r(q: tuple) -> str:
        kind = q[0]
        if kind == "cmp":
            return f"({q[1]} {ops.get(q[2], q[2])} {lit(q[1], q[3])})"
        if kind == "cols":
            return f"({q[1]} {ops.get(q[2], q[2])} {q[3]})"
        if kind == "arith":
            return f"(({q[1]} {q[2]} {q[3]!r}{arith_cast}) {ops.get(q[4], q[4])} {arith_lit('d', q[5])})"
        if kind == "between":
            return f"({q[1]} BETWEEN {lit(q[1], q[2])} AND {lit(q[1], q[3])})"
        if kind == "in":
            return f"({q[1]} IN ({', '.join(lit(q[1], v) for v in q[2])}))"
        if kind == "not":
            return f"(NOT {r(q[1])})"
        if kind in ("and", "or"):
            return f"({r(q[1])} {kind.upper()} {r(q[2])})"
        if kind == "isnull":
            return f"({q[1]} IS NULL)"
        if kind == "isnan":
            return f"isnan({q[1]})"
        raise AssertionError(q)
    return r(p)


def to_sql(p: tuple, double: bool = True) -> str:
    # DOUBLE operands: the dialect computes arithmetic with a float operand in float64
    return _render(p, lambda col, v: _sql_lit(col, v, double), _sql_lit, _SQL_OPS, "::DOUBLE")


def to_where(p: tuple) -> str:
    return _render(p, _where_lit, _where_lit, {}, "")


_COMPARE = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
            "==": operator.eq, "!=": operator.ne}
_ARITH_OP = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _compare_or_arith(p: tuple, col: Any, lit: Any) -> Any:
    """The ``cmp``/``cols``/``arith`` atoms as one engine's expression: ``col(name)`` is a
    column, ``lit(value)`` a float64 literal of the arithmetic (both engines overload the
    Python operators)."""
    kind = p[0]
    if kind == "cmp":
        return _COMPARE[p[2]](col(p[1]), _lit_for(p[1], p[3]))
    if kind == "cols":
        return _COMPARE[p[2]](col(p[1]), col(p[3]))
    return _COMPARE[p[4]](_ARITH_OP[p[2]](col(p[1]), lit(p[3])), lit(p[5]))


def to_pyarrow(p: tuple) -> Any:
    kind = p[0]
    if kind in ("cmp", "cols", "arith"):
        return _compare_or_arith(p, pc.field, lambda v: v)
    if kind == "between":
        c = pc.field(p[1])
        return (c >= _lit_for(p[1], p[2])) & (c <= _lit_for(p[1], p[3]))
    if kind == "in":
        return pc.field(p[1]).isin([_lit_for(p[1], v) for v in p[2]])
    if kind == "not":
        return ~to_pyarrow(p[1])
    if kind == "and":
        return to_pyarrow(p[1]) & to_pyarrow(p[2])
    if kind == "or":
        return to_pyarrow(p[1]) | to_pyarrow(p[2])
    if kind == "isnull":
        return pc.field(p[1]).is_null()
    if kind == "isnan":
        return pc.is_nan(pc.field(p[1]))
    raise AssertionError(p)


def to_polars(p: tuple) -> Any:
    kind = p[0]
    if kind in ("cmp", "cols", "arith"):
        return _compare_or_arith(p, pl.col, lambda v: pl.lit(v, dtype=pl.Float64))
    if kind == "between":
        return pl.col(p[1]).is_between(_lit_for(p[1], p[2]), _lit_for(p[1], p[3]))
    if kind == "in":
        values = [_lit_for(p[1], v) for v in p[2]]
        dtype = pl.Int32 if p[1] == "j" else (pl.Float32 if p[1] == "e" else pl.Float64)
        return pl.col(p[1]).is_in(pl.Series(values, dtype=dtype).implode())
    if kind == "not":
        return ~to_polars(p[1])
    if kind == "and":
        return to_polars(p[1]) & to_polars(p[2])
    if kind == "or":
        return to_polars(p[1]) | to_polars(p[2])
    if kind == "isnull":
        return pl.col(p[1]).is_null()
    if kind == "isnan":
        return pl.col(p[1]).is_nan()
    raise AssertionError(p)


def _ids(table: Any) -> list:
    return sorted(table.column("i").to_pylist())


# -- the routes -------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@SETTINGS
@given(rows=rows_strategy, split=split_strategy, pred=_predicates(with_null_tests=False))
def test_where_dialect_is_sql_with_nan_unknown(rows, split, pred):
    """``scan(where=)`` keeps the rows DuckDB keeps once every NaN is NULL."""
    with tempfile.TemporaryDirectory() as tmp:
        path, sql_path, table = _write(rows, tmp, split)
        nulled = pa.table({"i": table["i"],
                           **{c: pc.if_else(pc.is_nan(table[c]), pa.scalar(None, table[c].type),
                                            table[c]) for c in ("d", "e")},
                           "j": table["j"]})
        con = duckdb.connect()
        con.register("src", nulled)
        con.execute("CREATE TABLE t AS SELECT * FROM src")
        # decimal literals: DuckDB rounds them to a FLOAT column's width, as the dialect does
        want = [r[0] for r in con.sql(
            f"SELECT i FROM t WHERE {to_sql(pred, double=False)} ORDER BY i").fetchall()]
        text = to_where(pred)
        assert _ids(torchfits.scan(path, where=text).to_arrow()) == want, text
        assert _ids(torchfits.dataset(path).to_table(filter=text)) == want, text
        assert torchfits.dataset(path).count_rows(filter=text) == len(want), text


@SETTINGS
@given(rows=rows_strategy, split=split_strategy, pred=_predicates(with_null_tests=True))
def test_pyarrow_filter_routes_give_pyarrow_answer(rows, split, pred):
    with tempfile.TemporaryDirectory() as tmp:
        path, sql_path, table = _write(rows, tmp, split)
        expr = to_pyarrow(pred)
        want = _ids(pds.dataset(table).to_table(filter=expr))
        assert _ids(torchfits.scan(path, filter=expr).to_arrow()) == want, str(expr)
        assert _ids(torchfits.dataset(path).to_table(filter=expr)) == want, str(expr)
        assert torchfits.dataset(path).count_rows(filter=expr) == len(want), str(expr)


@SETTINGS
@given(rows=rows_strategy, split=split_strategy, pred=_predicates(with_null_tests=True))
def test_duckdb_routes_give_duckdb_answer(rows, split, pred):
    with tempfile.TemporaryDirectory() as tmp:
        path, sql_path, table = _write(rows, tmp, split)
        con = duckdb.connect()
        con.register("src", table)
        con.execute("CREATE TABLE t AS SELECT * FROM src")
        ds = torchfits.dataset(path)  # noqa: F841 - DuckDB finds it by name
        for double in (True, False):
            where = to_sql(pred, double)
            want = con.sql(f"SELECT i FROM t WHERE {where} ORDER BY i").fetchall()
            got = torchfits.sql(f"SELECT i FROM '{sql_path}' WHERE {where} ORDER BY i").fetchall()
            assert got == want, where
            assert duckdb.sql(f"SELECT i FROM ds WHERE {where} ORDER BY i").fetchall() == want, where
            count = duckdb.sql(f"SELECT count(*) FROM ds WHERE {where}").fetchall()[0][0]
            assert count == len(want), where


@SETTINGS
@given(rows=rows_strategy, split=split_strategy, pred=_predicates(with_null_tests=True))
def test_polars_routes_give_polars_answer(rows, split, pred):
    with tempfile.TemporaryDirectory() as tmp:
        path, sql_path, table = _write(rows, tmp, split)
        expr = to_polars(pred)
        want = sorted(pl.from_arrow(table).filter(expr)["i"].to_list())
        got = sorted(scan_polars(path).filter(expr).collect()["i"].to_list())
        assert got == want, str(expr)
        # scan_pyarrow_dataset pushes into any pyarrow dataset: same answer as over memory
        want_ds = sorted(pl.scan_pyarrow_dataset(pds.dataset(table)).filter(expr).collect()["i"].to_list())
        got_ds = sorted(
            pl.scan_pyarrow_dataset(torchfits.dataset(path)).filter(expr).collect()["i"].to_list())
        assert got_ds == want_ds, str(expr)


def test_pyarrow_is_in_keeps_its_signed_zero_rule(tmp_path):
    """pyarrow's ``is_in`` hashes bit patterns (0.0 misses -0.0); a pushed filter keeps that."""
    path = str(tmp_path / "zeros.fits")
    table = pa.table({"i": [0, 1, 2, 3], "f": [-0.0, 0.0, NAN, 1.0]})
    torchfits.write(path, table, overwrite=True)
    for members in ([0.0], [-0.0], [0.0, 1.0]):
        expr = pc.field("f").isin(members)
        for e in (expr, ~expr):
            want = _ids(pds.dataset(table).to_table(filter=e))
            assert _ids(torchfits.scan(path, filter=e).to_arrow()) == want, str(e)
            assert _ids(torchfits.dataset(path).to_table(filter=e)) == want, str(e)
    lazy = pl.scan_pyarrow_dataset(torchfits.dataset(path)).filter(pl.col("f").is_in([0.0]))
    assert lazy.collect()["i"].to_list() == [1]  # as over a pyarrow dataset in memory
    polars_own = scan_polars(path).filter(pl.col("f").is_in([0.0])).collect()["i"].to_list()
    assert sorted(polars_own) == [0, 1]  # Polars itself matches -0.0 with 0.0


def test_division_by_zero_gives_duckdbs_values(tmp_path):
    """``/`` follows IEEE as DuckDB does by default: x/0 is +-inf and 0/0 is NaN (not NULL);
    only the NaN rule of the comparison then differs."""
    path = str(tmp_path / "div.fits")
    table = pa.table({"i": [0, 1, 2, 3, 4], "n": pa.array([3, 0, -4, None, 7], pa.int16()),
                      "f": [1.5, 0.0, -2.0, NAN, -0.0]})
    torchfits.write(path, table, overwrite=True)
    con = duckdb.connect()
    con.register("src", torchfits.scan(path).to_arrow())
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    for value in ("n / 0", "f / 0", "n / f", "(n + 1) / 0"):
        for cond in (f"{value} > 1", f"{value} < 1", f"{value} == -1e999"):
            sql = cond.replace("==", "=").replace("-1e999", "'-inf'::DOUBLE")
            # DuckDB's rows, NaN results aside (unknown in the where dialect)
            want = [r[0] for r in con.sql(
                f"SELECT i FROM t WHERE ({sql}) AND NOT isnan({value}) ORDER BY i").fetchall()]
            assert _ids(torchfits.scan(path, where=cond).to_arrow()) == want, cond
            assert _ids(torchfits.scan(path, where=f"isnan({value})").to_arrow()) == [
                r[0] for r in con.sql(f"SELECT i FROM t WHERE isnan({value}) ORDER BY i").fetchall()]


def test_pyarrow_widens_a_float32_column_to_a_float64_literal(tmp_path):
    """pyarrow compares ``e > 0.1`` on float32 in float64 (0.1f is above 0.1): a pushed filter
    keeps pyarrow's rows, while the where dialect rounds the literal to float32."""
    path = str(tmp_path / "f32.fits")
    values = np.array([0.1, 1 / 3, 2.5, NAN, np.finfo(np.float32).max, INF], np.float32)
    table = pa.table({"i": list(range(len(values))), "e": pa.array(values)})
    torchfits.write(path, table, overwrite=True)
    field = pc.field("e")
    for literal in (0.1, 1 / 3, 2.5, 1e39, 1e-50):
        for expr in (field > literal, field >= literal, field < literal, field <= literal,
                     field == literal, field != literal, pc.scalar(literal) < field):
            for e in (expr, ~expr):
                want = _ids(pds.dataset(table).to_table(filter=e))
                assert _ids(torchfits.scan(path, filter=e).to_arrow()) == want, str(e)
                assert _ids(torchfits.dataset(path).to_table(filter=e)) == want, str(e)
    assert _ids(torchfits.scan(path, where="e > 0.1").to_arrow()) == [1, 2, 4, 5]
    assert _ids(torchfits.scan(path, where="e == 0.1").to_arrow()) == [0]

"""Helpers shared by the where-expression tests: the names they all use (the expression module,
the 1.x parser as ``P``, pyarrow), literal nodes and pyarrow row filters."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import torchfits.query.expr as E
from torchfits import where

__all__ = ["E", "L", "P", "_from_table", "_null_bool", "_pa_rows", "pa", "pc", "where"]

P = where.parse_where_expression


def L(value: Any) -> E.Literal:
    return E.Literal(value)


def _pa_rows(table: pa.Table, expression: Any) -> list[int]:
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(expression)["__row"].to_pylist()


def _from_table() -> pa.Table:
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

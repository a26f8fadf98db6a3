"""The NumPy evaluator of the torchfits 1.x where dialect (``torchfits.where.evaluate_where``).

It evaluates the tuple ASTs of :mod:`torchfits.query.where_compat` over in-memory columns
(NumPy arrays, lists, masked arrays, tensors). Only the 1.x API uses it: tables filter through
the engine (:mod:`torchfits.query.expr` trees and the row kernel).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ..query.lexing import number_or_none
from ..query.sky import in_cone
from ..query.tree import TOO_DEEP, float_compare_plan, integer_compare_plan
from ..query.where_compat import NULL_OPS_MESSAGE, Literal, WhereAst, check_node

__all__ = ["evaluate_where"]


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
            number = number_or_none(value.strip())
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
_Truth = tuple[np.ndarray, np.ndarray]


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
    length: list[int] = []

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
        kind = check_node(node)
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
        if kind == "cone":
            other = column(node[2])
            null = null | other.null
            inside = in_cone(values.astype(np.float64), other.values.astype(np.float64), *node[3:])
            return inside & ~null, null
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
                    raise ValueError(NULL_OPS_MESSAGE)
                hit = null if op == "==" else ~null
                return hit.copy(), np.zeros(len(values), dtype=bool)
            result = _compare(values, op, _coerce_for(values, value))
            return result & ~null, null
        if kind == "between":
            if node[2] is None or node[3] is None:
                raise ValueError(NULL_OPS_MESSAGE)
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

"""The engine's where-expression API: parse where-strings, check trees against a schema, and
translate them to and from pyarrow filters (one tree for both where dialects and pyarrow filters).

The pieces live beside this module: nodes and rendering in :mod:`.tree`, the native parser in
:mod:`.parser`, the 1.x dialect in :mod:`.where_compat`, pyarrow in :mod:`.arrow` (loaded on
first use). docs/where.md is the dialect's reference.

Native dialect
--------------
A superset of the 1.2.3 dialect (see :mod:`torchfits.where`):

- comparisons between any two value expressions (``A < B``, ``5 > A``, ``FLUX / ERR > 5``);
- arithmetic ``+ - * /`` (usual precedence), unary minus, ``abs(x)``;
- ``isnan(x)``: true for NaN (which ``IS NULL`` does not match in table filters);
- bit tests, spelled as functions because ``&`` and ``|`` already mean AND and OR in the
  dialect: ``bitand(FLAGS, 0x0C)`` is the integer ``FLAGS & 0x0C`` (compare it:
  ``bitand(FLAGS, 0x0C) != 0`` for "any of these bits", ``bitand(FLAGS, 0x0C) == 0x0C`` for
  "all of them"), and ``bit(FLAGS, 3)`` is the condition "bit 3 (value 8, counted from the
  least significant bit 0) is set", i.e. ``bitand(FLAGS, 8) != 0``;
- backtick-quoted column names for names that are not identifiers: ```my-col` > 3``;
- a boolean column alone as a condition (``star``, ``NOT star``), and SQL patterns
  ``name [NOT] LIKE 'NGC%'`` / ``ILIKE`` (``%`` any run, ``_`` one character, ``\\`` escapes).

A bare word that stands alone on the right of a comparison, or as a BETWEEN bound, is a string
literal as in 1.2.3 (``NAME == obj3``), unless ``columns`` names it or the other side has no
column (``5 > A``); anywhere else a bare word is a column. IN lists hold literals only.

Semantics (what :func:`to_pyarrow` implements and kernels must match)
--------------------------------------------------------------------
- SQL three-valued logic: a comparison, IN or BETWEEN over a null operand is unknown; NOT of
  unknown is unknown; a filter keeps only rows that are true.
- NaN in a comparison, IN or BETWEEN is unknown as well (so ``!=`` and negations never select
  it), but ``IS NULL`` does not match NaN; ``isnan(x)`` does.
- Integers compare exactly with any literal (``S > 40000`` on int16 selects nothing), floats
  compare with a literal rounded to the column's float width (as NumPy, DuckDB and Polars do),
  strings compare with the literal's trailing blanks removed, bool columns accept ``True``,
  ``False``, ``1``, ``0`` and the words ``true``/``false``.
- Integer ``+ - *`` compute exactly in int64 (overflow raises); ``/`` and anything involving a
  float or a uint64 operand compute in float64. ``bitand`` works on the two's-complement value.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import tree as _tree
from .parser import parse
from .tree import *  # noqa: F403 - the nodes and tree helpers are names of this API too
from .tree import Expr, Predicate

if TYPE_CHECKING:  # pragma: no cover - typing only; pyarrow and the 1.x dialect are imported lazily
    import pyarrow
    import pyarrow.compute

    from .where_compat import from_compat_ast

__all__ = [*_tree.__all__, "parse", "from_compat_ast", "validate", "to_pyarrow", "from_pyarrow"]


def __getattr__(name: str) -> Any:
    # the 1.x dialect's module loads when its converter is first asked for: a native where
    # never needs it (docs/architecture.md, "Start-up")
    if name == "from_compat_ast":
        from .where_compat import from_compat_ast

        return from_compat_ast
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def validate(expr: Expr, types: Any) -> None:
    """Check a tree against column types.

    Parameters
    ----------
    expr : Expr
        The tree, normally from :func:`parse`.
    types : pyarrow.Schema or mapping of str to pyarrow.DataType
        The table's columns.

    Raises
    ------
    ValueError
        ``"where references unknown column 'X'"``, ``"where does not support list/VLA column
        'X'"``, ``"where cannot compare column 'ID' (int32) with 'MAG' (not a number)"``, or
        another message naming the offending column or expression.
    """
    from .arrow import validate_tree

    validate_tree(expr, types)


def to_pyarrow(expr: Expr, schema: Any) -> pyarrow.compute.Expression:
    """Translate a tree into a pyarrow filter with the dialect's semantics.

    Parameters
    ----------
    expr : Expr
        The tree.
    schema : pyarrow.Schema or mapping of str to pyarrow.DataType
        The columns the filter will see (their types decide casts and literal handling).

    Returns
    -------
    pyarrow.compute.Expression
        A boolean expression for ``pyarrow.Table.filter`` or ``pyarrow.dataset``; rows where it
        is null are dropped, which together with Kleene AND/OR/NOT gives SQL semantics.

    Raises
    ------
    ValueError
        As :func:`validate`.
    """
    from .arrow import tree_to_pyarrow

    return tree_to_pyarrow(expr, schema)


def from_pyarrow(expression: Any, schema: Any = None) -> Predicate | None:
    """Translate a pyarrow filter (as DuckDB or Polars hand it to a dataset) into a tree.

    Parameters
    ----------
    expression : pyarrow.compute.Expression or None
        The filter.
    schema : pyarrow.Schema or mapping of str to pyarrow.DataType, optional
        The dataset's columns. With it, guards for NaN are added only on float operands and the
        result is checked with :func:`validate`.

    Returns
    -------
    Predicate or None
        A tree that keeps exactly the rows pyarrow's filter keeps, or None when the expression
        uses anything it cannot express (casts, string functions, nested fields, NaN or null
        literals, integer division, ...); the caller then filters with pyarrow itself.

    Notes
    -----
    pyarrow has no public expression AST. Three routes exist: parsing ``str(expression)``
    (ambiguous for names and strings with quotes or newlines), Substrait
    (``expression.to_substrait(schema)``; needs a schema, an optional pyarrow component, a
    protobuf decoder, and refuses common expressions such as implicit casts in arithmetic),
    and the serialization pyarrow itself uses to pickle expressions. This function uses the
    last: ``Expression.__reduce__`` yields an Arrow IPC file listing the tree in prefix order in
    its schema metadata, with literals and function options as typed scalars in its columns.
    The format is Arrow's own (``arrow::compute::Serialize``) and has been stable since
    pyarrow 3; anything unexpected in it makes this function return None.

    Semantics follow pyarrow's result rows, with one deliberate exception shared by the
    dialect: integer overflow in arithmetic (pyarrow wraps or raises, the tree computes in
    int64). A float32 column compared with a float64 literal it cannot hold (``e > 0.1``) is
    compared as pyarrow does, in float64: the literal is replaced by its float32 neighbours
    (where the where dialect rounds it to float32, as NumPy does).
    """
    from .arrow import tree_from_pyarrow

    return tree_from_pyarrow(expression, schema)

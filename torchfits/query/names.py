"""Column names in predicates: exact first, then case-insensitive (as ``columns=``); an
unknown name, or one that matches several columns only by case, is a `ColumnNotFoundError`
(an unknown one suggests the close names)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import ColumnNotFoundError, WhereSyntaxError
from .tree import TOO_DEEP, Column, Expr, Node, columns

__all__ = ["case_ambiguity", "did_you_mean", "match_column", "resolve_columns"]


def did_you_mean(name: str, names: Sequence[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the names close to ``name`` (any case), else ``""``."""
    import difflib  # only an error message needs it (docs/architecture.md, "Start-up")

    folded = {n.casefold(): n for n in reversed(list(names))}
    close = difflib.get_close_matches(name.casefold(), list(folded), n=3, cutoff=0.6)
    if not close:
        return ""
    quoted = [repr(folded[c]) for c in close]
    return "; did you mean " + (" or ".join(quoted) if len(quoted) < 3
                                else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def match_column(name: str, names: Sequence[str]) -> str | None:
    """The table's spelling of ``name``: an exact match, else the first case-insensitive one."""
    if name in names:
        return name
    folded = name.casefold()
    return next((n for n in names if n.casefold() == folded), None)


def case_ambiguity(name: str, names: Sequence[str]) -> str:
    """``"matches 'Ab' and 'AB' only by case"`` when ``name`` is no column's exact spelling and
    several columns match it case-insensitively (the error of every route that takes a column
    name), else ``""``."""
    if name in names:
        return ""
    same = [n for n in names if n.casefold() == name.casefold()]
    return f"matches {' and '.join(repr(n) for n in same)} only by case" if len(same) > 1 else ""


def resolve_columns(tree: Expr, names: Iterable[str], *, context: str = "") -> Expr:
    """Rewrite every column reference of ``tree`` to the table's spelling.

    Parameters
    ----------
    tree : Expr
        A parsed predicate.
    names : iterable of str
        The table's column names.
    context : str
        Where the table is (``"cat.fits HDU 1"``), for the error message.

    Raises
    ------
    ColumnNotFoundError
        ``"where references unknown column 'X' (cat.fits HDU 1); did you mean 'x_1'?"``, or a
        name that is no column's exact spelling and matches several only by case; it is also
        a ``ValueError`` and a ``KeyError``.
    """
    names = list(names)
    mapping: dict[str, str] = {}
    where = f" ({context})" if context else ""
    for name in columns(tree):
        found = match_column(name, names)
        if found is None:
            raise ColumnNotFoundError(
                f"where references unknown column '{name}'{where}{did_you_mean(name, names)}")
        if found != name:
            ambiguity = case_ambiguity(name, names)
            if ambiguity:
                raise ColumnNotFoundError(
                    f"where column '{name}' {ambiguity}{where}; write the one you mean exactly")
            mapping[name] = found
    if not mapping:
        return tree
    try:
        return _rename(tree, mapping)
    except RecursionError:
        raise WhereSyntaxError(TOO_DEEP) from None


def _rename(node: Expr, mapping: dict[str, str]) -> Expr:
    if isinstance(node, Column):
        return Column(mapping.get(node.name, node.name))
    if not isinstance(node, Node):
        return node
    changes = {name: _rename(getattr(node, name), mapping) for name in node.FIELDS
               if isinstance(getattr(node, name), Expr)}
    return node.replace(**changes) if changes else node

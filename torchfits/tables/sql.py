"""`torchfits.sql`: run DuckDB SQL where FITS files appear as tables.

``FROM 'catalog.fits'`` (or a glob) and ``fits('path', hdu=2)`` are replaced by names of
torchfits datasets registered on the connection, so DuckDB pushes projection and filters into
the FITS decoder; Parquet, CSV and other DuckDB sources work alongside. The connection also
gets the where dialect's sky functions as SQL macros, ``separation(ra, dec, ra0, dec0)`` and
``cone(ra, dec, ra0, dec0, radius)`` (docs/sky.md).
"""
from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

from ..fits.aliases import HduArg
from ..fits.paths import is_glob

if TYPE_CHECKING:  # pragma: no cover - typing only; duckdb is optional
    import duckdb

__all__ = ["sql"]

_TOKEN = re.compile(r"""
    (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<number>\d+(?:\.\d*)?)
  | (?P<space>\s+)
  | (?P<op>.)
""", re.X | re.S)
_TABLE_KEYWORDS = {"FROM", "JOIN"}
# keywords that end a FROM list (a comma after one of these does not introduce a table)
_CLAUSES = {"SELECT", "FROM", "JOIN", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "QUALIFY",
            "WINDOW", "UNION", "EXCEPT", "INTERSECT", "ON", "USING", "VALUES", "SET", "RETURNING"}
_counter = itertools.count()

# Vincenty's formula as torchfits.query.sky.separation_deg computes it (row first, centre second)
_SEPARATION = """degrees(atan2(
    sqrt(pow(cos(radians(dec0)) * sin(radians(ra0) - radians(ra)), 2)
         + pow(cos(radians(dec)) * sin(radians(dec0))
               - sin(radians(dec)) * cos(radians(dec0)) * cos(radians(ra0) - radians(ra)), 2)),
    sin(radians(dec)) * sin(radians(dec0))
    + cos(radians(dec)) * cos(radians(dec0)) * cos(radians(ra0) - radians(ra))))"""
# the declination band first, a cheap test before the trigonometry
_MACROS = (
    f"CREATE TEMP MACRO IF NOT EXISTS separation(ra, dec, ra0, dec0) AS {_SEPARATION}",
    "CREATE TEMP MACRO IF NOT EXISTS cone(ra, dec, ra0, dec0, radius) AS "
    "dec >= dec0 - radius - 1e-9 AND dec <= dec0 + radius + 1e-9 "
    "AND separation(ra, dec, ra0, dec0) <= radius",
)


def _register_sky_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the temporary macros ``separation`` and ``cone`` on ``con`` (kept if it has
    them already)."""
    for statement in _MACROS:
        con.execute(statement)


def _tokens(query: str) -> list[tuple[str, str, int, int]]:
    out = []
    for m in _TOKEN.finditer(query):
        out.append((m.lastgroup or "op", m.group(), m.start(), m.end()))
    return out


def _literal(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _looks_like_fits(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return bool(re.search(r"\.(fits?|fts)(\.(gz|fz))?$", name, re.I)) or (
        is_glob(name) and bool(re.search(r"\.fi?t", name, re.I)))


def _call_arguments(tokens: list[tuple[str, str, int, int]],
                    i: int) -> tuple[list[tuple[str | None, Any]], int]:
    """Parse ``( 'path' [, name = value]... )`` starting at the ``(`` token index ``i``; return
    the arguments and the index of the closing ``)``."""
    args: list[tuple[str | None, Any]] = []
    sig = [k for k in range(i + 1, len(tokens)) if tokens[k][0] not in ("space", "comment")]
    pos = 0
    name: str | None = None
    while pos < len(sig):
        kind, text, _, _ = tokens[sig[pos]]
        if kind == "op" and text == ")":
            return args, sig[pos]
        if kind == "op" and text == ",":
            pos += 1
            continue
        if kind == "ident" and pos + 1 < len(sig) and tokens[sig[pos + 1]][1] in ("=", ":"):
            name = text.strip('"').lower()
            pos += 2
            if tokens[sig[pos]][1] == "=":  # ":=" spelling
                pos += 1
            continue
        if kind == "string":
            value: Any = _literal(text)
        elif kind == "number":
            value = int(text) if text.isdigit() else float(text)
        elif kind == "ident" and text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            raise ValueError(f"fits(...): cannot read argument {text!r}")
        args.append((name, value))
        name = None
        pos += 1
    raise ValueError("fits(...): missing closing parenthesis")


def sql(query: str, *, con: duckdb.DuckDBPyConnection | None = None,
        hdu: HduArg = 1, storage_options: dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
    """Run a DuckDB query in which FITS files are tables.

    Parameters
    ----------
    query : str
        SQL. ``FROM 'path.fits'`` / ``JOIN 'dir/*.fits'`` (a quoted path whose name ends in
        ``.fits``/``.fit``/``.fts``, optionally ``.gz``/``.fz``, or a glob of them) reads HDU ``hdu``;
        ``fits('path', hdu=2, add_path_column=true)`` chooses the HDU (and options) per table;
        ``'cat.fits[CAT,2]'`` (EXTNAME, EXTVER) or ``'cat.fits[2]'`` names it in the path.
        The macros ``cone(ra, dec, ra0, dec0, radius)`` and ``separation(ra, dec, ra0, dec0)``
        (degrees, as in the where dialect; docs/sky.md) are available.
    con : duckdb.DuckDBPyConnection, optional
        Connection to run on (the datasets are registered on it under ``__torchfits_<n>``);
        default: a new in-memory connection.
    hdu : int or str
        Default table HDU for quoted paths.
    storage_options : dict, optional
        fsspec options for quoted URLs (``'https://.../cat.fits'``, ``'s3://bucket/*.fits'``);
        see ``docs/remote.md``.

    Returns
    -------
    duckdb.DuckDBPyRelation
        Lazy: the files are read when the relation is fetched.
    """
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - exercised without duckdb only
        raise ImportError("torchfits.sql needs duckdb: pip install duckdb") from exc
    from .dataset import dataset

    if con is None:
        con = duckdb.connect()
    _register_sky_macros(con)
    tokens = _tokens(query)
    pieces: list[str] = []
    last = 0
    prev = ""  # previous significant token, upper-cased
    clause = [""]  # the last clause keyword at each parenthesis depth
    k = 0
    while k < len(tokens):
        kind, text, start, end = tokens[k]
        if kind in ("space", "comment"):
            k += 1
            continue
        if text == "(":
            clause.append("")
        elif text == ")" and len(clause) > 1:
            clause.pop()
        elif kind == "ident" and text.upper() in _CLAUSES:
            clause[-1] = text.upper()
        table_position = prev in _TABLE_KEYWORDS or (prev == "," and clause[-1] == "FROM")
        replacement = None
        stop = end
        if kind == "string" and table_position and _looks_like_fits(_literal(text)):
            replacement = dataset(_literal(text), hdu, storage_options=storage_options)
        elif kind == "ident" and text.lower() == "fits" and table_position:
            nxt = next((j for j in range(k + 1, len(tokens))
                        if tokens[j][0] not in ("space", "comment")), None)
            if nxt is not None and tokens[nxt][1] == "(":
                args, close = _call_arguments(tokens, nxt)
                positional = [v for n, v in args if n is None]
                options = {n: v for n, v in args if n is not None}
                if len(positional) != 1 or not isinstance(positional[0], str):
                    raise ValueError("fits(...) takes one quoted path (or glob) and name=value options")
                unknown = set(options) - {"hdu", "add_path_column"}
                if unknown:
                    raise ValueError(f"fits(...): unknown option(s) {', '.join(sorted(unknown))}")
                replacement = dataset(positional[0], options.get("hdu", hdu),
                                      add_path_column=bool(options.get("add_path_column", False)),
                                      storage_options=storage_options)
                stop = tokens[close][3]
                k = close
        if replacement is not None:
            name = f"__torchfits_{next(_counter)}"
            con.register(name, replacement)
            pieces.append(query[last:start])
            pieces.append(name)
            last = stop
            prev = "TABLE"
        else:
            prev = text.upper()
        k += 1
    pieces.append(query[last:])
    return con.sql("".join(pieces))

"""``torchfits sql "SELECT … FROM 'cats/*.fits'"``: DuckDB over FITS datasets.

Quoted FITS paths and globs (and ``fits('path', hdu=2)``) become torchfits datasets, so DuckDB
pushes projections and filters into the decoder as it does from Python (`torchfits.sql`). The
result prints as an aligned table (or JSON), or goes to ``-o out.parquet|csv|tsv|json|jsonl|
arrow|fits`` (``-`` is stdout).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .common import EXIT_OK, UsageError, check_outputs, emit, format_options, hdus


def _arrow_table(relation: Any) -> Any:
    """The relation's result as a pyarrow.Table (duckdb ≥ 1.4 and older spellings)."""
    for name in ("to_arrow_table", "fetch_arrow_table"):
        fn = getattr(relation, name, None)
        if callable(fn):
            return fn()
    result = relation.arrow()
    return result.read_all() if hasattr(result, "read_all") else result


class _PandasAbsent:
    """An import hook that reports pandas absent. DuckDB imports pandas (~0.5 s, more than the
    query) as soon as a Python object is registered, to ask whether it is a DataFrame; the
    command hands DuckDB only Arrow streams and prints or writes Arrow tables, so its one-query
    process never needs pandas. Installed only where pandas is not imported yet."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def cmd_sql(args: argparse.Namespace) -> int:
    """Run the query; print the rows or write them to ``-o``."""
    hook = None if "pandas" in sys.modules else _PandasAbsent()
    if hook is not None:
        sys.meta_path.insert(0, hook)
    try:
        return _run_sql(args)
    finally:
        if hook is not None:
            sys.meta_path.remove(hook)


def _run_sql(args: argparse.Namespace) -> int:
    try:
        import duckdb
    except ImportError:
        raise ImportError("torchfits sql needs duckdb: pip install 'torchfits[sql]'") from None
    from ..tables.sql import sql

    spec = hdus(args.hdu)
    if spec is None or len(spec) != 1:
        raise UsageError("-e/--hdu takes one table HDU (index or EXTNAME)")
    fmt = None
    if args.out:  # the writers (NumPy, the image modules) only when the rows go to a file
        from .inspect_commands import output_format
        check_outputs([args.out], args.overwrite)
        fmt = output_format(args.out, args.to)
    elif args.to:
        raise UsageError("--to needs -o/--out (use -f json/jsonl for JSON on stdout)")
    con = duckdb.connect()
    try:
        relation = sql(args.query, con=con, hdu=spec[0])
        if relation is None:  # a statement without a result (SET, CREATE ...)
            return EXIT_OK
        table = _arrow_table(relation)
    except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
            duckdb.SyntaxException, duckdb.ConversionException,
            duckdb.TypeMismatchException) as exc:
        raise UsageError(_one_line(exc)) from None
    except (duckdb.IOException, duckdb.InvalidInputException) as exc:
        raise OSError(_one_line(exc)) from None
    except ValueError as exc:  # fits(...) arguments the rewriter cannot read
        raise UsageError(str(exc)) from None
    if args.out:
        from .inspect_commands import write_arrow_table
        write_arrow_table(table, args.out, fmt or "csv", overwrite=args.overwrite)
        if args.out != "-":
            print(f"{table.num_rows} rows -> {args.out}", file=sys.stderr)
        return EXIT_OK
    rows = table.to_pylist()
    if args.format == "text":
        if rows:
            emit(rows, "text", columns=table.column_names)
        else:
            sys.stdout.write("  ".join(table.column_names) + "\n")
        print(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})", file=sys.stderr)
    else:
        emit(rows, args.format)
    return EXIT_OK


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``sql`` on the CLI's subparsers and in its command table."""
    p = sub.add_parser("sql", help="run DuckDB SQL where quoted FITS paths/globs are tables")
    p.add_argument("query", help="SQL, e.g. \"SELECT id, ra FROM 'cats/*.fits' WHERE mag_r < 16\"")
    p.add_argument("-o", "--out", help="write the result: .parquet .csv .tsv .json .jsonl .arrow "
                                       ".fits (- for stdout)")
    p.add_argument("--to", choices=("parquet", "csv", "tsv", "arrow", "json", "jsonl", "fits"),
                   help="output format when the -o extension does not say")
    p.add_argument("--overwrite", action="store_true", help="replace an existing -o output")
    p.add_argument("-e", "--hdu", default="1",
                   help="table HDU for quoted paths: index or EXTNAME (default 1)")
    format_options(p)
    commands["sql"] = cmd_sql

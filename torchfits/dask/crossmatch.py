"""The Dask cross-match: both catalogs cut into HEALPix partitions, one match task per partition.

A first task per input fragment reads its coordinates and columns, gives every row the
partition of its HEALPix cell and, on the right side, also the partitions of its cell's eight
neighbours (the margin); a task per partition then runs the local pair finder of
:mod:`torchfits.sky.crossmatch` on its rows. See docs/sky.md and docs/dask.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..sky.crossmatch import (
    check_radius,
    join_rows,
    match_pairs,
    output_names,
    plan_match,
)

__all__ = ["crossmatch"]

# rows a first-stage task reads at most
_FRAGMENT_ROWS = 1_000_000
_ROW = "__torchfits_row"


def margin_depth(radius: float) -> int:
    """The finest HEALPix order whose cells are at least four times the radius across.

    At that order a point within ``radius`` of another cell lies in one of its cell's eight
    neighbours (the smallest distance between cells that do not touch is about a cell's mean
    size / 1.6, the estimate HATS uses too).
    """
    mean_deg = math.degrees(math.sqrt(4 * math.pi / 12))
    return int(max(0, min(29, math.floor(math.log2(mean_deg / (4 * radius))))))


def _partition_depth(nparts: int, depth: int) -> int:
    # cells enough that nparts contiguous ranges of them are near equal, never finer than depth
    k = 0
    while 12 * 4 ** k < 8 * nparts and k < depth:
        k += 1
    return k


class _Side:
    """One catalog: its pieces (fragments or in-memory tables), the row offset of each, and
    the columns read."""

    def __init__(self, source: Any, ra: str, dec: str, columns: list[str] | None, side: str,
                 fragment_rows: int) -> None:
        import pyarrow as pa

        from ..sky.crossmatch import find_column, is_path_list
        from ..tables.dataset import FitsDataset, dataset

        if isinstance(source, pa.RecordBatch):
            source = pa.Table.from_batches([source])
        if isinstance(source, pa.Table):
            schema = source.schema
            pieces: list[Any] = [source.slice(k, fragment_rows)
                                 for k in range(0, source.num_rows, fragment_rows)]
            counts = [p.num_rows for p in pieces]
        else:
            if isinstance(source, FitsDataset):
                ds = source
            elif isinstance(source, str) or hasattr(source, "__fspath__") or is_path_list(source):
                ds = dataset(source)
            else:
                raise TypeError(f"the {side} catalog must be a path, glob, list of paths, FitsDataset or "
                                f"pyarrow Table/RecordBatch, got {type(source).__name__}")
            if ds._filter is not None:
                raise ValueError(f"the {side} dataset has a filter; cross-match the unfiltered catalog "
                                 "(row numbers are positions in the files)")
            schema = ds.schema
            pieces = list(ds.split(fragment_rows).get_fragments())
            counts = [f.num_rows for f in pieces]
        names = list(schema.names)
        self.ra, self.dec = find_column(names, ra, side), find_column(names, dec, side)
        self.columns = names if columns is None else [find_column(names, c, side) for c in columns]
        self.read = list(dict.fromkeys([*self.columns, self.ra, self.dec]))
        self.schema = pa.schema([schema.field(n) for n in self.columns])
        self.pieces = pieces
        self.offsets = list(np.cumsum([0, *counts[:-1]], dtype=np.int64).tolist()) if counts else []
        self.nullable = _nullable(pieces, self.schema)


def _nullable(pieces: Sequence[Any], schema: Any) -> frozenset[str]:
    import pyarrow as pa

    from .partitions import nullable_columns

    frags = [p for p in pieces if not isinstance(p, pa.Table)]
    return nullable_columns(frags, schema) if frags else frozenset(
        f.name for f in schema if pa.types.is_integer(f.type) and f.nullable)


def split_piece(piece: Any, offset: int, read: list[str], ra: str, dec: str, nparts: int, depth: int,
                part_depth: int, margin: bool) -> list[Any]:
    """One piece's rows (plus their row numbers) cut into the partitions of their HEALPix cells;
    with ``margin``, a row also goes to the partitions of its cell's neighbours."""
    import astropy.units as u
    import cdshealpix.nested as healpix
    import pyarrow as pa

    from ..sky.crossmatch import coordinates
    from .partitions import task_threads

    if isinstance(piece, pa.Table):
        table = piece.select(read)
    else:
        table = piece.to_table(columns=read, batch_size=max(1, piece.num_rows), threads=task_threads(None))
    table = table.append_column(_ROW, pa.array(np.arange(offset, offset + table.num_rows, dtype=np.int64)))
    ra_deg, dec_deg = coordinates(table, ra), coordinates(table, dec)
    ok = np.flatnonzero(np.isfinite(ra_deg) & np.isfinite(dec_deg) & (np.abs(dec_deg) <= 90.0))
    cells = healpix.lonlat_to_healpix((ra_deg[ok] % 360.0) * u.deg, dec_deg[ok] * u.deg, depth,
                                      num_threads=1).astype(np.int64)
    per_part = 12 * 4 ** part_depth
    shift = 2 * (depth - part_depth)
    own = (cells >> shift) * nparts // per_part
    rows, parts = ok, own
    if margin:
        around = healpix.neighbours(cells.astype(np.uint64), depth, num_threads=1).astype(np.int64)
        around = np.where(around < 0, cells[:, None], around)
        groups = (around >> shift) * nparts // per_part
        mixed = np.flatnonzero(np.any(groups != own[:, None], axis=1))
        if mixed.size:
            key = np.unique(mixed[:, None] * nparts + groups[mixed]).astype(np.int64)
            extra_rows, extra_parts = key // nparts, key % nparts
            keep = extra_parts != own[extra_rows]
            rows = np.concatenate([ok, ok[extra_rows[keep]]])
            parts = np.concatenate([own, extra_parts[keep]])
    # by partition, then row: inside a partition positions follow the row numbers
    order = np.lexsort((rows, parts))
    rows, parts = rows[order], parts[order]
    bounds = np.searchsorted(parts, np.arange(nparts + 1))
    return [table.take(pa.array(rows[bounds[p]:bounds[p + 1]])) for p in range(nparts)]


def match_partition(left: list[Any], right: list[Any], lside: dict[str, Any], rside: dict[str, Any],
                    radius: float, how: str, suffixes: tuple[str, str],
                    nullable: frozenset[str]) -> Any:
    """One partition's matches as a pandas DataFrame indexed by the left row number."""
    import pandas as pd
    import pyarrow as pa

    from ..sky.crossmatch import coordinates
    from .partitions import arrow_to_pandas

    lt = pa.concat_tables(left)
    rt = pa.concat_tables(right)
    # pieces arrive in row order, so positions keep the order of the row numbers: the local
    # tie rule (lowest right row) holds
    li, ri, sep = match_pairs(coordinates(lt, lside["ra"]), coordinates(lt, lside["dec"]),
                              coordinates(rt, rside["ra"]), coordinates(rt, rside["dec"]), radius, how)
    out = join_rows(lt, lside["columns"], rt, rside["columns"], li, ri, sep, suffixes)
    df = arrow_to_pandas(out, nullable)
    df.index = pd.Index(lt.column(_ROW).to_numpy()[li] if li.size else np.empty(0, np.int64))
    return df


def crossmatch(left: Any, right: Any, radius_deg: float, *, ra: str | tuple[str, str] = ("ra", "ra"),
               dec: str | tuple[str, str] = ("dec", "dec"),
               columns: tuple[Sequence[str] | None, Sequence[str] | None] | None = None,
               how: str = "nearest", suffixes: tuple[str, str] = ("_left", "_right"),
               npartitions: int | None = None, fragment_rows: int = _FRAGMENT_ROWS) -> Any:
    """`torchfits.crossmatch` on Dask, for catalogs larger than memory (a lazy DataFrame).

    Parameters
    ----------
    left, right : path, glob, list of paths, FitsDataset, pyarrow.Table or pyarrow.RecordBatch
        The catalogs (files are read by the workers, ``fragment_rows`` rows a task).
    radius_deg, ra, dec, columns, how, suffixes
        As `torchfits.crossmatch`.
    npartitions : int, optional
        Match tasks: ranges of HEALPix cells of equal area. Default: one per left fragment.
    fragment_rows : int
        Rows a reading task reads at most.

    Returns
    -------
    dask.dataframe.DataFrame
        The columns of `torchfits.crossmatch`, indexed by the left row number (its position in
        the left catalog). Partitions follow the sky; inside one, rows are in left row order,
        then by separation, so ``ddf.compute().sort_index(kind="stable")`` equals the local
        result.
    """
    import dask.dataframe as dd
    import pandas as pd
    from dask.delayed import delayed

    from .partitions import arrow_to_pandas

    plan = plan_match(radius_deg, ra=ra, dec=dec, columns=columns, how=how, suffixes=suffixes)
    if not (isinstance(fragment_rows, int) and fragment_rows > 0):
        raise ValueError(f"fragment_rows must be a positive integer, got {fragment_rows!r}")
    sides = [_Side(src, plan.ra[k], plan.dec[k], plan.columns[k], name, fragment_rows)
             for k, (src, name) in enumerate(((left, "left"), (right, "right")))]
    lnames, rnames = output_names(sides[0].columns, sides[1].columns, plan.suffixes)
    nullable = frozenset(n for s, names in zip(sides, (lnames, rnames), strict=True)
                         for c, n in zip(s.columns, names, strict=True) if c in s.nullable)
    nparts = max(1, int(npartitions) if npartitions is not None else len(sides[0].pieces))
    depth = margin_depth(check_radius(plan.radius))
    part_depth = _partition_depth(nparts, depth)

    empty = join_rows(sides[0].schema.empty_table(), sides[0].columns, sides[1].schema.empty_table(),
                      sides[1].columns, np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0),
                      plan.suffixes)
    meta = arrow_to_pandas(empty, nullable)
    meta.index = pd.Index([], dtype="int64")
    if not sides[0].pieces or not sides[1].pieces:
        return dd.from_pandas(meta, npartitions=1)  # type: ignore[no-untyped-call]

    split = delayed(split_piece, pure=True, nout=nparts)
    cut = [[split(p, off, s.read, s.ra, s.dec, nparts, depth, part_depth, k == 1)
            for p, off in zip(s.pieces, s.offsets, strict=True)] for k, s in enumerate(sides)]
    info = [{"ra": s.ra, "dec": s.dec, "columns": s.columns} for s in sides]
    match = delayed(match_partition, pure=True)
    parts = [match([c[g] for c in cut[0]], [c[g] for c in cut[1]], info[0], info[1], plan.radius,
                   plan.how, plan.suffixes, nullable) for g in range(nparts)]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)

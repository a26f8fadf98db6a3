"""`torchfits.scan_polars`: FITS tables as a Polars LazyFrame through Polars' IO-plugin interface,
with projection, predicates and ``n_rows`` pushed into the torchfits dataset scanner.

Polars hands an IO plugin its predicate as a Polars expression. Polars already knows how to turn
one into a pyarrow filter (that is how ``scan_pyarrow_dataset`` pushes down); we reuse exactly
that translation by letting Polars plan a scan of a probe dataset and catching the filter it
passes, so both routes push the same terms, widened where Polars' NaN ordering differs from
pyarrow's (`polars_superset`). The full Polars predicate is applied again to the (already
reduced) rows, so terms Polars could not translate still hold and every row gets Polars' answer.
`polars_cone` writes the where dialect's ``cone()`` as a Polars expression (docs/sky.md).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

__all__ = ["scan_polars", "pyarrow_filter_of", "polars_superset", "polars_cone"]


def _polars() -> Any:
    try:
        import polars as pl
    except ImportError as exc:  # pragma: no cover - exercised without polars only
        raise ImportError("scan_polars needs polars: pip install polars") from exc
    return pl


class _Captured(Exception):
    """Raised by the probe once Polars has handed over its filter."""


@functools.cache
def _probe_class() -> Any:
    import pyarrow.dataset as pds

    class _FilterProbe(pds.Dataset):
        """A schema-only dataset that records the filter Polars pushes into it (never scanned)."""

        def __init__(self, schema: Any) -> None:
            self._schema = schema
            self.captured = False
            self.filter: Any = None

        @property
        def schema(self) -> Any:
            return self._schema

        def _record(self, *args: Any, filter: Any = None, **kwargs: Any) -> Any:
            self.captured, self.filter = True, filter
            raise _Captured

        to_batches = to_table = scanner = _record

        def head(self, num_rows: Any = None, *args: Any, filter: Any = None, **kwargs: Any) -> Any:
            self._record(filter=filter)

    return _FilterProbe


def pyarrow_filter_of(predicate: Any, schema: Any) -> Any | None:
    """The pyarrow filter Polars' ``scan_pyarrow_dataset`` would push for ``predicate`` (the
    terms it can translate, ANDed), or None when it pushes nothing."""
    pl = _polars()
    probe = _probe_class()(schema)
    try:
        pl.scan_pyarrow_dataset(probe).filter(predicate).collect()
    except Exception:  # Polars wraps the probe's exception in its own error types
        pass
    return probe.filter if probe.captured else None


def polars_superset(pushed: Any, schema: Any) -> Any | None:
    """Widen a pushed filter so it keeps every row Polars' own predicate can keep.

    Polars orders NaN above every number and equal to itself (``NaN > 21`` and ``NaN == NaN``
    are true), while pyarrow, the row kernel and SQL treat a NaN comparison as false/unknown.
    Each top-level term that reads a float column is ORed with ``isnan`` of those columns; the
    full Polars predicate, applied to the batches afterwards, then decides those rows. Returns
    a where-tree, or None (push nothing) for a filter our tree cannot represent.
    """
    import pyarrow as pa

    from ..query import expr as _expr

    tree = _expr.from_pyarrow(pushed, schema)
    if tree is None:
        return None
    types = {f.name: f.type for f in schema}
    terms = []
    for term in _expr.conjuncts(tree):
        widened: Any = term
        for name in _expr.columns(term):
            if name in types and pa.types.is_floating(types[name]):
                widened = _expr.Or(widened, _expr.IsNan(_expr.Column(name)))
        terms.append(widened)
    return _expr.and_all(terms)


def scan_polars(source: Any, hdu: Any = 1, *, schema: Any = None, add_path_column: bool = False,
                index: Any = None, storage_options: dict | None = None) -> Any:
    """Scan FITS tables lazily as a ``polars.LazyFrame``.

    Parameters
    ----------
    source : str, os.PathLike, glob, directory, list, or a `FitsDataset`
        The files (or an already opened dataset; then the other arguments are ignored).
    hdu, schema, add_path_column, index, storage_options
        As for `torchfits.dataset`.

    Returns
    -------
    polars.LazyFrame
        Collecting it decodes only the columns the query uses; filters Polars can translate to
        pyarrow reach the predicate kernel and statistics; ``head``/``limit`` stop the scan early.
    """
    pl = _polars()
    from polars.io.plugins import register_io_source

    from .dataset import DEFAULT_BATCH_SIZE, FitsDataset, dataset

    ds = source if isinstance(source, FitsDataset) else dataset(
        source, hdu, schema=schema, add_path_column=add_path_column, index=index,
        storage_options=storage_options)
    arrow_schema = ds.schema
    polars_schema = pl.from_arrow(arrow_schema.empty_table()).schema

    def io_source(with_columns: list[str] | None, predicate: Any, n_rows: int | None,
                  batch_size: int | None) -> Iterator[Any]:
        columns = list(with_columns) if with_columns is not None else list(arrow_schema.names)
        pushed = None
        needed = list(columns)
        if predicate is not None:
            pushed = pyarrow_filter_of(predicate, arrow_schema)
            if pushed is not None:
                pushed = polars_superset(pushed, arrow_schema)
            needed += [c for c in predicate.meta.root_names() if c not in needed]
        remaining = n_rows
        if remaining is not None and remaining <= 0:
            return
        size = batch_size or DEFAULT_BATCH_SIZE
        if remaining is not None and predicate is None:
            # a plain head(): read just enough rows, in order, one chunk at a time
            scanner = ds.scanner(columns=needed, batch_size=max(1, min(size, remaining)), use_threads=False)
        else:
            scanner = ds.scanner(columns=needed, filter=pushed, batch_size=size)
        for batch in scanner.to_batches():
            frame = pl.from_arrow(batch)
            if predicate is not None:
                frame = frame.filter(predicate)
            frame = frame.select(columns)
            if remaining is not None:
                frame = frame.head(remaining)
                remaining -= frame.height
            if frame.height:
                yield frame
            if remaining is not None and remaining <= 0:
                return

    return register_io_source(io_source, schema=polars_schema, explain_name="torchfits",
                              explain_detail=f"{len(ds.files)} file(s)")


def polars_cone(ra: str, dec: str, ra0: float, dec0: float, radius: float) -> Any:
    """The where dialect's ``cone(ra, dec, ra0, dec0, radius)`` as a Polars expression.

    Parameters
    ----------
    ra, dec : str
        The coordinate columns, degrees.
    ra0, dec0, radius : float
        The centre and radius, degrees.

    Returns
    -------
    polars.Expr
        True for rows within ``radius`` of the centre (boundary included; Vincenty's separation,
        as astropy computes it), false for NaN, null for null. Its declination band comes first,
        so `scan_polars` pushes it into the scan as a range filter.
    """
    from ..query.sky import cone_box

    pl = _polars()
    box = cone_box(ra0, dec0, radius)  # checks the centre and radius
    rad = math.pi / 180.0
    lat1 = pl.col(dec).cast(pl.Float64) * rad
    dlon = math.radians(ra0) - pl.col(ra).cast(pl.Float64) * rad
    s2, c2 = math.sin(math.radians(dec0)), math.cos(math.radians(dec0))
    num1 = dlon.sin() * c2
    num2 = lat1.cos() * s2 - lat1.sin() * c2 * dlon.cos()
    den = lat1.sin() * s2 + lat1.cos() * c2 * dlon.cos()
    sep = pl.arctan2((num1 * num1 + num2 * num2).sqrt(), den) * (180.0 / math.pi)
    band = (pl.col(dec) >= box.dec_lo) & (pl.col(dec) <= box.dec_hi)
    return band & (sep <= float(radius))

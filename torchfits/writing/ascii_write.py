"""Write ASCII (``XTENSION='TABLE'``) tables: integers as ``I20``, floats as ``E25.15`` (``D25.17``
for float64), strings as ``A<width>``; logical columns have no ASCII form. Nulls of numeric
columns (masked values, NaN, infinities) are cells holding ``TNULLn = 'NULL'``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..fits.header import Card
from ..fits.layout import finish_header
from .atomic import Sink
from .table_inputs import arrow_column, numpy_column, to_arrow_stream
from .table_plan import ColumnValues

__all__ = ["write_ascii_hdu"]


def _columns(data: Any) -> dict[str, ColumnValues]:
    if type(data).__module__.startswith("astropy.table") and hasattr(data, "colnames"):
        from .table_inputs import astropy_table_parts

        data = astropy_table_parts(data)[0]  # masked columns keep their masks
    if isinstance(data, dict):
        if not data:
            raise ValueError("data must be a non-empty dictionary of columns")
        return {str(k): numpy_column(str(k), v) for k, v in data.items()}
    stream = to_arrow_stream(data)
    if stream is None:
        raise TypeError(f"Unsupported table data type: {type(data).__name__}")
    table = stream.read_all() if hasattr(stream, "read_all") else stream
    table = table.combine_chunks()
    return {f.name: arrow_column(f.name, table.column(i).chunk(0) if table.column(i).num_chunks
                                 else table.column(i).combine_chunks())
            for i, f in enumerate(table.schema)}


#: TNULLn of numeric ASCII columns with nulls: no number reads as it.
NULL_TEXT = "NULL"


def _format_column(name: str, col: ColumnValues) -> tuple[str, list[bytes], Any]:
    """(TFORM, cell texts, TNULL string or None) of one column."""
    data = col.data
    if col.offsets is not None or data.ndim != 1:
        raise TypeError(f"column {name!r}: ASCII tables hold scalar columns only")
    kind = data.dtype.kind
    if kind == "b":
        raise TypeError(f"column {name!r}: ASCII tables cannot hold logical (boolean) columns")
    if kind in "iuf":
        if kind in "iu":
            tform, text = "I20", [f"{int(v):>20d}".encode() for v in data]
        elif data.dtype.itemsize == 8:
            tform, text = "D25.17", [f"{float(v):>25.17E}".replace("E", "D").encode() for v in data]
        else:
            tform, text = "E25.15", [f"{float(v):>25.15E}".encode() for v in data]
        # Nulls (masked values) are cells holding TNULLn, not the fill value under the mask;
        # NaN and infinities have no ASCII-table form (Fortran-style numbers), so they are
        # nulls too.
        mask = np.zeros(len(data), bool) if col.mask is None else np.asarray(col.mask, bool)
        if kind == "f":
            mask = mask | ~np.isfinite(data)
        if not mask.any():
            return tform, text, None
        width = len(text[0])
        null = NULL_TEXT.ljust(width).encode()  # as CFITSIO matches it: from the first column
        return tform, [null if m else t for t, m in zip(text, mask)], NULL_TEXT
    if kind == "S":
        width = max(data.dtype.itemsize, 1)
        return f"A{width}", [bytes(v).ljust(width) for v in data], None
    raise TypeError(f"column {name!r}: dtype {data.dtype} has no ASCII table format")


def write_ascii_hdu(sink: Sink, item: Any, *, checksum: bool = False) -> tuple[int, int, int]:
    """Write an ASCII table HDU from a `TableData`; returns its byte span."""
    from .cards import header_lines

    columns = _columns(item.columns)
    lengths = {len(c) for c in columns.values()}
    if len(lengths) > 1:
        counts = ", ".join(f"{k}={len(c)}" for k, c in columns.items())
        raise ValueError(f"Column row count mismatch: {counts}")
    nrows = lengths.pop() if lengths else 0
    col_cards: list[Card] = []
    cells = []
    tbcol = 1
    for n, (name, col) in enumerate(columns.items(), start=1):
        tform, text, tnull = _format_column(name, col)
        width = len(text[0]) if text else int(tform[1:].split(".")[0])
        col_cards += [Card(f"TTYPE{n}", name), Card(f"TFORM{n}", tform), Card(f"TBCOL{n}", tbcol)]
        if tnull is not None:
            col_cards.append(Card(f"TNULL{n}", tnull))
        cells.append(np.array(text, dtype=f"S{width}") if text else np.zeros(0, f"S{width}"))
        tbcol += width + 1  # one blank between fields keeps the text readable
    row_len = tbcol - 2 if columns else 0
    cards = [Card("XTENSION", "TABLE", "ASCII table extension"), Card("BITPIX", 8),
             Card("NAXIS", 2), Card("NAXIS1", row_len, "width of table in characters"),
             Card("NAXIS2", nrows), Card("PCOUNT", 0), Card("GCOUNT", 1),
             Card("TFIELDS", len(columns))] + col_cards
    header_offset = sink.offset
    header_text, _ = header_lines(cards, item.header, table=True, checksum=checksum)
    sink.write(finish_header(header_text))
    data_offset = sink.offset
    rows = np.full((nrows, row_len), ord(" "), dtype=np.uint8)
    pos = 0
    for arr in cells:
        w = arr.dtype.itemsize
        if nrows:
            rows[:, pos:pos + w] = arr.view(np.uint8).reshape(nrows, w)
        pos += w + 1
    sink.write(rows.reshape(-1))
    sink.pad(b" ")
    return header_offset, data_offset, rows.size

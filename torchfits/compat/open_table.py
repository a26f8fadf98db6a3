"""``open_table_reader``: one table HDU opened once for many tensor reads (docs/compatibility.md).

The handle keeps the file version it opened (its map and column layout); reads go through the
same tensor decode as `torchfits.table.read_torch`.
"""
from __future__ import annotations

from typing import Any

__all__ = ["open_table_reader", "TableReaderHandle"]


class TableReaderHandle:
    """A table HDU opened for repeated `read_torch` calls; a context manager.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    hdu : int or str
        Table HDU index or EXTNAME (``None``/``"auto"`` are refused).

    Attributes
    ----------
    hdu : int
        The resolved 0-based HDU index.
    path : str
        The file.

    Raises
    ------
    RuntimeError
        For an image HDU ("Failed to get table dimensions"); use after `close` raises
        ``RuntimeError("TableReaderHandle is closed")``.
    """

    def __init__(self, path: Any, hdu: Any = 1) -> None:
        from .table import check_table_hdu, open_source

        check_table_hdu(hdu, "open_table_reader")
        self._source: Any = open_source(path, hdu)
        self.path: str = self._source.path
        self.hdu: int = self._source.entry.index
        self._closed = False

    def _open(self) -> Any:
        if self._closed:
            raise RuntimeError("TableReaderHandle is closed")
        return self._source

    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self._closed

    def num_rows(self) -> int:
        """Rows in the table (NAXIS2)."""
        return int(self._open().nrows)

    def read_torch(self, columns: Any = None, start_row: int = 1, num_rows: int = -1,
                   device: Any = "cpu") -> dict[str, Any]:
        """Rows ``start_row`` (1-based) onwards as a dict of tensors, as `table.read_torch`.

        ``num_rows=-1`` reads to the end, 0 gives empty columns; a table without rows gives
        ``{}``. There is no ``where``: filter with `table.read_torch` instead.
        """
        from .._torch_adapter import validate_device
        from .table import check_start_rows, read_torch_source

        src = self._open()
        start_row, num_rows = check_start_rows(start_row, num_rows)
        return read_torch_source(src, columns=columns, start_row=start_row, num_rows=num_rows,
                                 device=validate_device(device), where=None)

    def close(self) -> None:
        """Release the file; later calls raise RuntimeError. Closing twice is harmless."""
        self._closed = True
        self._source = None

    def __enter__(self) -> TableReaderHandle:
        self._open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"TableReaderHandle(path={self.path!r}, hdu={self.hdu}, {state})"


def open_table_reader(path: Any, hdu: Any = 1) -> TableReaderHandle:
    """Open a table HDU once for many `TableReaderHandle.read_torch` calls.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    hdu : int or str
        Table HDU index (0-based) or EXTNAME.

    Returns
    -------
    TableReaderHandle
        Usable with or without ``with`` (the caller closes it).
    """
    return TableReaderHandle(path, hdu)


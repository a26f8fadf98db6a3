"""Table writes and in-file table edits behind `torchfits.table`: write, append/insert/update/
delete rows, insert/replace/rename/drop columns.

Edits work on the raw row bytes (one ``(nrows, NAXIS1)`` byte matrix) and the heap; column
keyword cards are carried verbatim and renumbered. Most edits rewrite the file atomically;
appending rows to a last HDU without a heap, updating fixed-width cells and renaming columns
patch the file in place instead, writing new bytes before the header card that exposes them.
"""
from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FitsError, QuantizeError, UInt64WriteError
from ..fits.columns import ColumnSpec, parse_columns
from ..fits.hdu_index import HduEntry, HduIndex, get_index, invalidate
from ..fits.header import Header, format_card
from ..fits.layout import CARD, padded
from ..fits.rows import validate_row_slice
from .atomic import atomic_output, in_place_errors, require_file
from .cards import card_bytes
from .hdu_bytes import card_key, header_from_raw, raw_cards
from .table_inputs import numpy_column
from .table_plan import ColumnPlan, ColumnValues, column_cards, encode_rows, plan_column

__all__ = ["write", "append_rows", "insert_rows", "update_rows", "delete_rows", "insert_column",
           "replace_column", "rename_columns", "drop_columns"]

_COLUMN_CARD = re.compile(rb"^(T[A-Z]{3,5})(\d+)$")
_TABLE_STRUCT = {b"NAXIS1", b"NAXIS2", b"PCOUNT", b"TFIELDS", b"THEAP", b"CHECKSUM", b"DATASUM"}
_UNSIGNED_TZERO = {"B": -128, "I": 32768, "J": 2147483648, "K": 9223372036854775808}
_UNSIGNED_DTYPE = {"B": np.int8, "I": np.uint16, "J": np.uint32, "K": np.uint64}


# ------------------------------------------------------------------------------ table.write


def write(path: Any, data: Any, *, schema: Mapping[str, Any] | None = None, header: Any = None,
          overwrite: bool = False, extname: str | None = None, table_type: str = "binary",
          quantize: Any = None) -> None:
    """`torchfits.table.write`: an empty primary HDU and one table HDU (see its docstring)."""
    from ..errors import FitsWriteError, HeaderCardError
    from .api import write_hdus
    from .atomic import check_target
    from .cards import checked_header
    from .items import TableData

    if table_type not in ("binary", "ascii"):
        raise ValueError("table_type must be 'binary' or 'ascii'")
    if isinstance(data, Mapping) and not data:
        raise ValueError("data must be a non-empty dictionary of columns")
    target = check_target(path, overwrite=overwrite)
    hdr = checked_header(header, target)
    if extname is not None:
        hdr = Header(hdr) if hdr is not None else Header()
        hdr["EXTNAME"] = str(extname)
    item = TableData(data, hdr, schema=schema, table_type=table_type, quantize=quantize)
    try:
        write_hdus(target, [item], overwrite=overwrite)
    except (KeyError, FileExistsError, UInt64WriteError, QuantizeError, HeaderCardError):
        raise
    except (ValueError, TypeError, OSError) as exc:
        if isinstance(exc, FitsError) and not isinstance(exc, (ValueError, TypeError)):
            raise
        raise FitsWriteError(f"Failed to write FITS file '{target}': {exc}") from exc


# ------------------------------------------------------------------------------ the table model


@dataclass
class _Column:
    """One column during an edit: its spec, its raw keyword cards and its row bytes."""

    spec: ColumnSpec
    cards: list[bytes]           # every TxxxxN card of this column, key renumbered on output
    data: np.ndarray             # (nrows, width) uint8


@dataclass
class _Table:
    index: HduIndex
    entry: HduEntry
    header: Header
    other_cards: list[bytes]     # non-column cards in order, structural ones included
    columns: list[_Column]
    nrows: int
    heap: bytearray = field(default_factory=bytearray)

    @property
    def names(self) -> list[str]:
        return [c.spec.name for c in self.columns]

    def find(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.spec.name == name:
                return i
        lowered = name.lower()
        for i, c in enumerate(self.columns):
            if c.spec.name.lower() == lowered:
                return i
        return -1


def _table_entry(path: Any, hdu: Any) -> tuple[str, HduIndex, HduEntry]:
    target = require_file(path)
    idx = get_index(target)
    entry = idx.resolve(hdu)
    if not entry.is_table:
        kind = "IMAGE" if entry.is_image else entry.kind.upper()
        raise ValueError(f"HDU {entry.index} is not a table (type={kind})")
    return target, idx, entry


def _load(path: Any, hdu: Any, *, ascii_ok: bool = False) -> tuple[str, _Table]:
    target, idx, entry = _table_entry(path, hdu)
    if entry.kind == "table" and not ascii_ok:
        raise NotImplementedError(f"{target}: HDU {entry.index}: this edit supports binary tables only")
    idx.check_data(entry)
    header = idx.header(entry)
    specs = parse_columns(header, "table" if entry.kind == "table" else "bintable")
    buf = idx.source.buffer()
    nrows, row_bytes = entry.nrows, entry.row_bytes
    rows = np.frombuffer(buf, np.uint8, count=nrows * row_bytes, offset=entry.data_offset)
    rows = rows.reshape(nrows, row_bytes)
    per_column: dict[int, list[bytes]] = {}
    other: list[bytes] = []
    for card in raw_cards(idx, entry):
        m = _COLUMN_CARD.match(card_key(card))
        if m and 1 <= int(m.group(2)) <= len(specs):
            per_column.setdefault(int(m.group(2)), []).append(card)
        else:
            other.append(card)
    columns = [_Column(s, per_column.get(s.number, []), rows[:, s.offset:s.offset + s.width])
               for s in specs]
    heap = bytearray(buf[entry.heap_offset:entry.heap_offset + entry.heap_size])
    return target, _Table(idx, entry, header, other, columns, nrows, heap)


def _prefix(card: bytes) -> bytes:
    """``TUNIT`` for a ``TUNIT3`` card (column cards only)."""
    m = _COLUMN_CARD.match(card_key(card))
    return m.group(1) if m else b""


def _renumber(card: bytes, number: int) -> bytes:
    m = _COLUMN_CARD.match(card_key(card))
    assert m is not None
    key = f"{m.group(1).decode()}{number}".ljust(8).encode("ascii")
    return key + card[8:]


def _refresh_vla_tforms(t: _Table) -> None:
    """Rewrite ``1P<code>(emax)`` TFORMs from the descriptors now in the rows."""
    for _n, col in enumerate(t.columns, start=1):
        spec = col.spec
        if not spec.is_vla:
            continue
        desc = col.data.copy().view(">i4" if spec.descriptor == "P" else ">i8").reshape(t.nrows, 2)
        emax = int(desc[:, 0].max(initial=0))
        tform = f"1{spec.descriptor}{spec.code}({emax})"
        cards = [c for c in col.cards if _prefix(c) != b"TFORM"]
        col.cards = [line.encode("ascii") for line in format_card(f"TFORM{spec.number}", tform)] + cards
        ttype = [c for c in col.cards if _prefix(c) == b"TTYPE"]
        rest = [c for c in col.cards if _prefix(c) != b"TTYPE"]
        col.cards = ttype + rest


def _table_header(t: _Table, row_bytes: int, checksum: bool) -> bytes:
    _refresh_vla_tforms(t)
    out: list[bytes] = []
    column_block: list[bytes] = []
    for n, col in enumerate(t.columns, start=1):
        column_block += [_renumber(c, n) for c in col.cards]
    placed = False
    for card in t.other_cards:
        key = card_key(card)
        if key == b"NAXIS1":
            out += card_bytes("NAXIS1", row_bytes, "width of table in bytes")
        elif key == b"NAXIS2":
            out += card_bytes("NAXIS2", t.nrows, "number of rows in table")
        elif key == b"PCOUNT":
            out += card_bytes("PCOUNT", len(t.heap), "size of special data area")
        elif key == b"TFIELDS":
            out += card_bytes("TFIELDS", len(t.columns), "number of fields in each row")
            out += column_block
            placed = True
        elif key in (b"THEAP", b"CHECKSUM", b"DATASUM"):
            continue
        else:
            out.append(card)
    if not placed:
        out += column_block
    if checksum:
        out += card_bytes("CHECKSUM", "0000000000000000", "HDU checksum")
        out += card_bytes("DATASUM", "0", "data unit checksum")
    return header_from_raw(out)


def _save(target: str, t: _Table) -> None:
    """Rewrite the file with this table HDU rebuilt and every other HDU copied verbatim."""
    entry = t.entry
    buf = t.index.source.buffer()
    had_checksum = "CHECKSUM" in t.header or "DATASUM" in t.header
    widths = [c.data.shape[1] for c in t.columns]
    row_bytes = sum(widths)
    rows = np.empty((t.nrows, row_bytes), np.uint8)
    pos = 0
    for col, w in zip(t.columns, widths):
        rows[:, pos:pos + w] = col.data
        pos += w
    end = entry.data_offset + padded(entry.data_size)
    with atomic_output(target) as sink:
        sink.write(buf[:entry.header_offset])
        header_offset = sink.offset
        sink.write(_table_header(t, row_bytes, had_checksum))
        data_offset = sink.offset
        sink.write(rows.reshape(-1))
        sink.write(bytes(t.heap))
        data_size = sink.offset - data_offset
        sink.pad()
        sink.write(buf[min(end, len(buf)):])
        if had_checksum:
            from .checksum import patch_file_checksums

            patch_file_checksums(sink.fh, [(header_offset, data_offset, data_size)])


# ------------------------------------------------------------------------------ encoding cells


def _spec_plan(spec: ColumnSpec, values: ColumnValues, *, physical: bool) -> tuple[ColumnPlan, ColumnValues]:
    """A plan that stores ``values`` in the existing field ``spec`` (same TFORM)."""
    data = values.data
    if spec.code == "A":
        if data.dtype.kind != "S" and values.offsets is None:
            raise TypeError(f"{spec.describe()}: cannot store {data.dtype} values in a character column")
        plan = ColumnPlan(spec.name, "A", repeat=spec.repeat, string_width=spec.string_width)
        # Longer strings are truncated to the field, as CFITSIO does.
        if data.dtype.itemsize > spec.string_width:
            data = data.astype(f"S{spec.string_width}")
        return plan, ColumnValues(data, values.mask)
    if data.dtype.kind in "SUO":
        raise TypeError(f"{spec.describe()}: cannot store strings in a numeric column")
    plan = ColumnPlan(spec.name, spec.code, repeat=spec.repeat, vla=spec.descriptor,
                      tnull=spec.tnull if isinstance(spec.tnull, int) else None,
                      max_elements=spec.max_elements or 0)
    if physical and spec.code in "BIJK" and (spec.tscal, spec.tzero) != (1.0, 0.0):
        if spec.tscal == 1.0 and _UNSIGNED_TZERO.get(spec.code) == spec.tzero and data.dtype.kind in "iub":
            plan.flip = True
            data = data.astype(_UNSIGNED_DTYPE[spec.code])
        else:
            plan.scale = (spec.tscal, spec.tzero)
    elif spec.code in "BIJK" and data.dtype.kind in "iu" and spec.code != "B" and not spec.is_vla:
        data = data.astype(np.dtype(STORAGE_NATIVE[spec.code]))
    return plan, ColumnValues(data, values.mask, values.offsets, values.element_mask)


STORAGE_NATIVE = {"B": "u1", "I": "i2", "J": "i4", "K": "i8"}


def _ascii_text(spec: ColumnSpec, value: Any) -> bytes:
    """One ASCII-table field as text of exactly ``spec.width`` characters (numbers right-aligned,
    strings left-aligned, as astropy writes them); a value that does not fit is refused."""
    w, code = spec.width, spec.code
    if value is None or (isinstance(value, float) and np.isnan(value) and code != "A"):
        text = str(spec.tnull) if spec.tnull is not None else ""
    elif code == "A":
        text = value.decode("ascii") if isinstance(value, bytes) else str(value)
        if not (text.isascii() and text.isprintable()):
            raise ValueError(f"column {spec.name!r}: strings must be printable ASCII, got {text!r}")
        if len(text.rstrip()) > w:
            raise ValueError(f"column {spec.name!r}: {text!r} does not fit A{w}")
        return text[:w].ljust(w).encode("ascii")
    else:
        stored = (float(value) - spec.tzero) / spec.tscal if (spec.tscal, spec.tzero) != (1.0, 0.0) \
            else value
        d = spec.decimals or 0
        if code == "I":
            if float(stored) != int(round(float(stored))):
                raise ValueError(f"column {spec.name!r}: {value!r} is not an integer (I{w})")
            text = str(int(round(float(stored))))
        elif code == "F":
            text = f"{float(stored):.{d}f}"
        else:  # E and D
            text = f"{float(stored):.{d}E}"
            text = text.replace("E", "D") if code == "D" else text
    if len(text) > w:
        raise ValueError(f"column {spec.name!r}: {value!r} needs {len(text)} characters, "
                         f"more than the field's {w} ({spec.tform})")
    return text.rjust(w).encode("ascii")


def _ascii_cells(spec: ColumnSpec, values: Any, n: int) -> np.ndarray:
    if isinstance(values, np.ma.MaskedArray):
        items = [None if m else v for v, m in zip(values.data.tolist(), np.ma.getmaskarray(values))]
    elif isinstance(values, (list, tuple)):
        items = list(values)
    else:
        arr = np.asarray(values)
        items = arr.reshape(-1).tolist() if arr.ndim else [arr.item()]
    if len(items) != n:
        raise ValueError(f"Column '{spec.name}' has {len(items)} rows, expected {n}")
    out = np.frombuffer(b"".join(_ascii_text(spec, v) for v in items), np.uint8)
    return out.reshape(n, spec.width).copy()


def _encode_cells(t: _Table, spec: ColumnSpec, values: Any, n: int, *, physical: bool = True) -> np.ndarray:
    """``(n, width)`` row bytes of ``values`` in ``spec``'s field; VLA cells go onto the heap."""
    if spec.is_ascii:
        return _ascii_cells(spec, values, n)
    cv = numpy_column(spec.name, values)
    if len(cv) != n:
        raise ValueError(f"Column '{spec.name}' has {len(cv)} rows, expected {n}")
    if spec.is_vla and cv.offsets is None:
        data = cv.data if cv.data.ndim > 1 else cv.data.reshape(n, -1)
        width = data.shape[1] if n else 0
        cv = ColumnValues(data.reshape(-1), None, np.arange(n + 1, dtype=np.int64) * width)
    plan, cv = _spec_plan(spec, cv, physical=physical)
    if not spec.is_vla and spec.code != "A":
        cell = int(np.prod(cv.data.shape[1:])) if cv.data.ndim > 1 else 1
        expect = spec.repeat if spec.code != "X" else spec.repeat
        if spec.code == "X" and cv.data.ndim == 1:
            cell = 1
        if cell != expect and not (spec.code == "X" and cell <= expect):
            raise RuntimeError(f"{spec.describe()}: repeat mismatch: payload has {cell} values per row, "
                               f"the field holds {expect}")
        if spec.code == "X" and cell < expect:
            pad = np.zeros((n, expect - cell), bool)
            cv = ColumnValues(np.concatenate([cv.data.reshape(n, -1).astype(bool), pad], axis=1), cv.mask)
    heap = io.BytesIO()
    rows, heap_size = encode_rows([plan], [cv], heap, len(t.heap))
    if heap_size > len(t.heap):
        t.heap += heap.getvalue()
    cells = rows.view(np.uint8).reshape(n, -1)
    if cells.shape[1] != spec.width:
        raise RuntimeError(f"{spec.describe()}: repeat mismatch: encoded {cells.shape[1]} bytes per row, "
                           f"the field holds {spec.width}")
    return cells


def _default_cells(t: _Table, spec: ColumnSpec, n: int) -> np.ndarray:
    """Cells for a column the caller left out: TNULL where defined, else physical zero, blanks
    or 'F'."""
    if spec.is_ascii:
        return _ascii_cells(spec, [None] * n, n)
    cells = np.zeros((n, spec.width), np.uint8)
    if (spec.code in "BIJK" and not spec.is_vla and not isinstance(spec.tnull, int)
            and (spec.tscal, spec.tzero) != (1.0, 0.0)):
        unsigned = spec.tscal == 1.0 and _UNSIGNED_TZERO.get(spec.code) == spec.tzero
        zeros = np.zeros((n, spec.repeat) if spec.repeat > 1 else n,
                         _UNSIGNED_DTYPE[spec.code] if unsigned else np.float64)
        return _encode_cells(t, spec, zeros, n)
    if spec.code == "L" and not spec.is_vla:
        cells[:] = ord("F")
    elif spec.code == "A" and not spec.is_vla:
        cells[:] = ord(" ")
    elif isinstance(spec.tnull, int) and not spec.is_vla and spec.code in "BIJK":
        size = {"B": 1, "I": 2, "J": 4, "K": 8}[spec.code]
        if size > 1:
            one = np.array([spec.tnull], dtype=f">i{size}")
        else:
            one = np.array([spec.tnull], dtype=np.uint8 if spec.tnull >= 0 else np.int8)
        cells[:] = np.tile(one.view(np.uint8), spec.repeat)
    return cells


def _new_rows(t: _Table, rows: Mapping[str, Any]) -> tuple[int, list[np.ndarray]]:
    if not isinstance(rows, Mapping) or not rows:
        raise ValueError("rows must be a non-empty dictionary of columns")
    by_name = {}
    extra = []
    for key in rows:
        i = t.find(str(key))
        if i < 0:
            extra.append(str(key))
        else:
            by_name[i] = rows[key]
    if extra:
        raise KeyError(f"Unknown columns for table mutation: extra={extra}")
    lengths = {}
    for i, v in by_name.items():
        cv = numpy_column(t.columns[i].spec.name, v)
        lengths[t.columns[i].spec.name] = len(cv)
    n = next(iter(lengths.values()))
    for name, length in lengths.items():
        if length != n:
            raise ValueError(f"Column '{name}' has {length} rows, expected {n}")
    cells = []
    for i, col in enumerate(t.columns):
        if i in by_name:
            cells.append(_encode_cells(t, col.spec, by_name[i], n))
        else:
            cells.append(_default_cells(t, col.spec, n))
    return n, cells


# ------------------------------------------------------------------------------ row edits


def _try_append_in_place(target: str, t: _Table, cells: list[np.ndarray], n: int) -> bool:
    """Append rows without rewriting when the table is the file's last HDU, has no heap and no
    checksums: rows go after the last row (over the zero padding), then NAXIS2 is patched."""
    entry = t.entry
    if entry.index != len(t.index) - 1 or entry.heap_size or entry.pcount or not t.columns:
        return False
    if "CHECKSUM" in t.header or "DATASUM" in t.header or "THEAP" in t.header:
        return False
    naxis2_at = -1
    for i, card in enumerate(raw_cards(t.index, entry)):
        if card_key(card) == b"NAXIS2":
            naxis2_at = entry.header_offset + i * CARD
            break
    if naxis2_at < 0:
        return False
    block = np.concatenate(cells, axis=1) if cells else np.zeros((n, 0), np.uint8)
    start = entry.data_offset + entry.data_size
    new_size = entry.data_size + block.size
    end = entry.data_offset + padded(new_size)
    card = format_card("NAXIS2", t.nrows + n, "number of rows in table")[0].encode("ascii")
    old_end = entry.data_offset + padded(entry.data_size)
    old_padding = bytes(t.index.source.buffer()[start:old_end])
    t.index.source.check()
    with in_place_errors(target), open(target, "r+b") as fh:
        try:
            fh.seek(start)
            fh.write(block.tobytes())
            fh.write(b"\0" * (end - start - block.size))
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
        except BaseException:
            # NAXIS2 still says the old row count: put the padding back and drop the growth.
            fh.seek(start)
            fh.write(old_padding)
            fh.truncate(old_end)
            fh.flush()
            invalidate(target)
            raise
        # The rows are durable before the header card that makes them part of the table.
        fh.seek(naxis2_at)
        fh.write(card)
        fh.flush()
        os.fsync(fh.fileno())
    invalidate(target)
    return True


def append_rows(path: Any, rows: Mapping[str, Any], hdu: Any = 1) -> None:
    """Append rows (see `torchfits.table.append_rows`)."""
    target, t = _load(path, hdu, ascii_ok=True)
    vla_before = len(t.heap)
    n, cells = _new_rows(t, rows)
    ascii_table = t.entry.kind == "table"
    if not ascii_table and len(t.heap) == vla_before and _try_append_in_place(target, t, cells, n):
        return
    for col, new in zip(t.columns, cells):
        col.data = np.concatenate([col.data, new])
    t.nrows += n
    _save_ascii_rows(target, t) if ascii_table else _save(target, t)


def insert_rows(path: Any, rows: Mapping[str, Any], *, row: int, hdu: Any = 1) -> None:
    """Insert rows before 0-based ``row`` (see `torchfits.table.insert_rows`)."""
    if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or row < 0:
        raise ValueError("row must be a non-negative integer")
    target, t = _load(path, hdu, ascii_ok=True)
    if row > t.nrows:
        raise ValueError(f"row index {row} is out of range for insert (num_rows={t.nrows})")
    n, cells = _new_rows(t, rows)
    for col, new in zip(t.columns, cells):
        col.data = np.concatenate([col.data[:row], new, col.data[row:]])
    t.nrows += n
    _save_ascii_rows(target, t) if t.entry.kind == "table" else _save(target, t)


def _window(row_slice: Any, nrows: int, what: str) -> tuple[int, int]:
    """The ``row_slice`` of an edit, checked by the one row-window parser; not clamped (each
    edit decides what a window past the end means). An edit needs a window: None is refused."""
    checked = validate_row_slice(row_slice)
    if checked is None:
        raise ValueError(f"{what} needs a row_slice: a slice or (start, stop)")
    start, stop = checked
    return start, nrows if stop is None else stop


def update_rows(path: Any, rows: Mapping[str, Any], row_slice: Any, hdu: Any = 1, *,
                mmap: Any = "auto") -> None:
    """Overwrite rows ``[start, stop)`` with physical values (see `torchfits.table.update_rows`)."""
    if mmap not in (True, False, "auto", "mmap"):
        raise ValueError("mmap must be True, False or 'auto'")
    target, t = _load(path, hdu, ascii_ok=True)
    start, stop = _window(row_slice, t.nrows, "update_rows")
    if stop > t.nrows or start > stop:
        raise ValueError(f"row_slice [{start}, {stop}) is outside the table (num_rows={t.nrows}); "
                         "update_rows never extends a table, use append_rows")
    if not isinstance(rows, Mapping) or not rows:
        raise ValueError("rows must be a non-empty dictionary of columns")
    extra = [str(k) for k in rows if t.find(str(k)) < 0]
    if extra:
        raise KeyError(f"Unknown columns for table mutation: extra={extra}")
    forced = mmap is True or mmap == "mmap"
    targets = {t.find(str(k)): v for k, v in rows.items()}
    if forced:
        vla = [t.columns[i].spec.name for i in targets if t.columns[i].spec.is_vla]
        if vla:  # the 1.x wording; mmap="auto" rewrites the file instead
            raise ValueError(f"mmap table updates do not support variable-length-array columns: {vla}; "
                             "pass mmap='auto' to rewrite the file")
        scaled = [t.columns[i].spec.name for i in targets
                  if (t.columns[i].spec.tscal, t.columns[i].spec.tzero) != (1.0, 0.0)
                  and t.columns[i].spec.tzero != _UNSIGNED_TZERO.get(t.columns[i].spec.code)]
        if scaled:
            raise RuntimeError(f"Scaled columns not supported for mmap updates: {scaled}")
    window = stop - start
    heap_before = len(t.heap)
    cells = {}
    for i, v in targets.items():
        cv_len = len(v) if t.columns[i].spec.is_ascii and hasattr(v, "__len__") \
            else len(numpy_column(t.columns[i].spec.name, v))
        if cv_len != window:
            raise ValueError(f"row_slice expects {window} rows, but update payload has {cv_len}")
        cells[i] = _encode_cells(t, t.columns[i].spec, v, window)
    if len(t.heap) == heap_before and mmap is not False and not (
            "CHECKSUM" in t.header or "DATASUM" in t.header):
        _update_in_place(target, t, cells, start)
        return
    for i, new in cells.items():
        data = t.columns[i].data.copy()
        data[start:stop] = new
        t.columns[i].data = data
    _save_ascii_rows(target, t) if t.entry.kind == "table" else _save(target, t)


def _update_in_place(target: str, t: _Table, cells: dict, start: int) -> None:
    """Write fixed-width cells straight into their rows (no size or header change)."""
    entry = t.entry
    with in_place_errors(target), open(target, "r+b") as fh:
        for i, new in cells.items():
            spec = t.columns[i].spec
            for r in range(new.shape[0]):
                fh.seek(entry.data_offset + (start + r) * entry.row_bytes + spec.offset)
                fh.write(new[r].tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    invalidate(target)


def delete_rows(path: Any, row_slice: Any, *, hdu: Any = 1) -> None:
    """Delete one row (an int), a slice or ``(start, stop)``; an empty window is a no-op."""
    target, t = _load(path, hdu, ascii_ok=True)
    if isinstance(row_slice, (int, np.integer)) and not isinstance(row_slice, bool):
        if row_slice < 0:
            raise ValueError("row_slice must be non-negative")
        start, stop = int(row_slice), int(row_slice) + 1
    else:
        start, stop = _window(row_slice, t.nrows, "delete_rows")
    stop = min(stop, t.nrows)
    if stop <= start:
        if start > t.nrows or (start == t.nrows and t.nrows and stop > start):
            raise ValueError(f"row_slice start is out of range for delete (num_rows={t.nrows})")
        return
    if start >= t.nrows:
        raise ValueError(f"row_slice start is out of range for delete (start={start}, num_rows={t.nrows})")
    for col in t.columns:
        col.data = np.concatenate([col.data[:start], col.data[stop:]])
    t.nrows -= stop - start
    if t.entry.kind == "table":
        _save_ascii_rows(target, t)
        return
    _save(target, t)


def _save_ascii_rows(target: str, t: _Table) -> None:
    # ASCII rows keep their TBCOL layout: only the row count changes; the row bytes are rebuilt
    # from the original rows (columns never move), so rejoin them by offset.
    entry = t.entry
    buf = t.index.source.buffer()
    rows = np.full((t.nrows, entry.row_bytes), ord(" "), np.uint8)
    for col in t.columns:
        rows[:, col.spec.offset:col.spec.offset + col.spec.width] = col.data
    out = []
    for card in raw_cards(t.index, entry):
        if card_key(card) == b"NAXIS2":
            out += card_bytes("NAXIS2", t.nrows, "number of rows in table")
        else:
            out.append(card)
    end = entry.data_offset + padded(entry.data_size)
    with atomic_output(target) as sink:
        sink.write(buf[:entry.header_offset])
        sink.write(header_from_raw(out))
        sink.write(rows.reshape(-1))
        sink.pad(b" ")
        sink.write(buf[min(end, len(buf)):])


# ------------------------------------------------------------------------------ column edits


def _plan_new_column(name: str, values: Any, *, format: str | None, unit: str | None,
                     dim: str | None, tnull: int | None, tscal: float | None,
                     tzero: float | None) -> tuple[ColumnPlan, ColumnValues]:
    from .table_write import apply_schema

    cv = numpy_column(name, values)
    plan = plan_column(name, cv)
    spec = {"format": format, "unit": unit, "dim": dim, "tnull": tnull, "tscal": tscal, "tzero": tzero}
    if any(v is not None for v in spec.values()):
        apply_schema([plan], {name: {k: v for k, v in spec.items() if v is not None}}, None)
    return plan, cv


def _column_from_plan(t: _Table, plan: ColumnPlan, cv: ColumnValues, number: int) -> _Column:
    if len(cv) != t.nrows:
        raise ValueError(f"Column '{plan.name}' has {len(cv)} rows, expected {t.nrows}")
    heap = io.BytesIO()
    rows, heap_size = encode_rows([plan], [cv], heap, len(t.heap))
    t.heap += heap.getvalue()
    cards = [line for c in column_cards([plan]) for line in card_bytes(c.key, c.value, c.comment)]
    spec = ColumnSpec(index=number - 1, name=plan.name, tform=plan.tform, code=plan.code,
                      repeat=plan.repeat, width=plan.field_dtype.itemsize, offset=0)
    return _Column(spec, cards, rows.view(np.uint8).reshape(t.nrows, -1))


def insert_column(path: Any, name: str, values: Any, *, hdu: Any = 1, index: int | None = None,
                  format: str | None = None, unit: str | None = None,
                  dim: str | None = None, tnull: int | None = None,
                  tscal: float | None = None, tzero: float | None = None) -> None:
    """Insert a column; values are stored codes (see `torchfits.table.insert_column`)."""
    target, t = _load(path, hdu)
    if t.find(name) >= 0:
        raise ValueError(f"Column '{name}' already exists")
    position = len(t.columns) if index is None else int(index)
    if not 0 <= position <= len(t.columns):
        raise IndexError(f"index {index} out of range for {len(t.columns)} columns")
    plan, cv = _plan_new_column(name, values, format=format, unit=unit, dim=dim, tnull=tnull,
                                tscal=tscal, tzero=tzero)
    plan.scale = None  # insert_column writes the values as stored codes
    t.columns.insert(position, _column_from_plan(t, plan, cv, position + 1))
    _save(target, t)


def replace_column(path: Any, name: str, values: Any, *, hdu: Any = 1,
                   format: str | None = None, unit: str | None = None,
                   dim: str | None = None, tnull: int | None = None,
                   tscal: float | None = None, tzero: float | None = None) -> None:
    """Replace a column's data, keeping its TFORM code, TUNIT and TNULL unless overridden."""
    target, t = _load(path, hdu)
    i = t.find(name)
    if i < 0:
        raise KeyError(f"Column '{name}' not found")
    old = t.columns[i]
    cv = numpy_column(old.spec.name, values)
    if len(cv) != t.nrows:
        raise ValueError(f"Column '{name}' has {len(cv)} rows, expected {t.nrows}")
    overrides = any(v is not None for v in (format, dim, tscal, tzero))
    if not overrides:
        if (old.spec.code == "A") != (cv.data.dtype.kind == "S"):
            raise TypeError(f"{old.spec.describe()}: incompatible values of dtype {cv.data.dtype}")
        same_shape = cv.offsets is None and not old.spec.is_vla and (
            (old.spec.code == "A" and cv.data.ndim == 1 and cv.data.dtype.itemsize <= old.spec.string_width)
            or (old.spec.code != "A" and int(np.prod(cv.data.shape[1:])) == old.spec.repeat))
        if same_shape or old.spec.is_vla:
            old.data = _encode_cells(t, old.spec, values, t.nrows)
            if unit is not None or tnull is not None:
                _override_cards(old, unit=unit, tnull=tnull)
            _save(target, t)
            return
    plan, cv = _plan_new_column(old.spec.name, values, format=format or None, unit=unit, dim=dim,
                                tnull=tnull, tscal=tscal, tzero=tzero)
    if format is None and plan.code != "A" and old.spec.code != "A" and not plan.vla:
        plan.code = old.spec.code
    elif format is None and (plan.code == "A") != (old.spec.code == "A"):
        raise TypeError(f"{old.spec.describe()}: incompatible values of dtype {cv.data.dtype}")
    if tnull is None and isinstance(old.spec.tnull, int):
        plan.tnull = old.spec.tnull
    new = _column_from_plan(t, plan, cv, i + 1)
    kept = [c for c in old.cards if _prefix(c) in (b"TUNIT", b"TUCD", b"TDISP")
            and not any(_prefix(n) == _prefix(c)
                        for n in new.cards)]
    new.cards += kept
    t.columns[i] = new
    _save(target, t)


def _override_cards(col: _Column, *, unit: str | None, tnull: int | None) -> None:
    n = col.spec.number
    for prefix, value in (("TUNIT", unit), ("TNULL", tnull)):
        if value is None:
            continue
        col.cards = [c for c in col.cards if _prefix(c) != prefix.encode()]
        col.cards += card_bytes(f"{prefix}{n}", value)


def rename_columns(path: Any, mapping: Mapping[str, str], hdu: Any = 1) -> None:
    """Rename columns ``{old: new}``; only TTYPEn cards change."""
    target, t = _load(path, hdu, ascii_ok=True)
    missing = [k for k in mapping if t.find(k) < 0]
    if missing:
        raise KeyError(f"Column(s) not found for rename_columns: {missing}")
    renamed = {t.find(k) for k in mapping}
    for new in mapping.values():
        j = t.find(new)
        if j >= 0 and j not in renamed:
            raise ValueError(f"Column '{new}' already exists (rename_columns target collides)")
    finals = [mapping.get(c.spec.name, c.spec.name) for c in t.columns]
    for old_name, new in mapping.items():
        finals[t.find(old_name)] = new
    if len({f.upper() for f in finals}) != len(finals):
        raise ValueError(f"rename_columns would create duplicate column names: {finals}")
    for old_name, new in mapping.items():
        col = t.columns[t.find(old_name)]
        cards = [c for c in col.cards if _prefix(c) != b"TTYPE"]
        col.cards = card_bytes(f"TTYPE{col.spec.number}", str(new)) + cards
    if t.entry.kind == "table":
        raise NotImplementedError("rename_columns on ASCII tables is not supported yet")
    _save(target, t)


def drop_columns(path: Any, columns: Any, hdu: Any = 1) -> None:
    """Remove columns; dropping all leaves a 0-column table with its row count."""
    names = [columns] if isinstance(columns, str) else list(columns)
    target, t = _load(path, hdu)
    missing = [c for c in names if t.find(c) < 0]
    if missing:
        raise KeyError(f"Column(s) not found for drop_columns: {missing}")
    drop = {t.find(c) for c in names}
    t.columns = [c for i, c in enumerate(t.columns) if i not in drop]
    _save(target, t)

"""``torchfits diff A B``: compare two FITS files the way astropy's ``FITSDiff`` does: HDU
count, header cards (values, comments, repeats), every image pixel and every table cell.

The engine (`diff_files`) reads through torchfits's own readers (`open_image` in row chunks,
`scan` in row ranges) and returns `Difference` records; `cmd_diff` prints the first ones and
exits 1 when there is any. Rules, as docs/cli.md states them:

* floats differ when ``|a - b| > atol + rtol * |b|``; NaN equals NaN, an infinity equals the
  same infinity; integers, strings and booleans compare exactly; a null cell equals only a null;
* header string values compare without trailing blanks; blank cards are ignored; CHECKSUM and
  DATASUM are ignored unless ``--compare-checksums``; ``--ignore-keywords`` takes ``fnmatch``
  patterns (``*`` ignores every header difference), ``--ignore-hdus`` EXTNAME patterns or indices;
* image data compare as physical values (BSCALE/BZERO applied, BLANK → NaN), as FITSDiff does;
  random groups compare as a table (a column per parameter and ``DATA``, a row per group);
  data torchfits cannot decode as an image or a table (foreign extensions) compare byte for byte.
"""
from __future__ import annotations

import argparse
import fnmatch
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .common import EXIT_DIFF, EXIT_OK, UsageError, emit, format_options, targets

__all__ = ["Difference", "DiffOptions", "diff_files", "cmd_diff", "add_parsers"]

_CHUNK_BYTES = 64 << 20  # bytes of each side decoded at once: bounds memory on any file size


@dataclass(frozen=True)
class Difference:
    """One difference between file a and file b.

    ``what`` is one of ``hdu_count``, ``hdu_type``, ``keyword_only_in_a``, ``keyword_only_in_b``,
    ``keyword_count``, ``value``, ``comment``, ``shape``, ``pixel``, ``pixels``, ``columns``,
    ``rows``, ``cell``, ``cells``, ``bytes``; ``where`` says where (keyword, pixel index, row and
    column); ``a`` and ``b`` are the two values (None where one side has none)."""

    what: str
    hdu_a: int | None
    hdu_b: int | None
    name: str
    where: str
    a: Any = None
    b: Any = None

    def text(self) -> str:
        """One line for the text report."""
        if self.what == "hdu_count":
            return f"HDU count: {self.a} vs {self.b}"
        where = f"{self._label()} {self.where}".rstrip()
        if self.what in ("keyword_only_in_a", "keyword_only_in_b"):
            side, value = ("a", self.a) if self.what.endswith("_a") else ("b", self.b)
            return f"{where}: only in {side} ({value!r})"
        if self.what in ("pixels", "cells", "bytes", "columns"):
            return f"{where}: {self.a}"
        return f"{where}: {_shown(self.a)} vs {_shown(self.b)}"

    def record(self) -> dict[str, Any]:
        """The JSON record: what, hdu (and hdu_b when the HDUs are paired across positions),
        name, where, a, b."""
        rec: dict[str, Any] = {"what": self.what, "hdu": self.hdu_a, "name": self.name,
                               "where": self.where, "a": self.a, "b": self.b}
        if self.hdu_b != self.hdu_a:
            rec["hdu_b"] = self.hdu_b
        return rec

    def _label(self) -> str:
        if self.hdu_a == self.hdu_b:
            return f"HDU {self.hdu_a} ({self.name})"
        return f"HDU {self.hdu_a} vs {self.hdu_b} ({self.name})"


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)) and len(value) > 8:
        return "[" + ", ".join(_shown(v) for v in value[:8]) + f", ... ({len(value)} items)]"
    return repr(value)


@dataclass
class DiffOptions:
    """What `diff_files` compares: tolerances for floats, ignored keywords/comments and table
    columns (fnmatch patterns, case-blind) and HDUs (EXTNAME patterns or indices), and how many
    differences of one HDU's data are reported one by one (the rest are counted)."""

    rtol: float = 0.0
    atol: float = 0.0
    ignore_keywords: Sequence[str] = ("CHECKSUM", "DATASUM")
    ignore_comments: Sequence[str] = ()
    ignore_hdus: Sequence[str] = ()
    ignore_columns: Sequence[str] = ()
    max_diffs: int = 10
    _keywords: list[str] = field(default_factory=list, init=False, repr=False)
    _comments: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.max_diffs < 0:
            raise ValueError(f"max_diffs must be >= 0, not {self.max_diffs}")
        self._keywords = [k.strip().upper() for k in self.ignore_keywords if k.strip()]
        self._comments = [k.strip().upper() for k in self.ignore_comments if k.strip()]

    def keyword_ignored(self, key: str) -> bool:
        return any(fnmatch.fnmatchcase(key.upper(), p) for p in self._keywords)

    def comment_ignored(self, key: str) -> bool:
        return any(fnmatch.fnmatchcase(key.upper(), p) for p in self._comments)

    def column_ignored(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name.upper(), p.strip().upper())
                   for p in self.ignore_columns if p.strip())

    def hdu_ignored(self, index: int, name: str) -> bool:
        for p in self.ignore_hdus:
            p = p.strip()
            if p.isdigit():
                if int(p) == index:
                    return True
            elif fnmatch.fnmatchcase(name.upper(), p.upper()):
                return True
        return False


# -- the engine ------------------------------------------------------------------------------------
def diff_files(path_a: str, path_b: str, options: DiffOptions | None = None) -> list[Difference]:
    """Every difference between two FITS files (data differences past ``max_diffs`` per HDU are
    summarised in one ``pixels``/``cells``/``bytes`` record); an empty list means identical.

    Raises the reader's `torchfits.errors.FitsError` (or OSError) when a file cannot be read."""
    from ..fits.hdu_index import get_index

    opts = options or DiffOptions()
    ia, ib = get_index(path_a), get_index(path_b)
    out: list[Difference] = []
    if len(ia) != len(ib):
        out.append(Difference("hdu_count", None, None, "", "", len(ia), len(ib)))
    kept_a = [e for e in ia.entries if not opts.hdu_ignored(e.index, _hdu_name(e))]
    kept_b = [e for e in ib.entries if not opts.hdu_ignored(e.index, _hdu_name(e))]
    for ea, eb in zip(kept_a, kept_b):
        out += _diff_hdu(ia, ea, ib, eb, opts)
    return out


def _hdu_name(entry: Any) -> str:
    """The name FITSDiff's ``ignore_hdus`` matches: EXTNAME, PRIMARY for an unnamed primary,
    empty for an unnamed extension."""
    if entry.extname:
        return str(entry.extname).strip().upper()
    return "PRIMARY" if entry.index == 0 else ""


def _family(entry: Any) -> str:
    if entry.is_groups:
        return "groups"
    if entry.is_image or entry.kind == "compressed_image":
        return "image"
    if entry.is_table:
        return "table"
    return "other"


def _diff_hdu(ia: Any, ea: Any, ib: Any, eb: Any, opts: DiffOptions) -> list[Difference]:
    from ..fits.tile_layout import image_header

    ha, hb = ia.header_view(ea), ib.header_view(eb)
    fa, fb = _family(ea), _family(eb)
    if ea.kind == "compressed_image":
        ha = image_header(ha, f"{ia.path}: HDU {ea.index}")
    if eb.kind == "compressed_image":
        hb = image_header(hb, f"{ib.path}: HDU {eb.index}")
    name = ea.display_name if ea.display_name == eb.display_name else \
        f"{ea.display_name}/{eb.display_name}"

    def diff(what: str, where: str, a: Any = None, b: Any = None) -> Difference:
        return Difference(what, ea.index, eb.index, name, where, a, b)

    out = _header_differences(ha, hb, opts, diff)
    if fa != fb:
        out.append(diff("hdu_type", "type", fa, fb))
        return out
    if fa == "image":
        out += _image_differences(ia.path, ea, ib.path, eb, opts, diff)
    elif fa == "table":
        out += _table_differences(ia.path, ea, ib.path, eb, opts, diff)
    elif fa == "groups":
        out += _groups_differences(ia.path, ea, ib.path, eb, opts, diff)
    else:
        out += _byte_differences(ia, ea, ib, eb, diff)
    return out


# -- headers ---------------------------------------------------------------------------------------
def _header_differences(ha: Any, hb: Any, opts: DiffOptions,
                        diff: Callable[..., Difference]) -> list[Difference]:
    if "*" in opts._keywords:
        return []
    va, ca = _cards_by_keyword(ha)
    vb, cb = _cards_by_keyword(hb)
    out = []
    for key in va:
        if key not in vb and not opts.keyword_ignored(key):
            out.append(diff("keyword_only_in_a", f"header {key}", va[key][0], None))
    for key in vb:
        if key not in va and not opts.keyword_ignored(key):
            out.append(diff("keyword_only_in_b", f"header {key}", None, vb[key][0]))
    for key in va:
        if key not in vb or opts.keyword_ignored(key):
            continue
        if len(va[key]) != len(vb[key]):
            out.append(diff("keyword_count", f"header {key} cards", len(va[key]), len(vb[key])))
        several = len(va[key]) > 1 or len(vb[key]) > 1
        for k, (x, y) in enumerate(zip(va[key], vb[key])):
            at = f"header {key}[{k}]" if several else f"header {key}"
            if _values_differ(x, y, opts.rtol, opts.atol):
                out.append(diff("value", f"{at} value", x, y))
        if "*" in opts._comments or opts.comment_ignored(key):
            continue
        for k, (x, y) in enumerate(zip(ca[key], cb[key])):
            if x != y:
                at = f"header {key}[{k}]" if several else f"header {key}"
                out.append(diff("comment", f"{at} comment", x, y))
    return out


def _cards_by_keyword(header: Any) -> tuple[dict[str, list[Any]], dict[str, list[str]]]:
    """Values and comments of each keyword in card order; blank cards left out and string
    values without trailing blanks (FITSDiff's ``ignore_blank_cards``/``ignore_blanks``)."""
    values: dict[str, list[Any]] = {}
    comments: dict[str, list[str]] = {}
    for card in header.cards:
        value = card.value
        if isinstance(value, str):
            value = value.rstrip()
        comment = (card.comment or "").rstrip()
        if not card.key and value in ("", None) and not comment:
            continue
        values.setdefault(card.key, []).append(value)
        comments.setdefault(card.key, []).append(comment)
    return values, comments


def _values_differ(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isfinite(a) and math.isfinite(b):
            return not abs(a - b) <= atol + rtol * abs(b)
        return not ((math.isnan(a) and math.isnan(b)) or a == b)
    if isinstance(a, bool) != isinstance(b, bool):  # T is not 1
        return True
    return bool(a != b)


# -- images ----------------------------------------------------------------------------------------
def _image_differences(path_a: str, ea: Any, path_b: str, eb: Any, opts: DiffOptions,
                       diff: Callable[..., Difference]) -> list[Difference]:
    from ..image.plain import open_image

    shape_a = tuple(reversed(ea.image_layout[1]))
    shape_b = tuple(reversed(eb.image_layout[1]))
    if shape_a != shape_b:
        return [diff("shape", "data shape", list(shape_a), list(shape_b))]
    if not shape_a or 0 in shape_a:
        return []
    xa, xb = open_image(path_a, ea.index), open_image(path_b, eb.index)
    row = int(np.prod(shape_a[1:], dtype=np.int64)) if len(shape_a) > 1 else 1
    itemsize = max(np.dtype(xa.dtype).itemsize, np.dtype(xb.dtype).itemsize)
    step = max(1, _CHUNK_BYTES // max(1, row * itemsize))
    shown: list[Difference] = []
    total, max_abs = 0, 0.0
    for start in range(0, shape_a[0], step):
        a, b = xa[start:start + step], xb[start:start + step]
        bad = _values_differ_array(a, b, opts.rtol, opts.atol)
        count = int(np.count_nonzero(bad))
        if not count:
            continue
        total += count
        max_abs = max(max_abs, _max_abs(a[bad], b[bad]))
        for flat in np.flatnonzero(bad)[: max(0, opts.max_diffs - len(shown))]:
            idx = np.unravel_index(flat, bad.shape)
            where = [int(idx[0]) + start] + [int(i) for i in idx[1:]]
            shown.append(diff("pixel", f"pixel {where}", a[idx].item(), b[idx].item()))
    if total > len(shown):
        size = int(np.prod(shape_a, dtype=np.int64))
        extra = f"; largest |a - b| {max_abs:.7g}" if math.isfinite(max_abs) and max_abs else ""
        shown.append(diff("pixels", "pixels",
                          f"{total} of {size} differ ({len(shown)} shown{extra})"))
    return shown


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype.kind not in "iufb" or b.dtype.kind not in "iufb" or not a.size:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else 0.0


def _values_differ_array(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise: True where a and b differ by the float rule (floats) or at all (others).

    Equal values never differ, so the tolerance is only worked out where ``a != b`` (NaN
    included): files that mostly agree cost one comparison pass."""
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return np.asarray(a != b)
    with np.errstate(invalid="ignore"):
        bad = np.asarray(a != b)
    where = np.flatnonzero(bad)
    if not where.size:
        return bad
    x = a.reshape(-1)[where].astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    y = b.reshape(-1)[where].astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(x) & np.isfinite(y)
        outside = np.abs(x - y) > atol + rtol * np.abs(y)
        both_nan = np.isnan(x) & np.isnan(y)  # an infinity equal to itself never gets here
    bad.reshape(-1)[where] = np.where(finite, outside, ~both_nan)
    return bad


# -- tables and random groups -----------------------------------------------------------------------
def _table_differences(path_a: str, ea: Any, path_b: str, eb: Any, opts: DiffOptions,
                       diff: Callable[..., Difference]) -> list[Difference]:
    from ..tables.scan import scan

    def reader(path: str, entry: Any) -> Callable[[list[str], int, int], Any]:
        return lambda names, start, stop: scan(path, entry.index, columns=names,
                                               row_slice=(start, stop)).to_arrow()

    step = max(1, _CHUNK_BYTES // max(1, ea.row_bytes, eb.row_bytes))
    return _column_differences(scan(path_a, ea.index).schema.names, ea.nrows, reader(path_a, ea),
                               scan(path_b, eb.index).schema.names, eb.nrows, reader(path_b, eb),
                               step, opts, diff)


def _groups_differences(path_a: str, ea: Any, path_b: str, eb: Any, opts: DiffOptions,
                        diff: Callable[..., Difference]) -> list[Difference]:
    """Random groups as FITSDiff compares them: a table of one row per group, a column per
    parameter (physical values) and ``DATA`` (each group's array), with the tolerances."""
    from ..image.groups import read_groups

    ta = read_groups(path_a, ea.index).to_arrow()
    tb = read_groups(path_b, eb.index).to_arrow()

    def reader(table: Any) -> Callable[[list[str], int, int], Any]:
        return lambda names, start, stop: table.select(names).slice(start, stop - start)

    return _column_differences(ta.column_names, ta.num_rows, reader(ta),
                               tb.column_names, tb.num_rows, reader(tb), max(1, ta.num_rows),
                               opts, diff)


def _column_differences(all_a: list[str], nrows_a: int, read_a: Callable[[list[str], int, int], Any],
                        all_b: list[str], nrows_b: int, read_b: Callable[[list[str], int, int], Any],
                        step: int, opts: DiffOptions,
                        diff: Callable[..., Difference]) -> list[Difference]:
    """Columns by name (case-blind), the row count, then every cell, ``step`` rows at a time
    (``read_x(names, start, stop)`` gives those rows as a ``pyarrow.Table``)."""
    names_a = [n for n in all_a if not opts.column_ignored(n)]
    names_b = [n for n in all_b if not opts.column_ignored(n)]
    lower_b = {n.lower(): n for n in names_b}
    lower_a = {n.lower(): n for n in names_a}
    out = []
    only_a = [n for n in names_a if n.lower() not in lower_b]
    only_b = [n for n in names_b if n.lower() not in lower_a]
    if only_a or only_b:
        parts = ([f"only in a: {', '.join(only_a)}"] if only_a else []) + \
                ([f"only in b: {', '.join(only_b)}"] if only_b else [])
        out.append(diff("columns", "columns", "; ".join(parts)))
    if nrows_a != nrows_b:
        out.append(diff("rows", "row count", nrows_a, nrows_b))
        return out
    pairs = [(n, lower_b[n.lower()]) for n in names_a if n.lower() in lower_b]
    if not pairs or not nrows_a:
        return out
    shown: list[Difference] = []
    cells, rows_seen = 0, np.zeros(0, dtype=np.int64)
    for start in range(0, nrows_a, step):
        stop = min(nrows_a, start + step)
        ta = read_a([a for a, _ in pairs], start, stop)
        tb = read_b([b for _, b in pairs], start, stop)
        for name_a, name_b in pairs:
            ca, cb = ta.column(name_a).combine_chunks(), tb.column(name_b).combine_chunks()
            bad = cells_differ(ca, cb, opts.rtol, opts.atol)
            rows = np.flatnonzero(bad)
            if not rows.size:
                continue
            cells += rows.size
            rows_seen = np.union1d(rows_seen, rows + start)
            for r in rows[: max(0, opts.max_diffs - len(shown))]:
                shown.append(diff("cell", f"row {int(r) + start} column {name_a}",
                                  _json_safe(ca[int(r)].as_py()), _json_safe(cb[int(r)].as_py())))
    if cells > len(shown):
        shown.append(diff("cells", "cells", f"{cells} cells in {rows_seen.size} of {nrows_a} rows "
                                            f"differ ({len(shown)} shown)"))
    return out + shown


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def cells_differ(a: Any, b: Any, rtol: float = 0.0, atol: float = 0.0) -> np.ndarray:
    """Per row of two Arrow arrays of one length: True where the cells differ. Nulls equal only
    nulls; floats by ``|a - b| > atol + rtol * |b|`` with NaN equal to NaN; lists (fixed-size
    and variable-length) differ when their lengths or any element differ."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(a)
    if n == 0:
        return np.zeros(0, dtype=bool)
    null_a = np.asarray(a.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    null_b = np.asarray(b.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    valid = ~null_a & ~null_b
    bad = null_a ^ null_b
    ta, tb = a.type, b.type
    if pa.types.is_fixed_size_list(ta) and pa.types.is_fixed_size_list(tb):
        if ta.list_size != tb.list_size:
            return bad | valid
        size = ta.list_size
        if size:
            va = a.values.slice(a.offset * size, n * size)
            vb = b.values.slice(b.offset * size, n * size)
            inner = cells_differ(va, vb, rtol, atol).reshape(n, size).any(axis=1)
            bad |= valid & inner
        return bad
    if _is_var_list(ta) and _is_var_list(tb):
        la = pc.fill_null(pc.list_value_length(a), 0).to_numpy(zero_copy_only=False)
        lb = pc.fill_null(pc.list_value_length(b), 0).to_numpy(zero_copy_only=False)
        bad |= valid & (la != lb)
        sel = np.flatnonzero(valid & (la == lb) & (la > 0))
        if sel.size:
            pick = pa.array(sel)
            sa, sb = a.take(pick), b.take(pick)
            inner = cells_differ(pc.list_flatten(sa), pc.list_flatten(sb), rtol, atol)
            parents = pc.list_parent_indices(sa).to_numpy(zero_copy_only=False)
            bad[sel[np.unique(parents[inner])]] = True
        return bad
    numeric = (pa.types.is_integer(ta) or pa.types.is_floating(ta) or pa.types.is_boolean(ta)) and \
              (pa.types.is_integer(tb) or pa.types.is_floating(tb) or pa.types.is_boolean(tb))
    if numeric:
        xa = pc.fill_null(a, pa.scalar(0, ta) if not pa.types.is_boolean(ta) else False)
        xb = pc.fill_null(b, pa.scalar(0, tb) if not pa.types.is_boolean(tb) else False)
        inner = _values_differ_array(xa.to_numpy(zero_copy_only=False),
                                     xb.to_numpy(zero_copy_only=False), rtol, atol)
        return bad | (valid & inner)
    if ta == tb and (pa.types.is_string(ta) or pa.types.is_large_string(ta)
                     or pa.types.is_binary(ta) or pa.types.is_fixed_size_binary(ta)
                     or pa.types.is_large_binary(ta)):
        eq = pc.equal(a, b).fill_null(True).to_numpy(zero_copy_only=False)
        return bad | (valid & ~np.asarray(eq, dtype=bool))
    # anything else (mixed kinds, extension types): compare the Python values row by row
    pa_, pb_ = a.to_pylist(), b.to_pylist()
    inner = np.array([_py_differ(x, y, rtol, atol) for x, y in zip(pa_, pb_)], dtype=bool)
    return bad | (valid & inner)


def _is_var_list(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def _py_differ(x: Any, y: Any, rtol: float, atol: float) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) != len(y) or any(_py_differ(u, v, rtol, atol) for u, v in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        try:
            return _values_differ(float(x), float(y), rtol, atol)
        except (TypeError, ValueError):
            return True
    return bool(x != y)


# -- anything else: bytes ----------------------------------------------------------------------------
def _byte_differences(ia: Any, ea: Any, ib: Any, eb: Any,
                      diff: Callable[..., Difference]) -> list[Difference]:
    if ea.data_size != eb.data_size:
        return [diff("bytes", "data", f"{ea.data_size} bytes vs {eb.data_size} bytes")]
    if not ea.data_size:
        return []
    ia.check_data(ea)
    ib.check_data(eb)
    va = np.frombuffer(ia.data_view(ea), dtype=np.uint8, count=ea.data_size, offset=ea.data_offset)
    vb = np.frombuffer(ib.data_view(eb), dtype=np.uint8, count=eb.data_size, offset=eb.data_offset)
    bad = np.flatnonzero(va != vb)
    if not bad.size:
        return []
    return [diff("bytes", "data", f"{bad.size} of {ea.data_size} bytes differ, the first at "
                                  f"byte {int(bad[0])} of the data")]


# -- the command -----------------------------------------------------------------------------------
def _patterns(values: Iterable[str] | None) -> list[str]:
    """Repeatable, comma-separated option values → one flat list."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()]


def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two files; print the differences; exit 1 if there are any."""
    a_path, b_path = (_whole_file(p) for p in (args.path_a, args.path_b))
    keywords = _patterns(args.ignore_keywords)
    if not args.compare_checksums:
        keywords += ["CHECKSUM", "DATASUM"]
    try:
        opts = DiffOptions(rtol=args.rtol, atol=args.atol, ignore_keywords=keywords,
                           ignore_comments=_patterns(args.ignore_comments),
                           ignore_hdus=_patterns(args.ignore_hdus),
                           ignore_columns=_patterns(args.ignore_columns), max_diffs=args.max_diffs)
    except ValueError as exc:
        raise UsageError(str(exc).replace("max_diffs", "--max-diffs").replace("rtol", "--rtol")
                         .replace("atol", "--atol")) from None
    found = diff_files(a_path, b_path, opts)
    if args.format == "text":
        for d in found:
            sys.stdout.write(d.text() + "\n")
    else:
        emit([d.record() for d in found], args.format)
    return EXIT_DIFF if found else EXIT_OK


def _whole_file(path: str) -> str:
    (t,) = targets([path], sections=True)
    if t.hdu is not None or t.section is not None:
        raise UsageError(f"{path}: diff works on whole files; an HDU or section suffix does not "
                         "apply (use --ignore-hdus to leave HDUs out)")
    return t.path


def add_parsers(sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``diff`` on the CLI's subparsers and in its command table."""
    p = sub.add_parser("diff", help="compare two files cell by cell (exit 1 when they differ)")
    p.add_argument("path_a")
    p.add_argument("path_b")
    p.add_argument("--rtol", type=float, default=0.0,
                   help="relative tolerance for floats: differ when |a-b| > atol + rtol*|b|")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for floats")
    p.add_argument("--ignore-keywords", action="append", metavar="KEYS",
                   help="header keywords to skip (comma list, repeatable, * wildcards; * skips "
                        "every header difference)")
    p.add_argument("--ignore-comments", action="append", metavar="KEYS",
                   help="keywords whose comments are not compared (patterns as above)")
    p.add_argument("--ignore-hdus", action="append", metavar="HDUS",
                   help="HDUs to leave out: EXTNAME patterns or indices (comma list, repeatable)")
    p.add_argument("--ignore-columns", action="append", metavar="COLUMNS",
                   help="table columns whose cells are not compared (patterns, comma list, "
                        "repeatable; their header cards still are)")
    p.add_argument("--compare-checksums", action="store_true",
                   help="also compare CHECKSUM and DATASUM (ignored by default)")
    p.add_argument("--max-diffs", type=int, default=10,
                   help="data differences listed per HDU before the rest are counted (default 10)")
    format_options(p)
    commands["diff"] = cmd_diff

"""Sidecar statistics for FITS datasets: per-chunk min/max/null counts stored next to the files,
and the test that decides whether a predicate can match a chunk at all (so it is never read).

The sidecar is one JSON file, ``_torchfits_index.json``, in the indexed directory::

    {"format": "torchfits-index", "version": 1, "chunk_rows": 65536, "columns": ["ra", ...],
     "files": {"a.fits": {"size": 1234, "mtime_ns": 1700000000000000000, "hdu": 1,
                          "nrows": 100000,
                          "chunks": [{"start": 0, "stop": 65536,
                                      "stats": {"ra": {"min": 0.1, "max": 9.9, "nulls": 0}}},
                                     ...]}}}

With ``sky=(ra, dec)`` a file's entry also holds ``"sky"``: the HEALPix coverage of its row
ranges, which `cone(...)` terms use to skip rows (format and rules in
`torchfits.tables.sky_index`).

File keys are paths relative to the sidecar's directory (``/`` separated; a file elsewhere is
keyed by its full path or URL). ``min``/``max`` are JSON numbers, booleans or strings, or null
when unknown (all values null or NaN, or an infinity, which JSON cannot hold). A local file
whose size or modification time differs from the entry is stale: its statistics are ignored and
it is scanned in full. A remote file (an fsspec URL) is identified instead by its size and its
``validator`` (ETag, modification time, ... as the store reports them, what the remote byte
source compares too); an entry without a validator is never trusted for a URL. A sidecar can
itself live at a URL, beside remote files.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FitsError
from ..fits.paths import is_glob, is_local_path
from ..query import expr as _expr
from ..query.sky import cone_box
from .sky_index import (
    DEFAULT_ORDER,
    SkyRanges,
    check_order,
    coordinates,
    healpix_cells,
    sky_columns,
    sky_entry,
)

__all__ = ["INDEX_NAME", "ColumnStats", "ChunkStats", "FileStats", "StatsIndex", "build_index",
           "load_index", "find_index", "default_sidecar", "sidecar_exists", "may_match", "file_entry",
           "write_index_document", "update_index"]

INDEX_NAME = "_torchfits_index.json"
FORMAT = "torchfits-index"
VERSION = 1
DEFAULT_CHUNK_ROWS = 65_536


@dataclass(frozen=True)
class ColumnStats:
    """What a chunk's column holds: its smallest and largest non-null, non-NaN value (None when
    unknown) and how many nulls it has."""

    min: Any
    max: Any
    nulls: int


@dataclass(frozen=True)
class ChunkStats:
    """Statistics of rows ``start:stop`` of one table HDU."""

    start: int
    stop: int
    stats: Mapping[str, ColumnStats]


@dataclass(frozen=True)
class FileStats:
    """Statistics of one table HDU of one file version, chunk by chunk."""

    nrows: int
    chunks: Sequence[ChunkStats]
    summary: Mapping[str, ColumnStats] = field(default_factory=dict)
    #: the HEALPix coverage of the file's row ranges (a `torchfits.tables.sky_index.SkyRanges`),
    #: when the sidecar was built with ``sky=``
    sky: Any = None


# -- building ---------------------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None  # NaN/inf: JSON cannot hold them
    if isinstance(value, bytes):
        return None
    return value if isinstance(value, str) else None


def _indexable(field_type: Any) -> bool:
    import pyarrow as pa

    t = field_type
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t))


def _chunk_stats(batch: Any) -> dict[str, dict[str, Any]]:
    import pyarrow.compute as pc

    out: dict[str, dict[str, Any]] = {}
    for name, column in zip(batch.schema.names, batch.columns):
        nulls = int(column.null_count)
        if len(column) - nulls:
            mm = pc.min_max(column)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
        else:
            lo = hi = None
        out[name] = {"min": _json_value(lo), "max": _json_value(hi), "nulls": nulls}
    return out


def _identity(path: Any, src: Any) -> dict[str, Any]:
    """How an entry recognises this version of the file: size and mtime for a local file,
    size and the byte source's validator for a remote one."""
    if _is_remote_path(path):
        byte_source = src.index.source
        validator = getattr(byte_source, "validator", None) or {}
        return {"size": int(byte_source.size), "validator": dict(validator)}
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _check_sky(sky: Any, sky_order: Any) -> tuple[tuple[str, str] | None, int]:
    """``sky=`` and ``sky_order=`` of `build_index`, checked."""
    order = check_order(DEFAULT_ORDER if sky_order is None else sky_order)
    if sky is None:
        return None, order
    if isinstance(sky, str) or len(sky) != 2 or not all(isinstance(c, str) and c for c in sky):
        raise ValueError(f"sky must be a pair of column names (ra, dec), got {sky!r}")
    return (sky[0], sky[1]), order


def _file_entry(path: Any, hdu: Any, columns: Sequence[str] | None, chunk_rows: int,
                sky: tuple[str, str] | None = None, sky_order: int = DEFAULT_ORDER) -> dict[str, Any]:
    from .arrow_assembly import arrow_schema
    from .decode_options import DecodeOptions
    from .source import TableSource

    src = TableSource.open(path, hdu)
    identity = _identity(path, src)
    schema = arrow_schema(src.specs, metadata=False)
    if columns is None:
        chosen = [f.name for f in schema if _indexable(f.type)]
    else:
        chosen = [c for c in columns if c in schema.names and _indexable(schema.field(c).type)]
    sky_names = None if sky is None else sky_columns(sky, schema.names, _name_of(path))
    decoded = list(dict.fromkeys(chosen + list(sky_names or ())))
    cells = []
    chunks = []
    for start in range(0, src.nrows, chunk_rows):
        stop = min(start + chunk_rows, src.nrows)
        stats: dict[str, Any] = {}
        if decoded:
            batch = src.decode(columns=decoded, row_range=(start, stop), options=DecodeOptions(threads=1))
            src.done((start, stop))  # a copy: the chunk's map pages may leave RSS (`residency`)
            if chosen:
                stats = _chunk_stats(batch.select(chosen))
            if sky_names is not None:
                ra, dec = (coordinates(batch.column(n), n) for n in sky_names)
                cells.append(healpix_cells(ra, dec, sky_order))
        chunks.append({"start": start, "stop": stop, "stats": stats})
    entry = dict(identity, hdu=src.entry.index, nrows=src.nrows, chunks=chunks)
    if sky_names is not None:
        every = np.concatenate(cells) if cells else np.empty(0, np.uint64)
        entry["sky"] = sky_entry(every, sky_order, chunk_rows, *sky_names)
    return entry


def build_index(source: Any, hdu: Any = 1, *, columns: Sequence[str] | None = None,
                chunk_rows: int = DEFAULT_CHUNK_ROWS, output: Any = None,
                progress: bool | None = False, storage_options: dict | None = None,
                sky: Sequence[str] | None = None, sky_order: int | None = None) -> str:
    """Compute per-chunk statistics of the table HDU of every file and write the sidecar.

    Parameters
    ----------
    source : str, os.PathLike, glob, URL or list
        A directory (its ``*.fit*`` files), files or a glob; or fsspec URLs (a remote glob or
        directory where the store lists), read through the remote byte sources.
    hdu : int or str
        The table HDU (index or EXTNAME) to index in every file.
    columns : list of str, optional
        Columns to keep statistics for; default every scalar integer, float, logical and string
        column.
    chunk_rows : int
        Rows per chunk: the granularity at which scans can skip rows.
    output : str, os.PathLike or URL, optional
        Where to write the sidecar; default ``_torchfits_index.json`` in the directory (for a
        directory source) or next to the first file. A URL is uploaded in one request (an
        object store or another fsspec file system that takes writes).
    storage_options : dict, optional
        fsspec options for URL sources and a URL ``output`` (see docs/remote.md).
    sky : (str, str), optional
        RA and Dec columns (degrees): also record each row range's HEALPix coverage, so
        ``cone(ra, dec, ...)`` terms skip the files and rows they cannot match (needs the
        ``sky`` extra; docs/sky.md).
    sky_order : int, optional
        The finest HEALPix order of those coverages (0 ... 29, default 10: cells of 3.4').

    Returns
    -------
    str
        The path or URL of the sidecar written.
    """
    from ..fits.paths import fspath, with_storage_options
    from ..fits.threads import run_parallel
    from .source import resolve_sources

    if isinstance(chunk_rows, bool) or int(chunk_rows) <= 0:
        raise ValueError("chunk_rows must be > 0")
    sky_pair, order = _check_sky(sky, sky_order)
    paths = resolve_sources(with_storage_options(source, storage_options))
    names = [_name_of(p) for p in paths]
    if output is None:
        output = default_sidecar(source, paths)
    output = fspath(output)
    if _is_remote_path(output):
        from ..fits.sources.remote import check_writable

        check_writable(output)  # before the work, not after it
    from .._progress import progress_bar

    with progress_bar(total=len(paths), desc="index build", enabled=progress, unit="file") as bar:
        def entry(p: str) -> dict[str, Any]:
            e = _file_entry(p, hdu, columns, int(chunk_rows), sky_pair, order)
            bar.update(1)
            return e

        entries = run_parallel(entry, paths)
    return write_index_document(dict(zip(names, entries)), output, int(chunk_rows), storage_options)


def file_entry(path: str, hdu: Any = 1, columns: Sequence[str] | None = None,
               chunk_rows: int = DEFAULT_CHUNK_ROWS, *, sky: Sequence[str] | None = None,
               sky_order: int | None = None) -> dict[str, Any]:
    """One file's sidecar entry (what `write_index_document` takes): computed where the file
    is, e.g. by the Dask worker that just wrote it."""
    sky_pair, order = _check_sky(sky, sky_order)
    return _file_entry(path, hdu, columns, int(chunk_rows), sky_pair, order)


def update_index(entries: Mapping[str, Mapping[str, Any]], output: Any, chunk_rows: int) -> str:
    """Add or replace file entries in the local sidecar ``output`` (written when absent; an
    unreadable one, or one with another ``chunk_rows``, keeps only the entries of its files
    that still exist and whose chunks match)."""
    from ..fits.paths import fspath

    output = fspath(output)
    root = _directory_of(output)
    merged: dict[str, Any] = {}
    try:
        with open(output, encoding="utf-8") as fh:
            document = json.load(fh)
        if document.get("format") == FORMAT and document.get("version") == VERSION \
                and int(document.get("chunk_rows", -1)) == int(chunk_rows):
            for key, e in dict(document.get("files", {})).items():
                full = key if os.path.isabs(key) or not is_local_path(key) else os.path.join(root, key)
                merged[full] = e
    except (OSError, ValueError):
        pass
    for p, e in entries.items():
        merged[os.path.abspath(p) if is_local_path(p) else p] = e
    return write_index_document(merged, output, chunk_rows)


def write_index_document(entries: Mapping[str, Mapping[str, Any]], output: Any, chunk_rows: int,
                         storage_options: dict | None = None) -> str:
    """Write the sidecar ``output`` from file entries keyed by file path or URL (atomically: a
    local file is renamed into place, a URL is one upload)."""
    from ..fits.paths import fspath

    output = fspath(output)
    root = _directory_of(output)
    files = {_key(p, root): dict(e) for p, e in entries.items()}
    document = {"format": FORMAT, "version": VERSION, "chunk_rows": int(chunk_rows),
                "columns": sorted({c for e in files.values() for ch in e["chunks"] for c in ch["stats"]}),
                "files": files}
    if _is_remote_path(output):
        from ..fits.sources.remote import write_small

        write_small(output, json.dumps(document, allow_nan=False, separators=(",", ":")).encode(),
                    storage_options)
        return output
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(document, fh, allow_nan=False, separators=(",", ":"))
    os.replace(tmp, output)  # readers never see half a sidecar
    return output


def _is_remote_path(path: Any) -> bool:
    """A URL or a `SourcePath` (what the sidecar identifies by validator, not by stat)."""
    return not is_local_path(path)


def _name_of(path: Any) -> str:
    """A source's name in a sidecar: its path, or its URL."""
    from ..fits.paths import SourcePath, fspath

    return path.url if isinstance(path, SourcePath) else fspath(path)


def _comparable_url(url: str) -> str:
    """A URL spelled one way (``memory:///a`` and ``memory://a`` name one object)."""
    scheme, _, rest = url.partition("://")
    return scheme.lower() + "://" + rest.lstrip("/")


def _directory_of(path: str) -> str:
    if _is_remote_path(path):
        return _comparable_url(path).rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(path))


def _key(path: str, root: str) -> str:
    """``path`` relative to the sidecar's directory ``root`` (either may be a URL); the full
    path or URL when it does not lie below it."""
    if _is_remote_path(path) or _is_remote_path(root):
        if not (_is_remote_path(path) and _is_remote_path(root)):
            return _comparable_url(path) if _is_remote_path(path) else os.path.abspath(path)
        full, prefix = _comparable_url(path), root.rstrip("/") + "/"
        return full[len(prefix):] if full.startswith(prefix) else full
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


# -- loading ----------------------------------------------------------------------------------------
class StatsIndex:
    """A loaded sidecar: statistics by file, checked against the file's current size and mtime."""

    def __init__(self, path: str, document: Mapping[str, Any]) -> None:
        if document.get("format") != FORMAT or document.get("version") != VERSION:
            raise ValueError(f"{path}: not a torchfits index (format/version mismatch)")
        self.path = path
        self.root = _directory_of(path)
        self.chunk_rows = int(document.get("chunk_rows", DEFAULT_CHUNK_ROWS))
        self.columns = list(document.get("columns", []))
        self._files: dict[str, Any] = dict(document.get("files", {}))

    def __len__(self) -> int:
        return len(self._files)

    def lookup(self, path: str, hdu_index: int, byte_source: Any = None) -> FileStats | None:
        """The statistics of ``path``'s HDU ``hdu_index``, or None if absent or stale.

        For a URL, ``byte_source`` is the open remote source, whose size and validator must be
        the entry's (no request is made here)."""
        entry = self._files.get(_key(path, self.root))
        if entry is None or entry.get("hdu") != hdu_index:
            return None
        if _is_remote_path(path):
            validator = getattr(byte_source, "validator", None)
            if (not validator or entry.get("validator") != validator
                    or entry.get("size") != getattr(byte_source, "size", None)):
                return None  # another version of the object, or one that cannot be told apart
        else:
            try:
                st = os.stat(path)
            except OSError:
                return None
            if st.st_size != entry.get("size") or st.st_mtime_ns != entry.get("mtime_ns"):
                return None  # the file changed since the index was built
        chunks = [ChunkStats(int(c["start"]), int(c["stop"]),
                             {k: ColumnStats(v.get("min"), v.get("max"), int(v.get("nulls", 0)))
                              for k, v in c.get("stats", {}).items()})
                  for c in entry.get("chunks", [])]
        nrows = int(entry["nrows"])
        return FileStats(nrows, chunks, _summarise(chunks), _sky_ranges(entry, nrows))


def _sky_ranges(entry: Mapping[str, Any], nrows: int) -> Any:
    """The entry's sky coverage, or None (absent, or not one this version reads)."""
    raw = entry.get("sky")
    if not raw:
        return None
    try:
        sky = SkyRanges(raw)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return sky if sky.nrows == nrows else None


def _summarise(chunks: Sequence[ChunkStats]) -> dict[str, ColumnStats]:
    """Whole-file statistics from chunk statistics (a min/max is unknown if any chunk's is)."""
    names: set[str] = set()
    for c in chunks:
        names |= set(c.stats)
    out = {}
    for name in names:
        maybe = [c.stats.get(name) for c in chunks]
        parts = [p for p in maybe if p is not None]
        if len(parts) != len(maybe):
            continue
        nulls = sum(p.nulls for p in parts)
        known = [p for p in parts if p.min is not None and p.max is not None]
        valid_chunks = [(p, c) for p, c in zip(parts, chunks) if (c.stop - c.start) > p.nulls]
        if len(known) != len(valid_chunks) or not known:
            out[name] = ColumnStats(None, None, nulls)
            continue
        try:
            out[name] = ColumnStats(min(p.min for p in known), max(p.max for p in known), nulls)
        except TypeError:  # mixed value types: say nothing
            out[name] = ColumnStats(None, None, nulls)
    return out


def load_index(path: Any, storage_options: dict | None = None) -> StatsIndex:
    """Read a sidecar written by :func:`build_index` (a local path or a URL)."""
    from ..fits.paths import SourcePath, fspath

    if isinstance(path, SourcePath):
        path, storage_options = path.url, dict(path.storage_options or {}, **(storage_options or {}))
    path = fspath(path)
    if _is_remote_path(path):
        from ..fits.sources.remote import read_small

        data = read_small(path, storage_options)
        if data is None:
            raise FileNotFoundError(f"no statistics sidecar at {path}")
        return StatsIndex(path, json.loads(data))
    with open(path, encoding="utf-8") as fh:
        return StatsIndex(path, json.load(fh))


def _sidecar_candidates(names: Sequence[str], source: Any) -> list[str]:
    """Where the default sidecar of these sources is: the source directory (a local directory,
    or a remote directory or glob), then the directory of the first file."""
    from ..fits.paths import SourcePath, fspath

    candidates = []
    if not isinstance(source, (list, tuple)) and source is not None:
        text = source.url if isinstance(source, SourcePath) else fspath(source)
        if _is_remote_path(text):
            if text.endswith("/") or is_glob(text.partition("://")[2]):
                candidates.append(text.rsplit("/", 1)[0] + "/" + INDEX_NAME)
        elif os.path.isdir(text):
            candidates.append(os.path.join(text, INDEX_NAME))
    for p in names[:1]:
        if _is_remote_path(p):
            candidates.append(p.rsplit("/", 1)[0] + "/" + INDEX_NAME)
        else:
            candidates.append(os.path.join(os.path.dirname(os.path.abspath(p)), INDEX_NAME))
    return list(dict.fromkeys(candidates))


def default_sidecar(source: Any, paths: Sequence[Any]) -> str:
    """Where `build_index` writes by default for these resolved ``paths`` of ``source``."""
    candidates = _sidecar_candidates([_name_of(p) for p in paths], source)
    return candidates[0] if candidates else INDEX_NAME


def sidecar_exists(path: str, storage_options: dict | None = None) -> bool:
    """Whether a sidecar is already at ``path`` (a local path or a URL)."""
    if _is_remote_path(path):
        from ..fits.sources.remote import read_small

        return read_small(path, storage_options) is not None
    return os.path.exists(path)


def find_index(paths: Iterable[str], source: Any, storage_options: dict | None = None) -> StatsIndex | None:
    """The sidecar that applies by default: in the source directory, or in the directory of the
    first file, local or remote (one small request); None when there is none (or it cannot be
    read)."""
    for c in _sidecar_candidates(list(paths), source):
        if _is_remote_path(c):
            try:
                return load_index(c, storage_options)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, FitsError):
                return None
        if os.path.isfile(c):
            try:
                return load_index(c)
            except (OSError, ValueError):
                return None
    return None


# -- deciding ---------------------------------------------------------------------------------------
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_BOOL_WORDS = {"true": True, "false": False}


def may_match(expr: Any, stats: Mapping[str, ColumnStats], nrows: int) -> bool:
    """Whether any of ``nrows`` rows described by ``stats`` could satisfy ``expr`` (a tree).

    Conservative: False only when no row can possibly be selected; anything the statistics
    cannot speak for (arithmetic, column-to-column comparisons, unknown columns) may match.
    """
    if nrows <= 0:
        return False
    try:
        return _possible(expr, True, stats, nrows)
    except RecursionError:
        return True


def _possible(node: Any, want: bool, stats: Mapping[str, ColumnStats], nrows: int) -> bool:
    """Could some row make ``node`` evaluate to ``want`` (definitely true or definitely false)?"""
    E = _expr
    if isinstance(node, E.And):
        if want:
            return _possible(node.left, True, stats, nrows) and _possible(node.right, True, stats, nrows)
        return _possible(node.left, False, stats, nrows) or _possible(node.right, False, stats, nrows)
    if isinstance(node, E.Or):
        if want:
            return _possible(node.left, True, stats, nrows) or _possible(node.right, True, stats, nrows)
        return _possible(node.left, False, stats, nrows) and _possible(node.right, False, stats, nrows)
    if isinstance(node, E.Not):
        return _possible(node.operand, not want, stats, nrows)
    if isinstance(node, E.Between):
        if not (isinstance(node.low, E.Literal) and isinstance(node.high, E.Literal)):
            return True
        inner = E.And(E.Compare(">=", node.operand, node.low), E.Compare("<=", node.operand, node.high))
        return _possible(inner, want != node.negated, stats, nrows)
    if isinstance(node, E.InList):
        if not node.values:
            return not want if not node.negated else want
        terms = [E.Compare("==", node.operand, E.Literal(v)) for v in node.values]
        return _possible(E.chain(E.Or, terms), want != node.negated, stats, nrows)
    if isinstance(node, E.IsNull):
        st = _column_stats(node.operand, stats)
        if st is None:
            return True
        has_null, has_value = st.nulls > 0, st.nulls < nrows
        # IS NULL is never unknown: true on null rows, false on the others
        return (has_null if want else has_value) if not node.negated else (has_value if want else has_null)
    if isinstance(node, E.Compare):
        return _possible_compare(node, want, stats, nrows)
    if isinstance(node, E.Cone):
        return _possible_cone(node, want, stats, nrows)
    return True


def _possible_cone(node: Any, want: bool, stats: Mapping[str, ColumnStats], nrows: int) -> bool:
    """A cone can hold a row only where the declination range meets its band and, for RA
    statistics inside [0, 360], the RA range meets one of its RA windows."""
    if not want:
        return True
    ra, dec = _column_stats(node.ra, stats), _column_stats(node.dec, stats)
    if any(st is not None and st.nulls >= nrows for st in (ra, dec)):
        return False  # every row null: never true
    box = cone_box(node.ra0, node.dec0, node.radius)
    if dec is not None and _numbers(dec) and (dec.max < box.dec_lo or dec.min > box.dec_hi):
        return False
    if ra is not None and _numbers(ra) and box.ra_windows is not None and 0 <= ra.min \
            and ra.max <= 360:
        return any(ra.max >= lo and ra.min <= hi for lo, hi in box.ra_windows)
    return True


def _numbers(st: ColumnStats) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (st.min, st.max))


def _column_stats(node: Any, stats: Mapping[str, ColumnStats]) -> ColumnStats | None:
    if isinstance(node, _expr.Column):
        return stats.get(node.name)
    return None


def _possible_compare(node: Any, want: bool, stats: Mapping[str, ColumnStats], nrows: int) -> bool:
    E = _expr
    op, left, right = node.op, node.left, node.right
    if isinstance(left, E.Literal) and isinstance(right, E.Column):
        op, left, right = _FLIP[op], right, left
    if not isinstance(right, E.Literal) or right.value is None:
        return True
    st = _column_stats(left, stats)
    if st is None:
        return True
    if st.nulls >= nrows:
        return False  # every row null: a comparison is never true nor false
    lo, hi = st.min, st.max
    if lo is None or hi is None:
        return True
    if not want:
        op = _NEGATE[op]  # for a known value, "not (v op x)" is "v negated-op x"
    value = right.value
    candidates: list[Any]
    if isinstance(lo, bool):
        key = value.lower() if isinstance(value, str) else value
        if key in _BOOL_WORDS:
            value = _BOOL_WORDS[key]
        if isinstance(value, float) or not isinstance(value, (bool, int)) or value not in (0, 1):
            return True
        candidates = [bool(value)]
    elif isinstance(lo, str):
        if not isinstance(value, str):
            return True
        candidates = [value.rstrip(" ")]
    else:
        if isinstance(value, (str, bool)):
            return True
        candidates = [value]
        if isinstance(lo, float) or isinstance(hi, float):
            # float32 columns compare with the literal rounded to float32: accept either
            candidates.append(float(np.float32(value)))
    try:
        return any(_range_allows(op, lo, hi, v) for v in candidates)
    except TypeError:
        return True


def _range_allows(op: str, lo: Any, hi: Any, v: Any) -> bool:
    if op == "==":
        return bool(lo <= v <= hi)
    if op == "!=":
        return not (lo == hi == v)
    if op == "<":
        return bool(lo < v)
    if op == "<=":
        return bool(lo <= v)
    if op == ">":
        return bool(hi > v)
    return bool(hi >= v)

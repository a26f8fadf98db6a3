"""`write`: FITS catalogs → a HATS catalog (HEALPix-partitioned Parquet that hats and lsdb open).

Two passes over the inputs: the first reads RA and Dec, computes ``_healpix_29`` and counts rows
per pixel; the partitions follow from the counts; the second writes each partition, gathering its
rows from every file by row index. Everything lands in a temporary directory beside ``out_dir``,
renamed into place at the end.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import FitsFileExistsError
from ..fits.paths import fspath, is_url
from ..tables.decode_options import DecodeOptions
from ..tables.scan import Scanner, scan
from ..tables.source import TableSource
from .partitioning import (
    MAX_ORDER,
    SPATIAL_INDEX_COLUMN,
    SPATIAL_INDEX_ORDER,
    Partition,
    PixelCounts,
    choose_partitions,
    pixel_directory,
    sky_fraction,
    spatial_index,
)

__all__ = ["write"]

# hats' Parquet layout (hats.io.file_io): 128 KiB data pages, statistics and page indexes,
# byte-stream-split floats, delta-coded spatial index
_DATA_PAGE_SIZE = 128 * 1024


def write(files: Any, out_dir: str | os.PathLike[str], *, ra: str = "ra", dec: str = "dec",
          hdu: int | str = 1, columns: Sequence[str] | None = None,
          catalog_name: str | None = None, pixel_threshold: int = 1_000_000,
          highest_order: int = 10, lowest_order: int = 0, compression: str = "zstd",
          compression_level: int | None = 3, overwrite: bool = False,
          threads: int | None = None, storage_options: dict[str, Any] | None = None) -> str:
    """Write FITS tables as one HATS catalog that ``hats.read_hats`` and ``lsdb`` open.

    Parameters
    ----------
    files : str, os.PathLike, glob, directory, URL or a list of them
        The input tables (the same columns in every file).
    out_dir : str or os.PathLike
        The catalog directory to create (local). It must not exist, or be empty, unless
        ``overwrite``.
    ra, dec : str
        The position columns, in degrees.
    hdu : int or str
        The table HDU of every file.
    columns : list of str, optional
        Columns to keep (the position columns are added when missing); None keeps all.
    catalog_name : str, optional
        ``obs_collection`` of the catalog; default: the name of ``out_dir``.
    pixel_threshold : int
        The most rows one partition may hold.
    highest_order, lowest_order : int
        The HEALPix orders partitions may take (the counts are made at ``highest_order``).
    compression, compression_level
        Parquet compression of the partitions. hats-import writes zstd at level 15, which
        makes files barely smaller (about 1%) at many times the cost; level 3 is the default.
    overwrite : bool
        Replace an existing ``out_dir``.
    threads : int, optional
        Partitions written at once (default: every core, at most 8).
    storage_options : dict, optional
        fsspec and torchfits remote options for URL inputs.

    Returns
    -------
    str
        ``out_dir``.

    Notes
    -----
    Memory holds one partition per writing thread (at most ``pixel_threshold`` rows each) and
    the RA/Dec of one file during the first pass; the spatial index of every row (16 bytes a
    row) waits on disk in the temporary directory between the passes.
    """
    target = _check_target(out_dir, overwrite)
    _check_orders(highest_order, lowest_order, pixel_threshold)
    name = catalog_name if catalog_name is not None else os.path.basename(target)
    if not name or "\n" in name or "\r" in name:
        raise ValueError(f"catalog_name must be a one-line, non-empty name, not {name!r}")
    first = scan(files, hdu, columns=columns, storage_options=storage_options)
    sources = first.sources
    ra_name, dec_name = (_column_of(sources[0], c) for c in (ra, dec))
    projection = list(first.projection)
    for c in (ra_name, dec_name):
        if c not in projection:
            projection.append(c)
    if any(c.lower() == SPATIAL_INDEX_COLUMN for c in projection):
        raise ValueError(f"the input already has a column {SPATIAL_INDEX_COLUMN!r}; leave it out "
                         "with columns=")
    workers = max(1, min(8, os.cpu_count() or 1) if threads is None else int(threads))

    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    stage = os.path.join(parent, f".{os.path.basename(target)}.tmp-{uuid.uuid4().hex[:12]}")
    os.makedirs(stage)
    try:
        work = os.path.join(stage, "intermediate")
        os.makedirs(work)
        counts = PixelCounts(highest_order)
        for i, src in enumerate(sources):
            _index_file(src, i, ra_name, dec_name, work, counts)
        pixels, pixel_rows = counts.totals()
        total = int(pixel_rows.sum())
        if total == 0:
            raise ValueError("the input tables have no rows; a HATS catalog needs at least one")
        parts = choose_partitions(pixels, pixel_rows, highest_order=highest_order,
                                  lowest_order=lowest_order, threshold=pixel_threshold)
        indexes = [_load_index(work, i) for i in range(len(sources))]
        schema = _output_schema(sources[0], projection)
        options = _parquet_options(schema, compression, compression_level)
        os.makedirs(os.path.join(stage, "dataset"))

        def one(part: Partition) -> Any:
            return _write_partition(part, sources, indexes, projection, schema, stage, options)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            footers = list(pool.map(one, parts))
        indexes.clear()  # the memory maps of the index files, before their removal
        shutil.rmtree(work)
        _write_metadata(stage, schema, parts, footers)
        _write_partition_info(stage, parts)
        _write_skymaps(stage, pixels, pixel_rows, highest_order)
        _write_properties(stage, name=name, ra=ra_name, dec=dec_name, total=total, parts=parts,
                          threshold=pixel_threshold, skymap_order=highest_order)
        _move_into_place(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target


def _check_target(out_dir: Any, overwrite: bool) -> str:
    if not isinstance(out_dir, (str, os.PathLike)) or not os.fspath(out_dir):
        raise TypeError(f"out_dir must be a local directory path, not {out_dir!r}")
    target = fspath(out_dir)
    if is_url(target):
        raise ValueError(f"out_dir must be a local directory, not the URL {target!r}")
    target = os.path.abspath(target)
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise FitsFileExistsError(f"{target} exists and is not a directory")
        if os.listdir(target) and not overwrite:
            raise FitsFileExistsError(f"{target} is not empty. Use overwrite=True to replace it.")
    return target


def _check_orders(highest_order: int, lowest_order: int, pixel_threshold: int) -> None:
    for label, value in (("highest_order", highest_order), ("lowest_order", lowest_order),
                         ("pixel_threshold", pixel_threshold)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{label} must be an int, not {value!r}")
    if not 0 <= highest_order <= MAX_ORDER:
        raise ValueError(f"highest_order must be in [0, {MAX_ORDER}], not {highest_order}")
    if not 0 <= lowest_order <= highest_order:
        raise ValueError(f"lowest_order must be in [0, highest_order={highest_order}], "
                         f"not {lowest_order}")
    if pixel_threshold < 1:
        raise ValueError(f"pixel_threshold must be >= 1, not {pixel_threshold}")


def _column_of(src: TableSource, name: str) -> str:
    """The table's spelling of column ``name`` (exact first, then the one case-insensitive)."""
    names = [s.name for s in src.specs]
    if name in names:
        return name
    matches = [n for n in names if n.lower() == name.lower()]
    if len(matches) != 1:
        raise ValueError(f"{src.label}: no position column {name!r} (columns: {names})")
    return matches[0]


def _index_file(src: TableSource, i: int, ra: str, dec: str, work: str,
                counts: PixelCounts) -> None:
    """Pass 1 for one file: its ``_healpix_29`` sorted, with the rows in that order, to disk."""
    positions = Scanner([src], columns=[ra, dec], schema_metadata=False).to_numpy()
    index29 = spatial_index(np.ma.getdata(positions[ra]), np.ma.getdata(positions[dec]),
                            where=src.label)
    del positions
    # introsort: twice as fast as a stable sort here; rows at one position may come in any order
    rows = np.argsort(index29)
    index29 = index29[rows]
    counts.add_sorted(index29)
    np.save(os.path.join(work, f"{i}.index.npy"), index29)
    np.save(os.path.join(work, f"{i}.rows.npy"), rows)


def _load_index(work: str, i: int) -> tuple[np.ndarray, np.ndarray]:
    return (np.load(os.path.join(work, f"{i}.index.npy"), mmap_mode="r"),
            np.load(os.path.join(work, f"{i}.rows.npy"), mmap_mode="r"))


def _output_schema(src: TableSource, projection: list[str]) -> Any:
    import pyarrow as pa

    fields = Scanner([src], columns=projection, schema_metadata=False).schema
    return pa.schema([pa.field(SPATIAL_INDEX_COLUMN, pa.int64())]
                     + [f.remove_metadata() for f in fields])


def _parquet_options(schema: Any, compression: str, level: int | None) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    encoding = {f.name: "BYTE_STREAM_SPLIT" for f in schema if pa.types.is_floating(f.type)}
    encoding[SPATIAL_INDEX_COLUMN] = "DELTA_BINARY_PACKED"
    return {"compression": compression, "compression_level": level,
            "column_encoding": encoding,
            "use_dictionary": [f.name for f in schema if f.name not in encoding],
            "data_page_size": _DATA_PAGE_SIZE, "dictionary_pagesize_limit": _DATA_PAGE_SIZE,
            "write_statistics": True, "write_page_index": True,
            "sorting_columns": [pq.SortingColumn(0)]}


def _write_partition(part: Partition, sources: list[TableSource],
                     indexes: list[tuple[np.ndarray, np.ndarray]], projection: list[str],
                     schema: Any, stage: str, options: dict[str, Any]) -> Any:
    """Pass 2 for one partition: its rows from every file, sorted by ``_healpix_29``, as Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lo, hi = part.index_range()
    pieces, keys = [], []
    for src, (index29, rows) in zip(sources, indexes):
        a, b = np.searchsorted(index29, [lo, hi])
        if b <= a:
            continue
        table = Scanner([src], columns=projection, rows=np.asarray(rows[a:b]),
                        options=DecodeOptions(threads=1), schema_metadata=False).to_arrow()
        pieces.append(table)
        keys.append(np.asarray(index29[a:b]))
    key = np.concatenate(keys)
    table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    if len(pieces) > 1:
        order = np.argsort(key, kind="stable")
        table, key = table.take(order), key[order]
    if table.num_rows != part.rows:  # the files changed between the passes
        raise RuntimeError(f"partition Norder={part.order}, Npix={part.pixel}: counted {part.rows} "
                           f"rows, read {table.num_rows}; did an input file change?")
    table = pa.Table.from_arrays([pa.array(key, pa.int64())] + table.columns, schema=schema)
    relative = f"{pixel_directory(part.order, part.pixel)}/Npix={part.pixel}.parquet"
    path = os.path.join(stage, "dataset", relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    footers: list[Any] = []
    pq.write_table(table, path, metadata_collector=footers, **options)
    footers[0].set_file_path(relative)
    return footers[0]


def _write_metadata(stage: str, schema: Any, parts: list[Partition], footers: list[Any]) -> None:
    """``dataset/_common_metadata`` (the schema) and ``dataset/_metadata`` (every footer, in
    the partitions' breadth-first order)."""
    import pyarrow.parquet as pq

    dataset = os.path.join(stage, "dataset")
    pq.write_metadata(schema, os.path.join(dataset, "_common_metadata"))
    pq.write_metadata(schema, os.path.join(dataset, "_metadata"), metadata_collector=footers)


def _write_partition_info(stage: str, parts: list[Partition]) -> None:
    lines = ["Norder,Npix"] + [f"{p.order},{p.pixel}" for p in parts]
    with open(os.path.join(stage, "partition_info.csv"), "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


def _write_skymaps(stage: str, pixels: np.ndarray, pixel_rows: np.ndarray, order: int) -> None:
    """``skymap.fits`` (rows per pixel at ``order``) and ``point_map.fits`` (the same map, the
    older name hats reads the coverage from): cdshealpix's HEALPix map FITS, explicit when most
    pixels are empty, as hats writes it."""
    from cdshealpix.skymap.skymap import SkymapExplicit, SkymapImplicit

    npix = 12 * 4 ** order
    if pixels.size >= npix / 2:
        dense = np.zeros(npix, dtype=np.int64)
        dense[pixels] = pixel_rows
        skymap: Any = SkymapImplicit(dense, null_value=0)
    else:
        skymap = SkymapExplicit(pixels.astype(np.uint64), pixel_rows.astype(np.int64), order)
    path = os.path.join(stage, "skymap.fits")
    skymap.to_fits(path)
    try:
        os.link(path, os.path.join(stage, "point_map.fits"))
    except OSError:
        shutil.copyfile(path, os.path.join(stage, "point_map.fits"))


def _property(value: Any) -> str:
    # java properties: backslashes escape, so double them
    return str(value).replace("\\", "\\\\")


def _write_properties(stage: str, *, name: str, ra: str, dec: str, total: int,
                      parts: list[Partition], threshold: int, skymap_order: int) -> None:
    """``hats.properties`` (and its copy ``properties``): what the catalog is and holds."""
    size = 0
    for folder, _, names in os.walk(stage):
        size += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
    now = datetime.now(tz=timezone.utc).strftime("%Y-%m-%dT%H:%M%Z")
    keys = {
        "obs_collection": name, "dataproduct_type": "object", "hats_nrows": total,
        "hats_col_ra": ra, "hats_col_dec": dec,
        "hats_col_healpix": SPATIAL_INDEX_COLUMN, "hats_col_healpix_order": SPATIAL_INDEX_ORDER,
        "hats_npix_suffix": ".parquet", "hats_skymap_order": skymap_order,
        "hats_max_rows": threshold, "hats_estsize": size // 1024,
        "moc_sky_fraction": f"{sky_fraction(parts):0.5f}",
        "hats_builder": f"torchfits v{__version__}", "hats_creation_date": now,
        "hats_version": "v1.0", "hats_order": max(p.order for p in parts),
    }
    text = "#HATS catalog\n" + "".join(f"{k}={_property(v)}\n" for k, v in keys.items())
    for file_name in ("hats.properties", "properties"):
        with open(os.path.join(stage, file_name), "w", encoding="utf-8") as f:
            f.write(text)


def _move_into_place(stage: str, target: str) -> None:
    """Rename the staged catalog to ``target``; an old ``target`` goes only once the new one
    is in place."""
    old = None
    if os.path.exists(target):
        if os.listdir(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-",
                                   dir=os.path.dirname(target))
            os.rmdir(old)
            os.rename(target, old)
        else:
            os.rmdir(target)
    try:
        os.rename(stage, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

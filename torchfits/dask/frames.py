"""FITS tables in and out of Dask DataFrames.

`read_table` opens the files as a `FitsDataset` (headers only) and hands its fragments to
``dask.dataframe.from_map`` (see `FitsDataset.to_dask_dataframe`). `to_fits` ends a pipeline:
every partition is written by its worker as one FITS file (atomically), and a statistics
sidecar over the written files lets later reads skip them.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..errors import FitsFileExistsError

__all__ = ["read_table", "to_fits"]


def read_table(source: Any, hdu: Any = 1, columns: Sequence[str] | None = None, where: Any = None, *,
               index: str | None = None, split_row_groups: Any = "auto", schema: Any = None,
               add_path_column: bool = False, sidecar: Any = None,
               storage_options: dict | None = None, threads: int | None = None) -> Any:
    """FITS tables as a ``dask.dataframe.DataFrame``, one partition per fragment.

    Parameters
    ----------
    source : str, os.PathLike, glob, directory, URL or list
        The catalog files (a directory means its ``*.fit*`` files). URLs (``http(s)://``,
        ``s3://``, ...) are read through torchfits' byte sources in every worker; a list of
        URLs always works, a remote glob only where the store can list (see docs/dask.md).
    hdu : int or str
        The table HDU in every file.
    columns : list of str, optional
        Columns to read. Dask's optimizer narrows this to what the graph uses, so
        ``ddf[["ra", "dec"]]`` decodes two columns only.
    where : str or pyarrow.compute.Expression, optional
        A filter (where-string in the native dialect) run inside every partition's scan, on the
        raw rows where the predicate kernel can; partitions that the sidecar statistics rule
        out never become tasks.
    index : str, optional
        A column to make the index. When the statistics show the partitions hold disjoint
        ranges of it, partitions are ordered by it and the divisions are known.
    split_row_groups : "auto", bool or int
        "auto"/True: about 128 MB of decoded data per partition (large files cut, small
        consecutive files gathered); False: one per file; an int: at most that many rows per
        partition, each within one file.
    schema : pyarrow.Schema, optional
        The schema to read into (default: the files' schemas unified by name).
    add_path_column : bool
        Add ``filename`` and ``hdu`` columns.
    sidecar : None, False, str or os.PathLike
        The statistics sidecar (``_torchfits_index.json``): None finds one beside the files,
        False uses none.
    storage_options : dict, optional
        fsspec options for remote sources plus torchfits' own (``allow_private_hosts``,
        ``cache``; see docs/remote.md). They travel with every partition, so the workers
        open the URLs the way the caller did.
    threads : int, optional
        Decode threads per partition. Default: 1 inside a ``distributed`` worker (the worker's
        task slots are the parallelism), the shared default under Dask's local schedulers.

    Returns
    -------
    dask.dataframe.DataFrame
    """
    from ..tables.dataset import dataset

    ds = dataset(source, hdu, schema=schema, add_path_column=add_path_column, index=sidecar,
                 storage_options=storage_options)
    return ds.to_dask_dataframe(columns, where, index=index, split_row_groups=split_row_groups,
                                threads=threads)


def _url_filesystem(url: str, storage_options: dict | None) -> tuple[Any, str]:
    """The fsspec file system and path of a URL ``to_fits`` writes to (object stores and the
    like: an http(s) server takes no uploads), through the same guard as every remote read."""
    from ..fits.sources.remote import check_writable, guarded_filesystem

    check_writable(url)
    return guarded_filesystem(url, storage_options)


def _write_partition(df: Any, path: str, overwrite: bool, write_index: bool,
                     chunk_rows: int, storage_options: dict | None = None) -> tuple[str, dict | None]:
    """Write one partition as a FITS table and return its sidecar entry.

    A local file is written atomically (a temporary file renamed into place); a URL gets the
    file written locally first and uploaded in one request, so an object store shows it whole
    or not at all. A URL's entry takes its statistics from the local copy and its identity
    (size, ETag or modification time) from the store after the upload."""
    from ..fits.paths import is_url
    from ..fits.sources.remote import remote_identity
    from ..tables.stats_index import file_entry
    from ..writing.api import write

    if write_index:
        df = df.reset_index()
    if not is_url(path):
        write(path, df, overwrite=overwrite)
        return path, file_entry(path, 1, None, chunk_rows)
    import tempfile

    fs, remote = _url_filesystem(path, storage_options)
    with tempfile.TemporaryDirectory(prefix="torchfits-to-fits-") as tmp:
        local = os.path.join(tmp, "part.fits")
        write(local, df)
        entry = file_entry(local, 1, None, chunk_rows)
        fs.put_file(local, remote)
    entry.pop("mtime_ns", None)
    entry.update(remote_identity(path, storage_options))
    return path, entry


def _finish(results: Sequence[tuple[str, dict | None]], directory: str, chunk_rows: int,
            sidecar: bool, storage_options: dict | None = None) -> list[str]:
    from ..fits.paths import is_url
    from ..tables.stats_index import INDEX_NAME, write_index_document

    paths = [p for p, _ in results]
    if sidecar:
        target = (directory.rstrip("/") + "/" + INDEX_NAME if is_url(directory)
                  else os.path.join(directory, INDEX_NAME))
        write_index_document({p: e for p, e in results if e is not None}, target, chunk_rows,
                             storage_options)
    return paths


def to_fits(df: Any, directory: Any, *, name_function: Any = None, overwrite: bool = False,
            write_index: bool | None = None, sidecar: bool | None = None,
            chunk_rows: int | None = None, compute: bool = True,
            storage_options: dict | None = None) -> Any:
    """Write a Dask DataFrame as one FITS table file per partition, plus a statistics sidecar.

    Every partition is written by the worker that computes it, to a temporary file renamed into
    place when complete (or, for a URL, uploaded in one request when complete), so readers
    never see half a file. A local directory must be one the workers share with the caller
    (any directory for a local cluster, a network file system for a real one).

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        The data (a pandas DataFrame is written as one partition).
    directory : str, os.PathLike or URL
        Created if missing. A URL (``s3://bucket/out/``, ``gs://...``, any fsspec file system
        that takes uploads) gets one upload per partition from the worker that computed it.
    name_function : callable, optional
        Partition number → file name; default ``part-{i:05d}.fits``.
    overwrite : bool
        Replace existing files of the same names (otherwise they are an error, found before
        anything is written).
    write_index : bool, optional
        Write the index as a column; default: when it is named or not a default range index.
    sidecar : bool, optional
        Write ``_torchfits_index.json`` (per-chunk statistics of every file) in the directory,
        so `read_table` over it skips files and knows divisions. Default True. In a URL
        directory the sidecar records each object's size and ETag (or modification time) as
        the store reports them after the upload, so a later rewrite of a file makes its entry
        stale rather than wrong.
    chunk_rows : int, optional
        Statistics granularity (default: the sidecar's default).
    compute : bool
        Write now and return the paths; False returns a ``dask.delayed`` object that does it.
    storage_options : dict, optional
        fsspec options for a URL ``directory`` (credentials, endpoint, ...); they travel to
        the workers with the tasks.

    Returns
    -------
    list of str, or dask.delayed.Delayed when ``compute=False``
    """
    import dask.dataframe as dd

    import dask

    from ..fits.paths import fspath, is_url
    from ..tables.stats_index import DEFAULT_CHUNK_ROWS

    if not isinstance(df, dd.DataFrame):
        type_name = type(df).__module__.split(".")[0]
        if type_name == "pandas":
            df = dd.from_pandas(df, npartitions=1)
        else:
            raise TypeError(f"to_fits needs a dask.dataframe.DataFrame, not {type(df).__name__}")
    directory = fspath(directory)
    remote = is_url(directory)
    if sidecar is None:
        sidecar = True
    rows = DEFAULT_CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
    if rows <= 0:
        raise ValueError("chunk_rows must be > 0")
    name_function = name_function or (lambda i: f"part-{i:05d}.fits")
    names = [str(name_function(i)) for i in range(df.npartitions)]
    if len(set(names)) != len(names) or any(os.sep in n or "/" in n or n in ("", ".", "..") for n in names):
        raise ValueError("name_function must give a distinct plain file name for every partition")
    if remote:
        fs, base = _url_filesystem(directory, storage_options)
        fs.makedirs(base, exist_ok=True)
        paths = [directory.rstrip("/") + "/" + n for n in names]
        exists = [fs.exists(base.rstrip("/") + "/" + n) for n in names] if not overwrite else []
    else:
        os.makedirs(directory, exist_ok=True)
        paths = [os.path.join(directory, n) for n in names]
        exists = [os.path.exists(p) for p in paths] if not overwrite else []
    if not overwrite:
        existing = [p for p, e in zip(paths, exists) if e]
        if existing:
            raise FitsFileExistsError(f"{existing[0]} already exists ({len(existing)} of the partition "
                                      "files do); pass overwrite=True to replace them")
    if write_index is None:
        meta_index = df._meta.index
        write_index = meta_index.name is not None or type(meta_index).__name__ != "RangeIndex"
    parts = df.to_delayed()
    writes = [dask.delayed(_write_partition, pure=False)(part, path, overwrite, bool(write_index), rows,
                                                         storage_options if remote else None)
              for part, path in zip(parts, paths)]
    done = dask.delayed(_finish, pure=False)(writes, directory, rows, bool(sidecar),
                                             storage_options if remote else None)
    return done.compute() if compute else done

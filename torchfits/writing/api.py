"""Writing FITS: `write` dispatches images (arrays, tensors) and tables (dicts of arrays, Arrow,
pandas, Polars) to the HDU writers and writes them atomically (:mod:`.atomic`).

Image HDUs live in :mod:`.image_write`, table layout in :mod:`.table_plan` / :mod:`.table_write`,
checksums in :mod:`.checksum`, in-file edits in :mod:`.hdu_edit` and :mod:`.table_edit`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._torch_adapter import is_tensor
from ..errors import FitsError, FitsWriteError, HeaderCardError, QuantizeError, UInt64WriteError
from ..fits.aliases import PathArg
from .atomic import atomic_output, check_target
from .cards import as_header, named_errors
from .image_write import write_image_hdu, write_quantized_image_hdu
from .items import ImageData, TableData, as_numpy, to_items

if TYPE_CHECKING:  # pragma: no cover - typing only; torch is optional
    import torch

__all__ = ["write", "write_tensor", "write_hdus"]


def write_hdus(path: PathArg, hdus: Sequence[Any], *, overwrite: bool = False,
               checksum: bool = False) -> None:
    """Write `ImageData` / `TableData` items as one file; a table first gets an empty primary."""
    target = check_target(path, overwrite=overwrite)
    items = list(hdus)
    if not items:
        raise ValueError("At least one writable HDU is required")
    if isinstance(items[0], TableData):
        items.insert(0, ImageData(np.empty((0,), np.uint8)))
    with atomic_output(target) as sink:
        spans = []
        for i, item in enumerate(items):
            with named_errors(target, i):
                if type(item).__name__ == "QuantizedImage":
                    spans.append(write_quantized_image_hdu(sink, item, primary=i == 0, checksum=checksum))
                elif isinstance(item, ImageData):
                    spans.append(write_image_hdu(sink, as_numpy(item.array), item.header, primary=i == 0,
                                                 checksum=checksum))
                else:
                    if i == 0:
                        raise ValueError("a table cannot be the primary HDU")
                    from .table_write import write_table_hdu

                    spans.append(write_table_hdu(sink, item, checksum=checksum))
        if checksum:
            from .checksum import patch_file_checksums

            patch_file_checksums(sink.fh, spans)


def write(path: PathArg, data: Any, header: Any = None, overwrite: bool = False,
          checksum: bool = False, compress: Any = False, quantize: Any = None) -> None:
    """Write images, tables or a list of them as one FITS file, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; written to a temporary file beside it, fsync'd, then renamed over it.
    data : array, tensor, table, ``{"data", "header"}`` dict, list of those, or HDUList
        NumPy arrays and tensors become image HDUs (unsigned types via BZERO, int8 via
        BZERO=-128). Dicts of columns, pyarrow Tables / RecordBatches / RecordBatchReaders
        (streamed batch by batch), pandas and Polars DataFrames become binary tables; a table
        first gets an empty primary HDU.
    header : dict or Header, optional
        Extra cards for the first HDU written (structural keywords are ignored); values may be
        ``(value, comment)`` tuples; a HISTORY/COMMENT value that is a list (or holds newlines)
        becomes one commentary card per line.
    overwrite : bool
        Replace an existing file (else ``FileExistsError``).
    checksum : bool
        Write DATASUM and CHECKSUM on every HDU.
    compress : bool or str
        Tile-compress the images (``True`` → RICE_1, or a codec name); they are written as an
        empty primary plus compressed image HDUs. Tables are not compressed.
    quantize : None, bool, str or dict
        Quantise float images to 16-bit integers with BSCALE/BZERO (see the writing guide).

    Raises
    ------
    FileExistsError
        The file exists and ``overwrite`` is false.
    UInt64WriteError, QuantizeError
        uint64 images / dict columns; quantisation of non-float data.
    HeaderCardError
        A header card FITS cannot hold (a character outside printable ASCII, NaN or infinity, a
        malformed keyword); the message names the file, the HDU and the keyword.
    RuntimeError
        Any other failure, as ``Failed to write FITS file '<path>': <reason>``; the original file
        (if any) is untouched.
    """
    target = check_target(path, overwrite=overwrite)
    try:
        items = to_items(data, as_header(header))
        if compress is not False and compress is not None:
            _write_compressed(target, items, compress=compress, quantize=quantize,
                              overwrite=overwrite, checksum=checksum)
            return
        if quantize not in (None, False):
            from .quantize_linear import quantize_items

            items = quantize_items(items, quantize)
        write_hdus(target, items, overwrite=overwrite, checksum=checksum)
    except (QuantizeError, FileExistsError, IsADirectoryError, KeyboardInterrupt):
        raise
    except (HeaderCardError, UInt64WriteError) as exc:
        with named_errors(target):
            raise exc
    except (ValueError, TypeError, OSError) as exc:
        if isinstance(exc, FitsError) and not isinstance(exc, (ValueError, TypeError)):
            raise
        raise FitsWriteError(f"Failed to write FITS file '{target}': {exc}") from exc


def _write_compressed(target: str, items: list[Any], *, compress: Any, quantize: Any,
                      overwrite: bool, checksum: bool) -> None:
    """Hand images to the tile-compression writer (:mod:`.compress_write`)."""
    from ..image.codec_registry import writer_codec
    from .compress_write import normalize_compress, write_compressed

    codec = normalize_compress(compress)  # NOCOMPRESS, ints and unknown names are refused here
    if quantize is None and codec is not None and not writer_codec(codec).stores_integers:
        quantize = False  # float images under GZIP without quantize are lossless (as 1.2.3)
    images = [it for it in items if isinstance(it, ImageData)]
    if len(images) != len(items):
        _write_compressed_with_tables(target, items, compress=compress, quantize=quantize,
                                      overwrite=overwrite, checksum=checksum)
        return
    arrays = [it.array for it in images if not (it.array.size == 0 and it.array.ndim <= 1)]
    headers = [it.header for it in images if not (it.array.size == 0 and it.array.ndim <= 1)]
    write_compressed(target, arrays, headers, overwrite=overwrite, compress=compress,
                     quantize=quantize, checksum=checksum)


def _write_compressed_with_tables(target: str, items: list[Any], *, compress: Any, quantize: Any,
                                  overwrite: bool, checksum: bool) -> None:
    """Tables stay plain binary tables; the images among them are tile-compressed (as 1.2.3)."""
    import os
    import tempfile

    from ..image.codec_registry import DEFAULT_CODEC
    from .compress_write import normalize_compress
    from .recompress import compress_file

    codec = normalize_compress(compress) or DEFAULT_CODEC
    if not any(isinstance(it, ImageData) for it in items):
        write_hdus(target, items, overwrite=overwrite, checksum=checksum)
        return
    fd, plain = tempfile.mkstemp(suffix=".fits", dir=os.path.dirname(os.path.abspath(target)))
    os.close(fd)
    try:
        write_hdus(plain, items, overwrite=True)
        compress_file(plain, target, algorithm=codec, quantize=quantize, overwrite=overwrite)
    finally:
        os.unlink(plain)
    if checksum:
        from ..fits.hdu_index import get_index
        from .checksum import write_checksums

        for k in range(len(get_index(target))):
            write_checksums(target, k)


def write_tensor(path: PathArg, tensor: torch.Tensor, header: Any = None, overwrite: bool = False,
                 compress: Any = False, quantize: Any = None, checksum: bool = False) -> None:
    """`write` for a ``torch.Tensor`` only (``TypeError`` for anything else)."""
    if not is_tensor(tensor):
        raise TypeError("tensor must be a torch.Tensor")
    write(path, tensor, header=header, overwrite=overwrite, checksum=checksum,
          compress=compress, quantize=quantize)

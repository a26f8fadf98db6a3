"""The torchfits 1.x object API: ``open()`` → `HDUList` of `TensorHDU` / `TableHDURef`
(docs/compatibility.md).

Image access goes through the native `Image` engine; table access through `torchfits.table`.
"""
from __future__ import annotations

import io as _io
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._kernels import _image
from .._torch_adapter import is_tensor, to_tensor, validate_device
from ..errors import FitsError, FitsFileNotFoundError, HDUNotFoundError
from ..fits.aliases import InputArg
from ..fits.hdu_index import HduIndex, get_index
from ..fits.header import Header
from ..fits.notebook_html import html_summary
from ..fits.paths import display_name, fspath, is_local_path, with_storage_options
from ..image.plain import Image
from .common import hdu_name
from .table_hdu import TableDataAccessor, TableHDU, TableHDURef

__all__ = ["HDUList", "TensorHDU", "TableHDURef", "TableHDU", "DataView", "TableDataAccessor", "open"]


def _torch_dtype(np_dtype: np.dtype) -> Any:
    from .._torch_adapter import require_torch

    torch = require_torch()
    return torch.from_numpy(np.empty(0, np_dtype)).dtype


class DataView:
    """Lazy cutouts of a file-backed image: ``view[y0:y1, x0:x1]`` reads only that window of the
    last two axes (all leading planes), keeping both axes."""

    def __init__(self, hdu: TensorHDU) -> None:
        self._hdu = hdu

    def __repr__(self) -> str:
        try:
            img = self._image
        except (RuntimeError, ValueError) as exc:  # closed file, or no file behind the HDU
            return f"<DataView ({exc})>"
        return (f"<DataView of {img.path!r} HDU {img.hdu}: shape={img.shape}, dtype={img.dtype}; "
                "view[y0:y1, x0:x1] reads that window>")

    @property
    def _image(self) -> Image:
        return self._hdu._open_image()

    @property
    def shape(self) -> tuple[int, ...]:
        return self._image.shape

    @property
    def dtype(self) -> Any:
        return _torch_dtype(self._image.dtype)

    @property
    def ndim(self) -> int:
        return self._image.ndim

    def __len__(self) -> int:
        shape = self._image.shape
        if not shape:
            raise TypeError("len() of an empty image")
        return shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The whole image as a NumPy array (``np.asarray(hdul["SCI"].data)``), 1.x dtype rules."""
        arr = self._image.read()
        if dtype is not None and arr.dtype != np.dtype(dtype):
            return arr.astype(dtype)
        if copy and not _image.owns(arr):
            return arr.copy()
        return arr

    def __getitem__(self, key: Any) -> Any:
        img = self._image
        if img.ndim < 2:
            raise ValueError("Subset reading requires at least 2D data")
        if key is Ellipsis:
            return to_tensor(np.ascontiguousarray(img.read()), "cpu")
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise ValueError("DataView indexing takes exactly 2 dimensions (rows, columns)")
        h, w = img.shape[-2:]
        bounds = [self._axis(k, n, axis) for k, n, axis in zip(key, (h, w), (0, 1))]
        (y0, y1), (x0, x1) = bounds
        lead = img.shape[:-2]
        region = ((0,) * len(lead) + (y0, x0), (1,) * img.ndim, lead + (y1 - y0, x1 - x0))
        return to_tensor(img.read_region(region, lead + (y1 - y0, x1 - x0)), "cpu")

    @staticmethod
    def _axis(k: Any, n: int, axis: int) -> tuple[int, int]:
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise ValueError("Only step=1 slices are supported")
            start = 0 if k.start is None else k.start
            stop = n if k.stop is None else k.stop
            start = start + n if start < 0 else start
            stop = stop + n if stop < 0 else stop
            start, stop = min(max(start, 0), n), min(max(stop, 0), n)
            return start, max(start, stop)
        if hasattr(k, "__index__") and not isinstance(k, bool):
            i = int(k.__index__())
            i = i + n if i < 0 else i
            if not 0 <= i < n:
                raise IndexError(f"index {k} is out of range for axis {axis} with size {n}")
            return i, i + 1
        raise TypeError(f"DataView indices must be ints or slices, not {type(k).__name__}")


class TensorHDU:
    """An image HDU: file-backed (lazy `DataView`) or in memory (a tensor)."""

    def __init__(self, data: Any = None, header: Any = None, file_handle: Any = None,
                 hdu_index: int = 0, source_path: str | None = None) -> None:
        self._tensor = data
        self._header = header if isinstance(header, Header) else Header(header)
        self._index: HduIndex | None = file_handle
        self._hdu_index = hdu_index
        self._source_path = source_path
        self._closed = False
        self._image: Image | None = None

    @property
    def header(self) -> Header:
        return self._header

    @property
    def name(self) -> str:
        return hdu_name(self._header, self._hdu_index)

    def _open_image(self) -> Image:
        if self._closed:
            raise RuntimeError("TensorHDU is closed: its file was closed")
        if self._index is None:
            raise ValueError("No file handle available")
        if self._image is None:
            self._image = Image(self._index.path, self._hdu_index, uint64_as_float=True,
                                index=self._index)
        return self._image

    @property
    def data(self) -> DataView:
        if self._index is None and self._tensor is None:
            raise ValueError("No file handle available")
        if self._index is None:
            raise ValueError("No file handle available")
        if self._closed:
            raise RuntimeError("TensorHDU is closed: its file was closed")
        return DataView(self)

    def to_tensor(self, device: Any = "cpu") -> Any:
        device = validate_device(device)
        if self._tensor is not None and self._index is None:
            if is_tensor(self._tensor):
                return self._tensor.to(device)
            return to_tensor(np.asarray(self._tensor), device)
        arr = self._open_image().read()
        return to_tensor(arr if arr.flags.writeable else arr.copy(), device)

    def chunks(self, chunk_size: Sequence[int] = ()) -> Iterator[Any]:
        """Row bands of ``chunk_size[0]`` rows (64 by default) along axis 0."""
        step = int(chunk_size[0]) if chunk_size else 64
        if step <= 0:
            raise ValueError("chunk_size must be positive")
        if self._tensor is not None and self._index is None:
            for i in range(0, self._tensor.shape[0], step):
                yield self._tensor[i:i + step]
            return
        img = self._open_image()
        n0 = img.shape[0] if img.shape else 0
        for i in range(0, n0, step):
            yield to_tensor(np.ascontiguousarray(img[i:i + step]), "cpu")

    @property
    def shape(self) -> tuple[int, ...]:
        if self._tensor is not None and self._index is None:
            return tuple(self._tensor.shape)
        return self._open_image().shape if self._index is not None else ()

    @property
    def shape_str(self) -> str:
        shape = self.shape
        return f"({shape[0]})" if len(shape) == 1 else str(tuple(shape))

    @property
    def dtype_str(self) -> str:
        if self._tensor is not None and self._index is None:
            return str(self._tensor.dtype).replace("torch.", "")
        if self._index is None:
            return "none"
        return str(self._open_image().plan.storage_dtype)

    @property
    def _result_dtype_str(self) -> str:
        """The dtype a read gives (``data.dtype``, ``to_tensor()``): uint16 for BZERO=32768,
        float for other scaling; `dtype_str` stays the storage dtype (torchfits 1.x)."""
        if self._index is None:
            return self.dtype_str
        return str(np.dtype(self._open_image().dtype))

    def mark_closed(self) -> None:
        self._closed = True
        self._image = None

    def __repr__(self) -> str:
        if self._closed:
            return f"TensorHDU(name={self.name!r}, closed)"
        return (f"TensorHDU(name={self.name!r}, shape={tuple(self.shape)}, "
                f"dtype={self._result_dtype_str})")

    def _repr_png_(self) -> bytes | None:
        """The image's zscale/asinh thumbnail (see `Image._repr_png_`); None when closed, empty
        or not drawable."""
        if self._closed:
            return None
        if self._index is not None:
            return self._open_image()._repr_png_()
        if self._tensor is None:
            return None
        from ..image.thumbnail import thumbnail_png

        return thumbnail_png(self._tensor)

    def _repr_html_(self) -> str:
        """Class, escaped name, shape and dtype as an HTML table, and the thumbnail (Jupyter)."""
        if self._closed:
            return html_summary("TensorHDU", [("name", self.name), ("state", "closed")])
        picture = None
        try:
            fields: list[tuple[str, Any]] = [("name", self.name), ("shape", tuple(self.shape)),
                                             ("dtype", self._result_dtype_str)]
            picture = self._repr_png_()
        except Exception as exc:  # a display must not raise, even for a vanished file
            fields = [("name", self.name), ("unavailable", exc)]
        return html_summary("TensorHDU", fields, picture)


class HDUList:
    """An ordered list of HDUs (context manager; indexing by position or exact EXTNAME)."""

    def __init__(self, hdus: Sequence[Any] | None = None) -> None:
        self._hdus: list[Any] = list(hdus) if hdus else []
        self._path: str | None = None

    @classmethod
    def fromfile(cls, path: Any, mode: str = "r") -> HDUList:
        if not isinstance(path, (str, os.PathLike)) or not fspath(path):
            raise ValueError("path must be a non-empty string or os.PathLike")
        if mode != "r":
            raise ValueError("HDUList supports mode='r' only")
        return open(path, mode)

    def __len__(self) -> int:
        return len(self._hdus)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._hdus)

    def _find(self, name: str, ver: int | None = None) -> Any | None:
        """First HDU whose EXTNAME is ``name`` (and whose EXTVER, 1 when absent, is ``ver`` if
        given); an exact match wins over a case-insensitive one; ``"PRIMARY"`` is HDU 0 unless
        an HDU is called that."""
        folded = None
        for hdu in self._hdus:
            extname = hdu.header.get("EXTNAME")
            if ver is not None and self._extver(hdu) != ver:
                continue
            if extname == name:
                return hdu
            if (folded is None and isinstance(extname, str)
                    and extname.strip().upper() == name.strip().upper()):
                folded = hdu
        if folded is None and name.strip().upper() == "PRIMARY" and ver in (None, 1) and self._hdus:
            return self._hdus[0]
        return folded

    @staticmethod
    def _extver(hdu: Any) -> Any:
        # 1.x headers hold values as strings: EXTVER '2' is version 2.
        ver = hdu.header.get("EXTVER")
        try:
            return 1 if ver is None else int(str(ver).strip())
        except ValueError:
            return ver

    def _lookup(self, key: Any) -> tuple[str, int | None]:
        """(EXTNAME, EXTVER or None) a name key asks for: ``"SCI"``, ``("SCI", 2)`` (what
        ``hdul["SCI", 2]`` passes) or ``"SCI,2"`` when no HDU is literally called that."""
        if isinstance(key, tuple):
            if len(key) not in (1, 2) or not isinstance(key[0], str):
                raise TypeError(f"an HDU named by version is (EXTNAME, EXTVER), not {key!r}")
            ver = key[1] if len(key) == 2 else None
            if ver is not None and (isinstance(ver, bool) or not isinstance(ver, (int, np.integer))):
                raise TypeError(f"EXTVER must be an integer, not {type(ver).__name__} ({key!r})")
            return key[0], None if ver is None else int(ver)
        name, sep, ver_text = key.partition(",")
        if sep and ver_text.strip().isdigit() and name.strip() and self._find(key) is None:
            return name.strip(), int(ver_text)
        return key, None

    def _listing(self) -> str:
        parts = []
        for i, hdu in enumerate(self._hdus):
            name = hdu.header.get("EXTNAME") or ("PRIMARY" if i == 0 else "")
            ver = hdu.header.get("EXTVER")
            parts.append(f"{i} {name}{'' if ver is None else f' (EXTVER {ver})'}".rstrip())
        return ", ".join(parts) if parts else "no HDUs"

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, bool) or not isinstance(key, (int, str, np.integer, tuple)):
            raise TypeError("HDUList indices must be int or EXTNAME str (or an (EXTNAME, "
                            f"EXTVER) pair); got {type(key).__name__}")
        if isinstance(key, (str, tuple)):
            name, ver = self._lookup(key)
            hdu = self._find(name, ver)
            if hdu is None:
                raise HDUNotFoundError(f"HDU {key!r} not found{self._where()}; the list has: "
                                       f"{self._listing()}")
            return hdu
        return self._hdus[int(key)]

    def __contains__(self, item: Any) -> bool:
        """``"SCI" in hdul`` (EXTNAME, case-insensitive), ``("SCI", 2)`` or ``"SCI,2"``, an
        index in range, or an HDU object."""
        if isinstance(item, str) or (isinstance(item, tuple) and item and isinstance(item[0], str)):
            try:
                return self._find(*self._lookup(item)) is not None
            except TypeError:
                return False
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            return -len(self._hdus) <= int(item) < len(self._hdus)
        return any(hdu is item for hdu in self._hdus)

    def _where(self) -> str:
        return f" in {self._path}" if self._path else ""

    def append(self, hdu: Any) -> None:
        self._hdus.append(hdu)

    def close(self) -> None:
        for hdu in self._hdus:
            if isinstance(hdu, TensorHDU) and hdu._index is not None:
                hdu.mark_closed()

    def __enter__(self) -> HDUList:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def write(self, path: Any, overwrite: bool = False) -> None:
        """Write every HDU (a table first gets an empty primary before it)."""
        from ..writing.api import write as _write

        _write(path, self, overwrite=overwrite)

    def __fits_hdus__(self) -> list[Any]:
        """The HDUs as items for `torchfits.write` (images as arrays, tables as columns)."""
        from ..writing.items import ImageData, TableData, as_numpy

        return [ImageData(as_numpy(hdu.to_tensor()), Header(hdu.header)) if isinstance(hdu, TensorHDU)
                else TableData(hdu.read(), Header(hdu.header)) for hdu in self._hdus]

    def validate(self) -> bool:
        for hdu in self._hdus:
            if not len(hdu.header):
                return False
            if isinstance(hdu, TensorHDU) and hdu._index is not None and hdu._closed:
                return False
        return True

    def _rows(self) -> list[tuple]:
        rows = []
        for i, hdu in enumerate(self._hdus):
            name = hdu.header.get("EXTNAME") or ("PRIMARY" if i == 0 else "")
            if isinstance(hdu, TensorHDU):
                kind = "PrimaryHDU" if i == 0 else "ImageHDU"
                if hdu._closed:
                    dims, fmt = "(closed)", ""
                else:
                    try:
                        dims, stored, fmt = hdu.shape_str, hdu.dtype_str, hdu._result_dtype_str
                        if fmt != stored:
                            fmt = f"{fmt} (stored {stored})"
                    except FitsError:
                        dims, fmt = "?", "?"
            else:
                kind = "TableHDU"
                dims, fmt = f"({hdu.num_rows}R x {len(hdu.columns)}C)", ""
            rows.append((i, str(name), kind, len(hdu.header.cards), dims, fmt))
        return rows

    def info(self, output: Any = None) -> str | None:
        """Print a summary (``No. Name Type Cards Dimensions Format``), or write it to ``output``.

        Format is the dtype a read gives, with the stored one beside it where they differ
        (``uint16 (stored int16)`` for BZERO=32768); columns are as wide as their longest cell.
        """
        rows: list[tuple[str, ...]] = [("No.", "Name", "Type", "Cards", "Dimensions", "Format")]
        rows += [tuple(str(v) for v in row) for row in self._rows()]
        # At least astropy's widths, wider where a cell needs it; two blanks between columns.
        widths = [max([len(r[k]) for r in rows] + [least])
                  for k, least in enumerate((3, 10, 10, 5, 14, 0))]
        lines = ["  ".join(c.rjust(w) if k == 3 else c.ljust(w)
                           for k, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
        text = "\n".join(lines)
        if output is None:
            print(text, file=sys.stdout)
        else:
            output.write(text + "\n")
        return None

    def __repr__(self) -> str:
        buf = _io.StringIO()
        self.info(buf)
        return buf.getvalue().rstrip("\n")

    def _repr_html_(self) -> str:
        """The `info` summary as an HTML table (Jupyter)."""
        from html import escape

        head = "".join(f"<th>{h}</th>" for h in ("No.", "Name", "Type", "Cards", "Dimensions", "Format"))
        body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                       for row in self._rows())
        src = f"<p>{escape(self._path)}</p>" if self._path else ""
        return f"{src}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def open(path: InputArg, mode: str = "r", *, storage_options: dict | None = None) -> HDUList:
    """Open a FITS file as an `HDUList` (headers read now, data on demand).

    Header values are the raw card strings (``"2"``, ``"T"``), as in torchfits 1.x; use
    `read_header` for typed values. ``path`` may also be a URL (with ``storage_options``),
    bytes or a binary file object (docs/remote.md).
    """
    if mode != "r":
        raise RuntimeError(f"torchfits.open supports mode='r' only, got mode={mode!r}")
    if not is_local_path(path) or storage_options:
        source = with_storage_options(path, storage_options)
        try:
            index = get_index(source)
        except FitsError as exc:
            raise type(exc)(f"Failed to open FITS file '{display_name(path)}': {exc}") from None
        return _hdulist(index, source, index.path)
    p = fspath(path)
    if not os.path.exists(p):
        raise FitsFileNotFoundError(f"FITS file not found: {p}")
    try:
        index = get_index(p)
    except FitsError as exc:
        raise type(exc)(f"Failed to open FITS file '{p}': {exc}") from None
    return _hdulist(index, p, p)


def _hdulist(index: Any, source: Any, name: str) -> HDUList:
    hdus: list[Any] = []
    for entry in index.entries:
        header = index.header(entry, raw_values=True)
        if entry.is_table:
            # Non-path sources are re-read through their index (a stream cannot be reopened).
            ref_source = source if isinstance(source, str) else index
            hdus.append(TableHDURef(header=header, source_path=ref_source,
                                                      source_hdu=entry.index))
        else:
            hdus.append(TensorHDU(header=header, file_handle=index, hdu_index=entry.index,
                                  source_path=name))
    result = HDUList(hdus)
    result._path = name
    return result

"""Which files and HDUs a file dataset reads: its paths (globs expanded at construction), its
``hdu`` and companion arguments checked, the (file, HDU) each dataset path names, its labels."""
from __future__ import annotations

import glob as _glob
import os
from typing import Any

import torch

from ..errors import CorruptHeaderError, FitsFileNotFoundError, KeywordNotFoundError
from ..fits.hdu_index import check_hdu_arg
from ..fits.paths import fspath, hdu_suffix
from .sources import index_of, storage_options_arg, suffix_targets

__all__ = ["resolve_paths", "hdu_list", "check_hdu", "companion_hdus", "FileHdus", "show_files",
           "show_callable", "dataset_repr"]


def show_files(files: list[str]) -> str:
    """A dataset's files for its repr: the count and the first (``n=500, files=['a.fits',
    ...]``), or the one file (``n=1, files=['a.fits']``)."""
    if len(files) == 1:
        return f"n=1, files=[{files[0]!r}]"
    return f"n={len(files)}, files=[{files[0]!r}, ...]" if files else "n=0, files=[]"


def show_callable(fn: Any) -> str:
    """A transform for a repr: its repr when short (torchvision-style objects), else its name."""
    text = repr(fn)
    if len(text) <= 80 and " at 0x" not in text:
        return text
    return getattr(fn, "__name__", None) or type(fn).__name__


def dataset_repr(obj: Any, *parts: str, **fields: Any) -> str:
    """``Name(part, ..., key=value, ...)``: fields that are None are left out, a ``transform`` is
    shown by `show_callable`."""
    shown = list(parts)
    for key, value in fields.items():
        if value is None:
            continue
        shown.append(f"{key}={show_callable(value) if key == 'transform' else repr(value)}")
    return f"{type(obj).__name__}({', '.join(shown)})"


def resolve_paths(paths: Any) -> list[str]:
    """A path, glob pattern or list of them → file list. A string pattern is expanded and sorted;
    a pattern matching nothing raises `FitsFileNotFoundError` here, at construction, as
    ``torchfits.dataset`` does (a path whose brackets are a CFITSIO suffix of an existing file
    stays as it is). URLs are kept as they are (read through the remote byte sources with the
    dataset's ``storage_options``)."""
    if isinstance(paths, (str, os.PathLike)):
        items = [paths]
    else:
        try:
            items = list(paths)
        except TypeError:
            raise TypeError(f"paths must be a path, a glob pattern or a list of paths, not "
                            f"{type(paths).__name__}") from None
    if not items:
        raise ValueError("paths must be non-empty")
    out: list[str] = []
    for item in items:
        text = fspath(item)
        if ("*" in text or "?" in text or "[" in text) and "://" not in text \
                and not os.path.exists(text) and hdu_suffix(text) is None:
            found = sorted(_glob.glob(text))
            if not found:
                raise FitsFileNotFoundError(f"no files match {text!r}")
            out += found
        else:
            out.append(text)
    return out


def hdu_list(hdu: Any) -> list[Any]:
    """An ``hdu`` argument (one HDU or a non-empty list of them) as a list."""
    if isinstance(hdu, (list, tuple)):
        if not hdu:
            raise ValueError("hdu must be an index, an EXTNAME or a non-empty list of them")
        return list(hdu)
    return [hdu]


def check_hdu(hdu: Any) -> None:
    """Refuse an HDU that is neither a non-negative index nor an EXTNAME (ValueError)."""
    if isinstance(hdu, bool) or not isinstance(hdu, (int, str)):
        raise ValueError(f"hdu must be an integer index or an EXTNAME, not {hdu!r}")
    check_hdu_arg(hdu)


def companion_hdus(spec: Any, n_flux: int, what: str) -> list[Any] | None:
    """The HDUs of a companion argument (``ivar_hdu``, ``mask_hdu``: ``what``): one shared HDU
    or one per flux HDU (``n_flux``), checked; None when not given."""
    if spec is None:
        return None
    hdus = hdu_list(spec)
    if len(hdus) not in (1, n_flux):
        raise ValueError(f"{what} must be one HDU or one per flux HDU ({n_flux}), got {len(hdus)}")
    for h in hdus:
        check_hdu(h)
    return hdus


class FileHdus:
    """What the image, spectrum and staged-cutout datasets share: their files, flux and
    companion HDUs, the (file, HDU) of a path with an HDU suffix, and labels from headers."""

    files: list[str]
    hdu: Any
    hdus: list[Any]
    ivar_hdus: list[Any] | None
    mask_hdus: list[Any] | None
    storage_options: dict | None
    device: Any

    def _setup_hdus(self, paths: Any, hdu: Any, ivar_hdu: Any, mask_hdu: Any,
                    storage_options: Any) -> None:
        """Resolve ``paths`` and check the HDU arguments, at construction."""
        self.files = resolve_paths(paths)
        self.storage_options = storage_options_arg(storage_options)
        self.hdu = hdu
        self.hdus = hdu_list(hdu)
        for h in self.hdus:
            check_hdu(h)
        self.ivar_hdus = companion_hdus(ivar_hdu, len(self.hdus), "ivar_hdu")
        self.mask_hdus = companion_hdus(mask_hdu, len(self.hdus), "mask_hdu")
        self._targets = suffix_targets(self.files, self.hdus, 0, self.storage_options)

    def _target(self, path: str) -> tuple[str, list[Any]]:
        """The file and flux HDUs of one dataset path (a ``[SCI,2]`` suffix names its HDU)."""
        target = self._targets.get(path)
        return (path, self.hdus) if target is None else (target[0], [target[1]])

    def _file_labels(self, label_key: str | None, labels: Any) -> torch.Tensor | None:
        """One int64 label per file: ``labels`` as given, else ``int(header[label_key])`` of
        each file's first flux HDU (read now), else None."""
        if labels is not None:
            labels = list(labels)
            if len(labels) != len(self.files):
                raise ValueError(f"labels length {len(labels)} != files length {len(self.files)}")
            return torch.as_tensor([int(v) for v in labels], dtype=torch.int64)
        if label_key is None:
            return None
        values = []
        for given in self.files:
            path, file_hdu = self._targets.get(given, (given, self.hdus[0]))
            index = index_of(path, self.storage_options)
            header = index.header_view(index.resolve(file_hdu))
            if label_key not in header:
                raise KeywordNotFoundError(f"{path}: HDU {file_hdu!r} has no keyword {label_key!r} "
                                           "(label_key)")
            value = header[label_key]
            try:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError
                values.append(int(value))
            except (TypeError, ValueError, OverflowError):
                raise CorruptHeaderError(f"{path}: HDU {file_hdu!r}: label keyword {label_key} = "
                                         f"{value!r} is not an integer") from None
        return torch.as_tensor(values, dtype=torch.int64)

    def __repr__(self) -> str:
        fields: dict[str, Any] = {"hdu": self.hdu, "transform": getattr(self, "transform", None)}
        if getattr(self, "world_size", 1) > 1:
            fields.update(rank=getattr(self, "rank", 0), world_size=getattr(self, "world_size", 1))
        if getattr(self, "shuffle", False) or getattr(self, "shuffle_files", False):
            fields["seed"] = getattr(self, "seed", 0)
        fields.update(even=getattr(self, "even", None), device=self.device)
        return dataset_repr(self, show_files(self.files), **fields)

"""Where a dataset's bytes come from: the ``storage_options`` argument every dataset takes, and
the path, HDU index or scanner source of a file or fsspec URL opened in this process."""
from __future__ import annotations

from typing import Any

from ..fits.hdu_index import HduIndex, get_index, suffix_hdu
from ..fits.paths import hdu_suffix, with_storage_options
from .readers import is_remote
from .remote import local_copy

__all__ = ["storage_options_arg", "with_cache_dir", "table_source", "index_of", "suffix_file",
           "suffix_targets"]


def storage_options_arg(storage_options: Any) -> dict | None:
    """A dataset's ``storage_options`` argument checked and copied (None when empty)."""
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError("storage_options must be a dict")
    return dict(storage_options) if storage_options else None


def with_cache_dir(storage_options: dict | None, cache_dir: str | None) -> dict | None:
    """A dataset's storage options with its ``cache_dir`` (1.x's remote prefetch directory) as
    the remote cache of its URLs: whole-file copies and block mirrors go there."""
    if cache_dir is None or (storage_options and "cache_dir" in storage_options):
        return storage_options
    return {**(storage_options or {}), "cache_dir": cache_dir}


def table_source(path: str, storage_options: dict | None) -> Any:
    """What `scan` and ``TableSource.open`` take for ``path``: a URL bound to its storage
    options, a local path as it is."""
    copy = local_copy(path, storage_options)  # a whole-file copy made by a prefetch
    if copy is not None:
        return copy
    if storage_options and is_remote(path):
        return with_storage_options(path, storage_options)
    return path


def index_of(path: str, storage_options: dict | None) -> HduIndex:
    """The HDU index of a file or URL in this process (URLs through the remote byte sources
    with ``storage_options``)."""
    copy = local_copy(path, storage_options)
    if copy is not None:
        return get_index(copy)
    return get_index(path, storage_options) if is_remote(path) else get_index(path)


def suffix_targets(files: list[str], hdus: list[Any], default: Any,
                   storage_options: dict | None = None) -> dict[str, tuple[str, Any]]:
    """``{path as given: (file, HDU)}`` for the dataset paths that carry an HDU suffix
    (``img.fits[SCI,2]``, ``img.fits[1]``: a path that does not exist whose part before the
    brackets does). The suffix wins over the dataset's default ``hdu``; an ``hdu`` (``hdus``,
    the dataset's list) naming another HDU, or several, is refused here, at construction, as are
    an HDU the file lacks and an image-section suffix (datasets read whole HDUs: cut boxes with
    the cutout datasets)."""
    out: dict[str, tuple[str, Any]] = {}
    for text in files:
        if text in out:
            continue
        target = suffix_file(text, list(hdus), default,
                             "datasets read whole HDUs, not image sections; name the HDU alone "
                             "('img.fits[SCI,2]') and cut boxes with FitsCutoutDataset")
        if target is None:
            continue
        # an HDU the file lacks fails here, listing its HDUs
        index_of(target[0], storage_options).resolve(target[1])
        out[text] = target
    return out


def suffix_file(text: str, hdu: Any, default: Any, no_section: str) -> tuple[str, Any] | None:
    """(file, HDU) of a dataset path with an HDU suffix (``img.fits[SCI,2]``: a path that does
    not exist whose part before the brackets does), None for any other path. The suffix wins
    over the default ``hdu`` (`suffix_hdu`); an image-section suffix raises ValueError with
    ``no_section`` (what the route takes instead)."""
    fp = hdu_suffix(text)
    if fp is None:
        return None
    if fp.section is not None or fp.hdu is None:
        raise ValueError(f"{text!r}: {no_section}")
    return fp.path, suffix_hdu(fp.path, fp.hdu, hdu, default)

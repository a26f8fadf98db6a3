"""Where a dataset's bytes come from: the ``storage_options`` argument every dataset takes, and
the path, HDU index or scanner source of a file or fsspec URL opened in this process."""
from __future__ import annotations

from typing import Any, Optional

from ..fits.hdu_index import HduIndex, get_index
from ..fits.paths import with_storage_options
from .readers import is_remote

__all__ = ["storage_options_arg", "table_source", "index_of"]


def storage_options_arg(storage_options: Any) -> Optional[dict]:
    """A dataset's ``storage_options`` argument checked and copied (None when empty)."""
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError("storage_options must be a dict")
    return dict(storage_options) if storage_options else None


def table_source(path: str, storage_options: Optional[dict]) -> Any:
    """What `scan` and ``TableSource.open`` take for ``path``: a URL bound to its storage
    options, a local path as it is."""
    if storage_options and is_remote(path):
        return with_storage_options(path, storage_options)
    return path


def index_of(path: str, storage_options: Optional[dict]) -> HduIndex:
    """The HDU index of a file or URL in this process (URLs through the remote byte sources
    with ``storage_options``)."""
    return get_index(path, storage_options) if is_remote(path) else get_index(path)

"""Byte sources: where FITS bytes live (a local map, bytes, a file object, an fsspec URL, a
whole-file-compressed file), behind one interface (`ByteSource`) and one door (`open_source`)."""
from __future__ import annotations

from .base import ByteSource
from .resolve import open_source

__all__ = ["ByteSource", "open_source"]

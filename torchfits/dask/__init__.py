"""Dask adapters: FITS catalogs as ``dask.dataframe`` and images as ``dask.array``.

``import torchfits.dask`` imports nothing of Dask; each function imports it when called (install
the ``dask`` extra). See docs/dask.md.

- `read_table`: table HDUs of many files → ``dask.dataframe.DataFrame`` (projection, where and
  statistics reach the decoder in every partition).
- `read_images`: one large image in blocks, or a stack of same-shaped images →
  ``dask.array.Array`` (each block decodes only its region).
- `to_fits`: a DataFrame → one FITS file per partition plus a statistics sidecar.
- `crossmatch`: `torchfits.crossmatch` per HEALPix partition, for catalogs larger than memory.
"""
from __future__ import annotations

from .arrays import ImageBlocks, read_images
from .crossmatch import crossmatch
from .frames import read_table, to_fits

__all__ = ["read_table", "read_images", "to_fits", "crossmatch", "ImageBlocks"]

"""Small image files for the training-dataset tests: a primary image with header cards (labels,
scaling), then named image extensions (other bands, companions)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np


def write_stamp(path: str | os.PathLike, data: np.ndarray, *,
                cards: Sequence[tuple[str, Any]] = (),
                extensions: Sequence[tuple[str, np.ndarray]] = ()) -> str:
    """Write ``data`` as the primary image, ``cards`` appended to its header in order (a
    repeated keyword stays a second card), then each ``(extname, array)`` of ``extensions`` as
    an image extension. The stored values are ``data`` as given: scaling cards describe them.
    Returns the path as a string."""
    from astropy.io import fits

    primary = fits.PrimaryHDU(data)
    for card in cards:
        primary.header.append(card, useblanks=False, bottom=True)
    hdus = [primary] + [fits.ImageHDU(array, name=name) for name, array in extensions]
    fits.HDUList(hdus).writeto(path)
    return str(path)

"""Images: plain and tile-compressed image HDUs, decoded into NumPy by the kernels.

`open_image` gives an open-once `Image` with NumPy slicing; `read_numpy` reads a whole HDU.
"""
from .compressed import CompressedImage
from .plain import Image, open_image, read_numpy

__all__ = ["CompressedImage", "Image", "open_image", "read_numpy"]

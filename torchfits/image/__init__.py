"""Images: plain and tile-compressed image HDUs, decoded into NumPy by the kernels.

`open_image` gives an open-once `Image` with NumPy slicing; `read_numpy` reads a whole HDU.
"""
from .compressed import CompressedImage
from .groups import GroupsImage, RandomGroups, read_groups
from .plain import Image, open_image, read_numpy

__all__ = ["CompressedImage", "GroupsImage", "Image", "RandomGroups", "open_image", "read_groups",
           "read_numpy"]

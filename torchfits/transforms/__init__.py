"""Tensor-native transforms for FITS images and tables, with the torchfits 1.x names.

Stretches, normalizations, clipping, FITS-keyword scaling and colour composites that run on
the tensor's device, on one image ``(H, W)`` or a batch ``(B, C, H, W)`` at once, with
``inverse`` where one exists. Needs torch (``pip install 'torchfits[torch]'``); ``import
torchfits`` alone never imports this package. See docs/transforms.md.
"""
from __future__ import annotations

from .._torch_adapter import require_torch

require_torch()  # a clear install hint instead of a bare ModuleNotFoundError

from .base import AsModule, Compose, FITSTransform, as_module  # noqa: E402
from .clip import AsymmetricSigmaClip, SigmaClip  # noqa: E402
from .color import lupton_rgb, rgb  # noqa: E402
from .fits_keywords import FITSHeaderNormalize, FITSHeaderScale, FITSScaleColumns, TNullToNan  # noqa: E402
from .normalize import (  # noqa: E402
                            BackgroundSubtract,
                            GlobalScalarNorm,
                            MinMaxNormalize,
                            PercentileClipNormalize,
                            RobustNormalize,
                            ZScaleNormalize,
)
from .stats import estimate_background, safe_arcsinh, safe_log, zscale_limits  # noqa: E402
from .stretch import ArcsinhStretch, LogStretch, SqrtStretch  # noqa: E402

__all__ = [
    "FITSTransform", "Compose", "AsModule", "as_module",
    "ArcsinhStretch", "LogStretch", "SqrtStretch",
    "ZScaleNormalize", "RobustNormalize", "BackgroundSubtract", "PercentileClipNormalize",
    "MinMaxNormalize", "GlobalScalarNorm",
    "SigmaClip", "AsymmetricSigmaClip",
    "FITSHeaderScale", "FITSHeaderNormalize", "FITSScaleColumns", "TNullToNan",
    "lupton_rgb", "rgb",
    "zscale_limits", "estimate_background", "safe_arcsinh", "safe_log",
]

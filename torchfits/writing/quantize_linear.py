"""Quantisation of float data to 16-bit integer codes with a linear scale (BSCALE/BZERO for
images, TSCAL/TZERO for table columns): percentiles ``lo_q``/``hi_q`` map to codes
-32766/32765, non-finite samples get the null code -32767.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import QuantizeError

__all__ = ["quantize_options", "quantize_params", "quantize_array", "NULL_CODE"]

NULL_CODE = -32767
_LO, _HI = -32766, 32765
_DEFAULTS = {"lo_q": 0.1, "hi_q": 99.9, "keep_zero": False}


def quantize_options(spec: Any) -> dict:
    """Normalise ``True`` / ``"robust"`` / an options dict; anything else is an error."""
    if spec is True or (isinstance(spec, str) and spec.lower() == "robust"):
        return dict(_DEFAULTS)
    if isinstance(spec, Mapping) and set(spec) <= set(_DEFAULTS):
        opts = {**_DEFAULTS, **spec}
        if not (0 <= float(opts["lo_q"]) < float(opts["hi_q"]) <= 100):
            raise ValueError("quantize must be None, True, 'robust', or a dict with 0 <= lo_q < hi_q <= 100")
        return opts
    raise ValueError("quantize must be None, True, 'robust', or a dict of lo_q, hi_q, keep_zero")


def quantize_params(values: np.ndarray, opts: dict) -> tuple[float, float]:
    """(scale, zero) such that ``physical = code * scale + zero``."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 1.0, 0.0
    lo, hi = np.percentile(finite, [float(opts["lo_q"]), float(opts["hi_q"])])
    if opts.get("keep_zero"):
        hi = max(float(hi), 0.0)
        return (hi / _HI if hi > 0 else 1.0), 0.0
    if hi <= lo:
        return 1.0, float(lo)
    scale = (float(hi) - float(lo)) / (_HI - _LO)
    return scale, float(lo) - _LO * scale


def quantize_array(values: np.ndarray, scale: float, zero: float, keep_zero: bool = False) -> np.ndarray:
    """int16 codes of ``values``; out-of-range values clip, non-finite ones get NULL_CODE."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    codes = np.rint((np.where(bad, zero, v) - zero) / scale)
    codes = np.clip(codes, 0 if keep_zero else _LO, _HI).astype(np.int16)
    codes[bad] = NULL_CODE
    return codes


def quantize_items(items: list, spec: Any) -> list:
    """Quantise the single float image of a plain ``write`` (tables go through their plans)."""
    from .items import TableData

    opts = quantize_options(spec)
    if len(items) != 1:
        raise QuantizeError("quantize applies to a single float image or table, not a sequence of HDUs")
    item = items[0]
    if isinstance(item, TableData):
        item.quantize = spec
        return [item]
    arr = np.asarray(item.array)
    if arr.dtype.kind != "f":
        raise QuantizeError(f"quantize needs floating-point data, got {arr.dtype}")
    return [QuantizedImage(arr, item.header, opts)]


class QuantizedImage:
    """An image to store as BITPIX=16 codes with BSCALE/BZERO (and BLANK for non-finite)."""

    def __init__(self, array: np.ndarray, header: Any, opts: dict) -> None:
        self.scale, self.zero = quantize_params(array, opts)
        self.codes = quantize_array(array, self.scale, self.zero, bool(opts.get("keep_zero")))
        self.has_blank = bool((~np.isfinite(array)).any())
        self.header = header


def quantize_table_plans(plan: Any, spec: Any) -> Any:
    """Turn float columns of a table plan into scaled 16-bit columns (all, or those named)."""
    from .table_plan import ColumnValues, slices

    if plan.columns is None:
        raise TypeError("quantize needs a dict of columns (or a materialised table), not a stream")
    columns = list(plan.columns)
    names = [p.name for p in plan.plans]
    if isinstance(spec, Mapping) and not set(spec) <= set(_DEFAULTS):
        targets = {}
        for name, sub in spec.items():
            if name not in names:
                raise KeyError(f"Column '{name}' not found for quantize")
            targets[name] = quantize_options(sub)
    else:
        opts = quantize_options(spec)
        targets = {p.name: opts for p, c in zip(plan.plans, columns)
                   if c.data.dtype.kind == "f" and c.offsets is None}
    for i, p in enumerate(plan.plans):
        if p.name not in targets:
            continue
        col = columns[i]
        if col.data.dtype.kind != "f" or col.offsets is not None:
            raise TypeError(f"quantize: column '{p.name}' is not a float column")
        scale, zero = quantize_params(col.data, targets[p.name])
        codes = quantize_array(col.data, scale, zero, bool(targets[p.name].get("keep_zero")))
        columns[i] = ColumnValues(codes, None)
        p.code, p.scale, p.flip = "I", None, False
        p.header_tscal, p.header_tzero = scale, zero
        if (~np.isfinite(col.data)).any():
            p.tnull = NULL_CODE
    plan.columns = columns
    plan.batches = slices(columns)
    return plan

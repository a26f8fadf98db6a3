"""The torchfits 1.x API (``read``, ``read_subset``, ``open``/``HDUList``, ``torchfits.table``,
``torchfits.where``, caches, interop) over the native engine.
"""

"""The compiled Cython kernels (sources in ``cython_src/``), each with its ``.pyi`` stub.

Private: only the Python layers above call them, with validated buffers and bounds.
"""

"""The format layer: headers, the HDU index, byte sources, paths, column specifications.

Imports NumPy and the kernels only; never pyarrow at import time, never torch.
"""

"""Build the Cython kernels in cython_src/ as private modules of the torchfits package."""
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
EXTRA_COMPILE_ARGS = ["-O3", "-fno-strict-aliasing"]
# C libraries a kernel links against (zlib's inflate for the batched GZIP tile decoder).
LIBRARIES = {"_gziptiles": ["z"]}

extensions = [
    Extension(
        f"torchfits._kernels.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[np.get_include(), str(HERE / "cython_src")],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=EXTRA_COMPILE_ARGS,
        libraries=LIBRARIES.get(pyx.stem, []),
    )
    for pyx in sorted((HERE / "cython_src").glob("_*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "embedsignature": True,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)

"""Build the Cython kernels in cython_src/ as private modules of the torchfits package."""
import os
import sys
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
WINDOWS = sys.platform == "win32"
# MSVC takes its own spelling (it does no type-based alias analysis to turn off); the kernels'
# compiler intrinsics build with either through cython_src/_portable.h.
EXTRA_COMPILE_ARGS = ["/O2"] if WINDOWS else ["-O3", "-fno-strict-aliasing"]


def _has_header(name: str) -> bool:
    """Whether the C compiler's usual include directories hold ``name``."""
    dirs = [os.path.join(sys.prefix, "include"), "/usr/local/include", "/usr/include"]
    dirs += [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    return any(os.path.exists(os.path.join(d, name)) for d in dirs)


# C libraries a kernel links against: zlib's inflate for the batched GZIP tile decoder, and
# libdeflate (optional, e.g. Debian's libdeflate-dev), which inflates whole tiles faster (a 4096²
# GZIP_2 read: 162 -> 111 ms on one thread, docs/compression.md).
# TORCHFITS_NO_LIBDEFLATE=1 builds without it even when it is there.
USE_LIBDEFLATE = _has_header("libdeflate.h") and not os.environ.get("TORCHFITS_NO_LIBDEFLATE")
# libdl: the GZIP decoder can switch to a newer libdeflate at run time (dlopen; in libc itself
# from glibc 2.34, a separate library before).
LIBRARIES = {"_gziptiles": ["zlib" if WINDOWS else "z"] + (["deflate"] if USE_LIBDEFLATE else [])
             + (["dl"] if sys.platform.startswith("linux") else [])}
MACROS = {"_gziptiles": [("TF_HAVE_LIBDEFLATE", "1")] if USE_LIBDEFLATE else []}
# Windows has no system zlib: $ZLIB_ROOT names an install of it (include/, lib/zlib.lib; the
# cibuildwheel configuration installs one with vcpkg and delvewheel bundles its DLL).
ZLIB_ROOT = os.environ.get("ZLIB_ROOT") if WINDOWS else None  # elsewhere the system zlib
INCLUDE_DIRS = [os.path.join(ZLIB_ROOT, "include")] if ZLIB_ROOT else []
LIBRARY_DIRS = {"_gziptiles": [os.path.join(ZLIB_ROOT, "lib")]} if ZLIB_ROOT else {}

KERNELS = sorted((HERE / "cython_src").glob("_*.pyx"))
if not KERNELS:
    raise SystemExit("setup.py: no cython_src/_*.pyx here: this source tree is incomplete")

extensions = [
    Extension(
        f"torchfits._kernels.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[np.get_include(), str(HERE / "cython_src")] + INCLUDE_DIRS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] + MACROS.get(pyx.stem, []),
        extra_compile_args=EXTRA_COMPILE_ARGS,
        libraries=LIBRARIES.get(pyx.stem, []),
        library_dirs=LIBRARY_DIRS.get(pyx.stem, []),
    )
    for pyx in KERNELS
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

"""The reads every mutated file goes through, shared by the supervised worker and the atheris
target: each yields ``(name, thunk)``; a thunk returns data or raises (a FitsError is fine)."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Callable


def limit_address_space(headroom: int) -> None:
    """Cap this process's address space at what it maps now plus ``headroom`` bytes, so that an
    allocation a file's bytes cannot justify fails (MemoryError) instead of swapping the machine.
    What the reads load is imported first: pyarrow's allocator reserves address space up front,
    and torch (torchfits.read returns tensors), where installed, is no read's cost."""
    import resource

    import pyarrow  # noqa: F401

    import torchfits  # noqa: F401

    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    with open("/proc/self/statm") as fh:
        mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def ops(path: str) -> Iterator[tuple[str, Callable[[], Any]]]:
    import torchfits
    from torchfits.errors import FitsError

    yield "info", lambda: torchfits.info(path)
    n = 0
    try:
        n = min(torchfits.read_num_hdus(path), 6)
    except FitsError:
        pass
    for h in range(max(n, 1)):
        yield f"header[{h}]", lambda h=h: str(torchfits.read_header(path, h))
        yield f"read_numpy[{h}]", lambda h=h: torchfits.read_numpy(path, h)
        yield f"slice[{h}]", lambda h=h: torchfits.open_image(path, h)[..., 1:3]
        yield f"scan[{h}]", lambda h=h: torchfits.scan(path, h).to_arrow()
        yield f"where[{h}]", lambda h=h: torchfits.scan(path, h, where=_where(path, h)).to_arrow()
        yield f"read[{h}]", lambda h=h: torchfits.read(path, h)


def _where(path: str, h: int) -> str:
    import torchfits
    from torchfits.errors import FitsError

    try:
        names = torchfits.read_colnames(path, h)
    except FitsError:
        return "1 = 1"
    return f"{names[0]} > 1" if names else "1 = 1"

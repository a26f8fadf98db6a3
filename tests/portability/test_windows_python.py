"""What the Python side does where Windows differs (issue 27): no ``os.pread`` there, and
descriptors open in text mode unless asked for binary. The library reads files through
``fits/sources/local.py``'s ``pread`` and ``OPEN_READ``; this checks the fallback reads what
``os.pread`` reads, and that no module calls the POSIX-only functions unguarded."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from torchfits.fits.sources import local

PACKAGE = Path(local.__file__).resolve().parents[2]


@pytest.mark.parametrize("n, offset", [(0, 0), (10, 0), (100, 5000), (9000, 2), (50, 9990), (50, 20000)])
def test_seek_read_reads_what_pread_reads(tmp_path, n, offset):
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 40  # 10240 bytes, CR LF and ^Z among them
    path.write_bytes(data)
    fd = os.open(path, local.OPEN_READ)
    try:
        assert local._seek_read(fd, n, offset) == data[offset:offset + n]
        if hasattr(os, "pread"):
            assert os.pread(fd, n, offset) == data[offset:offset + n]
    finally:
        os.close(fd)


def test_open_read_is_binary_where_the_platform_has_text_mode():
    assert local.OPEN_READ & os.O_RDONLY == os.O_RDONLY
    assert local.OPEN_READ & getattr(os, "O_BINARY", 0) == getattr(os, "O_BINARY", 0)
    assert local.pread is getattr(os, "pread", local._seek_read)  # POSIX: os.pread itself


def test_no_module_calls_posix_only_functions_unguarded():
    """``os.pread``/``os.pwrite``/``os.register_at_fork`` only behind a ``hasattr`` (or through
    ``local.pread``), and read-only descriptors with ``OPEN_READ`` (a directory opened for its
    fsync is the one ``O_RDONLY``: that fails on Windows and is skipped)."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for m in re.finditer(r"os\.(pread|pwrite|register_at_fork)\(", text):
            guarded = f'hasattr(os, "{m.group(1)}")' in text
            if not guarded:
                bad.append(f"{path.relative_to(PACKAGE)}: os.{m.group(1)}")
        for line in text.splitlines():
            if "os.O_RDONLY" in line and "OPEN_READ =" not in line and "os.open(directory" not in line:
                bad.append(f"{path.relative_to(PACKAGE)}: {line.strip()}")
    assert not bad, bad

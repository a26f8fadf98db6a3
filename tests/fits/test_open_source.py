"""The one door to byte sources: every kind of input gives the same bytes, unknown ones are refused
by name, open sources are reused per file version, and a forked child drops what must not cross."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pathlib
import sys

import pytest

from torchfits.errors import FitsFileNotFoundError
from torchfits.fits.hdu_index import clear_index_cache, get_index, invalidate
from torchfits.fits.paths import SourcePath
from torchfits.fits.sources import ByteSource, open_source
from torchfits.fits.sources.local import LocalSource

_CARD = "{:<80}"


def _fits_bytes() -> bytes:
    cards = ["SIMPLE  =                    T", "BITPIX  =                    8",
             "NAXIS   =                    1", "NAXIS1  =                   10", "END"]
    header = "".join(_CARD.format(c) for c in cards).encode("ascii")
    header += b" " * (2880 - len(header))
    return header + bytes(range(10)) + b"\0" * 2870


DATA = _fits_bytes()


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def plain(tmp_path):
    path = tmp_path / "plain.fits"
    path.write_bytes(DATA)
    return path


def _all_bytes(src: ByteSource) -> bytes:
    assert isinstance(src, ByteSource)
    assert src.size == len(DATA)
    return src.read(0, src.size)


class _Unseekable(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        chunk = self._data.read(len(b))
        b[:len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("kind", ["str", "pathlike", "file_url", "bytes", "bytearray",
                                  "memoryview", "bytesio", "open_file", "unseekable"])
def test_every_input_kind_gives_the_same_bytes(kind, plain):
    if kind == "str":
        obj = str(plain)
    elif kind == "pathlike":
        obj = pathlib.Path(plain)
    elif kind == "file_url":
        obj = plain.as_uri()
    elif kind == "bytes":
        obj = DATA
    elif kind == "bytearray":
        obj = bytearray(DATA)
    elif kind == "memoryview":
        obj = memoryview(DATA)
    elif kind == "bytesio":
        obj = io.BytesIO(DATA)
    elif kind == "open_file":
        obj = open(plain, "rb")
    else:
        obj = _Unseekable(DATA)
    try:
        assert _all_bytes(open_source(obj)) == DATA
    finally:
        if hasattr(obj, "close"):
            obj.close()


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress],
                         ids=["gzip", "bz2", "xz"])
def test_whole_file_compression_is_undone_by_magic_bytes(compress, tmp_path):
    packed = compress(DATA)
    path = tmp_path / "packed.fits.whatever"  # the suffix says nothing: the magic bytes do
    path.write_bytes(packed)
    assert _all_bytes(open_source(str(path))) == DATA
    assert _all_bytes(open_source(packed)) == DATA
    assert _all_bytes(open_source(io.BytesIO(packed))) == DATA


def test_fsspec_url_and_source_path_give_the_same_bytes():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/door/plain.fits", DATA)
    try:
        assert _all_bytes(open_source("memory://door/plain.fits")) == DATA
        assert _all_bytes(open_source(SourcePath("memory://door/plain.fits", {}))) == DATA
    finally:
        fs.rm("/door", recursive=True)


@pytest.mark.parametrize("obj", [None, 42, 3.5, {"path": "x.fits"}, object()])
def test_an_unknown_object_is_refused_by_name(obj):
    with pytest.raises(TypeError, match=type(obj).__name__):
        open_source(obj)


def test_text_mode_file_is_refused(plain):
    with open(plain) as fh, pytest.raises(TypeError, match="binary mode"):
        open_source(fh)


def test_missing_file_and_empty_path(tmp_path):
    with pytest.raises(FitsFileNotFoundError, match="nope.fits"):
        open_source(str(tmp_path / "nope.fits"))
    with pytest.raises(ValueError, match="non-empty"):
        open_source("")


def test_a_local_source_is_reused_per_file_version(plain):
    first = open_source(str(plain))
    assert isinstance(first, LocalSource)
    assert first.version is not None and first.cache_key == str(plain)
    assert open_source(plain) is first
    assert open_source(str(plain), cache=False) is not first
    private = open_source(str(plain), in_memory=True)
    assert private is not first and private.cache_key is None and _all_bytes(private) == DATA
    plain.write_bytes(DATA[:-2880] + b"\1" * 2880)  # a new version
    again = open_source(str(plain))
    assert again is not first and again.version != first.version


def test_bytes_are_wrapped_anew_and_file_objects_reused():
    assert open_source(DATA).cache_key is None
    assert open_source(DATA) is not open_source(DATA)
    stream = _Unseekable(DATA)
    src = open_source(stream)
    assert open_source(stream) is src  # a stream is read once


def test_index_follows_the_source(plain):
    idx = get_index(str(plain))
    assert get_index(plain) is idx
    assert idx.source is open_source(str(plain))
    assert idx.key == idx.source.version


def test_a_dropped_index_opens_its_source_anew(plain):
    idx = get_index(str(plain))
    held = idx.source  # held elsewhere too (a dataset's fragment): still not reused
    clear_index_cache(stats=False)
    after_clear = get_index(str(plain))
    assert after_clear is not idx and after_clear.source is not held
    invalidate(str(plain))
    after_invalidate = get_index(str(plain))
    assert after_invalidate.source is not after_clear.source
    assert get_index(str(plain)) is after_invalidate


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_drops_remote_sources_and_keeps_local_maps(plain):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/door/fork.fits", DATA)
    try:
        local = open_source(str(plain))
        remote = open_source("memory://door/fork.fits")
        assert open_source("memory://door/fork.fits") is remote
        pid = os.fork()
        if pid == 0:  # the child: exit status says what it saw
            code = 0
            try:
                if open_source(str(plain)) is not local:
                    code |= 1
                again = open_source("memory://door/fork.fits")
                if again is remote or again.read(0, again.size) != DATA:
                    code |= 2
            except BaseException:  # noqa: BLE001 - reported through the exit status
                code |= 4
            sys.stdout.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert open_source("memory://door/fork.fits") is remote  # the parent keeps its own
    finally:
        fs.rm("/door", recursive=True)

"""Errors through the Dask routes reach the user as the engine raised them: an unsupported
column keeps its class and its message (it is a NotImplementedError, which the Dask adapters
once reported as missing remote support), and remote sources this installation cannot read
say why.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
fits = pytest.importorskip("astropy.io.fits")

import torchfits.dask as tfd  # noqa: E402
from _daskhelpers import remote_options, served  # noqa: E402
from _fitsbytes import fits_bytes  # noqa: E402
from torchfits.errors import FitsError, HttpBlockedError, UnsupportedColumnError  # noqa: E402

TOO_WIDE = "99999999999999999999"  # 20 digits: more than an int64 holds


def _write_overflowing_ascii_table(path) -> None:
    """An ASCII table whose I25 field holds a value no int64 holds: decoding it raises
    UnsupportedColumnError (the native mapping reads wide Iw fields as int64)."""
    cols = [fits.Column("big", "I25", array=np.array([1, 2, 3])),
            fits.Column("x", "I5", array=np.array([4, 5, 6]))]
    raw = fits_bytes([fits.PrimaryHDU(), fits.TableHDU.from_columns(cols)])
    field = b"1".rjust(25)
    at = raw.find(field)
    raw[at:at + 25] = TOO_WIDE.encode().rjust(25)
    path.write_bytes(bytes(raw))


def test_an_unsupported_column_keeps_its_message_through_a_remote_read(tmp_path):
    _write_overflowing_ascii_table(tmp_path / "wide.fits")
    with served(tmp_path) as srv:
        ddf = tfd.read_table(f"{srv.url}/wide.fits", storage_options=remote_options(tmp_path))
        with pytest.raises(UnsupportedColumnError, match=f"'big'.*{TOO_WIDE} does not fit the int64"):
            ddf.compute(scheduler="sync")
        # the columns that can be read still are
        assert ddf[["x"]].compute(scheduler="sync")["x"].tolist() == [4, 5, 6]


@pytest.mark.parametrize("storage_options", [None, {}, {"anon": True}])
def test_an_unsupported_column_while_planning_is_not_reported_as_remote_support(tmp_path, monkeypatch,
                                                                                 storage_options):
    import torchfits.dask.arrays as arrays
    import torchfits.tables.dataset as dsmod

    message = "column 3 ('c', TFORM3='9Z'): no Arrow type for this column"

    def refuse(*args, **kwargs):
        raise UnsupportedColumnError(message)

    monkeypatch.setattr(dsmod, "dataset", refuse)
    with pytest.raises(UnsupportedColumnError) as info:
        tfd.read_table("s3://bucket/cat.fits", storage_options=storage_options)
    assert str(info.value) == message
    monkeypatch.setattr(arrays, "open_image", refuse)
    with pytest.raises(UnsupportedColumnError) as info:
        tfd.read_images("s3://bucket/img.fits", storage_options=storage_options)
    assert str(info.value) == message


@pytest.mark.parametrize("read", ["read_table", "read_images"])
def test_remote_sources_this_installation_cannot_read_say_why(read, monkeypatch):
    fn = getattr(tfd, read)
    # no fsspec: the extra to install
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "fsspec", None)
        for url in ("s3://bucket/cat.fits", "s3://bucket/*.fits"):
            with pytest.raises(ImportError,
                               match=r"s3://bucket/.*needs fsspec: pip install 'torchfits\[remote\]'"):
                fn(url, storage_options={"anon": True})
    pytest.importorskip("fsspec")
    # a protocol fsspec does not know: named
    with pytest.raises(ValueError, match="Protocol not known: nosuch"):
        fn("nosuch://bucket/cat.fits", storage_options={})
    # FTP is refused, whatever the options
    with pytest.raises(HttpBlockedError, match="ftp:// URLs are not supported"):
        fn("ftp://example.com/cat.fits", storage_options={})
    assert issubclass(HttpBlockedError, FitsError)

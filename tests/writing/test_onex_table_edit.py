"""1.x table-edit behaviour: mmap updates refuse variable-length columns; short strings in `A`
columns are padded with spaces as CFITSIO pads them, on every writer route (issue #25)."""
import numpy as np
import pytest

import torchfits
from torchfits import table


def _vla_file(path, fits):
    fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="J", array=np.arange(3)),
        fits.Column(name="V", format="PJ()", array=[np.arange(i + 1) for i in range(3)]),
    ]).writeto(path)
    return str(path)


def test_mmap_update_of_vla_column_raises(tmp_path, fits):
    path = _vla_file(tmp_path / "v.fits", fits)
    before = (tmp_path / "v.fits").read_bytes()
    with pytest.raises(ValueError, match="mmap table updates do not support variable-length-array"):
        table.update_rows(path, {"V": [np.array([7, 7, 7, 7], np.int32)]}, (0, 1), mmap=True)
    assert (tmp_path / "v.fits").read_bytes() == before
    table.update_rows(path, {"ID": np.array([9], np.int32)}, (0, 1), mmap=True)  # fixed columns stay fine
    table.update_rows(path, {"V": [np.array([7, 7, 7, 7], np.int32)]}, (0, 1), mmap="auto")
    assert list(fits.getdata(path)["V"][0]) == [7, 7, 7, 7]
    assert fits.getdata(path)["ID"][0] == 9


def _cells(path, fits, hdu=1, column="S"):
    """The raw bytes of a string column's cells, as stored."""
    with fits.open(path) as hdul:
        raw = hdul[hdu].data.view(np.recarray)
        fmt = hdul[hdu].columns[column]
        width = int(fmt.format.rstrip("A") or 1)
        off = hdul[hdu].data.dtype.fields[column][1]
        rows = np.frombuffer(hdul[hdu].data.tobytes(), np.uint8).reshape(len(raw), -1)
        return [bytes(r[off:off + width]) for r in rows]


def test_short_strings_padded_with_spaces_on_every_writer(tmp_path, fits, torch):
    strings = np.array(["QZ", "abcdef"])
    p = str(tmp_path / "a.fits")
    torchfits.write(p, {"S": strings, "N": np.arange(2)}, overwrite=True)
    assert _cells(p, fits) == [b"QZ    ", b"abcdef"]

    p2 = str(tmp_path / "b.fits")
    table.write(p2, {"S": strings, "N": np.arange(2)})
    assert _cells(p2, fits) == [b"QZ    ", b"abcdef"]
    table.append_rows(p2, {"S": ["x"], "N": np.array([2])})
    table.insert_rows(p2, {"S": ["yy"], "N": np.array([3])}, row=0)
    table.update_rows(p2, {"S": ["z"]}, (1, 2), mmap=True)
    table.update_rows(p2, {"S": ["w"]}, (2, 3), mmap=False)
    assert _cells(p2, fits) == [b"yy    ", b"z     ", b"w     ", b"x     "]
    assert list(fits.getdata(p2)["S"]) == ["yy", "z", "w", "x"]
    assert table.read(p2).column("S").to_pylist() == ["yy", "z", "w", "x"]
    assert torchfits.scan(p2).to_arrow().column("S").to_pylist() == ["yy", "z", "w", "x"]

    torchfits.insert_hdu(p2, {"S": strings}, index=-1)
    assert _cells(p2, fits, hdu=2) == [b"QZ    ", b"abcdef"]

    p3 = str(tmp_path / "c.fits")
    torchfits.TableHDU({"S": ["QZ", "abcdef"], "N": torch.arange(2)}).to_fits(p3)
    assert _cells(p3, fits) == [b"QZ    ", b"abcdef"]
    assert list(fits.getdata(p3)["S"]) == ["QZ", "abcdef"]


def test_multidim_string_cells_keep_nul_ends(tmp_path, fits):
    """Strings of a TDIM array end in NUL (astropy strips NULs but not spaces inside the array)."""
    p = str(tmp_path / "m.fits")
    table.write(p, {"S": np.array([["QZ", "a"], ["b", "cc"]])})
    assert fits.getdata(p)["S"].tolist() == [["QZ", "a"], ["b", "cc"]]
    assert torchfits.scan(p).to_arrow().column("S").to_pylist() == [["QZ", "a"], ["b", "cc"]]
    assert _cells(p, fits) == [b"QZa\x00", b"b\x00cc"]

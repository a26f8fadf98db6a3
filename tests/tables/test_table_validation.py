"""Table headers and heap descriptors that lie: every size is checked before anything is
allocated or looped over, and the error names the file, the HDU, the keyword or the row.

Files are built by code: an astropy-written table with one card or one descriptor changed.
"""
from __future__ import annotations

import numpy as np
import pytest

import torchfits
from _fitsbytes import fits_bytes, set_card
from torchfits.errors import CorruptHeaderError, FitsError, TruncatedFileError
from torchfits.fits.hdu_index import get_index
from torchfits.tables import variable_length as _variable_length

fits = pytest.importorskip("astropy.io.fits")


def _table(cols: list) -> bytearray:
    return fits_bytes([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)])


def _write(tmp_path, name: str, raw: bytes) -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as fh:
        fh.write(bytes(raw))
    return path


def _vla_table(n: int = 6) -> bytearray:
    return _table([fits.Column(name="ID", format="J", array=np.arange(n)),
                   fits.Column(name="V", format="PJ()",
                               array=np.array([np.arange(i % 4 + 1, dtype=np.int32) for i in range(n)],
                                              dtype=object))])


def _descriptor_at(path: str, row: int) -> int:
    """Absolute offset of row ``row``'s descriptor of column V (after the 4-byte ID)."""
    e = get_index(path).entries[1]
    return e.data_offset + row * e.row_bytes + 4


def _every_read(path: str) -> list:
    """The Arrow scan, the filtered scan and (with torch) the 1.x tensor read."""
    reads = [lambda: torchfits.scan(path, 1).to_arrow(),
             lambda: torchfits.scan(path, 1, where="ID >= 0").to_arrow()]
    try:
        import torch  # noqa: F401
    except ImportError:
        return reads
    return reads + [lambda: torchfits.read(path, 1)]


def test_huge_repeat_count_is_refused_naming_the_keyword(tmp_path):
    raw = _table([fits.Column(name="M", format="6I", array=np.zeros((3, 6), np.int16))])
    # NAXIS2 = 0 so that the file holds every byte the header asks for: only the repeat lies.
    set_card(set_card(set_card(raw, b"TFORM1", b"'2147483648I'"), b"NAXIS1", b"4294967296"), b"NAXIS2", b"0")
    path = _write(tmp_path, "repeat.fits", raw)
    for read in _every_read(path):
        with pytest.raises(CorruptHeaderError,
                           match=r"repeat\.fits: HDU 1: column 1 \('M'\): TFORM1 = '2147483648I': "
                                 r"repeat count 2147483648 exceeds 2147483647"):
            read()


def test_tdim_larger_than_the_repeat_is_refused(tmp_path, fitsio):
    raw = _table([fits.Column(name="M", format="6I", dim="(3,2)",
                              array=np.arange(18).reshape(3, 2, 3).astype(np.int16))])
    path = _write(tmp_path, "tdim.fits", set_card(raw, b"TDIM1", b"'(4,2)'"))
    with pytest.raises(CorruptHeaderError, match=r"tdim\.fits: HDU 1: .*TDIM1 = '\(4,2\)' describes 8"):
        torchfits.scan(path, 1).to_arrow()
    with pytest.raises(ValueError, match="TDIM"):  # the CFITSIO oracle refuses it as well
        fitsio.read(path, ext=1)
    # Fewer elements than the repeat is allowed: the cells read as flat vectors.
    path = _write(tmp_path, "tdim_small.fits", set_card(bytearray(raw), b"TDIM1", b"'(2,2)'"))
    assert torchfits.scan(path, 1).to_arrow().column("M").to_pylist()[1] == list(range(6, 12))


def test_theap_outside_the_data_area_is_refused(tmp_path):
    raw = _vla_table()
    e_rows = 6 * 12
    for theap in (b"4", str(e_rows + 10_000).encode()):
        path = _write(tmp_path, "theap.fits", set_card(bytearray(raw), b"THEAP", theap) if b"THEAP" in raw
                      else _insert_theap(bytearray(raw), theap))
        torchfits.clear_file_cache()
        with pytest.raises(CorruptHeaderError, match=rf"theap\.fits: HDU 1: THEAP={theap.decode()} "
                                                     r"lies outside the data area"):
            torchfits.scan(path, 1).to_arrow()


def _insert_theap(raw: bytearray, value: bytes) -> bytearray:
    end = raw.find(b"END" + b" " * 77, 2880)
    raw[end:end + 160] = (b"THEAP   = " + value.rjust(20)).ljust(80) + b"END".ljust(80)
    return raw


@pytest.mark.parametrize("count, offset", [(-1, 0), (3, 10_000), (2**31 - 1, 0), (1, -8)])
def test_corrupt_descriptor_names_file_hdu_column_and_row(tmp_path, count, offset):
    raw = _vla_table()
    path = _write(tmp_path, "desc.fits", raw)
    p = _descriptor_at(path, 4)
    raw[p:p + 8] = count.to_bytes(4, "big", signed=True) + offset.to_bytes(4, "big", signed=True)
    path = _write(tmp_path, "desc.fits", raw)
    torchfits.clear_file_cache()
    for read in _every_read(path):
        with pytest.raises(CorruptHeaderError,
                           match=r"desc\.fits: HDU 1: column 2 \('V'.*row 4: corrupt heap descriptor"):
            read()
    # Rows before the bad one still read.
    assert torchfits.scan(path, 1, rows=[0, 1, 2]).to_arrow().num_rows == 3


def test_descriptor_into_a_truncated_heap_is_a_truncation(tmp_path):
    n = 200
    raw = _table([fits.Column(name="ID", format="J", array=np.arange(n)),
                  fits.Column(name="V", format="PD()",
                              array=np.array([np.ones(40) for _ in range(n)], dtype=object))])
    path = _write(tmp_path, "full.fits", raw)
    e = get_index(path).entries[1]
    cut = e.heap_offset + e.heap_size // 2
    path = _write(tmp_path, "cut.fits", raw[:cut])
    with pytest.raises(TruncatedFileError, match=r"cut\.fits: HDU 1: file is truncated: only \d+ of "
                                                 r"the \d+ heap bytes are present"):
        torchfits.scan(path, 1).to_arrow()
    # Rows whose cells lie in the bytes that remain still read.
    assert torchfits.scan(path, 1, rows=[0, 1]).to_arrow().column("V").to_pylist()[1] == [1.0] * 40


def test_truncated_rows_name_the_file_and_hdu(tmp_path):
    raw = _table([fits.Column(name="ID", format="K", array=np.arange(1000))])
    e_off = 2 * 2880
    path = _write(tmp_path, "rows.fits", raw[:e_off + 8 * 500])
    with pytest.raises(TruncatedFileError, match=r"rows\.fits: HDU 1"):
        torchfits.scan(path, 1).to_arrow()
    for read in _every_read(path):
        with pytest.raises(TruncatedFileError, match=r"rows\.fits: HDU 1"):
            read()
    assert torchfits.scan(path, 1, rows=[0, 499]).to_arrow().column("ID").to_pylist() == [0, 499]


def test_overlapping_descriptors_cannot_multiply_the_heap(tmp_path, monkeypatch):
    # Every row points at the whole heap: each descriptor is valid, together they would make
    # the output nrows times the heap. The bound is 16x the heap (at least 256 MiB).
    n = 64
    raw = _vla_table(n)
    path = _write(tmp_path, "overlap.fits", raw)
    e = get_index(path).entries[1]
    heap_words = e.heap_size // 4
    for r in range(n):
        p = _descriptor_at(path, r)
        raw[p:p + 8] = heap_words.to_bytes(4, "big") + (0).to_bytes(4, "big")
    path = _write(tmp_path, "overlap.fits", raw)
    torchfits.clear_file_cache()
    # Under the floor the file reads (sharing heap bytes is legal) ...
    assert len(torchfits.scan(path, 1).to_arrow().column("V").to_pylist()[-1]) == heap_words
    # ... past it the descriptors are refused before anything is allocated.
    monkeypatch.setattr(_variable_length, "_VLA_MIN_BOUND", 0)
    with pytest.raises(CorruptHeaderError, match=r"overlap\.fits: HDU 1: column 2 \('V'.*reference "
                                                 r"\d+ bytes of a \d+-byte heap"):
        torchfits.scan(path, 1).to_arrow()


def test_every_table_error_is_a_fits_error_with_context(tmp_path):
    """One mutated card per structural table keyword: data or a FitsError naming the file."""
    raw = _vla_table()
    for key, value in [(b"TFIELDS", b"1000"), (b"TFIELDS", b"-1"), (b"NAXIS1", b"2147483647"),
                       (b"NAXIS2", b"4294967297"), (b"PCOUNT", b"-5"), (b"PCOUNT", b"4294967297"),
                       (b"TFORM1", b"'9999999999J'"), (b"TFORM2", b"'1PJ(99999999999)'"),
                       (b"TFORM2", b"'3PJ'"), (b"TFORM1", b"'-1J'")]:
        path = _write(tmp_path, "lie.fits", set_card(bytearray(raw), key, value))
        torchfits.clear_file_cache()
        for read in _every_read(path):
            try:
                read()
            except FitsError as exc:
                assert "lie.fits" in str(exc), (key, value, str(exc))


def test_index_refuses_non_integer_table_sizes(tmp_path):
    raw = _vla_table()
    for key, value in [(b"NAXIS1", b"'garbage'"), (b"NAXIS2", b"1.5"), (b"PCOUNT", b"T")]:
        path = _write(tmp_path, "sizes.fits", set_card(bytearray(raw), key, value))
        torchfits.clear_file_cache()
        with pytest.raises(CorruptHeaderError, match=r"sizes\.fits"):
            torchfits.scan(path, 1).to_arrow()
    raw = _insert_theap(_vla_table(), b"'x'")
    path = _write(tmp_path, "sizes.fits", raw)
    torchfits.clear_file_cache()
    with pytest.raises(CorruptHeaderError, match=r"sizes\.fits.*THEAP"):
        torchfits.scan(path, 1).to_arrow()


def test_repeated_column_names_do_not_break_where_planning(tmp_path):
    raw = _table([fits.Column(name="A", format="K", array=np.arange(5)),
                  fits.Column(name="B", format="E", array=np.arange(5, dtype=np.float32)),
                  fits.Column(name="C", format="J", array=np.arange(5))])
    path = _write(tmp_path, "dup.fits", set_card(raw, b"TTYPE3", b"'A'"))
    # The first of two columns named alike is the one a name selects.
    assert torchfits.scan(path, 1, where="B > 1").to_arrow().column("A").to_pylist() == [2, 3, 4]
    assert torchfits.scan(path, 1, where="A > 3").to_arrow().num_rows == 1

"""Files the fuzzing campaign (tests/fuzz) found mishandled, kept in tests/data/ (rebuilt by
``python -m tests.fuzz.make_regressions``), each with what it must give now.

The reads run in a child interpreter under an address-space limit, so an allocation the file's
bytes cannot justify fails the test (MemoryError) instead of swapping the machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import torchfits
from torchfits.errors import CorruptHeaderError, FitsError

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data(name: str) -> str:
    return os.path.join(DATA, name)


CHILD = textwrap.dedent(r'''
    import json, os, sys, time
    import numpy as np, torchfits
    from torchfits.errors import FitsError
    from tests.fuzz.reads import limit_address_space
    limit_address_space(512 << 20)  # its imports come before the clock too
    out = []
    for path, hdu in json.loads(sys.argv[1]):
        for name, op in [("header", lambda: str(torchfits.read_header(path, hdu, compressed=False))),
                         ("read_numpy", lambda: torchfits.read_numpy(path, hdu)),
                         ("slice", lambda: torchfits.open_image(path, hdu)[..., :2]),
                         ("read", lambda: torchfits.read(path, hdu)),
                         ("info", lambda: torchfits.info(path))]:
            t0 = time.perf_counter()
            try:
                op()
                res = "ok"
            except FitsError as exc:
                res = "fits:" + type(exc).__name__
            except BaseException as exc:
                res = "bare:" + type(exc).__name__ + ":" + str(exc)[:200]
            out.append([os.path.basename(path), name, res, time.perf_counter() - t0])
    print(json.dumps(out))
''')


def test_regressions_are_bounded_and_clear():
    cases = [(data(n), h) for n, h in [
        ("reg_naxis1_huge.fits", 0), ("reg_tfields_huge.fits", 1), ("reg_znaxis_huge.fits", 1),
        ("reg_ztile_huge.fits", 1), ("reg_rice_bytepix.fits", 1), ("reg_zval_inf.fits", 1),
        ("reg_zscale_garbled.fits", 1), ("reg_blank_1e400.fits", 0)]]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    bare = [r for r in results if r[2].startswith("bare")]
    assert bare == []
    slow = [r for r in results if r[3] > 5]
    assert slow == []
    outcome = {(r[0], r[1]): r[2] for r in results}
    assert outcome["reg_naxis1_huge.fits", "read_numpy"] == "fits:TruncatedFileError"
    assert outcome["reg_znaxis_huge.fits", "header"] == "fits:CorruptHeaderError"
    assert outcome["reg_ztile_huge.fits", "read_numpy"] == "fits:CorruptHeaderError"
    assert outcome["reg_rice_bytepix.fits", "read_numpy"] == "fits:CorruptHeaderError"
    assert outcome["reg_zval_inf.fits", "read_numpy"] == "fits:CorruptHeaderError"
    assert outcome["reg_zscale_garbled.fits", "read_numpy"] == "fits:CorruptHeaderError"
    assert outcome["reg_blank_1e400.fits", "header"] == "ok"
    assert outcome["reg_blank_1e400.fits", "read_numpy"] == "ok"


def test_messages_name_file_hdu_and_keyword():
    with pytest.raises(CorruptHeaderError, match=r"reg_znaxis_huge\.fits: HDU 1: ZNAXIS=2147483648"):
        torchfits.read_header(data("reg_znaxis_huge.fits"), 1, compressed=False)
    with pytest.raises(CorruptHeaderError, match=r"reg_tfields_huge\.fits: HDU 1: TFIELDS="):
        torchfits.scan(data("reg_tfields_huge.fits"), 1).to_arrow()
    with pytest.raises(CorruptHeaderError, match=r"reg_zscale_garbled\.fits: HDU 1: .*ZSCALE"):
        torchfits.read_numpy(data("reg_zscale_garbled.fits"), 1)


def test_header_value_overflowing_a_double():
    h = torchfits.read_header(data("reg_blank_1e400.fits"))
    assert h["BLANK"] == float("inf")
    assert "BLANK   =                1E400" in str(h)
    assert "1E400" in h.tostring()
    # BLANK that is not an integer is ignored for integer pixels (astropy does the same).
    from astropy.io import fits

    with pytest.warns(Warning), fits.open(data("reg_blank_1e400.fits")) as hl:
        expected = hl[0].data
    np.testing.assert_array_equal(torchfits.read_numpy(data("reg_blank_1e400.fits")), expected)


def test_duplicate_bzero_last_wins(fitsio):
    from astropy.io import fits

    arr = torchfits.read_numpy(data("reg_duplicate_bzero.fits"))
    np.testing.assert_array_equal(arr, fitsio.read(data("reg_duplicate_bzero.fits")))
    with fits.open(data("reg_duplicate_bzero.fits")) as hl:
        expected = hl[0].data
    assert arr.dtype == expected.dtype
    np.testing.assert_array_equal(arr, expected)
    assert torchfits.read_header(data("reg_duplicate_bzero.fits"))["BZERO"] == 10.0  # first card


def test_integer_quantised_image_matches_cfitsio(fitsio):
    from astropy.io import fits

    path = data("reg_quantized_zbitpix32.fits")
    ours = torchfits.read_numpy(path, 1)
    theirs = fitsio.read(path, ext=1)
    with fits.open(path) as hl:
        np.testing.assert_array_equal(hl[1].data, theirs)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(torchfits.open_image(path, 1)[10:30, 5:9], theirs[10:30, 5:9])


def test_numeric_ttype_names_no_column():
    # Found by the atheris campaign: TTYPE1 = TTYPE3 = 4294967297 (numbers, not strings).
    path = data("reg_ttype_numeric.fits")
    assert torchfits.read_colnames(path, 1) == ["col1", "FLUX", "col3"]
    table = torchfits.scan(path, 1, where="col1 > 4 AND col3 < 8").to_arrow()
    assert table.column_names == ["col1", "FLUX", "col3"]
    assert table.column("col1").to_pylist() == [5, 6, 7]


def test_every_regression_file_is_described():
    with open(os.path.join(ROOT, "tests", "fuzz", "make_regressions.py")) as fh:
        recipe = fh.read()
    names = sorted(n for n in os.listdir(DATA) if n.startswith("reg_"))
    assert len(names) >= 10
    for n in names:
        assert f'"{n}"' in recipe, f"{n} has no recipe in tests/fuzz/make_regressions.py"
        try:
            torchfits.info(data(n))
        except FitsError:
            pass

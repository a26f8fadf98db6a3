"""``torchfits diff`` against astropy's ``FITSDiff``: for every pair of files in a matrix
(identical, one cell, two pixels, NaN, nulls, header values/comments/extra cards, HDU count,
tolerance edges, ignored keywords and HDUs, shapes, dtypes, arrays, VLAs, compressed images),
the exit code is 0 exactly when ``FITSDiff(...).identical``; the report names the place."""
import fnmatch
import json
import warnings

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

from _cli import run  # noqa: E402


# -- builders: each writes one file with astropy (the independent writer) ------------------------
def image(data, **cards):
    def build(path):
        hdr = fits.Header()
        for k, v in cards.items():
            hdr[k] = v
        fits.PrimaryHDU(data, header=hdr).writeto(path)
    return build


def table(columns=None, *, extra_hdu=None, nrows=None, header=None):
    """A primary plus one binary table; ``columns`` maps name → (format, values)."""
    def build(path):
        cols = []
        for name, (fmt, values, *rest) in (columns or base_columns()).items():
            kw = rest[0] if rest else {}
            cols.append(fits.Column(name=name, format=fmt, array=values, **kw))
        hdu = fits.BinTableHDU.from_columns(cols, name="CAT")
        for k, v in (header or {}).items():
            hdu.header[k] = v
        hdus = [fits.PrimaryHDU(), hdu]
        if extra_hdu is not None:
            hdus.append(extra_hdu())
        fits.HDUList(hdus).writeto(path)
    return build


def base_columns(**changes):
    cols = {
        "id": ("J", np.arange(5, dtype=np.int32)),
        "flux": ("D", np.array([1.0, 2.5, np.nan, 4.0, 5.0])),
        "mag": ("E", np.array([10, 11, 12, 13, 14], dtype=np.float32)),
        "name": ("8A", np.array(["a", "bb", "", "dddd", "e"])),
        "flag": ("L", np.array([True, False, True, False, True])),
        "vec": ("3I", np.arange(15, dtype=np.int16).reshape(5, 3)),
        "nul": ("J", np.array([1, -99, 3, 4, -99], dtype=np.int32), {"null": -99}),
        "vla": ("PD()", np.array([np.array([1.0]), np.array([2.0, 3.0]), np.array([]),
                                  np.array([4.0, 5.0, 6.0]), np.array([7.0])],
                                 dtype=object)),
    }
    for name, change in changes.items():
        fmt, values, *rest = cols[name]
        values = values.copy()
        change(values)
        cols[name] = (fmt, values, *rest)
    return cols


def set_at(i, v):
    def change(values):
        values[i] = v
    return change


def vla_change(i, new):
    def change(values):
        values[i] = np.asarray(new, dtype=float)
    return change


def multi(*builders_and_names):
    """A file of several HDUs: (name, data) images after an empty primary."""
    def build(path):
        hdus = [fits.PrimaryHDU()] + [fits.ImageHDU(d, name=n) for n, d in builders_and_names]
        fits.HDUList(hdus).writeto(path)
    return build


def compressed(data):
    def build(path):
        fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="RICE_1")]
                     ).writeto(path)
    return build


def scaled(raw, bscale, bzero):
    def build(path):
        hdu = fits.PrimaryHDU(raw.astype(np.int16))
        hdu.header["BSCALE"] = bscale
        hdu.header["BZERO"] = bzero
        hdu.writeto(path)
    return build


def with_history(n):
    def build(path):
        hdu = fits.PrimaryHDU(np.zeros((2, 2), np.int16))
        for k in range(n):
            hdu.header.add_history(f"step {k}")
        hdu.writeto(path)
    return build


def ascii_table(values):
    def build(path):
        col = fits.Column(name="x", format="F8.3", array=np.asarray(values))
        fits.HDUList([fits.PrimaryHDU(), fits.TableHDU.from_columns([col])]).writeto(path)
    return build


RAMP = np.arange(20, dtype=np.float64).reshape(4, 5)


def ramp(**at):
    d = RAMP.copy()
    for key, v in at.items():
        y, x = (int(s) for s in key[1:].split("_"))
        d[y, x] = v
    return d


# (id, builder a, builder b, options for both sides, expected identical)
PAIRS = [
    ("identical image", image(RAMP), image(RAMP), {}, True),
    ("identical table", table(), table(), {}, True),
    ("one table cell", table(), table(base_columns(mag=set_at(3, 13.5))), {}, False),
    ("one string cell", table(), table(base_columns(name=set_at(1, "bc"))), {}, False),
    ("one logical cell", table(), table(base_columns(flag=set_at(0, False))), {}, False),
    ("one array element", table(), table(base_columns(vec=set_at((2, 1), 99))), {}, False),
    ("one VLA element", table(), table(base_columns(vla=vla_change(1, [2.0, 3.5]))), {}, False),
    ("VLA length", table(), table(base_columns(vla=vla_change(0, [1.0, 1.0]))), {}, False),
    ("two image pixels", image(RAMP), image(ramp(p1_2=-1.0, p3_4=100.0)), {}, False),
    ("NaN vs NaN image", image(ramp(p0_0=np.nan)), image(ramp(p0_0=np.nan)), {}, True),
    ("NaN vs number image", image(ramp(p0_0=np.nan)), image(RAMP), {}, False),
    ("NaN vs NaN table", table(), table(), {}, True),
    ("NaN vs number table", table(), table(base_columns(flux=set_at(2, 3.0))), {}, False),
    ("null vs value", table(), table(base_columns(nul=set_at(1, 2))), {}, False),
    ("header value", image(RAMP, OBJECT="M31"), image(RAMP, OBJECT="M32"), {}, False),
    ("header comment", image(RAMP, OBJECT=("M31", "target")), image(RAMP, OBJECT=("M31", "other")),
     {}, False),
    ("extra card", image(RAMP), image(RAMP, OBSERVER="me"), {}, False),
    ("history count", with_history(2), with_history(3), {}, False),
    ("HDU count", table(), table(extra_hdu=lambda: fits.ImageHDU(RAMP, name="X")), {}, False),
    ("rtol inside", image(RAMP + 100.0), image(RAMP * (1 + 1e-7) + 100.0), {"rtol": 1e-6}, True),
    ("rtol outside", image(RAMP + 100.0), image(RAMP * (1 + 1e-7) + 100.0), {"rtol": 1e-10}, False),
    ("atol inside", image(RAMP), image(RAMP + 0.25), {"atol": 0.5}, True),
    ("atol outside", image(RAMP), image(RAMP + 0.25), {"atol": 0.125}, False),
    ("atol on table floats", table(), table(base_columns(flux=set_at(0, 1.01))), {"atol": 0.02},
     True),
    ("tolerance ignored for ints", table(), table(base_columns(id=set_at(0, 1))), {"atol": 5},
     False),
    ("tolerance on header floats", image(RAMP, EXPTIME=30.0), image(RAMP, EXPTIME=30.001),
     {"atol": 0.01}, True),
    ("ignore keyword", image(RAMP, OBJECT="M31"), image(RAMP, OBJECT="M32"),
     {"ignore_keywords": ["OBJECT"]}, True),
    ("ignore keyword pattern", image(RAMP, OBJECT="M31"), image(RAMP, OBJECT="M32"),
     {"ignore_keywords": ["OBJ*"]}, True),
    ("ignore every keyword", image(RAMP, OBJECT="M31", A=1), image(RAMP, OBJECT="M32", A=2),
     {"ignore_keywords": ["*"]}, True),
    ("ignore keyword, data still compared", image(RAMP, OBJECT="M31"),
     image(ramp(p0_0=5.0), OBJECT="M32"), {"ignore_keywords": ["OBJECT"]}, False),
    ("ignore comment", image(RAMP, OBJECT=("M31", "target")), image(RAMP, OBJECT=("M31", "other")),
     {"ignore_comments": ["OBJECT"]}, True),
    ("ignore HDU", multi(("SCI", RAMP), ("ERR", RAMP)), multi(("SCI", ramp(p0_0=9.0)), ("ERR", RAMP)),
     {"ignore_hdus": ["SCI"]}, True),
    ("ignore HDU pattern", multi(("SCI", RAMP), ("ERR", RAMP)),
     multi(("SCI", ramp(p0_0=9.0)), ("ERR", ramp(p0_0=9.0))), {"ignore_hdus": ["S*", "E*"]}, True),
    ("ignore other HDU", multi(("SCI", RAMP), ("ERR", RAMP)),
     multi(("SCI", ramp(p0_0=9.0)), ("ERR", RAMP)), {"ignore_hdus": ["ERR"]}, False),
    ("ignore column", table(), table(base_columns(mag=set_at(3, 13.5))),
     {"ignore_columns": ["mag"]}, True),
    ("ignore column pattern", table(), table(base_columns(mag=set_at(3, 13.5), name=set_at(0, "z"))),
     {"ignore_columns": ["MA*", "n*"]}, True),
    ("ignore another column", table(), table(base_columns(mag=set_at(3, 13.5))),
     {"ignore_columns": ["flux"]}, False),
    ("shapes", image(RAMP), image(RAMP.T.copy()), {}, False),
    ("dtypes", image(RAMP.astype(np.int16)), image(RAMP.astype(np.int32)), {}, False),
    ("rows", table(), table({k: (v[0], v[1][:4], *v[2:]) for k, v in base_columns().items()}), {},
     False),
    ("scaled same", scaled(RAMP, 0.5, 10.0), scaled(RAMP, 0.5, 10.0), {}, True),
    ("scaled one raw step", scaled(RAMP, 0.5, 10.0), scaled(ramp(p2_2=13.0), 0.5, 10.0), {}, False),
    ("scaled within atol", scaled(RAMP, 0.5, 10.0), scaled(ramp(p2_2=13.0), 0.5, 10.0),
     {"atol": 1.0}, True),
    ("compressed same", compressed(RAMP.astype(np.int32)), compressed(RAMP.astype(np.int32)), {},
     True),
    ("compressed one pixel", compressed(RAMP.astype(np.int32)),
     compressed(ramp(p3_3=-4.0).astype(np.int32)), {}, False),
    ("ascii table cell", ascii_table([1.5, 2.5]), ascii_table([1.5, 2.25]), {}, False),
    ("ascii table same", ascii_table([1.5, 2.5]), ascii_table([1.5, 2.5]), {}, True),
]


def _argv(opts):
    argv = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, list):
            argv += [flag, ",".join(value)]
        else:
            argv += [flag, str(value)]
    return argv


@pytest.mark.parametrize("case", PAIRS, ids=[p[0] for p in PAIRS])
def test_exit_code_agrees_with_fitsdiff(case, tmp_path, capsys):
    name, build_a, build_b, opts, expected = case
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    build_a(str(a))
    build_b(str(b))
    astropy_opts = {("ignore_fields" if k == "ignore_columns" else k): v for k, v in opts.items()}
    if "ignore_fields" in astropy_opts:  # FITSDiff takes names, not patterns
        names = [c.name for c in fits.getdata(str(a), 1).columns]
        astropy_opts["ignore_fields"] = [n for n in names if any(
            fnmatch.fnmatchcase(n.upper(), p.upper()) for p in opts["ignore_columns"])]
    oracle = fits.FITSDiff(str(a), str(b), **astropy_opts).identical
    assert oracle is expected, f"the matrix expects FITSDiff to say identical={expected}"
    code, out, err = run(capsys, "diff", a, b, *_argv(opts))
    assert err == ""
    assert code == (0 if oracle else 1), out
    assert (out == "") is oracle, out


def test_report_names_the_place(tmp_path, capsys):
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    table()(str(a))
    table(base_columns(mag=set_at(3, 13.5), nul=set_at(1, 2)), header={"OBSERVER": "x"})(str(b))
    code, out, _ = run(capsys, "diff", a, b)
    assert code == 1
    lines = out.splitlines()
    assert "HDU 1 (CAT) header OBSERVER: only in b ('x')" in lines
    assert "HDU 1 (CAT) row 3 column mag: 13.0 vs 13.5" in lines
    assert "HDU 1 (CAT) row 1 column nul: None vs 2" in lines

    img_a, img_b = tmp_path / "i.fits", tmp_path / "j.fits"
    image(RAMP, OBJECT=("M31", "target"))(str(img_a))
    image(ramp(p1_2=-1.0, p3_4=100.0), OBJECT=("M32", "other"))(str(img_b))
    code, out, _ = run(capsys, "diff", img_a, img_b)
    assert out.splitlines() == [
        "HDU 0 (PRIMARY) header OBJECT value: 'M31' vs 'M32'",
        "HDU 0 (PRIMARY) header OBJECT comment: 'target' vs 'other'",
        "HDU 0 (PRIMARY) pixel [1, 2]: 7.0 vs -1.0",
        "HDU 0 (PRIMARY) pixel [3, 4]: 19.0 vs 100.0",
    ]


def test_first_differences_are_bounded_and_the_rest_counted(tmp_path, capsys):
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    image(np.zeros((50, 40), np.int32))(str(a))
    image(np.ones((50, 40), np.int32))(str(b))
    code, out, _ = run(capsys, "diff", a, b)
    lines = out.splitlines()
    assert code == 1 and len(lines) == 11
    assert lines[0] == "HDU 0 (PRIMARY) pixel [0, 0]: 0 vs 1"
    assert lines[-1] == "HDU 0 (PRIMARY) pixels: 2000 of 2000 differ (10 shown; largest |a - b| 1)"
    code, out, _ = run(capsys, "diff", "--max-diffs", "2", "--json", a, b)
    records = json.loads(out)
    assert [r["what"] for r in records] == ["pixel", "pixel", "pixels"]
    assert records[1] == {"what": "pixel", "hdu": 0, "name": "PRIMARY", "where": "pixel [0, 1]",
                          "a": 0, "b": 1}


def test_checksums_are_ignored_unless_asked(tmp_path, capsys):
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    fits.PrimaryHDU(RAMP).writeto(a, checksum=True)
    hdu = fits.PrimaryHDU(RAMP)
    hdu.header["DATE"] = "2020-01-01"
    hdu.header.remove("DATE")
    hdu.writeto(b)
    assert run(capsys, "diff", a, b)[0] == 0
    code, out, _ = run(capsys, "diff", "--compare-checksums", a, b)
    assert code == 1 and "CHECKSUM: only in a" in out


def test_nan_and_infinity_are_not_equal(tmp_path, capsys):
    """FITSDiff treats NaN and ±inf as one value; a NaN where the other file has an infinity is
    a difference here (documented in docs/cli.md)."""
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    image(ramp(p0_0=np.nan, p0_1=np.inf))(str(a))
    image(ramp(p0_0=np.inf, p0_1=np.inf))(str(b))
    code, out, _ = run(capsys, "diff", a, b)
    assert code == 1 and out.splitlines() == ["HDU 0 (PRIMARY) pixel [0, 0]: nan vs inf"]


def test_random_groups_compare_their_values(tmp_path, capsys):
    data = fits.GroupData(np.arange(12, dtype=np.float32).reshape(3, 1, 4), parnames=["U", "V"],
                          pardata=[np.arange(3.0), np.arange(3.0)], bitpix=-32)
    a, b, c = tmp_path / "a.fits", tmp_path / "b.fits", tmp_path / "c.fits"
    fits.GroupsHDU(data).writeto(a)
    data.data[1, 0, 2] = 99.0
    fits.GroupsHDU(data).writeto(b)
    data.par("V")[2] = 7.0
    fits.GroupsHDU(data).writeto(c)
    assert run(capsys, "diff", a, a)[0] == 0
    code, out, _ = run(capsys, "diff", a, b)
    assert code == 1 and out.splitlines() == [
        "HDU 0 (PRIMARY) row 1 column DATA: [[4.0, 5.0, 6.0, 7.0]] vs [[4.0, 5.0, 99.0, 7.0]]"]
    code, out, _ = run(capsys, "diff", b, c)
    assert code == 1 and out.splitlines() == ["HDU 0 (PRIMARY) row 2 column V: 2.0 vs 7.0"]


@pytest.mark.parametrize("value, atol", [(6.5, 1), (9.0, 1), (6.5, 0)])
def test_random_groups_tolerances_agree_with_fitsdiff(value, atol, tmp_path, capsys):
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    groups(6.0)(str(a))
    groups(value)(str(b))
    identical = fits.FITSDiff(str(a), str(b), atol=atol).identical
    assert run(capsys, "diff", a, b, "--atol", str(atol))[0] == (0 if identical else 1)


def test_bad_arguments_exit_2_and_missing_files_3(tmp_path, capsys):
    a = tmp_path / "a.fits"
    image(RAMP)(str(a))
    for argv in (("--rtol", "-1"), ("--atol", "nan"), ("--max-diffs", "-2"), ("--rtol", "x")):
        code, _, err = run(capsys, "diff", a, a, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, argv
    code, _, err = run(capsys, "diff", f"{a}[0]", a)
    assert code == 2 and "whole files" in err
    code, _, err = run(capsys, "diff", a, tmp_path / "nope.fits")
    assert code == 3 and "nope.fits" in err


def logical_with_null(path):
    """A logical column whose third cell is stored as 0x00 (null), the others T/F."""
    fits.BinTableHDU.from_columns(
        [fits.Column(name="f", format="L", array=np.array([True, False, False]))]).writeto(path)
    from torchfits.fits.hdu_index import get_index

    entry = get_index(path).entries[1]
    with open(path, "rb") as fh:
        raw = bytearray(fh.read())
    raw[entry.data_offset + 2] = 0
    with open(path, "wb") as fh:
        fh.write(bytes(raw))


def logical_false(path):
    fits.BinTableHDU.from_columns(
        [fits.Column(name="f", format="L", array=np.array([True, False, False]))]).writeto(path)


def vla_with_nan(path):
    col = fits.Column(name="v", format="PD()", array=np.array([np.array([1.0, np.nan])], dtype=object))
    fits.BinTableHDU.from_columns([col]).writeto(path)


def groups(value):
    """A writer of a random-groups file whose element [1, 0, 2] is ``value``."""
    def write(path):
        data = fits.GroupData(np.arange(12, dtype=np.float32).reshape(3, 1, 4), parnames=["U"],
                              pardata=[np.arange(3.0)], bitpix=-32)
        data.data[1, 0, 2] = value
        fits.GroupsHDU(data).writeto(path)
    return write


# (id, a, b, options, FITSDiff's identical, ours) where docs/cli.md says we choose otherwise
DIVERGENCES = [
    ("NaN vs inf", image(ramp(p0_0=np.nan)), image(ramp(p0_0=np.inf)), {}, True, False),
    ("NaN in a VLA", vla_with_nan, vla_with_nan, {}, False, True),
    ("ignored keyword in one file", image(RAMP), image(RAMP, FOO=1), {"ignore_keywords": ["FOO"]},
     False, True),
    ("null logical vs F", logical_with_null, logical_false, {}, True, False),
    ("T vs 1", image(RAMP, X=True), image(RAMP, X=1), {}, True, False),
    # astropy takes |b - a| in int16, where 5 - (-32763) wraps to -32768: a difference it misses
    ("int16 wrap-around", image(ramp(p0_0=5).astype(np.int16)),
     image(ramp(p0_0=-32763).astype(np.int16)), {}, True, False),
]


@pytest.mark.parametrize("case", DIVERGENCES, ids=[d[0] for d in DIVERGENCES])
def test_documented_divergences_from_fitsdiff(case, tmp_path, capsys):
    name, build_a, build_b, opts, fitsdiff_says, we_say = case
    a, b = tmp_path / "a.fits", tmp_path / "b.fits"
    build_a(str(a))
    build_b(str(b))
    with warnings.catch_warnings():  # astropy warns that it reads the null logical as False
        warnings.simplefilter("ignore")
        assert fits.FITSDiff(str(a), str(b), **opts).identical is fitsdiff_says
    assert run(capsys, "diff", a, b, *_argv(opts))[0] == (0 if we_say else 1)

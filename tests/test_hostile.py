"""Hostile input: truncated, malformed and non-FITS files.

Every read either succeeds (for what is wholly present) or raises a FitsError subclass naming the
file -- never a crash.  Each group of reads runs in one child interpreter, so a SIGBUS/SIGSEGV
shows up as a non-zero return code instead of killing pytest.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from _oracles import (
    BLOCK,
    card,
    hdu_offsets,
    header_bytes,
    image_header_cards,
    pad_block,
    value_card,
)

CHILD = textwrap.dedent(r'''
    import hashlib, json, sys, time
    import numpy as np
    import torchfits
    from torchfits.errors import FitsError

    def digest(x):
        if isinstance(x, np.ndarray):
            sha1 = hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest()
            return "nd:%s:%s:%s" % (x.dtype.str, x.shape, sha1)
        if hasattr(x, "numpy") and hasattr(x, "dtype"):
            return digest(x.detach().cpu().numpy())
        if isinstance(x, torchfits.Header):
            return "hdr:" + repr([tuple(c) for c in x.cards])
        if isinstance(x, list):
            return "list:" + repr([repr(getattr(i, "__dict__", i)) for i in x])
        return "val:" + repr(x)

    def op_read_header(p, h): return torchfits.read_header(p, h)
    def op_read_numpy(p, h): return torchfits.read_numpy(p, h)
    def op_slice(p, h):
        img = torchfits.open_image(p, h)
        return img[..., :1] if len(img.shape) else img.read()
    def op_info(p, h): return [(i.index, i.kind, tuple(i.shape or ())) for i in torchfits.info(p)]
    def op_num_hdus(p, h): return torchfits.read_num_hdus(p)
    def op_read_shape(p, h): return torchfits.read_shape(p, h)
    def op_hdu_type(p, h): return torchfits.read_hdu_type(p, h)
    def op_read(p, h): return torchfits.read(p, h)
    def op_read_tensor(p, h): return torchfits.read_tensor(p, h)
    def op_open(p, h):
        with torchfits.open(p) as hl:
            return [hdu.__class__.__name__ for hdu in hl]
    def op_read_subset(p, h): return torchfits.read_subset(p, h, 0, 0, 2, 2)
    OPS = {k[3:]: v for k, v in globals().items() if k.startswith("op_")}

    cases = json.load(sys.stdin)
    results = []
    for case in cases:
        path = case["path"]
        for name, hdu in case["ops"]:
            torchfits.clear_file_cache()
            t0 = time.perf_counter()
            try:
                r = OPS[name](path, hdu)
                res = {"ok": True, "digest": digest(r)}
            except BaseException as e:
                res = {"ok": False, "type": type(e).__name__,
                       "mro": [c.__name__ for c in type(e).__mro__],
                       "fits": isinstance(e, FitsError), "msg": str(e)}
            res.update(path=path, op=name, hdu=hdu, seconds=time.perf_counter() - t0)
            results.append(res)
    json.dump(results, sys.stdout)
''')


def run_child(cases, timeout=120, block_torch=False):
    """Run ``cases`` ([{"path", "ops": [[op, hdu], ...]}]) in a fresh interpreter."""
    code = ("import sys; sys.modules['torch'] = None\n" if block_torch else "") + CHILD
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=timeout, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == 0, f"child died (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def assert_fits_failure(res, *mro_names):
    """The op raised a FitsError that names the file (and each of ``mro_names`` is in its MRO)."""
    assert not res["ok"], f"{res['op']}({res['hdu']}) on {res['path']} unexpectedly succeeded"
    assert res["fits"], f"{res['op']}({res['hdu']}) raised non-FitsError {res['type']}: {res['msg']}"
    assert os.path.basename(res["path"]) in res["msg"], f"message does not name the file: {res['msg']}"
    for n in mro_names:
        assert n in res["mro"], f"{res['type']} is not a {n}: {res['msg']}"


# ------------------------------------------------------------------------------------------
# truncation of a valid multi-HDU file at every block boundary and at odd offsets
# ------------------------------------------------------------------------------------------

NATIVE_HDU_OPS = ["read_header", "read_numpy", "slice", "read_shape", "hdu_type"]
FILE_OPS = ["info", "num_hdus"]


@pytest.fixture
def multi_hdu_file(tmp_path, fits):
    rng = np.random.default_rng(1)
    hdus = fits.HDUList([
        fits.PrimaryHDU(rng.integers(-1000, 1000, size=(10, 300)).astype(np.int16)),
        fits.ImageHDU(rng.standard_normal((50, 50)).astype(np.float32), name="FLT"),
        fits.BinTableHDU.from_columns([fits.Column(name="A", format="D", array=np.arange(500.0))],
                                      name="TAB"),
        fits.ImageHDU(rng.integers(0, 2**31 - 1, size=(30, 40)).astype(np.int32), name="INT"),
    ])
    hdus[0].header["BSCALE"] = 0.5
    hdus[0].header["BZERO"] = 10.0
    path = tmp_path / "multi.fits"
    hdus.writeto(path)
    return path


def _cut_offsets(offs, size):
    cuts = set(range(0, size, BLOCK))
    for o in offs:
        hs, ds, dz = o["header_start"], o["data_start"], o["data_size"]
        cuts |= {hs + 1, hs + 79, hs + 80, hs + 2881 if ds - hs > 2880 else hs + 1000,
                 ds + 1, ds + dz // 2, ds + dz - 1, ds + dz, ds + dz + 1}
    return sorted(c for c in cuts if 0 <= c < size)


def test_truncated_everywhere(multi_hdu_file, tmp_path):
    data = multi_hdu_file.read_bytes()
    offs = hdu_offsets(multi_hdu_file)
    n = len(offs)
    cuts = _cut_offsets(offs, len(data))
    # HDU 2 is a table: only the header-level ops apply to it
    ops = [[op, k] for k in range(n) for op in (NATIVE_HDU_OPS if k != 2 else ["read_header", "hdu_type"])]
    ops += [[op, 0] for op in FILE_OPS]
    cases = [{"path": str(multi_hdu_file), "ops": ops}]
    names = {}
    for c in cuts:
        p = tmp_path / f"cut_at_{c}.fits"
        p.write_bytes(data[:c])
        names[str(p)] = c
        cases.append({"path": str(p), "ops": ops})
    results = run_child(cases)
    intact = {(r["op"], r["hdu"]): r for r in results if r["path"] == str(multi_hdu_file)}
    assert all(r["ok"] for r in intact.values()), [r for r in intact.values() if not r["ok"]]

    for r in results:
        if r["path"] not in names:
            continue
        c = names[r["path"]]
        good = intact[(r["op"], r["hdu"])]
        if r["op"] in FILE_OPS:
            if r["ok"]:
                if r["op"] == "num_hdus":
                    assert int(r["digest"][4:]) <= n
            else:
                assert_fits_failure(r)
            continue
        o = offs[r["hdu"]]
        wholly_present = o["data_end"] <= c
        header_present = o["data_start"] <= c
        data_present = o["data_start"] + o["data_size"] <= c
        if wholly_present:
            assert r["ok"], f"cut {c}: {r['op']}({r['hdu']}) failed although the HDU is intact: {r}"
            assert r["digest"] == good["digest"], f"cut {c}: {r['op']}({r['hdu']}) wrong result"
        elif not header_present:
            if r["op"] in ("read_header", "read_shape", "hdu_type") and c >= o["end_card"] + 80 and r["ok"]:
                # the END card is on disk (only the blank rest of the block is cut): reading the
                # header alone may succeed, but then correctly
                assert r["digest"] == good["digest"], f"cut {c}: {r['op']}({r['hdu']}) wrong result"
            else:
                assert_fits_failure(r)
        elif r["op"] in ("read_header", "read_shape", "hdu_type") or data_present:
            # only the header is needed (or every data byte is there, padding cut): fine either way
            if r["ok"]:
                assert r["digest"] == good["digest"], f"cut {c}: {r['op']}({r['hdu']}) wrong result"
            else:
                assert_fits_failure(r)
        elif r["op"] == "read_numpy":
            assert_fits_failure(r, "TruncatedFileError")
            assert "truncated" in r["msg"].lower()
            rest = r["msg"].replace(r["path"], "").replace(os.path.basename(r["path"]), "")
            assert str(r["hdu"]) in rest, f"message does not name HDU {r['hdu']}: {r['msg']}"
        else:  # the first row of the image may or may not be on disk
            if r["ok"]:
                assert r["digest"] == good["digest"], f"cut {c}: slice of HDU {r['hdu']} wrong"
            else:
                assert_fits_failure(r)


def test_truncated_compat(multi_hdu_file, tmp_path, torch):
    """The tensor entry points on truncated files: FitsError that is also a RuntimeError."""
    data = multi_hdu_file.read_bytes()
    offs = hdu_offsets(multi_hdu_file)
    cuts = [offs[1]["data_start"] + 7, offs[3]["data_start"] + 100, offs[1]["header_start"] + 500,
            len(data) - 1]
    cases = [{"path": str(multi_hdu_file), "ops": [["read", 1], ["read_tensor", 3], ["read_subset", 3]]}]
    for c in cuts:
        p = tmp_path / f"tc_{c}.fits"
        p.write_bytes(data[:c])
        cases.append({"path": str(p), "ops": [["read", 1], ["read_tensor", 3], ["read_subset", 3],
                                              ["open", 0]]})
    results = run_child(cases)
    first = {(r["op"], r["hdu"]): r for r in results[:3]}
    assert all(r["ok"] for r in first.values())
    for r in results[3:]:
        c = int(os.path.basename(r["path"])[3:-5])
        if r["op"] == "open":
            if not r["ok"]:
                assert_fits_failure(r, "RuntimeError")
            continue
        o = offs[r["hdu"]]
        if o["data_end"] <= c:
            assert r["ok"] and r["digest"] == first[(r["op"], r["hdu"])]["digest"]
        elif o["data_start"] + o["data_size"] <= c and r["ok"]:  # only padding is missing
            assert r["digest"] == first[(r["op"], r["hdu"])]["digest"]
        else:
            assert_fits_failure(r, "RuntimeError")


# ------------------------------------------------------------------------------------------
# malformed and non-FITS files
# ------------------------------------------------------------------------------------------

def _img(bitpix, dims_cards, data=b"", primary=True, extra=()):
    cards = [value_card("SIMPLE", "T") if primary else value_card("XTENSION", "'IMAGE   '"),
             value_card("BITPIX", str(bitpix))]
    cards += [card(c) if isinstance(c, str) else c for c in dims_cards]
    cards += [card(c) for c in extra]
    return header_bytes(cards) + pad_block(data)


def _malformed_files(tmp_path):
    """name → (path, what read_numpy must raise: list of MRO names)."""
    rng = np.random.default_rng(9)
    good = _img(16, ["NAXIS   =                    2", "NAXIS1  =                    4",
                     "NAXIS2  =                    3"], np.arange(12, dtype=">i2").tobytes())
    files = {}

    def add(name, content, must):
        p = tmp_path / f"{name}.fits"
        p.write_bytes(content)
        files[name] = (p, must)

    no_end = b"".join(image_header_cards(16, (3, 4))) + card("COMMENT x") * 60
    add("no_end", pad_block(no_end, b" "), ["FitsError"])
    add("no_end_then_binary", pad_block(no_end, b" ") + bytes(range(256)) * 40, ["FitsError"])
    add("garbage", rng.integers(0, 256, size=2 * BLOCK, dtype=np.uint8).tobytes(), ["NotFitsError"])
    add("empty", b"", ["FitsError", "OSError", "RuntimeError"])
    add("text", b"this is a plain text file, not FITS\n" * 200, ["NotFitsError"])
    add("short_first_block", good[:100], ["FitsError"])
    add("naxis1_negative", _img(16, ["NAXIS   =                    2", "NAXIS1  =                   -5",
                                     "NAXIS2  =                    3"], bytes(100)), ["CorruptHeaderError"])
    add("naxis1_float", _img(16, ["NAXIS   =                    2", "NAXIS1  =                  5.5",
                                  "NAXIS2  =                    3"], bytes(100)), ["CorruptHeaderError"])
    add("naxis1_string", _img(16, ["NAXIS   =                    2", "NAXIS1  = 'abc'",
                                   "NAXIS2  =                    3"], bytes(100)), ["CorruptHeaderError"])
    add("naxis2_missing", _img(16, ["NAXIS   =                    2", "NAXIS1  =                    4"],
                               bytes(100)), ["CorruptHeaderError"])
    add("naxis_negative", _img(16, ["NAXIS   =                   -1"]), ["CorruptHeaderError"])
    add("naxis_1000", _img(8, ["NAXIS   =                 1000"]
                           + [f"NAXIS{i:<3d}=                    1" for i in range(1, 1000)]),
        ["CorruptHeaderError"])
    add("bitpix_12", _img(12, ["NAXIS   =                    1", "NAXIS1  =                    4"],
                          bytes(8)), ["CorruptHeaderError"])
    add("bitpix_missing", header_bytes([value_card("SIMPLE", "T"), value_card("NAXIS", "0")]),
        ["CorruptHeaderError"])
    huge = str(2**40)
    add("naxis_2pow40_squared", _img(8, ["NAXIS   =                    2", f"NAXIS1  = {huge:>20}",
                                         f"NAXIS2  = {huge:>20}"], bytes(100)), ["FitsError"])
    add("naxis_int64_overflow", _img(-64, ["NAXIS   =                    3"]
                                     + [f"NAXIS{i}  = {2**31:>20}" for i in (1, 2, 3)], bytes(100)),
        ["FitsError"])
    add("naxis_2pow20_squared", _img(8, ["NAXIS   =                    2", f"NAXIS1  = {2**20:>20}",
                                         f"NAXIS2  = {2**20:>20}"], bytes(100)), ["FitsError"])
    add("non_ascii_header", good[:200] + bytes([0xFF, 0xFE]) * 40 + good[280:], ["FitsError"])
    # primary fine, extension header garbage
    add("bad_extension", good + pad_block(b"XTENSION= 'FOO' \x00\x01" + bytes(range(200))),
        ["FitsError"])
    add("extension_huge_gcount", good + _img(8, ["NAXIS   =                    1",
                                                 "NAXIS1  =                   10"],
                                             primary=False, extra=["PCOUNT  =                    0",
                                                                   f"GCOUNT  = {2**62:>20}"]),
        ["FitsError"])
    add("bintable_huge_pcount", good + header_bytes([
        value_card("XTENSION", "'BINTABLE'"), value_card("BITPIX", "8"), value_card("NAXIS", "2"),
        value_card("NAXIS1", "8"), value_card("NAXIS2", "2"), value_card("PCOUNT", str(2**50)),
        value_card("GCOUNT", "1"), value_card("TFIELDS", "1"), card("TFORM1  = '1PE(3)  '")])
        + pad_block(bytes(16)), ["FitsError"])
    return files


def test_malformed_files(tmp_path):
    files = _malformed_files(tmp_path)
    cases = [{"path": str(p), "ops": [["read_header", 0], ["read_numpy", 0], ["slice", 0], ["info", 0],
                                      ["num_hdus", 0], ["read_shape", 0], ["read_header", 1],
                                      ["read_numpy", 1]]}
             for p, _ in files.values()]
    results = run_child(cases, block_torch=True)
    by = {}
    for r in results:
        by.setdefault(os.path.basename(r["path"])[:-5], []).append(r)
    assert set(by) == set(files)
    for name, rs in by.items():
        must = files[name][1]
        for r in rs:
            assert r["ok"] or r["fits"], f"{name}: {r['op']} raised {r['type']}: {r['msg']}"
            if not r["ok"]:
                assert_fits_failure(r)
            assert r["seconds"] < 30, f"{name}: {r['op']} took {r['seconds']:.0f} s"
        r0 = next(r for r in rs if r["op"] == "read_numpy" and r["hdu"] == 0)
        if name in ("bad_extension", "extension_huge_gcount", "bintable_huge_pcount"):
            # the primary is intact: reading it succeeds, or (an index that walks every header
            # first) fails with an error that names the corrupt HDU 1
            if r0["ok"]:
                assert r0["digest"].startswith("nd:<i2:(3, 4):"), r0
            else:
                assert "1" in r0["msg"].replace(r0["path"], ""), r0["msg"]
            r1 = next(r for r in rs if r["op"] == "read_numpy" and r["hdu"] == 1)
            assert_fits_failure(r1)
            continue
        assert_fits_failure(r0, *must)
        if name in ("naxis_2pow40_squared", "naxis_int64_overflow", "naxis_2pow20_squared"):
            assert ("NAXIS product overflow" in r0["msg"]) or ("truncated" in r0["msg"].lower()), r0["msg"]
        if name == "naxis_int64_overflow":
            assert "NaxisOverflowError" in r0["mro"], r0
        if name in ("garbage", "text", "empty"):
            rh = next(r for r in rs if r["op"] == "read_header" and r["hdu"] == 0)
            assert_fits_failure(rh, "OSError")


def test_malformed_files_compat(tmp_path, torch):
    files = _malformed_files(tmp_path)
    picked = ["garbage", "text", "empty", "no_end", "naxis_int64_overflow", "bitpix_12", "naxis1_negative"]
    cases = [{"path": str(files[n][0]), "ops": [["read", 0], ["read_tensor", 0], ["open", 0]]}
             for n in picked]
    results = run_child(cases)
    for r in results:
        assert_fits_failure(r, "RuntimeError")
        if r["op"] == "open":
            assert "Failed to open FITS file" in r["msg"], r["msg"]
        if "naxis_int64_overflow" in r["path"] and r["op"] != "open":
            assert "NAXIS product overflow" in r["msg"], r["msg"]


def test_directory_and_unreadable_paths(tmp_path):
    d = tmp_path / "adir.fits"
    d.mkdir()
    results = run_child([{"path": str(d), "ops": [["read_header", 0], ["read_numpy", 0], ["info", 0]]}],
                        block_torch=True)
    for r in results:
        assert_fits_failure(r, "OSError")


@pytest.mark.parametrize("path", ["data.fits|gzip -d", "!out.fits", "SHELL://ls", "Exec:rm",
                                  "mem://x", "stdin", "-", "a$(id).fits", "a`id`.fits"])
def test_command_like_paths_are_refused_with_security_error(tmp_path, path):
    import numpy as np

    import torchfits
    from torchfits.errors import UnsafePathError

    for call in (lambda: torchfits.read(path), lambda: torchfits.read_header(path),
                 lambda: torchfits.open(path), lambda: torchfits.scan(path),
                 lambda: torchfits.write(path, np.zeros(2))):
        with pytest.raises(UnsafePathError, match="Security Error") as info:
            call()
        assert isinstance(info.value, (ValueError, RuntimeError, OSError))


def test_images_with_more_axes_than_numpy_holds_are_refused(tmp_path):
    import torchfits
    from torchfits.errors import TooManyAxesError

    def image(naxis):
        cards = ["SIMPLE  =                    T", "BITPIX  =                    8",
                 f"NAXIS   = {naxis:>20}"] + [f"NAXIS{i:<3d}= {1:>20}" for i in range(1, naxis + 1)]
        raw = b"".join(c.ljust(80).encode() for c in cards + ["END"])
        path = tmp_path / f"ax{naxis}.fits"
        path.write_bytes(raw + b" " * (-len(raw) % 2880) + bytes(2880))
        return str(path)

    assert torchfits.read_numpy(image(64)).shape == (1,) * 64
    many = image(70)
    for call in (lambda: torchfits.read_numpy(many), lambda: torchfits.read(many),
                 lambda: torchfits.open_image(many)):
        with pytest.raises(TooManyAxesError, match="has 70 axes; NumPy arrays and tensors hold at most 64"):
            call()
    assert torchfits.read_shape(many)[1] == (1,) * 70  # the header alone still answers

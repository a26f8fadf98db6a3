"""The torch boundary: torch (and pyarrow) stay out of the process until a tensor is asked for;
tensors handed out are independent of any cache."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import torchfits
from _oracles import write_image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_fresh(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter (cwd = repo root); return stdout; fail on rc != 0."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:{proc.stdout}\nstderr:{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture
def files(tmp_path, fits):
    img = write_image(tmp_path / "img.fits", np.arange(20 * 30, dtype=np.int16).reshape(20, 30),
                      bitpix=16, bscale=0.5, bzero=3.0, extension=True, extname="SCI")
    u8 = write_image(tmp_path / "u8.fits", (np.arange(12) * 7 % 256).reshape(3, 4), bitpix=8)
    tab = tmp_path / "tab.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="A", format="J", array=np.arange(4)),
         fits.Column(name="B", format="8A", array=np.array(["w", "x", "y", "z"]))], name="T")]
    ).writeto(tab)
    return img, u8, tab


NATIVE_CALLS = r'''
    import sys
    img, u8, tab = sys.argv[1:4]
    import numpy as np
    import torchfits
    h = torchfits.read_header(img, 1)
    assert h["EXTNAME"] == "SCI", h
    assert torchfits.read_header(img, "sci")["NAXIS1"] == 30
    assert torchfits.read_keys(img, ["NAXIS1", "NAXIS2"], 1) == {"NAXIS1": 30, "NAXIS2": 20}
    assert torchfits.read_num_hdus(img) == 2
    assert torchfits.read_hdu_type(img, 1) == "IMAGE"
    assert torchfits.read_shape(img, 1) == (16, (20, 30))
    assert torchfits.read_extname(img, 1) == "SCI"
    assert torchfits.read_nrows(tab, 1) == 4
    assert torchfits.read_colnames(tab, 1) == ["A", "B"]
    assert torchfits.read_table_info(tab, 1)["tforms"] == ["J", "8A"]
    assert [i.kind for i in torchfits.info(img)] == ["primary", "image"]
    expected = np.arange(600, dtype=np.float64).reshape(20, 30) * 0.5 + 3.0
    a = torchfits.read_numpy(img, 1)
    assert a.dtype == np.float32 and np.array_equal(a, expected.astype(np.float32))
    im = torchfits.open_image(img, "SCI")
    assert im.shape == (20, 30)
    assert np.array_equal(im[2:5, ::3], expected.astype(np.float32)[2:5, ::3])
    assert np.array_equal(im.read(), a)
    assert torchfits.read_numpy(u8).dtype == np.uint8
    hh = torchfits.Header([("A", 1)])
    hh["B"] = 2
    assert hh.tostring()
    torchfits.get_cache_performance()
    torchfits.clear_file_cache()
    torchfits.cache.get_cache_stats()
'''


def test_native_api_works_with_torch_blocked(files):
    code = (textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any `import torch` now raises ImportError
    """) + textwrap.dedent(NATIVE_CALLS) + textwrap.dedent("""
        assert sys.modules["torch"] is None
        print("OK")
    """))
    out = run_fresh(code, *files)
    assert out.strip().endswith("OK")


def test_native_api_does_not_import_torch(files):
    code = textwrap.dedent(NATIVE_CALLS) + textwrap.dedent("""
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
    """)
    out = run_fresh(code, *files)
    assert out.strip() == "[]"


def test_import_and_read_header_leave_out_numpy_torch_and_pyarrow(files):
    # Header work is the start-up path (docs/architecture.md, "Start-up"): NumPy alone costs
    # more than the whole torchfits process, dataclasses ~10 ms, and the compressed/remote
    # source modules (tempfile, socket) are for other sources, so none of them may load.
    out = run_fresh("""
        import sys
        import torchfits
        bare = [m for m in ("numpy", "torch", "pyarrow", "torchfits._kernels._image",
                            "torchfits._kernels._header") if m in sys.modules]
        h = torchfits.read_header(sys.argv[1], 1)
        assert h["EXTNAME"] == "SCI"
        after = [m for m in ("numpy", "torch", "pyarrow", "dataclasses", "tempfile", "socket",
                             "torchfits.fits.sources.whole_file_compression", "torchfits.fits.sources.remote")
                 if m in sys.modules]
        print(bare, after)
    """, *files)
    assert out.strip() == "[] []"


def test_lazy_attribute_resolution_is_thread_safe():
    out = run_fresh("""
        import sys, threading
        import torchfits
        names = ["read_header", "Header", "Card", "open_image", "read_numpy", "info", "read_keys",
                 "read_shape", "get_cache_performance", "read_num_hdus", "errors"]
        got, errors = [], []
        barrier = threading.Barrier(16)
        def work():
            barrier.wait()
            try:
                got.append(tuple(id(getattr(torchfits, n)) for n in names))
            except BaseException as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=work) for _ in range(16)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(len(set(got)), len(got), errors)
    """)
    assert out.strip() == "1 16 []"


def test_unknown_root_attribute():
    with pytest.raises(AttributeError):
        _ = torchfits.no_such_function_anywhere


# ------------------------------------------------------------------------------------------
# with torch available
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", [0, 1], ids=["scaled-int16", "uint8-zero-copy"])
def test_read_tensor_is_writable_and_independent(files, torch, which):
    path = files[which]
    hdu = 1 if which == 0 else 0
    t = torchfits.read(path, hdu)
    ref = torchfits.read_numpy(path, hdu).copy()
    assert isinstance(t, torch.Tensor)
    assert np.array_equal(t.numpy(), ref)
    t.add_(1)  # in place: must be allowed, and must not reach the file cache
    again = torchfits.read(path, hdu)
    assert np.array_equal(again.numpy(), ref)
    assert again.data_ptr() != t.data_ptr()
    tt = torchfits.read_tensor(path, hdu)
    tt.zero_()
    assert np.array_equal(torchfits.read_tensor(path, hdu).numpy(), ref)
    assert np.array_equal(torchfits.read_numpy(path, hdu), ref)


def test_image_to_torch_is_independent(files, torch):
    img = torchfits.open_image(files[1])
    t = img.to_torch()
    ref = torchfits.read_numpy(files[1]).copy()
    t.fill_(0)
    assert np.array_equal(torchfits.read_numpy(files[1]), ref)
    assert np.array_equal(img[...], ref)


def test_read_into_out_tensor(files, torch):
    img = files[0]
    out = torch.full((20, 30), -1.0, dtype=torch.float32)
    ptr = out.data_ptr()
    res = torchfits.read(img, 1, out=out)
    assert res is out and res.data_ptr() == ptr
    assert np.array_equal(out.numpy(), torchfits.read_numpy(img, 1))
    out2 = torch.zeros((20, 30), dtype=torch.float32)
    res2 = torchfits.read_tensor(img, 1, out=out2)
    assert res2 is out2
    assert np.array_equal(out2.numpy(), torchfits.read_numpy(img, 1))
    with pytest.raises((ValueError, TypeError)):
        torchfits.read(img, 1, out=torch.zeros((20, 30), dtype=torch.float64))
    with pytest.raises((ValueError, TypeError)):
        torchfits.read(img, 1, out=torch.zeros((30, 20), dtype=torch.float32))

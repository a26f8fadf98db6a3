"""Shared fixtures: optional oracles behind importorskip, an isolated cache directory, and the
isolation the remote-read tests share."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# Under CI a skip because a package of the test extra (or torch, which the README's test command
# installs first) is missing is a failure: the run would otherwise pass without testing it.
_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_TEST_EXTRA = re.search(r"^test = \[(.*?)^\]", _PYPROJECT.read_text(), re.S | re.M)
TEST_EXTRA_MODULES = {"torch"} | {
    re.split(r"[\[<>=!~ ]", name, maxsplit=1)[0].lower().replace("-", "_")
    for name in re.findall(r'^\s*"([^"]+)"', _TEST_EXTRA.group(1) if _TEST_EXTRA else "", re.M)}
_MISSING = re.compile(r"could not import '([\w.]+)'|^([\w.]+) is not installed")


def _missing_test_extra(report) -> str | None:
    """The skip reason when ``report`` skipped for want of a test-extra package, under CI."""
    if not (report.skipped and os.environ.get("CI")) or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    match = _MISSING.search(reason)
    module = match and (match.group(1) or match.group(2))
    return reason if module and module.split(".")[0] in TEST_EXTRA_MODULES else None


def _fail_instead(report, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"CI: {reason} (the test extra must be installed)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    reason = _missing_test_extra(report)
    if reason:
        _fail_instead(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    report = (yield).get_result()
    reason = _missing_test_extra(report)
    if reason:
        _fail_instead(report, reason)


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path_factory, monkeypatch):
    """Keep any disk cache (and ``clear_all_caches``) inside a temporary directory."""
    root = tmp_path_factory.mktemp("torchfits-cache")
    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(root))
    monkeypatch.setenv("TORCHFITS_REMOTE_CACHE", str(root / "remote"))
    monkeypatch.setenv("TORCHFITS_SAMPLE_CACHE", str(root / "samples"))


@pytest.fixture
def isolated_remote(tmp_path, monkeypatch):
    """Remote reads with a private cache directory, no ambient permission for private hosts or
    credentials from the environment, and an empty open-file cache before and after."""
    import torchfits

    monkeypatch.setenv("TORCHFITS_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TORCHFITS_ALLOW_PRIVATE_HOSTS", "TORCHFITS_HTTP_TOKEN",
                 "TORCHFITS_HTTP_AUTHORIZATION"):
        monkeypatch.delenv(name, raising=False)
    torchfits.clear_file_cache()
    yield
    torchfits.clear_file_cache()


@pytest.fixture
def fits():
    """astropy.io.fits (an oracle); skips the test when astropy is not installed."""
    return pytest.importorskip("astropy.io.fits")


@pytest.fixture
def fitsio():
    """fitsio (an oracle); skips the test when fitsio is not installed."""
    return pytest.importorskip("fitsio")


@pytest.fixture
def torch():
    """torch; skips the test when torch is not installed."""
    return pytest.importorskip("torch")


@pytest.fixture(params=["libdeflate", "zlib"])
def inflater(request):
    """Run a GZIP-tile test through each inflater the kernel has: libdeflate (skipped when the
    build found none) and the zlib fallback."""
    from torchfits._kernels import _gziptiles

    if request.param == "libdeflate" and _gziptiles.libdeflate_version() is None:
        pytest.skip("built without libdeflate (install libdeflate-dev and rebuild)")
    previous = _gziptiles.use_libdeflate(request.param == "libdeflate")
    assert _gziptiles.inflater().startswith(request.param)
    yield request.param
    _gziptiles.use_libdeflate(previous)


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(20240611)


def build_mixed_fits(path, fits):
    """Empty primary, BINTABLE "TAB", ASCII TABLE "ASC", IMAGE "SCI", RICE_1 image "COMP"."""
    import numpy as np

    tab = fits.BinTableHDU.from_columns([
        fits.Column(name="ID", format="J", array=np.arange(5)),
        fits.Column(name="NAME", format="8A", array=np.array(["a", "bb", "c", "d", "e"])),
        fits.Column(name="VLA", format="PE()",
                    array=[np.arange(i + 1, dtype=np.float32) for i in range(5)]),
        fits.Column(name="BITS", format="12X", array=np.zeros((5, 12), bool)),
    ], name="TAB")
    asc = fits.TableHDU.from_columns([
        fits.Column(name="X", format="I6", array=np.arange(4)),
        fits.Column(name="S", format="A5", array=np.array(["q", "w", "e", "r"])),
    ], name="ASC")
    sci = fits.ImageHDU(np.arange(12, dtype=np.float32).reshape(3, 4), name="SCI")
    comp = fits.CompImageHDU(np.arange(24 * 25, dtype=np.int16).reshape(24, 25), name="COMP",
                             compression_type="RICE_1")
    fits.HDUList([fits.PrimaryHDU(), tab, asc, sci, comp]).writeto(path, overwrite=True)
    return path


@pytest.fixture
def mixed_fits(tmp_path, fits):
    """A file with every HDU kind (see :func:`build_mixed_fits`)."""
    return build_mixed_fits(tmp_path / "mixed.fits", fits)


try:  # CI replays a fixed set of examples so a landing never hinges on a lucky draw;
    from hypothesis import settings as _hypothesis_settings  # local runs keep exploring.

    _hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("CI"):
        _hypothesis_settings.load_profile("ci")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass

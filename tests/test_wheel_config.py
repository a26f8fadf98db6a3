"""The wheel configuration holds (issue 27): pyproject.toml's ``[tool.cibuildwheel]`` table builds
CPython 3.9-3.13 wheels on Linux, macOS and Windows, repairs each with its OS's bundler, and tests
each installed wheel with the demo and ``.ci/wheel_smoke.py``; ``.ci/run`` builds and tests a
Linux wheel after the README's test command.

cibuildwheel itself needs Docker to build here; its ``--print-build-identifiers`` does not, and
runs when ``cibuildwheel`` is on PATH (``.ci/wheel`` makes the same check with the cibuildwheel
it installs).
"""
from __future__ import annotations

import fnmatch
import shutil
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ["cp39", "cp310", "cp311", "cp312", "cp313"]
OSES = {"linux": "auditwheel repair", "macos": "delocate-wheel", "windows": "delvewheel repair"}


@pytest.fixture(scope="module")
def config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]


def _selected(config, identifier: str) -> bool:
    """Whether cibuildwheel's build/skip selectors keep ``identifier`` (e.g. cp39-win_amd64)."""
    def matches(selector: str) -> bool:
        return any(fnmatch.fnmatch(identifier, s) for s in selector.split())
    return matches(config["build"]) and not matches(config.get("skip", ""))


@pytest.mark.parametrize("platform", [
    "manylinux_x86_64", "manylinux_aarch64", "macosx_x86_64", "macosx_arm64", "win_amd64"])
def test_build_selectors_cover_cpython_3_9_to_3_13(config, platform):
    assert [p for p in PYTHONS if _selected(config, f"{p}-{platform}")] == PYTHONS
    for other in ("cp38", "cp314", "cp313t", "pp310"):
        assert not _selected(config, f"{other}-{platform}"), other


@pytest.mark.parametrize("platform", ["musllinux_x86_64", "manylinux_i686", "win32"])
def test_platforms_without_pyarrow_wheels_are_skipped(config, platform):
    assert not any(_selected(config, f"{p}-{platform}") for p in PYTHONS)


@pytest.mark.parametrize("os_name", sorted(OSES))
def test_each_os_repairs_and_tests_its_wheels(config, os_name):
    section = config[os_name]
    assert section["repair-wheel-command"].startswith(OSES[os_name])
    assert "{wheel}" in section["repair-wheel-command"] and "{dest_dir}" in section["repair-wheel-command"]
    test_command = section.get("test-command", config["test-command"])
    assert "torchfits demo" in test_command
    assert "python -I {project}/.ci/wheel_smoke.py" in test_command


def test_linux_wheels_bundle_libdeflate(config):
    linux = config["linux"]
    assert "libdeflate-devel" in linux["before-all"]
    assert linux["manylinux-x86_64-image"] == "manylinux_2_28"
    assert "--libdeflate" in linux["test-command"]


def test_the_smoke_script_is_there_and_not_a_test():
    script = ROOT / ".ci" / "wheel_smoke.py"
    assert script.is_file()
    assert "def test_" not in script.read_text()


def test_ci_builds_the_wheel_after_the_readme_test_command():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    readme_test = next(i for i, line in enumerate(lines) if line.endswith("python -m pytest -q -rs"))
    wheel = next(i for i, line in enumerate(lines) if ".ci/wheel" in line and not line.startswith("#"))
    assert wheel > readme_test


@pytest.mark.parametrize("platform", ["linux", "macos", "windows"])
def test_cibuildwheel_build_identifiers(platform):
    cibuildwheel = shutil.which("cibuildwheel")
    if cibuildwheel is None:
        pytest.skip("cibuildwheel not on PATH (.ci/wheel runs this check with it)")
    out = subprocess.run([cibuildwheel, "--print-build-identifiers", "--platform", platform],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert {i.split("-")[0] for i in out} == set(PYTHONS), out
    for bad in ("musllinux", "i686", "win32", "cp313t"):
        assert not any(bad in i for i in out), out


def test_the_sdist_carries_every_kernel_source(tmp_path):
    """An sdist holds every .pyx, .pxd and .h of cython_src/ (MANIFEST.in): without them pip
    would build it into a package with no kernels. Made here with setup.py's own sdist command
    (the kernels' generated .c files are up to date after the build, so nothing recompiles)."""
    import sys
    import tarfile

    done = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path),
                           "sdist", "-d", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {Path(n).name for n in tar.getnames() if "/cython_src/" in n}
    wanted = {p.name for p in (ROOT / "cython_src").iterdir() if p.suffix in (".pyx", ".pxd", ".h")}
    assert wanted and wanted <= names, sorted(wanted - names)

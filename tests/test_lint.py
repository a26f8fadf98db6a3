"""The lint rules in pyproject.toml hold: ``ruff check`` on the Python tree and ``cython-lint`` on
the Cython kernels report nothing.

Both tools are in the ``test`` extra; without them the checks skip, except under ``CI`` where a
missing linter is a failure.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CYTHON_SOURCES = sorted(p.name for p in (ROOT / "cython_src").glob("_*.p[xy][xd]"))
# cython-lint has no ``python -m`` entry point
CYTHON_LINT = "import sys; from cython_lint.cython_lint import main; sys.exit(main())"
# Packages another branch is editing; their ruff findings go in the lead's lint pass.


def _linter(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed (it is in the test extra)")
        pytest.skip(f"{module} is not installed")


def _run(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("paths", [
    pytest.param(["setup.py", "torchfits"], id="torchfits"),
    pytest.param(["tests", "benchmarks"], id="tests-benchmarks"),
])
def test_ruff(paths):
    _linter("ruff")
    _run(["-m", "ruff", "check", "--no-cache", *paths])


@pytest.mark.parametrize("name", CYTHON_SOURCES)
def test_cython_lint(name):
    _linter("cython_lint")
    _run(["-c", CYTHON_LINT, f"cython_src/{name}"])


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command verbatim, and that prints why tests skipped."""
    readme = (ROOT / "README.md").read_text().splitlines()
    command = next(line for line in readme if 'pip install -e ".[test]"' in line)
    assert command.endswith("python -m pytest -q -rs")
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()

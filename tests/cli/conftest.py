"""Shared by the command-line tests: the demo's sample files, a terminal-like stdin (paths come
from the arguments only; pytest's stdin is not a terminal). `run` lives in tests/_cli.py."""
import io
import sys

import pytest

from torchfits.cli.demo import make_sample_files


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    image, catalog = make_sample_files(str(d))
    return d, image, catalog


@pytest.fixture(autouse=True)
def _no_stdin(monkeypatch):
    class _Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", _Tty(""))


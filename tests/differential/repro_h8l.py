"""Finding H8-L, in the fitsio oracle, not in torchfits: reading generated ASCII tables with
``fitsio.read`` corrupts the heap; a few hundred examples in, the interpreter aborts with
"free(): invalid next size (fast)" / "Fatal Python error: Aborted" (seed 0 in seconds).
``readers=fitsio`` aborts; ``readers=torchfits`` reads 2,000 examples cleanly. The harness
therefore never asks fitsio about ASCII tables.  Run by hand::

    python -X faulthandler -m tests.differential.repro_h8l [examples] [seed] [readers]

``readers``: all (default), oracles, astropy, fitsio or torchfits.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' shared helpers

from .routes import fitsio_oracle  # noqa: E402
from .test_ascii import _astropy, _write, ascii_tables  # noqa: E402


def main(examples: int = 2000, at: int = 0, readers: str = "all") -> None:
    import torchfits

    @seed(at)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(table=ascii_tables())
    def run(table):  # type: ignore[no-untyped-def]
        cols, _, nrows = table
        with tempfile.TemporaryDirectory() as d:
            path = _write(Path(d) / "a.fits", cols, nrows)
            if readers in ("all", "oracles", "astropy"):
                _astropy(path)
            if readers in ("all", "oracles", "fitsio"):
                fitsio_oracle(path)
            if readers in ("all", "torchfits"):
                torchfits.scan(path, 1).to_arrow()

    run()
    print("no abort")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 2000, int(args[1]) if len(args) > 1 else 0,
         args[2] if len(args) > 2 else "all")

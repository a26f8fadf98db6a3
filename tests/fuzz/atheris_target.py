"""The atheris (libFuzzer) target: ``python -m tests.fuzz.atheris_target [libFuzzer flags] DIR``.

Run by the campaign (``python -m tests.fuzz --engine atheris``), not by hand. torchfits' Python
code is instrumented for coverage; inputs are mutated by the structure-aware mutators of
``tests/fuzz/mutators.py`` (most of the time) or by libFuzzer's byte-level mutator. Every input
is written to a file and read by every reader of ``tests/fuzz/reads.py``. The contract is the
campaign's: data or a ``FitsError``. Anything else ends the run with an artifact libFuzzer
writes: an uncaught exception (a bare exception, or ``MemoryError`` under the address-space
limit set on the first input), a timeout (``-timeout``), a crash (signal) or an RSS overrun
(``-rss_limit_mb``); the campaign replays each artifact in the supervised worker to classify it.
"""
from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import warnings

import atheris

# torchfits imports its modules lazily: the readers' modules are imported here, inside the
# instrumented block, so that their branches count as coverage.
_READERS = ["torchfits.fits.hdu_index", "torchfits.fits.header", "torchfits.fits.columns",
            "torchfits.image.plain", "torchfits.image.compressed", "torchfits.tables.decode",
            "torchfits.tables.scan", "torchfits.tables.source", "torchfits.compat.reads",
            "torchfits.compat.table", "torchfits.query.expr", "torchfits.query.pushdown"]
with atheris.instrument_imports(include=["torchfits"]):
    import importlib

    import torchfits
    from torchfits.errors import FitsError

    for _name in _READERS:
        importlib.import_module(_name)

import pyarrow  # noqa: E402,F401  (before the address-space limit: its allocator reserves space)

try:  # torchfits.read returns tensors
    import torch  # noqa: E402,F401
except ImportError:
    pass

from tests.fuzz.mutators import mutate  # noqa: E402
from tests.fuzz.reads import ops  # noqa: E402

HEADROOM = int(os.environ.get("TORCHFITS_FUZZ_HEADROOM", str(1 << 30)))
# Where the counts go (read by the campaign): files, reads and outcomes so far, rewritten every
# few inputs (libFuzzer may end the process without running exit handlers).
COUNTS = os.environ.get("TORCHFITS_FUZZ_COUNTS")
_PATH = os.path.join(tempfile.mkdtemp(prefix="tf-atheris-"), "input.fits")
_limited = False
_counts = {"files": 0, "reads": 0, "ok": 0, "fits_error": 0}


def _save_counts() -> None:
    if COUNTS:
        with open(COUNTS + ".tmp", "w") as fh:
            json.dump(_counts, fh)
        os.replace(COUNTS + ".tmp", COUNTS)


class ReadFinding(Exception):
    """A read broke the contract (raised so that libFuzzer saves the input)."""


def _limit_address_space() -> None:
    global _limited
    with open("/proc/self/statm") as fh:
        vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (vm + HEADROOM, vm + HEADROOM))
    _limited = True


def test_one_input(data: bytes) -> None:
    if not _limited:
        _limit_address_space()
    with open(_PATH, "wb") as fh:
        fh.write(data)
    _counts["files"] += 1
    for name, op in ops(_PATH):
        _counts["reads"] += 1
        try:
            torchfits.clear_file_cache()
            op()
            _counts["ok"] += 1
        except FitsError:
            _counts["fits_error"] += 1
        except (MemoryError, RecursionError) as exc:
            _save_counts()
            raise ReadFinding(f"{name}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a bare exception is what we look for
            _save_counts()
            raise ReadFinding(f"{name}: bare {type(exc).__name__}: {exc}") from exc
    if _counts["files"] % 32 == 0:
        _save_counts()


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if data and rng.random() < 0.75:
        out, _ = mutate(data, rng, rng.randint(1, 3))
    else:
        out = atheris.Mutate(data, max_size)
    return out[:max_size]


def main() -> None:
    warnings.simplefilter("ignore")
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

"""Hypothesis-driven mutation fuzzing, part of the normal suite (about 30 s).

Hypothesis picks a seed file, a mutation seed and a number of mutation rounds (bit flips,
truncation at any byte or block, lies on every structural keyword, duplicated cards, corrupt
words in descriptors and tiles); one supervised child interpreter reads each mutated file with
every reader under an address-space limit and a per-read timeout. Every read must return data or
raise a FitsError: a crash, a hang, a MemoryError or a bare exception fails the test with the
mutations that caused it. The longer campaign is ``python -m tests.fuzz --budget-s N``.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from .harness import Stats, Supervisor, build_corpus
from .mutators import mutate

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")
HealthCheck, given, settings = hypothesis.HealthCheck, hypothesis.given, hypothesis.settings


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-seeds")
    return [Path(p).read_bytes() for p in build_corpus(str(d))]


@pytest.fixture(scope="module")
def supervisor(tmp_path_factory):
    sup = Supervisor(str(tmp_path_factory.mktemp("fuzz-work")), read_timeout=10.0)
    yield sup
    sup.close()


def test_mutated_files_give_data_or_fits_errors(corpus, supervisor):
    stats = Stats()
    counter = {"i": 0}

    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(which=st.integers(0, len(corpus) - 1), seed=st.integers(0, 2**32 - 1),
           rounds=st.integers(1, 3))
    def one(which: int, seed: int, rounds: int) -> None:
        data, notes = mutate(corpus[which], random.Random(seed), rounds)
        before = len(stats.findings)
        supervisor.run_one(counter["i"], data, notes, stats)
        counter["i"] += 1
        new = stats.findings[before:]
        assert not new, "; ".join(f"{f.kind} in {f.op}: {f.detail} after {f.notes}" for f in new)

    one()
    assert stats.reads > 500

"""Hypothesis settings of the differential harness.

``TORCHFITS_DIFF_PROFILE=ci`` (the default) replays a fixed, derandomized set of examples sized so
the whole harness runs in about a minute on two cores; ``long`` explores with fresh random
examples, twenty times as many, for runs by hand (docs/reliability.md).
"""
from __future__ import annotations

import os
from typing import Any

PROFILE = os.environ.get("TORCHFITS_DIFF_PROFILE", "ci")
if PROFILE not in ("ci", "long"):  # pragma: no cover - a typo in the environment
    raise ValueError(f"TORCHFITS_DIFF_PROFILE must be 'ci' or 'long', not {PROFILE!r}")


def diff_settings(examples: int) -> Any:
    """A hypothesis ``settings`` decorator for a harness test that runs ``examples`` examples in
    the ``ci`` profile (derandomized, no example database) and 20 × as many in ``long``."""
    from hypothesis import HealthCheck, Phase, settings

    common: dict[str, Any] = dict(deadline=None, print_blob=True,
                                  suppress_health_check=list(HealthCheck))
    if PROFILE == "long":
        return settings(max_examples=20 * examples, derandomize=False, **common)
    # no shrinking in CI: a failure is reported as drawn (the blob replays it), in bounded time
    return settings(max_examples=examples, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate], **common)

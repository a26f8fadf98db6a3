"""Sizes set from the environment (docs/environment.md), read at each use and parsed once per
value: callers on hot paths ask once per chunk or per read."""
from __future__ import annotations

import os

__all__ = ["mib_from_env"]

_parsed: dict[str, tuple[str, int]] = {}  # variable -> (its last value, the bytes it gave)


def mib_from_env(name: str, default: int) -> int:
    """``$name`` as a number of MiB, in bytes (``inf``: 2^60), or ``default`` bytes when it is
    unset or empty.

    Raises
    ------
    ValueError
        The variable is not a number >= 0; the message names it.
    """
    env = os.environ.get(name, "").strip()
    if not env:
        return default
    seen = _parsed.get(name)
    if seen is not None and seen[0] == env:
        return seen[1]
    try:
        mib = float(env)
    except ValueError:
        mib = -1.0
    if not mib >= 0:  # NaN too
        raise ValueError(f"{name}={env!r}: expected a number of MiB >= 0 (default {default >> 20})")
    nbytes = int(min(mib, 1 << 40) * (1 << 20))
    _parsed[name] = (env, nbytes)
    return nbytes

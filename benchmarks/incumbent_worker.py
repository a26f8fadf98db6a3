"""Timing worker for torchfits 1.2.3, run with ``benchmarks/.venv-tf123/bin/python``.

Reads one JSON job (or ``{"jobs": [...]}``) from stdin, runs the timing loops here (so
interpreter start-up and ``import torch`` are not measured) and prints one JSON line:
samples plus a digest of the result, which the runner checks against astropy before
trusting the timings.

Jobs (all take ``path``, ``hdu`` or ``hdus``, ``repeat``):

- ``{"kind": "image_read", ...}``: ``torchfits.read(path, hdu=hdu)``.
- ``{"kind": "cutouts", "boxes": [[x1, y1, x2, y2], ...], ...}``: one
  ``open_subset_reader`` per job, every box read per repetition.
- ``{"kind": "headers", "hdus": [...], "cold": bool, ...}``: ``read_header`` of each
  HDU per repetition; ``cold`` clears the library's caches before each repetition.
- ``{"kind": "table_read", "columns": [...] | None, "where": str | None, ...}``:
  ``torchfits.table.read(path, hdu=hdu, columns=..., where=...)`` → ``pyarrow.Table``.
- ``{"kind": "table_read_torch", "columns": [...], ...}``:
  ``torchfits.table.read_torch(path, hdu=hdu, columns=...)`` → dict of tensors.

Table jobs check with :func:`table_digest` (per-column digests of normalised values) and
accept an optional ``budget_s`` (stop repeating once the samples add up to it).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

# The worker sits next to _harness; its directory is sys.path[0] when run as a script.
from _harness import Case, DigestStream, array_digest, measure_group


def _normalise(array: Any) -> Any:
    """One column as a contiguous native-order NumPy array; text as ``str`` without trailing
    blanks, at the width of its longest value (so equal strings compare equal whatever the
    width or bytes/str type a library chose)."""
    import numpy as np

    if hasattr(array, "detach"):  # torch.Tensor
        array = array.detach().cpu().numpy()
    array = np.asarray(array)
    if array.dtype.kind in "SUO":
        if array.dtype.kind == "S":
            array = np.char.decode(array, "ascii")
        text = np.char.rstrip(array.astype(str))
        width = int(np.char.str_len(text).max()) if text.size else 1
        return np.ascontiguousarray(text, dtype=f"U{max(width, 1)}")
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


def table_columns(result: Any) -> dict[str, Any]:
    """Name → normalised NumPy column of any library's table result, in column order.

    Accepts a ``pyarrow.Table`` (nulls are refused: the benchmark catalog has none), a dict
    of arrays or tensors, a NumPy structured array or an astropy ``Table``. Imports nothing
    beyond NumPy, so it runs in the 1.2.3 venv as well as in the dev venv.
    """
    import numpy as np

    if hasattr(result, "column_names") and hasattr(result, "column"):  # pyarrow.Table
        out = {}
        for name in result.column_names:
            column = result.column(name)
            if column.null_count:
                raise ValueError(f"column {name!r} has {column.null_count} nulls")
            out[name] = _normalise(column.to_numpy())
        return out
    if isinstance(result, dict):
        return {str(k): _normalise(v) for k, v in result.items()}
    if isinstance(result, np.ndarray) and result.dtype.names:
        return {name: _normalise(result[name]) for name in result.dtype.names}
    if hasattr(result, "colnames"):  # astropy Table
        return {name: _normalise(result[name]) for name in result.colnames}
    raise TypeError(f"cannot read columns out of {type(result).__name__}")


def table_digest(result: Any) -> dict[str, Any]:
    """Column names in order and an :func:`array_digest` per column of :func:`table_columns`."""
    columns = table_columns(result)
    return {"names": list(columns), "columns": {k: array_digest(v) for k, v in columns.items()}}


def _header_items(header: Any) -> list[list[Any]]:
    """Keyword/value pairs of a header, in order, without commentary cards."""
    return [[str(k), v] for k, v in header.items() if k not in ("", "COMMENT", "HISTORY")]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job; return samples, a correctness digest and the library version."""
    import torchfits

    kind = job["kind"]
    repeat = int(job["repeat"])
    path = job["path"]
    setup: Callable[[], Any] | None = None

    if kind == "image_read":
        hdu = int(job["hdu"])

        def fn() -> Any:
            return torchfits.read(path, hdu=hdu)

        if job.get("clear_cache", False):
            # Off by default: 1.2.3 keeps no decoded image between calls (checked), and
            # clearing would also drop the metadata its steady state relies on.
            setup = torchfits.clear_file_cache
        check = array_digest(fn())

    elif kind == "cutouts":
        reader = torchfits.open_subset_reader(path, int(job["hdu"]))
        boxes = [tuple(int(v) for v in box) for box in job["boxes"]]

        def fn() -> Any:
            return [reader(x1, y1, x2, y2) for x1, y1, x2, y2 in boxes]

        stream = DigestStream()
        for cutout in fn():
            stream.add(cutout)
        check = stream.result()

    elif kind == "headers":
        hdus = [int(h) for h in job["hdus"]]

        def fn() -> Any:
            return [torchfits.read_header(path, h) for h in hdus]

        if job.get("cold", False):
            setup = torchfits.clear_file_cache
        check = {"items": _header_items(fn()[-1])}

    elif kind in ("table_read", "table_read_torch"):
        from torchfits import table

        hdu = job.get("hdu", 1)
        columns = job.get("columns")
        if kind == "table_read":
            where = job.get("where")

            def fn() -> Any:
                return table.read(path, hdu=hdu, columns=columns, where=where)
        else:
            def fn() -> Any:
                return table.read_torch(path, hdu=hdu, columns=columns)

        check = table_digest(fn())

    else:
        raise ValueError(f"unknown job kind {kind!r}")

    case = Case(fn, setup, budget_s=job.get("budget_s"))
    timing = measure_group({kind: case}, repeat, warmup=int(job.get("warmup", 1)))[kind]
    return {"version": torchfits.__version__, "timing": timing.to_json(), "check": check}


def main() -> int:
    """Read the job(s) from stdin, print the JSON reply as the last stdout line."""
    job = json.loads(sys.stdin.read())
    reply: Any = [run_job(j) for j in job["jobs"]] if "jobs" in job else run_job(job)
    print(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())

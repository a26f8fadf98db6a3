"""Shared timing helpers for the torchfits benchmark runners.

Medians of repeated calls, interleaved case groups, a JSON worker subprocess for
libraries living in other venvs, whole-process wall clocks and markdown tables.
Stdlib only at import time, so the incumbent worker (another venv) can import it too.
"""

from __future__ import annotations

import gc
import hashlib
import json
import mmap
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent


# ---------------------------------------------------------------- timings


@dataclass
class Timing:
    """Wall-clock samples of one case, in seconds.

    Attributes
    ----------
    samples : list of float
        One entry per timed repetition.
    """

    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median sample (seconds); the figure every report quotes."""
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        """Fastest sample (seconds)."""
        return min(self.samples)

    @property
    def spread(self) -> float:
        """Relative interquartile range, a rough noise gauge (0 for < 4 samples)."""
        if len(self.samples) < 4:
            return 0.0
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median if self.median else 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain-data form for result files."""
        return {"median_s": self.median, "best_s": self.best, "n": len(self.samples),
                "samples_s": self.samples}


@dataclass
class Case:
    """One thing to time.

    Attributes
    ----------
    fn : callable
        The timed call. Its return value is held until the clock stops, so freeing a
        large result is not part of the measurement.
    setup : callable, optional
        Called before every repetition, outside the clock (e.g. clearing a cache).
    budget_s : float, optional
        Stop repeating this case once its samples add up to this many seconds
        (after ``min_repeat`` samples); keeps slow anchors from dominating a run.
    min_repeat : int
        Samples always taken, whatever the budget.
    """

    fn: Callable[[], Any]
    setup: Callable[[], Any] | None = None
    budget_s: float | None = None
    min_repeat: int = 3


def _time_once(case: Case) -> float:
    if case.setup is not None:
        case.setup()
    t0 = time.perf_counter()
    result = case.fn()
    elapsed = time.perf_counter() - t0
    del result
    return elapsed


def measure(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None,
            warmup: int = 1) -> Timing:
    """Time ``fn`` ``repeat`` times after ``warmup`` untimed calls.

    Parameters
    ----------
    fn : callable
        Call to time.
    repeat : int
        Timed repetitions.
    setup : callable, optional
        Called before every call (warm-up included), outside the clock.
    warmup : int, optional
        Untimed calls first, to pay one-off costs (imports, first page faults).

    Returns
    -------
    Timing
    """
    return measure_group({"_": Case(fn, setup)}, repeat, warmup)["_"]


def measure_group(cases: dict[str, Case], repeat: int, warmup: int = 1) -> dict[str, Timing]:
    """Time several cases in interleaved rounds.

    Each round times every case once, so slow drifts of a noisy machine (other
    tenants, frequency changes) spread over all cases instead of biasing whichever
    ran last; ratios within a group are then comparable.

    Parameters
    ----------
    cases : dict of str to Case
        Cases by label.
    repeat : int
        Rounds; a case with a ``budget_s`` may drop out earlier.
    warmup : int, optional
        Untimed calls per case before the first round.

    Returns
    -------
    dict of str to Timing
    """
    for case in cases.values():
        for _ in range(warmup):
            _time_once(case)
    timings = {label: Timing() for label in cases}
    active = list(cases)
    for _ in range(repeat):
        if not active:
            break
        gc.collect()  # collect between calls, never during one
        for label in list(active):
            case = cases[label]
            timings[label].samples.append(_time_once(case))
            spent = sum(timings[label].samples)
            enough = len(timings[label].samples) >= case.min_repeat
            if case.budget_s is not None and enough and spent > case.budget_s:
                active.remove(label)
    return timings


def time_processes(commands: Mapping[str, tuple[Sequence[str], Path | None]], runs: int, warmup: int = 2,
                   env: dict[str, str] | None = None) -> dict[str, Timing]:
    """Wall-clock whole processes, interleaved across runs.

    Parameters
    ----------
    commands : dict of str to (argv, cwd)
        Commands by label, each with its working directory (``None``: inherit).
    runs : int
        Timed runs of every command.
    warmup : int, optional
        Untimed runs first, so every command starts from a warm page cache.
    env : dict, optional
        Environment for the children (default: :func:`clean_env`).

    Returns
    -------
    dict of str to Timing

    Raises
    ------
    subprocess.CalledProcessError
        If a command fails; a failing command's time would mean nothing.
    """
    env = clean_env() if env is None else env
    timings = {label: Timing() for label in commands}
    for i in range(warmup + runs):
        for label, (argv, cwd) in commands.items():
            t0 = time.perf_counter()
            subprocess.run(list(argv), cwd=cwd, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            elapsed = time.perf_counter() - t0
            if i >= warmup:
                timings[label].samples.append(elapsed)
    return timings


# ------------------------------------------------------------ subprocesses


def clean_env() -> dict[str, str]:
    """Environment for child interpreters: ours minus anything that redirects imports."""
    env = dict(os.environ)
    # PYTHONDONTWRITEBYTECODE too: an installed package has its bytecode compiled, and a stale
    # cache under it would time the compiler on every start of an edited in-repo module.
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH",
                "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def run_worker(python: str | Path, script: str | Path, job: dict[str, Any], cwd: Path | None = None,
               timeout: float = 600.0) -> Any:
    """Run a JSON worker script under another interpreter and return its JSON reply.

    The job goes to the worker's stdin; the worker prints one JSON object as the last
    line of stdout. Timing loops run inside the worker, so interpreter start-up and
    imports are not measured.

    Parameters
    ----------
    python : path
        Interpreter (typically another venv's ``bin/python``).
    script : path
        Worker script.
    job : dict
        JSON-serialisable job description.
    cwd : Path, optional
        Working directory; pick one where ``import torchfits`` cannot find the
        in-repo package by accident (``python -c`` puts the cwd on ``sys.path``).
    timeout : float, optional
        Seconds before the worker is killed.

    Returns
    -------
    Any
        The worker's reply (decoded JSON).

    Raises
    ------
    RuntimeError
        If the worker fails or prints no JSON.
    """
    proc = subprocess.run([str(python), str(script)], input=json.dumps(job), capture_output=True,
                          text=True, cwd=cwd, env=clean_env(), timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed (rc={proc.returncode}) on job {job.get('kind')!r}:\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


# ------------------------------------------------------------ correctness


def array_digest(array: Any) -> dict[str, Any]:
    """Compact, comparable identity of an array's contents.

    Parameters
    ----------
    array : numpy.ndarray or torch.Tensor
        Anything ``numpy.asarray`` accepts (tensors go through ``.numpy()``).

    Returns
    -------
    dict
        ``dtype`` (native-order name), ``shape`` and ``sha256`` of the native-order
        bytes: equal digests mean bit-identical arrays.
    """
    import numpy as np

    if hasattr(array, "numpy") and not isinstance(array, np.ndarray):
        array = array.detach().cpu().numpy()
    array = np.asarray(array)
    native = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
    return {"dtype": native.dtype.name, "shape": list(native.shape),
            "sha256": hashlib.sha256(native.tobytes()).hexdigest()}


class DigestStream:
    """Incremental digest over a sequence of arrays (e.g. 1,000 cutouts, in order)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0
        self.dtypes: set[str] = set()
        self.shapes: set[tuple[int, ...]] = set()

    def add(self, array: Any) -> None:
        """Fold one array into the digest."""
        import numpy as np

        if hasattr(array, "numpy") and not isinstance(array, np.ndarray):
            array = array.detach().cpu().numpy()
        array = np.asarray(array)
        native = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
        self._hash.update(native.tobytes())
        self.count += 1
        self.dtypes.add(native.dtype.name)
        self.shapes.add(tuple(native.shape))

    def result(self) -> dict[str, Any]:
        """Digest of everything added so far."""
        return {"count": self.count, "dtypes": sorted(self.dtypes),
                "shapes": sorted(list(s) for s in self.shapes), "sha256": self._hash.hexdigest()}


def mapped_swap_copy(path: Path | str, code: str, count: int, offset: int) -> Any:
    """The floor of a read: map ``path`` afresh and copy the ``count`` big-endian items of type
    ``code`` (``"f4"``, ``"u2"``, ...) at byte ``offset`` out in little-endian order (a 1-D array)."""
    import numpy as np

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = np.frombuffer(mm, dtype=">" + code, count=count, offset=offset)
        out = view.astype("<" + code)
        del view  # the mmap cannot close while a view exports its buffer
    return out


def compare_digest(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """Explain how two digests differ, or return ``None`` if they match."""
    problems = [f"{key}: got {got.get(key)!r}, want {want[key]!r}"
                for key in want if key != "sha256" and got.get(key) != want[key]]
    if not problems and got.get("sha256") != want.get("sha256"):
        problems.append("same dtype and shape, different values")
    return "; ".join(problems) or None


# ---------------------------------------------------------------- report


def machine_info() -> dict[str, str]:
    """CPU model, core count, memory, OS, Python and the date (UTC)."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
                break
    except OSError:
        pass
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def fmt_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with sensible precision ('—' for missing)."""
    if seconds is None:
        return "—"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def fmt_ratio(value: float | None) -> str:
    """A ratio like ``1.23×`` ('—' for missing)."""
    return "—" if value is None else f"{value:.2f}×"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    """Render a GitHub-flavoured markdown table (readable as plain text too).

    Parameters
    ----------
    header : sequence of str
        Column titles.
    rows : iterable of sequences
        Cells, converted with ``str``.
    align : str, optional
        One character per column: ``l`` or ``r`` (default: first column left, rest right).

    Returns
    -------
    str
    """
    rows = [[str(cell) for cell in row] for row in rows]
    align = align or "l" + "r" * (len(header) - 1)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else (":" + "-" * (w + 1))
                          for w, a in zip(widths, align)) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in rows])


def log(*args: Any) -> None:
    """Progress to stderr (flushed), so stdout carries only the report."""
    print(*args, file=sys.stderr, flush=True)


def print_report(title: str, info: dict[str, str], versions: Mapping[str, str], lines: Sequence[str],
                 sections: Iterable[Any], targets: Sequence[Sequence[Any]]) -> None:
    """Print a runner's markdown report: the heading, the machine, the versions, ``lines`` (one
    bullet each), every section's ``render()`` and the table of targets."""
    print(f"## {title}\n")
    print(f"- date: {info['date']}")
    print(f"- machine: {info['cpu']}, {info['cores']} cores, {info['memory']} RAM, {info['os']}")
    print(f"- {info['python']}; " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for text in lines:
        print(f"- {text}")
    print()
    for sec in sections:
        print(sec.render())
        print()
    print("### Targets\n")
    print(markdown_table(["target", "case", "measured", "verdict"], targets, align="llrl"))


def sections_json(sections: Mapping[str, Any]) -> dict[str, Any]:
    """Plain-data form of report sections (``title``, ``floor`` and ``rows`` of label, status,
    note and timing), for the ``--json`` result files."""
    return {k: {"title": s.title, "floor": s.floor, "rows": [
        {"label": r.label, "status": r.status, "note": r.note,
         "timing": r.timing.to_json() if r.timing else None} for r in s.rows]}
        for k, s in sections.items()}


def emit(report: str, append: bool) -> None:
    """Print a report; with ``append``, add it to the end of docs/benchmarks.md too."""
    print(report)
    if append:
        with open(REPO_ROOT / "docs" / "benchmarks.md", "a", encoding="utf-8") as fh:
            fh.write(report)

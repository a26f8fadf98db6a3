"""Image and header benchmarks: torchfits (this repo) against its floor and incumbents.

Usage: ``python benchmarks/run_images.py [--repeat N] [--quick] [--json PATH]`` with the dev
venv, after ``bash benchmarks/setup_incumbent.sh`` (torchfits 1.2.3). About two minutes
with the defaults on two cores; ``--quick`` is a smoke run.

Every figure is a median of repetitions measured in this one run; ratios compare cases
of the same run. Each case's result is checked against astropy once before it is timed;
a case that crashes or returns different values is reported and not timed.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import mmap
import os
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402
from _harness import (  # noqa: E402
    BENCH_DIR,
    REPO_ROOT,
    Case,
    DigestStream,
    Timing,
    array_digest,
    clean_env,
    compare_digest,
    fmt_ms,
    fmt_ratio,
    log,
    machine_info,
    mapped_swap_copy,
    markdown_table,
    measure_group,
    print_report,
    run_worker,
    sections_json,
    time_processes,
)

NEW = "torchfits (new)"
BATCH = f"{NEW} Image.cutouts(boxes), one call"
INC = "torchfits 1.2.3"
INCUMBENT_PYTHON = BENCH_DIR / ".venv-tf123" / "bin" / "python"
INCUMBENT_WORKER = BENCH_DIR / "incumbent_worker.py"

CUTOUT_SIDE = 64
CUTOUT_SEED = 12345

# Targets: (key, description, limit, kind) — "max_ratio": time / reference ≤ limit;
# "min_speedup": reference / time ≥ limit.
TARGETS = [
    ("f32", "float32 full read ≤ 1.3× floor", 1.3, "max_ratio"),
    ("u16", "uint16 full read ≤ 1.5× floor", 1.5, "max_ratio"),
    ("cutouts", "1,000 cutouts ≥ 1.5× faster than 1.2.3's reader", 1.5, "min_speedup"),
    ("cutouts_batch", "1,000 cutouts in a public batched call ≥ 5× faster than 1.2.3's reader", 5.0,
     "min_speedup"),
    ("process", "import + header peek process ≤ 1.2× `python -c \"import numpy\"`", 1.2, "max_ratio"),
    # Cold metadata (issue 14): "the header of HDU 99 of a 100-HDU file, first call in a
    # process". The in-process "cold" rows (clear_file_cache() first) stood in for it until
    # the first call was timed itself; they stay in their section as a comparison.
    ("first_call", "cold metadata: first read_header of HDU 99 in a process ≤ 0.5× 1.2.3", 0.5,
     "max_ratio"),
]


# ------------------------------------------------------------------ results


@dataclass
class Row:
    """One measured (or not measurable) case of a section."""

    label: str
    timing: Timing | None = None
    status: str = "ok"  # ok | wrong | crash | missing
    note: str = ""


@dataclass
class Section:
    """A group of cases timed together, with the row its ratios divide by."""

    title: str
    rows: list[Row] = field(default_factory=list)
    floor: str | None = None
    per: str = "call"

    def row(self, label: str) -> Row | None:
        """The row called ``label`` (``None`` if absent)."""
        return next((r for r in self.rows if r.label == label), None)

    def median(self, label: str) -> float | None:
        """Median seconds of row ``label`` if it was timed."""
        row = self.row(label)
        return row.timing.median if row is not None and row.timing is not None else None

    def ratio(self, label: str, base: str | None) -> float | None:
        """Median of ``label`` divided by median of ``base``."""
        num = self.median(label)
        den = self.median(base) if base else None
        return num / den if num is not None and den else None

    def render(self) -> str:
        """Markdown table: median, best, × floor (if any), × 1.2.3 and notes."""
        has_floor = self.floor is not None
        header = (["case", f"median ms / {self.per}", "best ms"] + (["× floor"] if has_floor else [])
                  + [f"× {INC}", "note"])
        lines = []
        for r in self.rows:
            note = r.note if r.status == "ok" else f"{r.status.upper()}: {r.note}"
            if r.timing is None:
                cells = [r.label, "—", "—"] + (["—"] if has_floor else []) + ["—", note]
            else:
                cells = ([r.label, fmt_ms(r.timing.median), fmt_ms(r.timing.best)]
                         + ([fmt_ratio(self.ratio(r.label, self.floor))] if has_floor else [])
                         + [fmt_ratio(self.ratio(r.label, INC)), note])
            lines.append(cells)
        align = "lrr" + ("r" if has_floor else "") + "rl"
        intro = f"### {self.title}\n\n"
        if has_floor:
            intro += (f"Ratios are medians over the median of `{self.floor}`; × {INC} likewise "
                      "(< 1 is faster).\n\n")
        else:
            intro += f"× {INC}: median over the median of the {INC} row (< 1 is faster).\n\n"
        return intro + markdown_table(header, lines, align=align)


# ------------------------------------------------------------- correctness


def to_numpy(result: Any) -> np.ndarray:
    """A library's image result as a NumPy array (tensors via ``.numpy()``)."""
    if isinstance(result, np.ndarray):
        return result
    if hasattr(result, "numpy"):
        return result.detach().cpu().numpy()
    return np.asarray(result)


def verify_array(result: Any, want: np.ndarray) -> tuple[str | None, bool]:
    """Compare an image result with astropy's.

    Returns
    -------
    (str or None, bool)
        A problem description (``None``: identical) and whether it is fatal (values or
        shape differ) rather than cosmetic (same values in another dtype).
    """
    got = to_numpy(result)
    if got.shape != want.shape:
        return f"shape {got.shape}, astropy {want.shape}", True
    if not np.array_equal(got, want):
        bad = int(np.count_nonzero(got != want))
        return f"{bad} of {want.size} values differ from astropy", True
    if got.dtype.newbyteorder("=") != want.dtype.newbyteorder("="):
        return f"dtype {got.dtype}, astropy {want.dtype} (values equal)", False
    return None, False


def header_items(header: Any) -> list[tuple[str, Any]]:
    """Keyword/value pairs of any library's header object, without commentary cards."""
    if hasattr(header, "items"):
        pairs = list(header.items())
    elif hasattr(header, "records"):  # fitsio.FITSHDR
        pairs = [(r["name"], r.get("value")) for r in header.records()]
    else:
        pairs = list(dict(header).items())
    return [(str(k), v) for k, v in pairs if k not in ("", "COMMENT", "HISTORY")]


def _same_value(a: Any, b: Any) -> bool:
    # True == 1 in Python: a header that turns T into 1 is still wrong.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a.rstrip() == b.rstrip()
    return a == b


def verify_headers(got: list[Any], want: list[list[tuple[str, Any]]]) -> tuple[str | None, bool]:
    """Compare a list of header objects with astropy's keyword/value pairs."""
    if len(got) != len(want):
        return f"{len(got)} headers, astropy {len(want)}", True
    for index, (header, pairs) in enumerate(zip(got, want)):
        items = header_items(header)
        if [k for k, _ in items] != [k for k, _ in pairs]:
            return f"header #{index}: keywords differ from astropy", True
        for (key, value), (_, expected) in zip(items, pairs):
            if not _same_value(value, expected):
                return f"header #{index}: {key}={value!r}, astropy {expected!r}", True
    return None, False


def checked_case(section: Section, label: str, fn: Callable[[], Any],
                 verify: Callable[[Any], tuple[str | None, bool]], cases: dict[str, Case],
                 setup: Callable[[], Any] | None = None, note: str = "",
                 budget_s: float | None = None) -> None:
    """Run ``fn`` once, verify it, and queue it for timing only if it is right."""
    row = Row(label, note=note)
    section.rows.append(row)
    try:
        if setup is not None:
            setup()
        problem, fatal = verify(fn())
    except Exception as exc:  # a crash is a result to report, not a reason to stop
        # An anchor that refuses a file (astropy will not memmap scaled data) is a
        # documented limitation; only the library under test can "crash" here.
        row.status = "crash" if label.startswith(NEW) else "unsupported"
        row.note = f"{type(exc).__name__}: {exc}"
        log(f"  {label}: {row.status.upper()}\n{traceback.format_exc()}")
        return
    if problem is not None:
        row.note = "; ".join(filter(None, [note, problem]))
        if fatal:
            row.status = "wrong"
            log(f"  {label}: WRONG: {problem}")
            return
    cases[label] = Case(fn, setup, budget_s=budget_s)


def missing(section: Section, label: str, why: str) -> None:
    """Record a case that could not run at all."""
    section.rows.append(Row(label, status="missing", note=why))


def timed(section: Section, cases: dict[str, Case], repeat: int) -> None:
    """Time the queued cases (interleaved) and attach the timings to their rows."""
    for label, timing in measure_group(cases, repeat).items():
        section.row(label).timing = timing  # type: ignore[union-attr]


# -------------------------------------------------------------- incumbent


class Incumbent:
    """torchfits 1.2.3 behind its own venv (see ``setup_incumbent.sh``)."""

    def __init__(self, enabled: bool) -> None:
        self.python = INCUMBENT_PYTHON
        self.available = enabled and self.python.exists()
        self.why = "" if self.available else (
            "disabled (--no-incumbent)" if not enabled
            else "no benchmarks/.venv-tf123: run setup_incumbent.sh")

    def run(self, jobs: list[dict[str, Any]], repeat: int) -> Any:
        """Run ``jobs`` in the incumbent's venv, each ``repeat`` times; return the replies.

        Sections call this twice, before and after their in-process rounds (repeats
        from :meth:`split`), and pool the samples, so a drift of the machine during
        the section does not land on the incumbent alone.
        """
        for job in jobs:
            job["repeat"] = repeat
        # cwd inside data/: nothing called torchfits there, so 1.2.3 is what imports.
        return run_worker(self.python, INCUMBENT_WORKER, {"jobs": jobs}, cwd=generate.DATA_DIR)

    @staticmethod
    def split(repeat: int) -> tuple[int, int]:
        """Repeats for the run before and the run after the in-process rounds."""
        first = max(1, repeat // 2)
        return first, max(1, repeat - first)


def add_incumbent_rows(section: Section, labels: list[str], before: list[dict[str, Any]] | None,
                       after: list[dict[str, Any]] | None,
                       checks: list[Callable[[dict[str, Any]], str | None]]) -> None:
    """Attach pooled 1.2.3 timings to ``section`` after checking each job's digest."""
    for i, label in enumerate(labels):
        replies = [r[i] for r in (before, after) if r is not None]
        version = replies[0].get("version")
        # A stray torchfits on the worker's path would be timed under 1.2.3's name.
        problem = (f"worker imported torchfits {version}, not 1.2.3" if version != "1.2.3"
                   else checks[i](replies[0]["check"]))
        if problem:
            section.rows.append(Row(label, status="wrong", note=problem))
            continue
        timing = Timing([s for r in replies for s in r["timing"]["samples_s"]])
        section.rows.append(Row(label, timing))


# ------------------------------------------------------------------ helpers


def data_offset(path: Path, hdu: int = 0) -> int:
    """Byte offset of the data unit of HDU ``hdu`` (scans 2880-byte blocks for END)."""
    offset = 0
    with open(path, "rb") as fh:
        for index in range(hdu + 1):
            naxis_bytes, bitpix, gcount, pcount = 1, 0, 1, 0
            dims: list[int] = []
            while True:
                block = fh.read(2880)
                offset += 2880
                if len(block) < 2880:
                    raise ValueError(f"{path}: no END in HDU {index}")
                cards = [block[i:i + 80].decode("ascii") for i in range(0, 2880, 80)]
                for card in cards:
                    key, value = card[:8].strip(), card[10:].split("/")[0].strip()
                    if key == "BITPIX":
                        bitpix = int(value)
                    elif key.startswith("NAXIS") and key != "NAXIS":
                        dims.append(int(value))
                    elif key == "PCOUNT":
                        pcount = int(value)
                    elif key == "GCOUNT":
                        gcount = int(value)
                if any(card.startswith("END" + " " * 77) for card in cards):
                    break
            if index < hdu:
                for d in dims:
                    naxis_bytes *= d
                nbytes = (abs(bitpix) // 8) * gcount * (pcount + (naxis_bytes if dims else 0))
                skip = generate.padded(nbytes)
                fh.seek(skip, 1)
                offset += skip
    return offset


def optional(name: str) -> Any | None:
    """Import an anchor library if it is installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def import_new_torchfits() -> tuple[Any | None, str]:
    """Import this repo's torchfits (in place), or explain why not."""
    sys.path.insert(0, str(REPO_ROOT))
    try:
        import torchfits
    except Exception as exc:
        return None, f"import failed: {type(exc).__name__}: {exc}"
    where = Path(getattr(torchfits, "__file__", None) or list(torchfits.__path__)[0]).resolve()
    if REPO_ROOT not in where.parents:
        return None, f"imported torchfits from {where}, not from this repo"
    return torchfits, ""


_API_PROBLEMS: dict[str, str] = {}


def new_api(tf: Any | None, name: str) -> Callable[..., Any] | None:
    """A function of the new library, or ``None`` if it does not exist (yet).

    Lazy attributes can fail with any exception while the package is being built,
    so everything is caught; :func:`api_missing` tells why.
    """
    if tf is None:
        _API_PROBLEMS[name] = "new torchfits not importable"
        return None
    try:
        return getattr(tf, name)
    except Exception as exc:
        _API_PROBLEMS[name] = f"torchfits.{name}: {type(exc).__name__}: {exc}"
        return None


def accepts(fn: Callable[..., Any], parameter: str) -> bool:
    """Whether ``fn`` takes a keyword called ``parameter`` (False if it cannot be told)."""
    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def api_missing(name: str) -> str:
    """Why :func:`new_api` returned ``None`` for ``name``."""
    return _API_PROBLEMS.get(name, f"torchfits.{name} not available")


# --------------------------------------------------------------- sections


def bench_full_read(kind: str, path: Path, tf: Any, inc: Incumbent, repeat: int) -> Section:
    """Full read of a 4096² image by every library, against the byte-swap-copy floor."""
    from astropy.io import fits

    fitsio = optional("fitsio")
    shape = (generate.IMAGE_SIDE, generate.IMAGE_SIDE)
    count = shape[0] * shape[1]
    offset = data_offset(path)
    want = fits.getdata(path, 0, memmap=False)
    want = want.astype(want.dtype.newbyteorder("="), copy=False)

    if kind == "f32":
        floor_label = "floor: frombuffer('>f4').astype('<f4')"

        def floor() -> np.ndarray:
            return mapped_swap_copy(path, "f4", count, offset).reshape(shape)
    else:
        floor_label = "floor: frombuffer('>u2').astype('<u2'); ^= 0x8000"

        def floor() -> np.ndarray:
            # BZERO=32768 on 16-bit integers is a flip of the top bit; a swap copy then an
            # in-place xor beat a single ufunc over the big-endian view (which converts
            # through small buffers) on this machine.
            out = mapped_swap_copy(path, "u2", count, offset)
            out ^= np.uint16(0x8000)
            return out.reshape(shape)

    title = {"f32": "Full read, 4096×4096 float32 (64 MiB)",
             "u16": "Full read, 4096×4096 uint16 (BITPIX=16, BZERO=32768; 32 MiB)"}[kind]
    section = Section(title, floor=floor_label)
    cases: dict[str, Case] = {}

    def verify(result: Any) -> tuple[str | None, bool]:
        return verify_array(result, want)

    checked_case(section, floor_label, floor, verify, cases, note="fresh mmap per call")
    read_numpy, read = new_api(tf, "read_numpy"), new_api(tf, "read")
    if read_numpy is not None:
        checked_case(section, f"{NEW} read_numpy", lambda: read_numpy(str(path), 0), verify, cases)
    else:
        missing(section, f"{NEW} read_numpy", api_missing("read_numpy"))
    if read_numpy is not None and accepts(read_numpy, "threads"):
        # The floor is one numpy thread; this row shows how much of the lead is threads.
        checked_case(section, f"{NEW} read_numpy(threads=1)", lambda: read_numpy(str(path), 0, threads=1),
                     verify, cases, note="single-threaded, like the floor (extra)")
    if read is not None:
        checked_case(section, f"{NEW} read → torch", lambda: read(str(path), 0), verify, cases)
    else:
        missing(section, f"{NEW} read → torch", api_missing("read"))

    for memmap in (False, True):
        def astropy_read(memmap: bool = memmap) -> np.ndarray:
            data = fits.getdata(path, 0, memmap=memmap)
            # Materialise in native order: a memmap view of big-endian bytes is not a read.
            return data.astype(data.dtype.newbyteorder("="), copy=False)

        checked_case(section, f"astropy getdata(memmap={memmap})", astropy_read, verify, cases,
                     note="+ native-order copy if needed")
    if fitsio is not None:
        checked_case(section, "fitsio.read", lambda: fitsio.read(str(path), ext=0), verify, cases)
    else:
        missing(section, "fitsio.read", "fitsio not installed")

    job = {"kind": "image_read", "path": str(path), "hdu": 0}
    before = inc.run([dict(job)], inc.split(repeat)[0]) if inc.available else None
    log(f"  timing {len(cases)} in-process cases x {repeat}")
    timed(section, cases, repeat)
    after = inc.run([dict(job)], inc.split(repeat)[1]) if inc.available else None
    if inc.available:
        ref = array_digest(want)
        add_incumbent_rows(section, [INC], before, after, [lambda c: compare_digest(c, ref)])
    else:
        missing(section, INC, inc.why)

    # Name the better astropy mode: it is the anchor quoted in the report.
    modes = [(section.median(f"astropy getdata(memmap={m})"), m) for m in (False, True)]
    modes = [(t, m) for t, m in modes if t is not None]
    if modes:
        best = min(modes)[1]
        row = section.row(f"astropy getdata(memmap={best})")
        row.note = "astropy anchor (faster mode); " + row.note  # type: ignore[union-attr]
    return section


def cutout_boxes(n: int) -> list[tuple[int, int, int, int]]:
    """``n`` fixed-seed 64×64 boxes as (x1, y1, x2, y2), 0-based, end-exclusive."""
    rng = np.random.default_rng(CUTOUT_SEED)
    hi = generate.IMAGE_SIDE - CUTOUT_SIDE + 1
    xs, ys = rng.integers(0, hi, n), rng.integers(0, hi, n)
    return [(int(x), int(y), int(x) + CUTOUT_SIDE, int(y) + CUTOUT_SIDE) for x, y in zip(xs, ys)]


# ------------------------------------------------------------- page-cache state

FOLIOS = ("huge", "small", "as-is")


def file_pmd_kib(path: Path) -> tuple[int, int] | None:
    """(FilePmdMapped, Rss) in KiB of a fresh read-only map of ``path`` with every page touched:
    how much of the file the page cache holds in 2 MiB folios, which every map of the file (any
    library's) maps 2 MiB at a time. None where ``/proc/self/smaps`` is missing."""
    if not os.path.exists("/proc/self/smaps"):
        return None
    real = os.path.realpath(path)
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        for off in range(0, len(mm), mmap.PAGESIZE):
            mm[off]  # noqa: B018  (touch: map the page)
        pmd = rss = 0
        inside = False
        with open("/proc/self/smaps") as fh:
            for line in fh:
                parts = line.split()
                if parts and "-" in parts[0] and len(parts) >= 5:  # a mapping's first line
                    inside = len(parts) >= 6 and parts[-1] == real
                elif inside and parts[0] == "FilePmdMapped:":
                    pmd += int(parts[1])
                elif inside and parts[0] == "Rss:":
                    rss += int(parts[1])
        return pmd, rss
    finally:
        mm.close()


def folio_copy(path: Path, state: str, workdir: Path) -> Path:
    """A copy of ``path`` in ``workdir`` whose page cache is in ``state``: "small" as ``write()``
    left it (4 KiB folios here), "huge" re-read cold through a ``MADV_HUGEPAGE`` map (2 MiB
    folios: the state a file read from disk by torchfits, which advises its image maps, ends in).
    Every library in the run reads this one copy, so all see the same page-cache state."""
    dst = workdir / path.name
    with open(path, "rb") as src, open(dst, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    if state == "huge":
        with open(dst, "rb") as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages: dropped
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            mm.madvise(mmap.MADV_HUGEPAGE)
            for off in range(0, len(mm), mmap.PAGESIZE):
                mm[off]  # noqa: B018  (the cold read fills the cache in 2 MiB folios)
        finally:
            mm.close()
    return dst


def folio_note(path: Path, state: str) -> str:
    """The page-cache state of ``path`` for a section title."""
    kib = file_pmd_kib(path)
    held = "FilePmdMapped unknown" if kib is None else f"FilePmdMapped {kib[0]:,} of {kib[1]:,} KiB"
    return f"page cache: {state} ({held})"


def bench_cutouts(path: Path, tf: Any, inc: Incumbent, repeat: int, n: int, folios: str = "as-is") -> Section:
    """``n`` random 64×64 cutouts through readers opened once, every library on one copy of the
    image whose page cache is in the state ``folios`` names (`folio_copy`; "as-is": the file)."""
    if folios == "as-is":
        return _bench_cutouts(path, tf, inc, repeat, n, folio_note(path, folios))
    workdir = Path(tempfile.mkdtemp(prefix=".folios-", dir=path.parent))
    try:
        copy = folio_copy(path, folios, workdir)
        return _bench_cutouts(copy, tf, inc, repeat, n, folio_note(copy, folios))
    finally:
        if tf is not None and hasattr(tf, "clear_file_cache"):
            tf.clear_file_cache()  # our map of the copy
        shutil.rmtree(workdir, ignore_errors=True)


def _bench_cutouts(path: Path, tf: Any, inc: Incumbent, repeat: int, n: int, state: str) -> Section:
    """`bench_cutouts` on ``path`` as it is; ``state`` goes into the section title."""
    from astropy.io import fits

    fitsio = optional("fitsio")
    boxes = cutout_boxes(n)
    full = fits.getdata(path, 0, memmap=False)
    ref_stream = DigestStream()
    for x1, y1, x2, y2 in boxes:
        ref_stream.add(full[y1:y2, x1:x2])
    ref = ref_stream.result()
    del full

    section = Section(f"{n:,} random {CUTOUT_SIDE}×{CUTOUT_SIDE} cutouts of the float32 image, "
                      f"reader opened once; {state}",
                      floor="floor: numpy mmap slice", per=f"{n:,} cutouts")
    cases: dict[str, Case] = {}

    def verify(cutouts: list[Any]) -> tuple[str | None, bool]:
        stream = DigestStream()
        for c in cutouts:
            stream.add(c)
        problem = compare_digest(stream.result(), ref)
        # Cutouts of another dtype with the same values would be cosmetic, but the digest
        # cannot tell; every library here returns float32, so treat any difference as fatal.
        return problem, problem is not None

    # Keep the open-once objects alive for the whole section.
    keep: list[Any] = []
    fh = open(path, "rb")
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    grid = np.frombuffer(mm, dtype=">f4", count=generate.IMAGE_SIDE ** 2,
                         offset=data_offset(path)).reshape(generate.IMAGE_SIDE, generate.IMAGE_SIDE)
    checked_case(section, "floor: numpy mmap slice",
                 lambda: [grid[y1:y2, x1:x2].astype("<f4") for x1, y1, x2, y2 in boxes], verify, cases,
                 note="a[y0:y1, x0:x1].astype('<f4')")

    open_subset_reader, open_image = new_api(tf, "open_subset_reader"), new_api(tf, "open_image")
    if open_subset_reader is not None:
        try:
            reader = open_subset_reader(str(path), 0)
            keep.append(reader)
            checked_case(section, f"{NEW} open_subset_reader → torch",
                         lambda: [reader(x1, y1, x2, y2) for x1, y1, x2, y2 in boxes], verify, cases,
                         note="r(x1, y1, x2, y2)")
        except Exception as exc:
            section.rows.append(Row(f"{NEW} open_subset_reader → torch", status="crash",
                                    note=f"open: {exc!r}"))
    else:
        missing(section, f"{NEW} open_subset_reader → torch", api_missing("open_subset_reader"))
    img = None
    if open_image is not None:
        try:
            img = open_image(str(path), 0)
            keep.append(img)
            checked_case(section, f"{NEW} open_image slicing",
                         lambda: [img[y1:y2, x1:x2] for x1, y1, x2, y2 in boxes], verify, cases,
                         note="img[y0:y1, x0:x1] → NumPy")
        except Exception as exc:
            section.rows.append(Row(f"{NEW} open_image slicing", status="crash", note=f"open: {exc!r}"))
        # The public batched call: the same boxes in one call, one (N, 64, 64) array (one
        # GIL-free kernel call), wrapped as one tensor like the reader's results.
        if img is not None and hasattr(img, "cutouts"):
            import torch

            box_array = np.asarray(boxes, np.int64)
            checked_case(section, BATCH, lambda: torch.from_numpy(img.cutouts(box_array)), verify, cases,
                         note="torch.from_numpy(img.cutouts(boxes)), boxes an (N, 4) array")
    else:
        missing(section, f"{NEW} open_image slicing", api_missing("open_image"))

    if fitsio is not None:
        ffile = fitsio.FITS(str(path))
        fhdu = ffile[0]
        keep.append(ffile)
        checked_case(section, "fitsio slicing", lambda: [fhdu[y1:y2, x1:x2] for x1, y1, x2, y2 in boxes],
                     verify, cases, note="h = FITS(p)[0]; h[y0:y1, x0:x1]")
    else:
        missing(section, "fitsio slicing", "fitsio not installed")

    # Extras: the same cutouts with each result dropped at once (its memory reused), which
    # leaves out the page faults of 16 MiB of fresh output memory. The functions are the
    # verified ones above; only what happens to the results differs.
    def drop_floor() -> None:
        for x1, y1, x2, y2 in boxes:
            grid[y1:y2, x1:x2].astype("<f4")

    section.rows.append(Row("floor, results dropped", note="same slices, each result freed at once (extra)"))
    cases["floor, results dropped"] = Case(drop_floor, None)
    if f"{NEW} open_subset_reader → torch" in cases:
        def drop_reader() -> None:
            for x1, y1, x2, y2 in boxes:
                reader(x1, y1, x2, y2)

        label = f"{NEW} open_subset_reader, results dropped"
        section.rows.append(Row(label, note="same reader, each result freed at once (extra)"))
        cases[label] = Case(drop_reader, None)

    hdul = fits.open(path, memmap=True)
    adata = hdul[0].data
    keep.append(hdul)
    checked_case(section, "astropy memmap slicing",
                 lambda: [adata[y1:y2, x1:x2].astype("<f4") for x1, y1, x2, y2 in boxes], verify, cases,
                 note="data[y0:y1, x0:x1] + native copy")

    job = {"kind": "cutouts", "path": str(path), "hdu": 0, "boxes": boxes}
    before = inc.run([dict(job)], inc.split(repeat)[0]) if inc.available else None
    log(f"  timing {len(cases)} in-process cases x {repeat}")
    timed(section, cases, repeat)
    after = inc.run([dict(job)], inc.split(repeat)[1]) if inc.available else None
    if inc.available:
        add_incumbent_rows(section, [INC], before, after, [lambda c: compare_digest(c, ref)])
        if section.rows[-1].status == "ok":
            section.rows[-1].note = "open_subset_reader; r(x1, y1, x2, y2)"
    else:
        missing(section, INC, inc.why)

    # Rebinding (not del) empties the closures' cells too, so no view of the map is left.
    grid = adata = None
    mm.close()
    fh.close()
    hdul.close()
    return section


def per_hdu(read: Callable[[str, int], Any], path: str, hdus: list[int]) -> Callable[[], list[Any]]:
    """A call that reads the header of each of ``hdus`` with ``read(path, hdu)``."""
    return lambda: [read(path, i) for i in hdus]


def bench_headers(path: Path, tf: Any, inc: Incumbent, repeat: int) -> list[Section]:
    """Header of HDU 99, and all 100 headers, of the 100-HDU file: cold and warm caches."""
    from astropy.io import fits

    fitsio = optional("fitsio")
    p = str(path)
    with fits.open(path) as hdul:
        want_all = [header_items(h.header) for h in hdul]
    nhdu = len(want_all)
    last = nhdu - 1
    read_header, clear = new_api(tf, "read_header"), new_api(tf, "clear_file_cache")

    one = Section(f"Header of HDU {last} of a {nhdu}-HDU file", floor=None)
    every = Section(f"All {nhdu} headers of the {nhdu}-HDU file", floor=None)
    sections = [one, every]
    cases: list[dict[str, Case]] = [{}, {}]
    wants = [[want_all[last]], want_all]

    def verifier(want: list[list[tuple[str, Any]]]) -> Callable[[Any], tuple[str | None, bool]]:
        return lambda got: verify_headers(got if isinstance(got, list) else [got], want)

    hdu_lists = [[last], list(range(nhdu))]
    for sec, cs, want, hdus in zip(sections, cases, wants, hdu_lists):
        v = verifier(want)
        if read_header is not None:
            fn = per_hdu(read_header, p, hdus)
            if clear is not None:
                checked_case(sec, f"{NEW} cold", fn, v, cs, setup=clear,
                             note="clear_file_cache() before each call")
            else:
                missing(sec, f"{NEW} cold", api_missing("clear_file_cache"))
            checked_case(sec, f"{NEW} warm", fn, v, cs, note="metadata cache warm")
        else:
            missing(sec, f"{NEW} read_header", api_missing("read_header"))
        checked_case(sec, "astropy getheader", per_hdu(fits.getheader, p, hdus), v, cs,
                     note="one getheader per HDU", budget_s=6.0)
        if len(hdus) > 1:
            def astropy_once() -> list[Any]:
                with fits.open(p) as h:
                    return [x.header for x in h]
            checked_case(sec, "astropy open once", astropy_once, v, cs,
                         note="[h.header for h in fits.open(p)]")
        if fitsio is not None:
            checked_case(sec, "fitsio.read_header", per_hdu(fitsio.read_header, p, hdus), v, cs,
                         note="one read_header per HDU")
            if len(hdus) > 1:
                def fitsio_once() -> list[Any]:
                    with fitsio.FITS(p) as f:
                        return [h.read_header() for h in f]
                checked_case(sec, "fitsio open once", fitsio_once, v, cs,
                             note="[h.read_header() for h in FITS(p)]")
        else:
            missing(sec, "fitsio.read_header", "fitsio not installed")

    jobs = [{"kind": "headers", "path": p, "hdus": hdus, "cold": cold}
            for hdus in hdu_lists for cold in (True, False)]
    before = inc.run([dict(j) for j in jobs], inc.split(repeat)[0]) if inc.available else None
    for sec, cs in zip(sections, cases):
        log(f"  timing {len(cs)} in-process cases x {repeat} ({sec.title})")
        timed(sec, cs, repeat)
    after = inc.run([dict(j) for j in jobs], inc.split(repeat)[1]) if inc.available else None

    def check_items(want: list[tuple[str, Any]]) -> Callable[[dict[str, Any]], str | None]:
        def check(reply: dict[str, Any]) -> str | None:
            items = [(k, v) for k, v in reply["items"]]
            problem, _ = verify_headers([dict_header(items)], [want])
            return problem
        return check

    for k, sec in enumerate(sections):
        if inc.available:
            pick = lambda r, k=k: None if r is None else r[2 * k:2 * k + 2]  # noqa: E731
            add_incumbent_rows(sec, [f"{INC} cold", f"{INC} warm"], pick(before), pick(after),
                               [check_items(wants[k][-1])] * 2)
            cold_row = sec.row(f"{INC} cold")
            if cold_row is not None and cold_row.status == "ok":
                cold_row.note = "clear_file_cache() before each call"
            # Pin the ratio column to the warm incumbent: the state a long-lived user sees.
            for row in sec.rows:
                if row.label == f"{INC} warm":
                    row.label = INC
        else:
            missing(sec, INC, inc.why)
    return sections


class dict_header:  # noqa: N801 - a tiny adapter, named like the builtin it wraps
    """Wrap JSON keyword/value pairs so :func:`header_items` can read them."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self._items = items

    def items(self) -> list[tuple[str, Any]]:
        return self._items


def bench_process(tf_available: bool, inc: Incumbent, runs: int) -> Section:
    """Whole-process wall clock: ``import torchfits`` + one header peek."""
    peek_path = str(generate.path_of("image_f32"))
    peek = f"import torchfits; torchfits.read_header({peek_path!r}, 0)"
    py = sys.executable
    commands: dict[str, tuple[list[str], Path | None]] = {
        'python -c "import numpy"': ([py, "-c", "import numpy"], REPO_ROOT),
        'python -c "pass"': ([py, "-c", "pass"], REPO_ROOT),
    }
    if tf_available:
        # cwd = repo root: `python -c` puts it on sys.path, so the in-repo package imports.
        commands[f"{NEW} import + read_header"] = ([py, "-c", peek], REPO_ROOT)
    if optional("astropy") is not None:
        commands["astropy import + getheader"] = (
            [py, "-c", f"from astropy.io import fits; fits.getheader({peek_path!r}, 0)"], REPO_ROOT)
    if optional("fitsio") is not None:
        commands["fitsio import + read_header"] = (
            [py, "-c", f"import fitsio; fitsio.read_header({peek_path!r}, 0)"], REPO_ROOT)
    if inc.available:
        # cwd = data dir, where no torchfits package can shadow the venv's 1.2.3.
        commands[INC] = ([str(inc.python), "-c", peek], generate.DATA_DIR)

    section = Section("Whole process: interpreter + import + header peek (wall clock)",
                      floor='python -c "import numpy"', per="process")
    runnable: dict[str, tuple[list[str], Path | None]] = {}
    import subprocess
    for label, (argv, cwd) in commands.items():
        # Check each command once: a failing command's wall clock would mean nothing.
        proc = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            section.rows.append(Row(label, status="crash", note=tail[:200]))
        else:
            runnable[label] = (argv, cwd)
    if not tf_available:
        missing(section, f"{NEW} import + read_header", api_missing("read_header"))
    if not inc.available:
        missing(section, INC, inc.why)
    log(f"  timing {len(runnable)} processes x {runs}")
    for label, timing in time_processes(runnable, runs).items():
        section.rows.append(Row(label, timing))
    order = list(commands)
    section.rows.sort(key=lambda r: order.index(r.label) if r.label in order else len(order))
    return section


def bench_first_call(path: Path, tf_available: bool, inc: Incumbent, runs: int) -> Section:
    """The first ``read_header`` of the last HDU of the many-HDU file in a fresh process, timed
    inside the process: interpreter start-up and ``import torchfits`` stay outside the clock,
    whatever the first call imports or builds is inside."""
    import subprocess

    from astropy.io import fits

    with fits.open(path) as hdul:
        last = len(hdul) - 1
    code = ("import time, torchfits; t = time.perf_counter(); "
            f"torchfits.read_header({str(path)!r}, {last}); print(time.perf_counter() - t)")
    commands: dict[str, tuple[list[str], Path | None]] = {}
    if tf_available:
        commands[NEW] = ([sys.executable, "-c", code], REPO_ROOT)  # the in-repo package
    if inc.available:
        commands[INC] = ([str(inc.python), "-I", "-c", code], generate.DATA_DIR)
    section = Section(f"First read_header of HDU {last} in a fresh process (timed inside it)",
                      floor=None, per="call")
    samples: dict[str, list[float]] = {label: [] for label in commands}
    log(f"  timing {len(commands)} first calls x {runs}")
    for k in range(runs + 2):  # two warm-up rounds: page cache and bytecode caches
        for label, (argv, cwd) in list(commands.items()):
            proc = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
                section.rows.append(Row(label, status="crash", note=tail[:200]))
                del commands[label]
            elif k >= 2:
                samples[label].append(float(proc.stdout.split()[-1]))
    for label in commands:
        section.rows.append(Row(label, Timing(samples[label]),
                                note="read_header(path, 99) after import torchfits"))
    if not tf_available:
        missing(section, NEW, api_missing("read_header"))
    if not inc.available:
        missing(section, INC, inc.why)
    return section


# ------------------------------------------------------------------ targets


def evaluate_targets(sections: dict[str, Section]) -> list[list[str]]:
    """One line per target and new-library entry point: value, limit, PASS/FAIL."""
    lines: list[list[str]] = []

    def verdict(value: float | None, limit: float, kind: str) -> str:
        if value is None:
            return "n/a"
        ok = value <= limit if kind == "max_ratio" else value >= limit
        return "PASS" if ok else "FAIL"

    for key, text, limit, kind in TARGETS:
        sec = sections.get("cutouts" if key == "cutouts_batch" else key)
        if sec is None:
            continue
        if key in ("f32", "u16"):
            pairs = [(f"{NEW} read_numpy", sec.ratio(f"{NEW} read_numpy", sec.floor)),
                     (f"{NEW} read → torch", sec.ratio(f"{NEW} read → torch", sec.floor))]
            unit = "× floor"
        elif key == "cutouts":
            def speedup(label: str, sec: Section = sec) -> float | None:
                r = sec.ratio(label, INC)
                return 1.0 / r if r else None
            pairs = [(f"{NEW} open_subset_reader → torch", speedup(f"{NEW} open_subset_reader → torch")),
                     (f"{NEW} open_image slicing (extra)", speedup(f"{NEW} open_image slicing"))]
            unit = f"× ({INC} time / new time)"
        elif key == "cutouts_batch":
            r = sec.ratio(BATCH, INC)
            pairs = [(BATCH, 1.0 / r if r else None)]
            unit = f"× ({INC} time / new time)"
        elif key == "first_call":
            pairs = [(NEW, sec.ratio(NEW, INC))]
            unit = f"× {INC}"
        else:
            pairs = [(f"{NEW} import + read_header", sec.ratio(f"{NEW} import + read_header", sec.floor))]
            unit = "× numpy process"
        for label, value in pairs:
            shown = "—" if value is None else f"{value:.2f}{unit}"
            lines.append([text, label, shown, verdict(value, limit, kind)])
    return lines


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run every image/header benchmark and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31, help="timed repetitions per case (default 31)")
    parser.add_argument("--quick", action="store_true", help="5 repetitions, 10 process runs: a smoke run")
    parser.add_argument("--process-runs", type=int, default=None,
                        help="runs per process case (default 21; ≥ 10)")
    parser.add_argument("--cutouts", type=int, default=1000, help="number of cutouts (default 1000)")
    parser.add_argument("--folios", choices=FOLIOS, default="huge",
                        help="page-cache state of the image the cutouts read (default huge: as a "
                        "cold read through torchfits leaves it; small: as just written; as-is: the "
                        "data file as it stands); the section title reports FilePmdMapped")
    parser.add_argument("--no-incumbent", action="store_true", help="skip torchfits 1.2.3")
    parser.add_argument("--json", type=Path, default=None, help="also write all samples to this file")
    parser.add_argument("--only", nargs="+", choices=("f32", "u16", "cutouts", "headers", "process"),
                        default=None, help="run only these sections (default: all)")
    args = parser.parse_args(argv)
    only = set(args.only or ("f32", "u16", "cutouts", "headers", "process"))
    repeat = 5 if args.quick else args.repeat
    runs = args.process_runs or (10 if args.quick else 21)

    info = machine_info()
    paths = {name: generate.ensure(name) for name in ("image_f32", "image_u16", "many_hdus")}
    tf, why = import_new_torchfits()
    if tf is None:
        log(f"new torchfits unavailable: {why}")
    inc = Incumbent(enabled=not args.no_incumbent)

    versions = {"numpy": np.__version__}
    for name in ("astropy", "fitsio", "torch"):
        mod = optional(name)
        versions[name] = getattr(mod, "__version__", "absent") if mod else "absent"
    versions["torchfits (new)"] = getattr(tf, "__version__", "in-repo") if tf else f"unavailable ({why})"
    versions[INC] = "venv .venv-tf123" if inc.available else inc.why

    sections: dict[str, Section] = {}
    if "f32" in only:
        log("full read float32")
        sections["f32"] = bench_full_read("f32", paths["image_f32"], tf, inc, repeat)
    if "u16" in only:
        log("full read uint16")
        sections["u16"] = bench_full_read("u16", paths["image_u16"], tf, inc, repeat)
    if "cutouts" in only:
        log("cutouts")
        sections["cutouts"] = bench_cutouts(paths["image_f32"], tf, inc, repeat, args.cutouts,
                                           args.folios)
    if "headers" in only:
        log("headers")
        sections["hdr_one"], sections["hdr_all"] = bench_headers(paths["many_hdus"], tf, inc, repeat)
    if "process" in only:
        log("processes")
        sections["process"] = bench_process(new_api(tf, "read_header") is not None, inc, runs)
        sections["first_call"] = bench_first_call(paths["many_hdus"], new_api(tf, "read_header") is not None,
                                                  inc, runs)

    command = "python benchmarks/run_images.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print_report("torchfits image/header benchmarks", info, versions,
                 [f"command: `{command.strip()}`; {repeat} repetitions per case (medians), "
                  f"{runs} runs per process; files in the page cache (warm)"],
                 sections.values(), evaluate_targets(sections))

    if args.json:
        payload = {"machine": info, "versions": versions, "repeat": repeat, "process_runs": runs,
                   "sections": sections_json(sections)}
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

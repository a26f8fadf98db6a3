"""Table benchmarks: torchfits (this repo) scanning a 2M-row catalog, against its floor and incumbents.

Usage: ``python benchmarks/run_tables.py [--repeat N] [--quick] [--json PATH]`` with the dev
venv, after ``bash benchmarks/setup_incumbent.sh`` (torchfits 1.2.3). About two minutes
with the defaults on two cores; ``--quick`` is a smoke run (under a minute).

Four cases over ``catalog_2m`` (12 columns, 59 bytes a row, 113 MiB; see ``generate.py``):
the full read to Arrow, 2 of 12 columns, a where-query projecting 3 columns, and 4 float
columns to torch. Every case is timed next to the floor (one byte-swapping copy of the
table's NAXIS1×NAXIS2 bytes) in interleaved rounds; ratios compare medians of one run.
Before anything is timed, astropy and fitsio must agree on every value of the catalog, and
each library's result is checked against them; a wrong result from the new torchfits makes
the run exit with status 1 (after the report).
"""

from __future__ import annotations

import argparse
import json
import mmap
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402
from _harness import (  # noqa: E402
    Case,
    log,
    machine_info,
    mapped_swap_copy,
    print_report,
    sections_json,
)
from incumbent_worker import table_columns, table_digest  # noqa: E402
from run_images import (  # noqa: E402
    INC,
    NEW,
    Incumbent,
    Section,
    accepts,
    add_incumbent_rows,
    api_missing,
    checked_case,
    data_offset,
    import_new_torchfits,
    missing,
    new_api,
    optional,
    timed,
)

DATASET = "catalog_2m"
HDU = 1
TWO = ["ra", "mag_r"]
WHERE = "mag_r < 16 AND ra BETWEEN 10 AND 100"
WHERE_COLUMNS = ["id", "ra", "mag_r"]
# The same conjuncts in the other order: the scanner evaluates them as written (extra row).
WHERE_SWAPPED = "ra BETWEEN 10 AND 100 AND mag_r < 16"
# The same predicate in CFITSIO's row-filter syntax (BETWEEN is inclusive at both ends).
WHERE_CFITSIO = "mag_r < 16 && ra >= 10 && ra <= 100"
TORCH_COLUMNS = ["ra", "dec", "mag_g", "mag_r"]
# Slow anchors stop repeating once their samples add up to this (after 3 samples);
# --quick lowers it to 1 s.
ANCHOR_BUDGET_S = 3.0
QUICK = False

# Targets: (section key, description, limit): new-library median / floor median ≤ limit.
TARGETS = [
    ("full", "full read to Arrow ≤ 2× floor", 2.0),
    ("two", "2 of 12 columns ≤ 0.8× floor", 0.8),
    ("where", "where-query, 3 columns projected ≤ 0.8× floor", 0.8),
]


# ------------------------------------------------------------- reference


class Reference:
    """The catalog's values according to fitsio, cross-checked against astropy.

    Attributes
    ----------
    columns : dict of str to ndarray
        Every column, normalised by :func:`incumbent_worker.table_columns`.
    mask : ndarray of bool
        Rows the where-query keeps, evaluated in NumPy on these values.
    """

    def __init__(self, path: Path) -> None:
        import fitsio
        from astropy.table import Table

        self.columns = table_columns(fitsio.read(str(path), ext=HDU))
        problem = compare_columns(table_columns(Table.read(path, hdu=HDU)), self.columns)
        if problem is not None:
            # Nothing can be checked if the two oracles disagree: stop here.
            raise RuntimeError(f"astropy and fitsio disagree on {path}: {problem}")
        ra, mag_r = self.columns["ra"], self.columns["mag_r"]
        self.mask = (mag_r < np.float32(16)) & (ra >= 10.0) & (ra <= 100.0)
        self.nrows = len(ra)

    def pick(self, names: list[str], where: bool = False) -> dict[str, np.ndarray]:
        """Expected columns ``names``, restricted to the where-query's rows if ``where``."""
        return {n: self.columns[n][self.mask] if where else self.columns[n] for n in names}


def compare_columns(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str | None:
    """Explain how two normalised column dicts differ (names, order, dtypes, values), or ``None``."""
    if list(got) != list(want):
        return f"columns {list(got)}, expected {list(want)}"
    for name, expected in want.items():
        value = got[name]
        if value.dtype != expected.dtype:
            return f"{name}: dtype {value.dtype}, expected {expected.dtype}"
        if value.shape != expected.shape:
            return f"{name}: shape {value.shape}, expected {expected.shape}"
        if not np.array_equal(value, expected):
            bad = int(np.count_nonzero(value != expected))
            return f"{name}: {bad} of {expected.size} values differ"
    return None


def verifier(want: dict[str, np.ndarray]) -> Callable[[Any], tuple[str | None, bool]]:
    """A ``checked_case`` verifier: any difference from ``want`` is fatal."""
    def verify(result: Any) -> tuple[str | None, bool]:
        problem = compare_columns(table_columns(result), want)
        return problem, problem is not None
    return verify


def digest_check(want: dict[str, np.ndarray]) -> Callable[[dict[str, Any]], str | None]:
    """Check a 1.2.3 worker's :func:`table_digest` against ``want``."""
    ref = table_digest(want)

    def check(got: dict[str, Any]) -> str | None:
        if got["names"] != ref["names"]:
            return f"columns {got['names']}, expected {ref['names']}"
        for name, d in ref["columns"].items():
            g = got["columns"][name]
            for key in ("dtype", "shape", "sha256"):
                if g[key] != d[key]:
                    shown = ("…", "…") if key == "sha256" else (g[key], d[key])
                    return f"{name}: {key} differs ({shown[0]} vs {shown[1]})"
        return None
    return check


# ------------------------------------------------------------------ floor


def table_layout(path: Path) -> tuple[int, int]:
    """(data offset, NAXIS1×NAXIS2) of the table HDU."""
    from astropy.io import fits

    header = fits.getheader(path, HDU)
    return data_offset(path, HDU), int(header["NAXIS1"]) * int(header["NAXIS2"])


def make_floor(path: Path) -> tuple[str, Callable[[], np.ndarray], Callable[[Any], tuple[str | None, bool]]]:
    """The floor call: a fresh mmap, then ``frombuffer('>u4').astype('<u4')`` over the table bytes."""
    offset, nbytes = table_layout(path)
    count = nbytes // 4  # a tail of < 4 bytes (not the case here) would be left out
    label = "floor: frombuffer('>u4').astype('<u4')"

    def floor() -> np.ndarray:
        return mapped_swap_copy(path, "u4", count, offset)

    with open(path, "rb") as fh:
        fh.seek(offset)
        want = np.frombuffer(fh.read(count * 4), dtype=">u4")

    def verify(result: Any) -> tuple[str | None, bool]:
        ok = result.dtype == np.dtype("<u4") and np.array_equal(result, want)
        return (None, False) if ok else ("floor copy differs from the file's bytes", True)

    return label, floor, verify


class ReusedFloor:
    """The floor without the fresh mapping: one mmap kept open, ``astype('<u4')`` per call.

    The new library keeps its mapping in the metadata cache between calls, so its warm
    calls do not pay the ~29,000 page faults a fresh mapping of 113 MiB costs; this row
    shows how much of the floor those faults are (an extra; targets use the fresh floor).
    """

    label = "floor, mapping reused"

    def __init__(self, path: Path) -> None:
        offset, nbytes = table_layout(path)
        self._fh = open(path, "rb")
        self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._view: np.ndarray | None = np.frombuffer(self._mm, dtype=">u4", count=nbytes // 4, offset=offset)

    def __call__(self) -> np.ndarray:
        return self._view.astype("<u4")  # type: ignore[union-attr]

    def close(self) -> None:
        self._view = None
        self._mm.close()
        self._fh.close()


def add_floors(section: Section, cases: dict[str, Case], path: Path, note: str) -> ReusedFloor:
    """Queue both floors (fresh mapping: the reference of every ratio; reused mapping: extra)."""
    label, floor, verify = make_floor(path)
    section.floor = label
    checked_case(section, label, floor, verify, cases, note=note)
    reused = ReusedFloor(path)
    checked_case(section, reused.label, reused, verify, cases,
                 note="one mmap held open; ~page faults of a fresh mapping left out (extra)")
    return reused


# --------------------------------------------------------------- sections


def incumbent_rows(section: Section, inc: Incumbent, jobs: list[dict[str, Any]], labels: list[str],
                   wants: list[dict[str, np.ndarray]], cases: dict[str, Case], repeat: int) -> None:
    """Time the queued cases, with 1.2.3 in two halves around them; then attach its rows.

    With ``--quick`` (``QUICK``) 1.2.3 runs once, after the rounds: one worker start-up
    (~2 s of ``import torch``) per section instead of two.
    """
    first, second = (0, repeat) if QUICK else inc.split(repeat)
    before = inc.run([dict(j) for j in jobs], first) if inc.available and first else None
    log(f"  timing {len(cases)} in-process cases x {repeat}")
    timed(section, cases, repeat)
    after = inc.run([dict(j) for j in jobs], second) if inc.available else None
    if inc.available:
        add_incumbent_rows(section, labels, before, after, [digest_check(w) for w in wants])
    else:
        for label in labels:
            missing(section, label, inc.why)


def new_scan_case(section: Section, cases: dict[str, Case], tf: Any, label: str, call: Callable[[Any], Any],
                  want: dict[str, np.ndarray], note: str = "",
                  setup: Callable[[], Any] | None = None) -> None:
    """Queue a call of the new ``torchfits.scan`` (or record why it cannot run)."""
    scan = new_api(tf, "scan")
    if scan is None:
        missing(section, label, api_missing("scan"))
        return
    checked_case(section, label, lambda: call(scan), verifier(want), cases, setup=setup, note=note)


def threads_ok(tf: Any) -> bool:
    """Whether the new ``scan`` takes ``threads=`` (for the single-threaded extra rows)."""
    scan = new_api(tf, "scan")
    return scan is not None and accepts(scan, "threads")


def bench_full(path: Path, ref: Reference, tf: Any, inc: Incumbent, repeat: int) -> Section:
    """Case 1: every column of every row into Arrow (or each library's native table)."""
    from astropy.table import Table

    fitsio = optional("fitsio")
    p = str(path)
    section = Section("Full read: all 12 columns, 2,000,000 rows (113 MiB of rows)")
    cases: dict[str, Case] = {}
    want = ref.pick(list(ref.columns))
    reused = add_floors(section, cases, path, "fresh mmap per call; single thread")
    new_scan_case(section, cases, tf, f"{NEW} scan().to_arrow()", lambda scan: scan(p).to_arrow(), want)
    if threads_ok(tf):
        new_scan_case(section, cases, tf, f"{NEW} scan(threads=1).to_arrow()",
                      lambda scan: scan(p, threads=1).to_arrow(), want,
                      note="single-threaded, like the floor (extra)")
    clear = new_api(tf, "clear_file_cache")
    if clear is not None:
        new_scan_case(section, cases, tf, f"{NEW} scan().to_arrow(), cold cache",
                      lambda scan: scan(p).to_arrow(), want, setup=clear,
                      note="clear_file_cache() before each call: new mmap + header parse (extra)")
    checked_case(section, "astropy Table.read", lambda: Table.read(p, hdu=HDU), verifier(want), cases,
                 note="columns stay big-endian; strings as bytes", budget_s=ANCHOR_BUDGET_S)
    if fitsio is not None:
        checked_case(section, "fitsio.read", lambda: fitsio.read(p, ext=HDU), verifier(want), cases,
                     note="structured array, big-endian", budget_s=ANCHOR_BUDGET_S)
    else:
        missing(section, "fitsio.read", "fitsio not installed")
    job = {"kind": "table_read", "path": p, "hdu": HDU, "columns": None, "where": None,
           "budget_s": ANCHOR_BUDGET_S / 2}
    return finish(section, inc, job, want, cases, repeat, reused, "table.read(path) → pyarrow.Table")


def bench_two(path: Path, ref: Reference, tf: Any, inc: Incumbent, repeat: int) -> Section:
    """Case 2: 2 of the 12 columns, every row."""
    from astropy.io import fits
    from astropy.table import Table

    fitsio = optional("fitsio")
    p = str(path)
    section = Section(f"2 of 12 columns ({', '.join(TWO)}), every row")
    cases: dict[str, Case] = {}
    want = ref.pick(TWO)
    reused = add_floors(section, cases, path, "the whole table's bytes, fresh mmap per call")
    new_scan_case(section, cases, tf, f"{NEW} scan(columns=…).to_arrow()",
                  lambda scan: scan(p, columns=TWO).to_arrow(), want)
    if threads_ok(tf):
        new_scan_case(section, cases, tf, f"{NEW} scan(columns=…, threads=1)",
                      lambda scan: scan(p, columns=TWO, threads=1).to_arrow(), want,
                      note="single-threaded (extra)")
    if fitsio is not None:
        checked_case(section, "fitsio.read(columns=…)", lambda: fitsio.read(p, ext=HDU, columns=TWO),
                     verifier(want), cases, note="structured array, big-endian", budget_s=ANCHOR_BUDGET_S)
    else:
        missing(section, "fitsio.read(columns=…)", "fitsio not installed")

    def astropy_memmap() -> dict[str, np.ndarray]:
        with fits.open(p, memmap=True) as hdul:
            data = hdul[HDU].data
            return {n: data[n].astype(data[n].dtype.newbyteorder("=")) for n in TWO}

    checked_case(section, "astropy memmap columns", astropy_memmap, verifier(want), cases,
                 note="fits.open(memmap=True); data[c] → native copy (extra)", budget_s=ANCHOR_BUDGET_S)
    checked_case(section, "astropy Table.read, then select",
                 lambda: Table.read(p, hdu=HDU)[TWO], verifier(want), cases,
                 note="Table.read cannot project FITS columns", budget_s=ANCHOR_BUDGET_S)
    job = {"kind": "table_read", "path": p, "hdu": HDU, "columns": TWO, "where": None}
    return finish(section, inc, job, want, cases, repeat, reused, "table.read(path, columns=…)")


def bench_where(path: Path, ref: Reference, tf: Any, inc: Incumbent, repeat: int) -> Section:
    """Case 3: ``mag_r < 16 AND ra BETWEEN 10 AND 100``, projecting ``id, ra, mag_r``."""
    from astropy.io import fits

    fitsio = optional("fitsio")
    p = str(path)
    kept = int(ref.mask.sum())
    section = Section(f"Where-query `{WHERE}` → {', '.join(WHERE_COLUMNS)} "
                      f"({kept:,} of {ref.nrows:,} rows)")
    cases: dict[str, Case] = {}
    want = ref.pick(WHERE_COLUMNS, where=True)
    reused = add_floors(section, cases, path, "the whole table's bytes, fresh mmap per call")
    new_scan_case(section, cases, tf, f"{NEW} scan(columns=…, where=…).to_arrow()",
                  lambda scan: scan(p, columns=WHERE_COLUMNS, where=WHERE).to_arrow(), want)
    if threads_ok(tf):
        new_scan_case(section, cases, tf, f"{NEW} scan(…, threads=1)",
                      lambda scan: scan(p, columns=WHERE_COLUMNS, where=WHERE, threads=1).to_arrow(), want,
                      note="single-threaded (extra)")
    new_scan_case(section, cases, tf, f"{NEW} same, terms swapped",
                  lambda scan: scan(p, columns=WHERE_COLUMNS, where=WHERE_SWAPPED).to_arrow(), want,
                  note=f"where='{WHERE_SWAPPED}' (extra)")
    if fitsio is not None:
        def fitsio_where() -> np.ndarray:
            with fitsio.FITS(p) as f:
                rows = f[HDU].where(WHERE_CFITSIO)
                return f[HDU].read(rows=rows, columns=WHERE_COLUMNS)

        def fitsio_mask() -> dict[str, np.ndarray]:
            data = fitsio.read(p, ext=HDU, columns=WHERE_COLUMNS)
            mag_r, ra = data["mag_r"], data["ra"]
            keep = (mag_r < 16) & (ra >= 10) & (ra <= 100)
            return {n: data[n][keep] for n in WHERE_COLUMNS}

        checked_case(section, "fitsio where() + read(rows=…)", fitsio_where, verifier(want), cases,
                     note=f"FITS(p)[1].where('{WHERE_CFITSIO}'), then read(rows, columns)",
                     budget_s=ANCHOR_BUDGET_S)
        checked_case(section, "fitsio read(columns=…) + NumPy mask", fitsio_mask, verifier(want), cases,
                     note="reads the 3 columns of every row, then filters (extra)", budget_s=ANCHOR_BUDGET_S)
    else:
        missing(section, "fitsio where() + read(rows=…)", "fitsio not installed")

    def astropy_memmap() -> dict[str, np.ndarray]:
        with fits.open(p, memmap=True) as hdul:
            data = hdul[HDU].data
            mag_r, ra = data["mag_r"], data["ra"]
            keep = (mag_r < 16) & (ra >= 10) & (ra <= 100)
            return {n: data[n][keep] for n in WHERE_COLUMNS}

    checked_case(section, "astropy memmap + NumPy mask", astropy_memmap, verifier(want), cases,
                 note="fits.open(memmap=True); mask on data[c] (extra)", budget_s=ANCHOR_BUDGET_S)
    job = {"kind": "table_read", "path": p, "hdu": HDU, "columns": WHERE_COLUMNS, "where": WHERE}
    return finish(section, inc, job, want, cases, repeat, reused, "table.read(path, columns=…, where=…)")


def bench_torch(path: Path, ref: Reference, tf: Any, inc: Incumbent, repeat: int) -> Section:
    """Case 4: 4 float columns as a dict of CPU tensors."""
    fitsio = optional("fitsio")
    torch = optional("torch")
    p = str(path)
    section = Section(f"4 float columns ({', '.join(TORCH_COLUMNS)}) → dict of torch tensors")
    cases: dict[str, Case] = {}
    want = ref.pick(TORCH_COLUMNS)
    reused = add_floors(section, cases, path, "the whole table's bytes, fresh mmap per call")
    if torch is None:
        missing(section, f"{NEW} scan(columns=…).to_torch()", "torch not installed")
    else:
        new_scan_case(section, cases, tf, f"{NEW} scan(columns=…).to_torch()",
                      lambda scan: scan(p, columns=TORCH_COLUMNS).to_torch(), want)
        if fitsio is not None:
            def fitsio_torch() -> dict[str, Any]:
                data = fitsio.read(p, ext=HDU, columns=TORCH_COLUMNS)
                return {n: torch.from_numpy(np.ascontiguousarray(data[n],
                                                                 dtype=data[n].dtype.newbyteorder("=")))
                        for n in TORCH_COLUMNS}

            checked_case(section, "fitsio.read(columns=…) → torch", fitsio_torch, verifier(want), cases,
                         note="+ native contiguous copy per column, torch.from_numpy",
                         budget_s=ANCHOR_BUDGET_S)
        else:
            missing(section, "fitsio.read(columns=…) → torch", "fitsio not installed")
    job = {"kind": "table_read_torch", "path": p, "hdu": HDU, "columns": TORCH_COLUMNS}
    return finish(section, inc, job, want, cases, repeat, reused, "table.read_torch(path, columns=…)")


def finish(section: Section, inc: Incumbent, job: dict[str, Any], want: dict[str, np.ndarray],
           cases: dict[str, Case], repeat: int, reused: ReusedFloor, inc_note: str) -> Section:
    """Time a section's cases with 1.2.3 running ``job`` around them, release the reused floor's
    mapping and note the 1.2.3 call on its row."""
    incumbent_rows(section, inc, [job], [INC], [want], cases, repeat)
    reused.close()
    _note(section, INC, inc_note)
    return section


def _note(section: Section, label: str, note: str) -> None:
    row = section.row(label)
    if row is not None and row.status == "ok":
        row.note = note


# ------------------------------------------------------------------ targets


def evaluate_targets(sections: dict[str, Section]) -> list[list[str]]:
    """One line per target: the new library's median over the floor's, and PASS/FAIL."""
    labels = {"full": f"{NEW} scan().to_arrow()", "two": f"{NEW} scan(columns=…).to_arrow()",
              "where": f"{NEW} scan(columns=…, where=…).to_arrow()"}
    lines = []
    for key, text, limit in TARGETS:
        sec = sections.get(key)
        if sec is None:
            continue
        extra = " (extra: vs floor, mapping reused)"
        for base, unit, suffix in ((sec.floor, "floor", ""), (ReusedFloor.label, ReusedFloor.label, extra)):
            value = sec.ratio(labels[key], base)
            verdict = "n/a" if value is None else "PASS" if value <= limit else "FAIL"
            shown = "—" if value is None else f"{value:.2f}× {unit}"
            lines.append([text + suffix, labels[key], shown, verdict])
    return lines


def wrong_new_rows(sections: dict[str, Section]) -> list[str]:
    """New-library rows that crashed or returned wrong values."""
    return [f"{sec.title}: {r.label}: {r.status.upper()}: {r.note}" for sec in sections.values()
            for r in sec.rows if r.label.startswith(NEW) and r.status in ("wrong", "crash")]


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run the four table cases and print the report; exit 1 if the new library is wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31, help="timed repetitions per case (default 31)")
    parser.add_argument("--quick", action="store_true", help="5 repetitions: a smoke run")
    parser.add_argument("--no-incumbent", action="store_true", help="skip torchfits 1.2.3")
    parser.add_argument("--json", type=Path, default=None, help="also write all samples to this file")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else args.repeat
    global ANCHOR_BUDGET_S, QUICK
    if args.quick:
        ANCHOR_BUDGET_S, QUICK = 1.0, True

    info = machine_info()
    path = generate.ensure(DATASET)
    tf, why = import_new_torchfits()
    if tf is None:
        log(f"new torchfits unavailable: {why}")
    inc = Incumbent(enabled=not args.no_incumbent)

    versions = {"numpy": np.__version__}
    for name in ("pyarrow", "astropy", "fitsio", "torch"):
        mod = optional(name)
        versions[name] = getattr(mod, "__version__", "absent") if mod else "absent"
    versions["torchfits (new)"] = getattr(tf, "__version__", "in-repo") if tf else f"unavailable ({why})"
    versions[INC] = "venv .venv-tf123" if inc.available else inc.why

    log("reference values (fitsio, cross-checked with astropy)")
    ref = Reference(path)
    sections: dict[str, Section] = {}
    log("full read")
    sections["full"] = bench_full(path, ref, tf, inc, repeat)
    log("2 columns")
    sections["two"] = bench_two(path, ref, tf, inc, repeat)
    log("where-query")
    sections["where"] = bench_where(path, ref, tf, inc, repeat)
    log("to_torch")
    sections["torch"] = bench_torch(path, ref, tf, inc, repeat)

    command = "python benchmarks/run_tables.py " + " ".join(argv if argv is not None else sys.argv[1:])
    data = generate.DATASETS[DATASET]
    print_report("torchfits table benchmarks", info, versions,
                 [f"data: `{data.filename}`: {data.description}",
                  f"command: `{command.strip()}`; {repeat} repetitions per case (medians; slow anchors "
                  f"stop after {ANCHOR_BUDGET_S:g} s of samples, 3 at least); file in the page cache (warm)"],
                 sections.values(), evaluate_targets(sections))

    if args.json:
        payload = {"machine": info, "versions": versions, "repeat": repeat,
                   "sections": sections_json(sections)}
        args.json.write_text(json.dumps(payload, indent=1))

    wrong = wrong_new_rows(sections)
    if wrong:
        log("\nCORRECTNESS FAILURE in the new torchfits:\n  " + "\n  ".join(wrong))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sky-index benchmark: a 1 arcmin cone over a catalog in 8 files, HEALPix-sorted with a row-range
index (``torchfits sort --healpix``) vs the same rows unsorted with a sky sidecar.

Usage: ``python benchmarks/sky_index.py [--rows N] [--repeat N] [--order K]`` with the dev venv.

Data (made here, cached under the temp directory): ``--rows`` rows (default 20,000,000) in 8
FITS files, columns ``id`` (int64), ``ra``, ``dec`` (float64, uniform on the sphere, in random
order) and ``mag`` (float32), 28 bytes a row. Each file is then rewritten by
`torchfits.sky.sort_healpix` at ``--order`` (default 10) into a second directory, whose sidecar
gets each file's row ranges by cell; the unsorted directory is indexed with
``build_index(sky=("ra", "dec"))``. The query is a 1 arcmin cone around the position of row
1,000 of the fourth file (so it holds at least one row); every route's rows are checked equal
to astropy's ``SkyCoord.separation`` over all rows before anything is timed.

Cases, timed in interleaved rounds (best of ``--repeat`` after a warm-up):

- floor: ``torchfits.scan(unsorted, columns=["ra", "dec"]).to_arrow()``, reading the two
  coordinate columns whole, which a cone search without a usable index has to look at;
- unsorted + sky sidecar: ``dataset(unsorted).to_table(filter=cone)`` (random positions: every
  chunk covers the whole sky, nothing is skipped);
- sorted + row-range index: ``dataset(sorted).to_table(filter=cone)`` on an opened dataset
  (target ≤ 20 ms), and with the dataset opened (sidecar read) inside the clock.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Case, fmt_ms, fmt_ratio, log, markdown_table, measure_group  # noqa: E402

FILES = 8
RADIUS = 1.0 / 60.0  # 1 arcmin
COLUMNS = ["id", "ra", "dec", "mag"]
TARGET_MS = 20.0


def make_data(rows: int, order: int) -> tuple[Path, Path, dict[str, float]]:
    """The unsorted and sorted catalog directories (written once per row count and order, then
    reused), and the seconds the sort and the index took when they were made here."""
    from astropy.io import fits

    from torchfits.sky import sort_healpix
    from torchfits.tables.stats_index import build_index

    root = Path(tempfile.gettempdir()) / f"torchfits_sky_index_{rows}"
    raw, srt = root / "unsorted", root / f"sorted_{order}"
    made: dict[str, float] = {}
    if not (raw / "done").exists():
        raw.mkdir(parents=True, exist_ok=True)
        log(f"writing {rows:,} rows in {FILES} files under {raw}")
        rng = np.random.default_rng(26)
        bounds = np.linspace(0, rows, FILES + 1).astype(np.int64)
        for f in range(FILES):
            a, b = int(bounds[f]), int(bounds[f + 1])
            n = b - a
            cols = [fits.Column("id", "K", array=np.arange(a, b)),
                    fits.Column("ra", "D", array=rng.uniform(0.0, 360.0, n)),
                    fits.Column("dec", "D", array=np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))),
                    fits.Column("mag", "E", array=rng.uniform(14.0, 26.0, n).astype(np.float32))]
            fits.BinTableHDU.from_columns(cols).writeto(raw / f"part{f}.fits", overwrite=True)
        t0 = time.perf_counter()
        build_index(str(raw), sky=("ra", "dec"), sky_order=order)
        made["index build --sky (unsorted)"] = time.perf_counter() - t0
        (raw / "done").write_text("ok")
    if not (srt / "done").exists():
        srt.mkdir(parents=True, exist_ok=True)
        log(f"sorting into {srt} at order {order}")
        t0 = time.perf_counter()
        for f in range(FILES):
            sort_healpix(str(raw / f"part{f}.fits"), str(srt / f"part{f}.fits"), order, overwrite=True)
        made["sort --healpix + index (8 files)"] = time.perf_counter() - t0
        (srt / "done").write_text("ok")
    return raw, srt, made


def _cone(centre: tuple[float, float]) -> str:
    return f"cone(ra, dec, {centre[0]!r}, {centre[1]!r}, {RADIUS!r})"


def _astropy_ids(files: list[Path], centre_deg: tuple[float, float]) -> np.ndarray:
    import astropy.units as u
    from astropy.coordinates import SkyCoord
    from astropy.io import fits

    centre = SkyCoord(centre_deg[0] * u.deg, centre_deg[1] * u.deg)
    found = []
    for path in files:
        with fits.open(path, memmap=True) as hdul:
            data = hdul[1].data
            ra, dec, ids = (np.asarray(data[c], dtype=np.float64) for c in ("ra", "dec", "id"))
        # astropy's separation on the rows near the cone (a generous box first, for time)
        near = np.abs(dec - centre_deg[1]) < 1.0
        sep = SkyCoord(ra[near] * u.deg, dec[near] * u.deg).separation(centre).deg
        found.append(ids[near][sep <= RADIUS].astype(np.int64))
    return np.sort(np.concatenate(found))


def report(repeat: int = 3, rows: int = 20_000_000, order: int = 10) -> str:
    """The markdown section of this benchmark (data made or reused under the temp directory)."""
    import torchfits
    from torchfits.tables.source import TableSource

    raw, srt, made = make_data(rows, order)
    raw_ds = torchfits.dataset(str(raw))
    srt_ds = torchfits.dataset(str(srt))
    assert all(f.stats is not None and f.stats.sky is not None for f in srt_ds.get_fragments())

    row = torchfits.scan(str(raw / "part3.fits"), columns=["ra", "dec"], row_slice=(1000, 1001)).to_arrow()
    centre = (float(row["ra"][0].as_py()), float(row["dec"][0].as_py()))
    cone = _cone(centre)
    want = _astropy_ids(sorted(raw.glob("part*.fits")), centre)
    routes = {
        "unsorted": lambda: raw_ds.to_table(columns=COLUMNS, filter=cone),
        "sorted": lambda: srt_ds.to_table(columns=COLUMNS, filter=cone),
        "sorted, open": lambda: torchfits.dataset(str(srt)).to_table(columns=COLUMNS, filter=cone),
    }
    for label, fn in routes.items():
        got = np.sort(fn()["id"].to_numpy())
        if not np.array_equal(got, want):
            raise SystemExit(f"{label}: {len(got)} rows, astropy {len(want)}")

    # rows the sorted route decodes (counted on the table source)
    read = [0]
    real = TableSource.decode

    def counting(self: TableSource, **kwargs: object) -> object:
        rr = kwargs.get("row_range")
        if kwargs.get("rows") is None and isinstance(rr, tuple):
            read[0] += rr[1] - rr[0]
        return real(self, **kwargs)

    TableSource.decode = counting  # type: ignore[method-assign]
    try:
        routes["sorted"]()
    finally:
        TableSource.decode = real  # type: ignore[method-assign]
    log(f"cone rows: {len(want)}; sorted route decodes {read[0]} rows")

    cases = {
        "floor: scan ra, dec (no where)": Case(
            lambda: torchfits.scan(str(raw), columns=["ra", "dec"]).to_arrow(), min_repeat=2, budget_s=10.0),
        "unsorted + sky sidecar, filter=cone": Case(routes["unsorted"], min_repeat=2, budget_s=30.0),
        "sorted + row-range index, filter=cone": Case(routes["sorted"]),
        "sorted + row-range index, dataset opened in the clock": Case(routes["sorted, open"]),
    }
    timings = measure_group(cases, repeat)
    # CPU seconds of the sorted query (all threads): what it costs whatever else the machine runs
    cpu = []
    for _ in range(max(repeat, 5)):
        c0 = time.process_time()
        routes["sorted"]()
        cpu.append(time.process_time() - c0)
    best = {k: t.best for k, t in timings.items()}
    floor = best["floor: scan ra, dec (no where)"]
    table_rows = [[label, fmt_ms(t), fmt_ratio(t / floor)] for label, t in best.items()]
    sorted_s = best["sorted + row-range index, filter=cone"]
    sorted_ms = sorted_s * 1e3
    lines = [
        "### Sky index: HEALPix-sorted catalogs",
        "",
        f"{rows:,} rows in {FILES} files (id int64, ra/dec float64 uniform on the sphere, mag "
        f"float32; 28 bytes a row). Sorted with `torchfits sort --healpix {order}` (row ranges of "
        f"about 1,024 rows by cell in the sidecar); the unsorted copy indexed with `torchfits index "
        f"build --sky ra dec --sky-order {order}`. A 1 arcmin cone at ({centre[0]:.4f}, {centre[1]:.4f}): "
        f"{len(want)} rows, "
        f"equal to astropy's `SkyCoord.separation`; the sorted route decodes {read[0]:,} of "
        f"{rows:,} rows. Best of {repeat} after a warm-up; ratios to the floor (reading the two "
        "coordinate columns).",
        "",
        markdown_table(["case", "best ms", "× floor"], table_rows),
        "",
        f"- sorted + index: {sorted_ms:.2f} ms (target ≤ {TARGET_MS:.0f} ms: "
        f"{'met' if sorted_ms <= TARGET_MS else 'not met'}); {floor / sorted_s:.0f}× faster than "
        "the floor",
        f"- sorted + index, CPU time of the query (all threads, best of {len(cpu)}): "
        f"{min(cpu) * 1e3:.1f} ms; load average when measured: {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores",
    ]
    for label, d in (("sorted", srt), ("unsorted", raw)):
        size = (d / "_torchfits_index.json").stat().st_size
        lines.append(f"- sidecar of the {label} files: {size / 1e6:.2f} MB")
    for label, seconds in made.items():
        lines.append(f"- {label}: {seconds:.1f} s (made in this run)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--order", type=int, default=10)
    args = parser.parse_args()
    print(report(args.repeat, args.rows, args.order))


if __name__ == "__main__":
    main()

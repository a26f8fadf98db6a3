"""Cone-search benchmark: ``where="cone(ra, dec, ra0, dec0, radius)"`` over a catalog in 8 files.

Usage: ``python benchmarks/sky_cone.py [--rows N] [--repeat N]`` with the dev venv.

Data (made here, cached under the temp directory): ``--rows`` rows (default 20,000,000) in 8
FITS files, columns ``id`` (int64), ``ra``, ``dec`` (float64, uniform on the sphere) and ``mag``
(float32), 28 bytes a row. The rows are sorted by declination and the files cut into
declination zones, as position-sorted survey catalogs are, so statistics can rule files and
chunks out. The query is a 1 arcmin cone centred on the catalog row near declination 20 (so it
holds that row at least); its rows are checked equal to astropy's ``SkyCoord.separation`` on the
same values before anything is timed.

Cases, timed in interleaved rounds (best of ``--repeat`` after a warm-up):

- floor: ``torchfits.scan(dir, columns=["ra", "dec"]).to_arrow()``, reading the two coordinate
  columns whole, which any cone search without an index has to look at;
- scan: ``torchfits.scan(dir, columns=..., where=cone)`` with no sidecar (the kernel tests the
  cone's box on the raw rows, the exact test runs on the rows it keeps);
- the exact test alone, on the rows the kernel's box keeps (their ra, dec): NumPy
  (``query.sky.in_cone``, what the scan runs) against the pyarrow filter of the same cone;
- sidecar: ``torchfits.dataset(dir, index=...)`` after ``torchfits index build`` (chunks of
  65,536 rows), ``to_table(filter=cone)``;
- astropy: ``Table.read`` of one file and ``SkyCoord.separation`` on it, times the 8 files.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Case, fmt_ms, fmt_ratio, log, markdown_table, measure_group  # noqa: E402

FILES = 8
# the cone is centred on a catalog row near declination 20 (so it holds at least that row):
# the row at this fraction of the declination-sorted catalog
CENTRE_FRACTION = (1.0 + math.sin(math.radians(20.0))) / 2.0
RADIUS = 1.0 / 60.0  # 1 arcmin
COLUMNS = ["id", "ra", "dec"]


def make_data(rows: int) -> Path:
    """The catalog's directory (written once per row count, then reused)."""
    from astropy.io import fits

    root = Path(tempfile.gettempdir()) / f"torchfits_sky_cone_{rows}"
    done = root / "done"
    if done.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    log(f"writing {rows:,} rows in {FILES} files under {root}")
    rng = np.random.default_rng(26)
    dec = np.sort(np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, rows))))
    ra = rng.uniform(0.0, 360.0, rows)
    mag = rng.uniform(14.0, 26.0, rows).astype(np.float32)
    bounds = np.linspace(0, rows, FILES + 1).astype(np.int64)
    for f in range(FILES):
        a, b = bounds[f], bounds[f + 1]
        cols = [fits.Column("id", "K", array=np.arange(a, b)), fits.Column("ra", "D", array=ra[a:b]),
                fits.Column("dec", "D", array=dec[a:b]), fits.Column("mag", "E", array=mag[a:b])]
        fits.BinTableHDU.from_columns(cols).writeto(root / f"part{f}.fits", overwrite=True)
    done.write_text("ok")
    return root


def _where(centre: tuple[float, float]) -> str:
    return f"cone(ra, dec, {centre[0]!r}, {centre[1]!r}, {RADIUS!r})"


def _box_where(centre: tuple[float, float]) -> str:
    from torchfits.query.sky import cone_box

    box = cone_box(centre[0], centre[1], RADIUS)
    assert box.ra_windows is not None and len(box.ra_windows) == 1
    lo, hi = box.ra_windows[0]
    return f"dec BETWEEN {box.dec_lo!r} AND {box.dec_hi!r} AND ra BETWEEN {lo!r} AND {hi!r}"


def _astropy_ids(path: Path, centre: tuple[float, float]) -> np.ndarray:
    import astropy.units as u
    from astropy.coordinates import SkyCoord
    from astropy.table import Table

    t = Table.read(path, memmap=False)
    sep = SkyCoord(np.asarray(t["ra"]) * u.deg, np.asarray(t["dec"]) * u.deg).separation(
        SkyCoord(centre[0] * u.deg, centre[1] * u.deg)).deg
    return np.asarray(t["id"])[sep <= RADIUS]


def report(repeat: int = 3, rows: int = 20_000_000) -> str:
    """The markdown section of this benchmark (data made or reused under the temp directory)."""
    import torchfits
    from torchfits.query import expr as E
    from torchfits.query.sky import in_cone
    from torchfits.tables.stats_index import build_index

    root = make_data(rows)
    files = sorted(root.glob("part*.fits"))
    sidecar = root / "_torchfits_index.json"
    if not sidecar.exists():
        build_index(str(root), output=str(sidecar))
    ds = torchfits.dataset(str(root), index=str(sidecar))
    row = ds.take([int(rows * CENTRE_FRACTION)], columns=["ra", "dec"])
    centre = (float(row["ra"][0].as_py()), float(row["dec"][0].as_py()))
    where = _where(centre)

    # the anchor's answer (every file through astropy), checked against each torchfits route
    want = np.sort(np.concatenate([_astropy_ids(p, centre) for p in files]))
    routes = {
        "scan": lambda: torchfits.scan(str(root), columns=COLUMNS, where=where).to_arrow(),
        "sidecar": lambda: ds.to_table(columns=COLUMNS, filter=where),
    }
    for label, fn in routes.items():
        got = np.sort(fn()["id"].to_numpy())
        if not np.array_equal(got, want):
            raise SystemExit(f"{label}: {len(got)} rows, astropy {len(want)}")
    survivors = torchfits.scan(str(root), columns=["ra", "dec"], where=_box_where(centre)).to_arrow()
    box_rows = survivors.num_rows
    exact = E.to_pyarrow(E.parse(where), survivors.schema)
    if survivors.filter(exact).num_rows != len(want):
        raise SystemExit("the exact test on the box's rows differs from astropy")
    log(f"cone rows: {len(want)}; box rows: {box_rows}")

    one = files[len(files) // 2]
    cases = {
        "floor: scan ra, dec (no where)": Case(
            lambda: torchfits.scan(str(root), columns=["ra", "dec"]).to_arrow()),
        "scan where=cone (no sidecar)": Case(routes["scan"]),
        "exact: pyarrow": Case(lambda: survivors.filter(exact)),
        "exact: numpy": Case(lambda: in_cone(survivors["ra"].to_numpy(), survivors["dec"].to_numpy(),
                                             centre[0], centre[1], RADIUS)),
        "dataset + sidecar, filter=cone": Case(routes["sidecar"]),
        "astropy Table.read + separation, 1 file": Case(lambda: _astropy_ids(one, centre), min_repeat=1),
    }
    timings = measure_group(cases, repeat)
    best = {k: t.best for k, t in timings.items()}
    exact_pa, exact_np = best.pop("exact: pyarrow"), best.pop("exact: numpy")
    astropy_all = best["astropy Table.read + separation, 1 file"] * FILES
    floor = best["floor: scan ra, dec (no where)"]
    table_rows = []
    for label, t in best.items():
        table_rows.append([label, fmt_ms(t), fmt_ratio(t / floor)])
    table_rows.append([f"astropy, ×{FILES} files (scaled from 1)", fmt_ms(astropy_all),
                       fmt_ratio(astropy_all / floor)])
    side = best["dataset + sidecar, filter=cone"]
    scan = best["scan where=cone (no sidecar)"]
    lines = [
        "### Cone search (`where=\"cone(...)\"`)",
        "",
        f"{rows:,} rows in {FILES} files (id int64, ra/dec float64, mag float32; 28 bytes a row; "
        f"sorted by declination, one zone a file). A 1 arcmin cone centred on a row, at "
        f"({centre[0]:.4f}, {centre[1]:.4f}): "
        f"{len(want)} rows kept ({box_rows} in its box); equal to astropy's "
        "`SkyCoord.separation`. Best of "
        f"{repeat} after a warm-up; ratios to the floor (reading the two coordinate columns).",
        "",
        markdown_table(["case", "best ms", "× floor"], table_rows),
        "",
        f"- sidecar vs floor: {fmt_ratio(side / floor)} (target ≤ 1.0×); "
        f"scan vs floor: {fmt_ratio(scan / floor)}",
        f"- astropy ({FILES} files) vs sidecar: {astropy_all / side:.0f}× slower; vs scan: "
        f"{astropy_all / scan:.0f}× (target ≥ 50×)",
        f"- the exact test on the box's {box_rows} rows: NumPy {fmt_ms(exact_np)} ms, a pyarrow "
        f"filter {fmt_ms(exact_pa)} ms (the scan: {fmt_ms(scan)} ms)",
        "",
        f"Command: `python benchmarks/sky_cone.py --rows {rows} --repeat {repeat}`",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.rows < FILES:
        raise SystemExit(f"--rows must be at least {FILES}")
    print(report(args.repeat, args.rows))


if __name__ == "__main__":
    main()

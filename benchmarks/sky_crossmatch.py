"""Cross-match benchmark: two 1M-row catalogs matched within 1 arcsecond.

The script writes both catalogs (FITS binary tables: ``id`` int64, ``ra``/``dec`` float64 and
``mag`` float32) into a temporary directory: the left catalog uniform on the sphere, the right
one 90% of the left rows moved by a Gaussian of 0.3" (per axis) plus 10% new sources, shuffled.
About 90% of the left rows then have a match.

- local: ``torchfits.crossmatch(left_path, right_path, 1/3600)`` (reading both files included)
  against astropy: ``Table.read`` of both files, ``SkyCoord``, ``match_coordinates_sky`` and the
  radius cut; the matched rows and separations are checked equal (target: 5x).
- Dask: ``torchfits.dask.crossmatch`` on a 2-worker ``LocalCluster`` (1 thread each) against
  LSDB's ``crossmatch`` of the same catalogs converted to HATS with ``lsdb.from_dataframe``
  (the conversion is timed apart and not counted; LSDB's KD-tree nearest match with
  ``radius_arcsec=1``); both counted to a pandas frame and checked equal.

Run ``python benchmarks/sky_crossmatch.py [--rows N] [--repeat R] [--no-dask]``; prints the
markdown section.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Case, fmt_ms, fmt_ratio, log, markdown_table, measure_group  # noqa: E402

RADIUS_DEG = 1.0 / 3600.0


def make_catalogs(directory: Path, rows: int, seed: int = 0) -> tuple[Path, Path]:
    """The left and right catalogs (see the module docstring) as two FITS files."""
    import torchfits

    rng = np.random.default_rng(seed)
    ra = rng.uniform(0.0, 360.0, rows)
    dec = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, rows)))
    left = {"id": np.arange(rows, dtype=np.int64), "ra": ra, "dec": dec,
            "mag": rng.uniform(14, 24, rows).astype(np.float32)}
    kept = rng.permutation(rows)[: rows * 9 // 10]
    new = rows - kept.size
    sigma = 0.3 / 3600.0
    rdec = np.clip(dec[kept] + rng.normal(0.0, sigma, kept.size), -90.0, 90.0)
    rra = (ra[kept] + rng.normal(0.0, sigma, kept.size) / np.maximum(np.cos(np.radians(rdec)), 1e-6)) % 360.0
    rra = np.concatenate([rra, rng.uniform(0.0, 360.0, new)])
    rdec = np.concatenate([rdec, np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, new)))])
    shuffle = rng.permutation(rows)
    right = {"id": np.arange(rows, dtype=np.int64) + 10 * rows, "ra": rra[shuffle], "dec": rdec[shuffle],
             "mag": rng.uniform(14, 24, rows).astype(np.float32)}
    lpath, rpath = directory / "left.fits", directory / "right.fits"
    torchfits.write(str(lpath), left, overwrite=True)
    torchfits.write(str(rpath), right, overwrite=True)
    return lpath, rpath


def astropy_match(lpath: Path, rpath: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Left rows, right rows and separations (deg) of astropy's nearest match within the radius."""
    import astropy.units as u
    from astropy.coordinates import SkyCoord, match_coordinates_sky
    from astropy.table import Table

    left, right = Table.read(lpath), Table.read(rpath)
    c1 = SkyCoord(np.asarray(left["ra"]) * u.deg, np.asarray(left["dec"]) * u.deg)
    c2 = SkyCoord(np.asarray(right["ra"]) * u.deg, np.asarray(right["dec"]) * u.deg)
    idx, d2d, _ = match_coordinates_sky(c1, c2)
    sep = d2d.deg
    rows = np.flatnonzero(sep <= RADIUS_DEG)
    return rows, idx[rows], sep[rows]


def check_equal(result: Any, rows: int, anchor: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """The torchfits result (a table with ``id_left``, ``id_right``, ``separation_deg``) equals
    the anchor's rows and separations (to 1e-9 deg)."""
    li, ri, sep = anchor
    got_l = np.asarray(result["id_left"])
    got_r = np.asarray(result["id_right"]) - 10 * rows
    got_s = np.asarray(result["separation_deg"])
    order = np.argsort(got_l, kind="stable")
    if not (np.array_equal(got_l[order], li) and np.array_equal(got_r[order], ri)):
        raise AssertionError("torchfits and astropy matched different rows")
    if not np.allclose(got_s[order], sep, rtol=0, atol=1e-9):
        raise AssertionError("torchfits and astropy separations differ by more than 1e-9 deg")


def local_section(lpath: Path, rpath: Path, rows: int, repeat: int) -> list[str]:
    import torchfits

    anchor = astropy_match(lpath, rpath)
    check_equal(torchfits.crossmatch(str(lpath), str(rpath), RADIUS_DEG), rows, anchor)
    t = measure_group({
        "torchfits": Case(lambda: torchfits.crossmatch(str(lpath), str(rpath), RADIUS_DEG)),
        "astropy": Case(lambda: astropy_match(lpath, rpath)),
    }, repeat)
    best_tf, best_ap = t["torchfits"].best, t["astropy"].best
    table = markdown_table(["cross-match (files read included)", "ms"], [
        ["`torchfits.crossmatch(left, right, 1/3600)`", fmt_ms(best_tf)],
        ["astropy `Table.read` ×2 + `SkyCoord` + `match_coordinates_sky` + cut", fmt_ms(best_ap)],
        ["speed-up", fmt_ratio(best_ap / best_tf)],
    ])
    return [f"{rows:,} × {rows:,} rows within 1\": {anchor[0].size:,} matches "
            f"({anchor[0].size / rows:.0%} of the left rows); best of {repeat} after a warm-up; "
            "results checked equal.", "", table]


def dask_section(lpath: Path, rpath: Path, rows: int, repeat: int, workers: int = 2) -> list[str]:
    import distributed
    import lsdb
    import pandas as pd

    import torchfits
    import torchfits.dask as tfd

    local = torchfits.crossmatch(str(lpath), str(rpath), RADIUS_DEG).to_pandas()
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster):
        def ours() -> pd.DataFrame:
            return tfd.crossmatch(str(lpath), str(rpath), RADIUS_DEG).compute()

        got = ours().sort_values("id_left", kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, local, check_dtype=False)

        frames = [torchfits.scan(str(p)).to_pandas() for p in (lpath, rpath)]
        import time

        t0 = time.perf_counter()
        cats = [lsdb.from_dataframe(f, ra_column="ra", dec_column="dec", catalog_name=name)
                for f, name in zip(frames, ("left", "right"), strict=True)]
        convert = time.perf_counter() - t0

        def theirs() -> pd.DataFrame:
            return cats[0].crossmatch(cats[1], radius_arcsec=1.0, n_neighbors=1, suffixes=("_left", "_right"),
                                      suffix_method="all_columns").compute()

        want = theirs()
        if len(want) != len(local) or set(want["id_left"]) != set(local["id_left"]):
            raise AssertionError("LSDB and torchfits matched different rows")
        t = measure_group({"torchfits": Case(ours), "lsdb": Case(theirs)}, repeat)
    table = markdown_table([f"Dask cross-match, LocalCluster of {workers} workers", "ms"], [
        ["`torchfits.dask.crossmatch(left, right, 1/3600).compute()` (files read included)",
         fmt_ms(t["torchfits"].best)],
        ["LSDB `crossmatch(radius_arcsec=1)` of the HATS catalogs (`.compute()`)", fmt_ms(t["lsdb"].best)],
        ["speed-up", fmt_ratio(t["lsdb"].best / t["torchfits"].best)],
        ["LSDB conversion (`lsdb.from_dataframe` ×2, not counted above)", fmt_ms(convert)],
    ])
    return ["", table]


def report(repeat: int = 3, rows: int = 1_000_000, dask: bool = True) -> str:
    """The benchmark's markdown section."""
    with tempfile.TemporaryDirectory() as tmp:
        log("writing catalogs")
        lpath, rpath = make_catalogs(Path(tmp), rows)
        log("local cross-match")
        lines = ["## Cross-matching catalogs", ""] + local_section(lpath, rpath, rows, repeat)
        if dask:
            log("Dask cross-match")
            lines += dask_section(lpath, rpath, rows, repeat)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args()
    print(report(args.repeat, args.rows, not args.no_dask))


if __name__ == "__main__":
    main()

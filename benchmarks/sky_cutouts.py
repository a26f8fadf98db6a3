"""Sky cutouts benchmark: 10,000 stamps of 64x64 around (RA, Dec) positions of a 4096² float32
TAN-SIP image, `torchfits.cutouts` against astropy's `Cutout2D` in a loop.

The anchors open the file once with astropy (memory-mapped) and build the WCS once:
  - "Cutout2D loop": one ``Cutout2D(data, SkyCoord, 64, wcs=wcs, copy=True)`` per position,
    the documented way to cut around sky positions;
  - "world2pix + Cutout2D loop": all positions through one vectorised ``all_world2pix`` first,
    then one ``Cutout2D(data, (x, y), 64, wcs=wcs, copy=True)`` per pixel position.
Every stamp lies inside the image (positions drawn 40 pixels or more from the edges). torchfits
is timed with its headers (the lazy sequence), with every header built, and without headers.
Data and WCS are checked equal to the Cutout2D loop on a sample of 200 stamps (pixel → world on
a grid, to 1e-9 deg). Times are the best of ``repeat`` after a warm-up; the Cutout2D anchors are
warmed on 200 positions and stop repeating after 60 s.

Usage: python benchmarks/sky_cutouts.py [--repeat 3] [--n 10000]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _harness import Case, fmt_ms, fmt_ratio, log, markdown_table, measure_group  # noqa: E402

SIDE = 4096
SIZE = 64
EDGE = 40


def _sip_header() -> dict:
    return {"CTYPE1": "RA---TAN-SIP", "CTYPE2": "DEC--TAN-SIP", "CRVAL1": 150.1, "CRVAL2": 2.2,
            "CRPIX1": 2048.5, "CRPIX2": 2048.5, "CD1_1": -7.3e-5, "CD1_2": 1.0e-7,
            "CD2_1": 1.2e-7, "CD2_2": 7.3e-5, "A_ORDER": 3, "B_ORDER": 3,
            "A_2_0": 2e-7, "A_1_1": -1e-7, "A_0_2": 3e-7, "A_3_0": 1e-11, "A_1_2": -2e-11,
            "B_2_0": -2e-7, "B_1_1": 1e-7, "B_0_2": 4e-7, "B_0_3": 3e-11, "B_2_1": 1e-11}


def _make(directory: Path, n: int) -> tuple[str, np.ndarray, np.ndarray]:
    from astropy.io import fits
    from astropy.wcs import WCS

    path = directory / "sip4096.fits"
    data = np.random.default_rng(0).normal(100, 5, (SIDE, SIDE)).astype(np.float32)
    header = fits.Header(_sip_header())
    fits.PrimaryHDU(data, header=header).writeto(path)
    rng = np.random.default_rng(1)
    x, y = rng.uniform(EDGE, SIDE - 1 - EDGE, n), rng.uniform(EDGE, SIDE - 1 - EDGE, n)
    ra, dec = WCS(header).all_pix2world(x, y, 0)
    return str(path), np.asarray(ra), np.asarray(dec)


def _check(path: str, ra: np.ndarray, dec: np.ndarray, stamps: np.ndarray, headers) -> int:
    """Compare a sample with Cutout2D: data equal, WCS equal to 1e-9 deg. Returns the count."""
    from astropy.coordinates import SkyCoord
    from astropy.io import fits
    from astropy.nddata import Cutout2D
    from astropy.wcs import WCS

    sample = np.random.default_rng(2).choice(len(ra), size=min(200, len(ra)), replace=False)
    grid = np.array([0.0, 13.0, 31.5, 63.0])
    with fits.open(path, memmap=True) as hdul:
        data, wcs = hdul[0].data, WCS(hdul[0].header)
        for i in sample.tolist():
            cut = Cutout2D(data, SkyCoord(ra[i], dec[i], unit="deg"), SIZE, wcs=wcs, copy=True)
            if not np.array_equal(stamps[i], cut.data):
                raise AssertionError(f"stamp {i} differs from Cutout2D")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = WCS(headers[i].to_astropy())
            got = np.array(ours.all_pix2world(grid, grid[::-1], 0))
            want = np.array(cut.wcs.all_pix2world(grid, grid[::-1], 0))
            if np.abs(got - want).max() > 1e-9:
                raise AssertionError(f"stamp {i}: WCS differs from Cutout2D's by "
                                     f"{np.abs(got - want).max()} deg")
    return len(sample)


def report(repeat: int = 3, n: int = 10_000) -> str:
    """Run the benchmark; return its markdown section."""
    from astropy.coordinates import SkyCoord
    from astropy.io import fits
    from astropy.nddata import Cutout2D
    from astropy.wcs import WCS

    import torchfits

    with tempfile.TemporaryDirectory(prefix="tf-sky-cutouts-") as tmp:
        log(f"writing a {SIDE}² float32 TAN-SIP image and {n} positions")
        path, ra, dec = _make(Path(tmp), n)

        def ours_lazy():
            return torchfits.cutouts(path, ra=ra, dec=dec, size=SIZE)

        def ours_built():
            stamps, headers = torchfits.cutouts(path, ra=ra, dec=dec, size=SIZE)
            return stamps, list(headers)

        def ours_no_headers():
            return torchfits.cutouts(path, ra=ra, dec=dec, size=SIZE, headers=False)

        hdul = fits.open(path, memmap=True)
        data = hdul[0].data
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wcs = WCS(hdul[0].header)
        sky = SkyCoord(ra, dec, unit="deg")

        def cutout2d_loop(count: int = n):
            return [Cutout2D(data, sky[i], SIZE, wcs=wcs, copy=True) for i in range(count)]

        def world2pix_loop(count: int = n):
            x, y = wcs.all_world2pix(ra[:count], dec[:count], 0)
            return [Cutout2D(data, (x[i], y[i]), SIZE, wcs=wcs, copy=True) for i in range(count)]

        stamps, headers = ours_lazy()
        checked = _check(path, ra, dec, stamps, headers)
        log(f"checked {checked} stamps against Cutout2D: data and WCS equal")
        mine = measure_group({"lazy": Case(ours_lazy), "built": Case(ours_built),
                              "none": Case(ours_no_headers)}, repeat, warmup=1)
        cutout2d_loop(200)
        world2pix_loop(200)
        anchors = measure_group({"skycoord": Case(cutout2d_loop, budget_s=60, min_repeat=1),
                                 "pixels": Case(world2pix_loop, budget_s=60, min_repeat=1)},
                                repeat, warmup=0)
        hdul.close()
    base = anchors["skycoord"].best
    rows = [
        ["astropy `Cutout2D` loop (SkyCoord positions)", fmt_ms(base), fmt_ratio(1.0)],
        ["astropy `all_world2pix` once + `Cutout2D` loop (pixel positions)",
         fmt_ms(anchors["pixels"].best), fmt_ratio(base / anchors["pixels"].best)],
        ["`torchfits.cutouts` (headers: the lazy sequence)", fmt_ms(mine["lazy"].best),
         fmt_ratio(base / mine["lazy"].best)],
        ["`torchfits.cutouts` + every header built", fmt_ms(mine["built"].best),
         fmt_ratio(base / mine["built"].best)],
        ["`torchfits.cutouts(headers=False)`", fmt_ms(mine["none"].best),
         fmt_ratio(base / mine["none"].best)],
    ]
    text = [
        "### Sky cutouts\n",
        f"{n:,} stamps of {SIZE}x{SIZE} around (RA, Dec) positions of a {SIDE}² float32 TAN-SIP "
        f"image (64 MiB, in the page cache); every stamp inside the image. Best of {repeat} after "
        f"a warm-up; speed-up against the `Cutout2D` loop. Data and WCS of {checked} stamps "
        "checked equal to `Cutout2D`'s (WCS to 1e-9 deg).\n",
        markdown_table(["case", "time (ms)", "speed-up"], rows),
        "",
        "Command: `python benchmarks/sky_cutouts.py`",
    ]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n", type=int, default=10_000)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(report(args.repeat, args.n))
    log(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

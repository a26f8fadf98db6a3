"""Tile-compressed image reads: torchfits against fitsio, astropy and torchfits 1.2.3.

Full 4096 x 4096 reads of an int16 RICE_1 image, a quantised float32 RICE_1 image, a lossless
float32 GZIP_2 image, an int16 HCOMPRESS_1 image and an int32 PLIO_1 mask (all written by
fitsio, i.e. CFITSIO, with its default tiles), and 1,000 64 x 64 cutouts from the RICE_1 image.

    python benchmarks/run_compressed.py [--repeat 7] [--cutouts 1000] [--no-incumbent] [--only GZIP]

Prints a markdown report; every library's result is checked against fitsio's first.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # noqa: E402
from _harness import (  # noqa: E402
    BENCH_DIR,
    Case,
    DigestStream,
    array_digest,
    compare_digest,
    fmt_ms,
    log,
    machine_info,
    markdown_table,
    measure_group,
    run_worker,
)

SIZE = 4096
INCUMBENT_PYTHON = BENCH_DIR / ".venv-tf123" / "bin" / "python"
INCUMBENT_WORKER = BENCH_DIR / "incumbent_worker.py"


def _data(kind: str) -> np.ndarray:
    rng = np.random.default_rng(20240611)
    y, x = np.mgrid[:SIZE, :SIZE].astype(np.float32)
    sky = 1000 + 40 * np.sin(x / 300) * np.cos(y / 250)
    if kind == "int16":
        return (sky + rng.normal(0, 12, (SIZE, SIZE))).astype(np.int16)
    if kind == "float32":
        return (sky + rng.normal(0, 12, (SIZE, SIZE))).astype(np.float32)
    mask = np.zeros((SIZE, SIZE), np.int32)
    for _ in range(4000):
        cy, cx, r = rng.integers(0, SIZE, 2).tolist() + [int(rng.integers(2, 30))]
        mask[max(0, cy - r):cy + r, max(0, cx - r):cx + r] = int(rng.integers(1, 1 << 20))
    return mask


FILES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "int16 RICE_1": ("cmp_i16_rice.fits", "int16", {"compress": "RICE_1"}),
    "float32 RICE_1 (q=4, dither 1)": ("cmp_f32_rice.fits", "float32",
                                       {"compress": "RICE_1", "qlevel": 4.0,
                                        "qmethod": "SUBTRACTIVE_DITHER_1", "dither_seed": 1}),
    "float32 GZIP_2 lossless": ("cmp_f32_gzip2.fits", "float32", {"compress": "GZIP_2", "qlevel": 0}),
    "int16 HCOMPRESS_1": ("cmp_i16_hcomp.fits", "int16", {"compress": "HCOMPRESS_1"}),
    "int32 PLIO_1 mask": ("cmp_i32_plio.fits", "mask", {"compress": "PLIO_1"}),
}


def ensure_files() -> dict[str, Path]:
    import fitsio

    generate.DATA_DIR.mkdir(parents=True, exist_ok=True)
    out = {}
    for label, (name, kind, kw) in FILES.items():
        path = generate.DATA_DIR / name
        if not path.exists():
            log(f"writing {path.name} ...")
            tmp = path.with_suffix(".tmp")
            if tmp.exists():
                tmp.unlink()
            fitsio.write(str(tmp), _data(kind), **kw)
            tmp.rename(path)
        out[label] = path
    return out


def _incumbent(jobs: list[dict[str, Any]], enabled: bool) -> list[dict[str, Any]] | None:
    if not enabled or not INCUMBENT_PYTHON.exists():
        return None
    try:
        return run_worker(INCUMBENT_PYTHON, INCUMBENT_WORKER, {"jobs": jobs}, cwd=generate.DATA_DIR)
    except Exception as exc:  # the incumbent may not read a codec; report, keep going
        log(f"incumbent failed: {exc}")
        return None


def full_reads(files: dict[str, Path], repeat: int, incumbent: bool) -> list[list[str]]:
    import fitsio
    from astropy.io import fits

    import torchfits

    rows = []
    for label, path in files.items():
        ref = fitsio.read(str(path), ext=1)
        want = array_digest(ref)

        def astropy_read(p: Path = path) -> Any:
            with fits.open(p) as hl:
                return np.asarray(hl[1].data)

        cases: dict[str, Callable[[], Any]] = {
            "fitsio": lambda p=path: fitsio.read(str(p), ext=1),
            "astropy": astropy_read,
            "torchfits 1 thread": lambda p=path: torchfits.read_numpy(p, 1, threads=1),
            "torchfits 2 threads": lambda p=path: torchfits.read_numpy(p, 1, threads=2),
        }
        for name, fn in cases.items():
            problem = compare_digest(array_digest(fn()), want)
            if problem:
                raise SystemExit(f"{label}: {name} disagrees with fitsio: {problem}")
        timings = measure_group({k: Case(v, budget_s=20.0) for k, v in cases.items()}, repeat)
        medians = {k: t.median for k, t in timings.items()}
        inc = _incumbent([{"kind": "image_read", "path": str(path), "hdu": 1, "repeat": repeat,
                           "budget_s": 20.0}], incumbent)
        if inc:
            reply = inc[0]
            medians["torchfits 1.2.3"] = float(reply["timing"]["median_s"])
            problem = compare_digest(reply["check"], want)
            if problem:
                log(f"{label}: torchfits 1.2.3 disagrees with fitsio ({problem}); timing kept, flagged")
        anchors = {k: v for k, v in medians.items()
                   if not k.startswith("torchfits ") or k == "torchfits 1.2.3"}
        best_anchor = min(anchors, key=anchors.get)  # type: ignore[arg-type]
        rows.append([label, fmt_ms(medians["fitsio"]), fmt_ms(medians["astropy"]),
                     fmt_ms(medians.get("torchfits 1.2.3")), fmt_ms(medians["torchfits 1 thread"]),
                     fmt_ms(medians["torchfits 2 threads"]),
                     f"{anchors[best_anchor] / medians['torchfits 2 threads']:.2f}× vs {best_anchor}",
                     f"{medians['fitsio'] / medians['torchfits 1 thread']:.2f}×"])
        log(label, {k: round(v * 1e3, 1) for k, v in medians.items()})
    return rows


def cutouts(path: Path, n: int, repeat: int, incumbent: bool) -> list[list[str]]:
    import fitsio
    from astropy.io import fits

    import torchfits

    rng = np.random.default_rng(7)
    boxes = [(int(x), int(y), int(x) + 64, int(y) + 64) for x, y in rng.integers(0, SIZE - 64, (n, 2))]

    def fitsio_cutouts() -> Any:
        with fitsio.FITS(str(path)) as f:
            hdu = f[1]
            return [hdu[y1:y2, x1:x2] for x1, y1, x2, y2 in boxes]

    def astropy_cutouts() -> Any:
        with fits.open(path) as hl:
            sec = hl[1].section
            return [sec[y1:y2, x1:x2] for x1, y1, x2, y2 in boxes]

    def torchfits_cutouts() -> Any:
        img = torchfits.open_image(path, 1)  # a fresh reader: its tile cache starts empty
        return [img[y1:y2, x1:x2] for x1, y1, x2, y2 in boxes]

    cases = {"fitsio": fitsio_cutouts, "astropy (.section)": astropy_cutouts,
             "torchfits (open_image, cold cache)": torchfits_cutouts}
    stream = DigestStream()
    for c in fitsio_cutouts():
        stream.add(c)
    want = stream.result()
    for name, fn in cases.items():
        s = DigestStream()
        for c in fn():
            s.add(c)
        problem = compare_digest(s.result(), want)
        if problem:
            raise SystemExit(f"cutouts: {name} disagrees with fitsio: {problem}")
    timings = measure_group({k: Case(v, budget_s=30.0, min_repeat=2) for k, v in cases.items()}, repeat)
    medians = {k: t.median for k, t in timings.items()}
    inc = _incumbent([{"kind": "cutouts", "path": str(path), "hdu": 1, "boxes": boxes,
                       "repeat": max(2, repeat // 2), "budget_s": 30.0}], incumbent)
    if inc:
        medians["torchfits 1.2.3 (open_subset_reader)"] = float(inc[0]["timing"]["median_s"])
    ours = medians["torchfits (open_image, cold cache)"]
    log("cutouts", {k: round(v * 1e3, 1) for k, v in medians.items()})
    return [[k, fmt_ms(v), f"{v / ours:.1f}×"] for k, v in medians.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cutouts", type=int, default=1000)
    parser.add_argument("--no-incumbent", action="store_true")
    parser.add_argument("--only", default="", help="full reads of the files whose label contains "
                        "this text (e.g. GZIP); --cutouts 0 skips the cutouts")
    args = parser.parse_args(argv)
    files = ensure_files()
    selected = {k: v for k, v in files.items() if args.only.lower() in k.lower()}
    info = machine_info()
    print("## Tile-compressed images (`benchmarks/run_compressed.py`)\n")
    print(f"`python benchmarks/run_compressed.py --repeat {args.repeat}` on "
          f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores; medians of interleaved rounds, "
          "ms. Files written by fitsio (CFITSIO) with its default tiles (one row per tile; 16 "
          "rows for HCOMPRESS_1); 4096 × 4096. Every result checked against fitsio.\n")
    rows = full_reads(selected, args.repeat, not args.no_incumbent)
    print(markdown_table(["file", "fitsio", "astropy", "torchfits 1.2.3", "torchfits 1 thr",
                          "torchfits 2 thr", "2 thr vs fastest anchor", "1 thr vs fitsio"], rows,
                         align="lrrrrrrr"))
    if args.cutouts <= 0:
        return 0
    print()
    print(f"{args.cutouts} random 64 × 64 cutouts from the int16 RICE_1 file, one open reader per "
          "repetition:\n")
    print(markdown_table(["library", "time", "vs torchfits"],
                         cutouts(files["int16 RICE_1"], args.cutouts, max(3, args.repeat // 2),
                                 not args.no_incumbent), align="lrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

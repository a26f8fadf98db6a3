"""Write benchmarks: a 4096² float32 image and the 2M-row catalog, torchfits against its floor
and the astropy / fitsio anchors, all in one run.

Usage: ``python benchmarks/run_write.py [--repeat N] [--quick] [--json PATH] [--markdown]``
with the dev venv. The floor is a byte-swapping copy of the same bytes into FITS (big-endian)
order plus the file write and fsync — what a durable writer must at least do (torchfits fsyncs
every write, then renames a temporary file over the target). "floor without fsync" is the same
without the fsync; astropy and fitsio do not fsync.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402
from _harness import Case, fmt_ms, fmt_ratio, log, machine_info, markdown_table, measure_group  # noqa: E402

OUT_DIR = generate.DATA_DIR / "_write"
TARGET = 1.3


def _write_bytes(path: Path, *buffers: Any, sync: bool = True) -> None:
    with open(path, "wb") as fh:
        for b in buffers:
            fh.write(memoryview(b).cast("B"))
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


def _cases(path: Path, header: bytes, swapped: Callable[[], Any], ours: dict[str, Case], hdu_class: str,
           data: Any, budget_s: float) -> dict[str, Case]:
    """The two floors (``swapped()`` bytes after ``header``, with and without fsync), ``ours``, then
    the astropy (``fits.<hdu_class>(data)``) and fitsio anchors where they are installed."""
    cases = {
        "floor (swap copy + write)": Case(lambda: _write_bytes(path, header, swapped())),
        "floor without fsync": Case(lambda: _write_bytes(path, header, swapped(), sync=False)),
        **ours,
    }
    try:
        from astropy.io import fits

        hdu = getattr(fits, hdu_class)
        cases["astropy"] = Case(lambda: hdu(data).writeto(path, overwrite=True), budget_s=budget_s)
    except ImportError:
        pass
    try:
        import fitsio

        cases["fitsio"] = Case(lambda: fitsio.write(str(path), data, clobber=True), budget_s=budget_s)
    except ImportError:
        pass
    return cases


def image_cases() -> tuple[dict[str, Case], str]:
    import torchfits.writing.api as tw

    rng = np.random.default_rng(0)
    image = rng.normal(size=(4096, 4096)).astype(np.float32)
    path = OUT_DIR / "image.fits"
    cases = _cases(path, b" " * 2880, lambda: image.astype(">f4"),
                   {"torchfits": Case(lambda: tw.write(path, image, overwrite=True))},
                   "PrimaryHDU", image, budget_s=20)
    return cases, "4096×4096 float32 image (64 MiB)"


def catalog_cases() -> tuple[dict[str, Case], str]:
    import torchfits
    import torchfits.writing.api as tw

    src = generate.ensure("catalog_2m", verbose=False)
    table = torchfits.scan(str(src)).to_arrow()
    columns = {name: table.column(name).to_numpy() for name in table.column_names}
    columns["kind"] = np.asarray(columns["kind"]).astype("S8")
    native = np.empty(table.num_rows, dtype=[(k, v.dtype) for k, v in columns.items()])
    for k, v in columns.items():
        native[k] = v
    big = native.dtype.newbyteorder(">")
    path = OUT_DIR / "catalog.fits"
    ours = {
        "torchfits (Arrow table)": Case(lambda: tw.write(path, table, overwrite=True)),
        "torchfits (dict of arrays)": Case(lambda: tw.write(path, columns, overwrite=True)),
    }
    cases = _cases(path, b" " * 5760, lambda: native.astype(big), ours, "BinTableHDU", native, budget_s=30)
    mib = native.nbytes / 2**20
    return cases, f"2M-row catalog, {len(columns)} columns ({mib:.0f} MiB of rows)"


def run(repeat: int) -> list[dict[str, Any]]:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    sections = []
    for build in (image_cases, catalog_cases):
        cases, title = build()
        log(f"timing {title} ...")
        timings = measure_group(cases, repeat)
        floor = timings["floor (swap copy + write)"].median
        rows = []
        for label, t in timings.items():
            rows.append({"case": label, "median_s": t.median, "ratio": t.median / floor})
        sections.append({"title": title, "rows": rows})
    for p in OUT_DIR.glob("*.fits"):
        p.unlink()
    return sections


def to_markdown(sections: list[dict[str, Any]]) -> str:
    out = []
    for s in sections:
        out.append(f"**{s['title']}**\n")
        rows = [(r["case"], fmt_ms(r["median_s"]), fmt_ratio(r["ratio"])) for r in s["rows"]]
        out.append(markdown_table(["case", "median", "× floor"], rows))
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repetitions")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args(argv)
    sections = run(3 if args.quick else args.repeat)
    print(to_markdown(sections))
    info = machine_info()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    for s in sections:
        ours = [r for r in s["rows"] if r["case"].startswith("torchfits")]
        worst = max(r["ratio"] for r in ours)
        print(f"{s['title']}: torchfits ≤ {worst:.2f}× floor (target {TARGET}×): "
              f"{'met' if worst <= TARGET else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "sections": sections}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

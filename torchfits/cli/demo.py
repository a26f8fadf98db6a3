"""``torchfits demo``: write a small sample image and catalog, then read them every main way.

It doubles as a smoke test of an installation: each step prints what it read.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile

import numpy as np


def make_sample_files(directory: str) -> tuple[str, str]:
    """Write ``sample_image.fits`` (an empty primary, a 256×256 float32 field with sources named
    SCI, and a uint16 mask named MASK) and ``sample_catalog.fits`` (10,000-row catalog) into ``directory``."""
    from ..writing import api as writer

    rng = np.random.default_rng(42)
    y, x = np.mgrid[0:256, 0:256]
    image = rng.normal(100.0, 5.0, (256, 256)).astype(np.float32)
    for cx, cy, flux in rng.uniform([10, 10, 200], [246, 246, 5000], (25, 3)):
        image += (flux * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / 8.0)).astype(np.float32)
    mask = (image > 300).astype(np.uint16) * 4
    image_path = os.path.join(directory, "sample_image.fits")
    writer.write(image_path, [
        {"data": np.empty(0, np.uint8), "header": {"TELESCOP": "torchfits demo"}},
        {"data": image, "header": {"OBJECT": ("demo field", "synthetic"), "EXPTIME": 30.0,
                                   "EXTNAME": "SCI"}},
        {"data": mask, "header": {"EXTNAME": "MASK"}},
    ], overwrite=True)

    n = 10_000
    catalog = {
        "id": np.arange(n, dtype=np.int64),
        "ra": rng.uniform(0, 360, n),
        "dec": np.degrees(np.arcsin(rng.uniform(-1, 1, n))),
        "mag_g": rng.normal(19, 1.5, n).astype(np.float32),
        "mag_r": rng.normal(18.5, 1.5, n).astype(np.float32),
        "flags": rng.integers(0, 16, n).astype(np.int32),
        "star": rng.random(n) < 0.3,
        "name": [f"obj{i:05d}" for i in range(n)],
    }
    catalog_path = os.path.join(directory, "sample_catalog.fits")
    writer.write(catalog_path, catalog, header={"EXTNAME": "CATALOG"}, overwrite=True)
    return image_path, catalog_path


def run_demo(directory: str | None = None, *, keep: bool = False) -> None:
    import torchfits

    made_temp = directory is None
    directory = directory or tempfile.mkdtemp(prefix="torchfits-demo-")
    os.makedirs(directory, exist_ok=True)
    try:
        image_path, catalog_path = make_sample_files(directory)
        print(f"Sample files in {directory}\n")

        print("== torchfits.info ==")
        for path in (image_path, catalog_path):
            for h in torchfits.info(path):
                if h.nrows is not None:
                    what = f"{h.nrows} rows x {h.ncols} columns"
                else:
                    what = f"shape={h.shape} dtype={h.dtype}"
                print(f"  {os.path.basename(path)}[{h.index}] {h.name:<8} {h.kind:<9} {what}")

        print("\n== header ==")
        header = torchfits.read_header(image_path, "SCI")
        print(f"  OBJECT={header['OBJECT']!r} ({header.comments['OBJECT']}), EXPTIME={header['EXPTIME']}")

        print("\n== image read (NumPy) ==")
        image = torchfits.read_numpy(image_path, "SCI")
        print(f"  {image.shape} {image.dtype}: min={image.min():.1f} max={image.max():.1f} "
              f"mean={image.mean():.2f}")
        cutout = torchfits.open_image(image_path, "SCI")[100:132, 50:82]
        print(f"  cutout [100:132, 50:82] -> {cutout.shape}, sum={cutout.sum():.1f}")

        print("\n== table scan with a where-filter (Arrow) ==")
        where = "mag_r < 16 AND ra BETWEEN 10 AND 100"
        scanner = torchfits.scan(catalog_path, "CATALOG", columns=["id", "ra", "mag_r", "name"], where=where)
        table = scanner.to_arrow()
        print(f"  where {where!r}: {table.num_rows} of {torchfits.read_nrows(catalog_path, 1)} rows")
        print("  " + table.slice(0, 5).to_pandas().to_string(index=False).replace("\n", "\n  ")
              if importlib.util.find_spec("pandas") else f"  {table.slice(0, 5).to_pylist()}")

        print("\n== tensors ==")
        if importlib.util.find_spec("torch") is None:
            print("  torch is not installed: pip install 'torchfits[torch]' for tensor output")
        else:
            tensor = torchfits.open_image(image_path, "SCI").to_torch()
            print(f"  open_image(...).to_torch() -> {type(tensor).__module__}.{type(tensor).__name__} "
                  f"{tuple(tensor.shape)} {tensor.dtype}")
            columns = torchfits.scan(catalog_path, columns=["ra", "dec", "mag_g", "mag_r"],
                                     where="star == True").to_torch()
            print("  scan(...).to_torch() -> " + ", ".join(
                f"{k}: {tuple(v.shape)} {v.dtype}" for k, v in columns.items()))
    finally:
        if made_temp and not keep:
            shutil.rmtree(directory, ignore_errors=True)

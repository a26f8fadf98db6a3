"""Transform throughput: torchfits.transforms on a batch vs astropy on the same images.

A batch of B single-channel stamps (default 256 of 64x64 float32, sky noise plus sources) goes
through each torchfits transform in one call; the anchors are astropy's equivalents, called
per image in a loop (what a Dataset transform does) and, where astropy takes an ``axis``, on
the whole stack at once. Reported: images per second and the ratio to the fastest anchor.

Usage: python benchmarks/run_transforms.py [--batch 256] [--size 64] [--device cpu|cuda]
       [--repeat 7] [--threads N] [--append]
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import REPO_ROOT, Case, fmt_ms, fmt_ratio, log, machine_info, markdown_table, measure_group  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))


def stamps(batch: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = rng.normal(100.0, 5.0, (batch, size, size)).astype(np.float32)
    y, x = np.mgrid[0:size, 0:size]
    for i in range(batch):
        for cx, cy, flux in rng.uniform([4, 4, 100], [size - 4, size - 4, 3000], (3, 3)):
            a[i] += (flux * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / 4.0)).astype(np.float32)
    return a


def cases(a: np.ndarray, device: str) -> dict[str, dict[str, Callable[[], Any]]]:
    import torch
    from astropy import visualization as viz
    from astropy.stats import mad_std, sigma_clip

    import torchfits.transforms as T

    x = torch.from_numpy(a).unsqueeze(1).to(device)  # (B, 1, H, W)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def run(t: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        def call() -> Any:
            out = t(*args)
            sync()
            return out
        return call

    def zscale_loop() -> Any:
        out = []
        for img in a:
            lo, hi = viz.ZScaleInterval().get_limits(img)
            out.append((img - lo) / (hi - lo))
        return out

    def sigma_loop() -> Any:
        return [sigma_clip(img, sigma=3, maxiters=5, cenfunc="mean", stdfunc="std") for img in a]

    def robust_loop() -> Any:
        return [(img - np.median(img)) / mad_std(img) for img in a]

    def lupton_loop() -> Any:
        return [viz.make_lupton_rgb(img, img * 0.8, img * 0.6, stretch=0.5, Q=8,
                                    output_dtype=np.float64) for img in a]

    asinh = viz.AsinhStretch(a=10.0)
    pct = viz.AsymmetricPercentileInterval(1, 99)
    return {
        "ZScaleNormalize(iraf)": {
            "torchfits batch": run(T.ZScaleNormalize(algorithm="iraf"), x),
            "astropy ZScaleInterval loop": zscale_loop,
        },
        "ArcsinhStretch": {
            "torchfits batch": run(T.ArcsinhStretch(0.1), x),
            "astropy AsinhStretch loop": lambda: [asinh(img, clip=False) for img in a],
            "astropy AsinhStretch stack": lambda: asinh(a, clip=False),
        },
        "PercentileClipNormalize": {
            "torchfits batch": run(T.PercentileClipNormalize(1, 99), x),
            "astropy percentile loop": lambda: [np.clip((img - lo) / (hi - lo), 0, 1)
                                                for img in a for lo, hi in [pct.get_limits(img)]],
        },
        "RobustNormalize": {
            "torchfits batch": run(T.RobustNormalize(), x),
            "numpy/astropy mad_std loop": robust_loop,
            "numpy/astropy mad_std stack": lambda: (a - np.median(a, axis=(1, 2), keepdims=True))
            / mad_std(a, axis=(1, 2))[:, None, None],
        },
        "SigmaClip": {
            "torchfits batch": run(T.SigmaClip(), x),
            "astropy sigma_clip loop": sigma_loop,
            "astropy sigma_clip stack": lambda: sigma_clip(a, sigma=3, maxiters=5, cenfunc="mean",
                                                           stdfunc="std", axis=(1, 2)),
        },
        "lupton_rgb": {
            "torchfits batch": run(T.lupton_rgb, x[:, 0], x[:, 0] * 0.8, x[:, 0] * 0.6),
            "astropy make_lupton_rgb loop": lupton_loop,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default); NumPy/astropy run on one")
    ap.add_argument("--append", action="store_true", help="append the section to docs/benchmarks.md")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    a = stamps(args.batch, args.size)
    rows = []
    for name, group in cases(a, args.device).items():
        log(f"timing {name}")
        timings = measure_group({label: Case(fn) for label, fn in group.items()}, args.repeat)
        ours = timings["torchfits batch"].median
        anchors = {k: t.median for k, t in timings.items() if k != "torchfits batch"}
        best = min(anchors.values())
        for label, t in timings.items():
            rate = args.batch / t.median
            ratio = best / ours if label == "torchfits batch" else None
            rows.append([name, label, fmt_ms(t.median), f"{rate:,.0f}", fmt_ratio(ratio)])
    info = machine_info()
    section = "\n".join([
        f"### Transforms: {args.batch} stamps of {args.size}x{args.size} float32, "
        f"device {args.device}",
        "",
        f"`python benchmarks/run_transforms.py --batch {args.batch} --size {args.size} "
        f"--device {args.device} --threads {args.threads}` (torch threads: "
        f"{torch.get_num_threads()}); {info.get('cpu', '')}, {info.get('date', '')}. Median of "
        f"{args.repeat} interleaved rounds; the ratio is the fastest anchor's time over ours.",
        "",
        markdown_table(["transform", "case", "ms / batch", "images / s", "speed-up"], rows),
        "",
    ])
    print(section)
    if args.append:
        with open(REPO_ROOT / "docs" / "benchmarks.md", "a") as fh:
            fh.write("\n" + section)


if __name__ == "__main__":
    main()

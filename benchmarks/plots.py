"""Draw one PNG per section of docs/benchmarks.md from the tables the page itself reports.

Usage: ``python benchmarks/plots.py [--page docs/benchmarks.md] [--out docs/img]`` (needs
matplotlib: ``pip install torchfits[bench]``). Each ``## `` section becomes
``<out>/bench_<slug>.png``: one horizontal bar chart per results table in the section (its first
column against its time column, in ms; log scale when the values span > 30×), so the pictures
never disagree with the numbers next to them. Rerun it after pasting a runner's new report into the page.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_TIME_HEADER = re.compile(r"median|ms|time|fitsio|torchfits", re.I)


def slug(title: str) -> str:
    """The file-name part of a section title: ``Tables (`run_tables.py`)`` → ``tables``."""
    words = re.sub(r"\(.*?\)|`", " ", title).lower()
    return re.sub(r"[^a-z0-9]+", "_", words).strip("_")[:40] or "section"


_SECONDS = re.compile(r"^([0-9]*\.?[0-9]+)\s*s\b")


def _number(cell: str) -> float | None:
    """A cell's value in ms: a plain number (ms), or ``0.166 s (...)`` (seconds, converted)."""
    text = cell.strip().replace(",", "").replace("×", "").replace("*", "")
    try:
        return float(text)
    except ValueError:
        pass
    seconds = _SECONDS.match(text)
    return float(seconds.group(1)) * 1000.0 if seconds else None


def parse_sections(page: str) -> dict[str, list[tuple[str, list[str], list[float]]]]:
    """``{section title: [(table caption, labels, ms values), ...]}`` for every markdown table
    under a ``## `` heading that has a time column."""
    sections: dict[str, list[tuple[str, list[str], list[float]]]] = {}
    title, caption = "", ""
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            title, caption = line[3:].strip(), ""
        elif line.startswith("### "):
            caption = line[4:].strip().strip("`")
        elif line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1]):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            usable = [k for k, h in enumerate(header) if k and _TIME_HEADER.search(h)
                      and "×" not in h and any(_number(r[k]) is not None for r in rows if k < len(r))]
            # the newest median when a table shows before and after
            preferred = [k for k in usable if "after" in header[k].lower() and "median" in header[k].lower()]
            col = (preferred or usable or [None])[0]
            if title and col is not None:
                pairs = [(r[0], _number(r[col])) for r in rows if col < len(r)]
                labels = [a for a, b in pairs if b is not None and b > 0]
                values = [b for _, b in pairs if b is not None and b > 0]
                if values:
                    sections.setdefault(title, []).append(
                        (f"{caption} — {header[col]}" if caption else header[col], labels, values))
            continue
        i += 1
    return sections


def draw(title: str, tables: list[tuple[str, list[str], list[float]]], out: Path) -> Path:
    """One figure for a section: a bar chart per table, stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = tables[:8]
    heights = [0.9 + 0.28 * len(labels) for _, labels, _ in tables]
    fig, axes = plt.subplots(len(tables), 1, figsize=(9, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (caption, labels, values) in zip(axes[:, 0], tables):
        colors = ["#d62728" if "floor" in lab.lower() or "parquet" in lab.lower() else
                  "#1f77b4" if "torchfits" in lab.lower() and "1.2.3" not in lab else "#7f7f7f"
                  for lab in labels]
        ypos = range(len(labels))
        ax.barh(list(ypos), values, color=colors)
        ax.set_yticks(list(ypos))
        ax.set_yticklabels([lab if len(lab) <= 60 else lab[:57] + "…" for lab in labels], fontsize=7)
        ax.invert_yaxis()
        if max(values) / min(values) > 30:
            ax.set_xscale("log")
        else:
            ax.set_xlim(0, max(values) * 1.12)
        ax.set_title(caption if len(caption) <= 90 else caption[:87] + "…", fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
        for y, v in zip(ypos, values):
            ax.text(v, y, f" {v:g}", va="center", fontsize=6)
    fig.suptitle(f"{title} (ms; red: floor or anchor, blue: torchfits)", fontsize=9)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench_{slug(title)}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    for title, tables in parse_sections(args.page.read_text(encoding="utf-8")).items():
        print(draw(title, tables, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

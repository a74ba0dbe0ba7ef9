"""`adcompare report --figures DIR`: the report's figures as PDF and PNG through matplotlib, for papers.

The page keeps its own SVG writer (svgchart.py: ~10× faster, smaller); this module draws the *same* chart objects
(svgchart.Chart, heatmap.Heatmap) — same data, titles, labels and colours (the page's Okabe–Ito adapter colours,
viridis for time ÷ fastest) — in a paper style: vector text (TrueType fonts embedded in the PDF), thin lines,
no hover. Per figure, `<section>-<title>.pdf` and `.png`; and `figures.pdf` with every figure, one per page.

matplotlib is an optional extra (`pip install 'adcompare[plot]'`, included in `all` and `all-cpu`).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from adcompare.report.heatmap import VIRIDIS, Heatmap, decade
from adcompare.report.svgchart import Chart, Panel

MARKERS = {"circle": "o", "square": "s", "diamond": "D", "triangle": "^", "down": "v", "cross": "x", "plus": "+"}
# Keys typed Any: matplotlib's stubs type rc keys as a Literal of every rcParams name, which a dict of str is not.
STYLE: dict[Any, Any] = {
    "pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8,
    "legend.fontsize": 7, "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.linewidth": 0.6,
    "lines.linewidth": 1.2, "lines.markersize": 3.5, "savefig.dpi": 200, "font.family": "DejaVu Sans"}
INCH = 96.0  # page pixels per inch: a figure keeps the page's proportions


def _dashes(dash: str):
    return "-" if not dash else (0, tuple(float(v) for v in dash.split()))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-").lower()[:80] or "figure"


def _panel(ax, p: Panel) -> None:
    for s in p.series:
        xs = [pt[0] for pt in s.points]
        ys = [pt[1] for pt in s.points]
        if s.band:
            ax.fill_between([b[0] for b in s.band], [b[1] for b in s.band], [b[2] for b in s.band],
                            color=s.style.colour, alpha=0.18, linewidth=0)
        ax.plot(xs, ys, color=s.style.colour, linestyle=_dashes(s.style.dash) if s.style.line else "none",
                marker=MARKERS.get(s.style.marker, "o"), label=s.label)
    if p.xlog:
        ax.set_xscale("log")
    if p.ylog:
        ax.set_yscale("log")
    if p.xcategories:
        ax.set_xscale("linear")
        ax.set_xticks([x for x, _ in p.xcategories], [label for _, label in p.xcategories], rotation=30)
    for y, label in p.hlines:
        ax.axhline(y, color="#475467", linewidth=0.7)
        if label:
            ax.annotate(label, (0.02, y), xycoords=("axes fraction", "data"), fontsize=6, color="#475467",
                        va="bottom")
    if p.hband:
        ax.axhspan(p.hband[0], p.hband[1], color="#98a2b3", alpha=0.2, linewidth=0, label=p.hband[2])
    if p.guides:
        lo, hi = ax.get_xlim()
        for k, label in p.guides:
            ax.plot([lo, hi], [k * lo, k * hi], color="#c0c6cf", linewidth=0.6, linestyle=":")
        ax.set_xlim(lo, hi)
    ax.set_title(p.title)
    ax.set_xlabel(p.xlabel)
    ax.set_ylabel(p.ylabel)
    ax.grid(True, which="major", color="#eaecf0", linewidth=0.5)
    if p.note:
        ax.text(0.02, 0.02, p.note, transform=ax.transAxes, fontsize=6, color="#667085")


def chart_figure(chart: Chart) -> Figure:
    columns = max(1, min(chart.columns, len(chart.panels)))
    rows = math.ceil(len(chart.panels) / columns)
    w, h = chart.panel_size
    fig = Figure(figsize=(max(columns * w, 460) / INCH * 1.15, (rows * h + 70) / INCH * 1.15),
                 layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i < len(chart.panels):
            _panel(ax, chart.panels[i])
        else:
            ax.set_visible(False)
    fig.suptitle(chart.title, fontsize=10, fontweight="bold")
    handles = [Line2D([], [], color=item.style.colour, linestyle=_dashes(item.style.dash) if item.style.line else
                      "none", marker=MARKERS.get(item.style.marker, "o"), label=item.label) for item in chart.legend]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), frameon=False)
    return fig


def heatmap_figure(h: Heatmap) -> Figure:
    """Tiles coloured like the page (10 viridis steps, light = fastest), the same text in each tile."""
    rows, cols = len(h.rows), len(h.columns)
    fig = Figure(figsize=(2.2 + 0.62 * cols, 1.4 + 0.22 * rows), layout="constrained")
    ax = fig.subplots()
    decades = max(1, round(math.log10(h.top)))
    edges = [10 ** (decades * k / (len(VIRIDIS) - 1) - decades / (2 * (len(VIRIDIS) - 1)))
             for k in range(len(VIRIDIS) + 1)]
    norm = BoundaryNorm(edges, len(VIRIDIS))
    for (i, j), t in h.tiles.items():
        ax.add_patch(Rectangle((j, i), 0.96, 0.92, facecolor=t.fill,
                                                  edgecolor="#000" if t.emulated else "none",
                                                  linestyle=":" if t.emulated else "-", linewidth=0.6))
        dark = t.fill in VIRIDIS and VIRIDIS.index(t.fill) >= 5
        ax.text(j + 0.48, i + 0.46, t.text, ha="center", va="center", fontsize=6,
                color="#fff" if dark else "#111")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([j + 0.48 for j in range(cols)], h.columns, rotation=30, ha="left")
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.46 for i in range(rows)], h.rows)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    mappable = ScalarMappable(norm=norm, cmap=ListedColormap(VIRIDIS))
    bar = fig.colorbar(mappable, ax=ax, location="bottom", shrink=0.6, aspect=30)
    bar.set_ticks([10 ** d for d in range(decades + 1)], labels=[decade(d) for d in range(decades + 1)])
    bar.set_label("time ÷ fastest (log scale)")
    fig.suptitle(h.title, fontsize=10, fontweight="bold")
    return fig


def write(figures: Sequence[tuple[str, Chart | Heatmap]], out_dir: Path) -> list[Path]:
    """Write each (section, figure) as PDF and PNG, and figures.pdf with one page per figure; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    used: set[str] = set()
    with matplotlib.rc_context(STYLE), PdfPages(out_dir / "figures.pdf") as book:
        for section, item in figures:
            fig = heatmap_figure(item) if isinstance(item, Heatmap) else chart_figure(item)
            stem = _slug(f"{section}-{item.title}")
            while stem in used:
                stem += "-2"
            used.add(stem)
            for suffix in (".pdf", ".png"):
                fig.savefig(out_dir / (stem + suffix))
                written.append(out_dir / (stem + suffix))
            book.savefig(fig)
    return written + [out_dir / "figures.pdf"]


"""The report's figures drawn: analysis/plots.py's `Plot`s as svgchart charts (see svgchart for why not matplotlib).

Every figure uses one encoding: colour = adapter, dash = variant (solid compiled, dashed eager), × markers and a
dotted line = emulated (a Python loop), so a reader learns it once.
"""
from __future__ import annotations

from dataclasses import replace

from adcompare.analysis.plots import LegendEntry, Line, Plot, PlotPanel
from adcompare.model.measurement import Measurement
from adcompare.model.support import Support
from adcompare.model.units import seconds
from adcompare.report.svgchart import (
    MARKERS,
    PANEL_H,
    PANEL_W,
    Chart,
    LegendItem,
    Palette,
    Panel,
    Series,
    Style,
    compact,
)

# Line dashes by what the variant is, as its measurement records it (Measurement.compiled): compiled code solid
# (or nearly), eager code dashed. The adapter's second variant of one kind (TensorFlow's `graph` beside `compiled`,
# torch's `eager-autograd` beside `eager`) gets the other dash of that kind, so the two stay apart.
DASHES = {True: ("", "10 1.5"), False: ("5 3", "8 3 2 3")}  # compiled?: (first variant, second variant)
FIRST_VARIANTS = ("compiled", "eager")
PROBLEM_MARKER_COLOUR = "#667085"  # the legend's entry for a problem's marker shape (forward vs reverse)


def style(palette: Palette, m: Measurement) -> Style:
    if m.support is Support.EMULATED:
        return Style(palette.colour(m.cell.adapter), "1.5 2.5", "cross")
    first, second = DASHES[m.compiled]
    return Style(palette.colour(m.cell.adapter), first if m.cell.variant in FIRST_VARIANTS else second, "circle")


def _series(palette: Palette, line: Line) -> Series:
    s = style(palette, line.measurement)
    if line.marker is not None:
        s = replace(s, marker=MARKERS[line.marker % len(MARKERS)])
    if not line.line:
        s = replace(s, line=False)
    return Series(line.label, s, line.points, line.band)


def _legend_item(palette: Palette, item: LegendEntry) -> LegendItem:
    if item.measurement is None:
        return LegendItem(item.label, Style(PROBLEM_MARKER_COLOUR, marker=MARKERS[(item.marker or 0) % len(MARKERS)],
                                            line=False))
    s = style(palette, item.measurement)
    return LegendItem(item.label, s if item.line else replace(s, line=False))


def _panel(palette: Palette, p: PlotPanel) -> Panel:
    return Panel(p.title, [_series(palette, line) for line in p.lines], xlabel=p.xlabel, ylabel=p.ylabel,
                 xlog=p.xlog, xformat=seconds if p.x_seconds else compact, yformat=seconds if p.y_seconds else compact,
                 xcategories=p.xcategories, hlines=p.hlines, hband=p.hband, guides=p.guides)


def chart(palette: Palette, plot: Plot) -> Chart:
    """`plot` in the page's encoding; the palette gives each adapter its colour."""
    size = (2 * PANEL_W, 1.5 * PANEL_H) if plot.wide else (PANEL_W, PANEL_H)
    return Chart(plot.title, [_panel(palette, p) for p in plot.panels],
                 [_legend_item(palette, item) for item in plot.legend], columns=plot.columns, panel_size=size)

"""The overview heatmap drawn: analysis/ratio_grid.py's grid of time ÷ fastest as SVG tiles on a log colour scale.

A tile's colour is its ratio on colour-blind-safe viridis (light = fastest), or a grey per glyph for a cell with
no time; an emulated cell has a dotted outline. Hovering a tile shows its ratio, interval and median; clicking it
filters the cell table to it.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

from adcompare.analysis.ratio_grid import Grid
from adcompare.analysis.ratio_grid import Tile as GridTile
from adcompare.report.svgchart import CHAR_W, esc

# viridis, light to dark: 1× is light, slow is dark (readable in grey and for the common colour-vision deficiencies)
VIRIDIS = ("#fde725", "#b5de2b", "#6ece58", "#35b779", "#1f9e89", "#26828e", "#31688e", "#3e4989", "#482878",
           "#440154")
GLYPH_FILLS = {"⊘": "#f3e3e3", "–": "#eeeeee", "·": "#f6f6f6", "✗": "#f4b6b6"}
TILE_W, TILE_H, HEAD_H, LEGEND_H = 62, 20, 70, 46


def colour(ratio: float, top: float) -> str:
    """Colour of `ratio` (≥ 1) on a log scale whose darkest colour is `top`."""
    t = 0.0 if top <= 1 else min(1.0, max(0.0, math.log10(max(ratio, 1.0)) / math.log10(top)))
    return VIRIDIS[round(t * (len(VIRIDIS) - 1))]


@dataclass(frozen=True)
class Tile(GridTile):
    fill: str = ""  # the ratio's colour on the log scale, or the glyph's grey


@dataclass(frozen=True)
class Heatmap(Grid):
    """The grid, its tiles coloured."""

    tiles: Mapping[tuple[int, int], Tile]

    @property
    def svg(self) -> str:
        return render(self)


def _tile(t: GridTile, top: float) -> Tile:
    fill = GLYPH_FILLS[t.text] if t.ratio is None else colour(t.ratio, top)
    return Tile(**{f.name: getattr(t, f.name) for f in fields(t)}, fill=fill)


def drawn(grid: Grid) -> Heatmap:
    """The grid with each tile's colour: its ratio's on the log scale up to the grid's top, or its glyph's grey."""
    return Heatmap(grid.title, grid.rows, grid.columns, {k: _tile(t, grid.top) for k, t in grid.tiles.items()},
                   grid.top, grid.aggregated)


def render(h: Heatmap) -> str:
    label_w = max(80, CHAR_W * max(len(r) for r in h.rows) + 12)
    longest = CHAR_W * max(len(c) for c in h.columns)
    overhang = longest * 0.87 - TILE_W / 2  # the last column label, rotated 30°
    width = max(label_w + TILE_W * len(h.columns) + max(10, overhang), 380)
    head = max(HEAD_H, round(30 + longest * 0.5 + 10))  # the column labels rise above the tiles, under the title
    height = head + TILE_H * len(h.rows) + LEGEND_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" viewBox="0 0 {width:.0f} {height}" '
           f'width="{width:.0f}" height="{height}" role="img" aria-label="{esc(h.title)}">',
           f'<text class="title" x="10" y="17">{esc(h.title)}</text>']
    for j, col in enumerate(h.columns):
        x = label_w + TILE_W * j + TILE_W / 2
        out.append(f'<text class="tick" transform="translate({x:.0f},{head - 6}) rotate(-30)">{esc(col)}</text>')
    for i, row in enumerate(h.rows):
        out.append(f'<text class="tick" x="{label_w - 6:.0f}" y="{head + TILE_H * i + 14}" '
                   f'text-anchor="end">{esc(row)}</text>')
    for (i, j), t in sorted(h.tiles.items()):
        x, y = label_w + TILE_W * j, head + TILE_H * i
        ink = " dark" if t.fill in VIRIDIS and VIRIDIS.index(t.fill) >= 5 else ""
        dash = ' stroke="#000" stroke-dasharray="2 2"' if t.emulated else ""
        out.append(f'<a href="{esc(t.link)}"><rect x="{x:.0f}" y="{y}" width="{TILE_W - 2}" height="{TILE_H - 2}" '
                   f'fill="{t.fill}"{dash}><title>{esc(t.hover)}</title></rect>'
                   f'<text x="{x + TILE_W / 2 - 1:.0f}" y="{y + 13}" text-anchor="middle" '
                   f'class="tile{ink}">{esc(t.text)}</text></a>')
    out += _legend(h, 10, head + TILE_H * len(h.rows) + 10)
    out.append("</svg>")
    return "".join(out)


def decade(d: int) -> str:
    """Tick label of 10^d times: 1×, 10×, 100×, 10³×, …"""
    return f"{10 ** d:,}×" if d < 3 else f"10{str(d).translate(SUPERSCRIPT)}×"


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _legend(h: Heatmap, x0: float, y0: float) -> list[str]:
    out = [f'<text class="tick" x="{x0}" y="{y0 + 12}">time ÷ fastest:</text>']
    x = x0 + 92
    decades = int(round(math.log10(h.top)))
    width = max(120, 40 * decades)
    step, swatch = width / max(1, decades), width / len(VIRIDIS)
    for k, fill in enumerate(VIRIDIS):
        out.append(f'<rect x="{x + k * swatch:.1f}" y="{y0}" width="{swatch + 0.5:.1f}" height="14" fill="{fill}"/>')
    for d in range(decades + 1):
        out.append(f'<text class="tick" x="{x + d * step:.0f}" y="{y0 + 26}" text-anchor="middle">'
                   f'{decade(d)}</text>')
    return out

"""A small SVG chart writer: panels of log/linear line and scatter plots, written straight as text.

Why not matplotlib: it costs 0.1–0.25 s per panel here (ticks, text layout, artists), and a large run has hundreds
of panels (problems × operators × dtypes) — 40 s for a 10,000-cell report against a 5 s goal. Writing the few
shapes these charts need directly takes milliseconds, gives SVGs a fraction of the size, and every string from data
passes through one escape (`esc`). Each point carries a <title>, so hovering shows its value.

Styling (fonts, colours of axes and grid) comes from classes the page's CSS defines; colours of series are
inline because they encode data.
"""
from __future__ import annotations

import html
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

PANEL_W, PANEL_H = 290, 215
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 58, 12, 26, 38
TITLE_H, LEGEND_ROW_H, CHAR_W = 24, 17, 6.1
MARKERS = ("circle", "square", "diamond", "triangle", "down", "cross", "plus")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _f(v: float) -> str:
    """Coordinates to 0.5 px: finer is invisible and costs a tenth of the file."""
    v = round(v * 2) / 2
    return str(int(v)) if v == int(v) else str(v)


@dataclass(frozen=True)
class Style:
    colour: str
    dash: str = ""  # SVG stroke-dasharray; "" solid
    marker: str = "circle"
    line: bool = True  # False: markers only (scatter)


@dataclass(frozen=True)
class Series:
    label: str
    style: Style
    points: Sequence[tuple[float, float, str]]  # x, y, hover text
    band: Sequence[tuple[float, float, float]] = ()  # x, low, high (shaded)


@dataclass(frozen=True)
class Panel:
    title: str
    series: Sequence[Series]
    xlabel: str = ""
    ylabel: str = ""
    xlog: bool = True
    ylog: bool = True
    xformat: Callable[[float], str] = lambda v: compact(v)
    yformat: Callable[[float], str] = lambda v: compact(v)
    xcategories: Sequence[tuple[float, str]] = ()  # fixed ticks with labels (sizes that do not parse)
    hlines: Sequence[tuple[float, str]] = ()  # y, label
    hband: tuple[float, float, str] | None = None  # low, high, label
    guides: Sequence[tuple[float, str]] = ()  # y = k·x diagonals (log–log), k and label
    note: str = ""


@dataclass(frozen=True)
class LegendItem:
    label: str
    style: Style


def compact(value: float) -> str:
    """Tick label: 0.001, 10, 1000, 1e5, 2e-5."""
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


# The float range on a log axis, in decades: the smallest subnormal and the largest float (a hair inside, so that
# 10 ** HUGE_DECADE is still finite). Ranges are padded in decades and clamped to these, so times near 1e308 s or
# 1e-320 s (edited or corrupt files the loader lets through, ratios of them) draw instead of overflowing.
TINY_DECADE = math.log10(math.ulp(0.0))
HUGE_DECADE = math.log10(sys.float_info.max) - 1e-12
LINEAR_LIMIT = sys.float_info.max / 4  # a linear axis within ±this keeps hi − lo and its tick steps finite


@dataclass
class _Scale:
    lo: float
    hi: float
    log: bool
    a: float  # pixel range
    b: float

    def __call__(self, v: float) -> float:
        # beyond what the axis can hold (non-finite, ≤ 0 on a log axis, past LINEAR_LIMIT): on the panel's edge
        if not math.isfinite(v) or (self.log and v <= 0) or (not self.log and abs(v) > LINEAR_LIMIT):
            v = self.hi if v > 0 else self.lo
        if self.log:
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.a + t * (self.b - self.a)


def _range(values: Sequence[float], log: bool) -> tuple[float, float]:
    """The axis range: the values' span padded by 6 % each side (in decades on a log axis), at least a factor 1.5
    wide on a log axis, within the float range."""
    values = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not values:
        return (1.0, 10.0) if log else (0.0, 1.0)
    if log:
        lo, hi = math.log10(min(values)), math.log10(max(values))
        if hi - lo < math.log10(1.5):
            lo, hi = lo - math.log10(1.5), hi + math.log10(1.5)
        pad = (hi - lo) * 0.06
        lo, hi = max(lo - pad, TINY_DECADE), min(hi + pad, HUGE_DECADE)
        return max(10.0 ** lo, math.ulp(0.0)), 10.0 ** hi
    lo, hi = (min(max(v, -LINEAR_LIMIT), LINEAR_LIMIT) for v in (min(values), max(values)))
    if hi == lo:
        step = max(1.0, abs(lo) / 2 ** 20)  # ±1, unless that is lost in lo's rounding (lo = 1e300)
        lo, hi = lo - step, hi + step
    pad = hi * 0.06 - lo * 0.06  # not (hi − lo) · 0.06: hi − lo may overflow
    return max(lo - pad, -LINEAR_LIMIT), min(hi + pad, LINEAR_LIMIT)


def _nice_linear(lo: float, hi: float, count: int = 5) -> list[float]:
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 0.0
    if not mag > 0:  # a span of a few subnormals, 1e-323 s: no step to take (10^-324 underflows to 0)
        return [lo]
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def ticks(lo: float, hi: float, log: bool) -> list[float]:
    if not log:
        return _nice_linear(lo, hi)
    # decades of the float range only: 10.0 ** 309 raises OverflowError
    k0, k1 = max(math.floor(math.log10(lo)), -323), min(math.ceil(math.log10(hi)), 308)
    decades = [10.0 ** k for k in range(k0, k1 + 1) if lo <= 10.0 ** k <= hi]
    step = max(1, math.ceil(len(decades) / 6))
    if len(decades) >= 3:
        return decades[::step]
    for subs in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        found = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in subs if lo <= m * 10.0 ** k <= hi]
        if len(found) >= 3:
            return found
    return [t for t in _nice_linear(lo, hi, 3) if t > 0]


def _marker(kind: str, x: float, y: float, hover: str) -> str:
    """One marker, painted by its group (see _markers)."""
    r = 3
    title = f"<title>{esc(hover)}</title>" if hover else ""
    if kind == "circle":
        return f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3">{title}</circle>'
    shapes = {
        "square": f"M{_f(x - r)} {_f(y - r)}h{2 * r}v{2 * r}h{-2 * r}z",
        "diamond": f"M{_f(x)} {_f(y - r * 1.3)}l{r * 1.3} {r * 1.3}l{-r * 1.3} {r * 1.3}l{-r * 1.3} {-r * 1.3}z",
        "triangle": f"M{_f(x)} {_f(y - r * 1.2)}l{r * 1.2} {r * 2.1}h{-r * 2.4}z",
        "down": f"M{_f(x)} {_f(y + r * 1.2)}l{r * 1.2} {-r * 2.1}h{-r * 2.4}z",
        "cross": f"M{_f(x - r)} {_f(y - r)}l{2 * r} {2 * r}M{_f(x - r)} {_f(y + r)}l{2 * r} {-2 * r}",
        "plus": f"M{_f(x - r)} {_f(y)}h{2 * r}M{_f(x)} {_f(y - r)}v{2 * r}",
    }
    return f'<path d="{shapes.get(kind, shapes["square"])}">{title}</path>'


def _markers(kind: str, colour: str, points: Iterable[tuple[float, float, str]]) -> str:
    paint = f'fill="none" stroke="{colour}" stroke-width="1.6"' if kind in ("cross", "plus") else f'fill="{colour}"'
    return f"<g {paint}>" + "".join(_marker(kind, x, y, hover) for x, y, hover in points) + "</g>"


def _panel(p: Panel, ox: float, oy: float, w: float, h: float) -> list[str]:
    x0, x1 = ox + MARGIN_L, ox + w - MARGIN_R
    y0, y1 = oy + h - MARGIN_B, oy + MARGIN_T
    xs = [pt[0] for s in p.series for pt in s.points] + [c[0] for c in p.xcategories]
    ys = [pt[1] for s in p.series for pt in s.points] + [b for s in p.series for _, lo, hi in s.band for b in (lo, hi)]
    ys += [h[0] for h in p.hlines] + (list(p.hband[:2]) if p.hband else [])
    xlog = p.xlog and not p.xcategories and bool(xs) and min(xs) > 0
    ylog = p.ylog and bool(ys) and min(ys) > 0
    sx = _Scale(*_range(xs, xlog), xlog, x0, x1)
    sy = _Scale(*_range(ys, ylog), ylog, y0, y1)
    out = [f'<text class="pt" x="{_f((x0 + x1) / 2)}" y="{_f(oy + 15)}">{esc(p.title)}</text>']
    if p.xcategories:
        xt = [(c[0], c[1]) for c in p.xcategories]
    elif len(set(xs)) == 1:  # one size: label it, not the padding around it
        xt = [(xs[0], p.xformat(xs[0]))]
    else:
        xt = [(t, p.xformat(t)) for t in ticks(sx.lo, sx.hi, xlog)]
    yt = [(t, p.yformat(t)) for t in ticks(sy.lo, sy.hi, ylog)]
    grid = "".join(f"M{_f(sx(t))} {_f(y0)}V{_f(y1)}" for t, _ in xt)
    grid += "".join(f"M{_f(x0)} {_f(sy(t))}H{_f(x1)}" for t, _ in yt)
    out.append(f'<path class="grid" d="{grid}"/>')
    if p.hband:
        lo, hi, label = p.hband
        top, bottom = sy(hi), sy(lo)
        out.append(f'<rect class="band" x="{_f(x0)}" y="{_f(top)}" width="{_f(x1 - x0)}" '
                   f'height="{_f(max(bottom - top, 1))}"><title>{esc(label)}</title></rect>')
        out.append(f'<text class="note" x="{_f(x0 + 4)}" y="{_f(top - 3)}">{esc(label)}</text>')
    for y, label in p.hlines:
        out.append(f'<path class="ref" d="M{_f(x0)} {_f(sy(y))}H{_f(x1)}"/>')
        if label:
            out.append(f'<text class="note" x="{_f(x1 - 3)}" y="{_f(sy(y) - 3)}" text-anchor="end">{esc(label)}</text>')
    for k, label in p.guides:  # y = k·x, clipped to the panel
        a = max(sx.lo, sy.lo / k)
        b = min(sx.hi, sy.hi / k)
        if a < b:
            out.append(f'<path class="guide" d="M{_f(sx(a))} {_f(sy(a * k))}L{_f(sx(b))} {_f(sy(b * k))}"/>')
            out.append(f'<text class="note" x="{_f(sx(b) - 2)}" y="{_f(sy(b * k) + 10)}" text-anchor="end">'
                       f'{esc(label)}</text>')
    for s in p.series:
        colour = esc(s.style.colour)
        if s.band and len(s.band) > 1:
            upper = " ".join(f"{_f(sx(x))} {_f(sy(hi))}" for x, _, hi in s.band)
            lower = " ".join(f"{_f(sx(x))} {_f(sy(max(lo, sy.lo)))}" for x, lo, _ in reversed(s.band))
            out.append(f'<path d="M{upper} L{lower}z" fill="{colour}" fill-opacity="0.13"/>')
        if s.style.line and len(s.points) > 1:
            d = " ".join(f"{_f(sx(x))} {_f(sy(y))}" for x, y, _ in s.points)
            dash = f' stroke-dasharray="{s.style.dash}"' if s.style.dash else ""
            out.append(f'<path class="line" d="M{d}" stroke="{colour}"{dash}/>')
        out.append(_markers(s.style.marker, colour, ((sx(x), sy(y), hover) for x, y, hover in s.points)))
    out.append(f'<path class="axis" d="M{_f(x0)} {_f(y1)}V{_f(y0)}H{_f(x1)}"/>')
    rotate = bool(p.xcategories) and len(p.xcategories) > 3
    for t, label in xt:
        x = sx(t)
        if rotate:
            out.append(f'<text class="tick" x="{_f(x)}" y="{_f(y0 + 11)}" text-anchor="end" '
                       f'transform="rotate(-30 {_f(x)} {_f(y0 + 11)})">{esc(label)}</text>')
        else:
            out.append(f'<text class="tick" x="{_f(x)}" y="{_f(y0 + 12)}" text-anchor="middle">{esc(label)}</text>')
    for t, label in yt:
        out.append(f'<text class="tick" x="{_f(x0 - 4)}" y="{_f(sy(t) + 3)}" text-anchor="end">{esc(label)}</text>')
    if p.xlabel and not rotate:
        out.append(f'<text class="label" x="{_f((x0 + x1) / 2)}" y="{_f(y0 + 29)}" text-anchor="middle">'
                   f'{esc(p.xlabel)}</text>')
    if p.ylabel:
        cx, cy = ox + 11, (y0 + y1) / 2
        out.append(f'<text class="label" x="{_f(cx)}" y="{_f(cy)}" text-anchor="middle" '
                   f'transform="rotate(-90 {_f(cx)} {_f(cy)})">{esc(p.ylabel)}</text>')
    if p.note:
        out.append(f'<text class="note" x="{_f(x0 + 4)}" y="{_f(y1 + 10)}">{esc(p.note)}</text>')
    return out


def _legend(items: Sequence[LegendItem], width: float, top: float) -> tuple[list[str], float]:
    out, x, y = [], 10.0, top + 11
    for item in items:
        w = 30 + CHAR_W * len(item.label) + 16
        if x + w > width and x > 10:
            x, y = 10.0, y + LEGEND_ROW_H
        colour = esc(item.style.colour)
        if item.style.line:
            dash = f' stroke-dasharray="{item.style.dash}"' if item.style.dash else ""
            out.append(f'<path class="line" d="M{_f(x)} {_f(y - 4)}h22" stroke="{colour}"{dash}/>')
        out.append(_markers(item.style.marker, colour, [(x + 11, y - 4, "")]))
        out.append(f'<text class="legend" x="{_f(x + 28)}" y="{_f(y)}">{esc(item.label)}</text>')
        x += w
    return out, (y - top + 8 if items else 0)


@dataclass(frozen=True)
class Chart:
    """A figure as data: the page draws it with `figure` (SVG); `adcompare report --figures` with matplotlib."""

    title: str
    panels: Sequence[Panel]
    legend: Sequence[LegendItem]
    columns: int = 3
    panel_size: tuple[float, float] = (PANEL_W, PANEL_H)

    @property
    def svg(self) -> str:
        return figure(self.title, self.panels, self.legend, self.columns, self.panel_size)


def figure(title: str, panels: Sequence[Panel], legend: Sequence[LegendItem], columns: int = 3,
           panel_size: tuple[float, float] = (PANEL_W, PANEL_H)) -> str:
    w, h = panel_size
    columns = max(1, min(columns, len(panels)))
    rows = math.ceil(len(panels) / columns)
    width = max(columns * w, 460)
    legend_svg, legend_h = _legend(legend, width, TITLE_H)
    top = TITLE_H + legend_h + 4
    height = top + rows * h
    body = [f'<text class="title" x="10" y="17">{esc(title)}</text>', *legend_svg]
    for i, p in enumerate(panels):
        body += _panel(p, (i % columns) * w, top + (i // columns) * h, w, h)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_f(width)} {_f(height)}" '
            f'width="{_f(width)}" height="{_f(height)}" role="img" aria-label="{esc(title)}">'
            + "".join(body) + "</svg>")


@dataclass
class Palette:
    """Fixed colours for the built-in adapters, then a cycle for third-party ones (stable within a page).

    Okabe & Ito's colour-blind-safe set (the page and the matplotlib figures of paper.py use the same)."""

    fixed: dict[str, str] = field(default_factory=lambda: {
        "jax": "#0072B2", "torch": "#D55E00", "tensorflow": "#E69F00", "autograd": "#009E73"})
    spare: tuple[str, ...] = ("#CC79A7", "#56B4E9", "#000000", "#F0E442", "#999999", "#8C564B")
    given: dict[str, str] = field(default_factory=dict)

    def colour(self, name: str) -> str:
        if name not in self.given:
            self.given[name] = self.fixed.get(name) or self.spare[len(self.given) % len(self.spare)]
        return self.given[name]

"""The report's figures: which cells go on which panel, as svgchart panels (see svgchart for why not matplotlib).

Every figure uses one encoding: colour = adapter, dash = variant (solid compiled, dashed eager), × markers and a
dotted line = emulated (a Python loop), so a reader learns it once.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from adcompare.analysis import relative_cost, sizes
from adcompare.analysis.compile_cost import CompileCost
from adcompare.analysis.dimensions import Dimensions
from adcompare.analysis.summary import entry, operator_order, timed
from adcompare.model.measurement import Measurement
from adcompare.model.support import Support
from adcompare.model.units import seconds
from adcompare.report.svgchart import MARKERS, PANEL_H, PANEL_W, Chart, LegendItem, Palette, Panel, Series, Style

# Line dashes by what the variant is, as its measurement records it (Measurement.compiled): compiled code solid
# (or nearly), eager code dashed. The adapter's second variant of one kind (TensorFlow's `graph` beside `compiled`,
# torch's `eager-autograd` beside `eager`) gets the other dash of that kind, so the two stay apart.
DASHES = {True: ("", "10 1.5"), False: ("5 3", "8 3 2 3")}  # compiled?: (first variant, second variant)
FIRST_VARIANTS = ("compiled", "eager")


def style(palette: Palette, m: Measurement) -> Style:
    if m.support is Support.EMULATED:
        return Style(palette.colour(m.cell.adapter), "1.5 2.5", "cross")
    first, second = DASHES[m.compiled]
    return Style(palette.colour(m.cell.adapter), first if m.cell.variant in FIRST_VARIANTS else second, "circle")


def name(m: Measurement) -> str:
    return entry(m) + (" (emulated)" if m.support is Support.EMULATED else "")


def _legend(series: Iterable[Series]) -> list[LegendItem]:
    seen: dict[str, LegendItem] = {}
    for s in series:
        seen.setdefault(s.label, LegendItem(s.label, s.style))
    return [seen[k] for k in sorted(seen)]


def _lines(palette: Palette, cells: Iterable[Measurement], x: Callable[[Measurement], float],
           y: Callable[[Measurement], float], hover: Callable[[Measurement], str], band: bool = False) -> list[Series]:
    """One series per adapter · variant (· emulated), points sorted by x."""
    groups: dict[str, list[Measurement]] = defaultdict(list)
    for m in cells:
        groups[name(m)].append(m)
    out = []
    for label in sorted(groups):
        ms = sorted(groups[label], key=x)
        points = [(x(m), y(m), hover(m)) for m in ms]
        # IQR-wide band around the median, floored at the fastest sample: a noisy cell's median − IQR/2 can be
        # negative, which would force the whole log axis linear.
        spread = [(x(m), max(t.median - t.iqr / 2, t.min), t.median + t.iqr / 2)
                  for m in ms for t in [m.measured] if not t.few_samples] if band else []  # none to draw for 1–2
        out.append(Series(label, style(palette, ms[0]), points, spread))
    return out


def _x_axis(axis: sizes.Axis) -> dict:
    if axis.name == "size #":
        return {"xcategories": [(x, label) for label, x in sorted(axis.x.items(), key=lambda kv: kv[1])],
                "xlog": False, "xlabel": "size"}
    return {"xlabel": axis.name}


def _title(title: str, axis: sizes.Axis) -> str:
    return f"{title} (slice {axis.caption})" if axis.caption else title


def scaling(palette: Palette, title: str, cells: list[Measurement]) -> Chart | None:
    """Time vs size, log–log, one panel per operator and one line per adapter/variant (IQR shaded)."""
    axis = sizes.axis(m.cell.size for m in cells)
    by_op: dict[str, list[Measurement]] = defaultdict(list)
    for m in cells:
        if timed(m) and m.cell.size in axis.x:
            by_op[m.cell.operator].append(m)
    if len({m.cell.size for ms in by_op.values() for m in ms}) < 2:
        return None  # one size is not a scaling curve; the summary and the table have it
    panels, every = [], []
    for op in sorted(by_op, key=operator_order):
        series = _lines(palette, by_op[op], lambda m: axis.x[m.cell.size], lambda m: m.measured.median,
                        lambda m: f"{entry(m)} {m.cell.size} {seconds(m.measured.median)}", band=True)
        every += series
        panels.append(Panel(op, series, ylabel="seconds per call", yformat=seconds, **_x_axis(axis)))
    return Chart(_title(title, axis), panels, _legend(every), columns=4)


FWD_REV = (("jacfwd", "jacrev"), ("vmap_jacfwd", "vmap_jacrev"))


def forward_reverse(palette: Palette, title: str, cells: list[Measurement], dims: Dimensions) -> Chart | None:
    """Time(forward) ÷ time(reverse) against inputs ÷ outputs; above 1, reverse mode is faster.

    Colour and dash say adapter · variant as everywhere; the marker says which problem a point belongs to, since
    points of every problem share the axes (the crossover is a property of the dimensions, not of the problem).
    """
    index = {m.merge_key: m for m in cells if timed(m)}
    per_panel = []
    for fwd, rev in FWD_REV:
        groups: dict[tuple[str, str], list[tuple[float, float, str, Measurement]]] = defaultdict(list)
        for m in index.values():
            problem, size = m.cell.problem, m.cell.size
            other = index.get(m.twin_key(operator=rev)) if m.cell.operator == fwd else None
            if other is None or (d := dims.of(m)) is None:
                continue
            ratio = m.measured.median / other.measured.median
            hover = f"{entry(m)} {problem} {size}: {d[0]} in, {d[1]} out, ×{ratio:.3g}"
            groups[(name(m), problem)].append((d[0] / d[1], ratio, hover, m))
        if groups:
            per_panel.append((fwd, rev, groups))
    if not per_panel:
        return None
    problems = sorted({problem for _, _, groups in per_panel for _, problem in groups})
    markers = {p: MARKERS[i % len(MARKERS)] for i, p in enumerate(problems)}
    panels, every = [], []
    for fwd, rev, groups in per_panel:
        series = []
        for (label, problem), points in sorted(groups.items()):
            base = style(palette, points[0][3])
            series.append(Series(label, replace(base, marker=markers[problem]), sorted(p[:3] for p in points)))
            every.append(Series(label, base, ()))
        per_example = " (per example)" if fwd.startswith("vmap") else ""
        panels.append(Panel(f"{fwd} ÷ {rev}", series, xlabel="inputs ÷ outputs" + per_example, ylabel="time ratio",
                            hlines=[(1.0, "above: reverse faster")]))
    legend = _legend(every) + [LegendItem(p, Style("#667085", marker=markers[p], line=False)) for p in problems]
    return Chart(title, panels, legend, columns=2)


def relative(palette: Palette, title: str, cells: list[Measurement],
             relative_costs: relative_cost.RelativeCosts) -> Chart | None:
    """J/O against size, one panel per cheap operator, with the cheap-gradient band where it applies."""
    axis = sizes.axis(m.cell.size for m in cells)
    by_op: dict[str, list[Measurement]] = defaultdict(list)
    for m in cells:
        plotted = m.cell.operator in relative_cost.PLOTTED_OPERATORS
        if plotted and m.merge_key in relative_costs and m.cell.size in axis.x:
            by_op[m.cell.operator].append(m)
    if not by_op:
        return None  # (one size is enough here: J/O is a ratio at each size, unlike a scaling curve)
    low, high = relative_cost.CHEAP_GRADIENT_BAND
    panels, every = [], []
    for op in sorted(by_op, key=operator_order):
        series = _lines(palette, by_op[op], lambda m: axis.x[m.cell.size], lambda m: relative_costs[m.merge_key],
                        lambda m: f"{entry(m)} {m.cell.size} ×{relative_costs[m.merge_key]:.3g}")
        every += series
        band = (low, high, f"cheap-gradient bound {low:g}–{high:g}") \
            if op in relative_cost.BOUNDED_OPERATORS else None
        panels.append(Panel(f"{op} ÷ value", series, ylabel="J/O (time ratio)", hlines=[(1.0, "")], hband=band,
                            **_x_axis(axis)))
    return Chart(_title(title, axis), panels, _legend(every), columns=4)


def compile_scatter(palette: Palette, title: str, items: list[CompileCost]) -> Chart | None:
    """Compile time against steady-state time; diagonals mark compile = k steady-state calls."""
    groups: dict[str, list[CompileCost]] = defaultdict(list)
    for k in items:
        if k.compile and k.compile > 0:
            groups[name(k.compiled)].append(k)
    if not groups:
        return None
    series = []
    for label in sorted(groups):
        ks = groups[label]
        base = style(palette, ks[0].compiled)
        points = [(k.compiled.measured.median, compiling,
                   f"{k.compiled.cell.problem} {k.compiled.cell.size} {k.compiled.cell.operator}: "
                   f"{seconds(compiling)}") for k in ks if (compiling := k.compile) is not None]  # all, see above
        series.append(Series(label, replace(base, line=False), points))
    panel = Panel("compile time vs steady-state time (largest size of each cell)", series,
                  xlabel="steady-state seconds per call", ylabel="compile seconds", xformat=seconds,
                  yformat=seconds, guides=[(10.0 ** k, f"= {10 ** k:,} calls") for k in (1, 3, 5, 7)])
    return Chart(title, [panel], _legend(series), columns=1, panel_size=(2 * PANEL_W, 1.5 * PANEL_H))

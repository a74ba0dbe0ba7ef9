"""The report's figures as data: which cells go on which panel, at which coordinates, with what hover text.

report/figures.py draws a `Plot` (colour = adapter, dash = variant, markers, SVG); this module decides what is
plotted: time vs size, forward ÷ reverse against inputs ÷ outputs, J/O against size, compile vs steady-state
time, time per step against the device count.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adcompare.analysis import relative_cost, sizes
from adcompare.analysis.across_devices import DeviceSeries
from adcompare.analysis.compile_cost import CompileCost
from adcompare.analysis.dimensions import Dimensions
from adcompare.analysis.summary import entry, operator_order, timed
from adcompare.model.measurement import Measurement
from adcompare.model.support import Support
from adcompare.model.units import seconds


@dataclass(frozen=True)
class Line:
    """One series: its cells share adapter · variant (· emulated); `measurement` is the one whose adapter, variant
    and support decide the line's style."""

    label: str
    measurement: Measurement
    points: tuple[tuple[float, float, str], ...]  # x, y, hover text
    band: tuple[tuple[float, float, float], ...] = ()  # x, low, high (shaded)
    marker: int | None = None  # the n-th marker shape (one per problem) instead of the style's own
    line: bool = True  # False: markers only (scatter)


@dataclass(frozen=True)
class LegendEntry:
    label: str
    measurement: Measurement | None  # styled like this cell's lines; None: a problem's marker (`marker`) in grey
    marker: int | None = None
    line: bool = True  # False: a marker only, as the scatter's points


@dataclass(frozen=True)
class PlotPanel:
    title: str
    lines: tuple[Line, ...]
    xlabel: str = ""
    ylabel: str = ""
    xlog: bool = True
    x_seconds: bool = False  # tick labels as durations
    y_seconds: bool = False
    xcategories: tuple[tuple[float, str], ...] = ()  # fixed ticks with labels (sizes that do not parse)
    hlines: tuple[tuple[float, str], ...] = ()  # y, label
    hband: tuple[float, float, str] | None = None  # low, high, label
    guides: tuple[tuple[float, str], ...] = ()  # y = k·x diagonals (log–log), k and label


@dataclass(frozen=True)
class Plot:
    title: str
    panels: tuple[PlotPanel, ...]
    legend: tuple[LegendEntry, ...]
    columns: int
    wide: bool = False  # one large panel (the compile scatter)


def name(m: Measurement) -> str:
    return entry(m) + (" (emulated)" if m.support is Support.EMULATED else "")


def _legend(lines: Iterable[Line]) -> tuple[LegendEntry, ...]:
    seen: dict[str, LegendEntry] = {}
    for s in lines:
        seen.setdefault(s.label, LegendEntry(s.label, s.measurement, line=s.line))
    return tuple(seen[k] for k in sorted(seen))


def _lines(cells: Iterable[Measurement], x: Callable[[Measurement], float], y: Callable[[Measurement], float],
           hover: Callable[[Measurement], str], band: bool = False) -> list[Line]:
    """One series per adapter · variant (· emulated), points sorted by x."""
    groups: dict[str, list[Measurement]] = defaultdict(list)
    for m in cells:
        groups[name(m)].append(m)
    out = []
    for label in sorted(groups):
        ms = sorted(groups[label], key=x)
        points = tuple((x(m), y(m), hover(m)) for m in ms)
        # IQR-wide band around the median, floored at the fastest sample: a noisy cell's median − IQR/2 can be
        # negative, which would force the whole log axis linear.
        spread = tuple((x(m), max(t.median - t.iqr / 2, t.min), t.median + t.iqr / 2)
                       for m in ms for t in [m.measured] if not t.few_samples) if band else ()  # none for 1–2
        out.append(Line(label, ms[0], points, spread))
    return out


def _x_axis(axis: sizes.Axis) -> dict:
    if axis.name == "size #":
        return {"xcategories": tuple((x, label) for label, x in sorted(axis.x.items(), key=lambda kv: kv[1])),
                "xlog": False, "xlabel": "size"}
    return {"xlabel": axis.name}


def _title(title: str, axis: sizes.Axis) -> str:
    return f"{title} (slice {axis.caption})" if axis.caption else title


def scaling(title: str, cells: list[Measurement]) -> Plot | None:
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
        series = _lines(by_op[op], lambda m: axis.x[m.cell.size], lambda m: m.measured.median,
                        lambda m: f"{entry(m)} {m.cell.size} {seconds(m.measured.median)}", band=True)
        every += series
        panels.append(PlotPanel(op, tuple(series), ylabel="seconds per call", y_seconds=True, **_x_axis(axis)))
    return Plot(_title(title, axis), tuple(panels), _legend(every), columns=4)


FWD_REV = (("jacfwd", "jacrev"), ("vmap_jacfwd", "vmap_jacrev"))


def forward_reverse(title: str, cells: list[Measurement], dims: Dimensions) -> Plot | None:
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
    markers = {p: i for i, p in enumerate(problems)}
    panels, every = [], []
    for fwd, rev, groups in per_panel:
        series = []
        for (label, problem), points in sorted(groups.items()):
            series.append(Line(label, points[0][3], tuple(sorted(p[:3] for p in points)), marker=markers[problem]))
            every.append(Line(label, points[0][3], ()))
        per_example = " (per example)" if fwd.startswith("vmap") else ""
        panels.append(PlotPanel(f"{fwd} ÷ {rev}", tuple(series), xlabel="inputs ÷ outputs" + per_example,
                                ylabel="time ratio", hlines=((1.0, "above: reverse faster"),)))
    legend = _legend(every) + tuple(LegendEntry(p, None, markers[p], line=False) for p in problems)
    return Plot(title, tuple(panels), legend, columns=2)


def relative(title: str, cells: list[Measurement], relative_costs: relative_cost.RelativeCosts) -> Plot | None:
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
        series = _lines(by_op[op], lambda m: axis.x[m.cell.size], lambda m: relative_costs[m.merge_key],
                        lambda m: f"{entry(m)} {m.cell.size} ×{relative_costs[m.merge_key]:.3g}")
        every += series
        band = (low, high, f"cheap-gradient bound {low:g}–{high:g}") \
            if op in relative_cost.BOUNDED_OPERATORS else None
        panels.append(PlotPanel(f"{op} ÷ value", tuple(series), ylabel="J/O (time ratio)", hlines=((1.0, ""),),
                                hband=band, **_x_axis(axis)))
    return Plot(_title(title, axis), tuple(panels), _legend(every), columns=4)


def compile_scatter(title: str, items: list[CompileCost]) -> Plot | None:
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
        points = tuple((k.compiled.measured.median, compiling,
                        f"{k.compiled.cell.problem} {k.compiled.cell.size} {k.compiled.cell.operator}: "
                        f"{seconds(compiling)}") for k in ks if (compiling := k.compile) is not None)
        series.append(Line(label, ks[0].compiled, points, line=False))
    panel = PlotPanel("compile time vs steady-state time (largest size of each cell)", tuple(series),
                      xlabel="steady-state seconds per call", ylabel="compile seconds", x_seconds=True,
                      y_seconds=True, guides=tuple((10.0 ** k, f"= {10 ** k:,} calls") for k in (1, 3, 5, 7)))
    return Plot(title, (panel,), _legend(series), columns=1, wide=True)


def across_devices(title: str, members: Sequence[DeviceSeries]) -> Plot | None:
    """Time per step against D, one panel per operator · size, one line per adapter · variant; x is log₂ D."""
    panels: dict[tuple[str, str], list[Line]] = {}
    for s in members:
        points = tuple((math.log2(st.devices), st.measurement.measured.median,
                        f"{entry(st.measurement)} D = {st.devices}: {seconds(st.measurement.measured.median)}")
                       for st in s.steps if timed(st.measurement))
        if len(points) < 2:
            continue
        band = tuple((math.log2(st.devices), max(st.measurement.measured.median - st.measurement.measured.iqr / 2,
                                                 st.measurement.measured.min),
                      st.measurement.measured.median + st.measurement.measured.iqr / 2)
                     for st in s.steps if timed(st.measurement) and not st.measurement.measured.few_samples)
        c = s.first.cell
        panels.setdefault((c.operator, c.size), []).append(Line(entry(s.first), s.first, points, band))
    if not panels:
        return None
    counts = sorted({st.devices for s in members for st in s.steps})
    categories = tuple((math.log2(d), str(d)) for d in counts)
    out: list[PlotPanel] = []
    legend: dict[str, LegendEntry] = {}
    for (operator, size), lines in sorted(panels.items(), key=lambda kv: (operator_order(kv[0][0]),
                                                                          sizes.sort_key(kv[0][1]))):
        out.append(PlotPanel(f"{operator} {size}", tuple(lines), xlabel="devices D", ylabel="seconds per step",
                             xcategories=categories, y_seconds=True))
        for line in lines:
            legend.setdefault(line.label, LegendEntry(line.label, line.measurement))
    return Plot(title, tuple(out), tuple(legend[k] for k in sorted(legend)), columns=4)

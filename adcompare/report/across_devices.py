"""The report's "Across devices" section: one chart per problem, device kind, dtype and machine of the series
analysis/across_devices.py groups — time per step against the device count D — and their rows.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adcompare.analysis.across_devices import DeviceSeries
from adcompare.analysis.sizes import sort_key
from adcompare.analysis.summary import entry, operator_order, timed
from adcompare.model.measurement import Measurement
from adcompare.model.units import seconds
from adcompare.report.figures import style
from adcompare.report.svgchart import Chart, LegendItem, Palette, Panel, Series


@dataclass(frozen=True)
class Block:
    """One chart and its rows: a problem on one device kind, dtype and machine (· environment)."""

    title: str
    chart: Chart | None
    series: tuple[DeviceSeries, ...]
    caveats: tuple[tuple[str, str], ...]  # distinct (statement about emulated devices, the worker's recorded set-up)


def blocks(found: Sequence[DeviceSeries], palette: Palette,
           machine_label: Callable[[Measurement], str]) -> list[Block]:
    grouped: dict[tuple[str, ...], list[DeviceSeries]] = defaultdict(list)
    for s in found:
        c = s.first.cell
        grouped[(c.problem, machine_label(s.first), c.device, c.dtype)].append(s)
    out = []
    for parts, members in grouped.items():
        title = " · ".join(p for p in parts if p)
        caveats = tuple(dict.fromkeys((s.caveat, s.setup) for s in members if s.caveat))
        out.append(Block(title, chart(palette, title, members), tuple(members), caveats))
    return out


def chart(palette: Palette, title: str, members: Sequence[DeviceSeries]) -> Chart | None:
    """Time per step against D, one panel per operator · size, one line per adapter · variant; x is log₂ D."""
    panels: dict[tuple[str, str], list[Series]] = {}
    for s in members:
        points = [(math.log2(st.devices), st.measurement.measured.median,
                   f"{entry(st.measurement)} D = {st.devices}: {seconds(st.measurement.measured.median)}")
                  for st in s.steps if timed(st.measurement)]
        if len(points) < 2:
            continue
        band = [(math.log2(st.devices), max(st.measurement.measured.median - st.measurement.measured.iqr / 2,
                                            st.measurement.measured.min),
                 st.measurement.measured.median + st.measurement.measured.iqr / 2)
                for st in s.steps if timed(st.measurement)]
        c = s.first.cell
        panels.setdefault((c.operator, c.size), []).append(
            Series(entry(s.first), style(palette, s.first), points, band))
    if not panels:
        return None
    counts = sorted({st.devices for s in members for st in s.steps})
    categories = [(math.log2(d), str(d)) for d in counts]
    out: list[Panel] = []
    legend: dict[str, LegendItem] = {}
    for (operator, size), lines in sorted(panels.items(), key=lambda kv: (operator_order(kv[0][0]),
                                                                          sort_key(kv[0][1]))):
        out.append(Panel(f"{operator} {size}", lines, xlabel="devices D", ylabel="seconds per step",
                         xcategories=categories, yformat=seconds))
        for line in lines:
            legend.setdefault(line.label, LegendItem(line.label, line.style))
    return Chart(title, out, [legend[k] for k in sorted(legend)], columns=4)

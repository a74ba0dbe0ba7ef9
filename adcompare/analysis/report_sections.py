"""The report's built-in sections: what each one shows, computed from the results before anything is rendered.

This module is the built-in implementation of the `adcompare_report_sections` hook (an entry point of the
`adcompare` group, like the built-in adapters and problems): it computes every built-in section's data once — one
bootstrap shared by the rankings, heatmaps, findings and device series — and returns a `Section` per section,
naming the template of report/sections/ that draws it. report/ only renders: it imports no analysis function.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adcompare.analysis import across_devices as device_series
from adcompare.analysis import (
    bootstrap,
    cell_rows,
    compile_cost,
    correctness,
    findings,
    framework_bugs,
    gradbench,
    plots,
    ratio_grid,
    relative_cost,
    significance,
    summary,
)
from adcompare.analysis.dimensions import Dimensions
from adcompare.analysis.environment_pairs import EnvironmentPair, pair_environments
from adcompare.analysis.harness_cost import GOAL, HarnessCost, harness_cost
from adcompare.model.measurement import Measurement
from adcompare.model.status import MEANINGS, Status
from adcompare.model.support import Support
from adcompare.model.units import seconds
from adcompare.plugin.hookspecs import hookimpl
from adcompare.plugin.report_section import Section
from adcompare.store.results import Results
from adcompare.verify.expectations import expected_reason, expected_reproducer

Figures = tuple[tuple[str, "ratio_grid.Grid | plots.Plot"], ...]  # (section anchor, figure), for --figures


@dataclass(frozen=True)
class Overview:
    cells: int
    problems: tuple[str, ...]
    adapters: tuple[str, ...]
    variants: tuple[str, ...]
    operators: tuple[str, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    environments: tuple[str, ...]  # listed only when several (`run --env`)
    statuses: tuple[tuple[Status, int, str], ...]  # (status, cells, meaning) of the statuses present
    emulated: int


@dataclass(frozen=True)
class GradbenchView:
    """Per (machine, device, dtype) with GradBench evals: the eval × adapter · variant grid and the J/O table."""

    where: str
    grid: ratio_grid.Grid
    rows: tuple[gradbench.EvalRow, ...]
    columns: tuple[str, ...]
    nesting: tuple[gradbench.NestingTable, ...]


@dataclass(frozen=True)
class OverviewData:
    overview: Overview
    grids: tuple[ratio_grid.Grid, ...]
    gradbench: tuple[GradbenchView, ...]
    glyphs: tuple[tuple[str, str], ...]

    @property
    def figures(self) -> Figures:
        return (*(("overview", g) for g in self.grids), *(("gradbench", v.grid) for v in self.gradbench))


@dataclass(frozen=True)
class FindingsData:
    findings: tuple[findings.AnyFinding, ...]
    rule: str


@dataclass(frozen=True)
class SummaryData:
    summaries: tuple[summary.ProblemSummary, ...]
    significance_method: str


@dataclass(frozen=True)
class PlotsData:
    """A section of figures: scaling, forward vs reverse, J/O, compilation."""

    anchor: str
    plots: tuple[plots.Plot, ...]

    @property
    def figures(self) -> Figures:
        return tuple((self.anchor, p) for p in self.plots)


@dataclass(frozen=True)
class ForwardReverseData(PlotsData):
    dims_unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelativeCostData(PlotsData):
    band: tuple[float, float] = relative_cost.CHEAP_GRADIENT_BAND
    bounded: tuple[str, ...] = relative_cost.BOUNDED_OPERATORS
    gradbench: tuple[GradbenchView, ...] = ()


@dataclass(frozen=True)
class CompilationData(PlotsData):
    rows: tuple[compile_cost.CompileCost, ...] = ()
    formula: str = compile_cost.FORMULA


@dataclass(frozen=True)
class DeviceBlock:
    """A problem on one device kind, dtype and machine (· environment): its chart of time per step against D
    and its rows."""

    title: str
    plot: plots.Plot | None
    series: tuple[device_series.DeviceSeries, ...]
    caveats: tuple[tuple[str, str], ...]  # distinct (statement about emulated devices, the worker's recorded set-up)


@dataclass(frozen=True)
class AcrossDevicesData:
    blocks: tuple[DeviceBlock, ...]
    formula: str = device_series.FORMULA

    @property
    def figures(self) -> Figures:
        return tuple(("across-devices", b.plot) for b in self.blocks if b.plot is not None)


@dataclass(frozen=True)
class Failure:
    measurement: Measurement
    expected: str | None  # the known limitation it failed as (expectations.labelled)
    reproducer: str | None  # the framework bug's reproducer (docs/framework-bugs/…) it met
    reproducer_file: Path | None  # that reproducer in the source checkout, when it is beside the package


@dataclass(frozen=True)
class FailuresData:
    failures: tuple[Failure, ...]
    not_run: tuple[correctness.NotRun, ...]

    @property
    def not_run_cells(self) -> int:
        return sum(len(g.cells) for g in self.not_run)


@dataclass(frozen=True)
class CellTable:
    """Every cell as a row of text (results.csv and the page's sortable table)."""

    columns: tuple[cell_rows.Column, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class EnvironmentsData:
    """Each cell under two framework releases (`run --env`), against the first `--env`."""

    baseline: str
    defined: tuple[tuple[str, str, str], ...]  # (environment, its requirements, its Python)
    rows: tuple[tuple[tuple[str, str], ...], ...]  # per pair, (class, text) per column
    head: tuple[str, ...] = ("cell", "baseline", "candidate", "baseline median", "candidate median", "ratio",
                             "95% interval", "verdict", "derivative values")


@dataclass(frozen=True)
class MethodData:
    significance_method: str
    stats_method: str
    compile_formula: str
    statuses: tuple[tuple[Status, int, str], ...]
    harness: HarnessCost | None = None  # what the cells spent outside the frameworks' calls, where recorded
    harness_goal: str = GOAL


def overview(ms: Sequence[Measurement]) -> Overview:
    def distinct(attr: str) -> tuple[str, ...]:
        return tuple(sorted({getattr(m.cell, attr) for m in ms}))

    statuses = Counter(m.status for m in ms)
    return Overview(
        cells=len(ms), problems=distinct("problem"), adapters=distinct("adapter"), variants=distinct("variant"),
        operators=tuple(sorted({m.cell.operator for m in ms}, key=summary.operator_order)),
        devices=distinct("device"), dtypes=distinct("dtype"), environments=distinct("environment"),
        statuses=tuple((s, statuses[s], MEANINGS[s]) for s in Status if statuses[s]),
        emulated=sum(m.support is Support.EMULATED for m in ms))


def _per_hardware(ms: Sequence[Measurement], machine_label: Callable[[Measurement], str]
                  ) -> dict[tuple[str, str, str], list[Measurement]]:
    """Cells that may be ranked against each other: one device and dtype on one machine fingerprint."""
    out: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        out[(machine_label(m), m.cell.device, m.cell.dtype)].append(m)
    return dict(sorted(out.items()))


def _gradbench_views(ms: Sequence[Measurement], machine_label: Callable[[Measurement], str],
                     boot: bootstrap.Bootstrap) -> tuple[GradbenchView, ...]:
    out = []
    for (machine, device, dtype), cells in _per_hardware(ms, machine_label).items():
        rows = gradbench.rows(cells)
        where = " · ".join(part for part in (machine, device, dtype) if part)
        if (g := ratio_grid.evals(f"GradBench evals · {where}", rows, boot, machine)) is not None:
            out.append(GradbenchView(where, g, tuple(rows), g.columns, tuple(gradbench.nesting_tables(cells))))
    return tuple(out)


def device_blocks(found: Sequence[device_series.DeviceSeries], machine_label: Callable[[Measurement], str]
                   ) -> tuple[DeviceBlock, ...]:
    grouped: dict[tuple[str, ...], list[device_series.DeviceSeries]] = defaultdict(list)
    for s in found:
        c = s.first.cell
        grouped[(c.problem, machine_label(s.first), c.device, c.dtype)].append(s)
    out = []
    for parts, members in grouped.items():
        title = " · ".join(p for p in parts if p)
        caveats = tuple(dict.fromkeys((s.caveat, s.setup) for s in members if s.caveat))
        out.append(DeviceBlock(title, plots.across_devices(title, members), tuple(members), caveats))
    return tuple(out)


def _versions(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in sorted(versions.items())) or "same versions"


def _environment_row(pair: EnvironmentPair) -> tuple[tuple[str, str], ...]:
    """(class, text) per column: the cell, both environments with the versions that differ, both medians, the
    ratio and its interval, the verdict, whether the derivatives' seeded projections agree."""
    b, c, t = pair.baseline, pair.candidate, pair.timing
    before, after = pair.changed_versions
    ratio = f"{t.candidate / t.baseline:.3g}" if t else "–"
    interval = f"{t.ratio.low:.3g}–{t.ratio.high:.3g}" if t and t.ratio else "–"
    agree = pair.values_agree
    values = ("not checked in both" if agree is None else "agree" if agree
              else f"differ (scaled error {pair.projection_error:.1e})")
    cells = [pair.cell.id, f"{b.cell.environment} ({_versions(before)})",
             f"{c.cell.environment} ({_versions(after)})", seconds(t.baseline) if t else b.status.value,
             seconds(t.candidate) if t else c.status.value, ratio, interval, pair.verdict, values]
    styles = {7: {"faster": "grade-good", "slower": "grade-bad"}.get(pair.verdict, ""),
              8: "" if agree is None else {True: "grade-good", False: "grade-bad"}[agree]}
    return tuple((styles.get(i, ""), v) for i, v in enumerate(cells))


def environments(results: Results) -> EnvironmentsData:
    pairs = pair_environments(results)
    defined = {name: env for prov in results.provenance for name, env in prov.environments.items()}
    return EnvironmentsData(pairs[0].baseline.cell.environment if pairs else "–",
                            tuple((name, " ".join(env.requirements), env.python) for name, env in defined.items()),
                            tuple(_environment_row(p) for p in pairs))


def sections(results: Results) -> list[Section]:
    """Every built-in section of `results`' report, with its data; a section with nothing to show is left out
    where the page always left it out (GradBench, framework bugs)."""
    ms = cell_rows.ordered(results.measurements)
    boot = bootstrap.Bootstrap()
    relative_costs = relative_cost.ratios(ms)
    summaries = summary.summarize(ms, boot)
    compile_items = compile_cost.costs(ms)
    dims = Dimensions()
    labels = {machine.id: machine.label for machine in results.machines}
    # Machines are named in titles only when one device was timed on several (a CPU box and a GPU box are told
    # apart by the device already).
    shared_device = len({(m.machine, m.cell.device) for m in ms}) > len({m.cell.device for m in ms})
    several_environments = len({m.cell.environment for m in ms}) > 1  # `run --env`: name each in titles

    def machine_label(m: Measurement) -> str:
        label = labels.get(m.machine, m.machine) if shared_device else ""
        return " · ".join(filter(None, (label, f"environment {m.cell.environment}" if several_environments
                                        else "")))

    grids = tuple(ratio_grid.grids(ms, machine_label, boot))
    evals = _gradbench_views(ms, machine_label, boot)
    cores = device_series.cores_by_machine(results.provenance)
    found = findings.findings(ms, boot, cores)

    scaling: list[plots.Plot] = []
    relative: list[plots.Plot] = []
    forward_reverse: list[plots.Plot] = []
    compiling: list[plots.Plot] = []
    by_problem: dict[tuple[str, str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        by_problem[(m.cell.problem, machine_label(m), m.cell.device, m.cell.dtype)].append(m)
    for (problem, machine, device, dtype), cells in sorted(by_problem.items()):
        title = " · ".join(part for part in (problem, machine, device, dtype) if part)
        if (plot := plots.scaling(title, cells)) is not None:
            scaling.append(plot)
        if (plot := plots.relative(title, cells, relative_costs)) is not None:
            relative.append(plot)
    for (machine, device, dtype), cells in _per_hardware(ms, machine_label).items():
        title = " · ".join(part for part in (machine, device, dtype) if part)
        if (plot := plots.forward_reverse(title, cells, dims)) is not None:
            forward_reverse.append(plot)
        items = compile_cost.at_largest_size([k for k in compile_items if k.compiled.cell.device == device
                                              and k.compiled.cell.dtype == dtype
                                              and machine_label(k.compiled) == machine])
        if (plot := plots.compile_scatter(title, items)) is not None:
            compiling.append(plot)
    blocks = device_blocks(device_series.series(ms, cores, boot), machine_label)

    columns = cell_rows.columns_for(ms)
    table = CellTable(tuple(columns), tuple(tuple(row) for row in cell_rows.rows(ms, relative_costs, columns)))
    failures = tuple(Failure(m, expected_reason(m), (path := expected_reproducer(m)),
                             framework_bugs.reproducer_file(path) if path else None)
                     for m in correctness.failures(ms))
    bugs = tuple(framework_bugs.found(ms))
    seen = overview(ms)

    out = [
        Section("Overview", "overview", 10, template="sections/overview.html.j2",
                data=OverviewData(seen, grids, evals, ratio_grid.GLYPHS),
                nav=(("overview", "Overview"), *((("gradbench", "GradBench"),) if evals else ()))),
        Section("Findings", "findings", 20, template="sections/findings.html.j2",
                data=FindingsData(tuple(found), findings.RULE)),
        Section("Summary", "summary", 30, template="sections/summary.html.j2",
                data=SummaryData(tuple(summaries), significance.METHOD)),
        Section("Scaling", "scaling", 40, template="sections/scaling.html.j2",
                data=PlotsData("scaling", tuple(scaling))),
        Section("Forward vs reverse", "forward-reverse", 50, template="sections/forward_reverse.html.j2",
                data=ForwardReverseData("forward-reverse", tuple(forward_reverse), tuple(sorted(dims.unknown)))),
        Section("J/O", "relative-cost", 60, template="sections/relative_cost.html.j2",
                data=RelativeCostData("relative-cost", tuple(relative), gradbench=evals)),
        Section("Compilation", "compilation", 70, template="sections/compilation.html.j2",
                data=CompilationData("compilation", tuple(compiling),
                                     rows=tuple(compile_cost.at_largest_size(compile_items)))),
        Section("Across devices", "across-devices", 80, template="sections/across_devices.html.j2",
                data=AcrossDevicesData(blocks)),
        Section("Correctness", "correctness", 90, template="sections/correctness.html.j2",
                data=tuple(correctness.matrices(ms))),
        Section("Framework bugs", "framework-bugs", 100, template="sections/framework_bugs.html.j2",
                data=bugs) if bugs else None,
        Section("Failures", "failures", 110, template="sections/failures.html.j2",
                data=FailuresData(failures, tuple(correctness.not_run(ms)))),
        Section("All cells", "cells", 120, template="sections/cells.html.j2", data=table),
        Section("Environments side by side", "environments", 125, template="sections/environments.html.j2",
                data=environments(results)) if len(seen.environments) > 1 else None,
        Section("Method", "method", 1000, template="sections/method.html.j2",
                data=MethodData(significance.METHOD, bootstrap.METHOD, compile_cost.FORMULA, seen.statuses,
                                harness_cost(ms) or None)),
    ]
    return [s for s in out if s is not None]


@hookimpl
def adcompare_report_sections(results: Results) -> list[Section]:
    return sections(results)

"""Assembling the report: results → sections → one self-contained index.html (plus results.csv beside it).

Everything the page needs is inline — CSS, the table script, SVG figures, the cell data — so it opens from a
file:// URL or an e-mail attachment with no network. Strings from problems, adapters and error messages reach the
page only through jinja2 autoescaping, the SVG writer, or the JSON block (whose '<' is escaped); the script that
draws the table sets textContent, never innerHTML.
"""
from __future__ import annotations

import datetime
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from adcompare.analysis import across_devices as device_series
from adcompare.analysis import (
    bootstrap,
    compile_cost,
    correctness,
    findings,
    framework_bugs,
    gradbench,
    relative_cost,
    significance,
    summary,
)
from adcompare.analysis.dimensions import Dimensions
from adcompare.model.measurement import Measurement
from adcompare.model.status import MEANINGS, Status
from adcompare.model.support import Support
from adcompare.model.units import seconds
from adcompare.report import across_devices, cells_table, environments_section, figures, heatmap
from adcompare.report.svgchart import Chart, Palette
from adcompare.store.provenance import Provenance
from adcompare.store.results import Results
from adcompare.verify.expectations import expected_reason, expected_reproducer

PROVENANCE_ORDER = ("host", "date", "cpu", "cpu_count", "gpu", "threads", "thread_policy", "platform", "python",
                    "numpy", "adcompare", "git_commit")


def number(value: float | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return "∞" if math.isinf(value) else "NaN"
    return f"{value:.2g}" if isinstance(value, float) else str(value)


def calls(value: float | None) -> str:
    if value is None:
        return "no eager twin"
    if math.isinf(value):
        return "never"
    return f"{math.ceil(value):,}"


@dataclass(frozen=True)
class Figure:
    title: str
    chart: Chart

    @property
    def svg(self) -> str:
        return self.chart.svg


@dataclass
class Timings:
    """Where the build spends its time; printed at the bottom of the page and by benchmarks/report_build.py."""

    steps: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.perf_counter)

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.steps[step] = now - self._last
        self._last = now


def _provenance(results: Results) -> list[list[tuple[str, str]]]:
    """One block per machine fingerprint (four files from one host are one machine), naming its files."""
    by_machine: dict[str, list[tuple[Provenance, str]]] = defaultdict(list)
    for provenance, source in zip(results.provenance, results.sources):
        by_machine[provenance.machine.id].append((provenance, source))
    machines = []
    for fingerprint, members in by_machine.items():
        first = members[0][0]
        prov = {k: v for k, v in first.to_json().items() if k != "machine"}  # every field, shown by name
        prov["fingerprint"] = fingerprint
        prov["frameworks"] = dict(first.machine.frameworks) or None
        prov["files"] = ", ".join(source for _, source in members)
        keys = [k for k in PROVENANCE_ORDER if k in prov] + sorted(k for k in prov if k not in PROVENANCE_ORDER)
        machines.append([(k, _flat(prov[k])) for k in keys if prov[k] not in (None, "")])
    return machines


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_flat(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def _overview(ms: Sequence[Measurement]) -> dict[str, Any]:
    def distinct(attr: str) -> list[str]:
        return sorted({getattr(m.cell, attr) for m in ms})

    statuses = Counter(m.status for m in ms)
    return {
        "cells": len(ms),
        "problems": distinct("problem"),
        "adapters": distinct("adapter"),
        "variants": distinct("variant"),
        "operators": sorted({m.cell.operator for m in ms}, key=summary.operator_order),
        "devices": distinct("device"),
        "dtypes": distinct("dtype"),
        "environments": distinct("environment"),  # listed only when several (`run --env`)
        "statuses": [(s, statuses[s], MEANINGS[s]) for s in Status if statuses[s]],
        "emulated": sum(m.support is Support.EMULATED for m in ms),
    }


def _per_hardware(ms: Sequence[Measurement], machine_label: Callable[[Measurement], str]
                  ) -> dict[tuple[str, str, str], list[Measurement]]:
    """Cells that may be ranked against each other: one device and dtype on one machine fingerprint."""
    out: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        out[(machine_label(m), m.cell.device, m.cell.dtype)].append(m)
    return dict(sorted(out.items()))


def _gradbench_views(ms: Sequence[Measurement], machine_label: Callable[[Measurement], str],
                     boot: bootstrap.Bootstrap) -> list[dict[str, Any]]:
    """Per (machine, device, dtype) with GradBench evals: the eval × adapter · variant heatmap and the J/O table."""
    out = []
    for (machine, device, dtype), cells in _per_hardware(ms, machine_label).items():
        rows = gradbench.rows(cells)
        where = " · ".join(part for part in (machine, device, dtype) if part)
        if (h := heatmap.evals(f"GradBench evals · {where}", rows, boot, machine)) is not None:
            out.append({"where": where, "heatmap": h, "rows": rows, "columns": h.columns,
                        "nesting": gradbench.nesting_tables(cells)})
    return out


def _environment():
    env = jinja2.Environment(loader=jinja2.PackageLoader("adcompare", "report"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(seconds=seconds, number=number, calls=calls)
    return env


def _asset(name: str) -> str:
    return resources.files("adcompare.report").joinpath(name).read_text(encoding="utf-8")


def build(results: Results, out_dir: Path, extra_sections: Sequence[tuple[str, str]] = (),
          figures_dir: Path | None = None) -> Path:
    """Write `out_dir/index.html` and `out_dir/results.csv` from `results`; return the index.html path.

    `extra_sections` are (title, body) pairs appended to the page (e.g. the CLI's run log); bodies are text and
    are escaped — pass a `markupsafe.Markup` for trusted HTML. `figures_dir`: also write every figure there as
    PDF and PNG through matplotlib (paper.py).
    """
    return build_with_timings(results, out_dir, extra_sections, figures_dir)[0]


def build_with_timings(results: Results, out_dir: Path, extra_sections: Sequence[tuple[str, str]] = (),
                       figures_dir: Path | None = None) -> tuple[Path, dict[str, float]]:
    """`build`, also returning seconds per step (summary, figures, table, render) for benchmarks/report_build.py."""
    clock = Timings()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ms = cells_table.ordered(results.measurements)
    boot = bootstrap.Bootstrap()
    relative_costs = relative_cost.ratios(ms)
    summaries = summary.summarize(ms, boot)
    compile_items = compile_cost.costs(ms)
    clock.mark("summary")

    palette, dims = Palette(), Dimensions()
    adapters = sorted({m.cell.adapter for m in ms})
    for adapter in adapters:  # every adapter gets its colour up front, in name order
        palette.colour(adapter)
    scaling: list[Figure] = []
    relative: list[Figure] = []
    forward_reverse_figures: list[Figure] = []
    compiling: list[Figure] = []
    labels = {machine.id: machine.label for machine in results.machines}
    # Machines are named in titles only when one device was timed on several (a CPU box and a GPU box are told
    # apart by the device already).
    shared_device = len({(m.machine, m.cell.device) for m in ms}) > len({m.cell.device for m in ms})

    several_environments = len({m.cell.environment for m in ms}) > 1  # `run --env`: name each in titles

    def machine_label(m: Measurement) -> str:
        label = labels.get(m.machine, m.machine) if shared_device else ""
        return " · ".join(filter(None, (label, f"environment {m.cell.environment}" if several_environments
                                        else "")))

    overview_heatmaps = heatmap.heatmaps(ms, machine_label, boot)
    evals = _gradbench_views(ms, machine_label, boot)
    cores = device_series.cores_by_machine(results.provenance)
    found = findings.findings(ms, boot, cores)
    clock.mark("overview")

    by_problem: dict[tuple[str, str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        by_problem[(m.cell.problem, machine_label(m), m.cell.device, m.cell.dtype)].append(m)
    for (problem, machine, device, dtype), cells in sorted(by_problem.items()):
        title = " · ".join(part for part in (problem, machine, device, dtype) if part)
        if (chart := figures.scaling(palette, title, cells)) is not None:
            scaling.append(Figure(title, chart))
        if (chart := figures.relative(palette, title, cells, relative_costs)) is not None:
            relative.append(Figure(title, chart))
    for (machine, device, dtype), cells in _per_hardware(ms, machine_label).items():
        title = " · ".join(part for part in (machine, device, dtype) if part)
        if (chart := figures.forward_reverse(palette, title, cells, dims)) is not None:
            forward_reverse_figures.append(Figure(title, chart))
        items = compile_cost.at_largest_size([k for k in compile_items if k.compiled.cell.device == device
                                              and k.compiled.cell.dtype == dtype
                                              and machine_label(k.compiled) == machine])
        if (chart := figures.compile_scatter(palette, title, items)) is not None:
            compiling.append(Figure(title, chart))
    devices = across_devices.blocks(
        device_series.series(ms, cores, boot), palette,
        machine_label)
    clock.mark("figures")
    if figures_dir is not None:
        from adcompare.report import paper  # matplotlib is an optional extra: imported only when figures are asked for

        paper.write([("overview", h) for h in overview_heatmaps] + [("gradbench", v["heatmap"]) for v in evals] + [
            (section, f.chart) for section, items in (("scaling", scaling),
                                                      ("forward-reverse", forward_reverse_figures),
                                                      ("relative-cost", relative), ("compilation", compiling))
            for f in items] + [("across-devices", b.chart) for b in devices if b.chart is not None], figures_dir)
        clock.mark("paper figures")

    columns = cells_table.columns_for(ms)
    table = cells_table.rows(ms, relative_costs, columns)
    csv_text = cells_table.to_csv(table, columns)
    (out_dir / "results.csv").write_text(csv_text, encoding="utf-8")
    payload = cells_table.payload(table, columns)
    clock.mark("table")

    context = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machines": _provenance(results),
        "workers": [
            {**w, "versions": _flat(w.get("versions") or {})} for w in results.workers
        ],
        "sources": results.sources,
        "warnings": results.warnings,
        "overview": _overview(ms),
        "summaries": summaries,
        "heatmaps": overview_heatmaps,
        "gradbench": evals,
        "glyphs": heatmap.GLYPHS,
        "findings": found,
        "finding_rule": findings.RULE,
        "stats_method": bootstrap.METHOD,
        "significance_method": significance.METHOD,
        "entry": summary.entry,
        "expected_reason": expected_reason,
        "scaling": scaling,
        "relative": relative,
        "forward_reverse_figures": forward_reverse_figures,
        "dims_unknown": sorted(dims.unknown),
        "band": relative_cost.CHEAP_GRADIENT_BAND,
        "bounded": relative_cost.BOUNDED_OPERATORS,
        "compiling": compiling,
        "devices": devices,
        "efficiency_formula": device_series.FORMULA,
        "compile_rows": compile_cost.at_largest_size(compile_items),
        "compile_formula": compile_cost.FORMULA,
        "matrices": correctness.matrices(ms),
        "failures": correctness.failures(ms),
        "framework_bugs": framework_bugs.found(ms, out_dir),
        "expected_reproducer": expected_reproducer,
        "reproducer_href": lambda path: framework_bugs.reproducer_href(path, out_dir),
        "not_run": (not_run := correctness.not_run(ms)),
        "not_run_cells": sum(len(g.cells) for g in not_run),
        "colour": palette.colour,
        "adapter_index": {a: i for i, a in enumerate(adapters)},
        "payload": payload,
        "extra_sections": [*environments_section.sections(results, seconds), *extra_sections],
        "css": _asset("report.css"),
        "script": _asset("report.js"),
        "csv_bytes": len(csv_text.encode()),
    }
    html = _environment().get_template("index.html.j2").render(**context)
    clock.mark("render")
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    clock.mark("write")
    return path, clock.steps

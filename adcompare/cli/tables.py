"""What the commands show: the terminal's two streams, the tables (rich) and the JSON shapes of `list --json` and
`check --json`."""
from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adcompare.analysis import bootstrap
from adcompare.analysis.harness_cost import GOAL, HarnessCost
from adcompare.analysis.significance import METHOD
from adcompare.model.cell import CURRENT, Cell
from adcompare.model.measurement import Measurement
from adcompare.model.operators import OPERATORS
from adcompare.model.problem import output_shape
from adcompare.model.status import Status
from adcompare.model.units import seconds
from adcompare.plugin.registry import Registry
from adcompare.study.suites import SUITE_SUMMARIES
from adcompare.verify.expectations import expected_reason

# Piped or redirected, tables keep readable columns instead of rich's 80-column default.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)

STATUS_STYLE = {"ok": "green", "unsupported": "dim", "skipped": "dim", "too_large": "yellow"}


def inventory(registry: Registry, tags: tuple[str, ...] = ()) -> dict[str, Any]:
    adapters = []
    for name, a in sorted(registry.adapters.items()):
        avail = a.available()
        variants = a.planned_variants()
        support = {v: {op: {"support": (c := a.capability(op, v)).support.value, "algorithm": c.algorithm,
                            "reason": c.reason} for op in OPERATORS} for v in variants}
        adapters.append({"name": name, "installed": avail.installed, "version": avail.version,
                         "reason": avail.reason, "devices": list(a.devices), "variants": dict(a.variants),
                         "support": support})
    problems = []
    for p in registry.problems.values():
        if tags and not set(tags) & set(p.tags):
            continue
        problems.append({"name": p.name, "sizes": [s.label for s in p.sizes], "tags": list(p.tags),
                         "wrt": p.wrt, "batch": p.batch, "operators": list(p.operators or []),
                         "output_shape_at_smallest": list(output_shape(p, p.smallest_size)),
                         "summary": p.description.splitlines()[0] if p.description else ""})
    broken = [{"name": b.name, "reason": b.reason} for b in registry.broken]
    suites = [{"name": name, "summary": text} for name, text in SUITE_SUMMARIES.items()]
    return {"adapters": adapters, "problems": problems, "suites": suites, "broken_plugins": broken}


def _sizes(labels: list[str]) -> str:
    return ", ".join(labels) if len(labels) <= 4 else f"{labels[0]} … {labels[-1]} ({len(labels)} sizes)"


def print_inventory(console: Console, inv: dict[str, Any]) -> None:
    t = Table(title="Adapters", title_justify="left")
    for col in ("adapter", "version", "devices", "variants", "status"):
        t.add_column(col)
    for a in inv["adapters"]:
        status = "[green]installed[/]" if a["installed"] else f"[yellow]{escape(a['reason'])}[/]"
        t.add_row(a["name"], a["version"] or "—", ", ".join(a["devices"]), ", ".join(a["variants"]), status)
    for b in inv["broken_plugins"]:
        t.add_row(escape(b["name"]), "—", "—", "—", f"[red]broken: {escape(b['reason'])}[/]")
    console.print(t)

    t = Table(title="Problems", title_justify="left")
    for col in ("problem", "sizes", "tags", "wrt / batch", "summary"):
        t.add_column(col, overflow="fold")
    for p in inv["problems"]:
        t.add_row(p["name"], _sizes(p["sizes"]), ", ".join(p["tags"]),
                  p["wrt"] + (f" / {p['batch']}" if p["batch"] else ""), escape(p["summary"]))
    console.print(t)

    t = Table(title="Suites (--suite)", title_justify="left")
    t.add_column("suite")
    t.add_column("cells", overflow="fold")
    for s in inv["suites"]:
        t.add_row(s["name"], escape(s["summary"]))
    console.print(t)

    for a in inv["adapters"]:
        t = Table(title=f"Support matrix: {a['name']}", title_justify="left")
        t.add_column("operator")
        for v in a["support"]:
            t.add_column(v, overflow="fold")
        for op in OPERATORS:
            cells = []
            for v in a["support"]:
                s = a["support"][v][op]
                if s["support"] == "unsupported":
                    cells.append(f"[dim]✗ {escape(s['reason'])}[/]")
                else:
                    mark = "[green]✓[/]" if s["support"] == "native" else "[yellow]~ emulated:[/]"
                    cells.append(f"{mark} {escape(s['algorithm'])}")
            t.add_row(op, *cells)
        console.print(t)


def check_record(m: Measurement) -> dict[str, Any]:
    c = m.check
    return {**m.cell.to_json(), "status": m.status.value, "worst_error": c.error if c else None,
            "pairwise_error": c.pairwise_error if c else None, "adjoint_error": c.adjoint_error if c else None,
            "tolerance": c.tolerance if c else None, "reference_method": c.reference_method if c else None,
            "algorithm": m.algorithm, "support": m.support.value if m.support else "", "message": m.message}


def _mark(m: Measurement, expected: bool = False) -> str:
    if expected:
        return f"[yellow]✗ {m.status.value} (expected)[/]"
    if m.status is Status.OK:
        return f"[green]✓[/] {m.check.error:.1e}" if m.check and m.check.error is not None else "[green]✓[/]"
    if m.status in (Status.UNSUPPORTED, Status.SKIPPED):
        return "[dim]–[/]"
    return f"[red]✗ {m.status.value}[/]"


def where(cell: Cell) -> str:
    """The adapter, with its environment when that is not `current` (`run --env`): autograd@old."""
    return cell.adapter if cell.environment == CURRENT else f"{cell.adapter}@{cell.environment}"


def print_check_matrix(console: Console, measurements: Sequence[Measurement],
                       expected: dict[str, str] | None = None) -> None:
    """One table per (problem, size, dtype): operators down, adapter/variant across; then failures, by kind."""
    expected = expected or {}
    groups: dict[tuple, list[Measurement]] = defaultdict(list)
    for m in measurements:
        groups[(m.cell.problem, m.cell.size, m.cell.dtype, m.cell.device)].append(m)
    for (problem, size, dtype, device), ms in sorted(groups.items()):
        columns = sorted({(where(m.cell), m.cell.variant) for m in ms})
        ops = [op for op in OPERATORS if any(m.cell.operator == op for m in ms)]
        tol = next((m.check.tolerance for m in ms if m.check), None)
        title = f"{problem} {size} {dtype} {device}" + (f" — tolerance {tol:.0e}" if tol else "")
        t = Table(title=escape(title), title_justify="left")
        t.add_column("operator")
        for a, v in columns:
            t.add_column(f"{a}\n{v}")
        index = {(m.cell.operator, where(m.cell), m.cell.variant): m for m in ms}
        for op in ops:
            t.add_row(op, *(_mark(index[(op, a, v)], index[(op, a, v)].cell.key in expected)
                            if (op, a, v) in index else "" for a, v in columns))
        console.print(t)
    failures = [m for m in measurements if m.status.is_failure and m.cell.key not in expected]
    known = [m for m in measurements if m.cell.key in expected]
    for title, chosen in (("Failures", failures), ("Expected failures (known limitations)", known)):
        if not chosen:
            continue
        t = Table(title=title, title_justify="left")
        for col in ("cell", "status", "why" if chosen[0].cell.key in expected else "message"):
            t.add_column(col, overflow="fold")
        for m in chosen:
            t.add_row(m.cell.id, m.status.value, escape(expected.get(m.cell.key) or m.message))
        console.print(t)


def print_summary(console: Console, measurements: Sequence[Measurement]) -> None:
    t = Table(title="Results", title_justify="left")
    for col in ("problem", "size", "operator", "adapter", "variant", "dtype", "device", "status", "median", "IQR",
                "compile", "error"):
        t.add_column(col, overflow="fold")
    for m in sorted(measurements, key=lambda m: m.cell):
        c, tm = m.cell, m.timing
        style = STATUS_STYLE.get(m.status.value, "red")
        expected = " (expected)" if expected_reason(m) else ""
        t.add_row(c.problem, c.size, c.operator, where(c), c.variant, c.dtype, c.device,
                  f"[{style}]{m.status.value}{expected}[/]", seconds(tm.median if tm else None, "—"),
                  seconds(tm.spread if tm else None, "—"), seconds(tm.compile if tm else None, "—"),
                  f"{m.check.error:.1e}" if m.check and m.check.error is not None else "—")
    console.print(t)
    counts: defaultdict[str, int] = defaultdict(int)
    for m in measurements:
        counts[m.status.value + (" as expected" if expected_reason(m) else "")] += 1
    console.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


def print_comparison(console: Console, rows, offending=(), fail_above: float | None = None) -> None:
    if offending:
        console.print(f"[bold red]{len(offending)} cell(s) significantly slower by more than {fail_above:g} %:[/]")
        for r in offending:
            shifted = f" (×{r.relative_change:.3f} of the run's shift)" if r.against != 1.0 else ""
            console.print(f"  [red]{r.cell.id}[/]  ×{r.change:.3f} [{r.ratio.low:.3f}–{r.ratio.high:.3f}]{shifted}  "
                          f"{seconds(r.baseline)} → {seconds(r.candidate)}", highlight=False)
    t = Table(title=f"candidate ÷ baseline median. {METHOD}", title_justify="left")
    for col in ("cell", "baseline", "candidate", "ratio", "95% interval", "÷ run shift", "p (Holm)", "verdict"):
        t.add_column(col)
    for r in rows:
        style = {"faster": "green", "slower": "red"}.get(r.verdict, "dim")
        interval = f"{r.ratio.low:.3f}–{r.ratio.high:.3f}" if r.ratio else "—"
        p = f"{r.difference.p_holm:.2g}" if r.difference.p_holm is not None else "—"
        t.add_row(r.cell.id, seconds(r.baseline), seconds(r.candidate), f"{r.change:.3f}",
                  interval, f"{r.relative_change:.3f}" if r.against != 1.0 else "—", p, f"[{style}]{r.verdict}[/]")
    console.print(t)
    if fail_above is not None and not offending:
        console.print(f"[green]no cell is significantly slower by more than {fail_above:g} %[/]")


def print_run_shift(console: Console, shift, fail_on_shift: float | None, failed: bool) -> None:
    """The candidate run's shift as a whole (comparison.RunShift), on its own line, with how it is gated: a
    uniform slowdown is excused cell by cell, so the reader is told it exists and what catches it."""
    if failed:
        console.print(f"[bold red]{escape(shift.describe())}; slower than --fail-on-shift {fail_on_shift:g} % "
                      f"allows[/]", highlight=False)
    elif not shift.applied or fail_on_shift is not None or shift.low <= 1 <= shift.high:
        console.print(escape(shift.describe()), highlight=False)
    else:
        console.print(f"[yellow]{escape(shift.describe())}; a change that slows every cell alike passes "
                      f"--fail-above: gate it with --fail-on-shift PCT[/]", highlight=False)


def print_findings(console: Console, top, total: int) -> None:
    """One line per measured seed claim: verdict, seed, what was measured (contradicted first)."""
    style = {"confirmed": "green", "contradicted": "red", "mixed": "yellow", "not measurable here": "cyan"}
    if not top:
        console.print(f"findings: none of the {total} seed claims was measured by this selection "
                      f"(`adcompare report` runs the quick suite, which measures them)")
        return
    console.print(f"[bold]findings[/] ({len(top)} of {total} seed claims measured):")
    for f in top:
        console.print(f"  [{style[f.verdict]}]{f.verdict}[/] seed {f.claim.seed} “{f.claim.quote}” — {f.measured}",
                      highlight=False)


def versions_text(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in sorted(versions.items())) or "—"


def print_environment_pairs(console: Console, pairs, interval: str = bootstrap.METHOD) -> None:
    """`adcompare compare` on one run over several environments: each cell under two releases; `interval` says
    what the interval column is."""
    t = Table(title=f"the same cell in two environments; candidate ÷ baseline median; {interval}; "
                    f"values: the seeded projections of the two derivatives agree within the cell's tolerance",
              title_justify="left")
    for col in ("cell", "baseline", "candidate", "baseline median", "candidate median", "ratio", "95% interval",
                "verdict", "values"):
        t.add_column(col)
    for p in pairs:
        b, c, r = p.baseline, p.candidate, p.timing
        before, after = p.changed_versions
        style = {"faster": "green", "slower": "red"}.get(p.verdict, "dim")
        values = ("[dim]not checked in both[/]" if p.values_agree is None else "[green]agree[/]" if p.values_agree
                  else f"[red]differ ({p.projection_error:.1e})[/]")
        t.add_row(escape(p.cell.id), escape(f"{b.cell.environment} ({versions_text(before)})"),
                  escape(f"{c.cell.environment} ({versions_text(after)})"),
                  seconds(r.baseline) if r else b.status.value, seconds(r.candidate) if r else c.status.value,
                  f"{r.candidate / r.baseline:.3f}" if r else "—",
                  f"{r.ratio.low:.3f}–{r.ratio.high:.3f}" if r and r.ratio else "—", f"[{style}]{p.verdict}[/]",
                  values)
    console.print(t)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def print_suite_costs(console: Console, costs: Sequence[Any]) -> None:
    """`adcompare list --suites`: cells, the modelled cost, what earlier results on this machine measured, and the
    project's last published end-to-end run of the suite (on its machine)."""
    table = Table(title="suites (cost on this machine)")
    for col in ("suite", "cells", "to run", "estimated", "measured (this machine)", "last published run"):
        table.add_column(col, justify="right" if col in ("cells", "to run", "estimated") else "left")
    for c in costs:
        measured = (f"{_minutes(c.measured_seconds)} over {c.measured_cells} of {c.to_run} cells"
                    if c.measured_cells else "— (none in results/ or --history)")
        p = c.published
        published = (f"{_minutes(p['wall_seconds'])} wall, {p['cells']} cells on {p['machine']} ({p['date']})"
                     if p else "—")
        table.add_row(c.suite, str(c.cells), str(c.to_run), _minutes(c.estimated_seconds), measured, published)
    console.print(table)


def print_harness_cost(console: Console, cost: HarnessCost, worst: int = 3) -> None:
    """One line of what the run spent outside the frameworks' calls, and the cells over the goal, worst first."""
    if not cost.cells:
        return
    share = 100 * cost.own / cost.wall if cost.wall else 0.0
    console.print(f"harness: {seconds(cost.own)} of the cells' {seconds(cost.wall)} ({share:.0f} %) outside the "
                  f"frameworks' calls; {len(cost.over_goal)} of {len(cost.cells)} cells over {GOAL}", highlight=False)
    for c in cost.over_goal[:worst]:
        top = max(c.stages, key=lambda k: c.stages[k])
        console.print(f"  {c.measurement.cell.id}: {seconds(c.own)} of {seconds(c.wall)}, most in {top} "
                      f"({seconds(c.stages[top])})", highlight=False)

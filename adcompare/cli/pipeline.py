"""The steps the commands share, in pipeline order: load the registry (plugins, input files), select and plan the
cells, describe this machine (provenance), watch a run session (run/session.py) with a progress bar, and print the
findings. Each step takes the values it needs, not the parsed arguments, but for `selection`, which reads the
selection options every measuring command has.
"""
from __future__ import annotations

import argparse
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from adcompare.analysis.findings import findings, top
from adcompare.cli import tables
from adcompare.cli.tables import err, out
from adcompare.model.cell import Cell
from adcompare.model.errors import UsageError
from adcompare.model.fingerprint import Machine, this_machine
from adcompare.model.measurement import Measurement
from adcompare.model.observer import RunObserver
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.registry import Registry, load
from adcompare.run.session import distributions
from adcompare.store import provenance
from adcompare.store.output_paths import RESULTS_DIR
from adcompare.study import environment_specs
from adcompare.study.plan import Plan, Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.suites import suite_for, suites_planning
from adcompare.verify.input_sources import check_selected, file_fed, with_inputs


def load_registry(plugins: Sequence[str], inputs: Sequence[str] = (), seed: int = 0) -> Registry:
    """The adapters and problems, with --plugin's; a broken plugin is reported and skipped, not fatal."""
    registry = load(tuple(plugins))
    for b in registry.broken:
        err.print(f"[yellow]plugin {b.name!r} is broken and was skipped:[/] {b.reason}", highlight=False)
    return with_inputs(registry, inputs, seed)


def machine(registry: Registry) -> Machine:
    """This machine's fingerprint, with the versions of every known framework."""
    return this_machine(distributions(registry))


def run_provenance(registry: Registry, threads: int, policy: TimingPolicy) -> provenance.Provenance:
    """This run's header, with the machine fingerprint its records carry and the timing policy of its cells."""
    return provenance.collect(threads, machine(registry), policy.describe())


def past_runs() -> list[Path]:
    """Results files of earlier runs in results/ (run's default output); history keeps this machine's cells."""
    return sorted(RESULTS_DIR.glob("*.jsonl")) if RESULTS_DIR.is_dir() else []


def split(values: Sequence[str] | None) -> tuple[str, ...]:
    """A repeatable, comma-separated option's values: ["a,b", "c"] → ("a", "b", "c")."""
    return tuple(v for item in values or () for v in item.split(",") if v)


def device_counts(values: Sequence[str] | None) -> tuple[int, ...]:
    """--devices 1,2,4 as whole numbers; anything else is a usage error naming the value and the fix."""
    counts = []
    for text in split(values):
        try:
            counts.append(int(text))
        except ValueError:
            raise UsageError(f"--devices {text!r}: a device count is a whole number, e.g. --devices 1,2,4") from None
    return tuple(dict.fromkeys(counts))


def selection(args: argparse.Namespace, registry: Registry) -> Selection:
    """The cells the selection options (arguments.add_selectors) pick."""
    problems, dtypes = split(args.problem), split(args.dtype)
    if registry.inputs:  # input files choose their problems and float64 unless told otherwise
        check_selected(registry, problems)
        problems = problems or file_fed(registry)
        dtypes = dtypes or ("float64",)
    suite, why = args.suite, ""
    if suite is None:  # input files plan their problems in any suite
        suite, why = ("quick", "") if registry.inputs else suite_for(problems)
    return Selection(problems=problems, sizes=split(args.size), operators=split(args.operator),
                     adapters=split(args.adapter), variants=split(args.variant), devices=split(args.device),
                     dtypes=dtypes, tags=split(args.tag), suite=suite, suite_chosen=why,
                     environments=split(args.environment),
                     device_counts=device_counts(args.devices))


def plan_cells(registry: Registry, selected: Selection, *, memory_limit_gib: float | None = None,
               env_options: Sequence[str] = ()) -> Plan:
    """The plan of the selected cells, its notes printed; a plan with no cell is a usage error saying why."""
    limit = int(memory_limit_gib * 2**30) if memory_limit_gib else None
    specs = environment_specs.parse_options(env_options)
    plan = make_plan(registry, selected, memory_limit=limit, environments=specs)
    environment_specs.check_pins(specs, [registry.adapters[a] for a in selected.adapters or registry.adapters])
    for note in plan.notes:
        err.print(f"[yellow]{note}[/]", highlight=False)
    if plan.total == 0:
        left_out = [n for n in plan.notes if n.startswith("left out problem")]
        if left_out:
            raise UsageError(f"nothing applies: {'; '.join(left_out)}; `adcompare list` shows each problem's "
                             f"operators")
        elsewhere = {name: suites_planning(name) for name in selected.problems
                     if name in registry.problems and suites_planning(name)
                     and selected.suite not in suites_planning(name)}
        if elsewhere:
            where = "; ".join(f"{name} is in {', '.join(f'--suite {s}' for s in suites)}"
                              for name, suites in elsewhere.items())
            raise UsageError(f"suite {selected.suite or 'quick'} plans no cell of the selection: {where}")
        raise UsageError("the selection matches no cell; `adcompare list` shows what exists")
    if selected.suite_chosen:  # said once the plan stands: a refused selection says only why it was refused
        err.print(f"[yellow]{selected.suite_chosen}[/]", highlight=False)
    return plan


class ProgressBar(RunObserver):
    """A bar on stderr advanced once per finished cell (and round), naming the cell that runs; lengthened by the
    confirmation rounds of the cells --confirm chose; an environment being built is said above it."""

    def __init__(self, total: int, rounds: int = 1):
        self.rounds = rounds
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err,
                            transient=False)
        self.task = self.bar.add_task("cells", total=total)

    def on_progress(self, cell: Cell | None, measurement: Measurement | None) -> None:
        if measurement is None:
            self.bar.update(self.task, description=f"{cell.id}" if cell else "")
        else:
            self.bar.advance(self.task)

    def on_confirm(self, keys: Collection[str]) -> None:
        (task,) = self.bar.tasks
        self.bar.update(task.id, total=(task.total or 0) + self.rounds * len(keys))

    def on_note(self, text: str) -> None:
        err.print(f"[dim]{text}[/]", highlight=False)


class Notes(RunObserver):
    """Without a bar (--no-progress), what the run says still reaches stderr."""

    def on_note(self, text: str) -> None:
        err.print(f"[dim]{text}[/]", highlight=False)


@contextmanager
def watching(plan: Plan, rounds: int, show_progress: bool) -> Iterator[list[RunObserver]]:
    """The observers the person at the terminal gets: a progress bar over the plan's cells (each round
    advances it), or, with --no-progress, the notes alone."""
    if not show_progress:
        yield [Notes()]
        return
    bar = ProgressBar(plan.total + (rounds - 1) * len(plan.cells), rounds)
    bar.bar.start()
    try:
        yield [bar]
    finally:
        bar.bar.stop()


def print_findings(measurements: Sequence[Measurement]) -> None:
    """The seed claims this selection measured, with their verdicts (the report's Findings section, in short)."""
    found = findings(measurements)
    tables.print_findings(out, top(found), len(found))

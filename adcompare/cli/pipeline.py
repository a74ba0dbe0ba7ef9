"""The steps the commands share, in pipeline order: load the registry (plugins, input files), select and plan the
cells, describe this machine (provenance, the --env environments), execute a plan with a progress bar, and print
the findings. Each step takes the values it needs, not the parsed arguments, but for `selection`, which reads the
selection options every measuring command has.
"""
from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from adcompare.analysis.findings import findings, top
from adcompare.cli import tables
from adcompare.cli.tables import err, out
from adcompare.model.cell import Cell
from adcompare.model.errors import Interrupted, SigtermReceived, Terminated, UsageError
from adcompare.model.fingerprint import Machine, this_machine
from adcompare.model.measurement import Measurement
from adcompare.plugin.registry import Registry, load
from adcompare.run import runner
from adcompare.store import provenance
from adcompare.store.output_paths import RESULTS_DIR
from adcompare.store.results import ResultsWriter
from adcompare.store.round_journal import RoundJournal
from adcompare.study import environment_specs, environments
from adcompare.study.plan import Plan, Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.suites import suite_for, suites_planning
from adcompare.verify.expectations import labelled
from adcompare.verify.input_sources import check_selected, file_fed, with_inputs


def load_registry(plugins: Sequence[str], inputs: Sequence[str] = (), seed: int = 0) -> Registry:
    """The adapters and problems, with --plugin's; a broken plugin is reported and skipped, not fatal."""
    registry = load(tuple(plugins))
    for b in registry.broken:
        err.print(f"[yellow]plugin {b.name!r} is broken and was skipped:[/] {b.reason}", highlight=False)
    return with_inputs(registry, inputs, seed)


def distributions(registry: Registry) -> list[str]:
    return [d for a in registry.adapters.values() for d in (a.distribution, *a.runtime_distributions)]


def machine(registry: Registry) -> Machine:
    """This machine's fingerprint, with the versions of every known framework."""
    return this_machine(distributions(registry))


def run_provenance(registry: Registry, threads: int) -> dict:
    """This run's header, with the machine fingerprint its records carry."""
    return provenance.collect(threads, machine(registry))


@contextmanager
def environments_in_use(registry: Registry, env_options: Sequence[str],
                        header: dict) -> Iterator[dict[str, environments.Environment]]:
    """The `--env` environments, built or taken from the cache and locked against other runs' reinstalls until the
    block ends (the run's workers start from them throughout); named in the header with their fingerprints."""
    specs = environment_specs.parse_options(env_options)
    if not specs:
        yield {}
        return
    with environments.in_use(specs, say=lambda line: err.print(f"[dim]{line}[/]", highlight=False)) as built:
        host = this_machine(())
        header["environments"] = {
            s.name: {**built[s.name].to_json(),
                     "machine": built[s.name].machine(host, distributions(registry)).to_json()} for s in specs}
        yield built


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
    suite = args.suite
    if suite is None:
        suite, why = suite_for(problems)
        if why:
            err.print(f"[yellow]{why}[/]", highlight=False)
    return Selection(problems=problems, sizes=split(args.size), operators=split(args.operator),
                     adapters=split(args.adapter), variants=split(args.variant), devices=split(args.device),
                     dtypes=dtypes, tags=split(args.tag), suite=suite, environments=split(args.environment),
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
    return plan


def _progress_bar(total: int):
    """A bar on stderr advanced once per finished cell (and round), naming the cell that runs."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=False)
    task = bar.add_task("cells", total=total)

    def progress(cell: Cell | None, measurement: Measurement | None) -> None:
        if measurement is None:
            bar.update(task, description=f"{cell.id}" if cell else "")
        else:
            bar.advance(task)
    return bar, progress


def _counted(confirm: Callable[[Sequence[Measurement]], Collection[str]], bar: Progress,
             rounds: int) -> Callable[[Sequence[Measurement]], Collection[str]]:
    """--confirm's choice, the bar lengthened by the confirmation rounds of the cells chosen."""
    def chosen(measurements: Sequence[Measurement]) -> Collection[str]:
        keys = confirm(measurements)
        (task,) = bar.tasks
        bar.update(task.id, total=(task.total or 0) + rounds * len(keys))
        return keys
    return chosen


def _journalled(confirm: Callable[[Sequence[Measurement]], Collection[str]],
                journal: RoundJournal) -> Callable[[Sequence[Measurement]], Collection[str]]:
    """--confirm's choice, written to the round journal before the confirmation rounds run."""
    def chosen(measurements: Sequence[Measurement]) -> Collection[str]:
        keys = confirm(measurements)
        journal.choose(keys)
        return keys
    return chosen


def execute(registry: Registry, plan: Plan, options: runner.RunOptions, *, show_progress: bool,
            writer: ResultsWriter | None = None, envs: dict[str, environments.Environment] | None = None,
            recovered: Sequence[Measurement] = ()) -> list[Measurement]:
    """Run the plan, each measurement appended to `writer` as it finishes (with rounds, each round to the round
    journal beside it until its cell is written); the --env environments run in their own interpreters, and
    their machines are added to the results file. `recovered`: cells a killed run left in its journal, written
    first. Returns the measurements, labelled with their expected failures."""
    isolated = {n: e for n, e in (envs or {}).items() if n != environments.CURRENT}
    options = dataclasses.replace(options, interpreters={n: e.python for n, e in isolated.items()})
    bar, progress = None, None
    if show_progress:
        extra_rounds = (options.rounds - 1) * len(plan.cells)  # each round advances the bar
        bar, progress = _progress_bar(plan.total + extra_rounds)
        if options.confirm is not None:
            options = dataclasses.replace(options, confirm=_counted(options.confirm, bar, options.rounds))
    machines: dict[str, Machine] = {}
    if writer is not None:
        machines = {n: e.machine(writer.machine, distributions(registry)) for n, e in isolated.items()}
        for m in machines.values():
            writer.add_machine(m)

    def record(m: Measurement) -> None:
        if writer is not None:
            writer.add(labelled(environments.stamp(m, machines), registry.problems))

    on_worker = writer.add_worker if writer is not None else (lambda info: None)
    for cell in recovered:
        record(cell)
    journal = RoundJournal(writer.path) if writer is not None and options.rounds > 1 else None
    if journal is not None and writer is not None and options.confirm is not None:
        options = dataclasses.replace(options, confirm=_journalled(options.confirm, journal))

    def record_round(m: Measurement, planned: int, confirming: bool) -> None:
        if journal is not None and writer is not None:  # stamped with its machine, as it will be written
            stamped = environments.stamp(m, machines)
            journal.add(stamped if stamped.machine else dataclasses.replace(stamped, machine=writer.machine.id),
                        planned, confirming)

    if bar is not None:
        bar.start()
    try:
        measurements = runner.run(registry, plan, options, record=record, on_worker=on_worker,
                                  progress=progress or (lambda c, m: None), record_round=record_round)
        return [labelled(m, registry.problems) for m in [*recovered, *measurements]]
    finally:
        if journal is not None and writer is not None:
            journal.close(writer.keys)
        if bar is not None:
            bar.stop()


def print_findings(measurements: Sequence[Measurement]) -> None:
    """The seed claims this selection measured, with their verdicts (the report's Findings section, in short)."""
    found = findings(measurements)
    tables.print_findings(out, top(found), len(found))


@contextmanager
def sigterm_as_interrupt():
    def terminate(signum, frame):
        raise SigtermReceived

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(path: str | Path, finished: int, then: str, terminated: bool = False) -> Interrupted:
    """What Ctrl-C (or SIGTERM: `terminated`) left of a run writing `path`: its `finished` cells, each flushed as
    it finished; `then` says how to go on from them."""
    how, error = ("terminated (SIGTERM)", Terminated) if terminated else ("interrupted", Interrupted)
    if finished == 0:
        return error(f"{how} before any cell finished; {str(path)!r} holds none of this run's cells")
    return error(f"{how}; the {finished} cell(s) that finished are in {str(path)!r}: {then}")

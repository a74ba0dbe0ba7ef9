"""What each CLI command does; argument parsing lives in cli.py, tables in display.py."""
from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn

from . import display, plugins, provenance, runner
from .errors import UsageError
from .expectations import expected_failure
from .fingerprint import this_machine
from .input_files import check_selected, file_fed, with_inputs
from .reference import reference_value
from .results import ResultsWriter, finished_keys, load
from .status import Status

out = Console(soft_wrap=True)
err = Console(stderr=True)


def _registry(args: argparse.Namespace) -> plugins.Registry:
    registry = plugins.load(tuple(args.plugin))
    for b in registry.broken:
        err.print(f"[yellow]plugin {b.name!r} is broken and was skipped:[/] {b.reason}", highlight=False)
    return with_inputs(registry, getattr(args, "inputs", ()), getattr(args, "seed", 0))


def _provenance(registry: plugins.Registry, args: argparse.Namespace) -> dict:
    """This run's header, with the machine fingerprint its records carry (versions of every known framework)."""
    dists = [d for a in registry.adapters.values() for d in (a.distribution, *a.runtime_distributions)]
    return provenance.collect(args.threads, this_machine(dists))


def cmd_list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    inventory = display.inventory(registry, tags=tuple(args.tag or ()))
    if args.json:
        print(json.dumps(inventory, indent=2))
    else:
        display.print_inventory(out, inventory)
    return 0


def _progress_callbacks(total: int, enabled: bool):
    if not enabled:
        return None, (lambda c, m: None)
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=False)
    task = bar.add_task("cells", total=total)

    def progress(cell, measurement):
        if measurement is None:
            bar.update(task, description=f"{cell.id}")
        else:
            bar.advance(task)
    return bar, progress


def _execute(registry, plan, args, *, time_it: bool, writer: ResultsWriter | None, skip=frozenset()):
    options = runner.RunOptions(timeout=args.timeout, threads=args.threads, time_it=time_it,
                                policy={} if time_it else {})
    bar, progress = _progress_callbacks(plan.total - len(skip), not args.no_progress)
    record = writer.add if writer else (lambda m: None)
    on_worker = writer.add_worker if writer else (lambda info: None)
    if bar is not None:
        bar.start()
    try:
        return runner.run(registry, plan, options, record=record, on_worker=on_worker, progress=progress,
                          skip_keys=frozenset(skip))
    finally:
        if bar is not None:
            bar.stop()


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for item in values or () for v in item.split(",") if v)


def _selection(args: argparse.Namespace, registry: plugins.Registry) -> runner.Selection:
    problems, dtypes = _split(args.problem), _split(args.dtype)
    if registry.inputs:  # input files choose their problems and float64 unless told otherwise
        check_selected(registry, problems)
        problems = problems or file_fed(registry)
        dtypes = dtypes or ("float64",)
    return runner.Selection(problems=problems, sizes=_split(args.size), operators=_split(args.operator),
                            adapters=_split(args.adapter), variants=_split(args.variant), devices=_split(args.device),
                            dtypes=dtypes, tags=_split(args.tag), suite=args.suite)


def _plan(registry, selection, args):
    limit = int(args.memory_limit * 2**30) if args.memory_limit else None
    plan = runner.plan(registry, selection, memory_limit=limit)
    for note in plan.notes:
        err.print(f"[yellow]{note}[/]", highlight=False)
    if plan.total == 0:
        raise UsageError("the selection matches no cell; `adcompare list` shows what exists")
    return plan


def cmd_check(args: argparse.Namespace) -> int:
    registry = _registry(args)
    plan = _plan(registry, _selection(args, registry), args)
    measurements = _execute(registry, plan, args, time_it=False, writer=None)
    expected = {m.cell.key: why for m in measurements if (why := expected_failure(m, registry.problems))}
    if args.json:
        for m in measurements:
            problem = registry.problem(m.cell.problem)
            print(json.dumps({**display.check_record(m), "expected_failure": expected.get(m.cell.key),
                              "reference_value": reference_value(problem, problem.size(m.cell.size))}))
    else:
        display.print_check_matrix(out, measurements, expected)
    failed = [m for m in measurements if m.status.is_failure and m.cell.key not in expected]
    ran = [m for m in measurements if m.status not in (Status.UNSUPPORTED, Status.TOO_LARGE, Status.SKIPPED)]
    if expected:
        err.print(f"[yellow]{len(expected)} cells failed as expected (known limitations, see the table)[/]")
    if failed:
        err.print(f"[red]{len(failed)} of {len(measurements)} cells failed the check[/]")
        return 1
    if not ran:
        err.print("[red]no cell ran: nothing was checked[/]")
        return 1
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    registry = _registry(args)
    plan = _plan(registry, _selection(args, registry), args)
    skip = finished_keys(args.output) if args.resume else set()
    if args.dry_run:
        todo = [c for c in plan.cells if c.key not in skip]
        seconds = runner.estimate_seconds(registry, runner.Plan(tuple(todo), ()))
        out.print(f"{plan.total} cells: {len(todo)} to run, {len(plan.decided)} decided without running "
                  f"(unsupported/too large), {len(skip)} already in {args.output}; "
                  f"estimated {seconds / 60:.1f} min")
        return 0
    if not args.resume and Path(args.output).exists():
        err.print(f"[yellow]overwriting {args.output} (use --resume to keep its finished cells)[/]")
    with ResultsWriter(args.output, _provenance(registry, args), resume=args.resume) as writer:
        measurements = _execute(registry, plan, args, time_it=True, writer=writer, skip=skip)
    display.print_summary(out, measurements)
    out.print(f"results: {args.output}")
    return 1 if any(m.status.is_failure and not expected_failure(m, registry.problems) for m in measurements) else 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import build

    registry = _registry(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.output or f"reports/{stamp}")
    if args.results:
        results = load(args.results)
    else:
        plan = _plan(registry, runner.Selection(suite="quick"), args)
        path = out_dir / "results.jsonl"
        with ResultsWriter(path, _provenance(registry, args)) as writer:
            _execute(registry, plan, args, time_it=True, writer=writer)
        results = load([path])
    sections = [s for group in registry.manager.hook.adcompare_report_sections(results=results) for s in group]
    index = build(results, out_dir, extra_sections=sections)
    out.print(f"report: {index}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .comparison import compare

    rows = compare(load([args.baseline]), load([args.candidate]))
    if not rows:
        raise UsageError(f"{args.baseline} and {args.candidate} have no timed cell in common")
    if args.json:
        for r in rows:
            print(json.dumps(r.to_json()))
    else:
        display.print_comparison(out, rows)
    return 0

"""What each CLI command does; argument parsing lives in cli/main.py, tables in cli/tables.py."""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from adcompare.analysis.comparison import (
    WITHIN_RUN,
    WITHIN_RUN_CAVEAT,
    compare,
    pair_environments,
    regressions,
    run_shifts,
)
from adcompare.analysis.significance import NOISE
from adcompare.cli import tables as display
from adcompare.model.errors import UsageError
from adcompare.model.fingerprint import this_machine
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.run import executors, runner
from adcompare.store import provenance
from adcompare.store.output_paths import RESULTS_DIR, ensure_folder, latest_results, new_results_path, refuse_existing
from adcompare.store.results import ResultsWriter, finished_keys, load
from adcompare.study import environments
from adcompare.study import scope as study
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.shards import ShardSpec
from adcompare.study.suites import SUITES
from adcompare.verify.expectations import expected_reason, labelled
from adcompare.verify.input_sources import check_selected, file_fed, with_inputs
from adcompare.verify.reference import reference_value

# Piped or redirected, tables keep readable columns instead of rich's 80-column default.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


def _registry(args: argparse.Namespace) -> plugins.Registry:
    registry = plugins.load(tuple(args.plugin))
    for b in registry.broken:
        err.print(f"[yellow]plugin {b.name!r} is broken and was skipped:[/] {b.reason}", highlight=False)
    return with_inputs(registry, getattr(args, "inputs", ()), getattr(args, "seed", 0))


def _distributions(registry: plugins.Registry) -> list[str]:
    return [d for a in registry.adapters.values() for d in (a.distribution, *a.runtime_distributions)]


def _machine(registry: plugins.Registry):
    """This machine's fingerprint, with the versions of every known framework."""
    return this_machine(_distributions(registry))


def _provenance(registry: plugins.Registry, args: argparse.Namespace) -> dict:
    """This run's header, with the machine fingerprint its records carry."""
    return provenance.collect(args.threads, _machine(registry))


def _build_environments(registry, args, header: dict) -> dict[str, environments.Environment]:
    """The `--env` environments, built or taken from the cache; named in the header with their fingerprints."""
    specs = environments.parse_options(getattr(args, "env", None) or ())
    if not specs:
        return {}
    built = environments.build_all(specs, say=lambda line: err.print(f"[dim]{line}[/]", highlight=False))
    host = this_machine(())
    header["environments"] = {
        s.name: {**built[s.name].to_json(),
                 "machine": built[s.name].machine(host, _distributions(registry)).to_json()} for s in specs}
    return built


def cmd_list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.suites:
        costs = study.suite_costs(registry, SUITES, study.history([*_past_runs(), *(args.history or ())],
                                                                  _machine(registry).id))
        if args.json:
            print(json.dumps([dataclasses.asdict(c) for c in costs], indent=2))
        else:
            display.print_suite_costs(out, costs)
        return 0
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


def _execute(registry, plan, args, *, time_it: bool, writer: ResultsWriter | None, skip=frozenset(),
             deadline: float | None = None, envs: dict[str, environments.Environment] | None = None):
    envs = envs or {}
    options = runner.RunOptions(timeout=args.timeout, threads=args.threads, time_it=time_it,
                                deadline=deadline, budget=getattr(args, "max_time", None) or "",
                                rounds=getattr(args, "rounds", 1) if time_it else 1,
                                interpreters={n: e.python for n, e in envs.items() if n != environments.CURRENT})
    extra_rounds = (options.rounds - 1) * sum(c.key not in skip for c in plan.cells)  # each round advances the bar
    bar, progress = _progress_callbacks(plan.total - len(skip) + extra_rounds, not args.no_progress)
    machines = {n: e.machine(writer.machine, _distributions(registry)) for n, e in envs.items()
                if n != environments.CURRENT} if writer else {}
    for machine in machines.values():
        writer.add_machine(machine)
    record = ((lambda m: writer.add(labelled(environments.stamp(m, machines), registry.problems))) if writer
              else (lambda m: None))
    on_worker = writer.add_worker if writer else (lambda info: None)
    if bar is not None:
        bar.start()
    try:
        measurements = runner.run(registry, plan, options, record=record, on_worker=on_worker, progress=progress,
                                  skip_keys=frozenset(skip))
        return [labelled(m, registry.problems) for m in measurements]
    finally:
        if bar is not None:
            bar.stop()


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for item in values or () for v in item.split(",") if v)


def _device_counts(values: list[str] | None) -> tuple[int, ...]:
    """--devices 1,2,4 as whole numbers; anything else is a usage error naming the value and the fix."""
    counts = []
    for text in _split(values):
        try:
            counts.append(int(text))
        except ValueError:
            raise UsageError(f"--devices {text!r}: a device count is a whole number, e.g. --devices 1,2,4") from None
    return tuple(dict.fromkeys(counts))


def _selection(args: argparse.Namespace, registry: plugins.Registry) -> Selection:
    problems, dtypes = _split(args.problem), _split(args.dtype)
    if registry.inputs:  # input files choose their problems and float64 unless told otherwise
        check_selected(registry, problems)
        problems = problems or file_fed(registry)
        dtypes = dtypes or ("float64",)
    return Selection(problems=problems, sizes=_split(args.size), operators=_split(args.operator),
                     adapters=_split(args.adapter), variants=_split(args.variant), devices=_split(args.device),
                     dtypes=dtypes, tags=_split(args.tag), suite=args.suite,
                     environments=_split(getattr(args, "environment", None)),
                     device_counts=_device_counts(getattr(args, "devices", None)))


def _plan(registry, selection, args):
    limit = int(args.memory_limit * 2**30) if args.memory_limit else None
    specs = environments.parse_options(getattr(args, "env", None) or ())
    plan = make_plan(registry, selection, memory_limit=limit, environments=specs)
    environments.check_pins(specs, [registry.adapters[a] for a in selection.adapters or registry.adapters])
    for note in plan.notes:
        err.print(f"[yellow]{note}[/]", highlight=False)
    if plan.total == 0:
        left_out = [n for n in plan.notes if n.startswith("left out problem")]
        if left_out:
            raise UsageError(f"nothing applies: {'; '.join(left_out)}; `adcompare list` shows each problem's "
                             f"operators")
        raise UsageError("the selection matches no cell; `adcompare list` shows what exists")
    return plan


def _reference_value(problem, size) -> float | None:
    """The float64 objective at `size` for `check --json`, or None where the inputs cannot be read: a file whose
    body does not match its header passed planning (headers only) and failed its cells in the worker with the
    reader's message, which the record already carries; reading it again here must not end the listing."""
    try:
        return reference_value(problem, size)
    except (OSError, ValueError):  # what a reader raises (Problem.inputs → read_input_file)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    registry = _registry(args)
    plan = _plan(registry, _selection(args, registry), args)
    envs = _build_environments(registry, args, {})
    measurements = _execute(registry, plan, args, time_it=False, writer=None, envs=envs)
    expected = {m.cell.key: why for m in measurements if (why := expected_reason(m))}  # labelled by _execute
    if args.json:
        for m in measurements:
            problem = registry.problem(m.cell.problem)
            print(json.dumps({**display.check_record(m), "expected_failure": expected.get(m.cell.key),
                              "reference_value": _reference_value(problem, problem.size(m.cell.size))}))
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


def _past_runs() -> list[Path]:
    """Results files of earlier runs in results/ (run's default output); history keeps this machine's cells."""
    return sorted(RESULTS_DIR.glob("*.jsonl")) if RESULTS_DIR.is_dir() else []


def _study(registry, args) -> tuple[study.Study, dict]:
    """This invocation's study (shard, resume, budget) and the provenance whose fingerprint picks the history."""
    plan = _plan(registry, _selection(args, registry), args)
    prov = _provenance(registry, args)
    done = frozenset(finished_keys(args.output)) if args.resume else frozenset()
    past = study.history([*([args.output] if args.output else []), *_past_runs(), *(args.history or ())],
                         prov["machine"]["fingerprint"])
    shard = ShardSpec.parse(args.shard) if args.shard else None
    return study.prepare(registry, plan, done=done, past=past, shard=shard, max_time=args.max_time or "",
                         timeout=args.timeout), prov


def _output(args: argparse.Namespace) -> bool:
    """Settle `-o` before anything runs: a new timestamped file when none is named (True: this run created it),
    else refuse an existing one unless --resume or --overwrite says what to do with it."""
    if args.output is None:
        if args.resume:
            raise UsageError("--resume needs -o PATH: the results file whose missing cells to run")
        args.output = str(new_results_path())
        out.print(f"results: {args.output}", highlight=False)
        return True
    refuse_existing(Path(args.output), resume=args.resume, overwrite=args.overwrite)
    return False


def cmd_run(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.dry_run:
        st, _ = _study(registry, args)
        if args.json:
            print(json.dumps(study.cells_json(registry, st)))
        else:
            out.print(study.summary(st, args.output or "the results file"), highlight=False)
            if args.rounds > 1:  # the estimate is one pass; later rounds repeat every timed cell in new workers
                out.print(f"--rounds {args.rounds}: each timed cell runs {args.rounds} times, so about "
                          f"{args.rounds}× the estimate", highlight=False)
        for spec in environments.parse_options(args.env or ()):
            out.print(f"environment {spec.name}: {environments.describe(spec)}")
        return 0
    fresh = _output(args)
    if args.executor:
        return executors.run_study(args)
    st, prov = _study(registry, args)
    envs = _build_environments(registry, args, prov)
    with ResultsWriter(args.output, prov, resume=args.resume, overwrite=args.overwrite, fresh=fresh) as writer:
        for m in st.left_out:
            writer.add(m)
        measurements = _execute(registry, st.plan, args, time_it=True, writer=writer, deadline=st.deadline(),
                                envs=envs)
        measurements = [*measurements, *st.left_out]
    display.print_summary(out, measurements)
    _print_findings(measurements)
    out.print(f"results: {args.output}")
    return 1 if any(m.status.is_failure and not expected_reason(m) for m in measurements) else 0


def _print_findings(measurements) -> None:
    """The seed claims this selection measured, with their verdicts (the report's Findings section, in short)."""
    from adcompare.analysis.findings import findings, top

    found = findings(measurements)
    display.print_findings(out, top(found), len(found))


def cmd_report(args: argparse.Namespace) -> int:
    from adcompare.report import build

    if args.figures and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--figures needs matplotlib, which is not installed; pip install 'adcompare[plot]'")
    registry = _registry(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.output or f"reports/{stamp}")
    ensure_folder(out_dir)
    if args.latest and args.results:
        raise UsageError("--latest reports the newest results file; drop it or the files named")
    if args.latest:
        args.results = [str(latest_results())]
        out.print(f"reporting {args.results[0]}", highlight=False)
    if args.results:
        results = load(args.results)
    else:
        path = out_dir / "results.jsonl"
        if path.exists():  # report has no --resume/--overwrite: it never replaces an earlier run's results
            raise UsageError(f"{str(out_dir)!r} already holds the results of an earlier report; choose another -o, "
                             f"or report them: adcompare report {path}")
        plan = _plan(registry, Selection(suite="quick"), args)
        with ResultsWriter(path, _provenance(registry, args)) as writer:
            _execute(registry, plan, args, time_it=True, writer=writer)
        results = load([path])
    results = dataclasses.replace(results, measurements=tuple(labelled(m, registry.problems)
                                                              for m in results.measurements))
    sections = [s for group in registry.manager.hook.adcompare_report_sections(results=results) for s in group]
    index = build(results, out_dir, extra_sections=sections, figures_dir=Path(args.figures) if args.figures else None)
    _print_findings(results.measurements)
    if args.figures:
        out.print(f"figures (PDF, PNG): {args.figures}")
    out.print(f"report: {index}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.fail_above is not None and not 0 <= args.fail_above < 1e6:
        raise UsageError(f"--fail-above {args.fail_above}: give a percentage >= 0, e.g. --fail-above 10")
    fail_on_shift = args.fail_on_shift
    if fail_on_shift is not None and not 0 <= fail_on_shift < 1e6:
        raise UsageError(f"--fail-on-shift {fail_on_shift}: give a percentage >= 0, e.g. --fail-on-shift 10")
    threshold = NOISE if args.fail_above is None else args.fail_above / 100
    if args.candidate is None:
        return _compare_environments(pair_environments(load([args.baseline]), args.baseline_environment,
                                                       threshold), args)
    rows = compare(load([args.baseline]), load([args.candidate]), threshold)
    if not rows:
        raise UsageError(f"{args.baseline} and {args.candidate} have no timed cell in common")
    offending = regressions(rows) if args.fail_above is not None else []
    rows = offending + [r for r in rows if r not in offending]
    shifts = run_shifts(rows)
    if args.json:
        for r in rows:
            print(json.dumps({**r.to_json(), "regression": r in offending}))
    else:
        display.print_comparison(out, rows, offending, args.fail_above)
    _say_noise_model(rows)
    shifted = [s for s in shifts if fail_on_shift is not None and s.fails(fail_on_shift)]
    for shift in shifts:  # on stderr beside the noise model, so --json's stdout stays one object per cell
        display.print_run_shift(err, shift, fail_on_shift, shift in shifted)
    return 1 if offending or shifted else 0


def _say_noise_model(rows) -> None:
    """Which noise model decided the rows: the within-run rule is the weaker one, and the gate says so."""
    within = sum(r.noise_model == WITHIN_RUN for r in rows)
    if within:
        err.print(f"[yellow]{within} of {len(rows)} cells {WITHIN_RUN_CAVEAT}[/]", highlight=False)
    else:
        err.print(f"noise model: the spread between rounds ({len(rows)} cells)", highlight=False)


def _compare_environments(pairs, args: argparse.Namespace) -> int:
    """One results file over several environments: exit 1 when a derivative differs between releases, or, with
    --fail-above, when a cell is significantly slower than in the baseline environment by more than PCT."""
    if not pairs:
        raise UsageError(f"{args.baseline} holds one environment only; compare two files, or run with two --env")
    offending = regressions([p.timing for p in pairs if p.timing]) if args.fail_above is not None else []
    slower = [p for p in pairs if p.timing is not None and p.timing in offending]
    if args.json:
        for p in pairs:
            print(json.dumps({**p.to_json(), "regression": p in slower}))
    else:
        display.print_environment_pairs(out, pairs)
    _say_noise_model([p.timing for p in pairs if p.timing])
    return 1 if slower or any(pair.values_agree is False for pair in pairs) else 0

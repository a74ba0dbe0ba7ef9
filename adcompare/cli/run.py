"""`adcompare run`: check and time the selected cells into a results file — or plan them (--dry-run), or run them
as shards through an executor (--executor); exit 1 when a cell failed unexpectedly."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from adcompare.analysis.environment_pairs import Confirmation
from adcompare.analysis.harness_cost import harness_cost
from adcompare.cli import tables
from adcompare.cli.arguments import shard_options, timeouts
from adcompare.cli.pipeline import (
    load_registry,
    machine,
    past_runs,
    plan_cells,
    print_findings,
    run_provenance,
    selection,
    watching,
)
from adcompare.cli.tables import out
from adcompare.model.errors import SigtermReceived, UsageError
from adcompare.model.measurement import Measurement
from adcompare.model.timing_policy import budget_policy
from adcompare.plugin.registry import Registry
from adcompare.run import executors
from adcompare.run.rounds import recovered
from adcompare.run.runner import RunOptions
from adcompare.run.session import Output, interrupted, run_session, sigterm_as_interrupt
from adcompare.store.output_paths import new_results_path, refuse_existing
from adcompare.store.results import cells_in, finished_keys
from adcompare.store.round_journal import journal_path, read_journal
from adcompare.study import environment_specs, environments
from adcompare.study import scope as study
from adcompare.study.plan import Plan
from adcompare.study.shards import ShardSpec
from adcompare.verify.expectations import expected_reason


def _plan(registry: Registry, args: argparse.Namespace) -> Plan:
    return plan_cells(registry, selection(args, registry), memory_limit_gib=args.memory_limit,
                      env_options=args.env or ())


def _study(registry: Registry, plan: Plan, args: argparse.Namespace, output: str | None,
           fingerprint: str, recovered: frozenset[str] = frozenset()) -> study.Study:
    """This invocation's study: the plan's shard, less the cells --resume keeps (and those `recovered` from a
    killed run's round journal), with what the --max-time budget fits, ordered by the times measured on this machine
    (`fingerprint`) where there are any."""
    done = frozenset(finished_keys(output)) | recovered if args.resume and output else frozenset()
    past = study.history([*([output] if output else []), *past_runs(), *(args.history or ())], fingerprint)
    shard = ShardSpec.parse(args.shard) if args.shard else None
    return study.prepare(registry, plan, done=done, past=past, shard=shard, max_time=args.max_time or "",
                         timeout=timeouts(args, plan)["timeout"])


def _settle_output(args: argparse.Namespace) -> tuple[str, bool]:
    """Settle `-o` before anything runs: a new timestamped file when none is named (True: this run created it),
    else refuse an existing one unless --resume or --overwrite says what to do with it."""
    if args.output is None:
        if args.resume:
            raise UsageError("--resume needs -o PATH: the results file whose missing cells to run")
        output = str(new_results_path())
        out.print(f"results: {output}", highlight=False)
        return output, True
    refuse_existing(Path(args.output), resume=args.resume, overwrite=args.overwrite)
    return args.output, False


def confirmation(args: argparse.Namespace) -> Confirmation | None:
    """--confirm PCT between the --env environments (analysis/environment_pairs.Confirmation); refused where an
    A/B run could not decide."""
    names = [spec.name for spec in environment_specs.parse_options(args.env or ())]
    return Confirmation.asked(args.confirm, args.rounds, names)


def _recovered(output: str) -> list[Measurement]:
    """The cells a killed `run --rounds` left in its round journal beside `output` and not in it, merged from
    their finished rounds (run/rounds.py), to be written before the run goes on."""
    found = recovered(read_journal(output), finished_keys(output))
    if found:
        out.print(f"recovered {len(found)} cell(s) from the rounds a killed run left in {str(journal_path(output))!r}"
                  f" (each from the rounds it finished)", highlight=False)
    return found


def sharded_run(args: argparse.Namespace, output: str) -> executors.ShardedRun:
    """The executor's request: the driver's own options, and the allow-listed ones every shard repeats."""
    if args.shard:
        raise UsageError("--executor runs every shard; drop --shard/--dry-run (or drop --executor to run one shard)")
    return executors.ShardedRun(
        output=Path(output), shard_options=shard_options(args), executor=args.executor, shards=args.shards,
        shard_dir=Path(args.shard_dir) if args.shard_dir else None, resume=args.resume, overwrite=args.overwrite,
        slurm=executors.SlurmOptions(partition=args.slurm_partition, gpus_per_job=args.slurm_gpus_per_job,
                                     cpus_per_job=args.slurm_cpus_per_job, time_minutes=args.slurm_time,
                                     exclusive=args.slurm_exclusive))


def _dry_run(registry: Registry, args: argparse.Namespace) -> int:
    confirmation(args)  # a --confirm the run would refuse is refused here too
    st = _study(registry, _plan(registry, args), args, args.output, machine(registry).id)
    if args.json:
        print(json.dumps(study.cells_json(registry, st)))
    else:
        out.print(study.summary(st, args.output or "the results file"), highlight=False)
        if args.rounds > 1:  # the estimate is one pass; later rounds repeat every timed cell in new workers
            out.print(f"--rounds {args.rounds}: each timed cell runs {args.rounds} times, so about "
                      f"{args.rounds}× the estimate", highlight=False)
    for spec in environment_specs.parse_options(args.env or ()):
        out.print(f"environment {spec.name}: {environments.describe(spec)}")
    return 0


def command(args: argparse.Namespace) -> int:
    registry = load_registry(args.plugin, args.inputs, args.seed)
    if args.dry_run:
        return _dry_run(registry, args)
    if args.executor:
        if args.confirm is not None:  # shards split by worker group, environment included: no shard holds a pair
            raise UsageError("--confirm needs both environments of a cell in one run, and --executor splits them "
                             "between shards; drop --executor (or --confirm)")
        request = sharded_run(args, _settle_output(args)[0])
        try:
            with sigterm_as_interrupt():
                return executors.run_study(request)
        except KeyboardInterrupt as stop:  # the shards' finished cells are merged into the output by now
            raise interrupted(request.output, cells_in(request.output), "rerun the same command with --resume",
                              terminated=isinstance(stop, SigtermReceived)) from None
    plan = _plan(registry, args)  # before the output: a selection error leaves no empty results file behind
    policy = budget_policy(bool(args.max_time))
    header = run_provenance(registry, args.threads, policy)
    confirm = confirmation(args)
    output, fresh = _settle_output(args)
    recovered = _recovered(output) if args.resume else []
    st = _study(registry, plan, args, output, header.machine.id,
                frozenset(m.cell.key for m in recovered))
    to_run, left_out = st.to_run(args.rounds)
    options = RunOptions(**timeouts(args, to_run), threads=args.threads, deadline=st.deadline(),
                         budget=args.max_time or "", rounds=args.rounds, confirm=confirm, estimate=st.estimate,
                         policy=policy)
    target = Output(Path(output), header, resume=args.resume, overwrite=args.overwrite, fresh=fresh,
                    then=f"add --resume -o {output} to the same command to run the rest")
    with watching(to_run, args.rounds, show_progress=not args.no_progress) as observers:
        measurements = run_session(registry, to_run, options, output=target,
                                   environments_named=environment_specs.parse_options(args.env or ()),
                                   observers=observers, left_out=left_out, recovered=recovered)
    tables.print_summary(out, measurements)
    tables.print_harness_cost(out, harness_cost(measurements))
    print_findings(measurements)
    out.print(f"results: {output}")
    return 1 if any(m.status.is_failure and not expected_reason(m) for m in measurements) else 0

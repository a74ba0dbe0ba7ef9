"""`adcompare check`: every selected cell's derivatives against the float64 reference, untimed; exit 1 on any
unexpected failure, or when no cell ran."""
from __future__ import annotations

import argparse
import json

from adcompare.cli import tables
from adcompare.cli.arguments import timeouts
from adcompare.cli.pipeline import load_registry, plan_cells, selection, watching
from adcompare.cli.tables import err, out
from adcompare.model.problem import Problem, Size
from adcompare.model.status import NOT_RUN
from adcompare.run.runner import RunOptions
from adcompare.run.session import run_session
from adcompare.study import environment_specs
from adcompare.verify.expectations import expected_reason
from adcompare.verify.reference import reference_value


def _reference_value(problem: Problem, size: Size) -> float | None:
    """The float64 objective at `size` for `check --json`, or None where the inputs cannot be read: a file whose
    body does not match its header passed planning (headers only) and failed its cells in the worker with the
    reader's message, which the record already carries; reading it again here must not end the listing."""
    try:
        return reference_value(problem, size)
    except (OSError, ValueError):  # what a reader raises (Problem.inputs → read_input_file)
        return None


def command(args: argparse.Namespace) -> int:
    registry = load_registry(args.plugin, args.inputs, args.seed)
    plan = plan_cells(registry, selection(args, registry), memory_limit_gib=args.memory_limit,
                      env_options=args.env or ())
    options = RunOptions(**timeouts(args, plan), threads=args.threads, time_it=False)
    with watching(plan, 1, show_progress=not args.no_progress) as observers:
        measurements = run_session(registry, plan, options, observers=observers,
                                   environments_named=environment_specs.parse_options(args.env or ()))
    expected = {m.cell.key: why for m in measurements if (why := expected_reason(m))}  # finished by the session
    if args.json:
        for m in measurements:
            problem = registry.problem(m.cell.problem)
            print(json.dumps({**tables.check_record(m), "expected_failure": expected.get(m.cell.key),
                              "reference_value": _reference_value(problem, problem.size(m.cell.size))}))
    else:
        tables.print_check_matrix(out, measurements, expected)
    failed = [m for m in measurements if m.status.is_failure and m.cell.key not in expected]
    ran = [m for m in measurements if m.status not in NOT_RUN]
    if expected:
        err.print(f"[yellow]{len(expected)} cells failed as expected (known limitations, see the table)[/]")
    if failed:
        err.print(f"[red]{len(failed)} of {len(measurements)} cells failed the check[/]")
        return 1
    if not ran:
        err.print("[red]no cell ran: nothing was checked[/]")
        return 1
    return 0

"""`adcompare list`: the adapters, problems and support matrix, or with --suites each suite's cost."""
from __future__ import annotations

import argparse
import dataclasses
import json

from adcompare.cli import tables
from adcompare.cli.pipeline import load_registry, machine, past_runs
from adcompare.cli.tables import out
from adcompare.study import scope as study
from adcompare.study.suites import SUITES


def command(args: argparse.Namespace) -> int:
    registry = load_registry(args.plugin)
    if args.suites:
        costs = study.suite_costs(registry, SUITES, study.history([*past_runs(), *(args.history or ())],
                                                                  machine(registry).id))
        if args.json:
            print(json.dumps([dataclasses.asdict(c) for c in costs], indent=2))
        else:
            tables.print_suite_costs(out, costs)
        return 0
    inventory = tables.inventory(registry, tags=tuple(args.tag or ()))
    if args.json:
        print(json.dumps(inventory, indent=2))
    else:
        tables.print_inventory(out, inventory)
    return 0

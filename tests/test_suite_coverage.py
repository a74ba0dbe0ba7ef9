"""Every built-in problem at its smallest size: every operator through JAX (float64, the reference's dtype), and
`value` plus one derivative through every other available adapter — check only, no timing."""
from __future__ import annotations

import pytest

from adcompare.model.cell import Cell
from adcompare.model.problem import applicable_operators
from adcompare.plugin import registry as plugins
from adcompare.run import runner
from adcompare.study.plan import Plan, usable_adapters
from adcompare.verify.expectations import unexpected

REGISTRY = plugins.load()
ADAPTERS, _ = usable_adapters(REGISTRY, ())


def _cells():
    cells = []
    for problem in REGISTRY.problems.values():
        smallest = problem.smallest_size.label
        ops = applicable_operators(problem)
        variant = "compiled" if problem.compilable else "eager"
        cells += [Cell(problem.name, smallest, op, "jax", variant, "cpu", "float64") for op in ops]
        first_derivative = next(op for op in ops if op != "value")
        for adapter in ADAPTERS:
            if adapter != "jax":
                cells += [Cell(problem.name, smallest, op, adapter, "eager", "cpu", "float64")
                          for op in dict.fromkeys(("value", first_derivative)) if op in ops]
    return cells


CELLS = _cells()


@pytest.fixture(scope="session")
def coverage():
    plan = Plan(tuple(CELLS), ())
    out = runner.run(REGISTRY, plan, runner.RunOptions(timeout=240, threads=2, time_it=False))
    return {m.cell.key: m for m in out}


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_problem_runs_and_agrees(cell, coverage):
    m = coverage[cell.key]
    assert (why := unexpected(m, REGISTRY.problems)) is None, why

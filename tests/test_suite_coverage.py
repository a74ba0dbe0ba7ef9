"""The suites cover every operator family, adapter and variant, and every built-in problem runs through JAX at its
smallest size — every operator, float64 (the reference's dtype), compiled where the problem compiles — through a
worker, check only, no timing.

One layer checks each thing once. The other adapters run every built-in problem at its smallest size, every
operator, in tests/adapters/test_{torch,tensorflow,autograd}.py (`test_every_*operator_has_declared_shape_dtype_
and_agrees`: both dtypes for torch and autograd, which promote silently; float64 for TensorFlow, which raises);
every (adapter, operator, variant) on the conformance problems is tests/test_conformance.py; the quick suite through
workers with timing and pairwise agreement is tests/test_matrix.py. Besides JAX's, only JAX's eager LSTM is run here
(its ADBench goldens are slow-marked); JAX's cells that the conformance suite runs in float64 already (its worker),
or that tests/test_gradbench.py and tests/test_ht.py hold to GradBench's goldens at the same size and variant
(tests/test_goldens.py's worker), are not run twice.
"""
from __future__ import annotations

import pytest

from adcompare.model.cell import Cell
from adcompare.model.operators import NESTED, OPERATORS, spec
from adcompare.model.problem import applicable_operators
from adcompare.plugin import registry as plugins
from adcompare.run import runner
from adcompare.run.session import run_session
from adcompare.study.plan import Plan, Selection, usable_adapters
from adcompare.study.plan import plan as make_plan
from adcompare.testing import supported_cases
from adcompare.verify.expectations import unexpected
from tests import test_gradbench, test_ht
from tests.per_adapter import MINUTES_A_CALL

REGISTRY = plugins.load()
ADAPTERS, _ = usable_adapters(REGISTRY, ())
# JAX's eager LSTM route (the Python-loop `fold`, op by op), whose ADBench goldens at c = 1024 tests/test_adbench.py
# reproduces only under -m slow (1-2 min of dispatch): held to the reference here, at the smallest size.
EAGER_HERE = (("jax", "lstm", ("value", "grad")),)
# JAX's float64 cells that tests/test_conformance.py's TestJax runs through a worker already (its isolated dtype, on
# the conformance problems at their smallest sizes): not run twice.
IN_CONFORMANCE = frozenset((c.problem, c.size, c.operator, c.variant)
                           for c in supported_cases(REGISTRY.adapters["jax"], REGISTRY)) if "jax" in ADAPTERS else ()
# JAX's float64 cells that tests/test_gradbench.py and tests/test_ht.py hold to GradBench's goldens at the same size
# and variant, in a worker process of their own (lse, llsq, det, ode, ht at their smallest sizes): not run twice.
IN_GOLDENS = frozenset(tuple(case) for case in test_gradbench.adapter_cases("jax", slow=False)
                       + test_ht.adapter_cases("jax", slow=False)) if "jax" in ADAPTERS else frozenset()


def _cells():
    cells = []
    for problem in REGISTRY.problems.values():
        if problem.name in MINUTES_A_CALL:
            continue
        smallest = problem.smallest_size.label
        variant = "compiled" if problem.compilable else "eager"
        if "jax" in ADAPTERS:
            cells += [Cell(problem.name, smallest, op, "jax", variant, "cpu", "float64")
                      for op in applicable_operators(problem)
                      if (problem.name, smallest, op, variant) not in IN_CONFORMANCE | IN_GOLDENS]
        cells += [Cell(problem.name, smallest, op, adapter, "eager", "cpu", "float64")
                  for adapter, name, ops in EAGER_HERE if adapter in ADAPTERS and name == problem.name for op in ops]
    return cells


CELLS = _cells()


@pytest.fixture(scope="session")
def coverage():
    plan = Plan(tuple(CELLS), ())
    out = run_session(REGISTRY, plan, runner.RunOptions(timeout=240, threads=2, time_it=False))
    return {m.cell.key: m for m in out}


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_problem_runs_and_agrees(cell, coverage):
    m = coverage[cell.key]
    assert (why := unexpected(m, REGISTRY.problems)) is None, why


def test_every_problem_and_operator_runs_through_jax():
    if "jax" not in ADAPTERS:
        pytest.skip("jax is not installed")
    ran = {(c.problem, c.operator) for c in CELLS if c.adapter == "jax"} | {(p, op) for p, _, op, _ in IN_CONFORMANCE}
    ran |= {(p, op) for p, size, op, _ in IN_GOLDENS if size == REGISTRY.problems[p].smallest_size.label}
    assert ran == {(p.name, op) for p in REGISTRY.problems.values() if p.name not in MINUTES_A_CALL
                   for op in applicable_operators(p)}
    # the nested_* operators: only saddle and particle declare them (test_nested.py runs them per adapter)
    assert {op for _, op in ran} == {op for op in OPERATORS if spec(op).family != "nested"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_quick_suite_covers_every_operator_family_adapter_and_variant(dtype):
    """`adcompare run` with no selection runs the quick suite; every operator family and each adapter's every
    planned variant that supports an operator must be in it, so the matrix (tests/test_matrix.py) runs them all."""
    quick = make_plan(REGISTRY, Selection(suite="quick", dtypes=(dtype,)))
    cells = list(quick.cells) + [m.cell for m in quick.decided]
    # but the nesting orders: only saddle and particle declare them, minutes a call (suites.FULL_LEAVES_OUT)
    assert {spec(c.operator).family for c in cells} == {spec(op).family for op in OPERATORS} - {NESTED}
    planned = {(name, v) for name in ADAPTERS for v in REGISTRY.adapters[name].planned_variants()
               if any(REGISTRY.adapters[name].capability(op, v).supported for op in OPERATORS)}
    assert {(c.adapter, c.variant) for c in quick.cells} == planned

"""The full suite's promise (issue 16): every built-in problem at ≥ 3 sizes spanning ≥ 2 decades (every size where
it declares fewer than three), every operator family it supports at that span, and every applicable operator at
some size — in float32 and float64, in every adapter and variant; the problems `FULL_LEAVES_OUT` names (each call
minutes, one input: GradBench's nested evals) excepted. Planning only: nothing runs."""
from __future__ import annotations

import math
from collections import defaultdict

import pytest

from adcompare.model.operators import spec
from adcompare.model.problem import applicable_operators, shapes_of
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.study.plan import Selection, plan, usable_adapters
from adcompare.study.suites import FULL_LEAVES_OUT

REGISTRY = plugins.load()


@pytest.fixture(scope="module")
def full():
    return plan(REGISTRY, Selection(suite="full"))


def decades(problem, labels) -> float:
    """How many decades the sizes span along the problem's most-varied dimension: inputs, outputs, batch, work
    (flops) or operations dispatched (LSTM grows in its loop, BA in its batch, GMM in its parameters)."""
    shapes = [shapes_of(problem, problem.size(label)) for label in labels]
    spans = []
    for measure in ("n_in", "n_out", "batch", "flops", "operations"):
        values = [getattr(s, measure) for s in shapes]
        if all(v for v in values):
            spans.append(math.log10(max(values) / min(values)))
    return max(spans)


def test_every_problem_family_spans_two_decades_at_three_sizes(full):
    sizes = defaultdict(set)  # (problem, family) → sizes with a planned cell
    for cell in full.cells:
        sizes[(cell.problem, spec(cell.operator).family)].add(cell.size)
    short = []
    for problem in REGISTRY.problems.values():
        if problem.name in FULL_LEAVES_OUT:
            continue
        families = {spec(op).family for op in applicable_operators(problem)}
        declared = [s.label for s in problem.sizes]
        for family in families:
            got = sizes[(problem.name, family)]
            if len(declared) < 3:
                ok = got == set(declared)
            else:
                ok = len(got) >= 3 and decades(problem, got) >= 2
            if not ok:
                short.append(f"{problem.name} · {family}: {sorted(got)}")
    assert not short, "families below 3 sizes over 2 decades in the full suite:\n" + "\n".join(short)


def test_every_operator_adapter_variant_and_dtype_is_in_the_full_suite(full):
    cells = list(full.cells) + [m.cell for m in full.decided if m.status is not Status.UNSUPPORTED]
    for problem in REGISTRY.problems.values():
        planned = {c.operator for c in cells if c.problem == problem.name}
        expected = set() if problem.name in FULL_LEAVES_OUT else set(applicable_operators(problem))
        assert planned == expected, problem.name
    pairs = {(c.adapter, c.variant, c.dtype) for c in full.cells}
    usable, _ = usable_adapters(REGISTRY, ())
    for name in usable:
        for variant in REGISTRY.adapter(name).variants:
            if (name, variant) == ("autograd", "compiled"):
                continue  # autograd has no compiler: its cells are decided `unsupported` without running
            slow = variant in REGISTRY.adapter(name).slow_variants  # torch.compile, 7–16 s a cold compile
            dtypes = ("float32",) if slow else ("float32", "float64")
            assert {(name, variant, d) for d in dtypes} <= pairs, (name, variant)


def test_full_leaves_out_only_the_declared_problems_and_gradbench_runs_them():
    """saddle and particle (minutes a call, one input) are the only built-in problems `full` leaves out, each
    with its reason; `--suite gradbench` plans all four nesting orders of each."""
    assert set(FULL_LEAVES_OUT) == {"saddle", "particle"} and all(FULL_LEAVES_OUT.values())
    gradbench = plan(REGISTRY, Selection(suite="gradbench", problems=tuple(FULL_LEAVES_OUT)))
    for name in FULL_LEAVES_OUT:
        assert {c.operator for c in gradbench.cells if c.problem == name} == \
            {"nested_ff", "nested_fr", "nested_rf", "nested_rr"}, name

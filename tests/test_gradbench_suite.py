"""`--suite gradbench`: GradBench's evals at its eval scripts' default sizes with the functions they ask for, every
adapter and variant, float64. The definition is written out here from GradBench's run.py files (gradbench/gradbench
at f26651a) so that the suite is held to it, not to itself. Planning only: nothing runs."""
from __future__ import annotations

import itertools
import json

import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.problem import Size
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.study.plan import Selection, plan, usable_adapters
from adcompare.study.suites import SUITES, allows

REGISTRY = plugins.load()
BA = ((49, 7776, 31843), (21, 11315, 36455), (161, 48126, 182072), (372, 47423, 204472), (257, 65132, 225911),
      (539, 65220, 277273), (93, 61203, 287451), (88, 64298, 383937), (810, 88814, 393775), (1197, 126327, 563734),
      (1723, 156502, 678718), (253, 163691, 899155), (245, 198739, 1091386), (356, 226730, 1255268))  # ba1 … ba14


def dims(**axes) -> set[frozenset[tuple[str, int]]]:
    return {frozenset(zip(axes, combo)) for combo in itertools.product(*axes.values())}


# eval's problem → (GradBench's default sizes as dimension sets, the operators of its functions)
DEFINITION = {
    "gmm_posterior": (dims(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100], n=[1000]), {"value", "grad"}),
    "bundle_adjustment": ({frozenset({("n", n), ("m", m), ("p", p)}) for n, m, p in BA},
                          {"value", "vmap_jacfwd", "vmap_jacrev"}),
    "lstm": (dims(l=[2, 4, 6], c=[1024, 4096, 8192], b=[14]), {"value", "grad"}),
    "lse": (dims(n=[2500, 5000, 10000, 20000, 40000, 80000, 160000, 320000, 640000, 1280000]), {"value", "grad"}),
    "llsq": (dims(n=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392], m=[128]), {"value", "grad"}),
    "det": (dims(ell=[5, 6, 7, 8, 9, 10, 11]), {"value", "grad"}),
    "ode": (dims(n=[1000, 10000, 100000], s=[1, 10, 100]), {"value", "grad"}),
    "kmeans": (dims(k=[10, 100, 1000], n=[1000, 10000], d=[8, 16]), None),  # None: every operator it declares
}


@pytest.fixture(scope="module")
def gradbench():
    return plan(REGISTRY, Selection(suite="gradbench"))


def test_the_suite_is_every_registered_eval_at_gradbenchs_default_sizes_with_its_functions(gradbench):
    assert "gradbench" in SUITES
    cells = [*gradbench.cells, *(m.cell for m in gradbench.decided)]
    assert {c.problem for c in cells} == set(DEFINITION) & set(REGISTRY.problems)
    assert {"gmm_posterior", "bundle_adjustment", "lstm", "lse", "llsq", "det", "ode"} <= {c.problem for c in cells}
    for name, (sizes, operators) in DEFINITION.items():
        if name not in REGISTRY.problems:
            continue
        problem = REGISTRY.problem(name)
        declared = {frozenset(s.dims): s.label for s in problem.sizes}
        expected_sizes = {declared[d] for d in sizes if d in declared}
        got = {(c.size, c.operator) for c in cells if c.problem == name}
        ops = operators if operators is not None else {op for _, op in got}
        assert got == set(itertools.product(expected_sizes, ops)), name


def test_every_usable_adapter_and_variant_in_float64_only(gradbench):
    assert {c.dtype for c in gradbench.cells} == {"float64"}
    usable, _ = usable_adapters(REGISTRY, ())
    pairs = {(c.adapter, c.variant) for c in gradbench.cells}
    for name in usable:
        for variant in REGISTRY.adapter(name).variants:
            if (name, variant) == ("autograd", "compiled"):
                continue  # no compiler: decided unsupported without running
            assert (name, variant) in pairs, (name, variant)
    assert all(m.status is Status.UNSUPPORTED for m in gradbench.decided)


def test_a_problem_may_name_gradbenchs_axes_in_its_own_order():
    kmeans = Size((("n", 1000), ("d", 8), ("k", 10)))  # GradBench's order is k, n, d
    for op in ("value", "grad"):
        cell = Cell("kmeans", kmeans.label, op, "jax", "compiled", "cpu", "float64")
        assert allows("gradbench", cell, kmeans, smallest_size="", slow=True, builtin=True)
    off_grid = Size((("n", 999), ("d", 8), ("k", 10)))
    cell = Cell("kmeans", off_grid.label, "value", "jax", "eager", "cpu", "float64")
    assert not allows("gradbench", cell, off_grid, smallest_size="", slow=False, builtin=True)


def test_a_problem_outside_gradbench_plans_nothing_there():
    for name, builtin in (("exp_dot_loss", True), ("plugin_problem", False)):
        cell = Cell(name, "n10", "grad", "jax", "eager", "cpu", "float64")
        assert not allows("gradbench", cell, Size((("n", 10),)), smallest_size="n10", slow=False, builtin=builtin)


def test_list_suites_shows_its_modelled_cost(capsys):
    assert main(["list", "--suites", "--json"]) == 0
    costs = {c["suite"]: c for c in json.loads(capsys.readouterr().out)}
    assert costs["gradbench"]["cells"] > 1000 and costs["gradbench"]["estimated_seconds"] > 0

"""`--suite gradbench`: GradBench's evals at its eval scripts' default sizes with the functions they ask for, every
adapter and variant, float64. The definition is written out here from GradBench's run.py files (gradbench/gradbench
at f26651a) so that the suite is held to it, not to itself. The suite tests plan only; the report tests read a
real run."""
from __future__ import annotations

import html
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcompare.analysis import gradbench, ratio_grid
from adcompare.analysis.bootstrap import Bootstrap
from adcompare.cli.arguments import DEFAULT_TIMEOUT, timeouts
from adcompare.cli.main import build_parser, main
from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.problem import Size
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.report.page import build
from adcompare.run.runner import RunOptions
from adcompare.store.results import load
from adcompare.study.plan import Selection, plan, usable_adapters
from adcompare.study.suites import NESTED_TIMEOUT, SUITES, allows

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
    # run.py's --variant complicated --model big, hand1 … hand12 (those not shipped are not declared sizes)
    "ht": ({frozenset({("hand", i), ("c", c), ("corners", 3), ("v", 10000)}) for i, c in enumerate(
        (100, 192, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 100000), start=1)},
           {"value", "jacfwd", "jacrev"}),
    # one input each (start (1, 1); w = 0), four functions ff, fr, rf, rr
    "saddle": ({frozenset({("d", 2)})}, {"nested_ff", "nested_fr", "nested_rf", "nested_rr"}),
    "particle": ({frozenset({("d", 1)})}, {"nested_ff", "nested_fr", "nested_rf", "nested_rr"}),
}


@pytest.fixture(scope="module")
def gradbench_plan():
    return plan(REGISTRY, Selection(suite="gradbench"))


def test_the_suite_is_every_registered_eval_at_gradbenchs_default_sizes_with_its_functions(gradbench_plan):
    assert "gradbench" in SUITES
    cells = [*gradbench_plan.cells, *(m.cell for m in gradbench_plan.decided)]
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


def test_every_usable_adapter_and_variant_in_float64_only(gradbench_plan):
    assert {c.dtype for c in gradbench_plan.cells} == {"float64"}
    usable, _ = usable_adapters(REGISTRY, ())
    pairs = {(c.adapter, c.variant) for c in gradbench_plan.cells}
    for name in usable:
        for variant in REGISTRY.adapter(name).variants:
            if (name, variant) == ("autograd", "compiled"):
                continue  # no compiler: decided unsupported without running
            assert (name, variant) in pairs, (name, variant)
    assert all(m.status is Status.UNSUPPORTED for m in gradbench_plan.decided)


def test_the_nested_evals_cells_carry_their_own_timeout_unless_timeout_is_given(gradbench_plan):
    """Item 4 of issue 40: saddle's and particle's cells (eager calls of 10 s to minutes) get NESTED_TIMEOUT, the
    other evals' cells --timeout's default; a --timeout given holds for every cell."""
    nested = {c.key for c in gradbench_plan.cells if c.problem in ("saddle", "particle")}
    assert nested and dict(gradbench_plan.timeouts) == dict.fromkeys(nested, NESTED_TIMEOUT)
    assert NESTED_TIMEOUT > DEFAULT_TIMEOUT
    assert not plan(REGISTRY, Selection(suite="quick")).timeouts
    parser = build_parser()
    saddle_rr = next(c for c in gradbench_plan.cells if c.problem == "saddle" and c.operator == "nested_rr")
    lse = next(c for c in gradbench_plan.cells if c.problem == "lse")
    for argv, nested_seconds, other_seconds in ((["run"], NESTED_TIMEOUT, DEFAULT_TIMEOUT),
                                                (["run", "--timeout", "120"], 120.0, 120.0)):
        options = RunOptions(**timeouts(parser.parse_args(argv), gradbench_plan))
        assert (options.cell_timeout(saddle_rr), options.cell_timeout(lse)) == (nested_seconds, other_seconds)


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


# --- the report as GradBench readers expect it, on a real run ------------------------------------------------------
# tests/fixtures/gradbench_suite/results.jsonl was written by
#   adcompare run --suite gradbench --size n2500,n16-m128,ell5,n1000-s1,d2-K5-n1000 --operator value,grad \
#       --adapter jax,torch -o tests/fixtures/gradbench_suite/results.jsonl
# (the smallest default size of gmm, lse, llsq, det and ode; every jax and torch variant; --size also runs ADBench's
# gmm, which shares d2-K5-n1000 and is no GradBench eval). The figures below are recomputed from the file's raw
# samples with NumPy, not through adcompare's loaders.
FIXTURE = Path(__file__).parent / "fixtures" / "gradbench_suite" / "results.jsonl"
EVAL_NAMES = {"gmm_posterior": "gmm", "bundle_adjustment": "ba"}


def raw_medians() -> dict[tuple[str, str, str, str], float]:
    """(problem, size, operator, 'adapter · variant') → median of the recorded samples, for every ok cell."""
    out = {}
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("record") == "cell" and record["status"] == "ok":
            c = record["cell"]
            out[(c["problem"], c["size"], c["operator"], f"{c['adapter']} · {c['variant']}")] = \
                float(np.median(record["timing"]["samples"]))
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    index = build(load([FIXTURE]), out)
    return index.read_text(encoding="utf-8")


def test_the_eval_overview_has_evals_as_rows_and_each_tile_is_its_time_over_the_rows_fastest(page):
    medians = raw_medians()
    grads = {k: v for k, v in medians.items() if k[2] == "grad"}
    assert "gmm" in {k[0] for k in grads}  # ADBench's gmm, run for its d2-K5-n1000 too: no GradBench eval
    problems = sorted({k[0] for k in grads} & set(DEFINITION), key=lambda p: EVAL_NAMES.get(p, p))
    assert len(problems) == 5
    rows = gradbench.rows(load([FIXTURE]).measurements)
    assert [(r.eval, r.operator) for r in rows] == [(EVAL_NAMES.get(p, p), "grad") for p in problems]
    h = ratio_grid.evals("GradBench", rows, Bootstrap())
    assert h is not None
    for i, (problem, row) in enumerate(zip(problems, rows)):
        size = {k[1] for k in grads if k[0] == problem}.pop()  # one size each in this run
        assert h.rows[i] == f"{EVAL_NAMES.get(problem, problem)} · grad ({size})"
        fastest = min(v for k, v in grads.items() if k[0] == problem)
        for pair, m in row.cells.items():
            tile = h.tiles[(i, h.columns.index(pair))]
            key = (problem, size, "grad", pair)
            if key in grads:
                assert tile.text.rstrip("~") == ratio_grid.ratio_text(grads[key] / fastest), (key, tile.text)
            else:
                assert tile.text in {"✗", "⊘", "–", "·"}, (key, tile.text)
    assert "GradBench evals" in page and 'href="#gradbench"' in page
    for label in h.rows:
        assert html.escape(label) in page


def test_jo_per_eval_is_the_derivatives_median_over_the_values(page):
    medians = raw_medians()
    rows = gradbench.rows(load([FIXTURE]).measurements)
    checked = 0
    for row in rows:
        for pair in row.cells:
            grad, value = (medians.get((row.problem, row.size, op, pair)) for op in ("grad", "value"))
            if grad is None or value is None:
                assert pair not in row.relative
                continue
            assert row.relative[pair] == pytest.approx(grad / value, rel=1e-12)
            assert f"<td>{row.relative[pair]:.3g}</td>" in page
            checked += 1
    assert checked >= 15  # jax and torch: most of 5 evals × their timed variants
    assert "J/O per GradBench eval" in page


def test_results_without_gradbench_evals_have_no_eval_view():
    others = [m for m in load([FIXTURE]).measurements if m.cell.problem == "det"]
    renamed = [replace(m, cell=replace(m.cell, problem="my_det")) for m in others]
    assert gradbench.rows(renamed) == []
    assert ratio_grid.evals("GradBench", [], Bootstrap()) is None


# --- the eval rows on any mix of sizes, pairs, failures and ties (Hypothesis) --------------------------------------
PAIRS = (("jax", "eager"), ("jax", "compiled"), ("torch", "eager"), ("autograd", "eager"))
LSE_SIZES = ("n2500", "n5000", "n10000")


def _measurement(size, operator, pair, seconds, machine="m1"):
    timing = Timing(tuple(seconds * (1 + k / 100) for k in range(5)), 1, seconds) if seconds else None
    cell = Cell("lse", size, operator, *pair, "cpu", "float64")
    return Measurement(cell, Status.OK if seconds else Status.TIMEOUT, "", "native", "", timing, machine=machine)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from(LSE_SIZES), st.sampled_from(("value", "grad")),
                                 st.sampled_from(PAIRS)),
                       st.one_of(st.none(), st.sampled_from((1e-4, 2e-4, 1e-3))), min_size=1))
def test_the_row_size_has_the_most_timed_pairs_and_jo_divides_the_same_sizes_medians(cells):
    ms = [_measurement(size, op, pair, seconds) for (size, op, pair), seconds in cells.items()]
    rows = gradbench.rows(ms)
    grads = {(s, p): v for (s, op, p), v in cells.items() if op == "grad"}
    if not grads:
        assert rows == []
        return
    (row,) = rows
    timed_pairs = {s: {p for (gs, p), v in grads.items() if gs == s and v} for s in {s for s, _ in grads}}
    best = max(len(v) for v in timed_pairs.values())
    assert len(timed_pairs[row.size]) == best
    ran = {s: {p for (gs, p) in grads if gs == s} for s in timed_pairs}  # a timeout ran; nothing here is skipped
    assert row.size == max((s for s in timed_pairs if len(timed_pairs[s]) == best),
                           key=lambda s: (len(ran[s]), LSE_SIZES.index(s)))
    assert set(row.cells) == {f"{a} · {v}" for (s, (a, v)) in grads if s == row.size}
    for (a, v) in PAIRS:
        grad, value = cells.get((row.size, "grad", (a, v))), cells.get((row.size, "value", (a, v)))
        name = f"{a} · {v}"
        if grad and value:
            assert row.relative[name] == pytest.approx(grad / value)
        else:
            assert name not in row.relative


def test_a_file_fed_size_keeps_to_the_evals_functions():
    size = Size((("d", 2), ("K", 3), ("n", 10)), source="/data/gmm_d2_K3.json", sha256="ab" * 32)
    for op, expected in (("value", True), ("grad", True), ("hvp", False)):
        cell = Cell("gmm_posterior", size.label, op, "jax", "compiled", "cpu", "float64")
        assert allows("gradbench", cell, size, smallest_size="", slow=True, builtin=True) == expected, op

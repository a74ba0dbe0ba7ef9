"""Nested AD written once (issue 25): `adcompare.grad` inside a problem, the nested_* operators, GradBench's saddle
and particle against its own expected outputs (tests/fixtures/gradbench/{saddle,particle}.json, run.py's
`expect`, recorded by make_goldens.py at GradBench's commit).

Held here, in the normal run:
- the primitive's modes and orders, and its NumPy default (central differences) against a closed form;
- every built-in adapter, in its own worker (tests/test_goldens.py's), takes every nesting order of a small nested
  function (an outer derivative of an inner derivative, with a value-dependent branch inside) and its own `grad`
  operator through `adcompare.grad`, against the closed form, at 1e-12, and every order of one whose derivatives are
  taken at the array their closures hold (a TensorFlow tape followed that use too, and saddle's descents stopped at
  once); GradBench's saddle and particle, every order, in JAX's compiled variant (their descents and Euler loop are
  adcompare.while_loop, staged: 1-3 s of compile a cell), equal GradBench's expected outputs at 1e-9, and
  torch.compile declares them unsupported with the reason;
- the float64 references of saddle and particle (closed forms, complex step) equal GradBench's expected outputs,
  and so does the problem itself through NumPy's default derivative, at GradBench's 1e-4.
Under `-m slow`: every adapter and nesting order on GradBench's own inputs, eager, and in TensorFlow's graph and
XLA variants but particle's rr (their compiles take 3-79 s here, graph calls 4-48 s). Measured here (2 shared
cores): one particle call is ~5 min under autograd (84 descent steps, each differentiating 353 Euler steps, each with an
inner gradient) and slower on the others; saddle (24,335 gradient calls, ~160 outer steps each through an inner
descent) is longer still.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import adcompare
from adcompare.model import nesting
from adcompare.model.errors import UsageError
from adcompare.model.operators import OPERATORS, spec
from adcompare.model.problem import applicable_operators, problem
from adcompare.plugin import registry as plugins
from adcompare.problems.particle import particle_reference
from adcompare.problems.saddle import saddle_reference
from adcompare.verify.tolerance import scaled_error

from . import per_adapter
from .conftest import FIXTURES
from .per_adapter import evaluate_in_worker, float64_inputs, one_class_per_adapter, skip_unless_installed

GRADBENCH_TOLERANCE = 1e-4  # GradBench's validator
GOLDEN_EVALS = ("saddle", "particle")
NESTED = tuple(f"nested_{order}" for order in nesting.ORDERS)
A = np.array([0.5, -1.5, 2.0])
X = np.array([0.3, -0.7, 1.1])


@problem(sizes=[3], wrt="x", operators=("value", "grad", *NESTED))
def nested_toy(x, /, *, a, xp):
    """h(x) = Σᵢ ∂g/∂xᵢ(x)·sin xᵢ with g(z) = Σ aᵢzᵢ³ (inner derivative), differentiated by the outer one:
    ∇h = 6a·x·sin x + 3a·x²·cos x, returned with a value-dependent branch that picks the same formula."""
    def g(z):
        return xp.sum(a * z * z * z)

    def h(z):
        inner = adcompare.grad(g, z, xp=xp, mode="inner")
        return xp.sum(inner * xp.sin(z)) if xp.sum(z * z) > 0 else xp.sum(inner)

    return xp.sum(adcompare.grad(h, x, xp=xp, mode="outer") * x)


@nested_toy.inputs
def _(rng, n):
    return {"x": X[:n].copy(), "a": A[:n].copy()}


TOY = nested_toy.build()


@problem(sizes=[3], wrt="x", operators=("value", *NESTED))
def nested_shared(x, /, *, a, xp):
    """Each derivative taken at the very array its function's closure also holds, as saddle's inner descent starts
    at its outer iterate: only the argument is differentiated. inner(z) = ∂/∂p [Σz² − Σp²] at p = z is −2z, and
    ∂/∂z [Σa·x² + Σa·inner(z)] at z = x is −2a (x held), so the value is Σ −2a·x. A derivative that followed the
    closure's array too would give inner = 0 and an outer derivative 2a·x: the value Σ 2a·x² (3.46 for −6.8)."""
    def inner(z):
        return adcompare.grad(lambda p: xp.sum(z * z) - xp.sum(p * p), z, xp=xp, mode="inner")

    outer = adcompare.grad(lambda z: xp.sum(a * x * x) + xp.sum(a * inner(z)), x, xp=xp, mode="outer")
    return xp.sum(outer * x)


@nested_shared.inputs
def _(rng, n):
    return {"x": X[:n].copy(), "a": A[:n].copy()}


SHARED = nested_shared.build()
SHARED_CLOSED_FORM = float(np.sum(-2 * A * X))


def toy_closed_form(x: np.ndarray) -> float:
    return float(np.sum((6 * A * x * np.sin(x) + 3 * A * x * x * np.cos(x)) * x))


def toy_grad_closed_form(x: np.ndarray) -> np.ndarray:
    """The toy's `grad` operator: the cell's own gradient of its value Σᵢ ∇h(x)ᵢ·xᵢ, through both adcompare.grad
    calls (a third derivative): ∇hᵢ + xᵢ·∂∇hᵢ/∂xᵢ, ∇h being separable."""
    first = 6 * A * x * np.sin(x) + 3 * A * x * x * np.cos(x)
    second = 6 * A * np.sin(x) + 12 * A * x * np.cos(x) - 3 * A * x * x * np.sin(x)
    return first + second * x


def goldens(evaluation: str) -> dict:
    return json.loads((FIXTURES / "gradbench" / f"{evaluation}.json").read_text())


# --- the primitive ------------------------------------------------------------------------------------------------


def test_roles_take_the_modes_of_the_order_in_force():
    assert (nesting.mode_of("outer"), nesting.mode_of("inner")) == ("reverse", "reverse")  # outside a cell
    for order, (outer, inner) in nesting.ORDERS.items():
        with nesting.nesting_order(order):
            assert (nesting.mode_of("outer"), nesting.mode_of("inner")) == (outer, inner)
            assert nesting.mode_of("forward") == "forward"
    assert nesting.mode_of("outer") == "reverse"  # restored
    with pytest.raises(UsageError, match="mode 'sideways' is unknown"):
        nesting.mode_of("sideways")


def test_numpy_default_is_central_differences_nesting_included():
    g = adcompare.grad(lambda z: np.sum(A * z ** 3), X, xp=np)
    assert scaled_error(g, 3 * A * X ** 2) < 1e-9
    assert abs(TOY.bind(np, {"a": A})(X) - toy_closed_form(X)) < 1e-5  # a difference of differences


def test_nested_operators_are_declared_only_and_planned_for_gradbench_nested_evals():
    registry = plugins.load()
    assert all(spec(op).family == "nested" and spec(op).declared_only for op in NESTED)
    assert [op for op in OPERATORS if op.startswith("nested_")] == list(NESTED)
    for name in ("saddle", "particle"):
        assert applicable_operators(registry.problem(name)) == list(NESTED)
    assert not set(NESTED) & set(applicable_operators(registry.problem("lse")))


# --- GradBench's numbers through NumPy ----------------------------------------------------------------------------


@pytest.mark.parametrize("evaluation", ["saddle", "particle"])
def test_goldens_are_run_py_expect_at_gradbench_commit(evaluation):
    record = goldens(evaluation)
    assert record["gradbench_commit"] == "f26651a7bcc120654fa895adecaf371b8cc059c5"
    assert sorted(c["function"] for c in record["cases"]) == sorted(nesting.ORDERS)


def test_references_equal_gradbench_expected_outputs():
    """The float64 references (closed-form gradients; particle's outer one by complex step) to rounding."""
    for case in goldens("saddle")["cases"]:
        assert scaled_error(saddle_reference(np.array(case["input"]["start"])), case["expected"]) <= 1e-15
    for case in goldens("particle")["cases"]:
        assert scaled_error(particle_reference(np.array([case["input"]["w"]])), case["expected"]) <= 1e-15


def test_particle_through_numpy_default_derivative_holds_gradbench_tolerance():
    """The problem as written, its adcompare.grad calls by central differences (nothing registered for NumPy)."""
    case = goldens("particle")["cases"][0]
    value = plugins.load().problem("particle").bind(np, {})(np.array([case["input"]["w"]]))
    assert scaled_error(value, case["expected"]) <= 1e-8  # measured 2.3e-10: far inside GradBench's 1e-4


def test_gradbench_json_inputs_are_read(tmp_path):
    registry = plugins.load()
    (tmp_path / "s.json").write_text('{"start": [1.0, 1.0], "min_runs": 1}')
    (tmp_path / "p.json").write_text('{"w": 0.0}')
    dims, values = registry.problem("saddle").reader(str(tmp_path / "s.json"))
    assert dims == {"d": 2} and values["start"].tolist() == [1.0, 1.0]
    dims, values = registry.problem("particle").reader(str(tmp_path / "p.json"))
    assert dims == {"d": 1} and values["w"].tolist() == [0.0]
    with pytest.raises(ValueError, match="not GradBench's saddle input"):
        registry.problem("saddle").reader(str(tmp_path / "p.json"))


# --- every adapter ------------------------------------------------------------------------------------------------


def evaluate(adapter_name: str, cases: list[tuple[str, str, str]]) -> dict[str, object]:
    """`per_adapter.evaluate` of (problem, operator, variant) cases, problem "nested_toy" or a built-in one at its
    GradBench input; the toy's nesting orders also get the run's own check (reference, tolerance, projection) as
    `<case>/check`."""
    def inputs_of(case):
        prob = {"nested_toy": TOY, "nested_shared": SHARED}.get(case[0]) or plugins.load().problem(case[0])
        return prob, prob.sizes[0], float64_inputs(prob, prob.sizes[0])

    def check(case, prob, size, inputs, result):
        from adcompare.verify.check import check_result

        if case[0] != "nested_toy" or case[1] not in NESTED:
            return {}
        found = check_result(prob, size, case[1], "float64", inputs, result)
        return {"check": {"error": found.error, "tolerance": found.tolerance, "method": found.reference_method,
                          "projection": found.projection}}

    return per_adapter.evaluate(adapter_name, cases, inputs_of, check)


# Staged variants whose nested evals take long here: under -m slow, but for particle's rr under XLA (2.7 s of
# compile, 6 ms a call). TensorFlow's tf.function of saddle's ff traced for 79 s and took 42 s a call (graph);
# XLA compiled the 8 cells in 3-32 s each (2 shared cores).
SLOW_STAGED = frozenset({"tensorflow"})


def staged_variants(adapter) -> list[str]:
    """The adapter's compiled variants (torch.compile included: its nested_* cells are declared unsupported, which
    costs nothing to check)."""
    return [v for v in adapter.variants if adapter.compiled_from(v)]


def nesting_cases(adapter_name: str) -> list[tuple[str, str, str]]:
    """The normal run's cases (tests/test_goldens.py runs them in the adapter's golden worker): every nesting order
    of the toy and the shared-closure function and the toy's own `grad`, eagerly; GradBench's saddle and particle
    at every order in the compiled variants that stage them in seconds (jax.jit: 1-3 s of compile a cell here), and
    particle's rr in the others (declared unsupported under torch.compile; under TensorFlow's XLA; TensorFlow's
    other cells are under -m slow)."""
    adapter = plugins.load().adapter(adapter_name)
    eager = [v for v in adapter.variants if not adapter.compiled_from(v)]
    cases = [("nested_toy", op, v) for v in eager for op in (*NESTED, "grad")]
    cases += [("nested_shared", op, v) for v in eager for op in NESTED]
    for variant in staged_variants(adapter):
        quick = adapter_name not in SLOW_STAGED and variant not in adapter.slow_variants
        cases += [(name, op, variant) for name in ("saddle", "particle") for op in NESTED] if quick else \
            [("particle", "nested_rr", variant)] if adapter_name not in SLOW_STAGED or variant == "compiled" else []
    return cases


def assert_nesting(cases: list[tuple[str, str, str]], results: dict[str, object]) -> None:
    """Every nesting order and the outer operator differentiate through the inner derivative: the closed form at
    1e-12, the run's own check of the toy's orders within tolerance; GradBench's evals, staged, equal its expected
    outputs at 1e-9, or are declared unsupported (torch.compile) with adcompare.while_loop's reason."""
    results = dict(results)
    checks = {key: results.pop(key) for key in [k for k in results if k.endswith("/check")]}
    for key, check in checks.items():  # the toy declares no closed form: NumPy's nested central differences
        assert check["error"] <= check["tolerance"] and "central differences" in check["method"], (key, check)
        assert check["projection"] is not None
    ran = 0
    for (name, operator, variant), (key, result) in zip(cases, results.items()):
        if isinstance(result, dict) and "unsupported" in result:
            if name in GOLDEN_EVALS:  # torch.compile cannot stage adcompare.while_loop under torch.func
                assert "adcompare.while_loop" in result["unsupported"], (key, result)
            else:
                assert variant == "eager-autograd", (key, result)  # torch's classic autograd: declared
            continue
        assert not isinstance(result, dict), (key, result)
        if name in GOLDEN_EVALS:
            assert scaled_error(result, goldens(name)["cases"][0]["expected"]) <= 1e-9, (key, result)
            continue
        expected = SHARED_CLOSED_FORM if name == "nested_shared" else \
            toy_grad_closed_form(X) if operator == "grad" else toy_closed_form(X)
        assert scaled_error(result, expected) <= 1e-12, (key, result, expected)
        ran += 1
    assert ran >= 2 * len(NESTED) + 1


class AdapterNesting:
    """GradBench's nested evals through one adapter's worker, under -m slow (one class per adapter: the README's
    --dist loadscope gives each its own test process). The normal run's nesting cases are tests/test_goldens.py's."""

    adapter_name = ""

    def adapter(self):
        skip_unless_installed(self.adapter_name)
        return plugins.load().adapter(self.adapter_name)

    @pytest.mark.slow
    def test_every_nesting_order_reproduces_gradbench_expected_outputs(self):
        """saddle and particle, GradBench's inputs, every order, eager variants (minutes to hours a call: see the
        module docstring) and the staged ones the normal run leaves out (TensorFlow's graph and XLA: tens of
        seconds a call), at 1e-9 (GradBench's tolerance is 1e-4)."""
        adapter = self.adapter()
        eager = [v for v in adapter.variants if not adapter.compiled_from(v)]
        quick = {(n, op, v) for n, op, v in nesting_cases(self.adapter_name) if n in GOLDEN_EVALS}
        staged = [(n, op, v) for v in staged_variants(adapter) for n in ("particle", "saddle") for op in NESTED
                  if (n, op, v) not in quick]
        cases = [(name, op, v) for name in ("particle", "saddle") for op in NESTED for v in eager] + staged
        results = evaluate_in_worker("tests.test_nested", self.adapter_name, cases, timeout=6 * 3600)
        expected = {name: goldens(name)["cases"][0]["expected"] for name in ("particle", "saddle")}
        for (name, _, _), (key, result) in zip(cases, results.items()):
            if isinstance(result, dict) and "unsupported" in result:
                continue
            assert not isinstance(result, dict), (key, result)
            assert scaled_error(result, expected[name]) <= 1e-9, (key, result)


globals().update(one_class_per_adapter(AdapterNesting))


# --- the report: the four orders side by side ---------------------------------------------------------------------

PAIRS = ("jax · eager", "torch · eager", "autograd · eager")


def _nested_measurement(problem_name, order, pair, samples, size="d2", status=None):
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement, Timing
    from adcompare.model.status import Status

    adapter, variant = pair.split(" · ")
    timing = Timing(tuple(samples), 1, samples[0]) if samples else None
    cell = Cell(problem_name, size, f"nested_{order}", adapter, variant, "cpu", "float64")
    return Measurement(cell, status or (Status.OK if samples else Status.TIMEOUT), "", "native", "", timing)


def test_the_nesting_view_holds_each_pairs_four_medians_recomputed_from_the_samples(tmp_path):
    from adcompare.analysis import gradbench
    from adcompare.model.status import Status
    from adcompare.report.page import build
    from adcompare.store.results import Results

    rng = np.random.default_rng(25)
    samples = {(p, o): list(rng.uniform(0.5, 2.0, size=int(rng.integers(3, 8)))) for p in PAIRS for o in nesting.ORDERS}
    samples[("autograd · eager", "ff")] = []  # timed out
    ms = [_nested_measurement("saddle", o, p, s) for (p, o), s in samples.items()]
    ms.append(_nested_measurement("saddle", "rr", "jax · compiled", [], status=Status.FAILED))
    (table,) = gradbench.nesting_tables(ms)
    assert (table.eval, table.size, table.orders) == ("saddle", "d2", ("ff", "fr", "rf", "rr"))
    assert set(table.pairs) == {*PAIRS, "jax · compiled"}
    for (pair, order), values in samples.items():
        expected = float(np.median(values)) if values else None
        got = table.median(pair, order)
        assert (got is None and expected is None) or abs(got - expected) <= 1e-15 * expected, (pair, order)
    assert table.median("jax · compiled", "rr") is None and table.median("jax · compiled", "ff") is None
    assert table.pairs["autograd · eager"]["ff"].status is Status.TIMEOUT

    page = build(Results((), tuple(ms)), tmp_path / "report").read_text(encoding="utf-8")
    assert "saddle: the four nesting orders" in page and 'class="plain gradbench-nesting"' in page
    assert "<th>ff</th><th>fr</th><th>rf</th><th>rr</th>" in page
    section = page[page.index('class="plain gradbench-nesting"'):]
    assert "timeout" in section[:section.index("</table>")] and "failed" in section[:section.index("</table>")]


# A real `adcompare run --suite gradbench --problem saddle --adapter autograd,torch --variant eager --operator
# nested_rr --timeout 120` on the project's 2-core machine (load ~4): autograd's 11-17 s calls gave 6 samples before
# the deadline, torch's 42 s calls one after the checked first call.
SADDLE_RR_EAGER = Path(__file__).parent / "fixtures" / "nested" / "saddle_rr_eager.jsonl"


def test_the_nesting_view_marks_few_sample_cells_and_gives_a_timeouts_first_call_or_bound(tmp_path):
    """Issue 40 item 4: a slow eager cell's median of few samples says how many; a timeout says what it ran."""
    from dataclasses import replace

    from adcompare.analysis import gradbench
    from adcompare.model.status import Status
    from adcompare.plugin import registry as plugins
    from adcompare.report.page import build
    from adcompare.store.results import Results, load
    from adcompare.study.suites import NESTED_TIMEOUT

    raw = {r["cell"]["adapter"]: r for r in map(json.loads, SADDLE_RR_EAGER.read_text().splitlines())
           if r.get("record") == "cell"}
    real = load([SADDLE_RR_EAGER], plugins.load().problems).measurements
    torch_rr = next(m for m in real if m.cell.adapter == "torch")
    stopped = [replace(torch_rr, cell=replace(torch_rr.cell, operator=f"nested_{order}"), status=Status.TIMEOUT,
                       timing=None, details=details)
               for order, details in (("ff", {"first_call_seconds": 98.5, "lower_bound_seconds": 7.25}),
                                      ("fr", {"lower_bound_seconds": 600.0}))]
    (table,) = gradbench.nesting_tables([*real, *stopped])
    assert table.timeout == NESTED_TIMEOUT
    for adapter in ("autograd", "torch"):
        n = len(raw[adapter]["timing"]["samples"])
        assert table.median(f"{adapter} · eager", "rr") == float(np.median(raw[adapter]["timing"]["samples"]))
        assert table.note(f"{adapter} · eager", "rr") == ("" if n >= 3 else f"{n} sample{'s' * (n != 1)}")
    assert table.note("torch · eager", "rr") == "1 sample"  # the run this fixture records
    assert table.note("torch · eager", "ff") == "first call 98.5 s" and table.note("torch · eager", "fr") == "≥ 600 s"
    page = build(Results((), (*real, *stopped)), tmp_path / "report").read_text(encoding="utf-8")
    section = page[page.index('class="plain gradbench-nesting"'):]
    section = section[:section.index("</table>")]
    assert "(1 sample)" in section and "timeout (first call 98.5 s)" in section and "timeout (≥ 600 s)" in section
    assert "unless <code>--timeout</code> is given" in page

"""GradBench's lse, llsq, det, ode and kmeans (issue 25) against GradBench's own numbers.

tests/fixtures/gradbench/<eval>.json were written by make_goldens.py beside them, from GradBench's code at commit
f26651a7: each eval's generator (its inputs), its Python tools (jax: lse, llsq, ode; pytorch: lse) and its
hand-written golden tool (tools/manual, C++; the only one for det); kmeans: jax (float64) and pytorch, cost and
dir (adcompare's `value` and `newton_dir`). Held here:
- adcompare's generators replay GradBench's draws bit for bit (sha256 of the float64 bytes);
- through NumPy, every value and gradient (and ode's whole primal vector) equals every tool's;
- every built-in adapter and variant, float64, in its own worker process (JAX's x64 switch is process-wide;
  tests/test_goldens.py runs this module's cases there with the other goldens'), reproduces them through the
  in-process cell path (`execution.run_once`). Slow variants (torch.compile, 7–16 s a cold compile) run under
  `-m slow`.
Tolerance: GradBench's measure |x − y| / max(1, |x| + |y|) (adcompare/verify/tolerance.py's scaled error), at 1e-12
against every tool but GradBench's jax ode tool, which computes in float32 (tools/jax/ode.py never enables
jax_enable_x64): GradBench's own 1e-4 there (it is off by ~7e-8).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import CellInputs
from adcompare.problems.ode import ode_solution

from . import per_adapter
from .conftest import FIXTURES
from .per_adapter import (
    BUILT_IN_ADAPTERS,
    evaluate_in_worker,
    float64_inputs,
    one_class_per_adapter,
    skip_unless_installed,
)

EVALS = ("lse", "llsq", "det", "ode", "kmeans")
ADAPTERS = BUILT_IN_ADAPTERS
GRADBENCH_TOLERANCE = 1e-4  # GradBench's validator (python/gradbench/gradbench/comparison.py)
TIGHT = 1e-12
LOOSE_TOOLS = {("ode", "jax"): GRADBENCH_TOLERANCE}  # float32 (see the module docstring)
OPERATORS = {"primal": "value", "gradient": "grad"}  # GradBench's function → adcompare's operator
EVAL_OPERATORS = {"kmeans": {"cost": "value", "dir": "newton_dir"}}  # evals whose functions are named otherwise
DRAWN = {"kmeans": "points"}  # the input GradBench draws, where it is not the differentiated one


def operators(evaluation: str) -> dict[str, str]:
    return EVAL_OPERATORS.get(evaluation, OPERATORS)


def goldens(evaluation: str) -> dict:
    return json.loads((FIXTURES / "gradbench" / f"{evaluation}.json").read_text())


def size_label(evaluation: str, case: dict) -> str:
    """adcompare's size label for a golden case (GradBench's input fields and description)."""
    fields = case["input"]
    return {"lse": lambda: f"n{case['description'][2:]}", "llsq": lambda: f"n{fields['n']}-m128",
            "det": lambda: f"ell{fields['ell']}", "ode": lambda: f"n1000-s{fields['s']}",
            "kmeans": lambda: f"k{fields['k']}-n{fields['n']}-d{fields['d']}"}[evaluation]()


def scaled_error(actual, expected) -> float:
    a, b = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a) + np.abs(b)), initial=0.0))


def expected_result(evaluation: str, case: dict, function: str, tool: str) -> np.ndarray:
    """A tool's output in the shape of adcompare's result: ode's value is the primal's last entry, det's
    gradient is GradBench's row-major list as (ℓ, ℓ)."""
    out = np.asarray(case[function][tool], dtype=np.float64)
    if evaluation == "ode" and function == "primal":
        return out[-1]
    if evaluation == "det" and function == "gradient":
        return out.reshape(case["input"]["ell"], case["input"]["ell"])
    return out


def assert_matches_every_tool(evaluation: str, case: dict, function: str, result, where: str) -> None:
    for tool in case[function]:
        tolerance = LOOSE_TOOLS.get((evaluation, tool), TIGHT)
        error = scaled_error(result, expected_result(evaluation, case, function, tool))
        assert error <= tolerance, (f"{where}: {function} differs from GradBench's {tool} tool by {error:.3g} "
                                    f"(tolerance {tolerance:g})")


CASES = [(e, i) for e in EVALS for i in range(len(goldens(e)["cases"]))]


@pytest.mark.parametrize(("evaluation", "index"), CASES)
def test_generated_inputs_are_gradbenchs_bit_for_bit(evaluation, index):
    case = goldens(evaluation)["cases"][index]
    problem = plugins.load().problem(evaluation)
    values = problem.inputs(problem.size(size_label(evaluation, case)), "float64")
    drawn = values[DRAWN.get(evaluation, problem.wrt)]
    assert hashlib.sha256(np.asarray(drawn, dtype=np.float64).tobytes()).hexdigest() == case["input_sha256"]
    if evaluation == "llsq":
        assert values["t"].shape == (case["input"]["n"],)
    if evaluation == "ode":
        assert values["steps"].shape == (case["input"]["s"],)
    if evaluation == "kmeans":  # GradBench's centroids = points[-k:]
        assert np.array_equal(values["centroids"], values["points"][-case["input"]["k"]:])


def test_goldens_name_gradbenchs_commit_and_tools():
    for evaluation in EVALS:
        record = goldens(evaluation)
        assert record["gradbench_commit"].startswith("f26651a7")
        assert "manual" in record["tools"]
        assert all(set(case[function]) == set(record["tools"]) for case in record["cases"]
                   for function in operators(evaluation))
        assert len(record["cases"]) >= 2


@pytest.mark.parametrize(("evaluation", "index"), CASES)
def test_numpy_values_equal_every_gradbench_tool(evaluation, index):
    case = goldens(evaluation)["cases"][index]
    problem = plugins.load().problem(evaluation)
    values = problem.inputs(problem.size(size_label(evaluation, case)), "float64")
    wrt = values.pop(problem.wrt)
    primal = next(iter(operators(evaluation)))
    assert_matches_every_tool(evaluation, case, primal, problem.bind(np, values)(wrt), f"{evaluation} numpy")
    for function, operator in operators(evaluation).items():  # the reference's own closed forms (kmeans' dir,
        closed_form = dict(problem.analytic).get(operator)     # det's value and gradient), against every tool
        if closed_form is not None:
            assert_matches_every_tool(evaluation, case, function, closed_form(wrt, **values),
                                      f"{evaluation} analytic {operator}")
    if evaluation == "ode":  # GradBench's primal is the whole y(2); adcompare's value is its last entry
        whole = ode_solution(wrt, values["steps"], np)
        for tool in case["primal"]:
            tolerance = LOOSE_TOOLS.get((evaluation, tool), TIGHT)
            assert scaled_error(whole, case["primal"][tool]) <= tolerance, tool
        assert np.count_nonzero(whole) == 4 * case["input"]["s"]  # why the last entry is 0 (problems/ode.py)


def evaluate(adapter_name: str, cases: list[tuple[str, str, str, str]]) -> dict[str, object]:
    """`per_adapter.evaluate` of (eval, size label, operator, variant) cases on the generated inputs (GradBench's,
    as the test above holds)."""
    def inputs_of(case):
        problem = plugins.load().problem(case[0])
        size = problem.size(case[1])
        return problem, size, float64_inputs(problem, size)

    return per_adapter.evaluate(adapter_name, cases, inputs_of)


def in_worker(adapter_name: str, cases: list[tuple[str, str, str, str]]) -> dict[str, object]:
    """`evaluate` in a worker of its own: any built-in problem's cases (tests/test_ht.py's too). The timeout is a
    safety net: the slow cases take minutes."""
    return evaluate_in_worker("tests.test_gradbench", adapter_name, cases, timeout=3600)


def is_slow(adapter, evaluation: str, label: str, variant: str) -> bool:
    """The adapter's slow variants (torch.compile), and det beyond ℓ = 5 wherever a compiler traces its
    recursion (JAX's jit took 27.5 s for ℓ = 6's gradient here, ~2,000 scalar operations; ℓ = 7 has ~14,000)
    and at ℓ = 7 eagerly (a few to tens of seconds of op-by-op dispatch)."""
    if variant in adapter.slow_variants:
        return True
    traced = variant in adapter.compiles  # the variants the adapter declares compiled (graph or XLA)
    return evaluation == "det" and (label == "ell7" or label == "ell6" and traced)


def adapter_cases(adapter_name: str, slow: bool) -> list[tuple[str, str, str, str]]:
    """Every golden case × operator × variant of the adapter: the slow ones (`is_slow`) only when `slow`."""
    adapter = plugins.load().adapter(adapter_name)
    return [(e, size_label(e, case), operator, variant) for e in EVALS for case in goldens(e)["cases"]
            for operator in operators(e).values() for variant in adapter.variants
            if is_slow(adapter, e, size_label(e, case), variant) == slow]


def assert_goldens(results: dict[str, object]) -> None:
    assert results, "no case ran"
    by_label = {(e, size_label(e, c)): c for e in EVALS for c in goldens(e)["cases"]}
    checked = set()
    for key, result in results.items():
        evaluation, label, operator, variant = key.split("/")
        if isinstance(result, dict) and "unsupported" in result:
            continue  # declared by the adapter (torch's eager-autograd has no `value` of its own)
        assert not isinstance(result, dict), f"{key}: {result}"
        function = {op: f for f, op in operators(evaluation).items()}[operator]
        assert_matches_every_tool(evaluation, by_label[(evaluation, label)], function, result, key)
        checked.add((evaluation, label, operator))
    assert checked == {tuple(k.split("/")[:3]) for k in results}, "a case ran in no variant"


class AdapterGoldens:
    """The slow variants through one adapter's worker (the normal run's cases are tests/test_goldens.py's). One class
    per adapter, so that the README's `--dist loadscope` gives each adapter's run its own test process."""

    adapter_name = ""

    @pytest.mark.slow
    def test_every_adapter_reproduces_gradbench_goldens_slow_variants(self):
        """torch.compile (7–16 s a cold compile) and det's larger recursions traced or at ℓ = 7 (see `is_slow`)."""
        skip_unless_installed(self.adapter_name)
        cases = adapter_cases(self.adapter_name, slow=True)
        if not cases:
            pytest.skip(f"adapter {self.adapter_name!r} has no slow variant")
        assert_goldens(in_worker(self.adapter_name, cases))


globals().update(one_class_per_adapter(AdapterGoldens))


# --- kmeans: GradBench's JSON input, and newton_dir's planning and numerical reference ---------------------------

def _kmeans_json(path: Path, k: int = 3, n: int = 20, d: int = 2) -> str:
    """GradBench's kmeans input as its evals/kmeans/run.py builds it (points, then centroids = points[-k:])."""
    points = np.random.RandomState(7).rand(n, d).tolist()
    path.write_text(json.dumps({"points": points, "centroids": points[-k:]}))
    return str(path)


def test_kmeans_reads_gradbenchs_json_and_no_other_problem_does(tmp_path):
    from adcompare.verify.input_sources import with_inputs

    path = _kmeans_json(tmp_path / "kmeans.json")
    registry = with_inputs(plugins.load(), [path])
    problem = registry.problem("kmeans")
    (size,) = problem.sizes
    assert size.source == path and size.as_dict() == {"k": 3, "n": 20, "d": 2}
    assert [name for name, p in registry.problems.items() if any(s.source for s in p.sizes)] == ["kmeans"]
    values = problem.inputs(size, "float64")
    data = json.loads(Path(path).read_text())
    assert np.array_equal(values["points"], data["points"]) and np.array_equal(values["centroids"], data["centroids"])


def test_kmeans_json_is_planned_from_its_dimensions_alone(tmp_path):
    from adcompare.problems.kmeans import read_header

    assert read_header(_kmeans_json(tmp_path / "kmeans.json", k=4, n=30, d=5)) == {"k": 4, "n": 30, "d": 5}
    (tmp_path / "other.json").write_text(json.dumps({"x": [1.0]}))
    with pytest.raises(ValueError, match="not GradBench's kmeans input"):
        read_header(str(tmp_path / "other.json"))


def test_newton_dir_is_planned_only_where_a_problem_declares_it():
    from adcompare.study.plan import Selection, plan

    planned = plan(plugins.load(), Selection(operators=("newton_dir",), adapters=("jax",)))
    assert {c.problem for c in planned.cells} == {"kmeans"}


def test_newton_dir_numerical_reference_matches_the_closed_form_of_a_smooth_separable_function():
    """Without a closed form, the reference differences: here Σ exp(xᵢ) + xᵢ⁴, whose Hessian is diagonal."""
    from adcompare import problem
    from adcompare.verify.reference import reference

    @problem(sizes=[5], wrt="x", operators=("newton_dir",))
    def separable(x, /, *, xp):
        return xp.sum(xp.exp(x) + x ** 4)

    @separable.inputs
    def _(rng, n):
        return {"x": rng.standard_normal(n)}

    built = separable.build()
    x = built.inputs(built.size("n5"), "float64")["x"]
    ref = reference(built, "n5", "newton_dir", CellInputs(wrt=x, constants={}, batch=None, tangent=None,
                                                          cotangent=None))
    assert "second central difference" in ref.method
    exact = (np.exp(x) + 4 * x ** 3) / (np.exp(x) + 12 * x ** 2)
    assert scaled_error(ref.value, exact) <= max(10 * ref.error_bound, 1e-7)

"""The built-in adapters pass the conformance suite a third party runs (adcompare.testing), and the suite's checks
can fail: adapters broken on purpose in one way each are caught."""
from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest

from adcompare import Prepared
from adcompare.model.errors import UnsupportedOperation
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.study.plan import gpu_present
from adcompare.testing import (
    AdapterConformance,
    Case,
    missing_names,
    refusal_failure,
    run_case,
    sync_timing,
)
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.check import status_of

from .shared_results import problem_names

REGISTRY = plugins.load()


class BuiltInConformance(AdapterConformance):
    """The suite as a third party runs it, but the problems' namespace names computed once for all of this test
    run's processes (tests/shared_results.py), not once per process."""

    def problem_names(self) -> frozenset[str]:
        return problem_names(self.registry())


def registered(name: str):
    if name not in REGISTRY.adapters:
        pytest.skip(f"adapter {name!r} is not registered")
    return REGISTRY.adapters[name]


class TestJax(BuiltInConformance):
    """x64 is a process-wide switch: float32 here, float64 in a worker (the other tests here must not see x64)."""

    adapter = REGISTRY.adapters.get("jax")
    dtypes = ("float32",)
    isolated_dtypes = ("float64",)


class TestTorch(BuiltInConformance):
    """At D = 2: torch's D devices are a gloo group of D processes, each a torch start; tests/test_matrix.py runs
    torch's data-parallel cells at D = 2 and 4 through the same worker path."""

    adapter = REGISTRY.adapters.get("torch")
    data_parallel_devices = 2


NO_GPU = pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU on this machine")


@pytest.mark.gpu
@NO_GPU
class TestJaxCuda(BuiltInConformance):
    """The same suite on the GPU (device sync, placement, device peak memory)."""

    adapter = REGISTRY.adapters.get("jax")
    device = "cuda"
    dtypes = ("float32",)
    isolated_dtypes = ("float64",)


@pytest.mark.gpu
@NO_GPU
class TestTorchCuda(BuiltInConformance):
    adapter = REGISTRY.adapters.get("torch")
    device = "cuda"


class TestTensorflow(BuiltInConformance):
    adapter = REGISTRY.adapters.get("tensorflow")
    dtypes = ("float32",)
    isolated_dtypes = ("float64",)  # in a worker: float64 for every operator in the graph and XLA variants


class TestAutograd(BuiltInConformance):
    adapter = REGISTRY.adapters.get("autograd")


# --- the suite's checks fail where they should ----------------------------------------------------------------

VERDICTS = str(Path(__file__).parent / "fixtures" / "plugins" / "verdicts.py")
# Value only, through NumPy: correct, and the base of the adapters broken on purpose below (the plugin's class,
# so the one-verdict test's worker runs the very adapter these tests subclass).
NumpyValue = type(plugins.load((VERDICTS,)).adapter("numpy-value"))


VALUE = Case("exp_dot_loss", "n10", "value", "eager")
GRAD = Case("exp_dot_loss", "n10", "grad", "eager")


def exp_dot_loss():
    return REGISTRY.problem("exp_dot_loss")


def test_a_correct_value_only_adapter_passes_the_cell_checks():
    outcome = run_case(NumpyValue(), exp_dot_loss(), VALUE, "float64")
    assert not outcome.error and not outcome.breaches and status_of(outcome.check) is Status.OK
    assert refusal_failure(RefusesProperly(), exp_dot_loss(), GRAD, "float64") is None


class RefusesProperly(NumpyValue):
    def prepare(self, request):
        cap = self.capability(request.operator, request.variant)
        if not cap.supported:
            raise UnsupportedOperation(cap.reason)
        return super().prepare(request)


def test_a_declared_unsupported_operator_that_runs_is_caught():
    failure = refusal_failure(NumpyValue(), exp_dot_loss(), GRAD, "float64")
    assert failure and "returned a result" in failure


def test_a_refusal_that_names_nothing_is_caught():
    class Mute(NumpyValue):
        def prepare(self, request):
            raise RuntimeError("no")

    assert "names neither 'grad' nor 'eager'" in refusal_failure(Mute(), exp_dot_loss(), GRAD, "float64")


def test_a_wrong_shape_is_caught():
    class Reshaped(NumpyValue):
        def to_numpy(self, out):
            return np.atleast_1d(out)

    outcome = run_case(Reshaped(), exp_dot_loss(), VALUE, "float64")
    assert outcome.check is None and "shape (1,)" in outcome.breaches[0]


def test_a_float32_cell_computed_in_float64_is_caught():
    class Upcast(NumpyValue):
        def to_numpy(self, out):
            return np.asarray(out, dtype=np.float64)

    class UpcastAndDrift(Upcast):  # the dtype breach does not hide the others
        calls = 0

        def to_numpy(self, out):
            type(self).calls += 1
            return super().to_numpy(out) + type(self).calls

    assert run_case(NumpyValue(), exp_dot_loss(), VALUE, "float32").breaches == ()
    breaches = run_case(Upcast(), exp_dot_loss(), VALUE, "float32").breaches
    assert any("result is float64 for a float32 cell" in b for b in breaches), breaches
    breaches = run_case(UpcastAndDrift(), exp_dot_loss(), VALUE, "float32").breaches
    assert any("float64 for a float32 cell" in b for b in breaches), breaches
    assert any("second run() differs" in b for b in breaches), breaches


def test_a_cell_that_writes_into_its_inputs_is_caught():
    class InPlace(NumpyValue):
        def prepare(self, request):
            f, w = request.problem.bind(np, request.inputs.constants), request.inputs.wrt
            return Prepared(lambda: f(np.multiply(w, 2.0, out=w)))

    breaches = run_case(InPlace(), exp_dot_loss(), VALUE, "float64").breaches
    assert any("second run() differs" in b for b in breaches)
    assert any("modified its inputs ['wrt']" in b for b in breaches)


def test_a_wrong_value_is_a_reference_mismatch():
    class OffByOne(NumpyValue):
        def to_numpy(self, out):
            return np.asarray(out) + 1.0

    outcome = run_case(OffByOne(), exp_dot_loss(), VALUE, "float64")
    assert status_of(outcome.check) is Status.MISMATCH


def test_a_namespace_without_a_name_is_caught():
    names = problem_names(REGISTRY)
    lacking = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if k != "vecdot"})
    assert "vecdot" in names and missing_names(lacking, names) == ["vecdot"]


def test_a_sync_that_does_not_wait_is_caught():
    """jax.jit dispatches asynchronously on the CPU: without block_until_ready the work lands in to_numpy."""
    jax_adapter = registered("jax")

    class NoSync(type(jax_adapter)):
        def sync(self, out):
            pass

    adapter = NoSync()
    adapter.setup(dtype="float32", device="cpu", threads=1)  # float32: x64 stays off in this process
    broken = sync_timing(adapter, "compiled", "float32")
    assert not broken.blocks, broken
    assert sync_timing(jax_adapter, "compiled", "float32").blocks


def test_the_suites_class_scoped_fixtures_are_classmethods():
    """pytest runs a class-scoped fixture once per class while each test gets a new instance, so an instance-method
    one is deprecated (pytest 9.1) and removed in pytest 10: every class-scoped fixture must be a classmethod."""
    import ast
    import inspect

    from adcompare import testing

    def is_class_scoped_fixture(decorator: ast.expr) -> bool:
        return (isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.fixture"
                and any(k.arg == "scope" and ast.literal_eval(k.value) == "class" for k in decorator.keywords))

    suite = next(n for n in ast.parse(inspect.getsource(testing)).body
                 if isinstance(n, ast.ClassDef) and n.name == "AdapterConformance")
    fixtures = [f for f in suite.body if isinstance(f, ast.FunctionDef)
                and any(is_class_scoped_fixture(d) for d in f.decorator_list)]
    assert {f.name for f in fixtures} >= {"installed", "dtype"}
    assert [f.name for f in fixtures if "classmethod" not in {ast.unparse(d) for d in f.decorator_list}] == []


# --- one verdict whichever path runs the cell (in_process.first_call) ------------------------------------------



class BenchmarkRecorder:
    """What benchmark_cell uses of pytest-benchmark's `benchmark` fixture: a group, extra_info, a call."""

    def __init__(self) -> None:
        self.group, self.extra_info, self.calls = None, {}, 0

    def __call__(self, function) -> None:
        self.calls += 1
        function()


@pytest.mark.parametrize("adapter_name, problem_name, status, says", [
    ("numpy-reshaped", "exp_dot_loss", Status.FAILED, "numpy-reshaped returned shape (1,) for value, expected ()"),
    ("numpy-value", "log_of_negatives", Status.NAN, "result contains NaN or Inf"),
    ("numpy-value", "exp_dot_loss", Status.OK, ""),
])
def test_every_path_gives_the_same_verdict(adapter_name, problem_name, status, says):
    """The worker (`adcompare run`), pytest-benchmark's path and the conformance suite share one first call: a
    wrong shape is failed and a NaN is nan in each (pytest-benchmark's path skipped both checks before)."""
    from adcompare.model.cell import Cell
    from adcompare.model.timing_policy import TimingPolicy
    from adcompare.run import runner
    from adcompare.run.benchmark_cell import benchmark_cell
    from adcompare.run.in_process import run_once
    from adcompare.run.session import run_session
    from adcompare.study.plan import Plan

    registry = plugins.load((VERDICTS,))
    problem, adapter = registry.problem(problem_name), registry.adapter(adapter_name)
    size = problem.smallest_size.label
    cell = Cell(problem_name, size, "value", adapter_name, "eager", "cpu", "float64")

    quick = TimingPolicy(min_time=0.001, max_time=0.05, warmup_time=0.0, min_samples=3)
    [in_worker] = run_session(registry, Plan((cell,), ()), runner.RunOptions(threads=1, policy=quick))
    outcome = run_case(adapter, problem, Case(problem_name, size, "value", "eager"), "float64")
    bench = BenchmarkRecorder()
    if status is Status.OK:
        benchmark_cell(cell, bench, (VERDICTS,))
    else:
        with pytest.raises(pytest.fail.Exception, match=re.escape(f"{status.value}: {says}")):
            benchmark_cell(cell, bench, (VERDICTS,))

    assert in_worker.status is outcome.status is Status(bench.extra_info["status"]) is status
    assert in_worker.message == outcome.message == bench.extra_info.get("message", "") == says
    # Only a checked result is timed, by either timer.
    assert (in_worker.timing is not None) == (bench.calls == 1) == (status is Status.OK)
    assert (outcome.check is None) == (bench.extra_info["check"] is None) == (status is not Status.OK)
    # run_once (adapter tests) still hands back whatever the adapter returned, for the test to judge.
    _, result, _, _ = run_once(adapter, problem, "value", "float64")
    reference = problem.bind(np, cell_inputs(problem, problem.smallest_size, "value", "float64").constants)(
        cell_inputs(problem, problem.smallest_size, "value", "float64").wrt)
    assert np.array_equal(np.squeeze(result), reference, equal_nan=True)


# --- the data-parallel operators (issue 26) ----------------------------------------------------------------------

def test_data_parallel_cases_cover_both_operators_at_one_device_here_and_every_variant_in_a_worker():
    from adcompare.testing import data_parallel_cases, supported_cases, unsupported_cases

    jax_adapter, autograd = registered("jax"), registered("autograd")
    here = [c for c in supported_cases(jax_adapter, REGISTRY) if c.operator.startswith("pmap")]
    assert sorted((c.operator, c.variant) for c in here) == [
        ("pmap_grad", "compiled"), ("pmap_grad", "eager"), ("pmap_value", "compiled"), ("pmap_value", "eager")]
    assert {(c.problem, c.size) for c in here} == {("mlp_loss", "B16-h4")}
    assert len(data_parallel_cases(autograd, REGISTRY)) == 2 * len(autograd.planned_variants())
    assert not [c for c in supported_cases(autograd, REGISTRY) if c.operator.startswith("pmap")]
    refused = {(c.operator, c.variant) for c in unsupported_cases(autograd, REGISTRY)}
    assert {("pmap_value", "eager"), ("pmap_grad", "eager")} <= refused


def test_a_data_parallel_gradient_that_is_not_averaged_is_caught():
    """pmap_grad summing the per-device gradients instead of averaging them is off by a factor D; at D = 1 a
    factor 2 stands in for it, and the reference check of the in-process case catches it."""
    jax_adapter = registered("jax")

    class Summed(type(jax_adapter)):
        def prepare(self, request):
            prepared = super().prepare(request)
            if request.operator != "pmap_grad":
                return prepared
            return Prepared(lambda: prepared.run() * 2)

    adapter = Summed()
    adapter.setup(dtype="float32", device="cpu", threads=1)
    problem, case = REGISTRY.problem("mlp_loss"), Case("mlp_loss", "B16-h4", "pmap_grad", "eager")
    assert run_case(jax_adapter, problem, case, "float32").status is Status.OK
    broken = run_case(adapter, problem, case, "float32")
    assert broken.status is not Status.OK and not broken.breaches  # right shape, wrong numbers

"""The adapter conformance suite: what every adapter, built-in or third-party, must do. Subclass one class in
your own tests (docs/adapters.md walks through it):

    from adcompare.testing import AdapterConformance
    from my_package import MyAdapter

    class TestMyAdapter(AdapterConformance):
        adapter = MyAdapter()

Each check is a pytest test, parametrized so that a failure names its dtype, variant, problem and operator:
- availability: `available()` says installed with a version, or why not; the name, variants and devices are
  usable in selectors; importing the adapter and asking `available()`/`capability()` imports no framework;
- capabilities: every operator in every variant is declared with an algorithm, or unsupported with a reason;
- memory: `materialised_elements` answers a whole number, never below what the operator itself needs
  (`operators.minimum_elements`), for every supported operator at the conformance problems' shapes and at a large
  one (the planner's pre-flight trusts it to keep a cell from exhausting memory);
- namespace: every name the registered problems use resolves on `namespace()`, and each probed name
  (`namespace_probes.PROBES`) gives NumPy's values;
- behaviour, on small built-in problems (`CONFORMANCE_PROBLEMS`): a declared-supported (operator, variant) runs,
  returns a NumPy array of `expected_shape` in the cell's dtype (a float32 cell computed in float64 times another
  precision), returns the same on a second call and leaves its inputs alone; its result agrees with the float64
  reference (`check_result` → ok); a declared-unsupported one raises an error that names it — also for a variant
  the adapter does not know;
- control flow: `adcompare.while_loop` and `adcompare.cond` (a data-dependent trip count and branch) give the
  reference's value and derivatives in every variant, through the Python fallback where the adapter registered no
  structured loop, or are refused with a reason naming adcompare.while_loop; a loop that reaches max_trips fails its
  cell (an error naming max_trips, or NaN where staged), never a silently truncated result;
- sync: after `sync(run())` returns, the work is done: converting the result costs less than the call did;
- data-parallel operators (pmap_value, pmap_grad, on `DATA_PARALLEL_PROBLEMS`): at D = 1 like every other case,
  in this process (which has the one device the framework starts with); at D = `data_parallel_devices` (4) through
  adcompare's worker, which sets up that many emulated host devices before the framework's import
  (`Adapter.emulate_host_devices`) on the CPU, or needs that many GPUs: the result must agree with the reference
  of the whole batch and the cell must record its `device_setup`. Skipped with the reason where the adapter has no
  mechanism (its capability's reason) or the worker has too few devices (the `unsupported` cell's message).

It runs the adapter in the test process (setup, prepare, run, sync, to_numpy called directly), so a breakpoint
works; about 1 s for a NumPy-speed adapter. Two reasons to move a dtype out of the test process into adcompare's
worker (`isolated_dtypes`, as `adcompare run` runs cells): `setup` flips a process-wide switch (JAX's x64: the
built-in JAX suite checks float32 here and float64 in a worker), or a cell kills the interpreter (a compiler
segfault would end the pytest session). An isolated dtype's cells are run, shape- and dtype-checked and compared
with the reference in the worker; the adapter must then be registered (an entry point, or a file named in
`plugins`).
Slow variants (`Adapter.slow_variants`, e.g. torch.compile) run `slow_operators` only.
"""
from __future__ import annotations

import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import numpy as np
import pytest

from adcompare.model.cell import Cell
from adcompare.model.measurement import Check
from adcompare.model.operators import OPERATORS, data_parallel, minimum_elements
from adcompare.model.problem import Problem, shapes_of
from adcompare.model.problem import applicable_operators as admitted_operators
from adcompare.model.problem import problem as declare_problem
from adcompare.model.shapes import Shapes
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import Adapter, Availability, Capability, Request
from adcompare.plugin.registry import Registry
from adcompare.run.in_process import describe_exception, first_call, release
from adcompare.run.runner import RunOptions
from adcompare.run.session import run_session
from adcompare.study.plan import Plan
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.namespace_probes import ATTRIBUTES, PROBES, probe_input, used_names
from adcompare.verify.tolerance import scaled_error, tolerance

# Small built-in problems covering every operator: scalar output, vector output, per-example (both kinds), and
# kmeans for the declared-only newton_dir.
CONFORMANCE_PROBLEMS = (("f_xy", "n2"), ("f_r2_r3", "n2"), ("exp_dot_loss", "n10"),
                        ("linear_layer", "n5-p8-o2"), ("linear_layer_rowsum", "n5-p8-o2"), ("kmeans", "k10-n1000-d8"))
# The data-parallel operators' problem: a batch of 16, split evenly across 1, 2, 4 or 8 devices. Only those
# operators run on it (the others are covered by CONFORMANCE_PROBLEMS).
DATA_PARALLEL_PROBLEMS = (("mlp_loss", "B16-h4"),)
DATA_PARALLEL_DEVICES = 4
UNKNOWN_VARIANT = "no-such-variant"
SYNC_WORK_SECONDS = 0.01  # the sync workload grows until one call takes this long
SYNC_REPEATS = 5


@dataclass(frozen=True)
class Case:
    """One (problem, size, operator, variant) the suite runs; the dtype is a separate parameter."""

    problem: str
    size: str
    operator: str
    variant: str

    def __str__(self) -> str:
        return f"{self.variant}-{self.problem}-{self.size}-{self.operator}"


@dataclass(frozen=True)
class Outcome:
    """What one in-process run of a case gave: the result, or the error, and any breach of the contract."""

    result: np.ndarray | None
    expected_shape: tuple[int, ...]
    error: str = ""  # prepare/run/sync/to_numpy raised
    breaches: tuple[str, ...] = ()
    check: Check | None = None  # None when the result had the wrong shape or was not finite
    status: Status | None = None  # the verdict `adcompare run` gives the same first call (in_process.first_call)
    message: str = ""  # why, when the verdict is not ok


@dataclass(frozen=True)
class SyncTiming:
    size: str
    synced: float  # median seconds of run() + sync(out)
    after: float  # median seconds of to_numpy(out) right after

    @property
    def blocks(self) -> bool:
        """When sync returns early, the work lands in to_numpy, which then costs more than the synced call."""
        return self.after <= self.synced


def variants_of(adapter: Adapter) -> tuple[str, ...]:
    """The variants `adcompare run` plans for this adapter (kept for suites that call it; see planned_variants)."""
    return adapter.planned_variants()


def applicable_operators(problem: Problem, size_label: str) -> list[str]:
    """The problem's operators that its output shapes at `size_label` admit (problem.applicable_operators)."""
    return admitted_operators(problem, problem.size(size_label))


def _operators_at(registry: plugins.Registry, problems, data_parallel_problems) -> list[tuple[str, str, str]]:
    """(problem, size, operator) the suite may run: every applicable operator of `problems`, and the data-parallel
    operators of `data_parallel_problems`."""
    out = [(name, size, op) for name, size in problems if name in registry.problems
           for op in applicable_operators(registry.problem(name), size)]
    return out + [(name, size, op) for name, size in data_parallel_problems if name in registry.problems
                  for op in applicable_operators(registry.problem(name), size) if data_parallel(op)]


def supported_cases(adapter: Adapter, registry: plugins.Registry, problems=CONFORMANCE_PROBLEMS,
                    slow_operators: tuple[str, ...] = ("grad",),
                    data_parallel_problems=DATA_PARALLEL_PROBLEMS) -> list[Case]:
    """Every declared-supported (problem, size, operator, variant); data-parallel ones run at D = 1."""
    cases = []
    for variant in variants_of(adapter):
        slow = variant in adapter.slow_variants
        for name, size, op in _operators_at(registry, problems, data_parallel_problems):
            if adapter.capability(op, variant).supported and (not slow or op in slow_operators):
                cases.append(Case(name, size, op, variant))
    return cases


def data_parallel_cases(adapter: Adapter, registry: plugins.Registry,
                        data_parallel_problems=DATA_PARALLEL_PROBLEMS) -> list[Case]:
    """Every data-parallel (problem, size, operator, variant), supported or not: run at D > 1 in a worker, or
    skipped with the capability's reason."""
    return [Case(name, size, op, variant) for variant in variants_of(adapter)
            for name, size, op in _operators_at(registry, (), data_parallel_problems)]


def unsupported_cases(adapter: Adapter, registry: plugins.Registry, problems=CONFORMANCE_PROBLEMS,
                      data_parallel_problems=DATA_PARALLEL_PROBLEMS) -> list[Case]:
    """Each declared-unsupported (operator, variant) on the first problem it applies to, and `grad` in a variant
    no adapter has."""
    cases = []
    where_ops = _operators_at(registry, problems, data_parallel_problems)
    for variant in (*variants_of(adapter), UNKNOWN_VARIANT):
        for op in ("grad",) if variant == UNKNOWN_VARIANT else OPERATORS:
            if adapter.capability(op, variant).supported:
                continue  # for the unknown variant, test_capabilities_are_declared reports it
            where = next(((n, s) for n, s, o in where_ops if o == op), None)
            if where is not None:
                cases.append(Case(*where, op, variant))
    return cases


def _snapshot(inputs) -> dict[str, np.ndarray]:
    arrays = {"wrt": inputs.wrt, "batch": inputs.batch, "tangent": inputs.tangent, "cotangent": inputs.cotangent,
              **{f"constants[{k!r}]": v for k, v in inputs.constants.items()}}
    return {k: np.array(v, copy=True) for k, v in arrays.items() if v is not None}


def run_case(adapter: Adapter, problem: Problem, case: Case, dtype: str, device: str = "cpu") -> Outcome:
    """Prepare and run a case twice in this process, synced, and check it against the contract and reference.

    The first call and its verdict are `in_process.first_call`'s, as in `adcompare run` and pytest-benchmark; what
    is the contract's own is the type `to_numpy` returns, the second run and the untouched inputs."""
    cell = Cell(case.problem, case.size, case.operator, adapter.name, case.variant, device, dtype)
    inputs = cell_inputs(problem, problem.size(case.size), case.operator, dtype)
    before = _snapshot(inputs)
    called = first_call(adapter, problem, cell, inputs=inputs)
    want = called.expected_shape
    if called.error is not None:
        return Outcome(None, want, error=describe_exception(called.error), status=called.status,
                       message=called.message)
    assert called.prepared is not None and called.result is not None, "first_call that raised nothing returns both"
    try:
        out = called.prepared.run()
        adapter.sync(out)
        second = adapter.to_numpy(out)
    except Exception as exc:
        return Outcome(None, want, error=describe_exception(exc), status=Status.FAILED,
                       message=f"second call: {describe_exception(exc)}")
    finally:  # the test process goes on to other cases: a cell's helpers and settings end with it
        release(called.prepared)
    breaches = []
    if not isinstance(called.output, (np.ndarray, np.generic)):  # a NumPy scalar for a 0-d result is fine
        breaches.append(f"to_numpy returned {type(called.output).__name__}, not a NumPy array")
    first, second = called.result, np.asarray(second)
    if first.shape != want:
        breaches.append(f"result has shape {first.shape}, {case.operator} must have {want} (operators.py)")
    elif not scaled_error(first, second) <= tolerance(dtype):
        breaches.append(f"a second run() differs from the first by {scaled_error(first, second):.1e}: the timing "
                        "calls run() many times, so it must not accumulate state")
    if first.dtype != np.dtype(dtype):
        breaches.append(f"result is {first.dtype} for a {dtype} cell: the work ran in another precision (a creation "
                        f"call without dtype=, or a promoting operation); keep the inputs' dtype")
    changed = [k for k, v in _snapshot(inputs).items() if not np.array_equal(v, before[k], equal_nan=True)]
    if changed:
        breaches.append(f"the cell modified its inputs {changed}; copy them in prepare")
    return Outcome(first, want, breaches=tuple(breaches), check=called.check, status=called.status,
                   message=called.message)


def refusal_failure(adapter: Adapter, problem: Problem, case: Case, dtype: str, device: str = "cpu") -> str | None:
    """None when a declared-unsupported case raises an error naming its operator or variant, else what went wrong."""
    inputs = cell_inputs(problem, problem.size(case.size), case.operator, dtype)
    try:
        prepared = adapter.prepare(Request(problem, case.operator, case.variant, device, dtype, inputs))
        out = prepared.run()
        adapter.sync(out)
        adapter.to_numpy(out)
    except Exception as exc:
        message = str(exc)
        if case.operator in message or case.variant in message:
            return None
        return (f"raised {type(exc).__name__}({message!r}), which names neither {case.operator!r} nor "
                f"{case.variant!r}; raise adcompare.model.errors.UnsupportedOperation with the capability's reason")
    reason = adapter.capability(case.operator, case.variant).reason
    return (f"declared unsupported ({reason}) but prepare and run returned a result: a faked cell; raise "
            f"adcompare.model.errors.UnsupportedOperation in prepare")


@cache
def sync_workload() -> Problem:
    """Four n×n matrix products with tanh between, summed: compute-bound with a scalar result, so converting the
    result is cheap and any work left after `sync` shows in `to_numpy`. Not a registered problem."""

    @declare_problem(sizes=[128, 256, 512, 1024, 2048], wrt="x", operators=("value",), name="sync_workload")
    def workload(x, /, *, a, xp):
        for _ in range(4):
            x = xp.tanh(xp.matmul(a, x))
        return xp.sum(x)

    @workload.inputs
    def _(rng, n):
        return {"x": rng.standard_normal((n, n)), "a": rng.standard_normal((n, n)) / math.sqrt(n)}

    return workload.build()


@cache
def control_flow_workload(max_trips: int = 64) -> Problem:
    """Halve x until |x|² ≤ 1 (`adcompare.while_loop`: 3 trips at the input, a count the values decide), then
    Σ sin or Σ cos of the result by the sign of its sum (`adcompare.cond`), times the trips + 1. With max_trips=2
    the loop reaches its bound with the condition holding. Not a registered problem."""
    import adcompare

    @declare_problem(sizes=[3], wrt="x", operators=("value", "grad", "jvp"), name="control_flow_workload")
    def workload(x, /, *, xp):
        def big(state):
            return xp.sum(state[0] * state[0]) > 1

        def halve(state):
            return state[0] * 0.5, state[1] + 1

        y, k = adcompare.while_loop(big, halve, (x, xp.zeros_like(x[0])), xp=xp, max_trips=max_trips)
        return adcompare.cond(xp.sum(y) > 0, lambda y, k: xp.sum(xp.sin(y)) * (k + 1),
                              lambda y, k: xp.sum(xp.cos(y)) * (k + 1), y, k, xp=xp)

    @workload.inputs
    def _(rng, n):
        return {"x": np.array([3.0, -1.0, 2.5])[:n]}

    @workload.shapes
    def _(n):  # declared: finding them through NumPy would run the loop, which raises at max_trips=2
        return Shapes(wrt=(n,), output=())

    return workload.build()


def control_flow_failure(adapter: Adapter, variant: str, dtype: str, device: str = "cpu") -> str | None:
    """None when `adcompare.while_loop` and `adcompare.cond` work in `variant` (value and the derivatives agree with
    the float64 reference; refused with a reason that names adcompare.while_loop also passes), and a loop that
    reaches max_trips fails its cell (an error naming max_trips, or NaN) instead of returning a truncated result."""
    operators = [op for op in ("value", "grad", "jvp") if adapter.capability(op, variant).supported]
    for problem, ops in ((control_flow_workload(), operators), (control_flow_workload(2), operators[:1])):
        for op in ops:
            cell = Cell(problem.name, problem.sizes[0].label, op, adapter.name, variant, device, dtype)
            exhausted = problem is control_flow_workload(2)  # no reference: NumPy's loop raises there too
            called = first_call(adapter, problem, cell, check=not exhausted)
            release(called.prepared)
            refused = "adcompare.while_loop" in called.message and called.status in (Status.FAILED,
                                                                                    Status.UNSUPPORTED)
            if refused and "max_trips" not in called.message:
                continue  # the variant cannot stage it and says why (torch.compile)
            if exhausted:
                if called.status is Status.NAN or "max_trips=2" in called.message:
                    continue
                return (f"{op}: a loop that reached max_trips=2 gave {called.status.value} ({called.message}); it "
                        f"must fail: raise op by op, or NaN where staged (adcompare.model.control_flow)")
            if called.status is not Status.OK:
                return f"{op}: {called.status.value}: {called.message}"
    return None


def sync_timing(adapter: Adapter, variant: str, dtype: str, device: str = "cpu") -> SyncTiming:
    """Median time of run()+sync and of to_numpy after it, at the first size whose call takes SYNC_WORK_SECONDS."""
    workload = sync_workload()
    for size in workload.sizes:
        inputs = cell_inputs(workload, size, "value", dtype)
        prepared = adapter.prepare(Request(workload, "value", variant, device, dtype, inputs))
        adapter.to_numpy(prepared.run())  # warm-up: compilation, caches
        synced, after = [], []
        for _ in range(SYNC_REPEATS):
            start = time.perf_counter()
            out = prepared.run()
            adapter.sync(out)
            middle = time.perf_counter()
            adapter.to_numpy(out)
            synced.append(middle - start)
            after.append(time.perf_counter() - middle)
        timing = SyncTiming(size.label, statistics.median(synced), statistics.median(after))
        if timing.synced + timing.after >= SYNC_WORK_SECONDS:
            break
    return timing


def capability_failures(adapter: Adapter, variant: str) -> list[str]:
    failures = []
    for op in OPERATORS:
        cap = adapter.capability(op, variant)
        if not isinstance(cap, Capability):
            failures.append(f"{op}: capability() returned {cap!r}, not a Capability")
        elif cap.supported and not cap.algorithm.strip():
            failures.append(f"{op}: {cap.support.value} without an algorithm (say what really happens)")
        elif not cap.supported and not cap.reason.strip():
            failures.append(f"{op}: unsupported without a reason")
    return failures


# A size no conformance problem reaches: a Jacobian at these shapes is 10⁹ elements, so under-reporting shows.
LARGE_SHAPES = Shapes(wrt=(10_000,), output=(100_000,), batch=1_000, example_output=(100,))


def materialised_failures(adapter: Adapter, variant: str, shapes: list[Shapes]) -> list[str]:
    """Where `materialised_elements` is not a whole number or under-reports the operator's own need."""
    failures = []
    for op in OPERATORS:
        if not adapter.capability(op, variant).supported:
            continue
        for s in shapes:
            got = adapter.materialised_elements(op, variant, s)
            floor = minimum_elements(op, s)
            if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
                failures.append(f"{op} at {s}: materialised_elements returned {got!r}, not an int")
            elif got < floor:
                failures.append(f"{op} at {s}: materialised_elements {got} is below the operator's own need {floor}")
    return failures


def missing_names(namespace: Any, names) -> list[str]:
    missing = []
    for name in sorted(names):
        target = namespace
        for part in name.split("."):
            target = getattr(target, part, None)
        if target is None:
            missing.append(name)
    return missing


def probe_mismatches(adapter: Adapter, names, dtype: str) -> list[str]:
    """Probed names whose value through the adapter's namespace differs from NumPy's (or that raise)."""
    xp, failures = adapter.namespace(), []
    for name in sorted(set(names) & set(PROBES)):
        want = PROBES[name](probe_input("float64"), np)
        try:
            got = np.asarray(adapter.to_numpy(PROBES[name](xp.asarray(probe_input(dtype)), xp)))
        except Exception as exc:
            failures.append(f"xp.{name}: {describe_exception(exc)}")
            continue
        if got.shape != np.shape(want) or not scaled_error(got, want) <= tolerance(dtype):
            failures.append(f"xp.{name}: {got.tolist()} (shape {got.shape}), NumPy gives {np.asarray(want).tolist()}")
    return failures


# Run in a fresh interpreter: rebuild the adapter from a pickle and ask only what `adcompare list` asks.
_IMPORT_PROBE = """
import json, pickle, sys
import adcompare, adcompare.model.operators
before = set(sys.modules)
adapter = pickle.loads(sys.stdin.buffer.read())
preloaded = adapter.module in before
adapter.available(), adapter.versions(), adapter.name, dict(adapter.variants)
for variant in (*adapter.variants, "eager", "compiled"):
    for op in adcompare.model.operators.OPERATORS:
        adapter.capability(op, variant)
print(json.dumps({"preloaded": preloaded, "imported": sorted(m for m in set(sys.modules) - before
                  if m.split(".")[0] == adapter.module.split(".")[0])}))
"""


class AdapterConformance:
    """Subclass with `adapter = YourAdapter()`; pytest collects the `test_*` methods (the class name must start with
    `Test`). Override the class attributes below to narrow or widen what runs."""

    adapter: ClassVar[Adapter]
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")  # checked in this process, each set up once
    isolated_dtypes: ClassVar[tuple[str, ...]] = ()  # checked in adcompare's worker process instead
    device: ClassVar[str] = "cpu"
    threads: ClassVar[int] = 1
    problems: ClassVar[tuple[tuple[str, str], ...]] = CONFORMANCE_PROBLEMS  # (problem, size label)
    data_parallel_problems: ClassVar[tuple[tuple[str, str], ...]] = DATA_PARALLEL_PROBLEMS  # pmap_* only
    data_parallel_devices: ClassVar[int] = DATA_PARALLEL_DEVICES  # D checked in a worker (besides D = 1 here)
    slow_operators: ClassVar[tuple[str, ...]] = ("grad",)  # the only operators run in slow variants
    plugins: ClassVar[tuple[str, ...]] = ()  # --plugin files or modules that register problems or the adapter
    known_failures: ClassVar[Mapping[str, str]] = {}  # test name → reason: strict xfail (passing fails it)

    # --- parametrization and fixtures ---------------------------------------------------------------------

    def registry(self) -> Registry:  # `plugins` in this class is the ClassVar above
        return plugins.load(tuple(self.plugins))

    def problem_names(self) -> frozenset[str]:
        """Every namespace name the registry's problems use (evaluating each, a minute for GradBench's nested
        ones); adcompare's own tests override it to compute this once for all their processes."""
        return _used_names(self.registry())

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        names = metafunc.fixturenames
        if getattr(self, "adapter", None) is None:  # e.g. a framework whose adapter is not registered here
            for name in {"dtype", "isolated_dtype", "case", "refused", "variant", "parallel_case"} & set(names):
                metafunc.parametrize(name, [])
            return
        if "dtype" in names:  # class scope: pytest groups the tests by dtype, so setup runs once per dtype
            dtypes = self.dtypes[:1] if metafunc.function.__name__ == "test_sync_blocks" else self.dtypes
            metafunc.parametrize("dtype", dtypes, indirect=True, scope="class")
        if "isolated_dtype" in names:
            metafunc.parametrize("isolated_dtype", self.isolated_dtypes)
        if "case" in names:
            cases = supported_cases(self.adapter, self.registry(), self.problems, self.slow_operators,
                                    self.data_parallel_problems)
            metafunc.parametrize("case", cases, ids=str)
        if "refused" in names:
            metafunc.parametrize("refused", unsupported_cases(self.adapter, self.registry(), self.problems,
                                                              self.data_parallel_problems), ids=str)
        if "parallel_case" in names:
            metafunc.parametrize("parallel_case", data_parallel_cases(self.adapter, self.registry(),
                                                                      self.data_parallel_problems), ids=str)
        if "variant" in names:
            variants = variants_of(self.adapter)
            if metafunc.function.__name__ == "test_sync_blocks":
                variants = tuple(v for v in variants if self.adapter.capability("value", v).supported
                                 and (v not in self.adapter.slow_variants or "value" in self.slow_operators))
            metafunc.parametrize("variant", variants)

    @pytest.fixture(autouse=True)
    def _known_failure(self, request: pytest.FixtureRequest) -> None:
        if getattr(self, "adapter", None) is None:
            pytest.skip(f"{type(self).__name__}.adapter is not set")
        reason = self.known_failures.get(request.node.name)
        if reason:
            request.applymarker(pytest.mark.xfail(reason=reason, strict=True))

    # Class-scoped fixtures are classmethods: pytest runs them once per class, not per test instance, so they
    # may read class attributes only (pytest 9.1 deprecates instance-method ones; pytest 10 removes them).
    @pytest.fixture(scope="class")
    @classmethod
    def installed(cls) -> None:
        avail = cls.adapter.available()
        if not avail.installed:
            pytest.skip(f"adapter {cls.adapter.name!r} is not installed: {avail.reason}")

    @pytest.fixture(scope="class")
    @classmethod
    def dtype(cls, request: pytest.FixtureRequest, installed: None) -> str:
        cls.adapter.setup(dtype=request.param, device=cls.device, threads=cls.threads)
        return request.param

    def _outcome(self, dtype: str, case: Case) -> Outcome:
        """Each case runs once per class and dtype; the shape and the reference tests read the same outcome."""
        key = (type(self), self.device, dtype, case)
        if key not in _OUTCOMES:
            _OUTCOMES[key] = run_case(self.adapter, self.registry().problem(case.problem), case, dtype, self.device)
        return _OUTCOMES[key]

    # --- availability and declarations --------------------------------------------------------------------

    def test_availability_is_reported(self) -> None:
        avail = self.adapter.available()
        assert isinstance(avail, Availability), f"available() returned {avail!r}, not an Availability"
        if avail.installed:
            assert avail.version, (f"installed but without a version: set `distribution` to the pip distribution "
                                   f"whose version results record (now {self.adapter.distribution!r})")
        else:
            assert avail.reason.strip(), "not installed, without a reason: say what to pip install"

    def test_name_variants_and_devices_are_usable(self) -> None:
        a = self.adapter
        assert isinstance(a.name, str) and a.name.strip(), "name must be a non-empty string"
        for text in (a.name, *a.variants):
            assert not set(text) & set(", /\t\n"), f"{text!r}: selectors split on commas and keys on '/'"
        assert a.variants and all(isinstance(d, str) and d.strip() for d in a.variants.values()), \
            "variants must map each name to a description"
        assert self.device in a.devices, f"devices {a.devices} lack {self.device!r}, which this suite runs on"

    def test_framework_is_not_imported_to_list_the_adapter(self) -> None:
        """`adcompare list` and the parent process call available() and capability(); they must stay light."""
        try:
            blob = pickle.dumps(self.adapter)
        except Exception as exc:
            pytest.skip(f"the adapter cannot be pickled into a fresh process ({exc})")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        done = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], input=blob, capture_output=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        report = json.loads(done.stdout.decode().strip().splitlines()[-1])
        if report["preloaded"]:
            pytest.skip(f"{self.adapter.module} is imported by adcompare itself")
        assert not report["imported"], (f"importing the adapter, available() or capability() imported "
                                        f"{report['imported'][:5]}: import the framework inside methods")

    def test_capabilities_are_declared(self, variant: str) -> None:
        failures = capability_failures(self.adapter, variant)
        assert not failures, f"variant {variant!r}:\n" + "\n".join(failures)
        unknown = self.adapter.capability("grad", UNKNOWN_VARIANT)
        assert not unknown.supported and unknown.reason.strip(), \
            f"variant {UNKNOWN_VARIANT!r} must be unsupported with a reason, got {unknown!r}"

    def test_materialised_elements_cover_the_operator(self, variant: str) -> None:
        registry = self.registry()
        shapes = [shapes_of(registry.problems[name], registry.problems[name].size(size))
                  for name, size in self.problems if name in registry.problems]
        failures = materialised_failures(self.adapter, variant, [*shapes, LARGE_SHAPES])
        assert not failures, f"variant {variant!r}:\n" + "\n".join(failures)

    # --- namespace -------------------------------------------------------------------------------------------

    def test_namespace_has_every_name_the_problems_use(self, installed: None) -> None:
        names = self.problem_names()
        missing = missing_names(self.adapter.namespace(), names | (ATTRIBUTES & {"float32", "float64"}))
        assert not missing, f"{self.adapter.name}'s namespace lacks {missing}"

    def test_namespace_matches_numpy(self, dtype: str) -> None:
        failures = probe_mismatches(self.adapter, self.problem_names(), dtype)
        assert not failures, f"{len(failures)} namespace function(s) differ from NumPy in {dtype}:\n" + \
            "\n".join(failures)

    # --- behaviour -------------------------------------------------------------------------------------------

    def test_supported_operator_runs(self, dtype: str, case: Case) -> None:
        outcome = self._outcome(dtype, case)
        cap = self.adapter.capability(case.operator, case.variant)
        assert not outcome.error, f"declared {cap.support.value} ({cap.algorithm}) but failed: {outcome.error}"
        assert not outcome.breaches, "\n".join(outcome.breaches)

    def test_agrees_with_reference(self, dtype: str, case: Case) -> None:
        outcome = self._outcome(dtype, case)
        if outcome.result is None or outcome.result.shape != outcome.expected_shape:
            pytest.skip("no result of the right shape: see test_supported_operator_runs")
        assert outcome.status is Status.OK, outcome.message

    def test_unsupported_operator_is_refused(self, dtype: str, refused: Case) -> None:
        failure = refusal_failure(self.adapter, self.registry().problem(refused.problem), refused, dtype,
                                  self.device)
        assert failure is None, failure

    def test_control_flow(self, dtype: str, variant: str) -> None:
        """adcompare.while_loop and adcompare.cond: the Python loop and `if` for an adapter that registers none."""
        failure = control_flow_failure(self.adapter, variant, dtype, self.device)
        assert failure is None, failure

    def test_sync_blocks(self, dtype: str, variant: str) -> None:
        t = sync_timing(self.adapter, variant, dtype, self.device)
        assert t.blocks, (f"sync does not wait: run()+sync() took {t.synced:.2e} s, to_numpy() after it "
                          f"{t.after:.2e} s (sync workload n={t.size}); the work is left outside the timed region")

    def test_cells_in_worker(self, isolated_dtype: str) -> None:
        """The isolated dtype's cases through adcompare's worker: run, shape, reference, pairwise agreement."""
        registry, name = self.registry(), self.adapter.name
        assert type(registry.adapters.get(name)) is type(self.adapter), (
            f"adapter {name!r} is not registered (a worker finds adapters by name): add an entry point in the "
            f"'adcompare' group, or name the file registering it in `plugins`")
        cells = [Cell(c.problem, c.size, c.operator, name, c.variant, self.device, isolated_dtype)
                 for c in supported_cases(self.adapter, registry, self.problems, self.slow_operators,
                                          self.data_parallel_problems)]
        measurements = run_session(registry, Plan(tuple(cells), ()),
                                   RunOptions(threads=self.threads, time_it=False))
        bad = [f"{m.cell.id}: {m.status.value}: {m.message}" for m in measurements if m.status is not Status.OK]
        bad += [f"{m.cell.id}: result is {m.check.output_dtype}, not {m.cell.dtype}" for m in measurements
                if m.check is not None and m.check.dtype_drift]
        assert not bad, f"{len(bad)} of {len(cells)} cells not ok:\n" + "\n".join(bad)

    def test_data_parallel_across_devices(self, parallel_case: Case) -> None:
        """A data-parallel case on `data_parallel_devices` devices, through adcompare's worker (which emulates
        host devices before the framework's import): ok against the whole batch's reference, set-up recorded."""
        case, count = parallel_case, self.data_parallel_devices
        capability = self.adapter.capability(case.operator, case.variant)
        if not capability.supported:
            pytest.skip(f"{case.operator} in {case.variant!r}: {capability.reason}")
        m = self._parallel_outcomes().get(case)
        assert m is not None, f"no record for {case} on {count} devices"
        if m.status is Status.UNSUPPORTED:  # the worker has too few devices (no emulation, too few GPUs)
            pytest.skip(m.message)
        assert m.status is Status.OK, f"{m.cell.id}: {m.status.value}: {m.message}"
        assert m.details.get("device_setup"), f"{m.cell.id}: the worker recorded no device_setup"

    def _parallel_outcomes(self) -> dict[Case, Any]:
        """Every supported data-parallel case at D = data_parallel_devices, run once per class in one worker."""
        key = (type(self), self.device, "parallel")
        if key not in _OUTCOMES:
            registry, name = self.registry(), self.adapter.name
            assert type(registry.adapters.get(name)) is type(self.adapter), (
                f"adapter {name!r} is not registered (a worker finds adapters by name): add an entry point in the "
                f"'adcompare' group, or name the file registering it in `plugins`")
            dtype = (*self.dtypes, *self.isolated_dtypes)[0]
            cases = [c for c in data_parallel_cases(self.adapter, registry, self.data_parallel_problems)
                     if self.adapter.capability(c.operator, c.variant).supported]
            cells = [Cell(c.problem, c.size, c.operator, name, c.variant, self.device, dtype,
                          devices=self.data_parallel_devices) for c in cases]
            measurements = run_session(registry, Plan(tuple(cells), ()),
                                       RunOptions(threads=self.threads, time_it=False))
            by_key = {m.cell.key: m for m in measurements}
            _OUTCOMES[key] = {c: by_key.get(cell.key) for c, cell in zip(cases, cells)}
        return _OUTCOMES[key]


_OUTCOMES: dict[tuple, Any] = {}


@cache
def _used_names_cached(key: tuple[str, ...]) -> frozenset[str]:
    return frozenset(used_names(plugins.load(key).problems.values()))


def _used_names(registry: plugins.Registry) -> frozenset[str]:
    return _used_names_cached(registry.plugins)

"""The quick suite as `adcompare run` runs it — every available adapter × its cells × variant, float32 (the suite's
dtype) — through real workers, timed.

Each cell must agree with the float64 reference and, pairwise, with every other adapter that ran it; unsupported
cells must say why. Known framework limitations are data in adcompare/verify/expectations.py, checked strictly.
Float64 is checked once elsewhere: every (adapter, operator, variant) by tests/test_conformance.py (in-process, or
in a worker for JAX and TensorFlow), every problem by tests/adapters/ (eager) and tests/test_suite_coverage.py (JAX).

The run is split in two halves of worker groups, one per test class, which pytest-xdist's workers run side by side
(tests/shared_results.py); every test sees both halves, cross-checked together as one run is.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from adcompare.model.errors import RequiredFrameworkMissing
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin import registry as plugins
from adcompare.run import runner
from adcompare.study.plan import Selection, required_frameworks, usable_adapters
from adcompare.study.plan import plan as make_plan
from adcompare.verify.check import cross_check
from adcompare.verify.expectations import unexpected

from .recording import Recording
from .shared_results import once_per_run

REGISTRY = plugins.load()
# The quick suite with its pmap entry at D = 2 as well as 4 on the CPU (`--devices 1,2,4`), which `adcompare report`
# leaves out there: the worker path at both counts stays covered.
PLAN = make_plan(REGISTRY, Selection(suite="quick", device_counts=(1, 2, 4)))
QUICK = TimingPolicy(min_time=0.005, max_time=0.05, warmup_time=0.0, min_samples=1, block_time=0.001)
# The plan in two halves of worker groups, one per test class, so that two pytest-xdist workers each run one half
# (minutes of worker processes each) instead of one worker running all. Every test reads both halves'
# measurements, cross-checked together as one run does: pairwise agreement is across adapters. Balanced by
# measured CPU (load ~4): TensorFlow 75 s + torch's gloo groups at D = 2 and 4 35 s, against JAX 56 s + torch's
# other cells 30 s + autograd 13 s. An adapter not named here (a third party's) runs in the first half.
SECOND_HALF = ("jax", "autograd", "torch")  # torch's single-device cells only


def in_half(cell, half: int) -> bool:
    second = cell.adapter in SECOND_HALF and not (cell.adapter == "torch" and cell.devices > 1)
    return second == (half == 1)


def half_plan(half: int):
    return replace(PLAN, cells=tuple(c for c in PLAN.cells if in_half(c, half)),
                   decided=tuple(m for m in PLAN.decided if in_half(m.cell, half)))


def cells_of(half: int) -> list:
    p = half_plan(half)
    return list(p.cells) + [m.cell for m in p.decided]


def _run_half(half: int) -> tuple[list, list[dict]]:
    """A half's measurements as recorded (before cross-checking) and its workers' `on_worker` records."""
    seen = Recording()
    runner.run(REGISTRY, half_plan(half), runner.RunOptions(timeout=240, threads=2, policy=QUICK), observer=seen)
    return seen.cells, seen.workers


def whole_run(first: int) -> tuple[dict, list[dict]]:
    """The measurements by key, cross-checked across both halves, and the workers started. `first` is the half
    this process runs (or waits for) first: the other worker is meanwhile running the other one."""
    halves = [once_per_run(f"quick-matrix-half{half}", lambda half=half: _run_half(half))
              for half in (first, 1 - first)]
    measured = cross_check([m for recorded, _ in halves for m in recorded])
    return {m.cell.key: m for m in measured}, [w for _, workers in halves for w in workers]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        cells = cells_of(metafunc.cls.half)
        metafunc.parametrize("cell", cells, ids=[c.id for c in cells])


# What each built-in adapter's data-parallel record shows of its D devices: D emulated host devices (JAX), a gloo
# group of D distinct processes (torch), D replicas on D distinct logical devices (TensorFlow).
DEVICE_EVIDENCE = {
    "jax": lambda d, count: f"{count} emulated host devices" in d["device_setup"],
    "torch": lambda d, count: d["world_size"] == count and d["backend"] == "gloo"
    and len(set(d["helper_pids"]) | {d["rank0_pid"]}) == count,
    "tensorflow": lambda d, count: d["replicas"] == count and len(set(d["replica_devices"])) == count,
}


def data_parallel_cells_ran_on_their_devices_in_one_worker_per_count(matrix_run):
    """The quick suite's pmap entry at D = 2 and 4: each ok record shows D real devices or processes (the adapter
    tests in tests/adapters/test_*_data_parallel.py check D = 2 in float64 in depth), and each device count of an
    adapter has a worker of its own — but for an adapter that sets its devices up per cell (torch), whose D = 2 and
    4 cells ran in one worker (Registry.worker_key), started for D = 2, the count of its first cells here."""
    measurements, workers = matrix_run
    parallel = [m for m in measurements.values() if m.cell.devices > 1 and m.status is Status.OK]
    assert {m.cell.devices for m in parallel} == {2, 4}
    for m in parallel:
        assert m.cell.adapter in DEVICE_EVIDENCE and DEVICE_EVIDENCE[m.cell.adapter](m.details, m.cell.devices), \
            (m.cell.id, m.details)
    for adapter in {m.cell.adapter for m in parallel}:
        counts = sorted(w.get("devices", 1) for w in workers if w["adapter"] == adapter and w.get("devices", 1) > 1)
        assert counts == ([2] if REGISTRY.adapter(adapter).host_devices_per_cell else [2, 4]), (adapter, counts)
    ranks = {m.cell.devices: m.details["rank0_pid"] for m in parallel if m.cell.adapter == "torch"}
    assert not ranks or sorted(ranks) == [2, 4] and len(set(ranks.values())) == 1, ranks


def required_frameworks_ran_cells(matrix):
    """ADCOMPARE_REQUIRE (set by CI) turns a missing framework into a failure instead of silently fewer cells:
    planning raises when one is not installed (the test below), and here each one must have run cells ok,
    so a framework that is installed but cannot start a worker fails too."""
    ran = {m.cell.adapter for m in matrix.values() if m.status is Status.OK}
    missing = sorted(set(required_frameworks()) - ran)
    assert not missing, f"ADCOMPARE_REQUIRE names {missing}, which ran no cell ok"


def each_worker_built_a_sizes_inputs_once(matrix):
    """A worker runs a size's cells one after another (the plan's order) and builds their inputs once: each cell,
    in the order its worker ran them, reused its inputs exactly when the worker's last inputs were its problem's at
    its size and dtype and no worker was started for it (after a crash or a failure that ends a worker); and most
    cells reused them."""
    ran = {c.key: (worker, i) for worker, cells in runner.worker_queues(REGISTRY, PLAN.cells).items()
           for i, c in enumerate(cells)}
    last: dict[tuple, tuple] = {}  # worker → the problem, size and dtype of the inputs it holds
    reused = 0
    for m in sorted((m for m in matrix.values() if "inputs_reused" in m.details), key=lambda m: ran[m.cell.key]):
        worker, at = ran[m.cell.key][0], (m.cell.problem, m.cell.size, m.cell.dtype)
        restarted = m.details.get("worker_start_seconds", 0) > 0
        assert m.details["inputs_reused"] == (last.get(worker) == at and not restarted), (m.cell.id, last.get(worker))
        last[worker] = at
        reused += m.details["inputs_reused"]
    assert reused > 0.5 * len(matrix), (reused, len(matrix))


class QuickSuiteHalf:
    half = 0

    @pytest.fixture(scope="class")
    @classmethod
    def matrix_run(cls):
        return whole_run(cls.half)

    @pytest.fixture(scope="class")
    @classmethod
    def matrix(cls, matrix_run):
        return matrix_run[0]

    def test_cell_agrees_or_says_why_not(self, cell, matrix):
        m = matrix[cell.key]
        assert (why := unexpected(m, REGISTRY.problems)) is None, why
        if m.status is not Status.OK:
            return
        c = m.check
        assert c.output_dtype == cell.dtype, f"{cell.id}: dtype drift to {c.output_dtype}"
        assert m.timing is not None and m.timing.median > 0 and m.algorithm


class TestQuickSuiteFirstHalf(QuickSuiteHalf):
    half = 0

    def test_data_parallel_cells_ran_on_their_devices_in_one_worker_per_count(self, matrix_run):
        data_parallel_cells_ran_on_their_devices_in_one_worker_per_count(matrix_run)


class TestQuickSuiteSecondHalf(QuickSuiteHalf):
    half = 1

    def test_required_frameworks_ran_cells(self, matrix):
        required_frameworks_ran_cells(matrix)

    def test_each_worker_built_a_sizes_inputs_once(self, matrix):
        each_worker_built_a_sizes_inputs_once(matrix)


def test_the_halves_are_the_whole_plan():
    assert sorted(c.key for half in (0, 1) for c in cells_of(half)) == \
        sorted([c.key for c in PLAN.cells] + [m.cell.key for m in PLAN.decided])
    assert {c.worker_group for c in cells_of(0)} & {c.worker_group for c in cells_of(1)} == set()


def test_a_required_framework_that_is_not_installed_stops_planning(monkeypatch):
    registry = plugins.load()
    jax = registry.adapters["jax"]  # available() looks for `module` without importing it
    monkeypatch.setattr(type(jax), "module", "adcompare_no_such_framework")
    monkeypatch.setenv("ADCOMPARE_REQUIRE", "jax")
    with pytest.raises(RequiredFrameworkMissing, match="ADCOMPARE_REQUIRE names 'jax'"):
        usable_adapters(registry, ())
    monkeypatch.setenv("ADCOMPARE_REQUIRE", "")
    assert "jax" not in usable_adapters(registry, ())[0]

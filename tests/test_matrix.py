"""The quick suite as `adcompare run` runs it — every available adapter × its cells × variant, float32 (the suite's
dtype) — through real workers, timed.

Each cell must agree with the float64 reference and, pairwise, with every other adapter that ran it; unsupported
cells must say why. Known framework limitations are data in adcompare/verify/expectations.py, checked strictly.
Float64 is checked once elsewhere: every (adapter, operator, variant) by tests/test_conformance.py (in-process, or
in a worker for JAX and TensorFlow), every problem by tests/adapters/ (eager) and tests/test_suite_coverage.py (JAX).
"""
from __future__ import annotations

import pytest

from adcompare.model.errors import RequiredFrameworkMissing
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin import registry as plugins
from adcompare.run import runner
from adcompare.study.plan import Selection, required_frameworks, usable_adapters
from adcompare.study.plan import plan as make_plan
from adcompare.verify.expectations import unexpected

REGISTRY = plugins.load()
PLAN = make_plan(REGISTRY, Selection(suite="quick"))
CELLS = list(PLAN.cells) + [m.cell for m in PLAN.decided]
QUICK = TimingPolicy(min_time=0.005, max_time=0.05, warmup_time=0.0, min_samples=3, block_time=0.001)


@pytest.fixture(scope="session")
def matrix_run():
    """The measurements by key, and the workers started (their `on_worker` records)."""
    workers: list[dict] = []
    out = runner.run(REGISTRY, PLAN, runner.RunOptions(timeout=240, threads=2, policy=QUICK),
                     on_worker=workers.append)
    return {m.cell.key: m for m in out}, workers


@pytest.fixture(scope="session")
def matrix(matrix_run):
    return matrix_run[0]


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_cell_agrees_or_says_why_not(cell, matrix):
    m = matrix[cell.key]
    assert (why := unexpected(m, REGISTRY.problems)) is None, why
    if m.status is not Status.OK:
        return
    c = m.check
    assert c.output_dtype == cell.dtype, f"{cell.id}: dtype drift to {c.output_dtype}"
    assert m.timing is not None and m.timing.median > 0 and m.algorithm


# What each built-in adapter's data-parallel record shows of its D devices: D emulated host devices (JAX), a gloo
# group of D distinct processes (torch), D replicas on D distinct logical devices (TensorFlow).
DEVICE_EVIDENCE = {
    "jax": lambda d, count: f"{count} emulated host devices" in d["device_setup"],
    "torch": lambda d, count: d["world_size"] == count and d["backend"] == "gloo"
    and len(set(d["helper_pids"]) | {d["rank0_pid"]}) == count,
    "tensorflow": lambda d, count: d["replicas"] == count and len(set(d["replica_devices"])) == count,
}


def test_data_parallel_cells_ran_on_their_devices_in_one_worker_per_count(matrix_run):
    """The quick suite's pmap entry at D = 2 and 4: each ok record shows D real devices or processes (the adapter
    tests in tests/adapters/test_*_data_parallel.py check D = 2 in float64 in depth), and each device count of an
    adapter has a worker of its own."""
    measurements, workers = matrix_run
    parallel = [m for m in measurements.values() if m.cell.devices > 1 and m.status is Status.OK]
    assert {m.cell.devices for m in parallel} == {2, 4}
    for m in parallel:
        assert m.cell.adapter in DEVICE_EVIDENCE and DEVICE_EVIDENCE[m.cell.adapter](m.details, m.cell.devices), \
            (m.cell.id, m.details)
    for adapter in {m.cell.adapter for m in parallel}:
        assert sorted(w.get("devices", 1) for w in workers if w["adapter"] == adapter and w.get("devices", 1) > 1) \
            == [2, 4]


def test_required_frameworks_ran_cells(matrix):
    """ADCOMPARE_REQUIRE (set by CI) turns a missing framework into a failure instead of silently fewer cells:
    planning raises when one is not installed (the test below), and here each one must have run cells ok,
    so a framework that is installed but cannot start a worker fails too."""
    ran = {m.cell.adapter for m in matrix.values() if m.status is Status.OK}
    missing = sorted(set(required_frameworks()) - ran)
    assert not missing, f"ADCOMPARE_REQUIRE names {missing}, which ran no cell ok"


def test_a_required_framework_that_is_not_installed_stops_planning(monkeypatch):
    registry = plugins.load()
    jax = registry.adapters["jax"]  # available() looks for `module` without importing it
    monkeypatch.setattr(type(jax), "module", "adcompare_no_such_framework")
    monkeypatch.setenv("ADCOMPARE_REQUIRE", "jax")
    with pytest.raises(RequiredFrameworkMissing, match="ADCOMPARE_REQUIRE names 'jax'"):
        usable_adapters(registry, ())
    monkeypatch.setenv("ADCOMPARE_REQUIRE", "")
    assert "jax" not in usable_adapters(registry, ())[0]

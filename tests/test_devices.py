"""Devices as a dimension of a cell (issue 26): keys, the data-parallel operators, their reference and planning.

The JAX mechanism's real runs are in tests/adapters/test_jax_data_parallel.py; this file needs no framework.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell, worker_group
from adcompare.model.measurement import Measurement
from adcompare.model.operators import devices_unfit, expected_shape
from adcompare.model.status import Status
from adcompare.study.plan import Selection, plan
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.reference import reference

ROOT = Path(__file__).resolve().parent.parent
FULL = ROOT / "benchmarks" / "results" / "full" / "full.jsonl.gz"


def cell(devices: int = 1, **fields) -> Cell:
    base = dict(problem="mlp_loss", size="B16-h4", operator="pmap_grad", adapter="jax", variant="eager",
                device="cpu", dtype="float32")
    return Cell(**{**base, **fields}, devices=devices)


# --- keys -------------------------------------------------------------------------------------------------------

def test_one_device_keys_are_those_written_before_device_counts():
    c = cell()
    assert c.key == "mlp_loss/B16-h4/pmap_grad/jax/eager/cpu/float32"
    assert c.id == "mlp_loss-B16-h4-pmap_grad-jax-eager-float32"
    assert "--devices" not in c.selector
    assert c.family == ("mlp_loss", "pmap_grad", "jax", "eager", "cpu", "float32", "current")
    assert c.worker_group == ("jax", "float32", "cpu") == worker_group("jax", "float32", "cpu")
    assert "devices" not in c.to_json()
    assert Cell.from_json(c.to_json()) == c


def test_a_device_count_separates_keys_series_workers_and_rankings():
    c = cell(4, environment="old")
    assert c.key == "mlp_loss/B16-h4/pmap_grad/jax/eager/cpu/float32/4dev@old"
    assert c.id.endswith("-float32-4dev-old")
    assert c.selector.endswith("--dtype float32 --devices 4 --environment old")
    assert c.family != cell(1, environment="old").family  # a series by size is per device count
    assert c.family == cell(4, size="B128-h4", environment="old").family
    assert c.worker_group == ("jax", "float32", "cpu", "old", "4dev")  # the worker emulates 4 devices at start
    assert c.comparable == cell(1).comparable  # the averaged gradient is the whole-batch gradient: compared
    assert c.ranking != cell(1, environment="old").ranking  # … but timed against cells on as many devices
    assert c.twin(devices=2).key.endswith("/2dev@old")
    assert c.to_json()["devices"] == 4 and Cell.from_json(c.to_json()) == c


def test_a_worker_runs_every_device_count_of_an_adapter_that_sets_devices_up_per_cell():
    """torch starts a cell's gloo group in the cell: its D-device CPU cells run in the worker of its 1-device cells
    (Registry.worker_key), which the estimate starts once; JAX fixes its devices at import (one worker per count),
    and on a GPU the count is the devices present."""
    from adcompare.plugin import registry as plugins
    from adcompare.study.budget import choose
    from adcompare.study.estimate import estimate
    from adcompare.study.shards import units

    registry = plugins.load()
    torch4, torch1 = cell(4, adapter="torch"), cell(1, adapter="torch", operator="grad")
    assert registry.worker_key(torch4) == registry.worker_key(torch1) == torch1.worker_group
    old = cell(4, adapter="torch", environment="old")  # another environment's adcompare may set devices at start only
    assert registry.worker_key(old) == old.worker_group == ("torch", "float32", "cpu", "old", "4dev")
    assert registry.worker_key(cell(4)) == cell(4).worker_group != cell(1).worker_group
    assert registry.worker_key(cell(2, adapter="torch", device="cuda")) == ("torch", "float32", "cuda", "2dev")
    both = estimate(registry, [torch1, torch4, cell(4), cell(1)])
    assert both.worker(torch4) == both.worker(torch1) == torch1.worker_group
    assert torch4.worker_group not in both.startups
    assert set(both.startups) == {torch1.worker_group, cell(4).worker_group, cell(1).worker_group}
    assert min(both.startups.values()) > 0.0
    # one start-up for torch's counts together, and one for its D-device cells wherever they run without the others:
    # a --max-time round or a shard of those alone (review of 95808eb: they had counted none)
    start = both.startups[torch1.worker_group]
    assert both.group_seconds([torch1, torch4]) == pytest.approx(
        both.cells[torch1.key] + both.cells[torch4.key] + start)
    assert both.group_seconds([torch4]) == pytest.approx(both.cells[torch4.key] + start)
    chosen, _ = choose([torch4], both, both.cells[torch4.key] + 0.5 * start)
    assert chosen == []  # its start-up does not fit
    assert [u.cells for u in units([torch4], both, 1)] == [(torch4,)] and units([torch4], both, 1)[0].seconds == \
        pytest.approx(both.cells[torch4.key] + start)
    alone = estimate(registry, [torch4])
    assert alone.startups[alone.worker(torch4)] > 0.0  # alone, it starts a worker


def test_records_written_before_device_counts_read_as_one_device():
    """The upgrade path, on the producer's real output: every record of the committed full baseline reads with
    devices = 1 and the key it was written with."""
    with gzip.open(FULL, "rt") as lines:
        records = [json.loads(line) for line in lines]
    cells = [r for r in records if r.get("record") == "cell"]
    assert cells
    for r in cells:
        m = Measurement.from_json(r)
        assert m.cell.devices == 1 and m.cell.key == r["key"]
        assert m.to_json()["cell"] == r["cell"]


# --- operators and reference -----------------------------------------------------------------------------------

def test_shapes_and_the_even_split():
    assert expected_shape("pmap_value", wrt_shape=(3, 4, 5), out_shape=(16,), example_out_shape=(),
                          batch_size=16) == (16,)
    assert expected_shape("pmap_grad", wrt_shape=(3, 4, 5), out_shape=(16,), example_out_shape=(),
                          batch_size=16) == (3, 4, 5)
    assert devices_unfit("pmap_grad", 4, 16) is None
    assert "does not split evenly across 3 devices" in devices_unfit("pmap_grad", 3, 16)
    assert "only the data-parallel operators" in devices_unfit("grad", 2, None)


def test_pmap_references_against_an_independent_recomputation(registry):
    """pmap_value: each example's value; pmap_grad: the gradient of the batch's mean, here by central differences
    of the mean written out again in the test (float64), and equal to the mean of the per-example gradients."""
    problem = registry.problem("mlp_loss")
    size = problem.size("B16-h4")
    inputs = cell_inputs(problem, size, "pmap_grad", "float64")
    fn = problem.bind(np, dict(inputs.constants))
    values = np.array([fn(inputs.wrt, b) for b in inputs.batch])
    assert np.allclose(reference(problem, size, "pmap_value", inputs).value, values, rtol=0, atol=1e-15)

    def mean_loss(w):
        return float(np.mean([fn(w, b) for b in inputs.batch]))

    x, h = inputs.wrt, 1e-6
    expected = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        expected[i] = (mean_loss(x + step) - mean_loss(x - step)) / (2 * h)
    ref = reference(problem, size, "pmap_grad", inputs)
    assert ref.value.shape == x.shape
    assert "whole batch's mean over 16 examples" in ref.method
    assert np.max(np.abs(ref.value - expected)) < 1e-7
    per_example = reference(problem, size, "vmap_grad", cell_inputs(problem, size, "vmap_grad", "float64")).value
    assert np.allclose(ref.value, per_example.mean(axis=0), rtol=1e-10, atol=1e-12)


# --- planning and selection ------------------------------------------------------------------------------------

def test_the_quick_suite_runs_pmap_at_1_and_4_host_devices_1_2_4_gpus_and_nothing_else_on_several(registry):
    """On the CPU, D = 2 and 4 are both emulated devices sharing its cores: the quick suite (what `adcompare
    report` runs) plans 1 and 4 there, and 1, 2 and 4 on GPUs; --devices still names any counts."""
    p = plan(registry, Selection(adapters=("jax", "autograd")))
    several = [c for c in (*p.cells, *(m.cell for m in p.decided)) if c.devices != 1]
    assert several and {c.operator for c in several} == {"pmap_grad"}
    everything = (*p.cells, *(m.cell for m in p.decided))
    jax = sorted(c.devices for c in everything if c.operator == "pmap_grad" and c.adapter == "jax"
                 and c.variant == "eager")
    assert jax == [1, 4]
    refused = [m for m in p.decided if m.cell.adapter == "autograd" and m.cell.operator == "pmap_grad"
               and m.cell.variant == "eager"]  # its `compiled` is refused for want of a compiler
    assert len(refused) == 2 and all(m.status is Status.UNSUPPORTED for m in refused)
    assert all("no multi-device mechanism" in m.message for m in refused)

    def counts(**chosen) -> set[int]:
        p = plan(registry, Selection(adapters=("jax",), problems=("mlp_loss",), variants=("eager",), **chosen))
        return {c.devices for c in (*p.cells, *(m.cell for m in p.decided)) if c.operator == "pmap_grad"}

    assert counts(devices=("cuda",)) == counts(device_counts=(1, 2, 4)) == {1, 2, 4}


def test_only_data_parallel_cells_leave_one_device_in_every_suite(registry):
    for suite in ("full", "adbench"):
        p = plan(registry, Selection(suite=suite, adapters=("jax",)))
        several = {c.operator for c in (*p.cells, *(m.cell for m in p.decided)) if c.devices != 1}
        assert several <= {"pmap_grad"}
    full = plan(registry, Selection(suite="full", adapters=("jax",), problems=("mlp_loss",)))
    grads = {(c.size, c.devices) for c in (*full.cells, *(m.cell for m in full.decided))
             if c.operator == "pmap_grad" and c.dtype == "float32"}
    assert {d for _, d in grads} == {1, 2, 4} and len({s for s, _ in grads}) >= 3


def test_devices_selects_the_counts_of_the_data_parallel_operators_only(registry):
    sel = dict(problems=("mlp_loss",), sizes=("B16-h4",), adapters=("jax",), variants=("eager",))
    p = plan(registry, Selection(**sel, device_counts=(2, 3, 8)))
    assert sorted((c.operator, c.devices) for c in (*p.cells, *(m.cell for m in p.decided))) == [
        ("pmap_grad", 2), ("pmap_grad", 8), ("pmap_value", 2), ("pmap_value", 8)]
    assert any("does not split evenly across 3 devices" in n for n in p.notes)
    p = plan(registry, Selection(**sel, device_counts=(1, 2)))
    one_device = {c.operator for c in (*p.cells, *(m.cell for m in p.decided)) if c.devices == 1}
    assert one_device == {"value", "vjp", "vmap_grad", "pmap_value", "pmap_grad"}


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_bad_device_count_is_a_usage_error(value, capsys):
    assert main(["run", "--adapter", "jax", "--devices", value, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--devices" in err and "1,2,4" in err

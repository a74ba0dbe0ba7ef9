"""JAX's data-parallel mechanisms (issue 26) through `adcompare run`: jax.pmap (eager) and jit(shard_map)
(compiled) on 2 emulated host devices in float64, values checked against an independent recomputation of the whole
batch's mean-loss gradient. D = 4 runs in the conformance suite (tests/test_conformance.py, against the reference)
and in the quick matrix (tests/test_matrix.py: timed, its devices and one worker per device count)."""
from __future__ import annotations

import json

import pytest

from tests.per_adapter import skip_unless_installed

skip_unless_installed("jax", module=True)

from adcompare.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("pmap") / "pmap.jsonl"
    code = main(["run", "--problem", "mlp_loss", "--size", "B16-h4", "--operator", "pmap_grad,pmap_value",
                 "--adapter", "jax,autograd", "--devices", "2", "--dtype", "float64", "--no-progress",
                 "-o", str(out)])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return [r for r in lines if r.get("record") == "cell"], [r for r in lines if r.get("record") == "worker"]


def test_pmap_and_shard_map_gradients_are_the_whole_batch_gradient(records, whole_batch):
    cells, _ = records
    projection = whole_batch.projection(whole_batch.gradient("B16-h4"))
    grads = [r for r in cells if r["cell"]["adapter"] == "jax" and r["cell"]["operator"] == "pmap_grad"]
    assert sorted((r["cell"]["variant"], r["cell"]["devices"]) for r in grads) == [("compiled", 2), ("eager", 2)]
    for r in grads:
        whole_batch.assert_gradient_record(r, projection)
        mechanism = "jax.pmap" if r["cell"]["variant"] == "eager" else "jax.shard_map"
        assert mechanism in r["algorithm"] and r["algorithm"].endswith(f"over {r['cell']['devices']} devices")
        assert f"{r['cell']['devices']} emulated host devices" in r["details"]["device_setup"]


def test_per_example_values_over_devices(records, whole_batch):
    cells, _ = records
    projection = whole_batch.projection(whole_batch.values("B16-h4"))
    rows = [r for r in cells if r["cell"]["adapter"] == "jax" and r["cell"]["operator"] == "pmap_value"]
    assert len(rows) == 2
    for r in rows:
        assert r["status"] == "ok" and r["check"]["projection"] == pytest.approx(projection, rel=1e-12)


def test_one_worker_and_autograd_says_why(records):
    cells, workers = records
    assert sorted(w["devices"] for w in workers if w["adapter"] == "jax") == [2]
    refused = [r for r in cells if r["cell"]["adapter"] == "autograd"]
    assert refused and all(r["status"] == "unsupported" for r in refused)
    assert any("no multi-device mechanism" in r["message"] for r in refused)


def test_more_devices_than_the_worker_has_is_unsupported(registry):
    """In-process (one host device here unless XLA_FLAGS says more): a 64-device request is refused, not crashed."""
    from adcompare.model.cell import Cell
    from adcompare.model.status import Status
    from adcompare.run.in_process import ExecutionOptions, run_cell

    adapter = registry.adapter("jax")
    adapter.setup(dtype="float32", device="cpu", threads=1)
    cell = Cell("mlp_loss", "B128-h4", "pmap_grad", "jax", "eager", "cpu", "float32", devices=64)
    m = run_cell(adapter, registry.problem("mlp_loss"), cell, ExecutionOptions(time=False))
    assert m.status is Status.UNSUPPORTED and "64 cpu devices" in m.message

"""TensorFlow's data-parallel mechanism (issue 26) through `adcompare run`: tf.distribute.MirroredStrategy over 2
logical CPU devices in float64, eager, graph and compiled, values checked against an independent recomputation of
the whole batch's mean-loss gradient and of the per-example values. D = 4 runs in the conformance suite
(tests/test_conformance.py, against the reference) and in the quick matrix (tests/test_matrix.py: timed, its
replicas on distinct devices and one worker per device count)."""
from __future__ import annotations

import json

import pytest

from tests.per_adapter import skip_unless_installed

skip_unless_installed("tensorflow", module=True)

from adcompare.cli.main import main  # noqa: E402

SIZE = "B16-h4"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("tf_pmap") / "pmap.jsonl"
    code = main(["run", "--problem", "mlp_loss", "--size", SIZE, "--operator", "pmap_grad,pmap_value",
                 "--adapter", "tensorflow", "--devices", "2", "--dtype", "float64", "--no-progress",
                 "-o", str(out)])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return [r for r in lines if r.get("record") == "cell"], [r for r in lines if r.get("record") == "worker"]


def test_mirrored_strategy_gradient_is_the_whole_batch_gradient(records, whole_batch):
    cells, _ = records
    projection = whole_batch.projection(whole_batch.gradient(SIZE))
    grads = [r for r in cells if r["cell"]["operator"] == "pmap_grad"]
    assert sorted((r["cell"]["variant"], r["cell"]["devices"]) for r in grads) == [
        ("compiled", 2), ("eager", 2), ("graph", 2)]
    for r in grads:
        devices = whole_batch.assert_gradient_record(r, projection)
        assert r["algorithm"].startswith("tf.distribute.MirroredStrategy")
        assert "strategy.reduce(MEAN)" in r["algorithm"] and r["algorithm"].endswith(f"over {devices} devices")
        assert ("jit_compile" in r["algorithm"]) == (r["cell"]["variant"] == "compiled")
        assert f"{devices} logical CPU devices" in r["details"]["device_setup"]
        # the replicas really are D distinct devices, not D copies on CPU:0
        assert r["details"]["replicas"] == devices
        assert len(set(r["details"]["replica_devices"])) == devices


def test_per_example_values_over_devices(records, whole_batch):
    cells, _ = records
    projection = whole_batch.projection(whole_batch.values(SIZE))
    rows = [r for r in cells if r["cell"]["operator"] == "pmap_value"]
    assert len(rows) == 3
    for r in rows:
        assert r["status"] == "ok", r["message"]
        assert r["check"]["projection"] == pytest.approx(projection, rel=1e-12)
        assert "strategy.gather" in r["algorithm"]


def test_one_worker(records):
    _, workers = records
    assert sorted(w["devices"] for w in workers) == [2]


def test_more_devices_than_the_worker_has_is_unsupported(registry):
    """In-process, without logical devices configured: TensorFlow sees one CPU device, so 8 are refused."""
    from adcompare.model.cell import Cell
    from adcompare.model.status import Status
    from adcompare.run.in_process import ExecutionOptions, run_cell

    adapter = registry.adapter("tensorflow")
    adapter.setup(dtype="float32", device="cpu", threads=1)
    cell = Cell("mlp_loss", "B16-h4", "pmap_grad", "tensorflow", "graph", "cpu", "float32", devices=8)
    m = run_cell(adapter, registry.problem("mlp_loss"), cell, ExecutionOptions(time=False))
    assert m.status is Status.UNSUPPORTED and "8 cpu devices" in m.message

"""torch's data-parallel mechanism (issue 26): a torch.distributed gloo process group of D processes (the worker as
rank 0, D − 1 spawned helpers), through `adcompare run`'s worker at D = 1 and 2 in float64 — one worker for both
counts, which torch sets up per cell (Registry.worker_key) — values checked against an independent recomputation of
the whole batch's mean-loss gradient and of the per-example values; and no helper process outlives its cell (D = 2
in-process), nor a worker killed mid-cell. D = 4 through a worker runs in the conformance suite
(tests/test_conformance.py: the same float64 cells, against the reference) and in the quick matrix
(tests/test_matrix.py: timed, D distinct processes, D = 2 and 4 in one worker)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.per_adapter import skip_unless_installed

skip_unless_installed("torch", module=True)

from adcompare.cli.main import main  # noqa: E402
from adcompare.model.cell import Cell  # noqa: E402
from adcompare.model.status import Status  # noqa: E402
from adcompare.run.in_process import ExecutionOptions, run_cell  # noqa: E402

SIZE = "B16-h4"


def _gone(pid: int) -> bool:
    """No such process, or (pid reused) not one of ours: a helper's command line names multiprocessing."""
    try:
        return b"multiprocessing" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.fixture(scope="module")
def run_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_pmap") / "pmap.jsonl"
    code = main(["run", "--problem", "mlp_loss", "--size", SIZE, "--operator", "pmap_grad,pmap_value",
                 "--adapter", "torch", "--devices", "1,2", "--dtype", "float64", "--no-progress", "-o", str(out)])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return [r for r in lines if r.get("record") == "cell"], [r for r in lines if r.get("record") == "worker"]


@pytest.fixture(scope="module")
def records(run_records):
    """The cells at D = 2 (those at D = 1 are for the worker test below)."""
    return [r for r in run_records[0] if r["cell"].get("devices", 1) == 2]


def test_every_device_count_runs_in_the_one_worker_started_for_its_first_cells(run_records):
    """torch needs nothing set before its import (each cell starts its own gloo group), so its D = 1 and D = 2
    cells run in one worker, started once, for D = 1 (Registry.worker_key): no worker start-up for one count's
    cells, which was the report's last cell over the harness goal (issue 39)."""
    cells, workers = run_records
    ran = [r for r in cells if r["status"] == "ok"]
    assert sorted(r["cell"].get("devices", 1) for r in ran) == [1, 1, 2, 2]
    assert len(workers) == 1 and workers[0].get("devices", 1) == 1
    assert {r["details"]["rank0_pid"] for r in ran} == {workers[0]["pid"]}
    assert {r["details"]["world_size"] for r in ran if r["cell"].get("devices", 1) == 1} == {1}
    assert [r["details"]["device_setup"] for r in ran if r["cell"].get("devices", 1) == 1] == \
        ["one cpu device: the batch is not split"] * 2


def test_gloo_group_gradient_is_the_whole_batch_gradient(records, whole_batch):
    projection = whole_batch.projection(whole_batch.gradient(SIZE))
    grads = [r for r in records if r["cell"]["operator"] == "pmap_grad" and r["cell"]["variant"] == "eager"]
    assert sorted(r["cell"]["devices"] for r in grads) == [2]
    for r in grads:
        devices = whole_batch.assert_gradient_record(r, projection)
        assert r["algorithm"].startswith("torch.distributed gloo process group of D processes")
        assert "all_reduce(SUM)/D" in r["algorithm"] and r["algorithm"].endswith(f"over {devices} devices")
        assert f"{devices} CPU processes" in r["details"]["device_setup"]
        # D distinct processes really joined the group: the worker and D − 1 helpers
        assert r["details"]["world_size"] == devices and r["details"]["backend"] == "gloo"
        assert len(set(r["details"]["helper_pids"]) | {r["details"]["rank0_pid"]}) == devices
        assert r["details"]["init_method"].startswith("tcp://127.0.0.1:")


def test_per_example_values_over_processes(records, whole_batch):
    projection = whole_batch.projection(whole_batch.values(SIZE))
    rows = [r for r in records if r["cell"]["operator"] == "pmap_value" and r["cell"]["variant"] == "eager"]
    assert sorted(r["cell"]["devices"] for r in rows) == [2]
    for r in rows:
        assert r["status"] == "ok", r["message"]
        assert r["check"]["projection"] == pytest.approx(projection, rel=1e-12)
        assert "all_gather" in r["algorithm"]


def test_other_variants_are_unsupported_with_the_reason(records):
    others = [r for r in records if r["cell"]["variant"] != "eager"]
    assert {r["cell"]["variant"] for r in others} == {"compiled", "eager-autograd"}
    for r in others:
        assert r["status"] == "unsupported" and "use variant 'eager'" in r["message"]


def test_no_helper_outlives_the_run(records):
    pids = [pid for r in records if r["status"] == "ok" for pid in r["details"]["helper_pids"]]
    assert len(pids) == 2 * 1  # pmap_grad and pmap_value at D = 2
    assert all(_gone(pid) for pid in pids)


def test_closing_the_cell_stops_its_helpers_in_process(registry, monkeypatch):
    """run_cell releases the prepared cell (Prepared.close): its helpers are joined before it returns. A batch
    that does not split by D, or more processes than the worker was started for, is refused with the reason."""
    adapter = registry.adapter("torch")
    monkeypatch.setattr(adapter, "host_processes", 4)  # what emulate_host_devices(4) sets in a worker
    adapter.setup(dtype="float32", device="cpu", threads=1)

    def cell(devices: int) -> Cell:
        return Cell("mlp_loss", SIZE, "pmap_grad", "torch", "eager", "cpu", "float32", devices=devices)

    # D = 2: one helper proves the join as well as three would (each helper costs a torch import, ~3 s here)
    m = run_cell(adapter, registry.problem("mlp_loss"), cell(2), ExecutionOptions(time=False))
    assert m.status is Status.OK, m.message
    assert len(m.details["helper_pids"]) == 1 and all(_gone(pid) for pid in m.details["helper_pids"])
    uneven = run_cell(adapter, registry.problem("mlp_loss"), cell(3), ExecutionOptions(time=False))
    assert uneven.status is Status.UNSUPPORTED and "does not split evenly across 3" in uneven.message
    more = run_cell(adapter, registry.problem("mlp_loss"), cell(8), ExecutionOptions(time=False))
    assert more.status is Status.UNSUPPORTED and "8 cpu devices" in more.message


def test_helpers_die_with_a_killed_worker(tmp_path):
    """SIGKILL the process holding a prepared D = 2 group: PR_SET_PDEATHSIG takes its helper down too."""
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from adcompare.plugin import registry as plugins
        from adcompare.plugin.adapter import Request
        from adcompare.verify.cell_inputs import cell_inputs

        if __name__ == "__main__":
            registry = plugins.load(())
            adapter, problem = registry.adapter("torch"), registry.problem("mlp_loss")
            adapter.emulate_host_devices(2)
            adapter.setup(dtype="float32", device="cpu", threads=1)
            inputs = cell_inputs(problem, problem.size("B16-h4"), "pmap_grad", "float32")
            prepared = adapter.prepare(Request(problem, "pmap_grad", "eager", "cpu", "float32", inputs, devices=2))
            print(*prepared.details["helper_pids"], flush=True)
            time.sleep(600)
    """))
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in holder.stdout.readline().split()]
        assert len(pids) == 1 and not any(_gone(pid) for pid in pids)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(60)
    deadline = time.monotonic() + 60  # a safety net: the kernel signals them at once
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in pids)

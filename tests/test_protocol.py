"""The parent↔worker messages (protocol.py) read back what they write, and stay readable across adcompare versions."""
from __future__ import annotations

import json

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run.protocol import RESTART, CellRecord, Progress, Request, WorkerInfo, line

CELL = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float64")


def test_a_request_sends_only_the_timing_settings_that_differ_from_the_defaults():
    assert Request(CELL).to_json()["policy"] == {}  # what an older worker in another environment reads
    quick = Request(CELL, time=False, policy=TimingPolicy(min_time=0.01, min_samples=3))
    sent = json.loads(line(quick))
    assert sent["policy"] == {"min_time": 0.01, "min_samples": 3} and sent["time"] is False
    assert Request.from_json(sent) == quick


def test_the_worker_record_round_trips_and_keeps_fields_it_does_not_know():
    sent = {"record": "worker", "adapter": "jax", "dtype": "float64", "device": "cpu", "device_name": "cpu",
            "threads": 2, "pid": 7, "startup_seconds": 1.5, "versions": {"jax": "0.4.30"}, "unavailable": None,
            "from_a_newer_adcompare": 1}
    info = WorkerInfo.from_json(sent)
    assert info.versions == {"jax": "0.4.30"} and info.extra == {"from_a_newer_adcompare": 1}
    assert info.to_json() == sent and list(info.to_json()) == list(sent)  # the results file's worker record as sent


def test_a_cell_record_carries_the_restart_reason_in_the_measurement_details():
    failed = Measurement(CELL, Status.FAILED, "boom")
    sent = CellRecord(failed, restart="the device is lost").to_json()
    assert sent["record"] == "cell" and sent["details"][RESTART] == "the device is lost"
    back = CellRecord.from_json(sent)
    assert back.restart == "the device is lost" and back.measurement.message == "boom"
    assert CellRecord.from_json(CellRecord(failed).to_json()).restart is None


def test_progress_and_a_request_with_its_timeout_round_trip():
    """Issue 39: a request carries the cell's timeout and asks for progress; progress reports carry the
    measurement so far and each timed call, so the parent can keep them when the timeout stops the worker."""
    cell = CELL
    request = Request(cell, timeout=60.0, progress=True)
    assert Request.from_json(json.loads(line(request))) == request
    assert "timeout" not in Request(cell).to_json() and "progress" not in Request(cell).to_json()
    checked = Progress(Progress.CHECKED, 0.5, measurement=Measurement(cell, Status.OK, details={"a": 1}),
                       compile_seconds=1.5, compile_method="ahead of time: jit")
    back = Progress.from_json(json.loads(line(checked)))
    assert back.measurement is not None and back.measurement.details == {"a": 1} and back.seconds == 0.5
    assert (back.compile_seconds, back.compile_method) == (1.5, "ahead of time: jit")
    call = Progress(Progress.CALL, 0.3, 0.29)
    assert Progress.from_json(json.loads(line(call))) == call

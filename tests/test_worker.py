"""Faults that must be survived: each costs one cell, every finished cell is kept, nothing is duplicated."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from adcompare.model.cell import Cell
from adcompare.model.measurement import CELL_TIMEOUT, UNFINISHED_CALL
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run import runner
from adcompare.store.results import load
from adcompare.study.plan import Plan

from .recording import Recording

QUICK = TimingPolicy(min_time=0.01, max_time=0.1, warmup_time=0.0, min_samples=3)


def _run(registry, cells, timeout=60.0, time_it=True):
    p = Plan(tuple(cells), ())
    seen = Recording()
    out = runner.run(registry, p, runner.RunOptions(timeout=timeout, threads=1, policy=QUICK, time_it=time_it),
                     observer=seen)
    assert [m.cell for m in seen.cells] == list(cells)  # recorded as they finish, once each
    got = {m.cell: m for m in out}
    assert len(got) == len(cells)  # one measurement per cell, none keyed over another
    return got


def _cell(problem, size="n3", op="value", dtype="float64", adapter="jax"):
    return Cell(problem, size, op, adapter, "eager", "cpu", dtype)


def test_crashes_timeouts_nan_and_errors_each_cost_one_cell(fault_registry):
    compiled_fine = Cell("fine", "n3", "value", "jax", "compiled", "cpu", "float64")
    cells = [_cell("segfaults"), _cell("fine"), _cell("sigkilled"), _cell("raises"), _cell("makes_nan"),
             _cell("sleeps"), _cell("sleeps", "n4"), compiled_fine]
    # The timeout stops `sleeps` (60 s) and is a safety net for the other cells: 10× their ~0.5 s.
    got = _run(fault_registry, cells, timeout=5.0)
    assert got[_cell("segfaults")].status is Status.CRASHED and "SIGSEGV" in got[_cell("segfaults")].message
    assert got[_cell("sigkilled")].status is Status.CRASHED and "SIGKILL" in got[_cell("sigkilled")].message
    assert "out-of-memory killer" in got[_cell("sigkilled")].message  # a SIGKILL adcompare did not send
    assert "out-of-memory" not in got[_cell("segfaults")].message
    assert got[_cell("raises")].status is Status.FAILED
    assert "deliberate failure inside the problem" in got[_cell("raises")].message
    assert got[_cell("makes_nan")].status is Status.NAN
    assert got[_cell("sleeps")].status is Status.TIMEOUT and "5 s cell timeout" in got[_cell("sleeps")].message
    skipped = got[_cell("sleeps", "n4")]
    assert skipped.status is Status.SKIPPED and "n3 timed out" in skipped.message
    for fine in (_cell("fine"), compiled_fine):  # the eager cell after a crash and the compiled one after a timeout
        assert got[fine].status is Status.OK and got[fine].timing.median > 0, got[fine].message
        # Issue 39: the worker's own seconds by stage, which with the framework's fit in the cell's wall time
        t, details = got[fine].timing, got[fine].details
        overhead = details["overhead_seconds"]
        assert set(overhead) == {"inputs", "setup", "reference", "check", "timing_loop", "cleanup"}
        assert all(v >= 0 for v in overhead.values()) and 0 < t.call_seconds <= t.total_seconds
        assert overhead["timing_loop"] == pytest.approx(t.total_seconds - t.call_seconds, abs=1e-3)
        inside = sum(overhead.values()) + details["prepare_seconds"] + t.first_call + t.call_seconds
        assert inside <= details["wall_seconds"] + 1e-3


def test_small_cell_after_a_big_one_reports_its_own_peak(fault_registry):
    """Check mode (no timing): the peak is reset before each cell's first call either way, and timing `big` would
    repeat its 1 GB allocation for nothing this test asserts."""
    got = _run(fault_registry, [_cell("big"), _cell("fine")], time_it=False)
    big, fine = got[_cell("big")], got[_cell("fine")]
    assert big.status is Status.OK and fine.status is Status.OK
    assert big.host_peak_bytes > 900e6
    assert fine.host_peak_bytes < big.host_peak_bytes / 2


def test_dtypes_run_in_separate_workers_and_keep_their_dtype(registry):
    cells = [Cell("exp_dot_loss", "n10", "grad", "jax", v, "cpu", d)
             for d in ("float32", "float64") for v in ("eager", "compiled")]
    seen = Recording()
    p = Plan(tuple(cells), ())
    out = runner.run(registry, p, runner.RunOptions(threads=1, policy=QUICK), observer=seen)
    workers = seen.workers
    assert sorted(w["dtype"] for w in workers) == ["float32", "float64"]
    assert len({w["pid"] for w in workers}) == 2
    for m in out:
        assert m.status is Status.OK, m.message
        assert m.check.output_dtype == m.cell.dtype and not m.check.dtype_drift


def test_killed_run_resumes_without_losing_or_duplicating_cells(tmp_path):
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "adcompare", "run", "--adapter", "jax", "--problem", "f_r2_r3",
           "--variant", "eager", "--dtype", "float32", "--suite", "full", "--threads", "1", "--no-progress",
           "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count('"record": "cell"') >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = out.read_text().count('"record": "cell"')
    assert before >= 2
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:] if line.strip()]
    keys = [r["key"] for r in lines if r.get("record") == "cell"]
    assert len(keys) == len(set(keys)) == len(load([out]).measurements)
    assert len(keys) > before


def test_a_failure_that_poisons_the_process_costs_one_cell():
    """Like a sticky CUDA error: the worker exits after the failed cell's record and the next cell gets a fresh
    one (without it, `after_poison` fails in the poisoned process)."""
    from adcompare.plugin import registry as plugins

    from .conftest import FIXTURES

    registry = plugins.load((str(FIXTURES / "plugins" / "sticky.py"),))
    cells = [Cell(p, "n3", "value", "sticky", "eager", "cpu", "float64") for p in ("poisons", "after_poison")]
    poisons, after = (_run(registry, cells)[c] for c in cells)
    assert poisons.status is Status.FAILED
    assert "poisons this process" in poisons.details["worker_restarted"]
    assert after.status is Status.OK, after.message


def test_workers_on_the_cpu_go_on_after_a_failure(registry):
    from adcompare.plugin.adapter import Adapter

    assert Adapter.unusable_after_failure(registry.adapter("jax"), "cpu") is None
    assert "error state" in Adapter.unusable_after_failure(registry.adapter("jax"), "cuda")


def test_a_killed_run_takes_its_worker_with_it(tmp_path):
    """A worker in the middle of a long cell dies with the `adcompare run` that started it, instead of computing
    on (it has its own session, so killing the run's process group does not reach it)."""
    from .conftest import FIXTURES

    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "adcompare", "run", "--plugin", str(FIXTURES / "plugins" / "faults.py"),
           "--problem", "sleeps", "--size", "n3", "--adapter", "jax", "--variant", "eager", "--dtype", "float64",
           "--no-progress", "-o", str(out)]
    marker = tmp_path / "asleep"
    run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                           env={**os.environ, "SLEEPS_MARKER": str(marker)})
    deadline = time.monotonic() + 120  # a safety net: the worker reaches the cell within seconds
    while not marker.exists() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), "the worker never reached the sleeping cell"
    found = subprocess.run(["pgrep", "-P", str(run.pid), "-f", "adcompare.worker"], capture_output=True,
                           text=True).stdout.split()
    assert len(found) == 1, found
    worker = int(found[0])
    os.killpg(run.pid, signal.SIGKILL)  # the run's group, as a terminal's Ctrl-\\ or a scheduler would
    run.wait()
    deadline = time.monotonic() + 30  # the kernel kills it at once; the `sleeps` cell would hold it for 60 s
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{worker}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):  # dead, not yet reaped by whoever inherited it
            return
        time.sleep(0.05)
    raise AssertionError(f"worker {worker} outlived its run")


def test_slow_calls_are_timed_from_what_the_timeout_affords_and_a_timeout_keeps_the_finished_calls(fault_registry):
    """Issue 39: a cell whose calls exceed the block allotment is timed without a warm-up, one call per block, until
    its next call would end past its timeout (n3); a worker stopped by the timeout keeps the calls it reported as a
    measurement with few samples (n4), or, when only the first call finished, that checked first call as its one
    sample (n5: an eager call, nothing compiled in it). The timeout stops 60 s sleeps (10× and more what it
    guards); the 0.4 s calls are sleeps, not CPU."""
    policy = TimingPolicy(min_time=0.01, max_time=0.1, warmup_time=0.0, min_samples=30)  # 30 never fit in 4 s
    cells = [_cell("slow_calls", size, adapter="autograd") for size in ("n3", "n4", "n5")]  # workers start in 0.1 s
    options = runner.RunOptions(timeout=4.0, threads=1, policy=policy)
    got = {m.cell.size: m for m in runner.run(fault_registry, Plan(tuple(cells), ()), options)}
    deadline, kept = got["n3"], got["n4"]
    # A cell its timeout stopped skips its family's larger sizes, as a timeout does: each would spend its timeout.
    assert got["n5"].status is Status.SKIPPED and "the smaller size n4 reached its timeout (1 call measured)" in \
        got["n5"].message  # not 'timed out': n4 is measured (it said so of ADBench's lstm l2 grad, ok in 39 s)
    (bound,) = runner.run(fault_registry, Plan((cells[2],), ()), options)
    assert deadline.status is Status.OK and deadline.timing.stopped == "deadline", deadline.message
    t = deadline.timing
    assert t.warmup_calls == 0 and t.number == 1 and 2 <= len(t.samples) < 30
    assert all(0.4 <= s < 4.0 for s in t.samples) and t.first_call >= 0.4
    assert kept.status is Status.OK and kept.timing.stopped == "cell timeout"
    assert len(kept.timing.samples) == 1 and 0.4 <= kept.timing.samples[0] < 4.0 and kept.timing.few_samples
    assert kept.check is not None and "1 timed call before the 4 s cell timeout" in kept.message
    assert bound.status is Status.OK and bound.check is not None and bound.timing.stopped == "cell timeout"
    assert bound.timing.samples == (bound.timing.first_call,) and 0.4 <= bound.timing.first_call < 4.0
    assert "its checked first call is its one sample" in bound.message


def test_a_first_call_that_leaves_no_room_for_another_is_the_one_sample(fault_registry):
    """A slow eager cell whose checked first call took most of its timeout is not called again (the call would be
    stopped at the timeout): the first call is its one sample, marked "first call only", and its family's larger
    sizes are skipped as after a timeout. The 5 s timeout stops the 60 s sleep a second call would make; the
    2.1 s first call leaves 2.9 s of it for the cell's other stages, even on a busy machine."""
    policy = TimingPolicy(min_time=0.01, max_time=0.1, warmup_time=0.0, min_samples=30)
    cell = _cell("one_slow_call", "n3", adapter="autograd")
    (m,) = runner.run(fault_registry, Plan((cell,), ()), runner.RunOptions(timeout=5.0, threads=1, policy=policy))
    assert m.status is Status.OK and m.check is not None, m.message
    assert m.timing.stopped == "first call only" and m.timing.samples == (m.timing.first_call,)
    assert 2.1 <= m.timing.first_call < 5.0 and m.timing.few_samples


def test_a_compiled_first_call_is_no_sample_and_the_cell_stays_a_timeout():
    """Where the first call compiled (not ahead of time), it is no sample: a worker stopped before any timed call
    finished leaves a timeout with the first call and the lower bound (worker_handle.kept)."""
    from adcompare.model.measurement import Measurement
    from adcompare.run.protocol import Progress
    from adcompare.run.worker_handle import kept

    cell = _cell("slow_calls", "n5", adapter="torch")
    compiled = Measurement(replace(cell, variant="compiled"), Status.OK)
    eager = Measurement(cell, Status.OK)
    for m, sample in ((compiled, False), (eager, True)):
        progress = [(0.0, Progress(Progress.STARTED)), (1.0, Progress(Progress.CALLED, 1.0)),
                    (1.1, Progress(Progress.CHECKED, 1.0, measurement=m))]
        out = kept(m.cell, progress, 4.0, 4.0)
        assert (out.status is Status.OK) == sample, out.message
        if not sample:
            assert out.timing is None and out.details["first_call_seconds"] == 1.0
            assert out.details["lower_bound_seconds"] == pytest.approx(2.9)
        else:  # the next call ran from the CHECKED report to the stop: the framework's, for the harness's cost
            assert out.details[UNFINISHED_CALL] == pytest.approx(2.9)


def test_the_call_a_timeout_stopped_is_kept_as_the_frameworks_seconds():
    """A cell its timeout stopped after two timed calls keeps them, and how long the third had run when the worker
    was stopped: from the last call's report to the stop (1.5 s here), never the harness's own cost."""
    from adcompare.model.measurement import Measurement
    from adcompare.run.protocol import Progress
    from adcompare.run.worker_handle import kept

    m = Measurement(_cell("slow_calls", "n5", adapter="torch"), Status.OK)
    progress = [(0.0, Progress(Progress.STARTED)), (1.0, Progress(Progress.CALLED, 1.0)),
                (1.1, Progress(Progress.CHECKED, 1.0, measurement=m)), (2.0, Progress(Progress.CALL, 0.9, 0.9)),
                (2.5, Progress(Progress.CALL, 0.5, 0.5))]
    out = kept(m.cell, progress, 4.0, 4.0)
    assert out.status is Status.OK and out.timing.samples == (0.9, 0.5) and out.timing.stopped == CELL_TIMEOUT
    assert out.details[UNFINISHED_CALL] == pytest.approx(1.5)


def test_a_cells_own_timeout_is_its_deadline_and_the_others_keep_the_runs(fault_registry):
    """Issue 40 item 4: RunOptions.timeouts (the plan's per-cell timeouts: the nested evals') is the deadline the
    worker times a slow cell against. 30 calls of 0.4 s fit in the run's 60 s timeout but not in the cell's own
    4 s, so the cell stops at its deadline; the same cell without an own timeout is not stopped."""
    policy = TimingPolicy(min_time=0.01, max_time=0.1, warmup_time=0.0, min_samples=30)
    own, other = _cell("slow_calls", "n3", adapter="autograd"), _cell("slow_calls", "n3", "value", "float32")
    options = runner.RunOptions(timeout=60.0, threads=1, policy=policy, timeouts={own.key: 4.0})
    assert (options.cell_timeout(own), options.cell_timeout(other)) == (4.0, 60.0)
    (m,) = runner.run(fault_registry, Plan((own,), ()), options)
    assert m.status is Status.OK and m.timing.stopped == "deadline" and 2 <= len(m.timing.samples) < 30, m.message


def test_a_workers_start_up_is_what_the_parent_waited_for_it(monkeypatch):
    """The start-up the records keep (and the harness's cost charges to worker_start) runs from the launch to the
    worker's first record, as the parent waits: the interpreter's launch and imports that come before the worker's
    own clock starts were charged to its first cell's wall time before. The parent's interval holds the worker's
    own (which the worker sends), whatever the machine's load."""
    from adcompare.run import worker_handle

    own: list[float] = []
    read = worker_handle.WorkerInfo.from_json
    monkeypatch.setattr(worker_handle.WorkerInfo, "from_json",
                        lambda data: own.append(float(data["startup_seconds"])) or read(data))
    with worker_handle.WorkerProcess("autograd", "float64", "cpu", 1) as worker:
        began = time.perf_counter()
        info = worker.start()
        waited = time.perf_counter() - began
        assert own and own[0] < info.startup_seconds <= waited


def test_two_groups_workers_start_together_and_each_start_is_reported_with_its_first_cell(fault_registry,
                                                                                          monkeypatch):
    """Outside a --max-time run the CPU workers of two groups in a row start side by side (start_together), before
    either group's cells: each start is still reported once, with its worker's first cell, and that cell's wall time
    keeps the framework's seconds (the start it did not wait for is not taken out of it)."""
    together: list[list[str]] = []
    real = runner.start_together
    monkeypatch.setattr(runner, "start_together",
                        lambda workers: together.append([w.dtype for w in workers]) or real(workers))
    cells = [_cell("fine"), replace(_cell("fine"), variant="compiled"), _cell("fine", dtype="float32")]
    seen = Recording()
    out = runner.run(fault_registry, Plan(tuple(cells), ()), runner.RunOptions(timeout=60.0, threads=1, policy=QUICK),
                     observer=seen)
    assert together == [["float64", "float32"]]
    assert [w["dtype"] for w in seen.workers] == ["float64", "float32"]
    assert seen.workers[0]["pid"] != seen.workers[1]["pid"]
    first64, second64, first32 = out
    assert all(m.status is Status.OK for m in out), [m.message for m in out]
    # each first cell is charged its worker's part of the wall time the two starts took together: at most its own
    for first, info in ((first64, seen.workers[0]), (first32, seen.workers[1])):
        assert 0 < first.details["worker_start_seconds"] <= info["startup_seconds"] + 1e-4
    assert "worker_start_seconds" not in second64.details
    for m in out:
        framework = m.details.get("prepare_seconds", 0) + m.timing.first_call + m.timing.call_seconds
        assert m.details["wall_seconds"] >= framework


def test_a_worker_that_cannot_start_together_is_left_for_its_first_cell_to_report():
    """One that fails beside another: the other is charged at most its own start-up (the failure's wait is not
    its), and the failure reaches the first cell without a second launch."""
    from adcompare.run.worker_handle import WorkerProcess, start_together

    with WorkerProcess("autograd", "float64", "cpu", 1) as good, \
            WorkerProcess("no_such_adapter", "float64", "cpu", 1) as bad:
        start_together([good, bad])
        assert good.alive and good.start_share is not None and good.starts == 1
        assert 0 < good.start_share <= good.info.startup_seconds
        assert not bad.alive and bad.start_share is None and bad.info is None
        with pytest.raises(RuntimeError, match="no_such_adapter/float64/cpu failed to start"):  # runner: crashed
            bad.run(_cell("fine", adapter="no_such_adapter"), timeout=60.0)
        assert bad.starts == 1  # told, not launched again


def test_a_worker_that_died_idle_is_started_afresh_and_leaves_no_descriptor_behind():
    from adcompare.run.worker_handle import WorkerProcess, start_together

    before = len(os.listdir("/proc/self/fd"))
    with WorkerProcess("autograd", "float64", "cpu", 1) as one, WorkerProcess("autograd", "float32", "cpu", 1) as two:
        start_together([one, two])
        os.killpg(one._proc.pid, signal.SIGKILL)  # e.g. the OOM killer, while another group's cells ran
        one._proc.wait()
        m = one.run(_cell("exp_dot_loss", "n10", adapter="autograd"), timeout=60.0, policy=QUICK)
        assert m.status is Status.OK and one.starts == 2, m.message
    assert len(os.listdir("/proc/self/fd")) == before


def test_workers_start_two_at_a_time_one_adapters_together_and_no_group_alone():
    distinct = [[list(b) for b in runner.start_batches("abcdefg"[:n])] for n in range(1, 8)]
    assert distinct == [[[0]], [[0, 1]], [[0, 1, 2]], [[0, 1], [2, 3]], [[0, 1], [2, 3, 4]],
                        [[0, 1], [2, 3], [4, 5]], [[0, 1], [2, 3], [4, 5, 6]]]
    # the report's quick suite: autograd, JAX and JAX on 4 devices, TensorFlow's two, torch's two
    quick = ["autograd", "jax", "jax", "tensorflow", "tensorflow", "torch", "torch"]
    assert [list(b) for b in runner.start_batches(quick)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert {kinds: [list(b) for b in runner.start_batches(kinds)] for kinds in ("aaab", "abbc", "abbbc")} == {
        "aaab": [[0, 1], [2, 3]], "abbc": [[0, 1], [2, 3]], "abbbc": [[0, 1, 2], [3, 4]]}
    for n in range(2, 9):  # every sequence of three adapters: each group once, in order, in twos and threes
        for kinds in itertools.product("abc", repeat=n):
            batches = runner.start_batches(kinds)
            assert [i for b in batches for i in b] == list(range(n)) and {len(b) for b in batches} <= {2, 3}


def test_a_groups_cells_known_to_end_its_worker_run_last(registry):
    """A cell known to fail (torch's compiled control_loop: data-dependent control flow, after which a torch
    worker restarts), crash (torch's compiled forward mode on the CPU) or time out costs a fresh worker for the
    next cell: those run after the others, each part in plan order. A failure that leaves the worker usable
    (autograd's control_loop on the CPU) keeps its place."""
    def cell(problem, op, variant, adapter="torch"):
        return Cell(problem, "n100", op, adapter, variant, "cpu", "float32")
    cells = [cell("control_loop", "grad", "compiled"), cell("exp_dot_loss", "jacfwd", "compiled"),
             cell("exp_dot_loss", "grad", "compiled"), cell("control_loop", "grad", "eager"),
             cell("exp_dot_loss", "grad", "eager")]
    assert runner.failures_last(registry, cells) == [cells[2], cells[3], cells[4], cells[0], cells[1]]
    autograd = [cell("control_loop", "grad", "eager", "autograd"), cell("exp_dot_loss", "grad", "eager", "autograd")]
    assert runner.failures_last(registry, autograd) == autograd


def test_the_workers_collection_after_a_cell_is_that_cells_cleanup():
    """The worker collects (and freezes) after each cell, before its record is sent: seconds of the harness, added
    to a stage of the cell's split (cleanup) rather than left to "other"; a record without the split is left as
    it is."""
    from adcompare.model.measurement import Measurement
    from adcompare.worker import with_stage

    cell = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float64")
    m = Measurement(cell, Status.OK, details={"overhead_seconds": {"inputs": 0.1, "setup": 0.02}, "x": 1})
    assert with_stage(m, "setup", 0.15).details == {"overhead_seconds": {"inputs": 0.1, "setup": 0.17}, "x": 1}
    assert with_stage(m, "cleanup", 0.2).details["overhead_seconds"] == {"inputs": 0.1, "setup": 0.02,
                                                                          "cleanup": 0.2}
    bare = Measurement(cell, Status.FAILED, "adcompare: boom")
    assert with_stage(bare, "setup", 0.15) == bare


def test_a_closed_worker_leaves_without_the_interpreters_teardown(tmp_path, monkeypatch):
    """Its records are all sent when its stdin closes; the teardown of a framework's modules (0.1-0.5 s a worker,
    which the run waits for) is skipped: an atexit handler a plugin registered never runs."""
    from adcompare.run.worker_handle import WorkerProcess

    marker = tmp_path / "teardown-ran"
    plugin = tmp_path / "exit_marker.py"
    plugin.write_text(f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).touch)\n")
    with WorkerProcess("autograd", "float64", "cpu", 1, plugins=(str(plugin),)) as worker:
        m = worker.run(_cell("exp_dot_loss", "n10", adapter="autograd"), timeout=60.0, policy=QUICK)
        assert m.status is Status.OK, m.message
        proc = worker._proc
        worker.close()
    assert proc.returncode == 0 and not marker.exists()

"""The parent's handle on a worker process: start it, send cells, read records, survive its death.

The messages are protocol.py's. A worker that dies mid-cell yields a `crashed` record naming the signal; one that
runs past the cell's timeout is killed, and the cell keeps what the worker reported finishing (`Progress`): the
timed calls of a slow cell as a measurement with few samples (`Timing.stopped` "cell timeout"), else a `timeout`
that says how far it got and a lower bound on the call it was stopped in. Either way the next `run` starts a fresh
worker, so one bad cell costs one cell.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.measurement import CELL_TIMEOUT, UNFINISHED_CALL, Measurement, Timing
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run.protocol import (
    PROGRESS,
    TURN,
    WORKER,
    CellRecord,
    Go,
    Progress,
    Request,
    Turn,
    WorkerInfo,
    line,
)
from adcompare.run.timing import FIRST_CALL_MINUS_STEADY, first_call_is_a_sample
from adcompare.verify import shared_references

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                    "NUMEXPR_NUM_THREADS")


def worker_environment(threads: int, cache_dir: Path | None, share_references: bool = False) -> dict[str, str]:
    """The environment a worker starts with: one thread policy, quiet frameworks, no GPU memory grab; with
    `share_references`, the run's directory of references its workers share (verify/shared_references.py)."""
    env = dict(os.environ)
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    env.update({
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",  # JAX otherwise takes 75% of the GPU at start
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "PYTHONUNBUFFERED": "1",
    })
    if threads == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    if cache_dir is not None:
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir / "inductor"))
    env.pop(shared_references.ENV, None)
    if cache_dir is not None and share_references:
        env[shared_references.ENV] = str(cache_dir / "references")
    return env


# Another environment's Python runs its own adcompare, never a source tree in the working directory, which
# `python -m` would put first on sys.path (`-c` puts it there as '', which this drops; Python 3.10 has no -P).
SAFE_PATH_LAUNCH = ("import runpy, sys; sys.path[:] = [p for p in sys.path if p]; "
                    "runpy.run_module('adcompare.worker', run_name='__main__')")


# A worker killed by a SIGKILL it did not get from adcompare (which kills one only past its cell's timeout, and
# records a timeout): most often the kernel's out-of-memory killer, as for JAX's eager BA value at p = 28,987,644 on
# this project's 24 GB machine (2026-11-28: 24.3 GB resident when killed).
NOT_OUR_SIGKILL = ("not sent by adcompare: on Linux the kernel's out-of-memory killer sends it when memory runs out "
                   "(dmesg names the process); run the cell alone, or on a machine with more memory")


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class WorkerProcess:
    adapter: str
    dtype: str
    device: str
    threads: int
    plugins: tuple[str, ...] = ()
    cache_dir: Path | None = None
    inputs: tuple[str, ...] = ()  # --inputs files and --seed, applied to the worker's problems as in the parent
    seed: int = 0
    startup_timeout: float = 300.0
    interpreter: str | None = None  # the environment's Python (environments.py); None: this interpreter
    devices: int = 1  # devices its cells split across (Cell.devices): the worker sets them up at start
    info: WorkerInfo | None = None  # the worker's first record
    starts: int = 0
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _reader: int | None = field(default=None, repr=False)
    _buffer: bytes = field(default=b"", repr=False)
    _log: Any = field(default=None, repr=False)
    _launched: float = field(default=0.0, repr=False)
    _awaiting: bool = field(default=False, repr=False)  # launched, its first record not read yet
    _start_failure: RuntimeError | None = field(default=None, repr=False)  # met by start_together, not yet told
    # set where start_together started it before its first cell: its part of the wall time of the workers started
    # with it, reported with that cell (runner._recorded), whose wall time the start was not part of
    start_share: float | None = None
    _eof: bool = field(default=False, repr=False)
    _progress: list[tuple[float, Progress]] = field(default_factory=list, repr=False)  # (when received, what)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> WorkerInfo:
        """Launch the worker (unless `launch` did) and wait for its first record; a failure start_together met is
        raised once instead of launching again."""
        if self._start_failure is not None:
            failure, self._start_failure = self._start_failure, None
            raise failure
        if not self._awaiting:
            if self._proc is not None:  # it died idle: release its pipe and log before the next launch
                self.close()
            self.launch()
        record = self._read(max(0.0, self._launched + self.startup_timeout - time.perf_counter()))
        return self._started(record, time.perf_counter())

    def launch(self) -> None:
        """Start the worker's process without waiting for it (start_together starts several at once)."""
        read_fd, write_fd = os.pipe()
        self._log = tempfile.TemporaryFile()
        env = worker_environment(self.threads, self.cache_dir, share_references=not self.interpreter)
        if self.interpreter:
            launch = [self.interpreter, "-c", SAFE_PATH_LAUNCH]
            for name in ("PYTHONPATH", "PYTHONHOME"):  # e.g. an HPC module's site-packages would shadow the env's
                env.pop(name, None)
        else:
            launch = [sys.executable, "-m", "adcompare.worker"]
        cmd = [*launch, "--adapter", self.adapter, "--dtype", self.dtype,
               "--device", self.device, "--threads", str(self.threads), "--result-fd", str(write_fd)]
        for p in self.plugins:
            cmd += ["--plugin", p]
        for path in self.inputs:
            cmd += ["--inputs", path]
        if self.seed:
            cmd += ["--seed", str(self.seed)]
        if self.devices != 1:
            cmd += ["--devices", str(self.devices)]
        self._launched = time.perf_counter()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                      pass_fds=(write_fd,), env=env,
                                      start_new_session=True)
        os.close(write_fd)
        self._reader, self._buffer, self._awaiting = read_fd, b"", True

    def _started(self, record: dict[str, Any] | None, arrived: float) -> WorkerInfo:
        """The launched worker's first record, read at `arrived`; raises RuntimeError when it is none."""
        self.starts += 1
        self._awaiting = False
        if record is None or record.get("record") != WORKER:
            why = self._death_reason()
            self.close()
            where = "" if self.devices == 1 else f" on {self.devices} devices"
            raise RuntimeError(f"worker for {self.adapter}/{self.dtype}/{self.device}{where} failed to start: {why}")
        # The start-up as the parent waits for it: the interpreter's launch and the worker's imports (0.3–0.7 s
        # here) come before the worker's own clock starts, and were charged to the first cell's wall time.
        info = WorkerInfo.from_json(record)
        self.info = replace(info, startup_seconds=max(info.startup_seconds, arrived - self._launched))
        return self.info

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next record, or None on EOF (the worker died: `_eof` is set) or on timeout (it is still running)."""
        self._eof = False
        reader = self._reader
        assert reader is not None, "records are read only from a started worker"
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(reader, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if not sel.select(left):
                    return None
                chunk = os.read(reader, 1 << 16)
                if not chunk:
                    self._eof = True  # the pipe closes before the dying process can be reaped
                    return None
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(raw)

    def _log_tail(self, lines: int = 6) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text = self._log.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])[-1500:]

    def _death_reason(self) -> str:
        if self._proc is None:
            return "not started"
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        tail = self._log_tail()
        hint = f"; {NOT_OUR_SIGKILL}" if code == -signal.SIGKILL else ""
        return f"worker died ({_signal_name(code)}{hint})" + (f"; last output: {tail}" if tail else "")

    def run(self, cell: Cell, *, timeout: float, time_it: bool = True,
            policy: TimingPolicy = TimingPolicy()) -> Measurement:
        self.submit(Request(cell, time_it, policy, timeout=timeout, progress=True))
        answer = self.answer(cell, timeout, timeout)
        if isinstance(answer, Turn):  # only a paced request is answered with turns
            self.kill()
            return Measurement(cell, Status.FAILED, "adcompare: the worker paced an unpaced request")
        return answer

    def submit(self, request: Request) -> None:
        """Send one request (starting the worker first if it is not running); `answer` reads what comes back."""
        if not self.alive:
            self.start()
        assert self._proc is not None and self._proc.stdin is not None, "start() leaves a worker with a stdin pipe"
        self._progress = []
        self._write(line(request))

    def go(self, on: bool) -> None:
        """Answer a paced worker's `Turn`: time one more block, or stop and send the cell's record."""
        self._write(line(Go(on)))

    def _write(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None, "written only to a started worker"
        try:
            self._proc.stdin.write(text.encode())
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: the next read says how

    def answer(self, cell: Cell, wait: float, timeout: float) -> Measurement | Turn:
        """The worker's next record for `cell` — a `Turn` (paced requests only) or the cell's measurement — or,
        when nothing comes within `wait` seconds, the cell's `timeout` record (the worker is killed; `timeout` is
        the cell timeout the message names), or its `crashed` record when the worker died."""
        until = time.monotonic() + max(wait, 0.0)
        record = self._read(max(wait, 0.0))
        while record is not None and record.get("record") == PROGRESS:
            self._progress.append((time.monotonic(), Progress.from_json(record)))
            record = self._read(max(until - time.monotonic(), 0.0))
        if record is not None:
            if record.get("record") == TURN:
                return Turn.from_json(record)
            answer = CellRecord.from_json(record)
            if answer.restart:
                self.close()  # the worker exits after this record; the next cell starts a fresh one
            return answer.measurement
        if not self._eof:
            self.kill()
            return kept(cell, self._progress, timeout, time.monotonic())
        reason = self._death_reason()
        self.close()
        return Measurement(cell, Status.CRASHED, reason)

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self.close()

    def close(self) -> None:
        self._awaiting = False
        if self._proc is not None:
            if self._proc.poll() is None:
                try:
                    if self._proc.stdin is not None:  # always a pipe (start)
                        self._proc.stdin.close()
                    self._proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
        if self._reader is not None:
            os.close(self._reader)
            self._reader = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_together(workers: Sequence[WorkerProcess], poll: float = 0.02) -> None:
    """Start `workers` at once — their interpreters and framework imports side by side on the machine's cores — and
    wait until every one is ready, so that no cell is timed while one starts. Each records its own start-up (to the
    `poll`) and, as `start_share`, its part of the wall time until the last of them was ready (in proportion to its
    own, never more than its own), which is what its cells are charged. One that fails is left unstarted, its
    reason kept for its first cell's record (that cell does not start it again)."""
    for worker in workers:
        worker.launch()
    began = min(worker._launched for worker in workers)
    pending, ready, failed, last_ready = list(workers), [], [], began
    while pending:
        for worker in list(pending):
            record = worker._read(poll)
            if record is None and not worker._eof and time.perf_counter() < worker._launched + worker.startup_timeout:
                continue
            pending.remove(worker)
            if record is None or record.get("record") != WORKER:
                failed.append((worker, record))  # why it failed is read after the others are ready
                continue
            last_ready = time.perf_counter()
            ready.append((worker, worker._started(record, last_ready).startup_seconds))
    own = sum(seconds for _, seconds in ready)
    for worker, seconds in ready:
        worker.start_share = min(seconds, (last_ready - began) * seconds / own) if own > 0 else 0.0
    for worker, record in failed:
        try:
            worker._started(record, time.perf_counter())
        except RuntimeError as exc:
            worker._start_failure = exc


def kept(cell: Cell, progress: list[tuple[float, Progress]], timeout: float, now: float) -> Measurement:
    """What a cell stopped by its timeout keeps: its finished timed calls as a measurement with few samples (none
    finished: its checked first call as the one sample, where that call compiled nothing), or a `timeout` naming
    the stage it was stopped in and, for a call, how long it had run (a lower bound)."""
    stages = {p.stage: (when, p) for when, p in progress}
    calls = [p for _, p in progress if p.stage == Progress.CALL]
    limit = f"the {timeout:g} s cell timeout"
    if Progress.CHECKED in stages:
        when, checked = stages[Progress.CHECKED]
        running = round(now - progress[-1][0], 4)  # the call the timeout stopped: the framework's seconds
        m = checked.measurement
        assert m is not None and checked.seconds is not None, "a CHECKED report carries the cell and its first call"
        if calls or first_call_is_a_sample(m.compiled, checked.compile_method):
            in_calls = sum(p.seconds or 0.0 for p in calls)
            timing = Timing(samples=tuple(p.seconds or 0.0 for p in calls) or (checked.seconds,), number=1,
                            first_call=checked.seconds, warmup_calls=0, total_seconds=in_calls,
                            call_seconds=in_calls, cpu_samples=tuple(p.cpu or 0.0 for p in calls), stopped=CELL_TIMEOUT)
            compile_seconds, method = checked.compile_seconds, checked.compile_method
            if compile_seconds is None and m.compiled:  # never with the first call alone: it compiled nothing
                compile_seconds, method = max(0.0, checked.seconds - timing.median), FIRST_CALL_MINUS_STEADY
            timing = replace(timing, compile=compile_seconds,
                             compile_method=method if compile_seconds is not None else "")
            note = (f"{len(calls)} timed call{'s' if len(calls) != 1 else ''} before {limit} stopped the worker"
                    if calls else f"its checked first call is its one sample: the next call ran past {limit}")
            return replace(m, timing=timing, message="; ".join(filter(None, [m.message, note])),
                           details={**m.details, UNFINISHED_CALL: running})  # (analysis/harness_cost.py)
        return replace(m, status=Status.TIMEOUT, timing=None,
                       message=f"no timed call finished within {limit} (first call {checked.seconds:.3g} s, "
                               f"checked); the call it was stopped in had run {running:.3g} s",
                       details={**m.details, "first_call_seconds": checked.seconds, "lower_bound_seconds": running})
    if Progress.CALLED in stages:
        when, called = stages[Progress.CALLED]
        return Measurement(cell, Status.TIMEOUT, f"the first call took {called.seconds:.3g} s; checking it "
                                                 f"against the float64 reference ran past {limit}",
                           details={"first_call_seconds": called.seconds})
    if Progress.STARTED in stages:
        when, _ = stages[Progress.STARTED]
        return Measurement(cell, Status.TIMEOUT, f"prepare and the first call ran past {limit}: at least "
                                                 f"{now - when:.3g} s",
                           details={"lower_bound_seconds": round(now - when, 4)})
    return Measurement(cell, Status.TIMEOUT, f"ran past {limit}; worker stopped")

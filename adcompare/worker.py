"""The worker process: runs one adapter's cells for one (dtype, device), never in the parent.

Why a process: JAX's x64 switch and thread settings are process-wide, BLAS reads thread variables at import, and
compiled code can kill the interpreter (a SIGSEGV in compiled torch jacfwd was seen). The parent writes one JSON
request per line on stdin and reads one JSON record per line on a dedicated pipe (`--result-fd`), because
frameworks print to stdout and stderr. The first record describes the worker (start-up time, versions, device).
The messages are protocol.py's.

    python -m adcompare.worker --adapter jax --dtype float64 --device cpu --threads 2 --result-fd 3 [--plugin P]
                               [--devices 4]

`--devices D` (D > 1, data-parallel cells only) sets up D emulated host devices on the CPU before the framework is
imported (`Adapter.emulate_host_devices`); each data-parallel cell records what was set up under `device_setup`. An
adapter that sets them up per cell (`Adapter.host_devices_per_cell`: torch) gets one worker for every device count,
and the call before each cell whose count differs from the last one's.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import signal
import sys
import time
from dataclasses import replace

from adcompare.model.measurement import Measurement
from adcompare.model.operators import data_parallel
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.run.in_process import OVERHEAD, ExecutionOptions, describe_exception, run_cell
from adcompare.run.protocol import CellRecord, Go, Request, Turn, WorkerInfo, send
from adcompare.run.timing import Pace
from adcompare.verify.input_sources import with_inputs

PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when the run that started it dies. The worker has its own session (so a
    timeout can kill its process group), so a killed `adcompare run` would otherwise leave it computing for
    minutes, holding a core and gigabytes that the next run's timings then share. Elsewhere a no-op: a worker
    still exits at its next request, when its stdin closes."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


def _devices_present(adapter, device: str) -> str:
    """What a worker without emulation offers its data-parallel cells, in words."""
    try:
        most = adapter.max_devices(device)
    except Exception as exc:  # the count is provenance: a framework that cannot say it still runs its cells
        return f"device count unknown ({describe_exception(exc)})"
    if device == "cpu":
        return f"{most} host device{'s' if most != 1 else ''}, no emulation (this machine's {os.cpu_count()} cores)"
    return f"{most} {device} device{'s' if most != 1 else ''} present"


def pacer(out, requests) -> Pace:
    """timing.measure's `pace` for a paced request: ask the parent (a `Turn` on the result pipe) and wait for its
    `Go` on stdin; a closed stdin (the parent is gone) stops the timing."""
    def pace(done: bool, wall: float | None, cpu: float | None, spent: float) -> bool:
        send(out, Turn(done, wall, cpu, spent))
        answer = requests.readline()
        return bool(answer.strip()) and Go.from_json(json.loads(answer)).go
    return pace


DEADLINE_MARGIN = 0.05  # of the cell's timeout, at least 1 s: left for sending the record and releasing the cell


def deadline(received: float, timeout: float | None) -> float | None:
    """When a cell's timing must end for its record to reach the parent before the cell's timeout."""
    if timeout is None:
        return None
    return received + timeout - max(1.0, DEADLINE_MARGIN * timeout)


def with_stage(measurement: Measurement, stage: str, seconds: float) -> Measurement:
    """`measurement` with `seconds` of the worker's own work around the cell added to its `stage` of
    `details.overhead_seconds` (a record without the split, e.g. a failed cell's, is left as it is)."""
    overhead = measurement.details.get(OVERHEAD)
    if not isinstance(overhead, dict):
        return measurement
    total = round(float(overhead.get(stage, 0.0)) + seconds, 4)
    return replace(measurement, details={**measurement.details, OVERHEAD: {**overhead, stage: total}})


def collected() -> float:
    """Seconds of a full collection, whose survivors are then frozen (never walked again)."""
    began = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m adcompare.worker")
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--plugin", action="append", default=[])
    parser.add_argument("--inputs", action="append", default=[])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args(argv)
    out = os.fdopen(args.result_fd, "w")

    registry = with_inputs(plugins.load(tuple(args.plugin)), args.inputs, args.seed)
    adapter = registry.adapter(args.adapter)
    unavailable = None
    device_setup = ""
    try:
        if args.devices > 1 and args.device == "cpu":  # before setup: the framework reads it at import
            device_setup = adapter.emulate_host_devices(args.devices)
        adapter.setup(dtype=args.dtype, device=args.device, threads=args.threads)
        unavailable = adapter.device_unavailable(args.device)
        device_name = args.device if unavailable else adapter.device_name(args.device)
    except Exception as exc:
        unavailable, device_name = f"{adapter.name} failed to start: {describe_exception(exc)}", args.device
    if args.devices > 1 and not unavailable and not device_setup:
        device_setup = _devices_present(adapter, args.device)
    # The framework's modules are hundreds of thousands of long-lived objects (0.19 s to walk once for TensorFlow's,
    # 0.08 s for torch's): collected and frozen here, part of the start-up its cells share, not the first cell's.
    collected()
    send(out, WorkerInfo(adapter.name, args.dtype, args.device, device_name, args.threads, os.getpid(),
                         time.perf_counter() - started, adapter.versions(), unavailable,
                         devices=args.devices, device_setup=device_setup))

    devices_now = args.devices
    for line in sys.stdin:
        if not line.strip():
            continue
        received = time.perf_counter()
        request = Request.from_json(json.loads(line))
        cell = request.cell
        if unavailable:
            send(out, CellRecord(Measurement(cell, Status.UNSUPPORTED, unavailable)))
            continue
        if cell.devices != devices_now and args.device == "cpu" and adapter.host_devices_per_cell:
            # this worker runs the cells of every device count (Registry.worker_key): set up this cell's count
            said = adapter.emulate_host_devices(cell.devices)
            device_setup, devices_now = (said if cell.devices > 1 else ""), cell.devices
        options = ExecutionOptions(time=request.time, policy=request.policy,
                                   pace=pacer(out, sys.stdin) if request.paced else None,
                                   deadline=deadline(received, request.timeout),
                                   progress=(lambda p: send(out, p)) if request.progress else None)
        # A framework's modules (and those it imports lazily on a first compile) are hundreds of thousands of
        # long-lived objects: the full collection before each cell (execution.run_cell) walked them all again,
        # 0.1–0.2 s a cell with TensorFlow or torch's compiler loaded. What survives is frozen (at start-up and
        # after each cell), so that run_cell's collection walks only what came between cells, and the one after a
        # cell (its cleanup, before its record is sent) what the cell left — a failed cell's traceback can hold GBs
        # of a framework's arrays (0.2-0.4 s to free after BA's largest TensorFlow cells), its cost, not the next's.
        try:
            measurement = run_cell(adapter, registry.problem(cell.problem), cell, options)
        except Exception as exc:  # a bug outside the framework call still yields a record, not a dead worker
            measurement = Measurement(cell, Status.FAILED, f"adcompare: {describe_exception(exc)}")
        measurement = with_stage(measurement, "cleanup", collected())
        measurement = replace(measurement, device_name=measurement.device_name or device_name)
        if data_parallel(cell.operator) and measurement.status is not Status.UNSUPPORTED:
            setup = device_setup or f"one {args.device} device: the batch is not split"
            measurement = replace(measurement, details={**measurement.details, "device_setup": setup})
        restart = adapter.unusable_after_failure(args.device) if measurement.status is Status.FAILED else None
        send(out, CellRecord(measurement, restart))
        if restart:
            return 0  # the parent starts a fresh worker for the next cell
    return 0


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: every record is sent and flushed, and nothing the worker holds
    outlives it (a torch cell's gloo helpers are closed with their cell, and die with the worker in any case;
    inductor's compile sidecar stops its pool at the end of file on its command pipe). The teardown of a
    framework's modules and heap took 0.1-0.5 s per worker (JAX after the quick suite's cells: 0.5 s), which the
    run waits for before its next worker's cells; the report starts and closes ~13."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())

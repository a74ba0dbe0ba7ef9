"""Running one cell in the current process: prepare, first call, validate, check the derivative, then time it.

`first_call` is the one core every in-process path shares: the worker's `run_cell` (which then times the cell),
`run_once` (adapter tests), the pytest-benchmark path (`benchmark_cell`, which then hands the call to
pytest-benchmark) and the conformance suite's `run_case` (which then runs the cell a second time and looks for
changed inputs). So a wrong shape, a NaN or a wrong derivative gets the same verdict whichever path ran it. Every
derivative is checked before it is timed; a wrong one is still timed (and labelled `mismatch`), a NaN one is not.
"""
from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from adcompare.model.cell import Cell
from adcompare.model.errors import UnsupportedOperation
from adcompare.model.measurement import Check, Measurement
from adcompare.model.operators import expected_shape, spec
from adcompare.model.problem import Problem, Size, example_output_shape, output_shape
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.adapter import Adapter, CellInputs, Prepared, Request
from adcompare.run import memory, timing
from adcompare.run.protocol import Progress
from adcompare.verify.cell_inputs import cell_inputs, held
from adcompare.verify.check import check_result, describe, status_of
from adcompare.verify.reference import ReferenceError, reference
from adcompare.verify.tolerance import all_finite

# A cell's details key: seconds the worker spent on the cell outside the framework's calls, by stage (inputs,
# setup, reference, check, timing_loop; a worker adds its collections to setup and as cleanup); the framework's
# own are `prepare_seconds`, the first call and the timed calls (Timing.call_seconds). Worker start-up and the
# parent's share are the runner's to add.
OVERHEAD = "overhead_seconds"


@dataclass(frozen=True)
class ExecutionOptions:
    time: bool = True  # False for `adcompare check`: first call and check only
    policy: TimingPolicy = TimingPolicy()
    pace: timing.Pace | None = None  # asked before each timed block (timing.measure, lockstep.py)
    deadline: float | None = None  # time.perf_counter() by which the cell must be done (timing.py rule 7)
    progress: Callable[[Progress], None] | None = None  # told as the cell goes (worker → parent, protocol.py)


@dataclass(frozen=True)
class FirstCall:
    """A cell prepared and called once in this process, synced, with its verdict: what each caller starts from.

    `status` is UNSUPPORTED when prepare or the first call refused the cell (UnsupportedOperation: torch.compile
    refuses adcompare.while_loop when it compiles, on the first call; e.g. more devices than the worker
    has), FAILED when prepare or the first call raised (`error`, `message` says at which stage), the result has
    the wrong shape, or the reference could not be computed; NAN when the result is not finite (no reference is
    needed to call NaN NaN); else the check's verdict, OK or MISMATCH (OK when no check was asked for).
    """

    size: Size
    inputs: CellInputs
    expected_shape: tuple[int, ...]
    status: Status
    message: str = ""
    prepared: Prepared | None = None
    output: Any = None  # what the adapter's to_numpy returned, as returned (the conformance suite checks its type)
    result: np.ndarray | None = None  # `output` as a NumPy array
    seconds: float | None = None  # the first call, run + sync
    details: Mapping[str, Any] | None = None  # None when prepare or the first call raised
    check: Check | None = None  # None unless the result was validated and a check was asked for
    error: Exception | None = None  # what prepare or the first call raised
    # Seconds of each stage that ran: "prepare" (the framework's), "reference" (the float64 reference, 0 when
    # another cell of the worker computed it), "check" (comparing with it): what run_cell reports as overhead.
    seconds_in: Mapping[str, float] = field(default_factory=dict)

    @property
    def called(self) -> bool:
        """prepare and the first call returned (whatever the verdict on what they returned)."""
        return self.error is None


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception, plus where in the problem or framework it came from."""
    text = str(exc).strip().splitlines()
    head = f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        head += f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return head[:2000]


def first_call(adapter: Adapter, problem: Problem, cell: Cell, *, size: Size | None = None,
               inputs: CellInputs | None = None, check: bool = True,
               on_called: Callable[[float], None] | None = None) -> FirstCall:
    """Prepare → first call → validate (shape, finiteness) → check against the float64 reference, in this process.

    `size` and `inputs` default to the cell's own (callers with input files pass theirs); `check=False` stops
    after the validation, for callers that compare results themselves (`run_once`); `on_called` is told the
    first call's seconds as soon as it returned (before the check). Exceptions raised by prepare or the first
    call become a FAILED verdict carrying the exception; any other exception propagates.
    """
    size = size or problem.size(cell.size)
    inputs = inputs or cell_inputs(problem, size, cell.operator, cell.dtype)
    out_shape = output_shape(problem, size)
    ex_shape = example_output_shape(problem, size) if spec(cell.operator).per_example else None
    want = tuple(expected_shape(cell.operator, wrt_shape=inputs.wrt.shape, out_shape=out_shape,
                                example_out_shape=ex_shape,
                                batch_size=None if inputs.batch is None else inputs.batch.shape[0]))
    verdict = partial(FirstCall, size=size, inputs=inputs, expected_shape=want)
    stage = "prepare"
    prepared: Prepared | None = None
    seconds_in: dict[str, float] = {}
    began = time.perf_counter()
    try:
        prepared = adapter.prepare(Request(problem, cell.operator, cell.variant, cell.device, cell.dtype, inputs,
                                           devices=cell.devices))
        seconds_in["prepare"] = time.perf_counter() - began
        stage = "first call"
        out, seconds = timing.first_call(prepared, adapter.sync)
        if on_called is not None:
            on_called(seconds)
        output = adapter.to_numpy(out)
        result = np.asarray(output)
        details = dict(prepared.details)
        if prepared.after_first_call is not None:
            details.update(prepared.after_first_call())
    except UnsupportedOperation as exc:  # in prepare, or on the first call where a framework compiles lazily
        if stage != "prepare":
            release(prepared)
        return verdict(status=Status.UNSUPPORTED, message=str(exc), error=exc)
    except Exception as exc:
        if stage != "prepare":
            release(prepared)
        return verdict(status=Status.FAILED, message=f"{stage}: {describe_exception(exc)}", error=exc)

    # Input and output sizes (per example for per-example operators) let the report place forward against
    # reverse mode without the problem installed.
    details.update(size.provenance())  # the input file and its sha256, or the seed
    details["wrt_size"] = int(inputs.wrt.size)
    details["out_size"] = int(np.prod(ex_shape if ex_shape is not None else out_shape))
    called = partial(verdict, prepared=prepared, output=output, result=result, seconds=seconds, details=details,
                     seconds_in=seconds_in)
    began = time.perf_counter()  # the check begins with the result's shape and finiteness
    if tuple(result.shape) != want:
        return called(status=Status.FAILED,
                      message=f"{adapter.name} returned shape {tuple(result.shape)} for {cell.operator}, "
                              f"expected {want}")
    finite = all_finite(result)  # no reference is needed to call NaN NaN
    seconds_in["check"] = time.perf_counter() - began
    if not finite:
        return called(status=Status.NAN, message="result contains NaN or Inf")
    if not check:
        return called(status=Status.OK)
    try:
        began = time.perf_counter()
        if reference(problem, size, cell.operator, inputs).shared:  # timed apart from the check (cached for it)
            details["reference_shared"] = True  # another worker of the run differenced it
        seconds_in["reference"] = time.perf_counter() - began
        began = time.perf_counter()
        checked = check_result(problem, size, cell.operator, cell.dtype, inputs, result)
        seconds_in["check"] += time.perf_counter() - began
    except ReferenceError as exc:
        return called(status=Status.FAILED, message=f"reference: {exc}")
    status = status_of(checked)
    return called(status=status, message=describe(checked) if status is not Status.OK else "", check=checked)


def run_once(adapter: Adapter, problem: Problem, operator: str, dtype: str, *, variant: str = "eager",
             device: str = "cpu", inputs: CellInputs | None = None, size: Size | None = None
             ) -> tuple[Prepared, Any, CellInputs, Size]:
    """Prepare and run one cell once in this process, synced: (prepared, NumPy result, inputs, size).

    For adapter tests, which compare the result themselves: an exception from prepare or the call is raised, and
    the result is returned whatever its shape or values. Runs use `run_cell` in a worker.
    """
    size = size or problem.smallest_size
    cell = Cell(problem.name, size.label, operator, adapter.name, variant, device, dtype)
    called = first_call(adapter, problem, cell, size=size, inputs=inputs, check=False)
    if called.error is not None:
        raise called.error
    assert called.prepared is not None, "first_call returns a prepared cell whenever prepare raised nothing"
    return called.prepared, called.output, called.inputs, called.size


def release(prepared: Prepared | None) -> None:
    """Let a prepared cell release what it holds beyond memory (Prepared.close: torch's gloo helper processes)."""
    if prepared is not None and prepared.close is not None:
        prepared.close()


def algorithm_of(algorithm: str, cell: Cell) -> str:
    """The declared algorithm, with the device count of a data-parallel cell ("… over 4 devices")."""
    if not algorithm or not spec(cell.operator).data_parallel:
        return algorithm
    return f"{algorithm} over {cell.devices} device{'s' if cell.devices != 1 else ''}"


def run_cell(adapter: Adapter, problem: Problem, cell: Cell, options: ExecutionOptions = ExecutionOptions()
             ) -> Measurement:
    capability = adapter.capability(cell.operator, cell.variant)
    measurement = partial(Measurement, cell=cell, support=capability.support,
                          algorithm=algorithm_of(capability.algorithm, cell))
    if not capability.supported:
        return measurement(status=Status.UNSUPPORTED, message=capability.reason)
    size = problem.size(cell.size)
    began = time.perf_counter()
    reused = held(problem, size, cell.dtype)
    inputs = cell_inputs(problem, size, cell.operator, cell.dtype, reuse=True)
    inputs_seconds = time.perf_counter() - began
    began = time.perf_counter()
    gc.collect()
    memory.reset_host_peak()
    adapter.reset_peak_device_memory(cell.device)
    setup_seconds = time.perf_counter() - began  # a collection and the peak resets, before the first call
    tell = options.progress or (lambda progress: None)
    tell(Progress(Progress.STARTED))
    called = first_call(adapter, problem, cell, size=size, inputs=inputs,
                        on_called=lambda seconds: tell(Progress(Progress.CALLED, seconds)))
    if not called.called:
        return measurement(status=called.status, message=called.message, details={"inputs_reused": reused})
    assert called.details is not None, "first_call records details whenever prepare and the first call returned"
    details = dict(called.details)
    stages = dict(called.seconds_in)
    details["prepare_seconds"] = round(stages.pop("prepare", 0.0), 4)
    details["inputs_reused"] = reused  # the worker's last cell built them (the plan orders a size's cells together)
    overhead = {"inputs": inputs_seconds, "setup": setup_seconds, **stages}  # outside the framework's calls
    details[OVERHEAD] = {k: round(v, 4) for k, v in overhead.items()}
    if called.check is None:  # a wrong shape, a NaN, a reference that could not be computed: not timed
        release(called.prepared)
        return measurement(status=called.status, message=called.message, details=details)
    check, status, prepared, first = called.check, called.status, called.prepared, called.seconds
    assert prepared is not None and first is not None, "a checked cell was prepared and called once"
    measured = None
    if options.time:
        tell(Progress(Progress.CHECKED, first, measurement=measurement(status=status, message=called.message,
                                                                        check=check, details=details),
                      compile_seconds=prepared.compile_seconds, compile_method=prepared.compile_method))
        try:
            measured = timing.measure(prepared, adapter.sync, first, compiled=bool(adapter.compiled_from(cell.variant)),
                                      policy=options.policy, pace=options.pace, deadline=options.deadline,
                                      on_call=lambda wall, cpu: tell(Progress(Progress.CALL, wall, cpu)))
        except Exception as exc:
            release(prepared)
            return measurement(status=Status.FAILED, message=f"timing: {describe_exception(exc)}", check=check,
                               details=details)
    else:
        details["first_call_seconds"] = first  # check mode: one call is not a timing, so no Timing record
    if measured is not None:
        overhead["timing_loop"] = max(0.0, measured.total_seconds - measured.call_seconds)
        details[OVERHEAD] = {k: round(v, 4) for k, v in overhead.items()}
    if prepared.close is not None:  # the framework's own teardown, like prepare (torch's gloo helpers leaving)
        began = time.perf_counter()
        release(prepared)
        details["release_seconds"] = round(time.perf_counter() - began, 4)
    return measurement(status=status, message=called.message, timing=measured, check=check,
                       host_peak_bytes=memory.host_peak_bytes(),
                       device_peak_bytes=adapter.peak_device_memory(cell.device), details=details)

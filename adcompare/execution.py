"""Running one cell in the current process: prepare, first call, check the derivative, then time it.

The worker process calls this for every cell; so does the in-process pytest-benchmark path. Every derivative is
checked before it is timed; a wrong one is still timed (and labelled `mismatch`), a NaN one is not.
"""
from __future__ import annotations

import gc
import traceback
from dataclasses import dataclass

import numpy as np

from . import memory, timing
from .adapter import Adapter, CellInputs, Request
from .cell import Cell
from .check import check_result, describe, status_of
from .inputs import cell_inputs
from .measurement import Measurement
from .operators import expected_shape, spec
from .problem import Problem, Size, example_output_shape, output_shape
from .reference import ReferenceError
from .status import Status


@dataclass(frozen=True)
class ExecutionOptions:
    time: bool = True  # False for `adcompare check`: first call and check only
    policy: timing.TimingPolicy = timing.TimingPolicy()


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception, plus where in the problem or framework it came from."""
    text = str(exc).strip().splitlines()
    head = f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        head += f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return head[:2000]


def run_once(adapter: Adapter, problem: Problem, operator: str, dtype: str, *, variant: str = "eager",
             device: str = "cpu", inputs: CellInputs | None = None, size: Size | None = None):
    """Prepare and run one cell once in this process, synced: (prepared, NumPy result, inputs, size).

    For adapter tests and the conformance suite; runs use `run_cell` in a worker.
    """
    size = size or problem.smallest_size
    inputs = inputs or cell_inputs(problem, size, operator, dtype)
    prepared = adapter.prepare(Request(problem, operator, variant, device, dtype, inputs))
    out = prepared.run()
    adapter.sync(out)
    return prepared, adapter.to_numpy(out), inputs, size


def run_cell(adapter: Adapter, problem: Problem, cell: Cell, options: ExecutionOptions = ExecutionOptions()
             ) -> Measurement:
    capability = adapter.capability(cell.operator, cell.variant)
    base = dict(cell=cell, support=capability.support.value, algorithm=capability.algorithm)
    if not capability.supported:
        return Measurement(status=Status.UNSUPPORTED, message=capability.reason, **base)
    size = problem.size(cell.size)
    inputs = cell_inputs(problem, size, cell.operator, cell.dtype)
    gc.collect()
    memory.reset_host_peak()
    adapter.reset_peak_device_memory(cell.device)
    stage = "prepare"
    try:
        prepared = adapter.prepare(Request(problem, cell.operator, cell.variant, cell.device, cell.dtype, inputs))
        stage = "first call"
        out, first = timing.first_call(prepared, adapter.sync)
        result = np.asarray(adapter.to_numpy(out))
        details = dict(prepared.details)
        if prepared.after_first_call is not None:
            details.update(prepared.after_first_call())
    except Exception as exc:
        return Measurement(status=Status.FAILED, message=f"{stage}: {describe_exception(exc)}", **base)

    out_shape = output_shape(problem, size)
    ex_shape = example_output_shape(problem, size) if spec(cell.operator).per_example else None
    want = expected_shape(cell.operator, wrt_shape=inputs.wrt.shape, out_shape=out_shape,
                          example_out_shape=ex_shape,
                          batch_size=None if inputs.batch is None else inputs.batch.shape[0])
    # Input and output sizes (per example for per-example operators) let the report place forward against
    # reverse mode without the problem installed.
    details.update(size.provenance())  # the input file and its sha256, or the seed
    details["wrt_size"] = int(inputs.wrt.size)
    details["out_size"] = int(np.prod(ex_shape if ex_shape is not None else out_shape))
    if tuple(result.shape) != tuple(want):
        return Measurement(status=Status.FAILED, details=details, **base,
                           message=f"{adapter.name} returned shape {tuple(result.shape)} for {cell.operator}, "
                                   f"expected {tuple(want)}")
    if not np.all(np.isfinite(result)):  # no reference is needed to call NaN NaN
        return Measurement(status=Status.NAN, message="result contains NaN or Inf", details=details, **base)
    try:
        check = check_result(problem, size, cell.operator, cell.dtype, inputs, result)
    except ReferenceError as exc:
        return Measurement(status=Status.FAILED, message=f"reference: {exc}", details=details, **base)
    status = status_of(check)
    message = describe(check) if status is not Status.OK else ""
    measured = None
    if options.time and status is not Status.NAN:
        try:
            measured = timing.measure(prepared, adapter.sync, first, compiled=bool(adapter.compiled_from(cell.variant)),
                                      policy=options.policy)
        except Exception as exc:
            return Measurement(status=Status.FAILED, message=f"timing: {describe_exception(exc)}", check=check,
                               details=details, **base)
    if not options.time:
        details["first_call_seconds"] = first  # check mode: one call is not a timing, so no Timing record
    return Measurement(status=status, message=message, timing=measured, check=check,
                       host_peak_bytes=memory.host_peak_bytes(),
                       device_peak_bytes=adapter.peak_device_memory(cell.device), details=details, **base)

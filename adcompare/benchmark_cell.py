"""One cell through pytest-benchmark, in-process: prepare, first call, check, then `benchmark(run + sync)`."""
from __future__ import annotations

import numpy as np
import pytest

from . import plugins, timing
from .adapter import Request
from .cell import Cell
from .inputs import cell_inputs
from .status import Status


def benchmark_cell(cell: Cell, benchmark, plugin_specs: tuple[str, ...] = ()) -> None:
    from .check import check_result, status_of

    registry = plugins.load(plugin_specs)
    adapter, problem = registry.adapter(cell.adapter), registry.problem(cell.problem)
    capability = adapter.capability(cell.operator, cell.variant)
    if not capability.supported:
        pytest.skip(f"unsupported: {capability.reason}")
    adapter.setup(dtype=cell.dtype, device=cell.device, threads=1)
    size = problem.size(cell.size)
    inputs = cell_inputs(problem, size, cell.operator, cell.dtype)
    prepared = adapter.prepare(Request(problem, cell.operator, cell.variant, cell.device, cell.dtype, inputs))
    out, first = timing.first_call(prepared, adapter.sync)
    check = check_result(problem, size, cell.operator, cell.dtype, inputs, np.asarray(adapter.to_numpy(out)))
    status = status_of(check)
    benchmark.group = f"{cell.problem}-{cell.size}-{cell.operator}"
    benchmark.extra_info.update({
        "adcompare_cell": cell.to_json(), "key": cell.key, "status": status.value, "algorithm": capability.algorithm,
        "support": capability.support.value, "first_call": first, "compile": prepared.compile_seconds,
        "compile_method": prepared.compile_method, "check": check.to_json(),
    })
    run, sync = prepared.run, adapter.sync
    benchmark(lambda: sync(run()))
    assert status is Status.OK, f"{cell.id}: {status.value} (error {check.error} vs tolerance {check.tolerance})"

"""One cell through pytest-benchmark, in-process: the shared first call and verdict (in_process.first_call: prepare,
first call, shape and NaN checks, float64 reference), then `benchmark(run + sync)`.

A cell that failed or gave NaN is not handed to pytest-benchmark (as `adcompare run` does not time it); its
verdict is in `benchmark.extra_info` and the test fails with the verdict's message. A mismatch is timed, then fails.
"""
from __future__ import annotations

import pytest

from adcompare.model.cell import Cell
from adcompare.model.errors import UnsupportedOperation
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.run.in_process import first_call, release


def benchmark_cell(cell: Cell, benchmark, plugin_specs: tuple[str, ...] = ()) -> None:
    registry = plugins.load(plugin_specs)
    adapter, problem = registry.adapter(cell.adapter), registry.problem(cell.problem)
    capability = adapter.capability(cell.operator, cell.variant)
    if not capability.supported:
        pytest.skip(f"unsupported: {capability.reason}")
    if cell.devices > 1:  # a framework fixes its device list when imported: only a fresh worker can emulate more
        pytest.skip(f"unsupported: pytest-benchmark runs cells in this process, on one device; time {cell.id} with "
                    f"`adcompare run --devices {cell.devices}`, whose worker sets up {cell.devices} devices")
    adapter.setup(dtype=cell.dtype, device=cell.device, threads=1)
    called = first_call(adapter, problem, cell)
    try:
        benchmark.group = f"{cell.problem}-{cell.size}-{cell.operator}"
        benchmark.extra_info.update({
            "adcompare_cell": cell.to_json(), "key": cell.key, "status": called.status.value,
            "algorithm": capability.algorithm, "support": capability.support.value, "first_call": called.seconds,
            "compile": called.prepared.compile_seconds if called.prepared else None,
            "compile_method": called.prepared.compile_method if called.prepared else "",
            "check": called.check.to_json() if called.check else None,
        })
        if called.message:
            benchmark.extra_info["message"] = called.message
        if isinstance(called.error, UnsupportedOperation):  # refused in prepare, as `adcompare run` records it
            pytest.skip(f"unsupported: {called.error}")
        if called.error is not None:
            raise called.error  # prepare or the first call raised: its own traceback says most
        if called.check is None:  # a wrong shape or a NaN: nothing worth timing
            pytest.fail(f"{cell.id}: {called.status.value}: {called.message}")
        assert called.prepared is not None, "a checked cell was prepared"
        run, sync = called.prepared.run, adapter.sync
        benchmark(lambda: sync(run()))
        assert called.status is Status.OK, f"{cell.id}: {called.status.value} ({called.message})"
    finally:  # the test process goes on to other cells: a cell's helpers and settings end with it
        release(called.prepared)

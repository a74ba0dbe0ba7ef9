"""Tests run once per built-in adapter: one test class per adapter, made from a base class that reads
`self.adapter_name`, and the helpers they share (skip where a framework is missing, evaluate in a worker).

pytest-xdist's `--dist loadscope` (the README's test command) keeps a class in one process: a class per adapter
lets a module's adapters run their workers in different processes, where parametrizing one function would keep
them all in one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcompare.model.operators import NESTED, OPERATORS, spec
from adcompare.model.problem import Problem, Size
from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import CellInputs
from adcompare.study.suites import FULL_LEAVES_OUT

ROOT = Path(__file__).resolve().parent.parent

BUILT_IN_ADAPTERS = ("jax", "torch", "tensorflow", "autograd")
# Problems whose one call takes minutes (GradBench's nested saddle and particle: the full suite leaves them out for
# the same reason), left out of the sweeps that run every problem × operator at its smallest size: tests/test_nested.py
# runs every adapter's nesting orders on a small nested function in the normal run, and on GradBench's inputs under
# -m slow.
MINUTES_A_CALL = frozenset(FULL_LEAVES_OUT)
# The operators only those problems declare (GradBench's nesting orders): the sweeps' coverage checks leave them
# to tests/test_nested.py, which runs each of them through every adapter.
NESTED_OPERATORS = frozenset(op for op in OPERATORS if spec(op).family == NESTED)


def one_class_per_adapter(base: type, adapters: tuple[str, ...] = BUILT_IN_ADAPTERS) -> dict[str, type]:
    """`Test<Adapter><Base>` subclasses of `base`, each with its `adapter_name`, keyed by name for `globals()`."""
    names = {name: f"Test{name.capitalize()}{base.__name__}" for name in adapters}
    return {cls: type(cls, (base,), {"adapter_name": name, "__module__": base.__module__})
            for name, cls in names.items()}


def skip_unless_installed(adapter_name: str, module: bool = False) -> None:
    """Skip the calling test (or, with `module`, the calling module at its import), with the adapter's reason,
    where its framework is not installed. The adapter looks for the framework without importing it: a module
    whose tests run the framework only in workers does not make every pytest-xdist worker import it to collect."""
    avail = plugins.load().adapter(adapter_name).available()
    if not avail.installed:
        pytest.skip(f"adapter {adapter_name!r}: {avail.reason}", allow_module_level=module)


def evaluate_in_worker(module: str, adapter_name: str, cases: object, timeout: float, function: str = "evaluate"
                       ) -> dict[str, object]:
    """`module.function(adapter_name, cases)` in a fresh interpreter (one framework per process, as in a run), its
    JSON result read back. `timeout` is a safety net far above what the cases take."""
    code = (f"import json\nfrom {module} import {function}\n"
            f"print('RESULT' + json.dumps({function}({adapter_name!r}, {cases!r})))\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT"):])


Case = tuple[str, ...]  # (what names the problem and its inputs…, operator, variant)
# A case's problem, size and inputs (None: the size's own, generated or read from its file)
InputsOf = Callable[[Case], tuple[Problem, Size, CellInputs | None]]
# Called after a case ran: more entries for the result (e.g. the run's own check of it)
After = Callable[[Case, Problem, Size, CellInputs, np.ndarray], dict[str, object]]


def evaluate(adapter_name: str, cases: Sequence[Case], inputs_of: InputsOf, after: After | None = None
             ) -> dict[str, object]:
    """In this process: float64 results of `adapter_name` for cases whose last two entries are operator and
    variant, each keyed by its entries joined with '/': the result as a list, or {"unsupported": reason} where the
    adapter declares so, or {"error": text} (one failure does not hide the others). Modules expose it, their
    inputs bound, as `evaluate(adapter_name, cases)` for `evaluate_in_worker`."""
    from adcompare.run.in_process import describe_exception, run_once

    adapter = plugins.load().adapter(adapter_name)
    adapter.setup(dtype="float64", device="cpu", threads=1)
    out: dict[str, object] = {}
    for case in cases:
        key, (operator, variant) = "/".join(map(str, case)), case[-2:]
        cap = adapter.capability(operator, variant)
        if not cap.supported:
            out[key] = {"unsupported": cap.reason}
            continue
        try:
            problem, size, given = inputs_of(case)
            _, result, inputs, _ = run_once(adapter, problem, operator, "float64", variant=variant, inputs=given,
                                            size=size)
            out[key] = np.asarray(result, dtype=np.float64).tolist()
            if after is not None:
                out.update({f"{key}/{name}": value for name, value in after(case, problem, size, inputs,
                                                                            np.asarray(result)).items()})
        except Exception as exc:  # reported per case, so one failure does not hide the others
            out[key] = {"error": describe_exception(exc)}
    return out


def float64_inputs(problem: Problem, size: Size, **replaced: Any) -> CellInputs:
    """The float64 inputs of `problem` at `size` (generated, or read from its file), some constants `replaced`."""
    values = problem.inputs(size, "float64") | replaced
    wrt = values.pop(problem.wrt)
    return CellInputs(wrt=wrt, constants=values, batch=None, tangent=None, cotangent=None)

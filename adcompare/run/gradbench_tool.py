"""The tool side of GradBench's protocol (gradbench/gradbench, CONTRIBUTING.md, "Protocol"): one adapter, one
variant, one device, serving an eval's messages one JSON object a line.

    start    → {"id", "tool", "config"}                      (the adapter, variant, device, dtype, versions)
    define   → {"id", "success"[, "error"]}                  (false for an eval adcompare lacks, with the reason)
    evaluate → {"id", "success", "output", "timings"}        (or success false with the error; the tool goes on)
    end      → no response; the tool exits
    other    → {"id"}                                        (analysis and any future kind)

An evaluation reads GradBench's input with the problem's own `--inputs` reader, prepares the operator through the
adapter (`Adapter.prepare`: transform, and the ahead-of-time compile where the framework has one), calls it once
(the first call: a lazy compiler's compile, caches warming), then times it `min_runs` times or until the timed
runs add up to `min_seconds`, whichever is longer — each run with the adapter's `sync` inside its timed region,
since an asynchronous framework returns before its result exists. GradBench's timings list holds one `evaluate`
entry per timed run, as its protocol asks, and apart from them `prepare`, `compile` (where the adapter measured it
ahead of time; not part of `prepare`'s figure) and `first call`, so that no compile time hides in a run.
Computation is in float64, GradBench's precision (its validator's tolerance, 1e-4 relative, would pass float32
on some evals and fail it on others).
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcompare import __version__
from adcompare.model.problem import Problem, Size, file_sha256, read_input_file
from adcompare.plugin.adapter import Adapter, CellInputs, Request
from adcompare.plugin.registry import Registry
from adcompare.run.gradbench_evals import EVALS, Eval
from adcompare.run.in_process import describe_exception, release
from adcompare.verify.cell_inputs import cell_inputs

DTYPE = "float64"
Response = dict[str, Any]  # one protocol response, a JSON object


class EvaluationError(Exception):
    """An evaluate message this tool cannot answer with an output (the message is GradBench's `error`)."""


def timing(name: str, seconds: float) -> dict[str, Any]:
    """GradBench's Timing; never negative (its runner reads nanoseconds as unsigned), e.g. `prepare` less a compile
    that took all of it, to rounding."""
    return {"name": name, "nanoseconds": max(0, int(round(seconds * 1e9)))}


@dataclass
class Tool:
    """One adapter · variant · device answering GradBench's messages (`respond`), in this process."""

    adapter: Adapter
    variant: str
    device: str
    registry: Registry
    clock: Callable[[], float] = time.perf_counter

    @property
    def name(self) -> str:
        return f"adcompare-{self.adapter.name}-{self.variant}"

    def respond(self, message: Any) -> Response | None:
        """The response to one decoded message, or None for `end` (the tool stops)."""
        if not isinstance(message, dict) or not isinstance(message.get("id"), int) or isinstance(
                message.get("id"), bool):
            return {"id": message.get("id") if isinstance(message, dict) else None, "success": False,
                    "error": "malformed message: expected a JSON object with an integer id and a kind"}
        kind = message.get("kind")
        if kind == "end":
            return None
        if kind == "start":
            return {"id": message["id"], "tool": self.name, "config": self.config()}
        if kind == "define":
            return {"id": message["id"], **self.define(message.get("module"))}
        if kind == "evaluate":
            return {"id": message["id"], **self.evaluate(message)}
        return {"id": message["id"]}  # analysis, and any kind the protocol adds: acknowledged

    def config(self) -> dict[str, Any]:
        return {"adcompare": __version__, "adapter": self.adapter.name, "variant": self.variant,
                "variant_means": self.adapter.variants.get(self.variant, ""), "device": self.device,
                "dtype": DTYPE, "versions": self.adapter.versions(),
                "timings": "evaluate: one per timed run, synced; prepare, compile and first call apart"}

    def define(self, module: Any) -> Response:
        try:
            self.eval_of(module)
        except EvaluationError as exc:
            return {"success": False, "error": str(exc)}
        return {"success": True}

    def eval_of(self, module: Any) -> Eval:
        """The eval named `module`, if adcompare has it and this variant can run its problem."""
        if not isinstance(module, str) or module not in EVALS:
            raise EvaluationError(f"adcompare has no implementation of module {module!r}; it has "
                                  f"{', '.join(sorted(EVALS))}")
        entry = EVALS[module]
        if entry.problem not in self.registry.problems:
            raise EvaluationError(f"module {module!r}: adcompare's problem {entry.problem!r} is not installed")
        problem = self.registry.problems[entry.problem]
        if not problem.compilable and self.variant in self.adapter.compiles:
            raise EvaluationError(f"module {module!r}: adcompare's {problem.name} has data-dependent Python control "
                                  f"flow, which {self.adapter.name}'s variant {self.variant!r} cannot compile; "
                                  f"run the tool with --variant eager")
        refused = [self.adapter.capability(f.operator, self.variant) for f in entry.functions.values()]
        if all(not c.supported for c in refused):  # e.g. the nested evals' loops under torch.compile
            raise EvaluationError(f"module {module!r}: {self.adapter.name}'s variant {self.variant!r} runs none of "
                                  f"its functions: {refused[0].reason}")
        return entry

    def evaluate(self, message: Mapping[str, Any]) -> Response:
        try:
            entry = self.eval_of(message.get("module"))
            function = message.get("function")
            if not isinstance(function, str) or function not in entry.functions:
                raise EvaluationError(f"module {message.get('module')!r} has no function {function!r}; it has "
                                      f"{', '.join(entry.functions)}")
            data = message.get("input")
            if not isinstance(data, dict):
                raise EvaluationError(f"the input of {message.get('module')}.{function} must be a JSON object")
            runs, seconds = runs_asked(data)
            chosen = entry.functions[function]
            problem = self.registry.problems[entry.problem]
            if chosen.problem is not None:
                problem = chosen.problem(problem)
            capability = self.adapter.capability(chosen.operator, self.variant)
            if not capability.supported:
                raise EvaluationError(f"{self.adapter.name} {self.variant}: {chosen.operator} is unsupported "
                                      f"({capability.reason})")
            result, timings = self.run(problem, chosen.operator, data, runs, seconds)
            if not np.all(np.isfinite(result)):  # JSON has no NaN or Infinity
                raise EvaluationError(f"{message.get('module')}.{function}: the result contains NaN or Inf")
            output = chosen.layout(result, data)
        except EvaluationError as exc:
            return {"success": False, "error": str(exc)}
        except Exception as exc:  # a failing evaluation is the eval's to report; the tool serves the next message
            return {"success": False, "error": describe_exception(exc)}
        return {"success": True, "output": output, "timings": timings}

    def run(self, problem: Problem, operator: str, data: Mapping[str, Any], runs: int, seconds: float
            ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """(the last run's result in NumPy, GradBench's timings) of `operator` on `problem` at GradBench's input."""
        inputs = read_input(problem, operator, data)
        started = self.clock()
        prepared = self.adapter.prepare(Request(problem, operator, self.variant, self.device, DTYPE, inputs))
        try:
            prepare_seconds = self.clock() - started
            compile_seconds = prepared.compile_seconds if prepared.compile_method.startswith("ahead of time") else None
            timings = [timing("prepare", prepare_seconds - (compile_seconds or 0.0))]
            if compile_seconds is not None:
                timings.append(timing("compile", compile_seconds))
            started = self.clock()
            out = prepared.run()
            self.adapter.sync(out)
            timings.append(timing("first call", self.clock() - started))
            timed, total = 0, 0.0
            while timed < runs or total < seconds:
                started = self.clock()
                out = prepared.run()
                self.adapter.sync(out)  # inside the timed region: the run ends when its result exists
                elapsed = self.clock() - started
                timings.append(timing("evaluate", elapsed))
                timed, total = timed + 1, total + elapsed
            return np.asarray(self.adapter.to_numpy(out), dtype=np.float64), timings
        finally:
            release(prepared)


def runs_asked(data: Mapping[str, Any]) -> tuple[int, float]:
    """GradBench's `Runs` (min_runs, min_seconds) from an input; absent, one run. The first call is never one."""
    runs, seconds = data.get("min_runs", 1), data.get("min_seconds", 0.0)
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise EvaluationError(f"min_runs must be an integer ≥ 1, got {runs!r}")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds) \
            or seconds < 0:
        raise EvaluationError(f"min_seconds must be a number ≥ 0, got {seconds!r}")
    return runs, float(seconds)


def read_input(problem: Problem, operator: str, data: Mapping[str, Any]) -> CellInputs:
    """The operator's float64 inputs from GradBench's input object, through the problem's `--inputs` reader (the
    object is that reader's JSON file; a problem without one cannot take GradBench's input)."""
    if problem.reader is None:
        raise EvaluationError(f"adcompare's {problem.name} reads no GradBench input")
    with tempfile.TemporaryDirectory(prefix="adcompare-gradbench-") as folder:
        path = Path(folder) / "input.json"
        path.write_text(json.dumps(data))
        sha256 = file_sha256(path)
        try:  # cached per (problem, path, sha256): cell_inputs below reads the same arrays, not the file again
            dims, _ = read_input_file(problem, str(path), sha256)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EvaluationError(f"not an input of adcompare's {problem.name}: "
                                  f"{str(exc).replace(str(path), 'the input')}") from None
        declared = [name for name, _ in problem.sizes[0].dims]
        size = Size(tuple((name, int(dims[name])) for name in declared), source=str(path), sha256=sha256)
        return cell_inputs(problem, size, operator, DTYPE)


def serve(tool: Tool, lines: Iterable[str], send: Callable[[Response], None]) -> None:
    """Answer each line until `end` or the end of input. A line that is not JSON gets a failure response (with its
    id, where one can be read) and the tool goes on."""
    for line in lines:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            send({"id": None, "success": False, "error": f"malformed message: not JSON ({exc})"})
            continue
        response = tool.respond(message)
        if response is None:
            return
        send(response)

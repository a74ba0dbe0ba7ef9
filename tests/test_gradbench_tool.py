"""`adcompare gradbench-tool` (issue 41) against GradBench's protocol and goldens.

The driver here is written from GradBench's protocol specification (gradbench/gradbench CONTRIBUTING.md,
"Protocol", commit f26651a7), not from its code: one JSON object a line each way, every response carrying its
message's id; `define` answers success true or false (with an error); `evaluate` answers success, the output in the
eval's layout and timings, one `evaluate` entry per run, at least `min_runs` of them and until they add up to
`min_seconds`; any other kind is acknowledged with the id; `end` gets no response.

- Every built-in adapter and variant answers GradBench's own inputs (tests/fixtures/gradbench/inputs, captured from
  its eval scripts: lse, llsq, det, ode, ba, gmm, lstm; ht's JSON of hand1; kmeans's at its first default size,
  from the generator that replays GradBench's draws bit for bit) with outputs equal to GradBench's golden tool's
  (tests/fixtures/gradbench/*.json and inputs/manual_outputs.json, its `manual` tool) in GradBench's JSON layout,
  under GradBench's own measure of difference. These cases run in the adapter's goldens
  worker (tests/test_goldens.py: one framework start for all golden sets), through `Tool.respond`, the object the
  command serves: in the normal run autograd answers every input but ht's complicated hand, and every adapter and
  variant lse and ode (`adapter_cases` says why); everything else, torch.compile included, runs under `-m slow`.
- The command itself, in a process of its own (autograd: no framework start to speak of), holds the protocol: a
  malformed line, an unknown module or function, an input no problem reads and an evaluation that fails each get
  a failure response and the tool answers the next message; stdout carries nothing but responses, even when the
  framework prints on stdout from Python or C.
GradBench's own eval scripts driving the command are not run here (they need GradBench's repository and its C++
golden tool); docs/gradbench-tool.md gives the commands and what they validated.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from adcompare.plugin import registry as plugins

from . import per_adapter
from .conftest import FIXTURES
from .per_adapter import BUILT_IN_ADAPTERS, evaluate_in_worker, one_class_per_adapter, skip_unless_installed

GOLDENS = FIXTURES / "gradbench"
INPUTS = GOLDENS / "inputs"
TOLERANCE = 1e-10  # against the manual tool, both in float64 (GradBench's validator allows 1e-4)
RUNS = 2
# source of the input → (eval, the golden case's selector in tests/fixtures/gradbench/<eval>.json)
SOURCES = {
    "lse_n2500.json.gz": ("lse", {"description": "n=2500"}),
    "llsq_n16_m128.json": ("llsq", {"description": "n=16,m=128"}),
    "det_ell5.json": ("det", {"description": "5"}),
    "ode_n1000_s1.json.gz": ("ode", {"description": "n=1000,s=1"}),
    "kmeans:k10-n1000-d8": ("kmeans", {"description": "k=10,n=1000,d=8"}),
    "ht_simple_small_hand1.json.xz": ("ht", {"variant": "simple", "model": "small", "hand": 1}),
    "ht_complicated_small_hand1.json.xz": ("ht", {"variant": "complicated", "model": "small", "hand": 1}),
    # golden: inputs/manual_outputs.json (GradBench's manual tool run on these very files)
    "ba1_n49_m7776_p31843.json": ("ba", {}),
    "gmm_d2_k5_n100.json": ("gmm", {}),
    "lstm_l1_c64.json": ("lstm", {}),
}
FUNCTIONS = {"lse": ("primal", "gradient"), "llsq": ("primal", "gradient"), "det": ("primal", "gradient"),
             "ode": ("primal", "gradient"), "kmeans": ("cost", "dir"), "ht": ("objective", "jacobian"),
             "ba": ("objective", "jacobian"), "gmm": ("objective", "jacobian"), "lstm": ("objective", "jacobian")}
# The normal run's cases. The layouts are NumPy, the same for every adapter, and every adapter's operators are held
# to these goldens by their own layers (tests/test_gradbench.py, test_ht.py, test_adbench.py): so every input but
# ht's complicated hand goes through one adapter, autograd (no compile, no per-primitive dispatch cost: 3 s for all
# here, where JAX's eager variant takes 40 s), and these through every adapter and variant (the protocol path, and
# ode's primal, a problem of its own — the whole solution vector — under every compiler). The rest runs under slow.
EVERY_VARIANT = ("lse_n2500.json.gz", "ode_n1000_s1.json.gz")
EVERY_INPUT = "autograd"
SLOW_SOURCES = ("ht_complicated_small_hand1.json.xz",)


def gradbench_input(source: str) -> dict:
    """GradBench's input object for a source: a captured file (plain, gzipped or xz), or kmeans's generated one."""
    from adcompare.problems.json_inputs import open_text

    if source.startswith("kmeans:"):
        problem = plugins.load().problem("kmeans")
        values = problem.inputs(problem.size(source.split(":")[1]), "float64")
        return {"points": values["points"].tolist(), "centroids": values["centroids"].tolist()}
    path = INPUTS / source if (INPUTS / source).exists() else GOLDENS / source
    with open_text(path) as f:
        return json.load(f)


def golden(source: str, function: str) -> object:
    evaluation, selector = SOURCES[source]
    if not selector:
        return json.loads((INPUTS / "manual_outputs.json").read_text())["outputs"][source][function]
    cases = json.loads((GOLDENS / f"{evaluation}.json").read_text())["cases"]
    case = next(c for c in cases if all(c.get(k) == v for k, v in selector.items()))
    return case[function]["manual"]


def adapter_cases(adapter_name: str, slow: bool) -> list[tuple[str, str, str]]:
    """(source, function, variant): every source × function × variant of the adapter, the normal run's or the
    slow ones (module docstring)."""
    adapter = plugins.load().adapter(adapter_name)
    out = []
    for variant in adapter.variants:
        for source, (evaluation, _) in SOURCES.items():
            normal = variant not in adapter.slow_variants and source not in SLOW_SOURCES and (
                adapter_name == EVERY_INPUT or source in EVERY_VARIANT)
            if normal != slow:
                out.extend((source, function, variant) for function in FUNCTIONS[evaluation])
    return out


def evaluate(adapter_name: str, cases: list[tuple[str, str, str]]) -> dict[str, object]:
    """In the worker: each case as one evaluate message to a `Tool` of its variant (defined first, as GradBench's
    evals do), the response kept whole."""
    from adcompare.run.gradbench_tool import Tool

    registry = plugins.load()
    adapter = registry.adapter(adapter_name)
    adapter.setup(dtype="float64", device="cpu", threads=1)
    out: dict[str, object] = {}
    for index, (source, function, variant) in enumerate(cases):
        tool = Tool(adapter, variant, "cpu", registry)
        evaluation = SOURCES[source][0]
        define = tool.respond({"id": 0, "kind": "define", "module": evaluation})
        message = {"id": index + 1, "kind": "evaluate", "module": evaluation, "function": function,
                   "input": gradbench_input(source) | {"min_runs": RUNS, "min_seconds": 0}}
        out["/".join((source, function, variant))] = {"define": define, "response": tool.respond(message),
                                                      "id": index + 1}
    return out


def scaled_difference(actual, expected) -> float:
    """GradBench's measure (python/gradbench/gradbench/comparison.py): |x − y| / max(1, |x| + |y|), elementwise."""
    a, b = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a) + np.abs(b)), initial=0.0))


def mismatches(actual, expected, path: str = "output") -> list[str]:
    """Where `actual` is not `expected` as GradBench's validator sees JSON: the same keys, list lengths and types
    (an integer for an integer: ba's sparse indices), numbers within TOLERANCE by `scaled_difference`."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            keys = sorted(actual) if isinstance(actual, dict) else type(actual)
            return [f"{path}: keys {keys} != {sorted(expected)}"]
        return [m for key in expected for m in mismatches(actual[key], expected[key], f"{path}.{key}")]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: not a list of {len(expected)}"]
        return [m for i, (a, e) in enumerate(zip(actual, expected)) for m in mismatches(a, e, f"{path}[{i}]")]
    if isinstance(expected, int) and not isinstance(expected, bool):
        return [] if actual == expected and isinstance(actual, int) else [f"{path}: {actual!r} != {expected!r}"]
    if not isinstance(actual, float):
        return [f"{path}: {actual!r} is not a float"]
    difference = scaled_difference(actual, expected)
    return [] if difference <= TOLERANCE else [f"{path}: {actual!r} != {expected!r} ({difference:.3g})"]


def assert_responses(adapter_name: str, results: dict[str, object]) -> None:
    """Each response is its golden's output in GradBench's layout with its timings, or a failure whose error is
    the reason the adapter declares the operator unsupported in that variant (torch's eager-autograd has no
    `value` of its own)."""
    from adcompare.run.gradbench_evals import EVALS

    assert results, "no case ran"
    adapter = plugins.load().adapter(adapter_name)
    for key, result in results.items():
        source, function, variant = key.split("/")
        assert isinstance(result, dict)
        assert result["define"] == {"id": 0, "success": True}, key
        response = result["response"]
        capability = adapter.capability(EVALS[SOURCES[source][0]].functions[function].operator, variant)
        if not capability.supported:
            assert response["success"] is False and capability.reason in response["error"], f"{key}: {response}"
            continue
        assert response["id"] == result["id"] and response["success"] is True, f"{key}: {response}"
        found = mismatches(response["output"], golden(source, function))
        assert not found, f"{key}: differs from GradBench's manual tool: {found[:5]}"
        names = [t["name"] for t in response["timings"]]
        assert names.count("evaluate") == RUNS and names[-RUNS:] == ["evaluate"] * RUNS, f"{key}: {names}"
        assert "prepare" in names and "first call" in names, f"{key}: {names}"
        assert all(isinstance(t["nanoseconds"], int) and t["nanoseconds"] >= 0 for t in response["timings"])


class AdapterTool:
    """The slow cases through one adapter's worker (the normal run's are tests/test_goldens.py's)."""

    adapter_name = ""

    @pytest.mark.slow
    def test_every_variant_answers_gradbenchs_inputs_with_its_goldens_slow_cases(self):
        skip_unless_installed(self.adapter_name)
        cases = adapter_cases(self.adapter_name, slow=True)
        if not cases:
            pytest.skip(f"adapter {self.adapter_name!r} has no slow case")
        assert_responses(self.adapter_name,
                         evaluate_in_worker("tests.test_gradbench_tool", self.adapter_name, cases, timeout=3600))


globals().update(one_class_per_adapter(AdapterTool, BUILT_IN_ADAPTERS))


# --- the command in a process of its own: the protocol ------------------------------------------------------------

NOISY = """\
import os, sys
from adcompare.plugin.adapter import Adapter
from adcompare.cli.main import main

setup = Adapter.setup

def noisy_setup(self, **kwargs):  # a framework that prints as it loads, from Python and from C
    print("framework noise from Python")
    os.write(1, b"framework noise from C\\n")
    return setup(self, **kwargs)

Adapter.setup = noisy_setup
sys.exit(main(["gradbench-tool", "--adapter", "autograd", "--threads", "1"]))
"""


def session(lines: list[str]) -> tuple[list[str], str, int]:
    """The command's stdout lines, stderr and exit code for these input lines."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", NOISY], input="".join(line + "\n" for line in lines),
                          capture_output=True, text=True, env=env, cwd=per_adapter.ROOT, timeout=600)
    return done.stdout.splitlines(), done.stderr, done.returncode


def test_the_command_speaks_the_protocol_and_serves_on_after_every_error():
    skip_unless_installed("autograd")
    lse = gradbench_input("lse_n2500.json.gz") | {"min_runs": 3, "min_seconds": 0}
    messages = [
        {"id": 0, "kind": "start", "eval": "lse"},
        {"id": 1, "kind": "define", "module": "lse"},
        {"id": 2, "kind": "evaluate", "module": "lse", "function": "primal", "input": lse},
        {"id": 3, "kind": "analysis", "of": 2, "valid": True},
        {"id": 4, "kind": "define", "module": "hello"},
        {"id": 5, "kind": "evaluate", "module": "lse", "function": "hessian", "input": lse},
        {"id": 6, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [], "min_runs": 1}},
        {"id": 7, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"y": [1.0]}},
        {"id": 8, "kind": "evaluate", "module": "lse", "function": "gradient", "input": [1.0]},
        {"id": 9, "kind": "evaluate", "module": "lse", "function": "primal", "input": lse | {"min_runs": 0}},
        {"id": 10, "kind": "evaluate", "module": "det", "function": "gradient",
         "input": {"A": [1.0, 2.0, 3.0, float("nan")], "ell": 2}},
        {"kind": "start"},
        {"id": 12, "kind": "evaluate", "module": "lse", "function": "gradient",
         "input": lse | {"min_runs": 1, "min_seconds": 0.05}},
        {"id": 13, "kind": "end"},
        {"id": 14, "kind": "define", "module": "lse"},  # after end: never answered
    ]
    lines = [json.dumps(m) for m in messages]
    lines.insert(11, "not json {")
    out, err, code = session(lines)
    assert code == 0, err[-2000:]
    responses = [json.loads(line) for line in out]  # every stdout line is one JSON object: a response
    assert all(isinstance(r, dict) for r in responses)
    by_id = {r["id"]: r for r in responses}
    assert [r["id"] for r in responses] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, None, None, 12]
    assert by_id[0]["tool"] == "adcompare-autograd-eager" and by_id[0]["config"]["dtype"] == "float64"
    assert by_id[1] == {"id": 1, "success": True} and by_id[3] == {"id": 3}
    primal = by_id[2]
    assert primal["success"] is True
    assert scaled_difference(primal["output"], golden("lse_n2500.json.gz", "primal")) <= TOLERANCE
    assert [t["name"] for t in primal["timings"]].count("evaluate") == 3
    failures = {i: by_id[i] for i in (4, 5, 6, 7, 8, 9, 10)}
    assert all(r["success"] is False and r["error"] and "Traceback" not in r["error"] for r in failures.values())
    assert "hello" in failures[4]["error"] and "lse" in failures[4]["error"]
    assert "hessian" in failures[5]["error"] and "primal, gradient" in failures[5]["error"]
    assert "GradBench's lse input needs x" in failures[6]["error"] and "input.json" not in failures[6]["error"]
    assert "not GradBench's lse input" in failures[7]["error"]
    assert "JSON object" in failures[8]["error"] and "min_runs" in failures[9]["error"]
    assert "NaN" in failures[10]["error"]
    assert [r["success"] for r in responses if r["id"] is None] == [False, False]
    assert "malformed" in responses[11]["error"] and "malformed" in responses[12]["error"]
    gradient = by_id[12]
    assert gradient["success"] is True
    assert scaled_difference(gradient["output"], golden("lse_n2500.json.gz", "gradient")) <= TOLERANCE
    runs = [t["nanoseconds"] for t in gradient["timings"] if t["name"] == "evaluate"]
    assert sum(runs) >= 0.05e9  # min_seconds: runs until the timed runs add up to it
    assert "framework noise from Python" in err and "framework noise from C" in err


def test_a_variant_the_adapter_lacks_is_refused_in_one_line_before_serving():
    skip_unless_installed("autograd")
    done = subprocess.run([sys.executable, "-m", "adcompare", "gradbench-tool", "--adapter", "autograd",
                           "--variant", "compiled"], input="", capture_output=True, text=True,
                          cwd=per_adapter.ROOT, timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    assert "variant 'compiled'" in done.stderr and "--variant eager" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_nested_eval_is_declined_at_define_by_a_variant_that_cannot_stage_its_loops():
    """saddle's solver loops with adcompare.while_loop: JAX's jit stages it, torch.compile cannot (the adapter
    declares every nested order unsupported there, with the reason), so torch compiled declines at define."""
    from adcompare.run.gradbench_tool import Tool

    registry = plugins.load()  # nothing runs: no framework is imported
    torch = Tool(registry.adapter("torch"), "compiled", "cpu", registry)
    response = torch.respond({"id": 1, "kind": "define", "module": "saddle"})
    assert response["success"] is False and "use variant eager" in response["error"]
    assert torch.respond({"id": 2, "kind": "define", "module": "lse"}) == {"id": 2, "success": True}
    jax = Tool(registry.adapter("jax"), "compiled", "cpu", registry)
    assert jax.respond({"id": 3, "kind": "define", "module": "saddle"}) == {"id": 3, "success": True}


def test_every_gradbench_eval_maps_to_a_problem_that_reads_its_input_and_declares_its_operators():
    from adcompare.run.gradbench_evals import EVALS

    registry = plugins.load()
    assert set(EVALS) == {"lse", "llsq", "det", "ode", "kmeans", "gmm", "ba", "ht", "lstm", "saddle", "particle"}
    for name, entry in EVALS.items():
        problem = registry.problem(entry.problem)
        assert problem.reader is not None, name
        for function in entry.functions.values():
            assert problem.operators is None or function.operator in problem.operators, (name, function)

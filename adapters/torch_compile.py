"""torch's `compiled` variant: torch.compile(fullgraph=True, dynamic=False) of a torch.func callable, held to one
graph. Dynamo caches per code object and every torch.func wrapper shares one, so `torch._dynamo.reset()` runs
before each compiled prepare; without it the recompile limit is hit and Dynamo silently runs eagerly. A graph
break, a recompile in steady state or a first call that compiled nothing fails the cell instead; what Dynamo and
inductor did (graphs, breaks, recompiles, cache hits) goes into the cell's details.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from adcompare.model.errors import CellFailure, UnsupportedOperation
from adcompare.plugin.adapter import Prepared

from .torch_namespace import WHILE_LOOP_REFUSED, WHILE_LOOP_UNDER_COMPILE

COMPILE_METHOD = "first call minus steady state"  # torch.compile compiles lazily, on the first call


def _traced_exception(exc: BaseException) -> str:
    """The text of a Dynamo error and the exceptions behind it: an exception raised in traced code reaches the
    caller as Dynamo's `Unsupported("Observed exception")`, caused by an Observed…Error whose message holds the
    original (torch 2.13); torch 2.11 names the original's message only in the Unsupported's own debug context."""
    texts: list[str] = [str(exc)]
    seen = exc.__cause__ or exc.__context__
    while seen is not None and len(texts) < 10:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(texts)


def _counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {group: dict(values) for group, values in counters.items()}


def _inductor_cache_dir() -> Path:
    """Where inductor will look; the worker points TORCHINDUCTOR_CACHE_DIR at a per-run folder."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # private module moved: fall back to the variable inductor documents
        return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")).resolve()
    return Path(cache_dir())


def _populated(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _compile_details(before: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """What Dynamo and inductor did since `before`: graphs, graph breaks, recompiles, cache hits."""
    after = _counters()

    def delta(group: str, key: str | None = None) -> int:
        new, old = after.get(group, {}), before.get(group, {})
        keys = [key] if key else set(new) | set(old)
        return sum(new.get(k, 0) - old.get(k, 0) for k in keys)

    graphs = delta("stats", "unique_graphs")
    hits, misses = delta("inductor", "fxgraph_cache_hit"), delta("inductor", "fxgraph_cache_miss")
    state = "warm" if hits and not misses else "cold" if misses and not hits else "mixed" if hits else "unused"
    details = {
        "graphs_compiled": graphs,
        "recompiles": max(0, graphs - 1),
        "graph_breaks": delta("graph_break"),
        "fallbacks": 0 if graphs else 1,
        "fxgraph_cache_hits": hits,
        "fxgraph_cache_misses": misses,
        "aot_autograd_cache_hits": delta("aot_autograd", "autograd_cache_hit"),
        "inductor_cache": state,
    }
    if not graphs:
        raise CellFailure("torch.compile compiled no graph on the first call, so the cell would run eagerly; "
                          "check for torch.compiler.disable or a skipped frame")
    if details["graph_breaks"] or details["recompiles"]:
        raise CellFailure(f"torch.compile: {details['graph_breaks']} graph break(s), {details['recompiles']} "
                          f"recompile(s) on the first call; the compiled variant must be one graph")
    return details


def isa_probe_cache_dir() -> Path | None:
    """Where inductor's CPU probe keeps its test programs across runs: `$XDG_CACHE_HOME/adcompare/inductor-isa-probe`
    (default `~/.cache/...`), made if missing; None where it cannot be (a read-only home: the probe then builds in
    the run's cache, as before). Inductor keys the programs by compiler, flags and torch version and skips the
    build when one exists (pytorch#100378), as a user's own default cache directory does; a compiled cell's own
    graphs still go to the run's fresh cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "adcompare" / "inductor-isa-probe"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def probe_cpu_isa() -> float | None:
    """Seconds inductor's one-time probe of the CPU's vector instructions took, or None where this process had
    already probed or inductor's private module moved. Done in prepare, so that the first compiled cell's compile
    time (first call minus steady state) is its own graph's: in `adcompare report` it was 9.5 s for exp_dot_loss
    n100 grad against 1.1 s for jacrev, the next cell. The probe builds a test program per instruction set (9-11 s
    of a 2-core machine) into `isa_probe_cache_dir()`, so only a machine's first run pays that; later ones load the
    programs (~1 s)."""
    try:
        from torch._inductor import cpu_vec_isa
    except ImportError:
        return None
    probe = getattr(cpu_vec_isa, "valid_vec_isa_list", None)
    if probe is None or getattr(probe, "cache_info", lambda: None)() is None or probe.cache_info().currsize:
        return None
    run_cache, kept = os.environ.get("TORCHINDUCTOR_CACHE_DIR"), isa_probe_cache_dir()
    if kept is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(kept)  # read by inductor at each use
    began = time.perf_counter()
    try:
        probe()
    finally:
        if run_cache is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = run_cache
    return time.perf_counter() - began


def prepare_compiled(torch: ModuleType, fn: Callable[..., Any], args: tuple[Any, ...],
                     details: dict[str, Any], device: str = "cpu") -> Prepared:
    """`fn(*args)` under torch.compile, compiled on its first call; a graph break fails the cell."""
    probed = probe_cpu_isa() if device == "cpu" else None
    if probed is not None:
        details = {**details, "cpu_isa_probe_seconds": round(probed, 4)}
    torch._dynamo.reset()  # fresh per cell: torch.func wrappers share one code object (see the module docstring)
    torch._dynamo.config.fail_on_recompile_limit_hit = True  # never fall back to eager silently
    torch.compiler.set_stance("default")  # a compiled cell never closed (run_once's callers) left its stance
    cache = _inductor_cache_dir()
    details = {**details, "inductor_cache_dir": str(cache),
               "inductor_cache_dir_before": "populated" if _populated(cache / "fxgraph") else "empty"}
    before = _counters()
    compiled = torch.compile(fn, fullgraph=True, dynamic=False)

    def run() -> Any:
        try:
            return compiled(*args)
        except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as exc:
            if WHILE_LOOP_REFUSED in _traced_exception(exc):  # adcompare.while_loop's refusal, raised in Dynamo
                raise UnsupportedOperation(WHILE_LOOP_UNDER_COMPILE) from exc
            # Unsupported: a construct Dynamo cannot trace; UserError: a guard on a data-dependent value
            # (Python control flow on a tensor). Either one breaks the graph, which fullgraph forbids.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CellFailure(f"graph break under torch.compile(fullgraph=True): {first}; the compiled "
                              f"variant does not fall back to eager") from exc

    def after_first_call() -> Mapping[str, Any]:
        found = _compile_details(before)
        torch.compiler.set_stance("fail_on_recompile")  # a recompile during timing raises, not hides
        return found

    def close() -> None:  # the process goes on: pytest-benchmark's, a conformance test's, the user's own code
        torch.compiler.set_stance("default")

    return Prepared(run, compile_seconds=None, compile_method=COMPILE_METHOD, details=details,
                    after_first_call=after_first_call, close=close)

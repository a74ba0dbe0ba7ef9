"""The route one `adcompare run` and one `adcompare report` take through the sub-packages, traced call by call.

Issue 38 asked for a straight route: the CLI parses, calls and prints; run/ does not call back up into cli/;
report/ renders data analysis/ computed and does not call into analysis/ or verify/. This traces the real commands
in-process (sys.setprofile) and counts the distinct call edges (caller function → callee function) that go *up*
the pipeline (model → plugin → verify → store → study → run → analysis → report → cli), i.e. callbacks, and the
edges from report/ into analysis/. Distinct edges, not calls: a callback called once per cell is one edge.
Run: python benchmarks/call_route.py
"""
from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

from adcompare.cli.main import main

PIPELINE = ("model", "plugin", "verify", "store", "study", "run", "analysis", "report", "cli")


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "adcompare" and parts[1] in PIPELINE else None


def traced(argv: list[str]) -> set[tuple[str, str]]:
    """Every distinct (caller, callee) pair of adcompare functions the command calls, as 'module:function'."""
    edges: set[tuple[str, str]] = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if layer(callee) and layer(caller):
            edges.add((f"{caller}:{frame.f_back.f_code.co_name}", f"{callee}:{frame.f_code.co_name}"))

    sys.setprofile(profile)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return edges


def report(name: str, edges: set[tuple[str, str]]) -> None:
    up = [(a, b) for a, b in edges
          if PIPELINE.index(layer(b.split(":")[0]) or "model") > PIPELINE.index(layer(a.split(":")[0]) or "model")]
    into = Counter(layer(b.split(":")[0]) for a, b in edges if layer(a.split(":")[0]) != layer(b.split(":")[0]))
    print(f"{name}: {len(edges)} distinct call edges between adcompare functions")
    print(f"  entering each sub-package from another: {dict(sorted(into.items()))}")
    print(f"  edges up the pipeline (callbacks): {len(up)}")
    for a, b in sorted(up):
        print(f"    {a} → {b}")
    to_analysis = sorted((a, b) for a, b in edges if layer(a.split(':')[0]) == "report"
                         and layer(b.split(":")[0]) in ("analysis", "verify"))
    print(f"  report/ → analysis/ or verify/: {len(to_analysis)}")
    for a, b in to_analysis:
        print(f"    {a} → {b}")


if __name__ == "__main__":
    out = Path(tempfile.mkdtemp())
    results = out / "r.jsonl"
    run = traced(["run", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad", "--adapter", "autograd",
                  "--variant", "eager", "--dtype", "float64", "-o", str(results)])  # with its progress bar
    report("adcompare run", run)
    report("adcompare report", traced(["report", str(results), "-o", str(out / "report"), "--no-progress"]))

"""`adcompare gradbench-tool`: one adapter as a GradBench tool, speaking the tool side of GradBench's protocol on
stdin and stdout (adcompare/run/gradbench_tool.py), so that GradBench's own evals drive adcompare's adapters:

    gradbench run --eval "gradbench eval lse" --tool "adcompare gradbench-tool --adapter jax --variant compiled"

Stdout carries protocol messages only: before any framework loads, the protocol gets a private copy of stdout and
file descriptor 1 is pointed at stderr, so that what a framework prints (from Python or C) lands on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from adcompare.model.errors import UsageError
from adcompare.plugin import registry as plugins
from adcompare.run.gradbench_tool import Tool, serve
from adcompare.run.worker_handle import worker_environment


def command(args: argparse.Namespace) -> int:
    registry = plugins.load(tuple(args.plugin))
    adapter = registry.adapter(args.adapter)
    variant = args.variant or next(iter(adapter.variants))
    if variant not in adapter.variants:
        why = adapter.missing_variants.get(variant) or f"{adapter.name} has no such variant"
        raise UsageError(f"adapter {adapter.name!r}: variant {variant!r} is unsupported ({why}); use --variant "
                         f"{' or --variant '.join(adapter.variants)}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: give a number of threads ≥ 1")
    available = adapter.available()
    if not available.installed:
        raise UsageError(f"adapter {adapter.name!r}: {available.reason}")
    threads = args.threads or len(os.sched_getaffinity(0))
    # The worker's environment (thread policy, no GPU memory grab, quiet frameworks), set before the framework loads
    os.environ.update(worker_environment(threads, None))
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    adapter.setup(dtype="float64", device=args.device, threads=threads)
    unavailable = adapter.device_unavailable(args.device)
    if unavailable:
        raise UsageError(f"--device {args.device}: {unavailable}")

    def send(response: dict) -> None:
        protocol.write(json.dumps(response) + "\n")
        protocol.flush()

    try:
        serve(Tool(adapter, variant, args.device, registry), sys.stdin, send)
    except BrokenPipeError:  # the eval went away: nothing left to answer
        pass
    return 0

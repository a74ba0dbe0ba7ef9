"""What planning the full suite costs: `adcompare run --suite full --dry-run` wall time and peak traced memory.

Goal (issue 16): ≤ 5 s and < 200 MB. Wall time is of the real command in a fresh interpreter (imports included,
median of --repeat runs); memory is tracemalloc's peak over the same command run in this process (CLI parsing,
plugin loading, the plan, the estimate and the shard split). Before issue 16 the planner evaluated every problem
through NumPy once per cell for the memory pre-flight: killed after 31 minutes without printing anything.
Run: python benchmarks/plan_cost.py [--suite full] [--repeat 3]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import time
import tracemalloc

from adcompare.cli.main import main


def wall_seconds(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "adcompare", *argv], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def peak_traced_bytes(argv: list[str]) -> int:
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(argv) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run(suite: str, repeat: int) -> dict:
    argv = ["run", "--suite", suite, "--dry-run", "--no-progress", "-o", "/dev/null/none.jsonl"]
    times = wall_seconds(argv, repeat)
    peak = peak_traced_bytes(argv)
    return {"suite": suite, "wall_seconds_median": statistics.median(times), "wall_seconds": times,
            "peak_traced_mb": peak / 1e6}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="full")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    result = run(args.suite, args.repeat)
    print(f"{result['suite']}: dry-run {result['wall_seconds_median']:.2f} s (median of {args.repeat}: "
          f"{', '.join(f'{t:.2f}' for t in result['wall_seconds'])}), peak traced {result['peak_traced_mb']:.0f} MB "
          f"(goal ≤ 5 s, < 200 MB)")

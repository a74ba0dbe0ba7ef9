"""Is the device sync inside adcompare's timed region? Proven against the GPU's own clocks (needs a CUDA GPU).

For GPU cells whose kernels take >= 1 ms, adcompare's steady-state median (adcompare.run.timing.measure, the same
code a worker runs) must be >= 0.9x the kernel time the device itself measured, and for torch agree within 5% with
torch.utils.benchmark timing the same callable the same way (`sync(run())`; its plain `run()` figure, where the
next launch overlaps the last call's GPU work, is printed beside it):

- torch: CUDA events recorded around each call on the current stream (`torch.cuda.Event(enable_timing=True)`);
- JAX: the profiler's device trace (`jax.profiler.trace(..., create_perfetto_trace=True)`): the summed durations of
  the GPU kernels per call, which is a lower bound of the device time (gaps between kernels are not counted).

Without the sync, adcompare's median would be the launch time (tens of µs) and the ratios fall far below 0.9.

    python benchmarks/gpu_sync.py            # prints a table; exit 1 if a ratio is off its bound
"""
from __future__ import annotations

import glob
import gzip
import json
import math
import statistics
import sys
import tempfile

from adcompare.model.problem import problem as declare_problem
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import Request
from adcompare.run.timing import first_call, measure
from adcompare.verify.cell_inputs import cell_inputs

SIZES = (2048, 4096, 8192)
POLICY = TimingPolicy(min_time=0.5, max_time=3.0)
ROUNDS = 3  # the three clocks take turns, and each figure is the median of its rounds: GPU clocks drift by ~5 %


@declare_problem(sizes=list(SIZES), wrt="x", operators=("value", "grad"), name="gpu_matmul_tanh")
def gpu_matmul_tanh(x, /, *, a, xp):
    """sum(tanh(a @ tanh(a @ x))): two n×n products, compute-bound at n >= 2048."""
    return xp.sum(xp.tanh(xp.matmul(a, xp.tanh(xp.matmul(a, x)))))


@gpu_matmul_tanh.inputs
def _(rng, n):

    return {"x": rng.standard_normal((n, n)), "a": rng.standard_normal((n, n)) / math.sqrt(n)}


PROBLEM = gpu_matmul_tanh.build()


def torch_event_ms(prepared, sync, repeats: int = 30) -> float:
    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = prepared.run()
        end.record()
        sync(out)
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def torch_benchmark_ms(prepared, sync, *, per_call_sync: bool) -> float:
    """torch.utils.benchmark's median: `run()` as it is (Timer syncs once per block, so the next call's launch
    overlaps the GPU work of the last), or `sync(run())` as adcompare times it (sync inside every call)."""
    from torch.utils import benchmark

    stmt = "sync(run())" if per_call_sync else "run()"
    timer = benchmark.Timer(stmt=stmt, globals={"run": prepared.run, "sync": sync})
    return timer.blocked_autorange(min_run_time=0.5).median * 1e3


def jax_kernel_ms(prepared, sync, repeats: int = 20) -> float:
    """Summed GPU kernel durations per call from the profiler's perfetto trace."""
    import jax

    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            for _ in range(repeats):
                sync(prepared.run())
        path = glob.glob(f"{folder}/**/*.trace.json.gz", recursive=True)[0]
        trace = json.loads(gzip.open(path).read())
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu_pids = {pid for pid, name in names.items() if "/device:GPU" in name or "GPU" in name.upper()}
    total_us = sum(e.get("dur", 0) for e in trace["traceEvents"]
                   if e.get("ph") == "X" and e.get("pid") in gpu_pids)
    return total_us / 1e3 / repeats


def main() -> int:
    registry = plugins.load()
    rows, bad = [], []
    for name in ("torch", "jax"):
        adapter = registry.adapters[name]
        adapter.setup(dtype="float32", device="cuda", threads=1)
        if (why := adapter.device_unavailable("cuda")) is not None:
            print(f"{name}: {why}")
            continue
        for variant in ("eager", "compiled"):
            for operator in ("value", "grad"):
                for size in PROBLEM.sizes:
                    inputs = cell_inputs(PROBLEM, size, operator, "float32")
                    prepared = adapter.prepare(Request(PROBLEM, operator, variant, "cuda", "float32", inputs))
                    _, first = first_call(prepared, adapter.sync)
                    rounds = []
                    for _ in range(ROUNDS):
                        ours = measure(prepared, adapter.sync, first, compiled=variant != "eager", policy=POLICY)
                        if name == "torch":
                            rounds.append((ours.median * 1e3, torch_event_ms(prepared, adapter.sync),
                                           torch_benchmark_ms(prepared, adapter.sync, per_call_sync=True),
                                           torch_benchmark_ms(prepared, adapter.sync, per_call_sync=False)))
                        else:
                            rounds.append((ours.median * 1e3, jax_kernel_ms(prepared, adapter.sync), None, None))
                    ours_ms, device_ms, other_ms, loose_ms = (
                        None if column[0] is None else statistics.median(column) for column in zip(*rounds))
                    if device_ms < 1.0:
                        continue  # the claim is for kernels of >= 1 ms
                    ratio = ours_ms / device_ms
                    agree = None if other_ms is None else ours_ms / other_ms
                    rows.append((name, variant, operator, size.label, ours_ms, device_ms, ratio, other_ms, agree,
                                 loose_ms))
                    print(*rows[-1], sep="\t", flush=True)  # progress, in case the run is cut short
                    if ratio < 0.9 or (agree is not None and abs(agree - 1) > 0.05):
                        bad.append(rows[-1])
    print(f"{'adapter':8} {'variant':9} {'op':6} {'size':6} {'adcompare ms':>13} {'device ms':>10} "
          f"{'ratio':>6} {'t.u.b. synced ms':>17} {'agree':>6} {'t.u.b. run() ms':>16}")
    for name, variant, op, size, ours, device, ratio, other, agree, loose in rows:
        print(f"{name:8} {variant:9} {op:6} {size:6} {ours:13.3f} {device:10.3f} {ratio:6.3f} "
              f"{'' if other is None else f'{other:.3f}':>17} {'' if agree is None else f'{agree:.3f}':>6} "
              f"{'' if loose is None else f'{loose:.3f}':>16}")
    print(f"{len(rows)} cells with >= 1 ms of device time; {len(bad)} off the bounds (ratio >= 0.9, agree within 5%)")
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())

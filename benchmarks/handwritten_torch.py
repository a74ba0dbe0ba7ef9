"""The torch adapter's prepared callables against hand-written PyTorch on exp_dot_loss (n = 10,000, float32).

Run:  python benchmarks/handwritten_torch.py [--threads 1] [--operators grad,jacrev] [--cache-dir DIR]

Times every operator in each variant (eager = torch.func, eager-autograd = classic torch.autograd, compiled =
torch.compile of the torch.func function) with one loop for all: calls per block calibrated so a block lasts
>= 20 ms, the sync inside every call, the median and IQR of per-call block times. Then `grad` against the
fastest hand-written forms: torch.autograd.grad on plain torch ops, and the closed-form gradient (no AD at all).
For compile time (first call minus steady state) cold vs warm, run it twice with the same --cache-dir: the first
run finds the inductor cache empty, the second finds it populated (each cell records which).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

OPERATORS = ("value", "grad", "jvp", "vjp", "jacrev", "hvp", "jacfwd")  # hessian: 10⁸ entries, add by hand
VARIANTS = ("eager", "eager-autograd", "compiled")


def timeit_blocks(run: Callable[[], Any], sync: Callable[[Any], None], *, block_s: float = 0.02,
                  min_s: float = 1.0, min_blocks: int = 15, max_s: float = 10.0) -> tuple[float, float, int]:
    """Median and IQR (seconds per call) over blocks of calibrated length; the sync is inside every call."""
    for _ in range(3):  # warm-up: allocator, caches
        sync(run())
    calls = []
    for _ in range(5):  # the median of a few single calls: one preempted call must not set the block size
        start = time.perf_counter()
        sync(run())
        calls.append(time.perf_counter() - start)
    per_call = max(statistics.median(calls), 1e-7)
    number = max(1, math.ceil(block_s / per_call))
    samples: list[float] = []
    spent = 0.0
    while (spent < min_s or len(samples) < min_blocks) and spent < max_s:
        start = time.perf_counter()
        for _ in range(number):
            sync(run())
        elapsed = time.perf_counter() - start
        spent += elapsed
        samples.append(elapsed / number)
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
    return statistics.median(samples), q[2] - q[0], number


def handwritten(torch: Any, x, x_star) -> dict[str, Callable[[], Any]]:
    """The forms an expert writes for ∇ sin(exp(x*·x/√n)), fastest first as far as we know."""
    n = x.shape[-1]
    inv = 1.0 / math.sqrt(n)
    leaf = x.detach().clone().requires_grad_(True)

    def autograd_grad():
        return torch.autograd.grad(torch.sin(torch.exp(torch.dot(x_star, leaf) * inv)), leaf)[0]

    def closed_form():  # d/dx sin(e^s) = cos(e^s)·e^s·x*/√n with s = x*·x/√n
        e = torch.exp(torch.dot(x_star, x) * inv)
        return x_star * (torch.cos(e) * e * inv)

    return {"hand: torch.autograd.grad, plain torch ops": autograd_grad,
            "hand: closed-form gradient (no AD)": closed_form}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cache-dir", help="TORCHINDUCTOR_CACHE_DIR (default: a fresh temporary folder)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # "operator/variant" or "hand": one child process
    args = parser.parse_args(argv)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="inductor-")
    if args.cell is None:
        return parent(args)
    return hand_cell(args) if args.cell == "hand" else adapter_cell(args, *args.cell.split("/"))


def adapter_cell(args: argparse.Namespace, operator: str, variant: str) -> int:
    """One prepared cell of the adapter: a table row, then `MEDIAN <seconds>` for the parent."""
    from adcompare import plugins
    from adcompare.adapter import Request
    from adcompare.inputs import cell_inputs

    registry = plugins.load()
    adapter = registry.adapter("torch")
    adapter.setup(dtype="float32", device="cpu", threads=args.threads)
    prob = registry.problem("exp_dot_loss")
    cap = adapter.capability(operator, variant)
    if not cap.supported:
        print(f"{operator:<9} {variant:<15} {'—':>11} {'':>9} {'':>9} {'':>12} {'':>9}  unsupported")
        return 0
    inputs = cell_inputs(prob, prob.size(f"n{args.n}"), operator, "float32")
    prepared = adapter.prepare(Request(prob, operator, variant, "cpu", "float32", inputs))
    start = time.perf_counter()
    adapter.sync(prepared.run())
    first = time.perf_counter() - start
    details = dict(prepared.details)
    if prepared.after_first_call is not None:
        details.update(prepared.after_first_call())
    median, iqr, number = timeit_blocks(prepared.run, adapter.sync)
    compiled = variant == "compiled"
    compile_s = f"{first - median:9.2f}" if compiled else f"{'':>9}"
    note = (f"inductor cache dir {details['inductor_cache_dir_before']}, fx graph {details['inductor_cache']}, "
            f"recompiles {details['recompiles']}" if compiled else "")
    note += " (scalar fix)" if "scalar_fix" in details else ""
    print(f"{operator:<9} {variant:<15} {median * 1e6:11.1f} {iqr * 1e6:9.1f} {number:9d} {first:12.3f} "
          f"{compile_s}  {note}")
    print(f"MEDIAN {median!r}")
    return 0


def hand_cell(args: argparse.Namespace) -> int:
    import torch

    from adcompare import plugins
    from adcompare.inputs import cell_inputs

    torch.set_num_threads(args.threads)
    prob = plugins.load().problem("exp_dot_loss")
    inputs = cell_inputs(prob, prob.size(f"n{args.n}"), "grad", "float32")
    x, x_star = torch.tensor(inputs.wrt), torch.tensor(inputs.constants["x_star"])
    for label, fn in handwritten(torch, x, x_star).items():
        print(f"HAND {timeit_blocks(fn, lambda out: None)[0]!r} {label}")  # CPU: nothing to sync
    return 0


def child(args: argparse.Namespace, cell: str) -> tuple[int, list[str]]:
    import subprocess

    cmd = [sys.executable, __file__, "--threads", str(args.threads), "--n", str(args.n), "--cell", cell,
           "--cache-dir", os.environ["TORCHINDUCTOR_CACHE_DIR"]]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return done.returncode, done.stdout.splitlines()


def parent(args: argparse.Namespace) -> int:
    """One child process per cell: compiled code can crash the interpreter (a SIGSEGV is a row, not the end)."""
    import torch

    print(f"torch {torch.__version__}, {args.threads} thread(s), exp_dot_loss n={args.n} float32, "
          f"inductor cache {os.environ['TORCHINDUCTOR_CACHE_DIR']}")
    print(f"{'operator':<9} {'variant':<15} {'median µs':>11} {'IQR µs':>9} {'calls/blk':>9} "
          f"{'first call s':>12} {'compile s':>9}  notes", flush=True)
    grad: dict[str, float] = {}
    for operator in args.operators.split(","):
        for variant in args.variants.split(","):
            code, lines = child(args, f"{operator}/{variant}")
            for line in lines:
                if line.startswith("MEDIAN "):
                    if operator == "grad":
                        grad[variant] = float(line.split()[1])
                else:
                    print(line, flush=True)
            if code:
                print(f"{operator:<9} {variant:<15} crashed (exit status {code})", flush=True)
    if not grad:
        return 0
    _, lines = child(args, "hand")
    hand = {line.split(" ", 2)[2]: float(line.split()[1]) for line in lines if line.startswith("HAND ")}
    print("\ngrad against hand-written PyTorch (same timing loop, own process each):")
    for label, seconds in hand.items():
        print(f"  {label:<45} {seconds * 1e6:9.1f} µs")
    ad = hand["hand: torch.autograd.grad, plain torch ops"]
    for variant, seconds in grad.items():
        print(f"  adapter grad, {variant:<15} {seconds * 1e6:9.1f} µs = {seconds / ad:5.2f}× hand autograd.grad, "
              f"{seconds / min(hand.values()):5.2f}× closed form")
    return 0


if __name__ == "__main__":
    sys.exit(main())

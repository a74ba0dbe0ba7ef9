"""The autograd adapter's prepared callables against hand-written autograd on exp_dot_loss (n = 10,000).

Run:  OMP_NUM_THREADS=1 python benchmarks/handwritten_autograd.py [--operators grad,jvp] [--dtypes float64]

Every operator is timed with the harness's own loop (adcompare.timing.measure: warm-up, calls per block calibrated
so a block lasts >= 20 ms, median and IQR of per-call block times; NumPy is synchronous, so there is nothing to
sync). Then `grad` against the forms an expert writes by hand: `autograd.grad` of the loss in plain
autograd.numpy, and the closed-form gradient in NumPy (no AD at all). The adapter and the hand-written call are
timed in alternating rounds, so drift on a shared machine hits both alike; the ratio is the median over rounds.
Thread variables default to 1 (set before NumPy loads); export them to change that.
"""
from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

# hessian would be 10⁸ entries (0.8 GB in float64) from 10,000 VJPs: add it by hand with a smaller --n
OPERATORS = ("value", "grad", "jvp", "vjp", "jacrev", "hvp", "jacfwd")
POLICY = dict(warmup_time=0.1, block_time=0.02, min_time=1.0, max_time=10.0, min_samples=15)


def handwritten(autograd: Any, anp: Any, x: np.ndarray, x_star: np.ndarray) -> dict[str, Callable[[], Any]]:
    """∇ sin(exp(x*·x/√n)) as an expert writes it."""
    inv = 1.0 / math.sqrt(x.shape[-1])
    grad = autograd.grad(lambda t: anp.sin(anp.exp(anp.dot(x_star, t) * inv)))

    def closed_form():  # d/dx sin(e^s) = cos(e^s)·e^s·x*/√n with s = x*·x/√n
        e = np.exp(np.dot(x_star, x) * inv)
        return x_star * (np.cos(e) * e * inv)

    return {"hand: autograd.grad, plain autograd.numpy": lambda: grad(x),
            "hand: closed-form gradient (no AD)": closed_form}


def measure(run: Callable[[], Any], policy: Any) -> tuple[float, float, int]:
    from adcompare import timing
    from adcompare.adapter import Prepared

    prepared = Prepared(run)
    _, first = timing.first_call(prepared, lambda out: None)
    t = timing.measure(prepared, lambda out: None, first, compiled=False, policy=policy)
    return t.median, t.iqr, t.number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds for grad vs hand-written")
    args = parser.parse_args(argv)

    import autograd
    import autograd.numpy as anp

    from adcompare import plugins
    from adcompare.adapter import Request
    from adcompare.inputs import cell_inputs
    from adcompare.timing import TimingPolicy

    policy = TimingPolicy(**POLICY)
    registry = plugins.load()
    adapter = registry.adapter("autograd")
    prob = registry.problem("exp_dot_loss")
    size = prob.size(f"n{args.n}")
    print(f"autograd {adapter.versions()['autograd']}, numpy {np.__version__}, exp_dot_loss n={args.n}, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    print(f"{'operator':<8} {'dtype':<8} {'median µs':>12} {'IQR µs':>10} {'calls/blk':>9}  result  support")
    for dtype in args.dtypes.split(","):
        adapter.setup(dtype=dtype, device="cpu", threads=1)
        for operator in args.operators.split(","):
            inputs = cell_inputs(prob, size, operator, dtype)
            prepared = adapter.prepare(Request(prob, operator, "eager", "cpu", dtype, inputs))
            start = time.perf_counter()
            prepared.run()
            first = time.perf_counter() - start
            result = prepared.after_first_call()["result_dtype"]
            cap = adapter.capability(operator, "eager")
            if first > 5.0:  # one call this long would take minutes to time in blocks
                print(f"{operator:<8} {dtype:<8} {first * 1e6:12.0f} {'(1 call)':>10} {'':>9}  {result}  {cap.support}")
                continue
            median, iqr, number = measure(prepared.run, policy)
            print(f"{operator:<8} {dtype:<8} {median * 1e6:12.1f} {iqr * 1e6:10.1f} {number:9d}  {result}  "
                  f"{cap.support}", flush=True)

    print(f"\ngrad against hand-written code, {args.rounds} alternating rounds (median per round, µs):")
    for dtype in args.dtypes.split(","):
        inputs = cell_inputs(prob, size, "grad", dtype)
        prepared = adapter.prepare(Request(prob, "grad", "eager", "cpu", dtype, inputs))
        hand = handwritten(autograd, anp, inputs.wrt, inputs.constants["x_star"])
        forms = {"adapter grad": prepared.run, **hand}
        rounds: dict[str, list[float]] = {label: [] for label in forms}
        for _ in range(args.rounds):
            for label, fn in forms.items():
                rounds[label].append(measure(fn, policy)[0])
        ad = rounds["hand: autograd.grad, plain autograd.numpy"]
        for label, samples in rounds.items():
            ratio = statistics.median(a / h for a, h in zip(samples, ad))
            median = statistics.median(samples) * 1e6
            print(f"  {dtype:<8} {label:<45} {median:9.1f}   {ratio:5.2f}× hand autograd.grad"
                  f"   rounds: {', '.join(f'{s * 1e6:.1f}' for s in samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

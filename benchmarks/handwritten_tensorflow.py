"""The TensorFlow adapter's prepared callables on exp_dot_loss (n = 10,000, float32), and grad against hand-written TF.

Run:  python benchmarks/handwritten_tensorflow.py [--operators grad,jvp] [--variants eager,graph] [--n 10000]

Every operator is timed in every variant with the harness's own loop (adcompare.timing.measure: warm-up, calls per
block calibrated so a block lasts >= 20 ms, median and IQR of per-call block times, the adapter's sync inside).
jacfwd and hessian are left out by default: at n = 10,000 they build 10⁸-entry results from 10,000 vectorised
JVPs/VJPs (add them with --operators and a smaller --n). Then `grad` against the forms an expert writes by hand
in the same process: a GradientTape around plain tf ops (einsum for the dot product, times 1/√n), eagerly (also
with the problem's own division by √n: each eager op costs tens of µs here, and RealDiv's gradient adds several),
inside a tf.function called normally, as its concrete function, and with jit_compile=True. The adapter and the hand-written
calls are timed in alternating rounds, so drift on a shared machine hits all alike; the ratio is the median over
rounds of adapter time ÷ the fastest hand-written form in that round.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

OPERATORS = ("value", "grad", "jvp", "vjp", "jacrev", "hvp")
VARIANTS = ("eager", "graph", "compiled")
POLICY = dict(warmup_time=0.1, block_time=0.02, min_time=1.0, max_time=10.0, min_samples=15)


def handwritten(tf: Any, x: Any, x_star: Any) -> dict[str, Callable[[], Any]]:
    """∇ sin(exp(x*·x/√n)) with a GradientTape, as an expert writes it, in four execution forms."""
    inv = 1.0 / math.sqrt(x.shape[-1])

    def grad(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = tf.sin(tf.exp(tf.einsum("i,i->", x_star, t) * inv))
        return tape.gradient(y, t)

    def grad_divide(t):  # the problem's own spelling: a division by the Python float √n (RealDiv and its gradient)
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = tf.sin(tf.exp(tf.einsum("i,i->", x_star, t) / math.sqrt(x.shape[-1])))
        return tape.gradient(y, t)

    spec = [tf.TensorSpec(x.shape, x.dtype)]
    graph = tf.function(grad, input_signature=spec)
    xla = tf.function(grad, input_signature=spec, jit_compile=True)
    graph_concrete, xla_concrete = graph.get_concrete_function(), xla.get_concrete_function()
    return {
        "hand: eager GradientTape": lambda: grad(x),
        "hand: eager GradientTape, / √n as the problem": lambda: grad_divide(x),
        "hand: tf.function": lambda: graph(x),
        "hand: tf.function, concrete": lambda: graph_concrete(x),
        "hand: tf.function(jit_compile), concrete": lambda: xla_concrete(x),
    }


def measure(run: Callable[[], Any], sync: Callable[[Any], None], policy: Any) -> tuple[float, float, int]:
    from adcompare import timing
    from adcompare.adapter import Prepared

    prepared = Prepared(run)
    _, first = timing.first_call(prepared, sync)
    t = timing.measure(prepared, sync, first, compiled=False, policy=policy)
    return t.median, t.iqr, t.number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds for grad vs hand-written")
    args = parser.parse_args(argv)

    from adcompare import plugins
    from adcompare.adapter import Request
    from adcompare.inputs import cell_inputs
    from adcompare.timing import TimingPolicy

    policy = TimingPolicy(**POLICY)
    registry = plugins.load()
    adapter = registry.adapter("tensorflow")
    started = time.perf_counter()
    adapter.setup(dtype=args.dtype, device="cpu", threads=args.threads)
    import tensorflow as tf  # already imported, quietly, by setup

    prob = registry.problem("exp_dot_loss")
    size = prob.size(f"n{args.n}")
    print(f"{adapter.versions()}, exp_dot_loss n={args.n} {args.dtype}, {args.threads} thread(s), "
          f"import+setup {time.perf_counter() - started:.1f} s")
    print(f"{'operator':<8} {'variant':<9} {'median µs':>11} {'IQR µs':>9} {'calls/blk':>9} {'compile s':>9}")
    for operator in args.operators.split(","):
        for variant in args.variants.split(","):
            inputs = cell_inputs(prob, size, operator, args.dtype)
            prepared = adapter.prepare(Request(prob, operator, variant, "cpu", args.dtype, inputs))
            median, iqr, number = measure(prepared.run, adapter.sync, policy)
            compile_s = f"{prepared.compile_seconds:.3f}" if prepared.compile_seconds is not None else ""
            fallbacks = (prepared.after_first_call() or {}).get("pfor_while_loop_fallbacks")
            print(f"{operator:<8} {variant:<9} {median * 1e6:11.1f} {iqr * 1e6:9.1f} {number:9d} {compile_s:>9}"
                  f"{'  pfor fell back: ' + str(fallbacks) if fallbacks else ''}", flush=True)

    print(f"\ngrad against hand-written TensorFlow, {args.rounds} alternating rounds (median per round, µs):")
    inputs = cell_inputs(prob, size, "grad", args.dtype)
    forms: dict[str, Callable[[], Any]] = {}
    for variant in args.variants.split(","):
        forms[f"adapter grad, {variant}"] = adapter.prepare(
            Request(prob, "grad", variant, "cpu", args.dtype, inputs)).run
    hand = handwritten(tf, tf.constant(inputs.wrt), tf.constant(inputs.constants["x_star"]))
    forms.update(hand)
    rounds: dict[str, list[float]] = {label: [] for label in forms}
    for _ in range(args.rounds):
        for label, fn in forms.items():
            rounds[label].append(measure(fn, adapter.sync, policy)[0])
    fastest_hand = [min(rounds[label][i] for label in hand) for i in range(args.rounds)]
    for label, samples in rounds.items():
        ratio = statistics.median(a / h for a, h in zip(samples, fastest_hand))
        print(f"  {label:<48} {statistics.median(samples) * 1e6:9.1f}   {ratio:5.2f}× fastest hand-written"
              f"   rounds: {', '.join(f'{s * 1e6:.1f}' for s in samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

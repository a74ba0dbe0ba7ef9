"""GradBench's `lse` eval: log-sum-exp from its primitives (evals/lse/README.md, commit f26651a7)."""
from __future__ import annotations

from adcompare import Shapes, problem

from .gradbench_draws import replay
from .json_inputs import exact_keys, numbers_and_count, read_json_object

LSE_N = (2_500, 5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 1_280_000)  # run.py's -n default


@problem(sizes=list(LSE_N), wrt="x", tags=("classic", "scalar-output", "wide"), operators=("value", "grad"))
def lse(x, /, *, xp):
    """GradBench's log-sum-exp (evals/lse/README.md; cpp/gradbench/evals/lse.hpp): Rⁿ → R.

        a = max x,   LSE(x) = a + log Σᵢ exp(xᵢ − a)

    written from its primitive elements (a maximum, a sum), as the README asks, not a library logsumexp with a
    hand-written derivative; the shift by the maximum cancels in the derivative (softmax(x)), so any subgradient
    of max gives the same gradient. GradBench's functions: `primal` (the value) and `gradient` (`grad`).
    Inputs: GradBench's generator (python/gradbench/gradbench/evals/lse/run.py), `np.random.seed(31337)` then
    `np.random.rand(n)` for each n of its default list in turn, replayed draw for draw (problems/gradbench_draws.py),
    so every size's x is GradBench's own (uniform on [0, 1)). Sizes: that list, n = 2,500 … 1,280,000 (×2 each).
    """
    top = xp.max(x)
    return top + xp.log(xp.sum(xp.exp(x - top)))


@lse.inputs
def _(rng, n):
    return {"x": replay(rng, [(k,) for k in LSE_N], LSE_N, (n,))}


@lse.shapes
def _(n):
    return Shapes(wrt=(n,), output=(), flops=4 * n, operations=5)


@lse.reads
def read_gradbench(path):
    """GradBench's lse input as JSON (its LSEInput: x, a list of n ≥ 1 numbers; min_runs and min_seconds, if
    present, are ignored), plain or gzipped."""
    data = read_json_object(path, "GradBench's lse input (a JSON object with x, a list of n ≥ 1 numbers, alone)",
                            valid=exact_keys(("x",)))
    x, _ = numbers_and_count(path, "lse", data, "n")
    return {"n": len(x)}, {"x": x}

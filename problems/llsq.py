"""GradBench's `llsq` eval: a linear least-squares objective, from cmpad's `llsq_obj` (evals/llsq/README.md)."""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, grid, problem

from .gradbench_draws import replay
from .json_inputs import exact_keys, numbers_and_count, read_json_object

LLSQ_N = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392)  # run.py's -n default (8196, 16392 sic)
LLSQ_M = (128,)  # run.py's -m default
# GradBench draws the sizes sorted by n·m (Python's stable sort of [(n, m) for n in N for m in M]).
LLSQ_ORDER = sorted(((n, m) for n in LLSQ_N for m in LLSQ_M), key=lambda v: v[0] * v[1])


@problem(sizes=grid(n=LLSQ_N, m=LLSQ_M), wrt="x", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad"), complex_step_safe=True)
def llsq(x, /, *, t, exponents, xp):
    """GradBench's linear least squares (evals/llsq/README.md; cmpad's llsq_obj; cpp/gradbench/evals/llsq.hpp):
    Rᵐ → R,

        y(x) = ½ Σᵢ (sᵢ − x₀ − x₁tᵢ − x₂tᵢ² − … − x_{m−1}tᵢ^{m−1})²,   tᵢ = −1 + 2i/(n − 1),  sᵢ = sign(tᵢ)

    for i = 0 … n−1. GradBench's input is x and n; here t (n,) is the constant that carries n (a count must come
    from a shape), and sᵢ = sign(tᵢ) (0 at tᵢ = 0, as llsq.hpp's `(0 < t) − (t < 0)`; no default n is odd, so no
    tᵢ is 0). The powers tᵢʲ are computed inside the function on every call, as GradBench's tools do (jax/llsq.py
    builds them by a cumulative product), here as the broadcast power t[:, None] ** j (the same values to
    rounding); the residual is then one matrix–vector product, the vectorised form the README suggests.
    GradBench's functions: `primal` (the value) and `gradient` (`grad`). Inputs: GradBench's generator
    (python/gradbench/gradbench/evals/llsq/run.py), `np.random.seed(31337)`, then `np.random.rand(m)` per size in
    order of n·m, replayed draw for draw (problems/gradbench_draws.py). Sizes: its defaults, m = 128 and n = 16 …
    16,392 (GradBench's list has 8196 and 16392, not 8192 and 16384; kept as GradBench runs them).
    """
    powers = xp.expand_dims(t, axis=1) ** exponents  # (n, m): tᵢʲ
    residual = xp.sign(t) - xp.matmul(powers, x)
    return 0.5 * xp.sum(residual * residual)


def constants(n: int, m: int) -> dict[str, np.ndarray]:
    """t (n,), llsq.hpp's t(i, n) = −1 + i·2/(n − 1), and the exponents 0 … m−1: what GradBench's n and m mean."""
    return {"t": -1.0 + np.arange(n) * 2.0 / (n - 1.0), "exponents": np.arange(m, dtype=np.float64)}


@llsq.inputs
def _(rng, n, m):
    return {"x": replay(rng, LLSQ_ORDER, [m_ for _, m_ in LLSQ_ORDER], (n, m)), **constants(n, m)}


@llsq.reads
def read_gradbench(path):
    """GradBench's llsq input as JSON (its LLSQInput: x, m numbers, and n, the number of sample points ≥ 2; min_runs
    and min_seconds, if present, are ignored), plain or gzipped."""
    data = read_json_object(path, "GradBench's llsq input (a JSON object with x, a list of m ≥ 1 numbers, and n, an "
                                  "integer ≥ 2)", valid=exact_keys(("x", "n")))
    x, n = numbers_and_count(path, "llsq", data, "m", "n", least=2)
    return {"n": n, "m": len(x)}, {"x": x, **constants(n, len(x))}


@llsq.shapes
def _(n, m):
    return Shapes(wrt=(m,), output=(), flops=2 * n * m + 20 * n * m, operations=8)

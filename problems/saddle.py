"""GradBench's `saddle` eval: a saddle point by nested gradient descent (evals/saddle/README.md, commit f26651a7)."""
from __future__ import annotations

import numpy as np

import adcompare
from adcompare import Shapes, problem
from adcompare.model.nesting import ORDERS

from .gradient_descent import argmin
from .json_inputs import read_json_object

START = (1.0, 1.0)  # run.py's one input
NESTED = tuple(f"nested_{order}" for order in ORDERS)


def cost(p1, p2, xp):
    """saddle.fut's f x1 y1 x2 y2 = (x1² + y1²) − (x2² + y2²), with (x1, y1) = p1 and (x2, y2) = p2, in vector
    form (the components indexed one by one were only notation: 12× the time in eager JAX, the same value)."""
    return xp.sum(p1 * p1) - xp.sum(p2 * p2)


@problem(sizes=[{"d": 2}], wrt="start", tags=("nested", "control-flow"), operators=NESTED)
def saddle(start, /, *, xp):
    """GradBench's saddle (evals/saddle/README.md; tools/futhark/saddle.fut and solver.fut, the clearest statement;
    Pearlmutter and Siskind's nested-AD benchmark): R² → R⁴,

        r1 = argmin_{p1} max_{p} f(p1, p),   r2 = argmax_{p} f(r1, p),   output (r1, r2),
        f(p1, p) = (p1₀² + p1₁²) − (p₀² + p₁²),

    every argmin and argmax by GradBench's gradient descent (problems/gradient_descent.py) started at `start`.
    The inner max is a gradient ascent inside the function the outer descent differentiates, so its gradient is a
    derivative through a loop of derivatives: `adcompare.grad(..., mode="outer")` around `mode="inner"`. The four
    nesting orders are GradBench's functions ff, fr, rf, rr (operators nested_ff …: outer mode, then inner);
    step 2's argmax takes the outer mode, as the README and saddle.fut say (GradBench's Haskell tool gives it the
    inner one; the numbers are the same). The descents' value tests (`|∇f| ≤ 1e-5`, `f(x′) < f(x)`) are
    `adcompare.while_loop` and `adcompare.cond` (problems/gradient_descent.py): Python loops op by op, staged
    loops under jax.jit and tf.function (the same trips and values: what a GradBench tool in a staged language,
    Futhark's, does too), refused by torch.compile (unsupported, with its reason).
    Reference (float64, `saddle_reference`): the same algorithm with the derivatives in closed form: ∇_p of −f is
    2p, and the outer gradient of max_p f(p1, p) is ∂f/∂p1 = 2·p1 exactly — the inner iterates never depend on
    p1 (their gradient 2p does not), so the derivative through the inner loop adds nothing. The frameworks'
    derivatives of a quadratic are these numbers to the last bit, so the reference's error bound is rounding.
    GradBench expects 8.246324826140356e-06 for all four outputs from start (1, 1) (run.py's `expect`, checked at
    |x − y| / max(1, |x| + |y|) ≤ 1e-4; tests/fixtures/gradbench/saddle.json). Input: that start, or GradBench's
    JSON input (`--inputs FILE.json`: {"start": [x, y]}).
    """
    def inner_max(p1):
        def minus(p):
            return -cost(p1, p, xp)

        p = argmin(minus, lambda z: adcompare.grad(minus, z, xp=xp, mode="inner"), start, xp=xp)
        return cost(p1, p, xp)

    r1 = argmin(inner_max, lambda z: adcompare.grad(inner_max, z, xp=xp, mode="outer"), start, xp=xp)

    def minus_at_r1(p):
        return -cost(r1, p, xp)

    r2 = argmin(minus_at_r1, lambda z: adcompare.grad(minus_at_r1, z, xp=xp, mode="outer"), start, xp=xp)
    return xp.concat([r1, r2])


@saddle.inputs
def _(rng, d):
    return {"start": np.array(START[:d], dtype=np.float64)}


def saddle_reference(start):
    """The same descents in float64 NumPy with closed-form gradients (see saddle's docstring)."""
    def inner_max(p1):
        return cost(p1, argmin(lambda p: -cost(p1, p, np), lambda p: 2 * p, start, xp=np), np)

    r1 = argmin(inner_max, lambda p1: 2 * p1, start, xp=np)
    r2 = argmin(lambda p: -cost(r1, p, np), lambda p: 2 * p, start, xp=np)
    return np.concatenate([r1, r2])


for _operator in NESTED:
    saddle.analytic(_operator)(saddle_reference)


@saddle.shapes
def _(d):
    # Operations dispatched in one call, for the time estimate, counted: 157 descents of 170 trips; one call takes
    # 48,050 (outer reverse) to 72,075 (outer forward) inner gradient calls of ~50 operations with the loop's own
    # tests: of the order 3·10⁶ (10⁶ before was 3-15× low).
    return Shapes(wrt=(d,), output=(2 * d,), operations=3_000_000)


def _gradbench_json(path: str) -> dict:
    return read_json_object(path, "GradBench's saddle input (a JSON object with start, a list of 2 numbers)",
                            valid=lambda data: isinstance(data.get("start"), list) and len(data["start"]) == 2)


@saddle.reads_header
def _(path):
    return {"d": len(_gradbench_json(path)["start"])}


@saddle.reads
def _(path):
    """GradBench's SaddleInput: {"start": [x, y]} (min_runs and min_seconds, if present, are ignored)."""
    start = np.asarray(_gradbench_json(path)["start"], dtype=np.float64)
    return {"d": 2}, {"start": start}

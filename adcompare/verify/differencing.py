"""Differencing in float64 through NumPy: the primitives every reference (reference.py) is built from.

Directional derivatives J·v by complex step (exact to rounding, where the problem allows it) or central
differences with a step per input scale and a Richardson error estimate; full Jacobians one column per input;
second derivatives as differences of a gradient; the measured price of one evaluation (what the reference's
budget is judged on); and the choice between complex step and central differences for a problem at a point.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from adcompare.model.problem import Problem
from adcompare.verify.tolerance import scaled_error

EPS = float(np.finfo(np.float64).eps)
COMPLEX_STEP = 1e-20
DIRECTION_SEED = 20240601  # seeds of the directional-check vectors: same everywhere
# Floors under the Richardson estimates: an estimate can vanish by luck (a quadratic has no third derivative).
FLOOR = {"complex step": 1e-13, "central": 1e-10, "second order over complex step": 1e-9,
         "second order over central": 1e-7, "newton direction": 1e-7, "analytic": 1e-13,
         # a central difference of central differences: eps^(2/3) rounding over an eps^(1/3) step, ~1e-5 (stated,
         # not estimated: no Richardson pass through a whole nested computation)
         "nested central differences": 1e-5}

Function = Callable[[np.ndarray], Any]


@dataclass(frozen=True)
class Differ:
    """Directional derivatives J·v of a function by complex step, or by central differences with step
    h = eps^exponent / maxᵢ(|vᵢ| / max(1, |xᵢ|)) (so each input moves by eps^exponent of its own scale)."""

    complex_step: bool
    exponent: float = 1 / 3

    def evaluations(self, estimate: bool) -> int:
        return 1 if self.complex_step else (4 if estimate else 2)

    @property
    def floor(self) -> float:
        return FLOOR["complex step" if self.complex_step else "central"]

    def along(self, f: Function, x: np.ndarray, v: np.ndarray, *, estimate: bool) -> tuple[np.ndarray, float]:
        """(J·v, estimated scaled error); the estimate is 0.0 when not asked for (central) or the floor."""
        scale = float(np.max(np.abs(v)))
        if scale == 0.0:
            return np.zeros_like(np.asarray(f(x), dtype=np.float64)), 0.0
        if self.complex_step:
            h = COMPLEX_STEP / scale
            return np.imag(np.asarray(f(x + 1j * h * v))) / h, self.floor
        d1 = central(f, x, v, self.step(x, v))
        if not estimate:
            return d1, 0.0
        return d1, self.richardson(f, x, v, d1)

    def step(self, x: np.ndarray, v: np.ndarray) -> float:
        """The central difference's step t along v (x + t·v)."""
        return EPS ** self.exponent / float(np.max(np.abs(v) / np.maximum(1.0, np.abs(x))))

    def richardson(self, f: Function, x: np.ndarray, v: np.ndarray, d1: np.ndarray) -> float:
        """The estimated scaled error of d1, the central difference along v at `step`: its gap to the one at twice
        the step (two evaluations more)."""
        return max(scaled_error(d1, central(f, x, v, 2 * self.step(x, v))), self.floor)


def central(f: Function, x: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
    return (np.asarray(f(x + t * v), dtype=np.float64) - np.asarray(f(x - t * v), dtype=np.float64)) / (2 * t)


def jacobian(f: Function, x: np.ndarray, d: Differ, *, estimate: bool) -> tuple[np.ndarray, float]:
    """Full Jacobian, f(x).shape + x.shape, one directional derivative per input element."""
    columns, worst = [], 0.0
    e = np.zeros(x.size)
    for i in range(x.size):
        e[i] = 1.0
        column, err = d.along(f, x, e.reshape(x.shape), estimate=estimate)
        e[i] = 0.0
        columns.append(column)
        worst = max(worst, err)
    out_shape = np.shape(columns[0]) if columns else np.shape(f(x))
    jac = np.stack(columns, axis=-1) if columns else np.zeros((*out_shape, 0))
    return jac.reshape((*out_shape, *x.shape)), worst


@dataclass(frozen=True)
class SecondOrder:
    """Second derivatives of scalar f: central differences (outer) of a complex-step or central (inner) gradient."""

    inner: Differ

    @property
    def outer(self) -> Differ:
        # Over a complex-step gradient (exact to rounding) the classical eps^(1/3) step is best; over a
        # central-difference gradient whose noise is eps^(3/4), both steps eps^(1/4) balance noise and truncation.
        return Differ(False, 1 / 3 if self.inner.complex_step else 1 / 4)

    @property
    def floor(self) -> float:
        return FLOOR["second order over complex step" if self.inner.complex_step else "second order over central"]

    def gradient(self, f: Function) -> Function:
        return lambda x: jacobian(f, x, self.inner, estimate=False)[0]

    def hvp(self, f: Function, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        hv, err = self.outer.along(self.gradient(f), x, v, estimate=True)
        return hv, max(err, self.floor)

    def hessian(self, f: Function, x: np.ndarray) -> tuple[np.ndarray, float]:
        columns, worst = [], 0.0
        e = np.zeros(x.size)
        for i in range(x.size):
            e[i] = 1.0
            column, err = self.hvp(f, x, e.reshape(x.shape))
            e[i] = 0.0
            columns.append(column.reshape(-1))
            worst = max(worst, err)
        h = np.stack(columns, axis=-1)
        return ((h + h.T) / 2).reshape((*x.shape, *x.shape)), worst

    def bilinear(self, f: Function, x: np.ndarray, w: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        """wᵀ·H·v: the directional derivative along w of the directional derivative along v (O(1) evaluations)."""
        def dv(y: np.ndarray) -> np.ndarray:
            return self.inner.along(f, y, v, estimate=False)[0]

        out, err = self.outer.along(dv, x, w, estimate=True)
        return out, max(err, self.floor)

    def gradient_evaluations(self, n: int) -> int:
        return n * self.inner.evaluations(False)



def seconds_per_evaluation(differ: Differ, f: Function, x: np.ndarray, timed: float | None = None) -> float:
    """Best of three timed directional derivatives, divided by their evaluations: the unit price of differencing
    (timing f alone missed the cost of building the perturbed points, 10× for small problems). `timed`: a price
    the caller already took from a directional derivative it keeps, enough where evaluations are heavy (pricing
    BA's per-example reference at p = 1,255,268 by a J·e₀ thrown away was 0.61 s of its 2.1 s)."""
    if timed is not None and timed * differ.evaluations(False) > 0.01:
        return timed
    best = math.inf
    e = np.zeros(x.size)
    e[0] = 1.0
    for _ in range(3):
        started = time.perf_counter()
        differ.along(f, x, e.reshape(x.shape), estimate=False)
        best = min(best, time.perf_counter() - started)
        if best > 0.01:  # heavy evaluations time well once; repeating them is what costs
            break
    return best / differ.evaluations(False)


def complex_step_works(f: Function, x: np.ndarray) -> str | None:
    """None when the complex step agrees with central differences along a seeded direction, else why not."""
    return _complex_step_check(f, x, _check_direction(x.shape))[0]


def _check_direction(shape: tuple[int, ...]) -> np.ndarray:
    """The seeded direction `choose` confirms the complex step on, where the caller differences none of its own."""
    return np.random.default_rng(DIRECTION_SEED - 1).standard_normal(shape)


# A complex step within this scaled gap of the central difference is confirmed without the Richardson estimate: the
# verdict is the same (the bar is max(10·estimate, CONFIRMED_GAP)), and two evaluations fewer decide it.
CONFIRMED_GAP = 1e-7


@dataclass(frozen=True)
class Confirmed:
    """The complex step's J·v along the direction `choose_along` confirmed it on, and the seconds it took."""

    jv: np.ndarray
    seconds: float


def _complex_step_check(f: Function, x: np.ndarray, v: np.ndarray) -> tuple[str | None, Confirmed | None]:
    """(None, the complex step's J·v) when it agrees with central differences along v; (why not, None) else."""
    try:
        with np.errstate(all="ignore"):
            started = time.perf_counter()
            cs, _ = Differ(True).along(f, x, v, estimate=False)
            seconds = time.perf_counter() - started
    except Exception as exc:  # e.g. a NumPy function that rejects complex input
        return f"complex step raised {type(exc).__name__}: {exc}", None
    central_differ = Differ(False)
    cd, _ = central_differ.along(f, x, v, estimate=False)
    gap = scaled_error(cs, cd)
    # written as "not ≤" so that a NaN gap (a complex evaluation that overflows where the real one does not) refuses
    if not gap <= CONFIRMED_GAP and not gap <= 10 * central_differ.richardson(f, x, v, cd):
        return f"complex step disagreed with them by {gap:.1e}", None
    return None, Confirmed(np.asarray(cs), seconds)


def choose(problem: Problem, f: Function, x: np.ndarray) -> tuple[Differ, str]:
    """Complex step where the problem declares it safe and a seeded directional derivative confirms it."""
    differ, how, _ = choose_along(problem, f, x, _check_direction(x.shape))
    return differ, how


def choose_along(problem: Problem, f: Function, x: np.ndarray, v: np.ndarray
                 ) -> tuple[Differ, str, Confirmed | None]:
    """`choose`, confirming the complex step along v — a direction the caller differences anyway, which gets the
    complex step's J·v back instead of computing it again (None where central differences were chosen)."""
    central = Differ(False)
    if not problem.complex_step_safe:
        return central, "central differences (step eps^(1/3)·max(1,|x|), Richardson error estimate)", None
    why_not, confirmed = _complex_step_check(f, x, v)
    if why_not is not None:
        return central, (f"central differences ({why_not} along a seeded direction: problem {problem.name!r} is "
                         f"declared complex_step_safe but is not)"), None
    return Differ(True), "complex step", confirmed

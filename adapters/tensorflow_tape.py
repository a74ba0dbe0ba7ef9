"""TensorFlow's operators, written with tf.GradientTape (reverse) and tf.autodiff.ForwardAccumulator (forward):
`TRANSFORMS`, one per operator, of (tf, f) where f is f(w) or, per example, f(w, example).

`tape.jacobian` and `tf.vectorized_map` vectorise with pfor and fall back to a `tf.while_loop` for an op pfor
cannot convert; the fallback is logged by TensorFlow, caught by `TensorflowLogFilter` and recorded in the cell's
details (`pfor_while_loop_fallbacks`), so a looped Jacobian is never reported as a vectorised one.

ForwardAccumulator keeps the JVP helpers it traces in one cache per process; `forget_forward_mode_traces` empties
it before each cell, so that a cell's forward mode is traced as in a fresh process, not reused from the cells before.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from adcompare.model import nesting
from adcompare.plugin.adapter import Transform

from .functional import NESTED_TRANSFORMS, nested_algorithms

PFOR = "pfor, or a tf.while_loop where pfor cannot convert an op (recorded per cell)"
FALLBACK = "Using a while_loop for converting"
EAGER_STRATEGY = "Using MirroredStrategy eagerly has significant overhead"
RETRACING = "triggered tf.function retracing"


class TensorflowLogFilter(logging.Filter):
    """Collects pfor's while_loop fallbacks for the cell's details; drops the retracing warnings that eager
    tape.jacobian / vectorized_map trigger on every call and MirroredStrategy's eager-overhead warning (both
    documented in tensorflow.py, not news to a reader of stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.fallbacks: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if FALLBACK in message:
            if len(self.fallbacks) < 20:
                self.fallbacks.append(message.splitlines()[0][:300])
            return False
        return RETRACING not in message and EAGER_STRATEGY not in message


def forget_forward_mode_traces() -> bool:
    """Empty ForwardAccumulator's process-wide cache of traced JVP helpers and its per-op trace counts (after 32
    traces of an op it traces with relaxed shapes); False where this TensorFlow has neither (private names).

    A cell would otherwise run the helpers an earlier cell traced, in that cell's context. Seen with TensorFlow
    2.21 on BA's vmap_jacfwd: after a graph cell, XLA compiled it, where in a fresh process it fails (a
    TensorList); after that XLA failure, a graph cell's first call took 21.7 s at p = 31,843, against 0.26 s in a
    fresh process, and had not finished in 3 minutes at p = 182,072 (benchmarks/results/gradbench/README.md)."""
    try:
        forwardprop = importlib.import_module("tensorflow.python.eager.forwardprop")
    except ImportError:
        return False
    cache = getattr(forwardprop, "_jvp_function_cache", None)
    counts = getattr(forwardprop, "_TRACE_COUNT", None)
    lock = getattr(forwardprop, "_TRACE_COUNT_CONSISTENCY_LOCK", None)
    if cache is None or not hasattr(cache, "clear") or not isinstance(counts, dict) or lock is None:
        return False
    with lock:
        counts.clear()
    cache.clear()
    return True


def grad(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def gradient(w, *rest):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w, *rest)
        return tape.gradient(y, w)

    return gradient


def jvp(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def forward(w, v, *rest):
        with tf.autodiff.ForwardAccumulator(w, v) as acc:
            y = f(w, *rest)
        return acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return forward


def vjp(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def reverse(w, u):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w)
        return tape.gradient(y, w, output_gradients=u, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return reverse


def jacrev(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def jacobian(w, *rest):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w, *rest)
        return tape.jacobian(y, w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return jacobian


def jacfwd(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    along = jvp(tf, f)

    def jacobian(w, *rest):
        n = int(np.prod(w.shape.as_list()))
        basis = tf.reshape(tf.eye(n, dtype=w.dtype), [n] + w.shape.as_list())
        columns = tf.vectorized_map(lambda e: along(w, e, *rest), basis)  # (n, *out)
        rank = columns.shape.rank
        rows = tf.transpose(columns, list(range(1, rank)) + [0])  # (*out, n)
        return tf.reshape(rows, columns.shape.as_list()[1:] + w.shape.as_list())

    return jacobian


def hessian(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def second(w):
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(w)
                y = f(w)
            g = inner.gradient(y, w)
        return outer.jacobian(g, w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return second


def hvp(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    def forward_over_reverse(w, v):
        with tf.autodiff.ForwardAccumulator(w, v) as acc:
            with tf.GradientTape() as tape:
                tape.watch(w)
                y = f(w)
            g = tape.gradient(y, w)
        return acc.jvp(g, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return forward_over_reverse


def newton_dir(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    """∇f ⊘ ∇²f·1: a ForwardAccumulator along ones around the GradientTape of the gradient (nested, forward over
    reverse) gives both in one pass; ∇²f·1 is diag(∇²f) where the problem's Hessian is diagonal."""
    def direction(w):
        with tf.autodiff.ForwardAccumulator(w, tf.ones_like(w)) as acc:
            with tf.GradientTape() as tape:
                tape.watch(w)
                y = f(w)
            g = tape.gradient(y, w)
        return g / acc.jvp(g, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    return direction


def per_example(transform: Transform) -> Transform:
    """`transform` of each example of the batch, through tf.vectorized_map."""
    def mapped(tf: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
        op = transform(tf, f)
        return lambda w, batch: tf.vectorized_map(lambda example: op(w, example), batch)

    return mapped


def nested_derivative(tf: ModuleType) -> nesting.Derivative:
    """`adcompare.grad` under TensorFlow: reverse, a GradientTape; forward, one ForwardAccumulator per basis vector
    of x, stacked. Opened inside whatever tape or accumulator is recording, they nest: the outer one records the
    inner derivative's operations (as `hessian` and `hvp` above nest them)."""
    zero = tf.UnconnectedGradients.ZERO

    def derivative(f: nesting.Scalar, x: Any, mode: str) -> Any:
        # A tape or accumulator follows a tensor, not an argument: where f's closure holds the very tensor x (saddle's
        # inner descent starts at its outer iterate), it would differentiate that use too. A fresh tensor is f's
        # argument alone; an outer tape still sees it as x's identity.
        x = tf.identity(x)
        if mode == "reverse":
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            return tape.gradient(y, x, unconnected_gradients=zero)
        n = int(np.prod(x.shape.as_list()))
        identity = tf.eye(n, dtype=x.dtype)
        columns = []
        for i in range(n):
            with tf.autodiff.ForwardAccumulator(x, tf.reshape(identity[i], tf.shape(x))) as acc:
                y = f(x)
            columns.append(acc.jvp(y, unconnected_gradients=zero))
        return tf.reshape(tf.stack(columns), tf.shape(x))

    return derivative


TRANSFORMS: Mapping[str, Transform] = {
    "value": lambda tf, f: f, "grad": grad, "jvp": jvp, "vjp": vjp, "jacfwd": jacfwd, "jacrev": jacrev,
    "hessian": hessian, "hvp": hvp, "newton_dir": newton_dir,
    "vmap_grad": per_example(grad), "vmap_jacfwd": per_example(jacfwd), "vmap_jacrev": per_example(jacrev),
    **NESTED_TRANSFORMS,
}
ALGORITHMS = {
    "value": "plain evaluation",
    "grad": "reverse mode (tf.GradientTape.gradient)",
    "jvp": "forward mode (tf.autodiff.ForwardAccumulator.jvp)",
    "vjp": "reverse mode (tf.GradientTape.gradient with output_gradients=u)",
    "jacfwd": f"forward mode: tf.vectorized_map of ForwardAccumulator JVPs over the input basis ({PFOR})",
    "jacrev": f"reverse mode: VJPs over output rows vectorised by tf.GradientTape.jacobian ({PFOR})",
    "hessian": f"reverse-over-reverse: tf.GradientTape.jacobian of an inner GradientTape.gradient ({PFOR})",
    "hvp": "forward-over-reverse: ForwardAccumulator.jvp of GradientTape.gradient",
    "newton_dir": "forward-over-reverse: ForwardAccumulator.jvp along ones of GradientTape.gradient gives ∇f and "
                  "∇²f·1 in one pass; their quotient",
    "vmap_grad": f"tf.vectorized_map over examples of GradientTape.gradient ({PFOR})",
    "vmap_jacfwd": f"tf.vectorized_map over examples of the forward-mode Jacobian above ({PFOR})",
    "vmap_jacrev": f"tf.vectorized_map over examples of GradientTape.jacobian ({PFOR})",
    **nested_algorithms("reverse (tf.GradientTape)", "forward (a tf.autodiff.ForwardAccumulator per basis vector)"),
}

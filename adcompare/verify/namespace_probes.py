"""One probe per Array API name the problem suite may use: a tiny function R^n → R^m built around that name.

Adapters that write their own namespace (TensorFlow, autograd) test every probe's value against NumPy and its
full vector-output Jacobian against NumPy central differences. A scalar reduction is not enough: autograd's raw
`concat` returned wrong derivatives that a check through a scalar sum did not see.

Probes take `x` of shape (6,) with entries in [0.2, 0.9] (inside every function's domain) and the namespace `xp`.
`used_names` finds which names the problems actually touch, so a missing probe is caught by a test.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import numpy as np

from adcompare.model.problem import output_shape

Probe = Callable[[Any, ModuleType], Any]


def _m(x, xp):
    """x as a 2×3 matrix."""
    return xp.reshape(x, (2, 3))


def _sq(x, xp):
    """A well-conditioned 2×2 SPD-ish matrix built from x (diagonal dominant)."""
    a = xp.reshape(x[:4], (2, 2))
    return a @ xp.matrix_transpose(a) + 2.0 * xp.eye(2, dtype=x.dtype)


PROBES: dict[str, Probe] = {
    # element-wise
    "abs": lambda x, xp: xp.abs(x - 0.5),
    "acos": lambda x, xp: xp.acos(x),
    "acosh": lambda x, xp: xp.acosh(x + 1.5),
    "add": lambda x, xp: xp.add(x, x * x),
    "asin": lambda x, xp: xp.asin(x),
    "asinh": lambda x, xp: xp.asinh(x),
    "atan": lambda x, xp: xp.atan(x),
    "atan2": lambda x, xp: xp.atan2(x, x[::1] + 1.0),
    "atanh": lambda x, xp: xp.atanh(x - 0.5),
    "clip": lambda x, xp: xp.clip(x * 2.0, 0.5, 1.5),
    "cos": lambda x, xp: xp.cos(x),
    "cosh": lambda x, xp: xp.cosh(x),
    "divide": lambda x, xp: xp.divide(x, x * x + 1.0),
    "exp": lambda x, xp: xp.exp(x),
    "expm1": lambda x, xp: xp.expm1(x),
    "log": lambda x, xp: xp.log(x),
    "log1p": lambda x, xp: xp.log1p(x),
    "logaddexp": lambda x, xp: xp.logaddexp(x, 2.0 * x),
    "maximum": lambda x, xp: xp.maximum(x, 0.55),
    "minimum": lambda x, xp: xp.minimum(x, 0.55),
    "multiply": lambda x, xp: xp.multiply(x, x + 1.0),
    "negative": lambda x, xp: xp.negative(x * x),
    "pow": lambda x, xp: xp.pow(x, 3.0),
    "reciprocal": lambda x, xp: xp.reciprocal(x),
    "sign": lambda x, xp: xp.sign(x - 0.55) * x,
    "sin": lambda x, xp: xp.sin(x),
    "sinh": lambda x, xp: xp.sinh(x),
    "sqrt": lambda x, xp: xp.sqrt(x),
    "square": lambda x, xp: xp.square(x),
    "subtract": lambda x, xp: xp.subtract(x * x, x),
    "tan": lambda x, xp: xp.tan(x),
    "tanh": lambda x, xp: xp.tanh(x),
    "where": lambda x, xp: xp.where(x > 0.55, x * x, -x),
    # reductions and scans
    "cumulative_sum": lambda x, xp: xp.cumulative_sum(x * x),
    "max": lambda x, xp: xp.max(_m(x, xp) * _m(x, xp), axis=1),
    "mean": lambda x, xp: xp.mean(_m(x, xp) * x[0], axis=0),
    "min": lambda x, xp: xp.min(_m(x, xp) * _m(x, xp), axis=1),
    "prod": lambda x, xp: xp.prod(_m(x, xp), axis=1),
    "sum": lambda x, xp: xp.sum(_m(x, xp) * x[1], axis=1),
    # linear algebra
    "matmul": lambda x, xp: xp.reshape(xp.matmul(_m(x, xp), xp.matrix_transpose(_m(x, xp))), (4,)),
    "matrix_transpose": lambda x, xp: xp.reshape(xp.matrix_transpose(_m(x, xp)) * x[0], (6,)),
    "permute_dims": lambda x, xp: xp.reshape(xp.permute_dims(_m(x, xp), (1, 0)) * x[0], (6,)),
    "tensordot": lambda x, xp: xp.tensordot(_m(x, xp), x[:3], axes=1),
    "vecdot": lambda x, xp: xp.vecdot(_m(x, xp), _m(x, xp) + 1.0),
    "linalg.cholesky": lambda x, xp: xp.reshape(xp.linalg.cholesky(_sq(x, xp)), (4,)),
    "linalg.det": lambda x, xp: xp.stack([xp.linalg.det(_sq(x, xp)), x[0]]),
    "linalg.inv": lambda x, xp: xp.reshape(xp.linalg.inv(_sq(x, xp)), (4,)),
    "linalg.matrix_norm": lambda x, xp: xp.stack([xp.linalg.matrix_norm(_m(x, xp)), x[0]]),
    "linalg.outer": lambda x, xp: xp.reshape(xp.linalg.outer(x[:2], x[2:5]), (6,)),
    "linalg.slogdet": lambda x, xp: xp.stack([xp.linalg.slogdet(_sq(x, xp))[1], x[0]]),
    "linalg.solve": lambda x, xp: xp.linalg.solve(_sq(x, xp), x[4:]),
    "linalg.vector_norm": lambda x, xp: xp.stack([xp.linalg.vector_norm(x), x[0] * x[1]]),
    # manipulation and indexing
    "broadcast_to": lambda x, xp: xp.reshape(xp.broadcast_to(x[:3], (2, 3)) * _m(x, xp), (6,)),
    "concat": lambda x, xp: xp.concat([x * x, xp.sin(x)]),
    "expand_dims": lambda x, xp: xp.reshape(xp.expand_dims(x, axis=0) * x[0], (6,)),
    "flip": lambda x, xp: xp.flip(x * x),
    "reshape": lambda x, xp: xp.reshape(xp.reshape(x * x, (3, 2)), (6,)),
    "squeeze": lambda x, xp: xp.squeeze(xp.reshape(x * x, (1, 6)), axis=0),
    "stack": lambda x, xp: xp.reshape(xp.stack([x, x * x]), (12,)),
    "take": lambda x, xp: xp.take(x * x, xp.asarray([2, 0, 5]), axis=0),
    "tile": lambda x, xp: xp.tile(x * x, (2,)),
    # creation (differentiated through arithmetic with x; they must keep x's dtype)
    "arange": lambda x, xp: x * xp.arange(6, dtype=x.dtype),
    "asarray": lambda x, xp: x * xp.asarray(2.0, dtype=x.dtype),
    "astype": lambda x, xp: xp.astype(x * x, x.dtype),
    "eye": lambda x, xp: xp.reshape(_sq(x, xp) * xp.eye(2, dtype=x.dtype), (4,)),
    "full": lambda x, xp: x * xp.full((6,), 3.0, dtype=x.dtype),
    "linspace": lambda x, xp: x * xp.linspace(0.0, 1.0, 6, dtype=x.dtype),
    "ones": lambda x, xp: x + xp.ones((6,), dtype=x.dtype),
    "ones_like": lambda x, xp: x * x + xp.ones_like(x),
    "zeros": lambda x, xp: x * x + xp.zeros((6,), dtype=x.dtype),
    "zeros_like": lambda x, xp: x * x + xp.zeros_like(x),
}

# Names that are attributes rather than functions (dtypes, constants); covered by tests without a probe.
ATTRIBUTES = frozenset({"float32", "float64", "int32", "int64", "bool", "pi", "e", "inf", "nan", "newaxis",
                        "linalg"})


def probe_input(dtype: str = "float64") -> np.ndarray:
    return np.linspace(0.2, 0.9, 6).astype(dtype)


class _Recorder:
    """Stands in for a namespace and records every name looked up on it (and on its `linalg`)."""

    def __init__(self, target: Any, prefix: str, seen: set[str]):
        self._target, self._prefix, self._seen = target, prefix, seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(self._prefix + name)
        value = getattr(self._target, name)
        if name == "linalg":
            return _Recorder(value, "linalg.", self._seen)
        return value


def used_names(problems: Iterable[Any]) -> set[str]:
    """Every namespace name the problems look up when evaluated through NumPy at their smallest size."""
    seen: set[str] = set()
    for problem in problems:
        size = problem.smallest_size
        inputs = problem.inputs(size, "float64")
        w = inputs.pop(problem.wrt)
        problem.bind(_Recorder(np, "", seen), inputs)(w)
        if problem.batch is not None:
            output_shape(problem, size)
    return seen

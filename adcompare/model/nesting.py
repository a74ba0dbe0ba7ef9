"""A derivative taken inside a problem: `adcompare.grad(f, x, xp=xp, mode=...)`, nested AD written once.

GradBench's `saddle` and `particle` (Siskind and Pearlmutter's nested-AD benchmarks) minimise functions that
themselves take derivatives, so a problem must differentiate inside its own function without naming a framework.
`grad` is that derivative, in the spirit of `adcompare.fold`: each adapter registers its own transform for the
namespace it hands to problems (jax.grad / jax.jvp, torch.func.grad / jvp, tf.GradientTape /
ForwardAccumulator, autograd.grad / make_jvp), so an outer derivative — another `grad` call around it, or the
cell's own operator — differentiates through the inner one.

    grad(f, x, xp=xp, mode=m) = ∇f(x) for scalar f, shape of x; taken in mode m:
      "reverse"  one reverse pass (a VJP with cotangent 1);
      "forward"  one forward pass (a JVP) per basis vector eᵢ of x, stacked (GradBench's `grad_f`);
      "outer" / "inner"  the mode the running cell's nesting order gives the outer / inner derivative.

Nesting orders are GradBench's functions `ff`, `fr`, `rf`, `rr`: the outer mode first, then the inner one. The
operators `nested_ff` … `nested_rr` (operators.py) evaluate the problem with their order active (`under`);
outside them "outer" and "inner" mean "reverse".

A namespace without a registered transform (NumPy, and any op-by-op namespace an adapter did not register) gets
central differences, hᵢ = eps^(1/3)·max(1, |xᵢ|), mode ignored: well defined, about eps^(2/3) ≈ 4e-11 relative
accurate for a smooth f. The float64 reference of the nested operators does not rely on it (it uses the problem's
own closed forms, `@<problem>.analytic`); it is there so that a problem runs through any namespace.
"""
from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from adcompare.model.errors import UsageError
from adcompare.model.namespace_table import NamespaceTable

MODES = ("forward", "reverse")
ROLES = ("outer", "inner")
# GradBench's function names: the outer derivative's mode, then the inner's
ORDERS = {"ff": ("forward", "forward"), "fr": ("forward", "reverse"), "rf": ("reverse", "forward"),
          "rr": ("reverse", "reverse")}
DEFAULT_ORDER = "rr"  # what "outer" and "inner" mean outside a nested_* cell
OPERATOR_PREFIX = "nested_"

Scalar = Callable[[Any], Any]
Derivative = Callable[[Scalar, Any, str], Any]  # (f, x, mode in MODES) → ∇f(x)

_NATIVE: NamespaceTable[Derivative] = NamespaceTable()
_ORDER: contextvars.ContextVar[str] = contextvars.ContextVar("adcompare_nesting_order", default=DEFAULT_ORDER)


def register(namespace: object, derivative: Derivative) -> None:
    """An adapter's derivative for problems run with `namespace` as `xp`."""
    _NATIVE.register(namespace, derivative)


def registered(namespace: object) -> bool:
    return _NATIVE.get(namespace) is not None


def operator_order(operator: str) -> str | None:
    """The nesting order a `nested_*` operator evaluates its problem under, or None for any other operator."""
    order = operator[len(OPERATOR_PREFIX):] if operator.startswith(OPERATOR_PREFIX) else None
    return order if order in ORDERS else None


def mode_of(mode: str) -> str:
    """`mode` as "forward" or "reverse": a role is read from the nesting order in force."""
    if mode in MODES:
        return mode
    if mode in ROLES:
        return ORDERS[_ORDER.get()][ROLES.index(mode)]
    raise UsageError(f"adcompare.grad: mode {mode!r} is unknown; use one of {', '.join(MODES + ROLES)}")


@contextmanager
def nesting_order(order: str) -> Iterator[None]:
    """Within this block, "outer" and "inner" take the modes of `order` (ff, fr, rf, rr)."""
    if order not in ORDERS:
        raise UsageError(f"nesting order {order!r} is unknown; use one of {', '.join(ORDERS)}")
    token = _ORDER.set(order)
    try:
        yield
    finally:
        _ORDER.reset(token)


def under(order: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """`f` evaluated with `order` in force: the `nested_<order>` operator's transform, the same for every adapter
    (the adapters' derivatives read the order at trace or call time)."""
    def evaluate(*args: Any) -> Any:
        with nesting_order(order):
            return f(*args)

    return evaluate


def grad(f: Scalar, x: Any, *, xp: Any, mode: str = "reverse") -> Any:
    """∇f(x) of a scalar function f, taken inside a problem; see the module docstring for `mode`."""
    resolved = mode_of(mode)
    native = _NATIVE.get(xp)
    if native is not None:
        return native(f, x, resolved)
    return central_differences(f, x, xp=xp)


def central_differences(f: Scalar, x: Any, *, xp: Any) -> Any:
    """(f(x + hᵢeᵢ) − f(x − hᵢeᵢ)) / 2hᵢ per coordinate, hᵢ = eps^(1/3)·max(1, |xᵢ|): the unregistered default."""
    values = np.asarray(x)
    eps = float(np.finfo(values.dtype if values.dtype.kind == "f" else np.float64).eps)
    n = math.prod(values.shape)
    basis = xp.reshape(xp.eye(n, dtype=x.dtype), (n, *values.shape))
    steps = eps ** (1 / 3) * np.maximum(1.0, np.abs(values.reshape(-1)))
    columns = [(f(x + float(h) * basis[i]) - f(x - float(h) * basis[i])) / (2 * float(h)) for i, h in enumerate(steps)]
    return xp.reshape(xp.stack(columns), values.shape)

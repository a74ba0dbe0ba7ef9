"""HIPS autograd adapter: NumPy-based reverse mode (and forward mode through make_jvp), eager only, CPU only.

autograd traces every call anew (no compiler, so the `compiled` variant is unsupported), runs on NumPy (so no
GPU), and has no vectorising map (so per-example operators are a Python loop, labelled `emulated`). The forward
Jacobian is a Python loop of make_jvp calls over input basis vectors written here, also labelled `emulated`;
autograd's own jacobian is itself a loop of VJPs over output rows, and its hessian/make_hvp are
reverse-over-reverse: the algorithms below say so.

The namespace is `autograd_namespace.namespace()`: autograd.numpy with the traps of autograd 1.9.1 routed around
(no rule, no forward rule, a silently wrong `concat`, float32 derivatives turned float64). NumPy 2's promotion
rules (NEP 50) keep a float32 problem float32: Python scalars take the array's dtype. Each cell records the dtype
it returned in its details (`result_dtype`), so a promotion would be visible, not hidden by a cast.

BLAS threads are set by the worker's environment (OMP_NUM_THREADS and friends) before NumPy loads.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from adcompare import hookimpl
from adcompare.model import nesting
from adcompare.plugin.adapter import Adapter, Bound, Capability, Declared, Prepared, Transform

from . import autograd_namespace
from .functional import NESTED_TRANSFORMS, nested_algorithms

NO_VMAP = "autograd has no vectorising map; adcompare loops over the examples in Python"
NO_COMPILER = "autograd has no compiler"
CPU_ONLY = "autograd runs on NumPy (CPU only)"


def jacfwd(make_jvp: Callable[..., Any], f: Callable[..., Any]) -> Callable[..., Any]:
    """Forward Jacobian of f(w, *rest) in w: one make_jvp pass per input basis vector, columns stacked last.

    A fresh basis vector per column: a tangent output may alias its input (f(w) = w), so a reused buffer would
    rewrite earlier columns; and an n×n identity up front would cost n² memory before the first column."""
    def jacobian(w: np.ndarray, *rest: Any) -> np.ndarray:
        jvp = make_jvp(f)(w, *rest)
        columns = []
        for i in range(w.size):
            e = np.zeros(w.size, dtype=w.dtype)
            e[i] = 1
            columns.append(jvp(e.reshape(w.shape))[1])
        out = np.stack(columns, axis=-1)
        return out.reshape(out.shape[:-1] + w.shape)

    return jacobian


def jvp(ag: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    at = ag.make_jvp(f)  # made once, outside the timed call, like vjp's and hvp's
    return lambda w, v: at(w)(v)[1]


def vjp(ag: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    at = ag.make_vjp(f)
    return lambda w, u: at(w)[0](u)


def hvp(ag: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    at = ag.make_hvp(f)
    return lambda w, v: at(w)[0](v)


def newton_dir(ag: ModuleType, f: Callable[..., Any]) -> Callable[..., Any]:
    """∇f ⊘ ∇²f·1: make_jvp of autograd.grad along ones gives the gradient (its primal) and ∇²f·1, which is
    diag(∇²f) where the problem's Hessian is diagonal."""
    at = ag.make_jvp(ag.grad(f))

    def direction(w: np.ndarray) -> np.ndarray:
        g, h_ones = at(w)(np.ones_like(w))
        return g / h_ones

    return direction


def nested_derivative(ag: ModuleType, xp: ModuleType) -> nesting.Derivative:
    """`adcompare.grad` under autograd: autograd.grad, or one autograd.make_jvp pass per basis vector of x
    (stacked with the namespace's stack, which traces). autograd differentiates through both."""
    def derivative(f: nesting.Scalar, x: Any, mode: str) -> Any:
        if mode == "reverse":
            return ag.grad(f)(x)
        at = ag.make_jvp(f)(x)
        identity = np.eye(x.size, dtype=x.dtype)
        return xp.reshape(xp.stack([at(identity[i].reshape(x.shape))[1] for i in range(x.size)]), x.shape)

    return derivative


def per_example(op: Callable[..., Any]) -> Callable[..., Any]:
    """A Python loop of `op` over the examples of the batch, results stacked."""
    return lambda w, batch: np.stack([op(w, example) for example in batch])


class AutogradAdapter(Adapter):
    name = distribution = module = "autograd"
    runtime_distributions = ("numpy",)
    variants = {"eager": "traced anew on every call (autograd has no compiler)"}
    missing_variants = {"compiled": NO_COMPILER}
    # Unsupported, not emulated: a loop over slices on one CPU would be passed off as data parallelism.
    no_data_parallel = ("has no multi-device mechanism: it differentiates NumPy code, which runs on one CPU "
                        "device; see jax's pmap_grad for a data-parallel gradient")
    devices = ("cpu",)
    algorithms: ClassVar[Mapping[str, Declared]] = {
        "value": "plain evaluation (NumPy through autograd.numpy, nothing traced)",
        "grad": "reverse mode (autograd.grad: trace, then one VJP)",
        "jvp": "forward mode (autograd.make_jvp: tangent carried alongside the evaluation)",
        "vjp": "reverse mode (autograd.make_vjp)",
        "jacfwd": Capability.emulated(
            "forward mode: Python loop of autograd.make_jvp over input basis vectors, one evaluation each",
            "autograd has no forward-mode Jacobian; the loop is adcompare's"),
        "jacrev": "reverse mode: loop of VJPs over output rows (autograd.jacobian: one trace, Python map over the "
                  "basis)",
        "hessian": "reverse-over-reverse: loop of VJPs of the gradient over its entries (autograd.hessian = "
                   "jacobian(jacobian))",
        "hvp": "reverse-over-reverse (autograd.make_hvp: VJP of autograd.grad)",
        "newton_dir": "forward-over-reverse: autograd.make_jvp of autograd.grad along ones gives ∇f and ∇²f·1 in "
                      "one pass; their quotient",
        "vmap_grad": Capability.emulated("Python loop over examples of autograd.grad", NO_VMAP),
        "vmap_jacfwd": Capability.emulated(
            "Python loop over examples of a Python loop of autograd.make_jvp over input basis vectors", NO_VMAP),
        "vmap_jacrev": Capability.emulated(
            "Python loop over examples of autograd.jacobian (loop of VJPs over output rows)", NO_VMAP),
        **nested_algorithms("reverse (autograd.grad)", "forward (autograd.make_jvp per basis vector)"),
    }
    transforms: ClassVar[Mapping[str, Transform]] = {  # f is f(w) or, per example, f(w, example)
        "value": lambda ag, f: f,
        "grad": lambda ag, f: ag.grad(f),
        "jvp": jvp,
        "vjp": vjp,
        "jacfwd": lambda ag, f: jacfwd(ag.make_jvp, f),
        "jacrev": lambda ag, f: ag.jacobian(f),
        "hessian": lambda ag, f: ag.hessian(f),
        "hvp": hvp,
        "newton_dir": newton_dir,
        "vmap_grad": lambda ag, f: per_example(ag.grad(f)),
        "vmap_jacfwd": lambda ag, f: per_example(jacfwd(ag.make_jvp, f)),
        "vmap_jacrev": lambda ag, f: per_example(ag.jacobian(f)),
        **NESTED_TRANSFORMS,
    }

    def device_unavailable(self, device: str) -> str | None:
        if device == "cpu":
            return None
        return f"autograd: device {device!r} is unsupported: {CPU_ONLY}; use --device cpu"

    def namespace(self) -> ModuleType:
        xp = autograd_namespace.namespace()
        if not nesting.registered(xp):
            nesting.register(xp, nested_derivative(self.framework, xp))
        return xp

    def build(self, bound: Bound) -> Prepared:
        fn, args = self.transforms[bound.operator](self.framework, bound.f), bound.args
        seen: dict[str, Any] = {}

        def run() -> Any:  # NumPy is synchronous: nothing to sync; the dtype is for after_first_call
            out = fn(*args)
            seen["dtype"] = out.dtype
            return out

        def after_first_call() -> dict[str, Any]:
            dtype = str(seen["dtype"])
            return {"result_dtype": dtype, "promoted_to_float64": dtype != bound.request.dtype}

        return Prepared(run, details={"numpy": np.__version__}, after_first_call=after_first_call)

    def explain(self, exc: Exception) -> str | None:
        if isinstance(exc, TypeError) and "ArrayBox" in str(exc):
            return (f"autograd cannot turn a traced value into a Python number ({exc}); the problem reads a "
                    f"concrete value (int()/float()) from the differentiated input, which autograd's ArrayBox "
                    f"does not allow")
        return None

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out)


@hookimpl
def adcompare_adapters():
    return [AutogradAdapter()]

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

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model.errors import CellFailure
from adcompare.plugin.adapter import Adapter, Bound, Capability, Prepared

from . import autograd_namespace

NO_VMAP = "autograd has no vectorising map; adcompare loops over the examples in Python"
CAPABILITIES: dict[str, Capability] = {
    "value": Capability.native("plain evaluation (NumPy through autograd.numpy, nothing traced)"),
    "grad": Capability.native("reverse mode (autograd.grad: trace, then one VJP)"),
    "jvp": Capability.native("forward mode (autograd.make_jvp: tangent carried alongside the evaluation)"),
    "vjp": Capability.native("reverse mode (autograd.make_vjp)"),
    "jacfwd": Capability.emulated(
        "forward mode: Python loop of autograd.make_jvp over input basis vectors, one evaluation each",
        "autograd has no forward-mode Jacobian; the loop is adcompare's"),
    "jacrev": Capability.native(
        "reverse mode: loop of VJPs over output rows (autograd.jacobian: one trace, Python map over the basis)"),
    "hessian": Capability.native(
        "reverse-over-reverse: loop of VJPs of the gradient over its entries (autograd.hessian = "
        "jacobian(jacobian))"),
    "hvp": Capability.native("reverse-over-reverse (autograd.make_hvp: VJP of autograd.grad)"),
    "vmap_grad": Capability.emulated("Python loop over examples of autograd.grad", NO_VMAP),
    "vmap_jacfwd": Capability.emulated(
        "Python loop over examples of a Python loop of autograd.make_jvp over input basis vectors", NO_VMAP),
    "vmap_jacrev": Capability.emulated(
        "Python loop over examples of autograd.jacobian (loop of VJPs over output rows)", NO_VMAP),
}
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


def build_operator(autograd: ModuleType, operator: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """The operator as a function of (w,) or (w, extra); f is f(w) or, per-example, f(w, example)."""
    ag = autograd
    jvp_at, vjp_at, hvp_at = ag.make_jvp(f), ag.make_vjp(f), ag.make_hvp(f)

    def per_example(op: Callable[..., Any]) -> Callable[..., Any]:
        return lambda w, batch: np.stack([op(w, example) for example in batch])

    return {
        "value": lambda: f,
        "grad": lambda: ag.grad(f),
        "jvp": lambda: lambda w, v: jvp_at(w)(v)[1],
        "vjp": lambda: lambda w, u: vjp_at(w)[0](u),
        "jacfwd": lambda: jacfwd(ag.make_jvp, f),
        "jacrev": lambda: ag.jacobian(f),
        "hessian": lambda: ag.hessian(f),
        "hvp": lambda: lambda w, v: hvp_at(w)[0](v),
        "vmap_grad": lambda: per_example(ag.grad(f)),
        "vmap_jacfwd": lambda: per_example(jacfwd(ag.make_jvp, f)),
        "vmap_jacrev": lambda: per_example(ag.jacobian(f)),
    }[operator]()


class AutogradAdapter(Adapter):
    name = "autograd"
    distribution = "autograd"
    module = "autograd"
    runtime_distributions = ("numpy",)
    variants = {"eager": "traced anew on every call (autograd has no compiler)"}
    missing_variants = {"compiled": NO_COMPILER}
    # Unsupported, not emulated: a loop over slices on one CPU would be passed off as data parallelism.
    no_data_parallel = ("has no multi-device mechanism: it differentiates NumPy code, which runs on one CPU "
                        "device; see jax's pmap_grad for a data-parallel gradient")
    devices = ("cpu",)

    def device_unavailable(self, device: str) -> str | None:
        if device == "cpu":
            return None
        return f"autograd: device {device!r} is unsupported: {CPU_ONLY}; use --device cpu"

    def namespace(self) -> ModuleType:
        return autograd_namespace.namespace()

    def operator_capability(self, operator: str, variant: str) -> Capability:
        return CAPABILITIES[operator]

    def build(self, bound: Bound) -> Prepared:
        import autograd

        fn, args = build_operator(autograd, bound.operator, bound.f), bound.args
        seen: dict[str, Any] = {}

        def run() -> Any:
            try:
                out = fn(*args)
            except TypeError as exc:
                if "ArrayBox" not in str(exc):
                    raise
                raise CellFailure(f"autograd cannot turn a traced value into a Python number ({exc}); the "
                                  f"problem reads a concrete value (int()/float()) from the differentiated "
                                  f"input, which autograd's ArrayBox does not allow") from exc
            seen["dtype"] = out.dtype  # NumPy is synchronous: nothing to sync; this is for after_first_call
            return out

        def after_first_call() -> dict[str, Any]:
            dtype = str(seen["dtype"])
            return {"result_dtype": dtype, "promoted_to_float64": dtype != bound.request.dtype}

        return Prepared(run, details={"numpy": np.__version__}, after_first_call=after_first_call)

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out)



@hookimpl
def adcompare_adapters():
    return [AutogradAdapter()]

"""array-api-compat's torch namespace with the few names that break torch.func or Dynamo, or are many times
slower than the torch function an expert would call, replaced (`FIXES`); and the one arithmetic fix for
torch.func's forward mode (`SCALAR_FIX`). torch is imported inside functions only. Every fix is tested against
NumPy and under torch.func.vmap and Dynamo (tests/adapters/test_torch.py).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from adcompare.model import control_flow
from adcompare.model.errors import UnsupportedOperation
from adcompare.plugin.adapter import derived_namespace

from .namespace_fix import Fix

# --- namespace fixes: standard name -> Fix(trap, route, build(torch, compat)) ---------------------------------

def _sign(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
    def sign(x, /):
        """compat assigns NaN through a boolean mask, which torch.func.vmap and Dynamo cannot batch/trace."""
        if x.dtype.is_complex:
            return compat.sign(x)
        return torch.where(torch.isnan(x), x, torch.sign(x))  # torch.sign(nan) is 0; the standard says nan

    return sign


def _scalar_operand(name: str) -> Callable[[ModuleType, ModuleType], Callable[..., Any]]:
    """compat turns a Python scalar operand into a tensor through torch.result_type, which Dynamo cannot trace
    (a torch op returning a dtype): a graph break. The standard gives the scalar the array's dtype; do that."""

    def factory(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
        op = getattr(compat, name)

        def as_tensor(value: Any, other: Any) -> Any:
            if (type(value) in (int, float) and isinstance(other, torch.Tensor) and other.is_floating_point()):
                return torch.as_tensor(value, dtype=other.dtype, device=other.device)
            return value

        def fixed(x1, x2, /, **kwargs):
            return op(as_tensor(x1, x2), as_tensor(x2, x1), **kwargs)

        fixed.__name__ = fixed.__qualname__ = name
        return fixed

    return factory


def _vecdot(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
    def vecdot(x1, x2, /, *, axis: int = -1):
        """compat's generic vecdot (moveaxis, broadcast, conj, a (1×n)@(n×1) matmul, indexing) took 70 µs where
        torch.linalg.vecdot, the same contraction, took 3.5 µs at n = 10,000: a speed fix, not a correctness one."""
        if x1.dtype != x2.dtype:  # mixed dtypes: compat's promotion rules apply
            return compat.vecdot(x1, x2, axis=axis)
        return torch.linalg.vecdot(x1, x2, dim=axis)

    return vecdot


SCALAR_GRAPH_BREAK = "graph break under Dynamo (a Python scalar operand goes through torch.result_type)"
SCALAR_ROUTE = "the scalar becomes a tensor of the other operand's dtype"
FIXES: dict[str, Fix] = {
    "vecdot": Fix("about 20× slower (generic moveaxis/broadcast/matmul path)", "torch.linalg.vecdot", _vecdot),
    "sign": Fix("NaN assigned through a boolean mask: torch.func.vmap and Dynamo cannot batch/trace it",
                "torch.where(isnan(x), x, torch.sign(x))", _sign),
    **{name: Fix(SCALAR_GRAPH_BREAK, SCALAR_ROUTE, _scalar_operand(name))
       for name in ("maximum", "minimum", "atan2", "logaddexp")},
}


@functools.cache
def fixed_namespace() -> ModuleType:
    """array_api_compat.torch with `FIXES` applied, as a module of its own (compat's module is left untouched)."""
    import array_api_compat.torch as compat
    import torch

    xp = derived_namespace("adcompare.adapters.torch.xp", "array_api_compat.torch with adcompare's FIXES applied",
                           compat, {name: fix.build(torch, compat) for name, fix in FIXES.items()})
    control_flow.register(xp, while_loop=_refused_under_compile(torch), cond=_where_under_compile(torch))
    return xp


# Why torch.compile refuses adcompare.while_loop (probed with torch 2.13): its structured loop is the
# `torch._higher_order_ops.while_loop` operator, which has an autograd rule but no torch.func grad/jvp rule, and
# a torch.func transform around it fails while tracing (`AssertionError: Expected FakeTensor, got <class
# 'torch.Tensor'>`); unrolled instead, the loop costs ~1.3 s of compile per trip (GradBench's saddle takes ~10⁵).
WHILE_LOOP_REFUSED = "torch.compile cannot stage adcompare.while_loop"
WHILE_LOOP_UNDER_COMPILE = (
    f"{WHILE_LOOP_REFUSED} under torch.func: torch's while_loop operator has no torch.func grad or jvp rule (a "
    f"transform around it fails with AssertionError: Expected FakeTensor), and unrolled the loop costs about 1.3 s "
    f"of compile per trip; use variant eager")


def _refused_under_compile(torch: ModuleType) -> control_flow.NativeWhile:
    """Under torch.compile (Dynamo tracing) `adcompare.while_loop` raises, and the compiled variant fails the cell
    with the reason (torch_compile.py; Dynamo traces on the first call, after prepare, so a problem's loop is found
    there; GradBench's nested evals are declared unsupported ahead, torch.py); eagerly the Python loop runs."""
    def run(cond: control_flow.Cond, body: control_flow.Body, state: control_flow.State, max_trips: int) -> Any:
        if torch.compiler.is_compiling():
            raise UnsupportedOperation(WHILE_LOOP_UNDER_COMPILE)
        return NotImplemented

    return run


def _where_under_compile(torch: ModuleType) -> control_flow.NativeCond:
    """Under torch.compile `adcompare.cond` is both branches and torch.where (a Python `if` on a tensor would break
    the graph); eagerly Python's `if` runs one branch."""
    def run(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], operands: tuple[Any, ...]) -> Any:
        if not torch.compiler.is_compiling():
            return NotImplemented
        a, b = true_fn(*operands), false_fn(*operands)
        if isinstance(a, (tuple, list)):
            return tuple(torch.where(pred, u, v) for u, v in zip(a, b))
        return torch.where(pred, a, b)

    return run


# --- the one arithmetic fix ----------------------------------------------------------------------------------
# torch.func's forward mode drops the "wrapped number" mark of a Python float meeting a 0-d tensor, so the
# tangent of `xp.vecdot(a, x) / math.sqrt(n)` becomes float64 in a float32 cell (pytorch/pytorch#90065): jvp and
# jacfwd return float64 and hvp fails with "expected m1 and m2 to have the same dtype". Casting the result would
# hide that and cannot rescue hvp; instead such a float becomes a 0-d tensor of the tensor's dtype before the op,
# which is what torch's promotion rules give it anyway. Applied only where it can matter: forward-mode torch.func
# operators in cells narrower than float64 (a Python float is float64 already). Recorded in the cell's details.
FORWARD_MODE = frozenset({"jvp", "jacfwd", "hessian", "hvp", "newton_dir", "vmap_jacfwd"})
SCALAR_FIX = ("Python floats meeting 0-d tensors made 0-d tensors of the tensor's dtype "
              "(TorchFunctionMode; torch.func forward mode otherwise upcasts tangents, pytorch/pytorch#90065)")
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "true_divide", "pow", "__add__", "__radd__", "__sub__",
                         "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__rpow__"})


@functools.cache
def scalar_fix_mode() -> type:
    """The TorchFunctionMode class behind SCALAR_FIX (built on first use: torch is imported lazily)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class PythonFloatsTakeTensorDtype(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if len(args) == 2 and getattr(func, "__name__", "") in _ARITHMETIC:
                a, b = args
                if type(b) is float and isinstance(a, torch.Tensor) and a.dim() == 0 and a.is_floating_point():
                    args = (a, torch.tensor(b, dtype=a.dtype, device=a.device))
            return func(*args, **(kwargs or {}))

    return PythonFloatsTakeTensorDtype


def with_scalar_fix(fn: Callable[..., Any]) -> Callable[..., Any]:
    mode = scalar_fix_mode()

    def fixed(*args: Any) -> Any:
        with mode():
            return fn(*args)

    return fixed

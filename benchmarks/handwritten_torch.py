"""The torch adapter against hand-written PyTorch, interleaved (see benchmarks/adapter_vs_hand.py for the method).

Run:  python benchmarks/handwritten_torch.py [--pairs 300] [--variants eager,eager-autograd,compiled]

Hand-written as PyTorch's documentation shows: `torch.func.grad(f)(x)` / `torch.func.jacrev(f)(x)` (eager);
`torch.autograd.grad(f(leaf), leaf)` and `torch.autograd.functional.jacobian(f, x, vectorize=True)` on a leaf that
requires grad (eager-autograd); `torch.compile(torch.func.grad(f), fullgraph=True, dynamic=False)` (compiled).
"native" writes the ops as torch functions (torch.dot for the vector product) instead of array-api-compat's
namespace with adcompare's fixes. Each compiled hand-written form gets a code object of its own (`_own_code`):
every torch.func wrapper shares one, so Dynamo would otherwise keep all three forms as cache entries of one frame
and walk their guards on every call — a cost no single user program pays.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter_vs_hand  # noqa: E402

NAME = "torch"
VARIANTS = ("eager", "eager-autograd", "compiled")


def native_ops() -> adapter_vs_hand.NativeOps:
    import torch

    return adapter_vs_hand.NativeOps(sin=torch.sin, exp=torch.exp, vecdot=torch.dot, stack=torch.stack)


def _own_code(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """fn behind a function whose code object is new (exec compiles one per call)."""
    scope: dict[str, Any] = {"fn": fn}
    exec("def hand_written(x):\n    return fn(x)\n", scope)
    return scope["hand_written"]


def transform(operator: str, variant: str, f: Callable[[Any], Any], x: Any) -> Callable[[], Any]:
    import torch

    if variant == "eager-autograd":
        leaf = x.detach().clone().requires_grad_(True)
        if operator == "grad":
            return lambda: torch.autograd.grad(f(leaf), leaf)[0]
        return lambda: torch.autograd.functional.jacobian(f, leaf, vectorize=True)
    derivative = {"grad": torch.func.grad, "jacrev": torch.func.jacrev}[operator](f)
    if variant == "compiled":
        torch.compiler.set_stance("default")  # the adapter's cell set fail_on_recompile after its first call
        derivative = torch.compile(_own_code(derivative), fullgraph=True, dynamic=False)
    return lambda: derivative(x)


if __name__ == "__main__":
    sys.exit(adapter_vs_hand.main(sys.modules[__name__]))

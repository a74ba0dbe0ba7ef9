"""The autograd adapter against hand-written autograd, interleaved (see benchmarks/adapter_vs_hand.py).

Run:  OMP_NUM_THREADS=1 python benchmarks/handwritten_autograd.py [--pairs 300] [--dtype float64]

Hand-written as autograd's documentation shows: `autograd.grad(f)(x)` and `autograd.jacobian(f)(x)`. "native"
writes the ops in plain autograd.numpy (anp.dot for the vector product) instead of adcompare's namespace over it.
Thread variables default to 1 (set before NumPy loads); export them to change that.
"""
from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter_vs_hand  # noqa: E402

NAME = "autograd"
VARIANTS = ("eager",)


def native_ops() -> adapter_vs_hand.NativeOps:
    import autograd.numpy as anp

    return adapter_vs_hand.NativeOps(sin=anp.sin, exp=anp.exp, vecdot=anp.dot, stack=anp.stack)


def transform(operator: str, variant: str, f: Callable[[Any], Any], x: Any) -> Callable[[], Any]:
    import autograd

    derivative = {"grad": autograd.grad, "jacrev": autograd.jacobian}[operator](f)
    return lambda: derivative(x)


if __name__ == "__main__":
    sys.exit(adapter_vs_hand.main(sys.modules[__name__]))

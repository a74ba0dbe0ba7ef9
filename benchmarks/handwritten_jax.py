"""The JAX adapter against hand-written JAX, interleaved (see benchmarks/adapter_vs_hand.py for the method).

Run:  python benchmarks/handwritten_jax.py [--pairs 300] [--variants eager,compiled] [--dtype float32]

Hand-written as JAX's documentation shows: `jax.grad(f)(x)` / `jax.jacrev(f)(x)` eagerly, and
`jax.jit(jax.grad(f))` called on x with the constants closed over when compiled. The adapter's compiled cell
compiles ahead of time (`jit(...).lower(...).compile()`, its compile figure) and then calls the same `jax.jit`
function, so its calls take jax.jit's C++ fast path; its constants are positional arguments (closed over, JAX
would bake them into the program as literals). JAX's namespace is jax.numpy itself; "native" writes the
vector product as jnp.dot instead of jnp.vecdot (which costs more eagerly).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter_vs_hand  # noqa: E402

NAME = "jax"
VARIANTS = ("eager", "compiled")


def native_ops() -> adapter_vs_hand.NativeOps:
    import jax.numpy as jnp

    return adapter_vs_hand.NativeOps(sin=jnp.sin, exp=jnp.exp, vecdot=jnp.dot, stack=jnp.stack)


def transform(operator: str, variant: str, f: Callable[[Any], Any], x: Any) -> Callable[[], Any]:
    import jax

    derivative = {"grad": jax.grad, "jacrev": jax.jacrev}[operator](f)
    if variant == "compiled":
        derivative = jax.jit(derivative)
    return lambda: derivative(x)


if __name__ == "__main__":
    sys.exit(adapter_vs_hand.main(sys.modules[__name__]))

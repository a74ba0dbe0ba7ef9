"""The TensorFlow adapter against hand-written TensorFlow, interleaved (see benchmarks/adapter_vs_hand.py).

Run:  python benchmarks/handwritten_tensorflow.py [--pairs 300] [--variants eager,graph,compiled]

Hand-written as TensorFlow's documentation shows: a GradientTape (`tape.gradient`, `tape.jacobian`) eagerly; the
same inside `tf.function` with a fixed input signature (graph) and with `jit_compile=True` (compiled), called as
the concrete function, as the adapter does. "native" writes the ops as TensorFlow functions (tf.einsum for the
vector product, the fast eager spelling here) instead of adcompare's Array API namespace over TensorFlow.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter_vs_hand  # noqa: E402

NAME = "tensorflow"
VARIANTS = ("eager", "graph", "compiled")


def native_ops() -> adapter_vs_hand.NativeOps:
    import tensorflow as tf

    return adapter_vs_hand.NativeOps(sin=tf.sin, exp=tf.exp, vecdot=lambda a, b: tf.einsum("i,i->", a, b),
                                     stack=tf.stack)


def transform(operator: str, variant: str, f: Callable[[Any], Any], x: Any) -> Callable[[], Any]:
    import tensorflow as tf

    def derivative(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = f(t)
        return tape.gradient(y, t) if operator == "grad" else tape.jacobian(y, t)

    if variant == "eager":
        return lambda: derivative(x)
    function = tf.function(derivative, input_signature=[tf.TensorSpec(x.shape, x.dtype)],
                           jit_compile=variant == "compiled", autograph=False)
    concrete = function.get_concrete_function()
    return lambda: concrete(x)


if __name__ == "__main__":
    sys.exit(adapter_vs_hand.main(sys.modules[__name__]))

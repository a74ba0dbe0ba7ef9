"""A loop that compilers may keep as a loop: `fold(step, carry, xs, xp=xp)` in a problem.

Tracing compilers unroll a problem's Python `for` loop: LSTM at ADBench's c = 1024 is ~60,000 operations, and XLA
was still compiling it after 24 CPU-minutes. `fold` is that Python loop wherever the framework runs op by op
(eager variants, autograd, the NumPy reference: nothing changes there), and the framework's own loop where its
adapter registered one for the namespace it stages (JAX under jit: `lax.scan`; TensorFlow inside `tf.function`:
`tf.while_loop`), so a compiled variant compiles the step once. torch.compile has no stable loop primitive and
unrolls it.

    carry = step(carry, (xs[0][t], xs[1][t], …)) for t = 0 … len(xs[0]) − 1; returns the final carry.

The carry is a tuple or list of arrays (nested allowed) whose shapes and dtypes the step keeps.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from adcompare.model.namespace_table import NamespaceTable

Step = Callable[[Any, tuple[Any, ...]], Any]
NativeFold = Callable[[Step, Any, tuple[Any, ...]], Any]  # may return NotImplemented: then the Python loop runs

_NATIVE: NamespaceTable[NativeFold] = NamespaceTable()


def register(namespace: object, native: NativeFold) -> None:
    """An adapter's loop for problems run with `namespace` as `xp`."""
    _NATIVE.register(namespace, native)


def fold(step: Step, carry: Any, xs: Sequence[Any], *, xp: Any) -> Any:
    """Run `step` over the leading axis of the arrays `xs` (equal lengths), threading `carry`; the final carry."""
    xs = tuple(xs)
    native = _NATIVE.get(xp)
    if native is not None:
        result = native(step, carry, xs)
        if result is not NotImplemented:
            return result
    for t in range(xs[0].shape[0]):
        carry = step(carry, tuple(x[t] for x in xs))
    return carry

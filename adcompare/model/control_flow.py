"""Loops and branches that depend on values, written once: `adcompare.while_loop` and `adcompare.cond`.

A problem whose loop count or branch depends on its values (GradBench's gradient descent, its Euler integration)
cannot be staged by a tracing compiler as a Python `while`/`if`: jax.jit and tf.function cannot turn a traced value
into a Python bool. These two are that Python loop and `if` wherever the framework runs op by op (eager variants,
autograd, the NumPy reference: op counts as before), and the framework's structured control flow where its adapter
registered one for the namespace it stages (JAX under jit: lax.while_loop / lax.cond, or a bounded loop where
reverse mode transposes it; TensorFlow inside tf.function: tf.while_loop(maximum_iterations=max_trips) with tf.where
branches). torch.compile refuses them (`unsupported`, with the reason).

    while_loop(cond, body, state, *, xp, max_trips):
        while cond(state): state = body(state)     — at most max_trips trips; returns the final state
    cond(pred, true_fn, false_fn, *operands, xp):
        true_fn(*operands) if pred else false_fn(*operands)

The contract for problem authors: `state` is a tuple of fixed-shape arrays (a bool array is fine) that `body`
returns with the same shapes and dtypes; `cond` returns a scalar bool array; `cond`, `body` and the branches are
pure, may call `adcompare.grad`, and never turn a value into a Python bool. `max_trips` is static and required:
reaching it while `cond` still holds is an error, never a silent truncation. Op by op it raises `CellFailure`;
staged, the loop returns a flag with its state and `while_loop` multiplies every floating array of the state by
NaN where the flag is set, so the value and every derivative through it are NaN, which the harness records as the
cell's `nan` status (a NaN result is never timed or reported as a measurement).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adcompare.model.errors import CellFailure, UsageError
from adcompare.model.namespace_table import NamespaceTable

State = tuple[Any, ...]
Cond = Callable[[State], Any]
Body = Callable[[State], State]
# A native loop: (cond, body, state, max_trips) → (final state, exhausted: a scalar bool array, True where the
# loop stopped at max_trips with cond still holding), or NotImplemented: then the Python loop runs.
NativeWhile = Callable[[Cond, Body, State, int], Any]
# A native branch: (pred, true_fn, false_fn, operands) → the chosen branch's result, or NotImplemented.
NativeCond = Callable[[Any, Callable[..., Any], Callable[..., Any], tuple[Any, ...]], Any]

_WHILE: NamespaceTable[NativeWhile] = NamespaceTable()
_COND: NamespaceTable[NativeCond] = NamespaceTable()


def register(namespace: object, *, while_loop: NativeWhile | None = None, cond: NativeCond | None = None) -> None:
    """An adapter's structured control flow for problems run with `namespace` as `xp`."""
    if while_loop is not None:
        _WHILE.register(namespace, while_loop)
    if cond is not None:
        _COND.register(namespace, cond)


def exhausted_message(max_trips: int) -> str:
    return (f"adcompare.while_loop: the condition still held after max_trips={max_trips} trips; the loop was not "
            f"truncated: raise max_trips in the problem if the loop is right, or fix its condition")


def while_loop(cond: Cond, body: Body, state: State, *, xp: Any, max_trips: int) -> State:
    """`state = body(state)` while `cond(state)`, at most `max_trips` trips; the final state (see the module
    docstring for the contract)."""
    if not isinstance(state, (tuple, list)):
        raise UsageError("adcompare.while_loop: state must be a tuple of arrays; wrap a single array as (x,)")
    if isinstance(max_trips, bool) or not isinstance(max_trips, int) or max_trips < 1:
        raise UsageError(f"adcompare.while_loop: max_trips must be a positive int, not {max_trips!r}")
    state = tuple(state)
    native = _WHILE.get(xp)
    if native is not None:
        result = native(cond, body, state, max_trips)
        if result is not NotImplemented:
            final, exhausted = result
            return flagged(tuple(final), exhausted, xp)
    for _ in range(max_trips):
        if not bool(cond(state)):
            return state
        state = tuple(body(state))
    if bool(cond(state)):
        raise CellFailure(exhausted_message(max_trips))
    return state


def flagged(state: State, exhausted: Any, xp: Any) -> State:
    """`state` with every floating array multiplied by NaN where `exhausted` (by 1 elsewhere): a staged loop's
    flag, carried into the value and every derivative through it."""
    def poison(a: Any) -> Any:
        if "float" not in str(a.dtype):  # numpy's, JAX's, TensorFlow's and torch's dtype names alike
            return a
        ones = xp.ones_like(a)
        return a * xp.where(exhausted, ones * float("nan"), ones)

    return tuple(poison(a) for a in state)


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any, xp: Any) -> Any:
    """`true_fn(*operands)` if `pred` (a scalar bool array) holds, else `false_fn(*operands)`; both branches return
    arrays of the same shapes and dtypes."""
    native = _COND.get(xp)
    if native is not None:
        result = native(pred, true_fn, false_fn, operands)
        if result is not NotImplemented:
            return result
    return true_fn(*operands) if bool(pred) else false_fn(*operands)

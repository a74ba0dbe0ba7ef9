"""adcompare.fold: the Python loop op by op, the framework's own loop where an adapter registered one."""
from __future__ import annotations

import types

import numpy as np
import pytest

from adcompare import fold
from adcompare.model import loops
from adcompare.plugin import registry as plugins


def running_sum(carry, xs):
    total, last = carry
    (x,) = xs
    return total + x, x


def test_the_python_loop_threads_the_carry_through_every_row():
    xs = np.arange(12.0).reshape(4, 3)
    total, last = fold(running_sum, (np.zeros(3), np.zeros(3)), (xs,), xp=np)
    np.testing.assert_array_equal(total, xs.sum(axis=0))
    np.testing.assert_array_equal(last, xs[-1])


def test_a_registered_loop_runs_and_not_implemented_falls_back():
    calls = []
    ns = types.ModuleType("fake")

    def native(step, carry, xs):
        calls.append(len(xs))
        return NotImplemented if len(calls) > 1 else "native"

    loops.register(ns, native)
    xs = np.ones((2, 1))
    assert fold(running_sum, (np.zeros(1), np.zeros(1)), (xs,), xp=ns) == "native"
    total, _ = fold(running_sum, (np.zeros(1), np.zeros(1)), (xs,), xp=ns)  # fell back to the Python loop
    assert total[0] == 2.0 and calls == [1, 1]


def _lstm_jit_text(c: int) -> str:
    jax = pytest.importorskip("jax")
    from adcompare.adapters.jax import staged_namespace
    from adcompare.verify.cell_inputs import cell_inputs

    problem = plugins.load().problem("lstm")
    inputs = cell_inputs(problem, problem.size(f"l1-c{c}-b14"), "value", "float32")
    f = problem.bind(staged_namespace(), inputs.constants)
    return jax.jit(jax.grad(f)).lower(inputs.wrt).as_text()


def test_jax_compiles_lstm_as_one_loop_whatever_its_length():
    short, long = _lstm_jit_text(8), _lstm_jit_text(80)
    assert "while" in long
    assert len(long) < 1.5 * len(short)  # unrolled, the program grows tenfold with c


def test_tensorflow_graphs_hold_lstm_as_one_while_loop():
    tf = pytest.importorskip("tensorflow")
    from adcompare.adapters.tensorflow_namespace import namespace
    from adcompare.verify.cell_inputs import cell_inputs

    problem = plugins.load().problem("lstm")
    sizes = {}
    for c in (8, 80):
        inputs = cell_inputs(problem, problem.size(f"l1-c{c}-b14"), "value", "float32")
        f = problem.bind(namespace(), {k: tf.constant(v) for k, v in inputs.constants.items()})
        graph = tf.function(f, autograph=False).get_concrete_function(tf.constant(inputs.wrt)).graph
        ops = [op.type for op in graph.get_operations()]
        assert "While" in ops or "StatelessWhile" in ops
        sizes[c] = len(ops)
    assert sizes[80] == sizes[8]
    eager = f(tf.constant(inputs.wrt))  # eagerly the same fold is the Python loop, op by op
    assert np.isfinite(float(eager))

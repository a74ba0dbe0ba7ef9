"""adcompare.fold, adcompare.while_loop and adcompare.cond: the Python loop op by op, the framework's own loop where an
adapter registered one."""
from __future__ import annotations

import types

import numpy as np
import pytest

import adcompare
from adcompare import fold
from adcompare.model import control_flow, loops
from adcompare.model.namespace_table import NamespaceTable
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


def test_a_namespace_finds_its_own_registration_and_the_latest_wins():
    """Lookups compare namespaces with `is`, not by id(): torch 2.11's Dynamo cannot trace id() of a module, and
    GradBench's ode broke its graph under torch.compile there (an H100's torch 2.11; 2.13 traced it)."""
    table: NamespaceTable[str] = NamespaceTable()
    ns, twin = types.ModuleType("ns"), types.ModuleType("ns")
    table.register(ns, "first")
    table.register(ns, "second")
    assert table.get(ns) == "second" and table.get(twin) is None
    table.register(twin, "twin's")
    assert (table.get(ns), table.get(twin)) == ("second", "twin's")


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


# --- adcompare.while_loop and adcompare.cond ----------------------------------------------------------------------


def halve_until_small(x, *, xp, max_trips=64):
    """Halve x until |x|² ≤ 1, counting the trips; the count and the scale 2⁻ᵏ depend on x's value."""
    def big(state):
        return xp.sum(state[0] * state[0]) > 1

    def halve(state):
        y, k = state
        return y * 0.5, k + 1

    return adcompare.while_loop(big, halve, (x, xp.zeros_like(x[0])), xp=xp, max_trips=max_trips)


def halved_value(x, *, xp, max_trips=64):
    """Σ sin(2⁻ᵏx)·(k + 1) when Σ2⁻ᵏx > 0, else Σ cos(2⁻ᵏx)·(k + 1): both primitives in one function."""
    y, k = halve_until_small(x, xp=xp, max_trips=max_trips)
    return adcompare.cond(xp.sum(y) > 0, lambda y, k: xp.sum(xp.sin(y)) * (k + 1),
                          lambda y, k: xp.sum(xp.cos(y)) * (k + 1), y, k, xp=xp)


X_LOOP = np.array([3.0, -1.0, 2.5])  # |x|² = 17.25: 3 trips (k = 3, y = x/8)


def halved_closed_form(x):
    """(value, gradient) of halved_value at x, its trip count counted in NumPy without the primitives."""
    k = 0
    while np.sum((x / 2 ** k) ** 2) > 1:
        k += 1
    y = x / 2 ** k
    if y.sum() > 0:
        return np.sin(y).sum() * (k + 1), np.cos(y) * (k + 1) / 2 ** k
    return np.cos(y).sum() * (k + 1), -np.sin(y) * (k + 1) / 2 ** k


def test_the_python_while_loop_runs_until_the_condition_fails_and_cond_picks_a_branch():
    y, k = halve_until_small(X_LOOP, xp=np)
    assert k == 3 and np.array_equal(y, X_LOOP / 8)
    assert halved_value(X_LOOP, xp=np) == halved_closed_form(X_LOOP)[0]
    assert halved_value(-X_LOOP, xp=np) == halved_closed_form(-X_LOOP)[0]  # the false branch
    assert halve_until_small(np.array([0.5]), xp=np)[1] == 0  # no trip at all


def test_reaching_max_trips_with_the_condition_holding_raises_never_truncates():
    from adcompare.model.errors import CellFailure, UsageError

    assert halve_until_small(X_LOOP, xp=np, max_trips=3)[1] == 3  # exactly enough trips is fine
    with pytest.raises(CellFailure, match="still held after max_trips=2 trips"):
        halve_until_small(X_LOOP, xp=np, max_trips=2)
    with pytest.raises(UsageError, match="max_trips must be a positive int"):
        adcompare.while_loop(lambda s: False, lambda s: s, (X_LOOP,), xp=np, max_trips=0)
    with pytest.raises(UsageError, match="state must be a tuple"):
        adcompare.while_loop(lambda s: False, lambda s: s, X_LOOP, xp=np, max_trips=3)


def test_a_registered_loop_runs_and_its_flag_poisons_the_floating_state():
    ns = types.ModuleType("fake_staged")
    ns.__dict__.update({name: getattr(np, name) for name in ("where", "ones_like", "sum", "zeros_like")})
    calls = []

    def native(cond, body, state, max_trips):  # one trip, then claims it stopped at the bound
        calls.append(max_trips)
        return tuple(body(state)), np.asarray(len(calls) > 1)

    control_flow.register(ns, while_loop=native, cond=lambda *args: NotImplemented)
    y, k = halve_until_small(X_LOOP, xp=ns, max_trips=5)
    assert calls == [5] and k == 1 and np.array_equal(y, X_LOOP / 2)  # the native ran, not the Python loop
    y, k = halve_until_small(X_LOOP, xp=ns, max_trips=5)
    assert np.isnan(y).all() and np.isnan(k)  # exhausted: NaN in every floating array, never a truncated state
    assert adcompare.cond(np.asarray(False), lambda a: a + 1, lambda a: a + 2, 1, xp=ns) == 3  # NotImplemented: if


def test_jax_stages_the_loop_and_reverse_mode_transposes_its_bounded_form():
    """Under jax.jit: lax.while_loop for the value and forward mode, the bounded form under jax.grad, both equal to
    the closed form; an exhausted loop gives NaN in the value and the gradient."""
    jax = pytest.importorskip("jax")
    from adcompare.adapters import jax as jax_adapter

    xp = jax_adapter.staged_namespace()
    x = jax.numpy.asarray(X_LOOP, dtype=jax.numpy.float32)
    value, gradient = halved_closed_form(X_LOOP)
    f = jax.jit(lambda z: halved_value(z, xp=xp))
    assert "while" in jax.jit(lambda z: halved_value(z, xp=xp)).lower(x).as_text()
    np.testing.assert_allclose(f(x), value, rtol=1e-6)
    token = jax_adapter._FORM.set(jax_adapter.while_form("grad"))
    try:
        g = jax.jit(jax.grad(lambda z: halved_value(z, xp=xp)))
        np.testing.assert_allclose(g(x), gradient, rtol=1e-6)
        exhausted = jax.jit(jax.grad(lambda z: halved_value(z, xp=xp, max_trips=2)))(x)
    finally:
        jax_adapter._FORM.reset(token)
    assert np.isnan(np.asarray(exhausted)).all()
    assert np.isnan(float(jax.jit(lambda z: halved_value(z, xp=xp, max_trips=2))(x)))
    np.testing.assert_allclose(jax.jvp(f, (x,), (jax.numpy.ones_like(x),))[1], gradient.sum(), rtol=1e-5)


def test_tensorflow_stages_the_loop_as_a_while_loop_with_where_branches():
    tf = pytest.importorskip("tensorflow")
    from adcompare.adapters.tensorflow_namespace import namespace

    xp, x = namespace(), tf.constant(X_LOOP)
    value, gradient = halved_closed_form(X_LOOP)

    def grad(z, max_trips=64):
        with tf.GradientTape() as tape:
            tape.watch(z)
            y = halved_value(z, xp=xp, max_trips=max_trips)
        return tape.gradient(y, z)

    graph = tf.function(grad, autograph=False, jit_compile=True)
    ops = {op.type for op in tf.function(lambda z: halved_value(z, xp=xp), autograph=False)
           .get_concrete_function(x).graph.get_operations()}
    assert ops & {"While", "StatelessWhile"} and not ops & {"If", "StatelessIf"}
    np.testing.assert_allclose(graph(x).numpy(), gradient, rtol=1e-12)
    np.testing.assert_allclose(grad(x).numpy(), gradient, rtol=1e-12)  # eagerly: the Python loop
    assert np.isnan(tf.function(lambda z: grad(z, 2), autograph=False)(x).numpy()).all()

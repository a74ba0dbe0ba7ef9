"""The problem contract: declaration, validation at registration, inputs, sizes, binding."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adcompare import Shapes, grid, problem
from adcompare.model.errors import ProblemDefinitionError
from adcompare.model.problem import output_shape, problems_in
from adcompare.study.preflight import too_large


def test_grid_sizes_and_labels():
    @problem(sizes=grid(n=[5, 10], p=[8]), wrt="w", batch="x")
    def lin(w, x, /, *, xp):
        return x @ w

    @lin.inputs
    def _(rng, n, p):
        return {"w": rng.standard_normal(p), "x": rng.standard_normal((n, p))}

    p = lin.build()
    assert [s.label for s in p.sizes] == ["n5-p8", "n10-p8"]
    assert output_shape(p, p.sizes[1]) == (10,)


def test_inputs_are_seeded_and_cast():
    @problem(sizes=[4], wrt="x")
    def f(x, /, *, k, xp):
        return x * k

    @f.inputs
    def _(rng, n):
        return {"x": rng.standard_normal(n), "k": np.arange(n)}

    p = f.build()
    a, b = p.inputs(p.sizes[0], "float32"), p.inputs(p.sizes[0], "float32")
    np.testing.assert_array_equal(a["x"], b["x"])
    assert a["x"].dtype == np.float32 and a["k"].dtype.kind == "i"
    assert not np.array_equal(p.inputs(p.sizes[0], "float64", seed=1)["x"], a["x"])


def test_a_workers_next_cell_at_the_same_size_reuses_its_inputs_and_no_one_else_does():
    from adcompare.verify.cell_inputs import cell_inputs

    built = [0]

    @problem(sizes=[4, 8], wrt="x")
    def f(x, /, *, k, xp):
        return x * k

    @f.inputs
    def _(rng, n):
        built[0] += 1
        return {"x": rng.standard_normal(n), "k": rng.standard_normal(n)}

    p = f.build()
    small, large = p.sizes
    first = cell_inputs(p, small, "value", "float64", reuse=True)
    jvp = cell_inputs(p, small, "jvp", "float64", reuse=True)  # another operator, the same arrays
    assert built[0] == 1 and jvp.wrt is first.wrt and jvp.constants["k"] is first.constants["k"]
    with pytest.raises(ValueError, match="read-only"):
        jvp.wrt[0] = 1.0  # the next cells get these very arrays
    assert jvp.tangent is not None and first.tangent is None
    assert cell_inputs(p, small, "value", "float32", reuse=True).wrt.dtype == np.float32 and built[0] == 2
    assert cell_inputs(p, large, "value", "float32", reuse=True).wrt.shape == (8,) and built[0] == 3
    plain = cell_inputs(p, large, "value", "float32")  # not a worker's: built anew, and the kept ones dropped
    assert built[0] == 4 and cell_inputs(p, large, "value", "float32", reuse=True).wrt is not plain.wrt
    assert built[0] == 5


@pytest.mark.parametrize("decl, fix", [
    (lambda: problem(sizes=[3], wrt="x")(lambda x: x), "keyword-only 'xp'"),
    (lambda: problem(sizes=[3], wrt="y")(_f := (lambda x, *, xp: x)), "wrt='y' is not a parameter"),
    (lambda: problem(sizes=[3], wrt="x", batch="b")(lambda x, *, xp: x), "batch='b' is not a parameter"),
    (lambda: problem(sizes=[0], wrt="x")(lambda x, *, xp: x), "bad size 0"),
    (lambda: problem(sizes={"n": 3}, wrt="x")(lambda x, *, xp: x), "non-empty list"),
    (lambda: problem(sizes=[3], wrt="x", operators=["jacfwdd"])(lambda x, *, xp: x), "did you mean 'jacfwd'"),
])
def test_invalid_definitions_name_the_problem_and_the_fix(decl, fix):
    with pytest.raises(ProblemDefinitionError, match=fix):
        decl()


def test_generator_missing_a_size_argument():
    @problem(sizes=grid(n=[2], p=[3]), wrt="x")
    def f(x, /, *, xp):
        return x

    with pytest.raises(ProblemDefinitionError, match=r"lacks the size argument\(s\) \['p'\]"):
        @f.inputs
        def _(rng, n):
            return {"x": rng.standard_normal(n)}


def test_missing_generator_fails_at_registration():
    @problem(sizes=[2], wrt="x")
    def lonely(x, /, *, xp):
        return x

    with pytest.raises(ProblemDefinitionError, match="no input generator; add one with @lonely.inputs"):
        lonely.build()


def test_problems_in_module_and_builtin_registry(registry):
    import adcompare.problems.forward_vs_reverse as mod

    names = {p.name for p in problems_in(mod)}
    assert {"f_r2_r3", "exp_dot_loss"} <= names
    assert {"f_r2_r3", "exp_dot_loss", "linear_layer"} <= set(registry.problems)


def test_one_order_of_sizes_behind_smallest_and_larger():
    """Total dimension units first (n=2, p=1 is smaller than n=1, p=100), then dimension by dimension. The
    planner's order (quick suite's smallest size, a timeout skipping larger sizes) is this one."""
    from adcompare.study.plan import _size_order

    @problem(sizes=[{"n": 1, "p": 100}, {"n": 3, "p": 1}, {"n": 2, "p": 2}, {"n": 2, "p": 1}], wrt="x")
    def scaled(x, /, *, xp):
        return xp.sum(x)

    @scaled.inputs
    def _(rng, n, p):
        return {"x": rng.standard_normal(n * p)}

    built = scaled.build()
    assert [s.label for s in built.sizes_ascending] == ["n2-p1", "n2-p2", "n3-p1", "n1-p100"]
    assert built.smallest_size.label == "n2-p1"
    assert list(_size_order(built)) == [s.label for s in built.sizes_ascending]


def test_declared_shapes_are_used_without_evaluating_the_problem():
    @problem(sizes=[3, 10**9], wrt="x")
    def huge(x, /, *, xp):
        raise AssertionError("planning must not evaluate a problem that declares its shapes")

    @huge.inputs
    def _(rng, n):
        raise AssertionError("planning must not generate inputs of a problem that declares its shapes")

    @huge.shapes
    def _(n):
        return Shapes(wrt=(n,), output=(n,))

    p = huge.build()
    assert output_shape(p, p.sizes[1]) == (10**9,)
    assert too_large(p, p.sizes[1], "jacfwd", "float64", limit=2**30) is not None
    assert too_large(p, p.sizes[0], "jacfwd", "float64", limit=2**30) is None


def test_a_shape_function_must_take_every_dimension():
    @problem(sizes=grid(n=[5], p=[8]), wrt="w")
    def lin(w, /, *, xp):
        return w

    with pytest.raises(ProblemDefinitionError, match=r"shape function lacks the size argument\(s\) \['p'\]"):
        @lin.shapes
        def _(n):
            return Shapes(wrt=(n,), output=(n,))


@pytest.mark.parametrize("folder", ["problems", "adapters"])
def test_a_top_level_folder_is_importable_under_its_installed_name_only(folder):
    """problems/ and adapters/ are installed as adcompare.problems and adcompare.adapters; from the repository
    root they would also be importable as `problems` and `adapters` — two module objects for one file — so the
    second name is refused with the fix."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=root, capture_output=True, text=True)
    assert out.returncode == 1
    assert f"ImportError: import adcompare.{folder}, not {folder}" in out.stderr
    ok = subprocess.run([sys.executable, "-c", f"import adcompare.{folder}"], cwd=root, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr

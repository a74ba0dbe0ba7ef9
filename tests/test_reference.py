"""The float64 reference against closed-form derivatives, in every mode it can take (complex step, central
differences, full, directional, per example, second order), and its refusals."""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest

from adcompare import problem
from adcompare.model.errors import ProblemDefinitionError
from adcompare.plugin.adapter import CellInputs
from adcompare.verify import check as check_module
from adcompare.verify import differencing
from adcompare.verify import reference as ref_module
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.reference import Reference, ReferenceError, reference
from adcompare.verify.tolerance import scaled_error


@pytest.fixture(scope="module")
def problems(registry):
    return {name: registry.problem(name) for name in ("f_r2_r3", "exp_dot_loss", "linear_layer")}


def central_only(p):
    """The same problem, declared unsafe for the complex step, so the reference uses central differences."""
    return dataclasses.replace(p, complex_step_safe=False)


# ----------------------------------------------------------------------------------------------- closed forms


def f_r2_r3_jacobian(x):
    x0, x1 = x
    c = np.cos(x0 / x1)
    return np.array([[c / x1, -c * x0 / x1**2 + 2 * x1], [2 * x0, -2 * x1], [3 * x0**2, 0.0]])


def exp_dot_parts(inputs):
    x, x_star = inputs.wrt.astype(np.float64), inputs.constants["x_star"].astype(np.float64)
    n = x.size
    s = x_star @ x / math.sqrt(n)
    c = np.cos(np.exp(s)) * np.exp(s)
    dc = c - np.sin(np.exp(s)) * np.exp(2 * s)
    return c * x_star / math.sqrt(n), dc * np.outer(x_star, x_star) / n


def linear_layer_jacobian(X, o):
    """∂(X @ W)[i, k] / ∂W[p, q] = X[i, p] δ(k, q)."""
    return np.einsum("ip,kq->ikpq", X, np.eye(o))


# ------------------------------------------------------------------------------------------------ first order


def test_f_r2_r3_at_the_seed_point_both_methods(problems):
    p = problems["f_r2_r3"]
    inputs = CellInputs(wrt=np.array([1.0, 0.5]), constants={}, batch=None, tangent=None, cotangent=None)
    known = np.array([[-0.8322937, 2.6645875], [2, -1], [3, 0]])  # seed 001's published Jacobian
    for prob, word in ((p, "complex step"), (central_only(p), "central differences")):
        r = reference(prob, "n2", "jacfwd", inputs)
        assert r.method.startswith(word) and "full Jacobian" in r.method
        assert np.allclose(r.value, known, atol=1e-7)
        assert scaled_error(r.value, f_r2_r3_jacobian([1.0, 0.5])) <= r.error_bound


@pytest.mark.parametrize("central", [False, True], ids=["complex-step", "central"])
@pytest.mark.parametrize("operator", ["grad", "jacrev", "vjp", "jvp"])
def test_exp_dot_loss_first_order_within_its_error_bound(problems, operator, central):
    p = problems["exp_dot_loss"]
    p = central_only(p) if central else p
    inputs = cell_inputs(p, p.size("n100"), operator, "float64")
    grad, _ = exp_dot_parts(inputs)
    want = {"grad": lambda: grad, "jacrev": lambda: grad, "vjp": lambda: inputs.cotangent * grad,
            "jvp": lambda: grad @ inputs.tangent}[operator]()
    # The full reference, whatever the load: its cost is estimated from a timed evaluation, and on a busy machine
    # central differences at n = 100 were judged over the default 2 s budget (directional only, value None).
    r = reference(p, "n100", operator, inputs, budget=60.0)
    assert r.value is not None and r.value.shape == np.shape(want)
    error = scaled_error(r.value, want)
    assert error <= r.error_bound, (error, r)
    assert r.error_bound < (1e-8 if central else 1e-12)
    assert ("central" in r.method) == central


def test_float32_cells_are_referenced_at_float64_of_the_float32_point(problems):
    """The framework saw float32(x); the reference must differentiate there, not at the float64 x."""
    p = problems["exp_dot_loss"]
    size = p.size("n10")
    x32 = cell_inputs(p, size, "grad", "float32")
    x64 = cell_inputs(p, size, "grad", "float64")
    r32, r64 = reference(p, size, "grad", x32), reference(p, size, "grad", x64)
    assert scaled_error(r32.value, exp_dot_parts(x32)[0]) <= r32.error_bound
    assert scaled_error(r32.value, r64.value) > 1e-9  # the points differ by float32 rounding, and it shows
    v32 = reference(p, size, "value", cell_inputs(p, size, "value", "float32"))
    assert v32.value.dtype == np.float64 and v32.error_bound == 0.0
    assert v32.value == p.bind(np, {"x_star": x32.constants["x_star"].astype(np.float64)})(x32.wrt.astype(np.float64))


def test_per_example_jacobians_one_per_example(problems):
    p = problems["linear_layer"]
    size = p.sizes[0]
    inputs = cell_inputs(p, size, "vmap_jacrev", "float64")
    r = reference(p, size, "vmap_jacrev", inputs)
    o = inputs.wrt.shape[1]
    want = np.stack([linear_layer_jacobian(x[None, :], o)[0] for x in inputs.batch])  # (B, o, p, o)
    assert r.value.shape == want.shape and scaled_error(r.value, want) <= r.error_bound
    assert "one per example" in r.method


def example_by_example(p, inputs, operator):
    """Today's reference before issue 39, written out as the independent recomputation: each example's own
    f(w, bᵢ) differenced through its own closure, with the Differ the reference chose, stacked."""
    fn = p.bind(np, {k: np.asarray(v, dtype=np.float64) for k, v in inputs.constants.items()})
    x = inputs.wrt.astype(np.float64)
    examples = [(lambda b: lambda w: fn(w, b))(b) for b in inputs.batch.astype(np.float64)]
    differ, _ = differencing.choose(p, examples[0], x)
    if operator == "pmap_grad":
        return differencing.jacobian(lambda w: sum(g(w) for g in examples) / len(examples), x, differ,
                                     estimate=True)
    if operator == "pmap_value":
        return np.stack([g(x) for g in examples]), 0.0
    jacobians, errs = zip(*(differencing.jacobian(g, x, differ, estimate=True) for g in examples))
    return np.stack(jacobians), max(errs)


PER_EXAMPLE_CASES = [("bundle_adjustment", "n3-m10-p30", "vmap_jacfwd"),
                     ("bundle_adjustment", "n3-m10-p30", "vmap_jacrev"), ("linear_layer", "n5-p8-o2", "vmap_jacrev"),
                     ("rbf_kernel_map", "n10", "vmap_jacfwd"), ("mlp_loss", "B16-h4", "vmap_grad"),
                     ("mlp_loss", "B16-h4", "pmap_grad"), ("mlp_predict", "B16-h4", "pmap_value")]


@pytest.mark.parametrize(("name", "label", "operator"), PER_EXAMPLE_CASES)
def test_per_example_references_difference_the_whole_batch_to_the_same_numbers(registry, name, label, operator):
    """Issue 39: every example's derivative from evaluations of the whole batch equals differencing each example
    on its own (the method of the reference before) to rounding, error estimate included."""
    p = registry.problem(name)
    inputs = cell_inputs(p, p.size(label), operator, "float64")
    ref_module.clear_cache()
    r = reference(p, label, operator, inputs)
    want, err = example_by_example(p, inputs, operator)
    assert r.value is not None and r.value.shape == want.shape
    assert scaled_error(r.value, want) <= 1e-12
    assert r.error_bound == pytest.approx(err, rel=1e-3, abs=1e-15)
    assert "at once" in r.method or "whole batch" in r.method


def test_past_the_budget_every_example_is_checked_along_each_direction(registry, monkeypatch):
    """The directional per-example reference: each seeded v gives every example's Jᵢ·v from one batched
    difference, the same as each example's own (and a budget that buys one direction buys one)."""
    monkeypatch.setattr(ref_module, "seconds_per_evaluation", lambda differ, f, x, timed=None: 1e-3)
    p = registry.problem("bundle_adjustment")
    inputs = cell_inputs(p, p.size("n3-m10-p30"), "vmap_jacfwd", "float64")
    want, _ = example_by_example(p, inputs, "vmap_jacfwd")
    for budget, count in ((0.05, ref_module.DIRECTIONS), (0.005, 1)):  # 15 columns × 4 evaluations > 0.05 s
        ref_module.clear_cache()
        r = reference(p, "n3-m10-p30", "vmap_jacfwd", inputs, budget=budget)
        assert r.value is None and len(r.directional) == count and f"for {count} seeded v" in r.method
        assert r.cost <= max(budget, 4e-3)
        for d in r.directional:
            assert d.expected.shape == (30, 3) and scaled_error(d.apply(want), d.expected) <= 1e-9


def test_the_directional_derivative_that_prices_the_differencing_is_kept_not_thrown_away(registry, monkeypatch):
    """A heavy function (here: every price taken as measured) is priced by the first seeded J·v, which the
    directional reference then keeps: each seeded direction is differenced once (BA's per-example reference at
    p = 1,255,268 threw a J·e₀ of 0.61 s away)."""
    monkeypatch.setattr(ref_module, "seconds_per_evaluation", lambda differ, f, x, timed=None: timed)
    seen: list[np.ndarray] = []
    along = differencing.Differ.along
    monkeypatch.setattr(differencing.Differ, "along",
                        lambda self, f, x, v, *, estimate: seen.append(np.array(v))
                        or along(self, f, x, v, estimate=estimate))
    p = registry.problem("bundle_adjustment")
    inputs = cell_inputs(p, p.size("n3-m10-p30"), "vmap_jacfwd", "float64")
    want, _ = example_by_example(p, inputs, "vmap_jacfwd")
    ref_module.clear_cache()
    r = reference(p, "n3-m10-p30", "vmap_jacfwd", inputs, budget=0.0)  # one direction: the one that priced
    assert r.value is None and len(r.directional) == 1
    (d,) = r.directional
    assert sum(np.array_equal(v, d.right) for v in seen) == 1 and scaled_error(d.apply(want), d.expected) <= 1e-9


def counted_problem(batch_mixing: bool, batches: tuple[int, ...] = (10, 1000)):
    """A per-example problem that counts its Python calls; with `batch_mixing`, f(w, batch) subtracts the batch's
    mean, so its rows are not the examples' outputs (a batch norm's shape of problem)."""
    calls = [0]

    @problem(sizes=[dict(B=b) for b in batches], wrt="w", batch="X", complex_step_safe=True,
             operators=("value", "vmap_jacfwd", "pmap_value"))
    def counted(w, X, /, *, xp):
        calls[0] += 1
        out = xp.sin(X * w)  # (B, 3) for the batch, (3,) for one example
        return out - xp.mean(out, axis=0) if batch_mixing and X.ndim == 2 else out

    @counted.inputs
    def _(rng, B):
        return {"w": rng.standard_normal(3), "X": rng.standard_normal((B, 3))}
    return counted.build(), calls


def test_the_cost_of_a_per_example_reference_does_not_grow_with_the_batch():
    """The problem's Python calls for a per-example reference are a few dozen for 10 examples and for 1000 alike
    (they vary by a few with the timing of one evaluation, which repeats while it is quick)."""
    p, calls = counted_problem(batch_mixing=False)
    counts = []
    for size in p.sizes:
        ref_module.clear_cache()
        inputs = cell_inputs(p, size, "vmap_jacfwd", "float64")
        calls[0] = 0
        r = reference(p, size, "vmap_jacfwd", inputs)
        counts.append(calls[0])
        X, w = inputs.batch, inputs.wrt
        assert scaled_error(r.value, np.stack([np.diag(np.cos(x * w) * x) for x in X])) <= r.error_bound
    assert max(counts) < 60


def test_a_batch_that_mixes_examples_is_checked_on_a_seeded_subset_of_them():
    """Where f(w, batch)'s rows are not f(w, bᵢ), the reference says why and checks a few examples, each
    against its own slice of the result, at a cost that does not grow with the batch."""
    p, calls = counted_problem(batch_mixing=True)
    size = p.sizes[1]
    inputs = cell_inputs(p, size, "vmap_jacfwd", "float64")
    ref_module.clear_cache()
    calls[0] = 0
    r = reference(p, size, "vmap_jacfwd", inputs)
    assert calls[0] < 200
    assert r.value is None and f"{ref_module.EXAMPLES_CHECKED} seeded examples of 1000" in r.method
    assert "row 0 of f(w, batch) differs" in r.method
    X, w = inputs.batch, inputs.wrt
    right = np.stack([np.diag(np.cos(x * w) * x) for x in X])
    assert max(scaled_error(d.apply(right), d.expected) for d in r.directional) <= r.error_bound
    wrong = right.copy()
    wrong[[int(np.argmax(d.left)) for d in r.directional][0], 0, 0] += 1.0
    assert max(scaled_error(d.apply(wrong), d.expected) for d in r.directional) > 0.1
    # past the budget: one Jᵢ·v per checked example, as many examples as the budget buys (one here)
    ref_module.clear_cache()
    tight = reference(p, size, "vmap_jacfwd", inputs, budget=1e-12)
    assert len(tight.directional) == 1 and "each Jᵢ·v for a seeded v" in tight.method
    (d,) = tight.directional
    assert d.expected.shape == (3,) and scaled_error(d.apply(right), d.expected) <= tight.error_bound


def test_complex_step_is_refused_where_a_problem_wrongly_claims_it_is_safe():
    """Complex step through `abs` is silently wrong; the seeded cross-check catches it and says so."""
    @problem(sizes=[4], wrt="x", complex_step_safe=True)
    def abs_times_x(x, /, *, xp):
        return xp.abs(x) * x

    @abs_times_x.inputs
    def _(rng, n):
        return {"x": rng.standard_normal(n)}

    p = abs_times_x.build()
    inputs = cell_inputs(p, p.sizes[0], "jacfwd", "float64")
    r = reference(p, p.sizes[0], "jacfwd", inputs)
    assert "complex step disagreed" in r.method and "'abs_times_x'" in r.method
    assert scaled_error(r.value, np.diag(2 * np.abs(inputs.wrt))) <= r.error_bound


def counted_exp_problem(rate: float, seconds: float = 0.0):
    """sum(exp(rate·x)) with a count of its evaluations (complex or real), safe for the complex step; each takes
    at least `seconds` (past 0.01 s, the reference prices differencing by the evaluations it keeps, not by more)."""
    calls = []

    @problem(sizes=[6], wrt="x", complex_step_safe=True)
    def exp_sum(x, /, *, xp):
        calls.append(1)
        time.sleep(seconds)
        return xp.sum(xp.exp(rate * x))

    @exp_sum.inputs
    def _(rng, n):
        return {"x": 0.1 * rng.standard_normal(n)}

    return exp_sum.build(), calls


def test_the_complex_steps_confirmation_is_the_references_first_direction():
    """A directional grad reference by complex step evaluates f three times: the complex step along the first seeded
    direction, kept as that direction's J·v once central differences (two evaluations) confirm it. It used to take
    seven: the confirmation's own direction, the Richardson estimate's two more, and one evaluation to see f is
    scalar. The numbers are the closed form's, along that same direction."""
    p, calls = counted_exp_problem(1.0, seconds=0.012)
    size = p.sizes[0]
    inputs = cell_inputs(p, size, "grad", "float64")
    ref_module.clear_cache()
    calls.clear()
    r = reference(p, size, "grad", inputs, budget=1e-12)  # one direction
    assert len(calls) == 3 and "complex step" in r.method and len(r.directional) == 1
    (d,) = r.directional
    v = ref_module._directions(inputs.wrt.shape, salt=1)[0]
    assert np.array_equal(d.right, v)
    assert abs(d.expected - np.exp(inputs.wrt) @ v) <= 1e-14 * np.abs(np.exp(inputs.wrt)) @ np.abs(v)


def test_a_complex_step_farther_from_the_central_difference_than_its_bar_is_judged_by_the_estimate():
    """Where the central difference is off by more than CONFIRMED_GAP (exp(600·x): its truncation ~3e-7), the
    Richardson estimate decides, as before: consistent with it, the complex step is still chosen."""
    p, calls = counted_exp_problem(600.0)
    size = p.sizes[0]
    x = cell_inputs(p, size, "grad", "float64").wrt
    f = p.bind(np, {})
    v = differencing._check_direction(x.shape)
    cd, _ = differencing.Differ(False).along(f, x, v, estimate=False)
    assert scaled_error(cd, 600 * np.exp(600 * x) @ v) > differencing.CONFIRMED_GAP  # the case this test is about
    calls.clear()
    differ, how, confirmed = differencing.choose_along(p, f, x, v)
    assert differ.complex_step and how == "complex step" and len(calls) == 5  # estimate taken: two evaluations more
    assert confirmed is not None and scaled_error(confirmed.jv, 600 * np.exp(600 * x) @ v) <= 1e-14


def test_a_complex_step_that_overflows_to_nan_is_refused():
    """A complex evaluation can overflow where the real one does not (1/(1+exp(-x)) at x = -800: inf + inf·j, then
    NaN): a NaN gap refuses the complex step, and central differences give the reference."""
    @problem(sizes=[3], wrt="x", complex_step_safe=True)
    def sigmoid_sum(x, /, *, xp):
        return xp.sum(1.0 / (1.0 + xp.exp(-x)))

    @sigmoid_sum.inputs
    def _(rng, n):
        return {"x": np.array([0.3, -800.0, 1.2])[:n]}

    p = sigmoid_sum.build()
    inputs = cell_inputs(p, p.sizes[0], "grad", "float64")
    r = reference(p, p.sizes[0], "grad", inputs)
    assert "complex step disagreed with them by nan" in r.method
    s = 1 / (1 + np.exp(-inputs.wrt))
    assert scaled_error(r.value, s * (1 - s)) <= r.error_bound


# ----------------------------------------------------------------------------------------------- second order


@pytest.mark.parametrize("central", [False, True], ids=["over-complex-step", "over-central"])
def test_hessian_and_hvp_by_differencing_the_gradient(problems, central):
    p = problems["exp_dot_loss"]
    p = central_only(p) if central else p
    size = p.size("n10")
    inputs = cell_inputs(p, size, "hvp", "float64")
    _, hess = exp_dot_parts(inputs)
    h = reference(p, size, "hessian", cell_inputs(p, size, "hessian", "float64"))
    hv = reference(p, size, "hvp", inputs)
    assert "full Hessian" in h.method and np.array_equal(h.value, h.value.T)
    assert scaled_error(h.value, hess) <= h.error_bound
    assert scaled_error(hv.value, hess @ inputs.tangent) <= hv.error_bound
    assert h.error_bound <= (1e-6 if central else 1e-8)


# ----------------------------------------------------------------------------------------------- directional


def test_over_budget_references_are_directional_and_say_so(problems, monkeypatch):
    """The budget logic under an injected cost model (a fixed price per evaluation), so a slow or busy machine
    cannot move a reference across the budget."""
    price = 1e-5  # seconds per evaluation
    monkeypatch.setattr(ref_module, "seconds_per_evaluation", lambda differ, f, x, timed=None: price)
    p = problems["exp_dot_loss"]
    size = p.size("n100")
    monkeypatch.setattr(ref_module, "FULL_REFERENCE_BUDGET", 1e-4)  # seconds: less than a full Jacobian or one H·v
    inputs = cell_inputs(p, size, "grad", "float64")
    grad, hess = exp_dot_parts(inputs)

    g = reference(p, size, "grad", inputs)
    assert g.value is None and g.method.startswith("directional: R·v vs J·v")
    assert "> 0.0001 s of differencing" in g.method
    assert len(g.directional) == ref_module.DIRECTIONS
    for d in g.directional:
        assert scaled_error(d.apply(grad), d.expected) <= g.error_bound

    h = reference(p, size, "hessian", cell_inputs(p, size, "hessian", "float64"))
    assert h.value is None and "wᵀ·R·v vs wᵀ·H·v" in h.method
    for d in h.directional:
        assert scaled_error(d.apply(hess), d.expected) <= h.error_bound

    # One H·v costs 4·(100 to 400)·price, the full Hessian 100 of them, three directions three: 20000·price
    # affords the directions and not the Hessian whichever difference scheme is chosen.
    monkeypatch.setattr(ref_module, "FULL_REFERENCE_BUDGET", 20000 * price)
    h = reference(p, size, "hessian", cell_inputs(p, size, "hessian", "float64"))
    assert h.method.startswith("directional: R·v vs H·v")
    for d in h.directional:
        assert d.expected.shape == (100,) and scaled_error(d.apply(hess), d.expected) <= h.error_bound


# ---------------------------------------------------------------------------------------------------- refusals


def test_cached_per_cell_and_shared_between_jacobian_operators(problems):
    p = problems["linear_layer"]
    size = p.sizes[1]
    ref_module.clear_cache()
    a = reference(p, size, "jacfwd", cell_inputs(p, size, "jacfwd", "float64"))
    assert reference(p, size, "jacfwd", cell_inputs(p, size, "jacfwd", "float64")) is a
    b = reference(p, size, "jacrev", cell_inputs(p, size, "jacrev", "float64"))
    assert b is a  # one reference for the pair: one Jacobian, differenced once
    c = reference(p, size, "jacfwd", cell_inputs(p, size, "jacfwd", "float32"))
    assert c is not a


def test_a_reference_that_is_not_finite_is_an_error_naming_the_problem():
    @problem(sizes=[3], wrt="x")
    def log_of_negative(x, /, *, xp):
        return xp.log(x)

    @log_of_negative.inputs
    def _(rng, n):
        return {"x": -1.0 - rng.uniform(size=n)}

    p = log_of_negative.build()
    with pytest.raises(ReferenceError, match="'log_of_negative'.*not finite"), np.errstate(invalid="ignore"):
        reference(p, p.sizes[0], "jacfwd", cell_inputs(p, p.sizes[0], "jacfwd", "float64"))


@pytest.mark.parametrize("label", ["ell5", "ell7"])
def test_dets_value_and_gradient_are_its_closed_forms_equal_to_the_recursion(registry, label):
    """det declares its value (LU) and gradient (cofactors by LU) as closed forms: its ℓ! recursion through NumPy
    took as long as a framework's call. They are the reference, and equal what the recursion gives: its value,
    and its complex-step gradient entry by entry (the recursion only multiplies and adds: holomorphic)."""
    det = registry.problem("det")
    size = det.size(label)
    inputs = cell_inputs(det, size, "grad", "float64")
    A = inputs.wrt.astype(np.float64)
    f = det.bind(np, {})
    value, grad = (reference(det, size, op, inputs) for op in ("value", "grad"))
    assert value.method.startswith("analytic") and grad.method.startswith("analytic")
    assert scaled_error(value.value, f(A)) <= 1e-14
    h = 1e-30
    by_step = np.zeros_like(A)
    for i, j in np.ndindex(A.shape):
        step = np.zeros(A.shape, dtype=complex)
        step[i, j] = 1j * h
        by_step[i, j] = np.imag(f(A + step)) / h
    assert grad.value.shape == A.shape and scaled_error(grad.value, by_step) <= 1e-13


@pytest.mark.parametrize("name", ["gmm", "gmm_posterior"])
@pytest.mark.parametrize("wishart", [None, (2.0, 3)], ids=["defaults", "gamma2-m3"])
def test_gmms_closed_forms_equal_the_objective_and_its_differenced_gradient(registry, monkeypatch, name, wishart):
    """Both GMM conventions declare their value and gradient by hand (a component and a block of points at a time:
    the objective through NumPy built 1 GB arrays at ADBench's largest sizes). At d = 4 (Lₖ's six entries in their
    column-major order), with blocks of 16 points so that 50 points take four, and a file's other Wishart γ and m:
    the value is the objective's, and every gradient entry its Richardson-extrapolated central difference."""
    from adcompare.problems import gmm as gmm_module

    monkeypatch.setattr(gmm_module, "POINTS_A_BLOCK", 16)
    p = registry.problem(name)
    d, K, n = 4, 3, 50
    rng = np.random.default_rng(7)
    params = np.concatenate([rng.normal(size=(K, 1)), rng.uniform(size=(K, d)),
                             rng.normal(size=(K, d + d * (d - 1) // 2))], axis=1)
    constants = {"x": rng.normal(size=(n, d))}
    if wishart is not None:
        constants["wishart"] = gmm_module.wishart_constants(wishart[0], wishart[1], d)
    f = p.bind(np, constants)
    forms = dict(p.analytic)
    assert scaled_error(forms["value"](params, **constants), f(params)) <= 1e-14
    differenced = np.zeros_like(params)
    for index in np.ndindex(params.shape):
        def central(h):
            step = np.zeros_like(params)
            step[index] = h
            return (f(params + step) - f(params - step)) / (2 * h)
        h = 1e-3 * max(1.0, abs(params[index]))
        differenced[index] = (4 * central(h / 2) - central(h)) / 3
    assert scaled_error(forms["grad"](params, **constants), differenced) <= 1e-8


def test_closed_forms_are_for_operators_of_the_point_alone():
    @problem(sizes=[3], wrt="x", batch="b")
    def mapped(x, b, /, *, xp):
        return xp.sum(x * b)

    mapped.analytic("value")(lambda x, b: np.sum(x * b))
    with pytest.raises(ProblemDefinitionError, match="'mapped'.*not 'pmap_value'"):
        mapped.analytic("pmap_value")
    with pytest.raises(ProblemDefinitionError, match="'mapped'.*not 'jvp'"):
        mapped.analytic("jvp")


def test_a_scalar_operator_on_a_vector_function_is_refused(problems):
    p = problems["f_r2_r3"]
    inputs = cell_inputs(p, p.sizes[0], "jacfwd", "float64")
    with pytest.raises(ReferenceError, match=r"'f_r2_r3'.*'grad'.*scalar-valued.*\(3,\)"):
        reference(p, p.sizes[0], "grad", inputs)


def test_reference_is_a_plain_record(problems):
    p = problems["f_r2_r3"]
    r = reference(p, "n2", "value", cell_inputs(p, p.sizes[0], "value", "float64"))
    assert isinstance(r, Reference) and r.method == "exact (value by NumPy at float64)" and r.seconds >= 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.method = "x"


def test_a_large_batchs_value_is_evaluated_in_blocks_and_past_the_budget_on_seeded_blocks():
    """A value with a large batch whose rows are the examples' own is evaluated in blocks of rows (the same
    numbers, 3-4× faster in NumPy for BA); past the budget (BA's largest: 29 million rows) on seeded blocks,
    compared with those rows of the result; where the rows mix examples, the whole batch at once."""
    p, _ = counted_problem(batch_mixing=False, batches=(50_000,))
    (size,) = p.sizes
    inputs = cell_inputs(p, size, "value", "float64")
    at_once = np.asarray(p.bind(np, inputs.constants)(inputs.wrt))
    ref_module.clear_cache()
    whole = reference(p, size, "value", inputs)
    assert whole.value is not None and "in blocks of 10,000 rows of the batch's 50,000" in whole.method
    np.testing.assert_allclose(whole.value, at_once, rtol=1e-15, atol=0)
    assert ref_module._block_edges(45_000) == [0, 10_000, 20_000, 30_000, 45_000]  # no block of a few rows
    assert ref_module._block_edges(40_000) == [0, 10_000, 20_000, 40_000]
    ref_module.clear_cache()
    rows = reference(p, size, "value", inputs, budget=1e-12)
    assert rows.value is None and "exact on 20,000 rows of 50,000, 2 seeded blocks of 10,000" in rows.method
    (d,) = rows.directional
    assert d.rows is not None and len(set(d.rows.tolist())) == 20_000
    np.testing.assert_allclose(d.expected, at_once[d.rows], rtol=1e-15, atol=0)
    assert scaled_error(d.apply(at_once), d.expected) <= 1e-15
    wrong = at_once.copy()
    wrong[d.rows[15_000], 1] += 1.0
    assert scaled_error(d.apply(wrong), d.expected) > 0.1
    with pytest.raises(ValueError, match="no row"):
        d.apply(at_once[:100])
    mixing, _ = counted_problem(batch_mixing=True, batches=(50_000,))
    ref_module.clear_cache()
    inputs = cell_inputs(mixing, size, "value", "float64")
    mixed = reference(mixing, size, "value", inputs, budget=1e-12)
    assert mixed.method == "exact (value by NumPy at float64)"
    np.testing.assert_array_equal(mixed.value, np.asarray(mixing.bind(np, inputs.constants)(inputs.wrt)))
    ref_module.clear_cache()


def test_past_the_budget_a_large_batchs_per_example_derivative_is_checked_on_seeded_blocks_of_examples():
    """Where one direction of the whole batch already costs more than the budget (BA's per-example Jacobians at
    p = 4-5 million: 2.7-8 s), every Jᵢ·v along one seeded v for the examples of seeded blocks, compared with
    those rows of the result, by the streamed check as by the whole-array one; a wrong entry there fails."""
    p, _ = counted_problem(batch_mixing=False, batches=(50_000,))
    (size,) = p.sizes
    inputs = cell_inputs(p, size, "vmap_jacfwd", "float64")
    X, w = inputs.batch, inputs.wrt
    exact = np.cos(X * w)[:, :, None] * np.eye(3) * X[:, :, None]
    ref_module.clear_cache()
    r = reference(p, size, "vmap_jacfwd", inputs, budget=1e-12)
    assert r.value is None and "for the examples of 2 seeded blocks of 10,000 (20,000 of 50,000)" in r.method
    (d,) = r.directional
    assert d.rows is not None and d.right is not None and len(np.unique(d.rows)) == 20_000
    assert np.all(np.diff(d.rows) > 0) and d.expected.shape == (20_000, 3)
    assert scaled_error(d.apply(exact), d.expected) <= max(r.error_bound, 1e-12)
    for result in (exact, exact.astype(np.float32)):
        error, _ = check_module._per_example_check(result, r)  # type: ignore[misc]
        assert check_module._streamable(r, result.shape) and error == pytest.approx(
            scaled_error(d.apply(result.astype(np.float64)), d.expected), rel=1e-12, abs=1e-15)
    wrong = exact.copy()
    wrong[d.rows[12_345], 1, 1] += 1.0
    assert check_module._per_example_check(wrong, r)[0] > 0.1  # type: ignore[index]
    ref_module.clear_cache()


def test_a_large_batch_is_differenced_block_by_block_to_the_same_jacobians():
    """50,000 examples: the whole-batch function is evaluated in blocks (rows checked on a probe block of the
    first and last rows), and every example's Jacobian is the closed form's; where rows mix, the probe sees it."""
    p, calls = counted_problem(batch_mixing=False, batches=(50_000,))
    (size,) = p.sizes
    inputs = cell_inputs(p, size, "vmap_jacfwd", "float64")
    ref_module.clear_cache()
    calls[0] = 0
    r = reference(p, size, "vmap_jacfwd", inputs)
    assert calls[0] >= 4 * 8 and "all from each evaluation of the whole batch" in r.method  # 4 blocks a pass
    X, w = inputs.batch, inputs.wrt
    assert scaled_error(r.value, np.cos(X * w)[:, :, None] * np.eye(3) * X[:, :, None]) <= r.error_bound
    mixing, _ = counted_problem(batch_mixing=True, batches=(50_000,))
    ref_module.clear_cache()
    mixed = reference(mixing, size, "vmap_jacfwd", cell_inputs(mixing, size, "vmap_jacfwd", "float64"))
    assert mixed.value is None and "seeded examples of 50000" in mixed.method
    ref_module.clear_cache()

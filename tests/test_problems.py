"""The built-in problem suite, checked through NumPy only: it builds, its inputs are seeded, its shapes and dtypes
hold, the seed articles' numbers come out, and the classic objectives equal independent plain-loop versions."""
from __future__ import annotations

import math

import numpy as np
import pytest

from adcompare.model.errors import CellFailure
from adcompare.model.operators import OPERATORS, applicable
from adcompare.model.problem import evaluated_shapes, example_output_shape, output_shape, shapes_of
from adcompare.model.shapes import Shapes, without_hints
from adcompare.plugin import registry as plugins
from adcompare.problems import bundle_adjustment as ba
from adcompare.problems import forward_vs_reverse, linear_layer, rbf_kernel
from adcompare.problems import gmm as gmm_module
from adcompare.problems import lstm as lstm_module
from adcompare.verify.namespace_probes import ATTRIBUTES, PROBES

from .per_adapter import MINUTES_A_CALL
from .shared_results import problem_names

TAGS = {"scalar-output", "wide", "tall", "square", "per-example", "control-flow", "classic", "small",
        "nested"}

# Output shape of f(wrt) at the smallest size, and of f(wrt, one example) for per-example problems.
SHAPES = {
    "linear_layer": ((5, 2), (2,)),
    "linear_layer_rowsum": ((5,), ()),
    "f_xy": ((), None),
    "g_xy": ((2,), None),
    "f_r2_r3": ((3,), None),
    "exp_dot_loss": ((), None),
    "control_loop": ((), None),
    "control_loop_static": ((), None),
    "control_loop_while": ((), None),
    "rbf_kernel_point": ((10,), None),
    "rbf_kernel_map": ((10, 10), (10,)),
    "tanh": ((10,), None),
    "selu": ((10,), None),
    "mlp_predict": ((16, 4), (4,)),
    "mlp_loss": ((16,), ()),
    "gmm": ((), None),
    "gmm_posterior": ((), None),
    "bundle_adjustment": ((30, 3), (3,)),
    "lstm": ((), None),
    "lse": ((), None),
    "llsq": ((), None),
    "det": ((), None),
    "ode": ((), None),
    "kmeans": ((), None),
    "ht": ((300,), None),
    "saddle": ((4,), None),
    "particle": ((), None),
}


@pytest.fixture(scope="module")
def registry():
    return plugins.load()


@pytest.fixture(scope="module")
def suite(registry):
    return {name: p for name, p in registry.problems.items() if p.source.startswith("adcompare.problems.")}


def smallest(problem):
    return problem.smallest_size


def jacobian(f, w, h=1e-6):
    """Central differences: J[..., idx] = ∂f/∂w[idx]."""
    w = np.asarray(w, dtype=np.float64)
    out = np.asarray(f(w))
    J = np.zeros(out.shape + w.shape)
    for idx in np.ndindex(w.shape):
        e = np.zeros_like(w)
        e[idx] = h
        J[(...,) + idx] = (np.asarray(f(w + e)) - np.asarray(f(w - e))) / (2 * h)
    return J


def test_every_built_in_problem_builds_with_tags_docs_and_sizes(registry, suite):
    assert not registry.broken
    assert set(suite) == set(SHAPES)
    for name, p in suite.items():
        assert p.description, f"{name} has no docstring"
        assert set(p.tags) <= TAGS, f"{name}: unknown tags {set(p.tags) - TAGS}"
        assert p.sizes, name
        assert ("per-example" in p.tags) == (p.batch is not None), name
    assert {n for n, p in suite.items() if "classic" in p.tags} == {"gmm", "gmm_posterior", "bundle_adjustment",
                                                                             "lstm", "lse", "llsq", "det", "ode",
                                                                             "kmeans", "ht"}
    assert sorted(n for n, p in suite.items() if not p.compilable) == ["control_loop"]


def test_declared_operators_apply_to_the_output_shapes(suite):
    for name, p in suite.items():
        size = smallest(p)
        out = output_shape(p, size)
        ex = example_output_shape(p, size) if p.batch else None
        for op in p.operators or ():
            why = applicable(op, out_shape=out, example_out_shape=ex, has_batch=p.batch is not None,
                             declared=p.operators)
            assert why is None, f"{name}: declares {op} but {why}"


def test_inputs_are_reproducible_from_the_seed(suite):
    for name, p in suite.items():
        size = smallest(p)
        a, b = p.inputs(size, "float64", seed=0), p.inputs(size, "float64", seed=0)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}.{key}")


def test_output_shapes_and_dtype_at_the_smallest_size(suite):
    for name, p in suite.items():
        size = smallest(p)
        shape, example_shape = SHAPES[name]
        assert output_shape(p, size) == shape, name
        if p.batch:
            assert example_output_shape(p, size) == example_shape, name
        # float32 in, float32 out: a creation call without dtype= would promote to float64 here
        inputs = p.inputs(size, "float32")
        w = inputs.pop(p.wrt)
        out = np.asarray(p.bind(np, inputs)(w))
        assert out.dtype == np.float32, name
        if name in MINUTES_A_CALL and p.shape_function is not None:  # see the next test
            assert without_hints(shapes_of(p, size)) == Shapes(w.shape, out.shape), name


def test_declared_shapes_equal_an_evaluation_at_the_two_smallest_sizes(suite):
    """Problems whose one NumPy call takes tens of seconds (GradBench's nested saddle and particle: their inner
    derivatives by central differences) are held to the evaluation the test above makes, at their one size."""
    declared = [p for p in suite.values() if p.shape_function is not None]
    assert {p.name for p in declared} >= {"gmm", "lstm", "bundle_adjustment", "rbf_kernel_map"}
    for p in declared:
        if p.name in MINUTES_A_CALL:
            assert len(p.sizes) == 1 and p.batch is None, p.name
            continue
        for size in sorted(p.sizes, key=lambda s: sum(v for _, v in s.dims))[:2]:
            assert without_hints(shapes_of(p, size)) == evaluated_shapes(p, size), f"{p.name} at {size.label}"


def test_per_example_function_on_one_example_equals_its_row_of_the_batch(suite):
    for name, p in suite.items():
        if p.batch is None:
            continue
        inputs = p.inputs(smallest(p), "float64")
        w, batch = inputs.pop(p.wrt), inputs.pop(p.batch)
        whole = p.bind(np, {**inputs, p.batch: batch})(w)
        for i in (0, len(batch) - 1):
            np.testing.assert_allclose(p.bind(np, inputs)(w, batch[i]), whole[i], rtol=1e-12, err_msg=name)


def test_problems_use_only_probed_namespace_names(registry, suite):
    assert set(suite) <= set(registry.problems)  # the names are the registry's problems', a superset of the suite's
    unknown = problem_names(registry) - set(PROBES) - ATTRIBUTES
    assert not unknown, f"names without a namespace probe: {sorted(unknown)}"


def test_seed_000_f_and_g_at_3_3():
    point = np.array([3.0, 3.0])
    assert linear_layer.f_xy(point, xp=np) == 12.0
    np.testing.assert_allclose(jacobian(lambda v: linear_layer.f_xy(v, xp=np), point), [1.0, 6.0], atol=1e-6)
    np.testing.assert_allclose(linear_layer.g_xy(point, xp=np), [0.0, 12.0])
    np.testing.assert_allclose(jacobian(lambda v: linear_layer.g_xy(v, xp=np), point), [[1, -1], [1, 6]], atol=1e-6)


def test_seed_000_rowsum_gradient_is_the_articles_vmap_grad():
    rng = np.random.default_rng(3)
    W, x = rng.uniform(size=(8, 2)), rng.uniform(size=8)
    g = jacobian(lambda w: linear_layer.linear_layer_rowsum(w, x, xp=np), W)  # (p, o)
    # the article: for every column k, grad of x·W[:, k] w.r.t. W[:, k] is x
    np.testing.assert_allclose(g, np.stack([x, x], axis=1), atol=1e-6)


def test_seed_001_jacobian_at_the_articles_point():
    J = jacobian(lambda v: forward_vs_reverse.f_r2_r3(v, xp=np), np.array([1.0, 0.5]))
    np.testing.assert_allclose(J, [[-0.8322937, 2.6645875], [2.0, -1.0], [3.0, 0.0]], atol=1e-6)


def test_seed_001_control_loop_reads_k_from_the_data():
    z = np.array([0.3, -1.2, 2.7, 0.9])  # k = 2
    expected = np.sum(np.sin(np.sin(z**2) ** 2))
    assert forward_vs_reverse.control_loop(z, xp=np) == pytest.approx(expected)
    z3 = z + np.array([0.0, 0.0, 0.5, 0.0])  # max 3.2: k = 3, the static variant's count
    loop, static = forward_vs_reverse.control_loop, forward_vs_reverse.control_loop_static
    assert loop(z3, xp=np) == pytest.approx(static(z3, xp=np))
    assert loop(z, xp=np) != pytest.approx(static(z, xp=np))


def test_seed_001_staged_twin_takes_the_loops_count_and_never_truncates():
    """control_loop_while runs range(int(max(z)))'s trips — none below 1, as int truncates toward 0 — and a
    max(z) past its bound is an error, not a shorter loop."""
    loop, twin = forward_vs_reverse.control_loop, forward_vs_reverse.control_loop_while
    for z in (np.array([0.3, -1.2, 2.7, 0.9]), np.array([0.3, -1.2, 3.2, 0.9]), np.array([0.99, -0.5]),
              np.array([-0.2, -3.5]), np.array([1.0, 0.5]), np.linspace(-1.0, 7.5, 9)):
        assert twin(z, xp=np) == loop(z, xp=np), z
    bound = forward_vs_reverse.CONTROL_MAX_TRIPS
    assert twin(np.array([bound + 0.5]), xp=np) == loop(np.array([bound + 0.5]), xp=np)
    with pytest.raises(CellFailure, match="max_trips=8"):
        twin(np.array([bound + 1.5]), xp=np)


def test_seed_002_map_shift_derivative_is_the_threads_grad_kernel_map():
    X = np.linspace(-1.0, 1.0, 7)
    t = np.zeros(1)
    for j in (0, 3):
        per_point = jacobian(lambda s: rbf_kernel.rbf_kernel_map(s, X[j:j + 1], X2=X, xp=np), t)[:, 0]
        k = rbf_kernel.rbf_kernel_point(X[j:j + 1], X=X, xp=np)
        np.testing.assert_allclose(per_point, k * (X - 0.5), atol=1e-8)  # ∂/∂x exp(−½(−2xX + x + X))


def gmm_loops(alphas, means, icf, x, gamma=1.0, m=0):
    """ADBench's GMM objective, one point and one component at a time."""
    n, d = x.shape
    K = len(alphas)

    def lse(values):
        top = max(values)
        return top + math.log(sum(math.exp(v - top) for v in values))

    Qs = []
    for k in range(K):
        Q = np.zeros((d, d))
        for j in range(d):
            Q[j, j] = math.exp(icf[k][j])
        index = d
        for col in range(d):
            for row in range(col + 1, d):
                Q[row, col] = icf[k][index]
                index += 1
        Qs.append(Q)
    total = 0.0
    for i in range(n):
        terms = []
        for k in range(K):
            z = [sum(Qs[k][r][c] * (x[i][c] - means[k][c]) for c in range(d)) for r in range(d)]
            terms.append(alphas[k] + sum(icf[k][:d]) - 0.5 * sum(v * v for v in z))
        total += lse(terms)
    value = -n * d * 0.5 * math.log(2 * math.pi) + total - n * lse(list(alphas))
    n_prime = d + m + 1
    multigammaln = 0.25 * d * (d - 1) * math.log(math.pi) + sum(
        math.lgamma(0.5 * n_prime + 0.5 * (1 - j)) for j in range(1, d + 1))
    C = n_prime * d * (math.log(gamma) - 0.5 * math.log(2)) - multigammaln
    prior = 0.0
    for k in range(K):
        frobenius = sum(math.exp(q) ** 2 for q in icf[k][:d]) + sum(v * v for v in icf[k][d:])
        prior += 0.5 * gamma * gamma * frobenius - m * sum(icf[k][:d])
    return value + prior - K * C


def test_gmm_objective_equals_plain_loops_at_a_hand_made_input():
    alphas = np.array([0.5, -0.3])
    means = np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.0]])
    icf = np.array([[0.1, -0.2, 0.3, 0.5, -0.6, 0.7], [0.0, 0.4, -0.1, -0.3, 0.2, 0.1]])  # d = 3: 3 + 3 entries
    x = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5], [-0.2, 0.3, 0.9], [0.0, -1.5, 0.4]])
    params = np.concatenate([alphas[:, None], means, icf], axis=1)
    expected = gmm_loops(alphas, means, icf, x)
    assert gmm_module.gmm(params, x=x, xp=np) == pytest.approx(expected, rel=1e-12)


def rodrigues_matrix(r):
    theta = np.linalg.norm(r)
    k = r / theta
    Kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(theta) * Kx + (1 - math.cos(theta)) * Kx @ Kx


def ba_loops(cams, X, w, feats, cam_idx, point_idx):
    """ADBench's residuals per observation, with the rotation as a matrix (an independent formulation)."""
    out = []
    for i in range(len(w)):
        cam, point = cams[cam_idx[i]], X[point_idx[i]]
        p = rodrigues_matrix(cam[0:3]) @ (point - cam[3:6])
        q = p[:2] / p[2]
        rsq = q[0] ** 2 + q[1] ** 2
        distorted = q * (1 + cam[9] * rsq + cam[10] * rsq**2)
        e = w[i] * (distorted * cam[6] + cam[7:9] - feats[i])
        out.append([e[0], e[1], 1 - w[i] ** 2])
    return np.array(out)


def test_bundle_adjustment_residuals_equal_plain_loops():
    p = ba.bundle_adjustment.build()
    inputs = p.inputs(smallest(p), "float64")
    f = p.bind(np, {"observations": inputs["observations"]})
    np.testing.assert_allclose(f(inputs["delta"]), ba_loops(*ba.generate(np.random.default_rng(0), n=3, m=10, p=30)),
                               rtol=1e-12)
    adbench = ba.replicate(ba.ADBENCH_CAMERA, ba.ADBENCH_POINT, ba.ADBENCH_WEIGHT, ba.ADBENCH_FEATURE, 49, 7776, 40)
    rows = ba.gather(*adbench)
    expected = ba_loops(*adbench)
    np.testing.assert_allclose(ba.residual(rows[:, :ba.BLOCK], rows[:, ba.BLOCK:], np), expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())


def test_bundle_adjustment_jacobian_rows_touch_only_their_camera_point_and_weight():
    n, m, p = 3, 10, 30
    cams, X, w, feats, cam_idx, point_idx = ba.generate(np.random.default_rng(0), n, m, p)

    def all_residuals(theta):
        c = theta[:11 * n].reshape(n, 11)
        pts = theta[11 * n:11 * n + 3 * m].reshape(m, 3)
        weights = theta[11 * n + 3 * m:]
        return ba.residual(ba.gather(c, pts, weights, feats, cam_idx, point_idx)[:, :ba.BLOCK], feats, np)

    theta = np.concatenate([cams.ravel(), X.ravel(), w])
    J = jacobian(all_residuals, theta).reshape(3 * p, theta.size)
    problem = ba.bundle_adjustment.build()
    rows = ba.gather(cams, X, w, feats, cam_idx, point_idx)
    for i in range(p):
        columns = np.concatenate([
            11 * cam_idx[i] + np.arange(11), 11 * n + 3 * point_idx[i] + np.arange(3), [11 * n + 3 * m + i]])
        block = J[3 * i:3 * i + 3]
        outside = np.delete(block, columns, axis=1)
        assert not outside.any(), f"observation {i} depends on columns outside its camera, point and weight"
        assert np.all(np.abs(block[:2, columns]).max(axis=0) > 0), f"observation {i}: a parameter has no effect"
        assert not block[2, columns[:-1]].any() and block[2, columns[-1]] != 0  # w_err depends on w only
        # the per-example problem's derivative w.r.t. the shift δ is this block
        shift = jacobian(lambda d: problem.bind(np, {})(d, rows[i]), np.zeros(ba.BLOCK))
        np.testing.assert_allclose(shift, block[:, columns], atol=1e-6)


def lstm_loops(main, extra, state, sequence):
    """ADBench's LSTM objective with explicit loops over time, layers and units."""
    l2, four_b = main.shape
    layers, b = l2 // 2, four_b // 4

    def sig(v):
        return 1 / (1 + math.exp(-v))

    hidden = [list(state[2 * i]) for i in range(layers)]
    cell = [list(state[2 * i + 1]) for i in range(layers)]
    total = 0.0
    for t in range(len(sequence) - 1):
        x = [sequence[t][j] * extra[0][j] for j in range(b)]
        for i in range(layers):
            weight, bias = main[2 * i], main[2 * i + 1]
            new_h, new_c = [], []
            for j in range(b):
                forget = sig(x[j] * weight[j] + bias[j])
                ingate = sig(hidden[i][j] * weight[b + j] + bias[b + j])
                outgate = sig(x[j] * weight[2 * b + j] + bias[2 * b + j])
                change = math.tanh(hidden[i][j] * weight[3 * b + j] + bias[3 * b + j])
                c = cell[i][j] * forget + ingate * change
                new_c.append(c)
                new_h.append(outgate * math.tanh(c))
            hidden[i], cell[i] = new_h, new_c
            x = new_h
        y = [x[j] * extra[1][j] + extra[2][j] for j in range(b)]
        norm = math.log(sum(math.exp(v) for v in y) + 2)
        total += sum(sequence[t + 1][j] * (y[j] - norm) for j in range(b))
    return -total / (b * (len(sequence) - 1))


def test_lstm_objective_equals_plain_loops_at_a_hand_made_input():
    rng = np.random.default_rng(7)
    layers, b = 2, 4  # and c = 5 characters in the sequence below
    main = rng.uniform(-1, 1, (2 * layers, 4 * b))
    extra = rng.uniform(-1, 1, (3, b))
    state = rng.uniform(-1, 1, (2 * layers, b))
    sequence = np.eye(b)[[0, 2, 1, 3, 2]]
    params = np.concatenate([main.reshape(8 * layers, b), extra])
    expected = lstm_loops(main, extra, state, sequence)
    assert lstm_module.lstm(params, state=state, sequence=sequence, xp=np) == pytest.approx(expected, rel=1e-12)


def test_every_operator_name_in_the_suite_is_known(suite):
    for p in suite.values():
        assert set(p.operators or ()) <= set(OPERATORS)


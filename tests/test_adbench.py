"""ADBench's golden values, on ADBench's own test inputs (tests/fixtures/adbench, MIT, see its README): through
NumPy (the float64 reference) and through every installed adapter, eager and compiled (BA's compiled forward-mode
blocks, and JAX's and TensorFlow's LSTM eager, 1,023 steps op by op, are `slow`), BA also at θ = 0 and |θ| < 1e-12.

Two kinds of golden: ADBench's published ones (test/python/modules/common/{gmm,ba,lstm}_tests.py), held to
ADBench's own absolute 1e-8; and the values ADBench's compiled C++ prints for the same inputs (objectives and its
manual derivatives, tests/fixtures/adbench/cpp_goldens.json, made by cpp/make_goldens.sh), held to 1e-12
relative. Every adapter runs in its own process (JAX's x64 switch is process-wide), as in `adcompare run`: in the normal
run tests/test_goldens.py's, shared with the other goldens.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from adcompare.model.cell import Cell
from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import CellInputs
from adcompare.problems import bundle_adjustment as ba
from adcompare.verify.expectations import expected
from adcompare.verify.input_sources import with_inputs
from adcompare.verify.reference import reference, reference_value

from . import per_adapter
from .conftest import FIXTURES
from .per_adapter import (
    BUILT_IN_ADAPTERS,
    evaluate_in_worker,
    float64_inputs,
    one_class_per_adapter,
    skip_unless_installed,
)

ADBENCH = FIXTURES / "adbench"
GMM_FILE, BA_FILE, LSTM_FILE = ADBENCH / "gmm" / "test.txt", ADBENCH / "ba" / "test.txt", \
    ADBENCH / "lstm" / "lstm_l2_c1024.txt"
TOLERANCE = 1e-8  # ADBench's, absolute (utils.py assertFloatEqual / assertFloatArrayEqual)
# Values printed by ADBench's compiled C++ (objectives and manual derivatives) for the same inputs, made by
# tests/fixtures/adbench/cpp/make_goldens.sh; held to 1e-12 relative.
CPP = json.loads((ADBENCH / "cpp_goldens.json").read_text())
CPP_TOLERANCE = 1e-12

# test/python/modules/common/gmm_tests.py
GMM_OBJECTIVE = 8.07380408004975791e+00
GMM_GRADIENT = [
    1.08662855508652456e-01, -7.41270039523898472e-01, 6.32607184015246071e-01, 1.11692576532787013e+00,
    1.63333013551455269e-01, -2.19989824071193142e-02, 2.27778292254236098e-01, 1.20963025612832187e+00,
    -6.06375920733956339e-02, 2.58529994051162237e+00, 1.12632694524213789e-01, 3.85744309849611777e-01,
    7.35180573182305508e-02, 5.41836362715595232e+00, -3.21494409677446469e-01, 1.71892309775004937e+00,
    8.60091090790866875e-01, -9.94640930466322848e-01]
# test/python/modules/common/ba_tests.py: every one of the 10 observations has these residuals, and its two
# reprojection rows of the sparse Jacobian these 15 + 15 values (camera 11, point 3, weight 1); dw_err/dw = −2w.
BA_REPROJECTION = [-2.69048849235189402e-01, 2.59944792677901881e-01]
BA_WEIGHT_ERROR = 8.26092651515999976e-01
BA_JACOBIAN_ROWS = [
    [2.28877202208246757e+02, 6.34574811495545418e+02, -7.82222866259340549e+02, 2.42892615607159668e+00,
     -1.17828079628011313e+01, 2.54169312487743460e+00, -1.03657084958518086e+00, 4.17022e-01, 0.0,
     -3.50739521096005205e+02, -9.12107773668008576e+02, -2.42892615607159668e+00, 1.17828079628011313e+01,
     -2.54169312487743460e+00, -6.45167039712987389e-01],
    [-1.20542435994996879e+02, -3.85673240766460424e+02, 9.75476291403326456e+01, -1.78372108529576567e+00,
     4.15466799433126077e+00, 2.04025718029898906e+00, 3.49176397433145880e-01, 0.0, 4.17022e-01,
     1.18149147704414503e+02, 3.07250108960343255e+02, 1.78372108529576567e+00, -4.15466799433126077e+00,
     -2.04025718029898906e+00, 6.23335921553064054e-01]]
BA_WEIGHT_ERROR_DERIVATIVE = -8.34044e-01
# test/python/modules/common/lstm_tests.py (objective published to 8 digits; the gradient is in lstm_gradient.json,
# copied from the same file: 14 × 4 × 2 × 2 + 3 × 14 = 266 values in ADBench's order [main_params | extra_params])
LSTM_OBJECTIVE = 0.66666518
LSTM_GRADIENT = json.loads((ADBENCH / "lstm" / "lstm_gradient.json").read_text())

ADAPTERS = BUILT_IN_ADAPTERS


def _registry():
    return with_inputs(plugins.load(), [str(GMM_FILE), str(BA_FILE), str(LSTM_FILE)])


def _file_size(registry, name):
    (size,) = registry.problem(name).sizes
    return size


# --- BA rows: ADBench's test observations, and the same camera at zero and near-zero rotation ---------------

ZERO_ROTATIONS = (np.zeros(3), np.array([3e-13, -4e-13, 1e-13]), np.array([0.0, 5e-13, 0.0]))


def ba_rows() -> np.ndarray:
    """(30, 17): ADBench's test.txt observations (rows 0-9), then its camera with rotation 0 (10-19), then with
    |θ| < 1e-12 (20-29, two rotations alternating)."""
    rows = _registry().problem("bundle_adjustment").inputs(_file_size(_registry(), "bundle_adjustment"),
                                                           "float64")["observations"]
    zero = rows.copy()
    zero[:, 0:3] = ZERO_ROTATIONS[0]
    tiny = rows.copy()
    tiny[0::2, 0:3], tiny[1::2, 0:3] = ZERO_ROTATIONS[1], ZERO_ROTATIONS[2]
    return np.concatenate([rows, zero, tiny])


BA_GOLDEN_CASES = ["file"] * 10 + ["zero"] * 10 + ["tiny_a", "tiny_b"] * 5  # the C++ case of each ba_rows() row


def close(actual, expected, rel: float = CPP_TOLERANCE) -> bool:
    """|actual − expected| ≤ rel · max|expected|, elementwise (normwise relative: zeros in a block are held to the
    block's scale)."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    return actual.shape == expected.shape and bool(np.all(np.abs(actual - expected) <= rel * np.abs(expected).max()))


def expected_ba_value() -> np.ndarray:
    """(30, 3) from ADBench's C++ (computeReprojError, computeZachWeightError) for `ba_rows()`."""
    return np.array([CPP[f"ba_{case}_residual"] for case in BA_GOLDEN_CASES])


def expected_ba_blocks() -> np.ndarray:
    """(30, 3, 15) from ADBench's manual derivatives (compute_reproj_error_d, compute_zach_weight_error_d)."""
    blocks = np.zeros((30, 3, ba.BLOCK))
    for i, case in enumerate(BA_GOLDEN_CASES):
        blocks[i, :2] = np.reshape(CPP[f"ba_{case}_jacobian_rows"], (2, ba.BLOCK))
        blocks[i, 2, 14] = CPP[f"ba_{case}_weight_error_derivative"][0]
    return blocks


def assert_ba_value(value, *, rel: float = CPP_TOLERANCE) -> None:
    value = np.asarray(value)
    np.testing.assert_allclose(value[:10, :2], np.tile(BA_REPROJECTION, (10, 1)), rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(value[:10, 2], BA_WEIGHT_ERROR, rtol=0, atol=TOLERANCE)
    for i, want in enumerate(expected_ba_value()):
        assert close(value[i], want, rel), f"row {i}: {value[i]} vs ADBench's C++ {want}"


def assert_ba_blocks(blocks, *, rel: float = CPP_TOLERANCE, atol: float = TOLERANCE) -> None:
    """ADBench's published blocks for its 10 observations (at its tolerance), and ADBench's C++ blocks for all 30
    rows, θ = 0 and |θ| < 1e-12 included (normwise relative `rel`)."""
    blocks = np.asarray(blocks)
    for i in range(10):
        np.testing.assert_allclose(blocks[i, :2], BA_JACOBIAN_ROWS, rtol=0, atol=atol, err_msg=f"row {i}")
        assert blocks[i, 2, 14] == pytest.approx(BA_WEIGHT_ERROR_DERIVATIVE, abs=atol)
    for i, want in enumerate(expected_ba_blocks()):
        assert close(blocks[i], want, rel), f"row {i}: differs from ADBench's C++ by " \
            f"{np.abs(blocks[i] - want).max() / np.abs(want).max():.2g} (normwise)"


# --- through NumPy ---------------------------------------------------------------------------------------------

def test_input_files_become_sizes_labelled_with_stem_and_sha256():
    registry = _registry()
    labels = {n: _file_size(registry, n).label for n in ("gmm", "bundle_adjustment", "lstm")}
    assert labels["gmm"].startswith("d2-K3-n1-test-")
    assert not any(s.source for s in registry.problem("gmm_posterior").sizes)  # ADBench's text is gmm's convention
    assert labels["bundle_adjustment"].startswith("n2-m10-p10-test-")
    assert labels["lstm"].startswith("l2-c1024-b14-lstm_l2_c1024-")
    for name, label in labels.items():
        size = _file_size(registry, name)
        assert label.endswith(size.sha256[:12]) and len(size.sha256) == 64
        assert size.provenance() == {"inputs_file": str(size.source), "inputs_sha256": size.sha256}
        assert label not in {s.label for s in plugins.load().problem(name).sizes}
    assert registry.inputs == tuple(str(p.resolve()) for p in (GMM_FILE, BA_FILE, LSTM_FILE))


def test_objectives_through_numpy_equal_adbench_goldens():
    registry = _registry()
    gmm = registry.problem("gmm")
    assert reference_value(gmm, _file_size(registry, "gmm")) == pytest.approx(GMM_OBJECTIVE, abs=1e-13)
    lstm = registry.problem("lstm")
    assert reference_value(lstm, _file_size(registry, "lstm")) == pytest.approx(LSTM_OBJECTIVE, abs=TOLERANCE)
    assert reference_value(gmm, _file_size(registry, "gmm")) == pytest.approx(CPP["gmm_objective"],
                                                                              rel=CPP_TOLERANCE)
    assert reference_value(lstm, _file_size(registry, "lstm")) == pytest.approx(CPP["lstm_objective"],
                                                                               rel=CPP_TOLERANCE)
    rows = ba_rows()
    value = ba.residual(rows[:, :ba.BLOCK], rows[:, ba.BLOCK:], np)
    assert np.isfinite(value).all()
    assert_ba_value(value)


def _numpy_reference(registry, name, operator):
    problem = registry.problem(name)
    size = _file_size(registry, name)
    values = problem.inputs(size, "float64")
    wrt = values.pop(problem.wrt)
    return reference(problem, size, operator, CellInputs(wrt=wrt, constants=values, batch=None, tangent=None,
                                                         cotangent=None))


def test_gradients_through_the_numpy_reference_equal_adbench_goldens():
    """adcompare's own float64 reference reproduces ADBench's gradients: GMM's closed form (problems/gmm.py) in
    full, to the digits ADBench's C++ prints; LSTM's differences through NumPy along the reference's seeded
    directions (its full reference exceeds the differencing budget)."""
    registry = _registry()
    gmm = _numpy_reference(registry, "gmm", "grad")
    assert gmm.method.startswith("analytic")
    np.testing.assert_allclose(_gmm_order(gmm.value), GMM_GRADIENT, rtol=1e-7, atol=1e-9)
    assert close(_gmm_order(gmm.value), CPP["gmm_gradient"])
    assert float(_numpy_reference(registry, "gmm", "value").value) == pytest.approx(CPP["gmm_objective"],
                                                                                    rel=CPP_TOLERANCE)
    lstm = _numpy_reference(registry, "lstm", "grad")
    golden = np.reshape(LSTM_GRADIENT, (-1, 14))
    if lstm.value is not None:
        np.testing.assert_allclose(_lstm_order(lstm.value), LSTM_GRADIENT, rtol=1e-7, atol=1e-9)
    assert lstm.value is not None or lstm.directional
    for d in lstm.directional:
        assert float(np.sum(golden * d.right)) == pytest.approx(float(d.expected), rel=1e-7, abs=1e-10)


def test_ba_jacobian_blocks_through_the_numpy_reference_equal_adbench_goldens():
    """Central differences through NumPy, at their own accuracy (~1e-9 relative on entries up to ~900)."""
    registry = _registry()
    problem, size = registry.problem("bundle_adjustment"), _file_size(registry, "bundle_adjustment")
    rows = ba_rows()
    inputs = CellInputs(wrt=np.zeros(ba.BLOCK), constants={}, batch=rows, tangent=None, cotangent=None)
    ref = reference(problem, size, "vmap_jacrev", inputs, budget=60.0)
    assert ref.value is not None and np.isfinite(ref.value).all()
    assert_ba_blocks(ref.value, rel=1e-8, atol=1e-5)


def _gmm_order(params_gradient) -> np.ndarray:
    """ADBench's gradient order [alphas (K) | means (K × d) | icf (K × d(d+1)/2)] from params' (K, 1 + d + …)."""
    g = np.asarray(params_gradient)
    d = 2  # test.txt
    return np.concatenate([g[:, 0], g[:, 1:1 + d].ravel(), g[:, 1 + d:].ravel()])


def _lstm_order(params_gradient: np.ndarray) -> np.ndarray:
    """ADBench's gradient order is [main_params (2l, 4b) row-major | extra_params (3, b)]: the same as params'."""
    return np.asarray(params_gradient).ravel()


# --- through every adapter -----------------------------------------------------------------------------------

CASES = {  # (problem, operator): variants. Compiled: one value and one reverse-mode derivative per problem.
    ("gmm", "value"): ("eager", "compiled"), ("gmm", "grad"): ("eager", "compiled"),
    ("bundle_adjustment", "value"): ("eager", "compiled"),
    ("bundle_adjustment", "vmap_jacfwd"): ("eager",),
    ("bundle_adjustment", "vmap_jacrev"): ("eager", "compiled"),
    # LSTM's loop over c is adcompare.fold: JAX and TensorFlow compile it as one loop, 0.5–3 s at c = 1024.
    ("lstm", "value"): ("eager", "compiled"), ("lstm", "grad"): ("eager", "compiled"),
}
SLOW_CASES = {("bundle_adjustment", "vmap_jacfwd"): ("compiled",)}  # ~1 min per compile on a loaded 2-core box
# LSTM's 1,023 steps op by op cost JAX and TensorFlow 1-2 min of eager dispatch (their compiled LSTM: seconds). By
# default their LSTM goldens are reproduced compiled, and the eager route (the Python-loop `fold`) is held to the
# float64 reference at l1-c8 (tests/test_suite_coverage.py for JAX, tests/adapters/test_tensorflow.py); eager at
# ADBench's c = 1024 runs under -m slow.
EAGER_LSTM_SLOW = ("jax", "tensorflow")
# torch.compile unrolls LSTM's loop (torch 2.13's scan operator fails under torch.compile of torch.func.grad:
# "Expected FakeTensor"), and unrolled it compiled for 73 s (value) and 246 s (grad) at l = 1, c = 80, growing
# faster than c: ADBench's l = 2, c = 1024 is out of reach, so torch's LSTM goldens are checked eagerly only.
UNROLLED = {"torch": ("lstm",)}


def cases_for(adapter_name: str, cases: dict) -> dict:
    """`cases` less the compiled ones out of reach (UNROLLED) or known to fail (adcompare/verify/expectations.py, e.g.
    TensorFlow's XLA and the TensorList of BA's forward-mode vectorized_map)."""
    skip = UNROLLED.get(adapter_name, ())

    def runs(problem: str, operator: str, variant: str) -> bool:
        cell = Cell(problem, "file", operator, adapter_name, variant, "cpu", "float64")
        return variant != "compiled" or problem not in skip and expected(cell, compilable=True) is None

    return {key: tuple(v for v in variants if runs(*key, v)) for key, variants in cases.items()}


def split_eager_lstm(adapter_name: str) -> tuple[dict, dict]:
    """(default cases, slow cases) of the adapter: CASES and SLOW_CASES, with LSTM's eager cases moved to the slow
    ones for EAGER_LSTM_SLOW."""
    default, slow = dict(CASES), dict(SLOW_CASES)
    if adapter_name in EAGER_LSTM_SLOW:
        for key in [k for k in default if k[0] == "lstm"]:
            default[key] = tuple(v for v in default[key] if v != "eager")
            slow[key] = ("eager",)
    return cases_for(adapter_name, default), cases_for(adapter_name, slow)


def evaluate(adapter_name: str, cases: list[tuple[str, str, str]]) -> dict[str, object]:
    """`per_adapter.evaluate` of (problem, operator, variant) cases on ADBench's test inputs (BA on `ba_rows()`,
    as the batch of the per-example operators)."""
    registry = _registry()

    def inputs_of(case):
        name, operator = case[0], case[1]
        problem, size = registry.problem(name), _file_size(registry, name)
        if name != "bundle_adjustment":
            return problem, size, float64_inputs(problem, size)
        inputs = float64_inputs(problem, size, observations=ba_rows())
        if operator.startswith("vmap_"):
            constants = dict(inputs.constants)
            inputs = dataclasses.replace(inputs, constants=constants, batch=constants.pop("observations"))
        return problem, size, inputs

    return per_adapter.evaluate(adapter_name, cases, inputs_of)


def _in_worker(adapter_name: str, cases: dict) -> dict[str, object]:
    flat = [(p, o, v) for (p, o), variants in cases.items() for v in variants]
    return evaluate_in_worker("tests.test_adbench", adapter_name, flat, timeout=1800)


def _assert_goldens(results: dict[str, object]) -> None:
    checks = {  # published goldens at ADBench's tolerance, and ADBench's C++ at 1e-12
        "gmm/value": lambda r: pytest.approx(GMM_OBJECTIVE, abs=TOLERANCE) == r and close(r, CPP["gmm_objective"]),
        "gmm/grad": lambda r: np.allclose(_gmm_order(r), GMM_GRADIENT, rtol=0, atol=TOLERANCE)
        and close(_gmm_order(r), CPP["gmm_gradient"]),
        "lstm/value": lambda r: pytest.approx(LSTM_OBJECTIVE, abs=TOLERANCE) == r
        and close(r, CPP["lstm_objective"]),
        "lstm/grad": lambda r: np.allclose(_lstm_order(r), LSTM_GRADIENT, rtol=0, atol=TOLERANCE)
        and close(_lstm_order(r), CPP["lstm_gradient"]),
    }
    for key, result in results.items():
        problem, operator, variant = key.split("/")
        if isinstance(result, dict) and "unsupported" in result:
            continue
        assert not isinstance(result, dict), f"{key}: {result}"
        assert np.isfinite(np.asarray(result)).all(), f"{key}: NaN or Inf"
        if operator.startswith("vmap_jac"):
            assert_ba_blocks(result)
        elif problem == "bundle_adjustment":
            assert_ba_value(result)
        else:
            assert checks[f"{problem}/{operator}"](result), f"{key}: {np.ravel(result)[:6]} differs from ADBench's"
    ran = [k for k, r in results.items() if not (isinstance(r, dict) and "unsupported" in r)]
    assert any(k.endswith("/eager") for k in ran) or all(k.endswith("/compiled") for k in results)


def _assert_compiled_ran(adapter_name: str, results: dict[str, object]) -> None:
    """An adapter with a compiler must have compiled every case, not declared it unsupported."""
    if plugins.load().adapter(adapter_name).capability("grad", "compiled").supported:
        skipped = [k for k, r in results.items() if isinstance(r, dict) and "unsupported" in r]
        assert not skipped, f"compiled cases declared unsupported: {skipped}"


def normal_cases(adapter_name: str) -> list[tuple[str, str, str]]:
    """The normal run's (problem, operator, variant) cases, which tests/test_goldens.py runs in the adapter's golden
    worker: GMM objective and gradient, BA residuals and Jacobian blocks (incl. θ = 0 and |θ| < 1e-12, no NaN under
    compilation), LSTM objective and gradient (compiled where the compiler keeps the loop: see UNROLLED)."""
    return [(p, o, v) for (p, o), variants in split_eager_lstm(adapter_name)[0].items() for v in variants]


def assert_adapter_goldens(adapter_name: str, results: dict[str, object]) -> None:
    _assert_goldens(results)
    _assert_compiled_ran(adapter_name, results)


class AdapterGoldens:
    """The slow cases through one adapter's worker (the normal run's are tests/test_goldens.py's). One class per
    adapter, so that the README's `--dist loadscope` gives each adapter's run its own test process."""

    adapter_name = ""

    @pytest.mark.slow
    def test_every_adapter_reproduces_adbench_goldens_compiled_slow(self):
        """BA's forward-mode blocks compiled; LSTM eager where EAGER_LSTM_SLOW says."""
        skip_unless_installed(self.adapter_name)
        assert_adapter_goldens(self.adapter_name, _in_worker(self.adapter_name, split_eager_lstm(self.adapter_name)[1]))


globals().update(one_class_per_adapter(AdapterGoldens))

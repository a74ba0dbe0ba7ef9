"""The HIPS autograd adapter in-process: namespace probes in both modes and dtypes, every FIX and the trap it routes
around (raw `concat`'s silently wrong Jacobian included), seed 001's Jacobian, every operator on every built-in
problem (shape, dtype, agreement with the float64 reference), and the unsupported variant and device."""
from __future__ import annotations

import subprocess
import sys
import warnings
from types import ModuleType

import numpy as np
import pytest

autograd = pytest.importorskip("autograd")
import autograd.numpy as anp  # noqa: E402

from adcompare.adapters import autograd as autograd_adapter  # noqa: E402
from adcompare.adapters.autograd_namespace import FIXES, namespace  # noqa: E402
from adcompare.model.errors import CellFailure, UnsupportedOperation  # noqa: E402
from adcompare.model.operators import OPERATORS, expected_shape, spec  # noqa: E402
from adcompare.model.problem import applicable_operators, example_output_shape, output_shape  # noqa: E402
from adcompare.model.status import Status  # noqa: E402
from adcompare.plugin import registry as plugins  # noqa: E402
from adcompare.plugin.adapter import CellInputs, Support  # noqa: E402
from adcompare.run.in_process import run_once  # noqa: E402
from adcompare.verify.check import check_result, status_of  # noqa: E402
from adcompare.verify.namespace_probes import ATTRIBUTES, PROBES, probe_input  # noqa: E402
from tests.per_adapter import MINUTES_A_CALL, NESTED_OPERATORS  # noqa: E402

SEED_001_JACOBIAN = [[-0.8322937, 2.6645875], [2.0, -1.0], [3.0, 0.0]]


@pytest.fixture(scope="module")
def adapter(registry):
    a = registry.adapter("autograd")
    a.setup(dtype="float64", device="cpu", threads=1)
    return a


def run(adapter, prob, operator, dtype, inputs=None, variant="eager", device="cpu"):
    return run_once(adapter, prob, operator, dtype, variant=variant, device=device, inputs=inputs)


def test_registered_through_entry_points_without_importing_autograd(registry):
    assert isinstance(registry.adapter("autograd"), autograd_adapter.AutogradAdapter)
    code = ("import sys, adcompare.adapters.autograd, adcompare.adapters.autograd_namespace; "
            "assert 'autograd' not in sys.modules, 'autograd imported at import'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- namespace -----------------------------------------------------------------------------------------------

def _sq(x, xp):
    a = xp.reshape(x[:4], (2, 2))
    return a @ xp.matrix_transpose(a) + 2.0 * xp.eye(2, dtype=x.dtype)


def _eigh(x, xp):
    w, v = xp.linalg.eigh(_sq(x, xp))
    return xp.concat([w, v[:, 0] * v[0, 0]])  # v's columns have a free sign; this product does not


# Argument forms the suite's probes do not reach, for the fixes that take them.
EXTRA = {
    "linalg.eigh": _eigh,
    "linalg.eigh(named)": lambda x, xp: xp.linalg.eigh(_sq(x, xp)).eigenvalues * x[0],
    "linalg.cholesky(upper)": lambda x, xp: xp.reshape(xp.linalg.cholesky(_sq(x, xp), upper=True), (4,)),
    "linalg.solve(matrix b)": lambda x, xp: xp.reshape(xp.linalg.solve(_sq(x, xp), xp.reshape(x[:4], (2, 2))),
                                                       (4,)),
    "linalg.slogdet(named)": lambda x, xp: xp.stack([xp.linalg.slogdet(_sq(x, xp)).logabsdet, x[0]]),
    "linalg.vector_norm(ord, axis)": lambda x, xp: xp.stack([
        xp.linalg.vector_norm(x, ord=xp.inf), xp.linalg.vector_norm(x - 0.5, ord=1),
        xp.linalg.vector_norm(xp.reshape(x, (2, 3)), axis=1, ord=3)[0],
        xp.linalg.vector_norm(xp.reshape(x, (2, 3)), axis=(0, 1), keepdims=True)[0, 0]]),
    "linalg.matrix_norm(ord)": lambda x, xp: xp.stack([xp.linalg.matrix_norm(_m(x, xp), ord=o)
                                                       for o in (1, -1, xp.inf, -xp.inf)]),
    "linalg.matrix_norm(ord=2, nuc)": lambda x, xp: xp.stack([xp.linalg.matrix_norm(_m(x, xp), ord=o)
                                                              for o in (2, -2, "nuc")]),
    "linalg.matmul": lambda x, xp: xp.reshape(xp.linalg.matmul(_m(x, xp), xp.matrix_transpose(_m(x, xp))), (4,)),
    "linalg.tensordot": lambda x, xp: xp.linalg.tensordot(_m(x, xp), x[:3], axes=1),
    "linalg.matrix_transpose": lambda x, xp: xp.reshape(xp.linalg.matrix_transpose(_m(x, xp)) * x[0], (6,)),
    "linalg.vecdot": lambda x, xp: xp.linalg.vecdot(_m(x, xp), _m(x, xp) + 1.0),
    "vecdot(1-d)": lambda x, xp: xp.stack([xp.vecdot(x, x * x), x[0]]),
    "cumulative_sum(include_initial, 2-d)": lambda x, xp: xp.concat([
        xp.cumulative_sum(x * x, include_initial=True),
        xp.reshape(xp.cumulative_sum(_m(x, xp) * x[0], axis=1), (6,))]),
    "take(2-d, axis=1)": lambda x, xp: xp.reshape(xp.take(_m(x, xp) * x[1], xp.asarray([2, 0]), axis=1), (4,)),
    "flip(2-d, axis)": lambda x, xp: xp.concat([xp.reshape(xp.flip(_m(x, xp) * x[0], axis=1), (6,)),
                                                xp.reshape(xp.flip(_m(x, xp) * x[2]), (6,))]),
    "concat(axis=None)": lambda x, xp: xp.concat([_m(x, xp), xp.reshape(x * x, (3, 2))], axis=None),
    "broadcast_to(2 new dims)": lambda x, xp: xp.reshape(
        xp.broadcast_to(xp.reshape(x[:3] * x[0], (3, 1)), (2, 3, 2)), (12,)),
    "where(broadcast)": lambda x, xp: xp.where(x > 0.55, x * x, 0.3) + xp.where(x < 0.4, 1.0, -x),
    "max(axis=None)": lambda x, xp: xp.stack([xp.max(x * x), xp.min(x * x)]),
}
REVERSE_ONLY = {"linalg.matrix_norm(ord=2, nuc)": "autograd's SVD has no forward rule"}
ALL_PROBES = {**PROBES, **EXTRA}


def _m(x, xp):
    return xp.reshape(x, (2, 3))


def _central_jacobian(fn, x, h=1e-6):
    cols = [(np.asarray(fn(x + h * e)) - np.asarray(fn(x - h * e))) / (2 * h) for e in np.eye(x.size)]
    return np.stack(cols, axis=-1)


def _forward_jacobian(fn, x):
    jvp = autograd.make_jvp(fn)(x)
    return np.stack([jvp(e)[1] for e in np.eye(x.size, dtype=x.dtype)], axis=-1)


@pytest.mark.parametrize("name", sorted(ALL_PROBES))
def test_probe_value_and_jacobians_through_autograd_namespace(name):
    """Full vector-output Jacobians, both modes, against NumPy central differences: a scalar sum hid `concat`."""
    probe, xp = ALL_PROBES[name], namespace()
    x = probe_input("float64")
    np.testing.assert_allclose(probe(x, xp), probe(x, np), rtol=1e-12, atol=1e-12)
    want = _central_jacobian(lambda v: probe(v, np), x)
    rev = autograd.jacobian(lambda t: probe(t, xp))(x)
    np.testing.assert_allclose(rev, want, rtol=1e-6, atol=1e-6, err_msg="reverse mode")
    if name in REVERSE_ONLY:
        with pytest.raises(NotImplementedError):
            _forward_jacobian(lambda t: probe(t, xp), x)
        return
    np.testing.assert_allclose(_forward_jacobian(lambda t: probe(t, xp), x), want, rtol=1e-6, atol=1e-6,
                               err_msg="forward mode")


@pytest.mark.parametrize("name", sorted(ALL_PROBES))
def test_probe_keeps_float32_in_both_modes(name):
    probe, xp = ALL_PROBES[name], namespace()
    x = probe_input("float32")
    dtypes = {"value": probe(x, xp).dtype, "reverse": autograd.jacobian(lambda t: probe(t, xp))(x).dtype}
    if name not in REVERSE_ONLY:
        dtypes["forward"] = autograd.make_jvp(lambda t: probe(t, xp))(x)(x)[1].dtype
    assert set(dtypes.values()) == {np.dtype("float32")}, dtypes


def test_attributes_are_numpys():
    xp = namespace()
    for name in ATTRIBUTES - {"linalg"}:
        assert getattr(xp, name) is getattr(np, name) or (name == "bool" and xp.bool is np.bool_), name
    assert isinstance(xp.linalg, ModuleType) and xp.linalg is not anp.linalg
    assert np.zeros(2, dtype=xp.int64).dtype == np.int64  # autograd.numpy's int64 is a wrapped subclass
    assert anp.int64 is not np.int64


def test_every_fix_has_a_probe():
    probed = {name.split("(")[0] for name in ALL_PROBES}
    assert set(FIXES) <= probed, set(FIXES) - probed


def _raw(name: str) -> ModuleType:
    """The fixed namespace with only `name` put back to autograd.numpy's own function."""
    xp, linalg = ModuleType("raw"), ModuleType("raw.linalg")
    xp.__dict__.update(vars(namespace()))
    linalg.__dict__.update(vars(namespace().linalg))
    xp.linalg = linalg
    owner, _, attr = name.rpartition(".")
    setattr(linalg if owner else xp, attr, getattr(anp.linalg if owner else anp, attr))
    return xp


def _probe_for(name: str):
    return ALL_PROBES[name] if name in ALL_PROBES else EXTRA[next(k for k in EXTRA if k.startswith(name + "("))]


@pytest.mark.parametrize("name", sorted(FIXES))
def test_trap_is_still_there(name):
    """When autograd fixes a name upstream this fails: drop that entry from FIXES."""
    probe, raw, trap = _probe_for(name), _raw(name), FIXES[name].trap
    x = probe_input("float64")
    fn = lambda t: probe(t, raw)  # noqa: E731
    if trap == "no derivative rule":
        with pytest.raises(NotImplementedError, match="VJP of"):
            autograd.jacobian(fn)(x)
    elif trap == "no forward-mode rule":
        autograd.jacobian(fn)(x)  # reverse mode works
        with pytest.raises(NotImplementedError, match="JVP of"):
            _forward_jacobian(fn, x)
    elif trap.startswith("reverse rule fails"):
        with pytest.raises(AssertionError, match="leading dims"):
            autograd.jacobian(fn)(x)
    elif trap == "float32 derivative becomes float64":
        assert autograd.jacobian(fn)(x.astype("float32")).dtype == np.float64
    elif trap.startswith("wrong derivative"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # autograd may warn the output looks independent of the input
            wrong = autograd.jacobian(fn)(x)
        assert not np.allclose(wrong, _central_jacobian(lambda v: probe(v, np), x), atol=1e-3)
    else:
        pytest.fail(f"no check for trap {trap!r}")


def test_raw_concat_gives_a_silently_wrong_jacobian():
    """The trap in full: no error, no NaN, just a Jacobian with the concatenated rows missing (zero)."""
    x = probe_input("float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = autograd.jacobian(lambda t: anp.concat([t * t, anp.sin(t)]))(x)
    right = np.concatenate([np.diag(2 * x), np.diag(np.cos(x))])
    assert raw.shape == right.shape and np.all(np.isfinite(raw))
    assert np.array_equal(raw, np.zeros_like(right))
    np.testing.assert_allclose(autograd.jacobian(lambda t: namespace().concat([t * t, anp.sin(t)]))(x), right)


@pytest.mark.parametrize("name", ["eigh", "slogdet"])
def test_raw_linalg_tuples_lose_their_field_names_when_traced(name):
    """Why the fixed eigh/slogdet rebuild NumPy's named tuple: autograd returns a plain SequenceBox."""
    x = probe_input("float64")
    field = {"eigh": "eigenvalues", "slogdet": "logabsdet"}[name]
    with pytest.raises(AttributeError, match=field):
        autograd.jacobian(lambda t: getattr(getattr(anp.linalg, name)(_sq(t, namespace())), field))(x)
    autograd.jacobian(lambda t: getattr(getattr(namespace().linalg, name)(_sq(t, namespace())), field))(x)


def test_numpy_promotion_keeps_float32_for_python_scalars():
    """NEP 50: a Python float takes the array's dtype (what problems write); a NumPy float64 scalar does not."""
    x = np.ones(3, dtype="float32")
    fn = lambda t: anp.dot(t, t) / 3.0  # noqa: E731
    assert autograd.make_jvp(fn)(x)(x)[1].dtype == np.float32
    assert autograd.grad(fn)(x).dtype == np.float32
    assert autograd.make_jvp(lambda t: anp.dot(t, t) / np.sqrt(3.0))(x)(x)[1].dtype == np.float64


# --- operators -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("operator", ["jacfwd", "jacrev"])
def test_seed_001_jacobian(registry, adapter, operator, dtype):
    x = np.array([1.0, 0.5], dtype=dtype)
    inputs = CellInputs(wrt=x, constants={}, batch=None, tangent=None, cotangent=None)
    _, jac, _, _ = run(adapter, registry.problem("f_r2_r3"), operator, dtype, inputs)
    assert jac.dtype == np.dtype(dtype)
    np.testing.assert_allclose(jac, SEED_001_JACOBIAN, rtol=1e-6, atol=1e-6)


# Expected failures, as data: problem -> (operators, why). Derivative operators only: `value` runs untraced.
EXPECTED_FAILURES = {
    "control_loop": (frozenset(OPERATORS) - {"value"}, "int(xp.max(z)) on a traced value: ArrayBox has no __int__"),
}


def _cells(registry, adapter):
    for prob in registry.problems.values():
        if prob.name in MINUTES_A_CALL:
            continue
        for operator in applicable_operators(prob):
            if spec(operator).family == "data-parallel":  # unsupported with its reason: test_jax_data_parallel.py
                continue
            assert adapter.capability(operator, "eager").supported
            yield prob.name, operator


_registry = plugins.load()
CELLS = sorted(_cells(_registry, _registry.adapter("autograd")))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("problem_name,operator", CELLS)
def test_every_operator_has_declared_shape_dtype_and_agrees(registry, adapter, problem_name, operator, dtype):
    prob = registry.problem(problem_name)
    if operator in EXPECTED_FAILURES.get(problem_name, ((), ""))[0]:
        with pytest.raises(CellFailure, match="ArrayBox does not allow"):
            run(adapter, prob, operator, dtype)
        return
    prepared, out, inputs, size = run(adapter, prob, operator, dtype)
    ex = example_output_shape(prob, size) if spec(operator).per_example else None
    want = expected_shape(operator, wrt_shape=inputs.wrt.shape, out_shape=output_shape(prob, size),
                          example_out_shape=ex, batch_size=None if inputs.batch is None else len(inputs.batch))
    assert out.shape == want
    assert out.dtype == np.dtype(dtype)
    assert prepared.after_first_call() == {"result_dtype": dtype, "promoted_to_float64": False}
    check = check_result(prob, size, operator, dtype, inputs, out)
    assert status_of(check) is Status.OK, (check.error, check.tolerance)


SINGLE_DEVICE = {op for op in OPERATORS if spec(op).family != "data-parallel"}


def test_matrix_covers_every_operator():
    assert {op for _, op in CELLS} == SINGLE_DEVICE - NESTED_OPERATORS


def test_algorithms_say_what_happens(adapter):
    cap = {op: adapter.capability(op, "eager") for op in SINGLE_DEVICE}
    assert all(c.algorithm for c in cap.values())
    assert {op for op, c in cap.items() if c.support is Support.EMULATED} == {
        "jacfwd", "vmap_grad", "vmap_jacfwd", "vmap_jacrev"}
    assert all("Python loop" in cap[op].algorithm and cap[op].reason
               for op in ("jacfwd", "vmap_grad", "vmap_jacfwd", "vmap_jacrev"))
    assert "loop of VJPs over output rows" in cap["jacrev"].algorithm
    assert "reverse-over-reverse" in cap["hvp"].algorithm and "make_hvp" in cap["hvp"].algorithm
    assert "reverse-over-reverse" in cap["hessian"].algorithm
    assert "make_jvp" in cap["jvp"].algorithm


def test_unsupported_variant_and_device_say_why(registry, adapter):
    for op in OPERATORS:
        cap = adapter.capability(op, "compiled")
        assert not cap.supported and cap.reason == "autograd has no compiler; use variant 'eager'"
    assert "no variant 'graph'" in adapter.capability("grad", "graph").reason
    assert set(adapter.variants) == {"eager"} and adapter.devices == ("cpu",)
    assert adapter.device_unavailable("cpu") is None
    assert "autograd runs on NumPy (CPU only)" in adapter.device_unavailable("cuda")
    prob = registry.problem("exp_dot_loss")
    with pytest.raises(UnsupportedOperation, match="no compiler"):
        run(adapter, prob, "grad", "float64", variant="compiled")
    with pytest.raises(UnsupportedOperation, match="CPU only"):
        run(adapter, prob, "grad", "float64", device="cuda")
    assert adapter.peak_device_memory("cpu") is None
    assert set(adapter.versions()) == {"autograd", "numpy"}

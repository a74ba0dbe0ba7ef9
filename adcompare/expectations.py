"""Known framework limitations as data: (adapter, problem, operator, variant, device) → (status, reason); '*'
matches all.

A cell that fails as expected is still recorded as `failed` with the framework's message; `adcompare check` and
`adcompare run` do not count it against their exit code, and the check matrix labels it. The test suite holds
the table strictly: a listed cell that starts passing fails its test, so entries go when frameworks improve.
Compiled variants of problems declaring `compilable=False` are expected to fail by rule, not listed here.
"""
from __future__ import annotations

from dataclasses import replace

from .cell import Cell
from .measurement import Measurement, declared_compiles
from .operators import OPERATORS
from .status import Status

DERIVATIVES = [op for op in OPERATORS if op != "value"]  # `value` traces nothing, so it runs

EXPECTED: dict[tuple[str, str, str, str, str], tuple[Status, str]] = {
    **{("autograd", "control_loop", op, "*", "*"): (
        Status.FAILED, "autograd's ArrayBox has no int(): seed 001's loop count read from the differentiated input "
                       "cannot be traced (JAX and torch eager trace it with concrete values)") for op in DERIVATIVES},
    **{("torch", "*", op, "compiled", "cpu"): (
        Status.CRASHED, "torch 2.13's inductor segfaults in the generated code of compiled forward mode "
                        "(seen at n ≥ 100 on exp_dot_loss, and for jvp, hvp and hessian at n = 10)")
       for op in ("jvp", "jacfwd", "hvp", "hessian")},
    **{("torch", "*", op, "compiled", "cuda"): (
        Status.FAILED, "torch 2.11's inductor code for compiled forward mode makes an illegal memory access on CUDA "
                       "(seen on an H100 for exp_dot_loss jacfwd at every n from 10 to 10⁴); the worker restarts")
       for op in ("jvp", "jacfwd", "hvp")},
    ("tensorflow", "control_loop", "jacfwd", "*", "*"): (
        Status.FAILED, "tf.vectorized_map traces f as a graph, where int(max(z)) has no value"),
    ("tensorflow", "bundle_adjustment", "vmap_jacfwd", "compiled", "*"): (
        Status.FAILED, "TensorFlow 2.21's forward-mode Jacobian under vectorized_map builds a TensorList "
                       "(TensorListReserve), which XLA cannot compile (jit_compile=True); graph mode runs it"),
    ("torch", "rbf_kernel_map", "vmap_jacfwd", "compiled", "cpu"): (
        Status.FAILED, "torch 2.13's compile of vmap(jacfwd) over the RBF kernel map fails in fake-tensor tracing "
                       "(\"RuntimeError when making fake tensor call\"); the worker restarts after it"),
    ("tensorflow", "gmm", "hvp", "compiled", "*"): (
        Status.FAILED, "TensorFlow 2.21 has no gradient for XlaDynamicUpdateSlice, which XLA's forward-over-reverse "
                       "HVP of ADBench's GMM needs (gmm_posterior's differs and compiles); graph mode runs it"),
}


def expected(cell: Cell, compilable: bool) -> tuple[Status, str] | None:
    if not compilable and declared_compiles(cell):
        return Status.FAILED, "data-dependent Python control flow cannot be compiled"
    for (adapter, problem, operator, variant, device), outcome in EXPECTED.items():
        if all(want in ("*", got) for want, got in ((adapter, cell.adapter), (problem, cell.problem),
                                                   (operator, cell.operator), (variant, cell.variant),
                                                   (device, cell.device))):
            return outcome
    return None


def expected_failure(m: Measurement, problems) -> str | None:
    """The reason `m` failed as expected, or None (also None when it did not fail the expected way)."""
    problem = problems.get(m.cell.problem)
    known = expected(m.cell, problem.compilable) if problem is not None else None
    return known[1] if known is not None and m.status is known[0] else None


EXPECTED_KEY = "expected_failure"  # details key: the known limitation a failed cell matches


def labelled(m: Measurement, problems) -> Measurement:
    """`m`, with `details["expected_failure"]` set when it failed as a known limitation (for the run's summary,
    the report and results.csv); results files written before the label get it when they are reported."""
    why = expected_failure(m, problems)
    if why is None or m.details.get(EXPECTED_KEY) == why:
        return m
    return replace(m, details={**m.details, EXPECTED_KEY: why})


def expected_reason(m: Measurement) -> str | None:
    """The known limitation a labelled measurement failed as (see `labelled`), or None."""
    return m.details.get(EXPECTED_KEY)


def unexpected(m: Measurement, problems) -> str | None:
    """None when `m` is as it should be — ok, unsupported with a reason, or failed exactly as expected — else why
    not, in one line (for tests and suites that hold the built-in adapters to this table strictly)."""
    problem = problems.get(m.cell.problem)
    known = expected(m.cell, problem.compilable) if problem is not None else None
    if known is not None and m.status is not Status.UNSUPPORTED:
        if m.status is known[0] and m.message:
            return None
        return f"{m.cell.id}: expected {known[0].value} ({known[1]}), got {m.status.value}: {m.message}"
    if m.status is Status.UNSUPPORTED:
        return None if m.message else f"{m.cell.id}: unsupported without a reason"
    if m.status is Status.OK:
        return None
    c = m.check
    extra = f" (error {c.error}, pairwise {c.pairwise_error}, adjoint {c.adjoint_error}, tol {c.tolerance})" if c else ""
    return f"{m.cell.id}: {m.status.value}: {m.message}{extra}"

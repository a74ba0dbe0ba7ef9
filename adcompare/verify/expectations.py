"""Known framework limitations as data: (adapter, problem, operator, variant, device) → (status, reason); '*'
matches all. Framework bugs that make a cell wrong (`mismatch`, `nan`) are `FRAMEWORK_BUGS`, keyed in addition
by the framework versions verified to have them, each with a reproducer under docs/framework-bugs/.

A cell that fails as expected is still recorded as `failed` with the framework's message; `adcompare check` and
`adcompare run` do not count it against their exit code, and the check matrix labels it. The test suite holds
the table strictly: a listed cell that starts passing fails its test, so entries go when frameworks improve.
Compiled variants of problems declaring `compilable=False` are expected to fail by rule, not listed here.
An entry may end with `FromSize`, the sizes it applies to (dimensions read off the cell's size label): a limit
that grows with a dimension, such as a compile that unrolls a loop of c steps, applies from the size where the
cell cannot finish within the default cell timeout, and is expected as `timeout` there (recorded as such).

A framework bug applies only while the cell ran on a version listed as affected: the versions its worker loaded
(`Measurement.versions`), or the installed ones when a cell is judged in-process without them. Only versions
where the reproducer was run and failed are listed, so a new release is never excused unverified: if it fixes
the bug the cell passes; if not, it shows as an unexplained mismatch until someone runs the reproducer on it and
adds the version. adcompare never sets the workaround flags: it measures frameworks as they ship.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from adcompare.model.cell import Cell
from adcompare.model.fingerprint import installed_versions
from adcompare.model.measurement import Measurement, declared_compiles
from adcompare.model.operators import OPERATORS
from adcompare.model.status import Status

DERIVATIVES = [op for op in OPERATORS if op != "value"]  # `value` traces nothing, so it runs
_DIMENSION = re.compile(r"([A-Za-z]+)(\d+)")


def size_dims(label: str) -> dict[str, int]:
    """The dimensions a size label begins with (`Size.label`: `l2-c80-b14`, then a file's stem and sha256 or
    `-seedN`): its leading `name<digits>` parts, up to the first part that is not one; the first of a name wins."""
    dims: dict[str, int] = {}
    for part in label.split("-"):
        found = _DIMENSION.fullmatch(part)
        if found is None:
            break
        dims.setdefault(found[1], int(found[2]))
    return dims


@dataclass(frozen=True)
class FromSize:
    """The sizes an expectation applies to: those with every named dimension at least its value (a size without
    one of them, e.g. a label that is not a size, is not covered)."""

    minimum: tuple[tuple[str, int], ...]

    def covers(self, size_label: str) -> bool:
        dims = size_dims(size_label)
        return all(name in dims and dims[name] >= least for name, least in self.minimum)


TORCH_UNROLLED_LSTM = (
    "torch.compile unrolls LSTM's loop over the c characters (torch 2.13's scan does not compile under "
    "torch.func.grad), so compiling takes time growing faster than c: at l = 1, c = 80 {what}; the cell cannot "
    "finish within the default 300 s timeout (--timeout), and the larger sizes of its series are skipped")

EXPECTED: dict[tuple[str, str, str, str, str], tuple[Status, str] | tuple[Status, str, FromSize]] = {
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
    # seed 001's loop staged (control_loop_while): a tf.while_loop, which two TensorFlow routes cannot take
    **{("tensorflow", "control_loop_while", op, "compiled", "*"): (
        Status.FAILED, "TensorFlow 2.21's pfor (tape.jacobian, vectorized_map) converts the tf.while_loop with "
                       "TensorLists (TensorListReserve), which XLA cannot compile (jit_compile=True); graph mode "
                       "runs it") for op in ("jacfwd", "jacrev", "hessian")},
    **{("tensorflow", "control_loop_while", "hvp", variant, "*"): (
        Status.FAILED, "TensorFlow 2.21's ForwardAccumulator over GradientTape.gradient of a tf.while_loop inside "
                       "tf.function fails while tracing (SystemError from ConcreteFunction.outputs, caused by "
                       "\"TypeError: `dtype` <dtype: 'variant'> is not compatible with 1 of dtype int64\": a tangent "
                       "made for the loop's TensorList) in some processes, not all (1 in 2 to 1 in 6 here); eager "
                       "mode runs it") for variant in ("graph", "compiled")},
    ("tensorflow", "bundle_adjustment", "vmap_jacfwd", "compiled", "*"): (
        Status.FAILED, "TensorFlow 2.21's forward-mode Jacobian under vectorized_map builds a TensorList "
                       "(TensorListReserve), which XLA cannot compile (jit_compile=True); graph mode runs it. (It "
                       "compiled where a graph cell before it in the process had traced ForwardAccumulator's JVP "
                       "helpers, which the adapter now traces afresh for each cell)"),
    ("torch", "rbf_kernel_map", "vmap_jacfwd", "compiled", "cpu"): (
        Status.FAILED, "torch 2.13's compile of vmap(jacfwd) over the RBF kernel map fails in fake-tensor tracing "
                       "(\"RuntimeError when making fake tensor call\"); the worker restarts after it"),
    **{("tensorflow", name, "hvp", "compiled", "*"): (
        Status.FAILED, "TensorFlow 2.21 has no gradient for XlaDynamicUpdateSlice, which XLA's forward-over-reverse "
                       "HVP of the GMM likelihood needs (fails while tracing, at every size and dtype tried: d2-K5, "
                       "d2-K25, d10-K5, d20-K5, d32-K10, d64-K5, n = 1000); graph mode runs it")
       for name in ("gmm", "gmm_posterior")},
    **{("torch", "lstm", op, "compiled", "cpu"): (
        Status.TIMEOUT, TORCH_UNROLLED_LSTM.format(what="the gradient compiled for 246 s, and `check --problem "
                                                        "lstm --inputs l2_c80.input.json` timed out on grad and vjp"),
        FromSize((("c", 80),))) for op in ("grad", "vjp")},
    ("torch", "lstm", "value", "compiled", "cpu"): (
        Status.TIMEOUT, TORCH_UNROLLED_LSTM.format(what="the objective compiled in 73 s, and at c = 800 `check` "
                                                        "ran past the 300 s timeout"),
        FromSize((("c", 800),))),
}


@dataclass(frozen=True)
class FrameworkBug:
    """A framework bug that makes a cell wrong, on the versions where its reproducer was run and failed."""

    status: Status  # MISMATCH or NAN
    reason: str
    distribution: str  # whose version decides, e.g. "jaxlib"
    affected_versions: tuple[str, ...]  # verified to fail; a fixed (or unverified) release is not excused
    reproducer: str  # path from the repository root, docs/framework-bugs/<name>.md
    upstream: str = ""
    dtypes: tuple[str, ...] = ("*",)
    sizes: tuple[str, ...] = ("*",)  # where the suite meets it (the bug may need a large enough array)
    title: str = ""  # one line for the report's "Framework bugs found"
    workaround: str = ""  # what avoids it; adcompare never applies it (frameworks are measured as they ship)

    def affects(self, versions: Mapping[str, str]) -> bool:
        return versions.get(self.distribution) in self.affected_versions


FRAMEWORK_BUGS: dict[tuple[str, str, str, str, str], FrameworkBug] = {
    ("jax", "bundle_adjustment", "jacrev", "compiled", "cpu"): FrameworkBug(
        Status.MISMATCH,
        "jaxlib 0.10.2's YNNPACK reduce fusion (__ynn_fusion) of two broadcast-multiply reductions gives wrong "
        "float32 values on CPU (0.10.1 is right; XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type="
        "-LIBRARY_FUSION_TYPE_REDUCE avoids it)",
        distribution="jaxlib", affected_versions=("0.10.2",),
        reproducer="docs/framework-bugs/jax_ynn_reduce_wrong.md", upstream="https://github.com/jax-ml/jax/issues/39103",
        dtypes=("float32",), sizes=("n5-m50-p300",),
        title="XLA CPU: YNNPACK reduce fusion gives wrong float32 values (JAX compiled jacrev of bundle_adjustment)",
        workaround="XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-LIBRARY_FUSION_TYPE_REDUCE, or jaxlib 0.10.1"),
    ("torch", "ht", "jacrev", "compiled", "cpu"): FrameworkBug(
        Status.MISMATCH,
        "torch 2.13's torch.compile of torch.func.jacrev through index_select (array-api-compat's take: ht's gather "
        "of each bone's parent) gives a wrong Jacobian, every row the sum of the rows (eager and x[idx] are right)",
        distribution="torch", affected_versions=("2.13.0+cpu",),
        reproducer="docs/framework-bugs/torch_compile_jacrev_index_select.md",
        title="torch.compile: jacrev through index_select gives a wrong Jacobian (torch compiled jacrev of ht)",
        workaround="index with x[idx] instead of index_select, or run jacrev eagerly"),
}


def _matches(key: tuple[str, str, str, str, str], cell: Cell) -> bool:
    adapter, problem, operator, variant, device = key
    return all(want in ("*", got) for want, got in ((adapter, cell.adapter), (problem, cell.problem),
                                                   (operator, cell.operator), (variant, cell.variant),
                                                   (device, cell.device)))


def framework_bug(cell: Cell, versions: Mapping[str, str] | None = None) -> FrameworkBug | None:
    """The framework bug this cell meets with these versions (None: the installed ones), or None."""
    for key, bug in FRAMEWORK_BUGS.items():
        if _matches(key, cell) and {"*", cell.dtype} & set(bug.dtypes) and {"*", cell.size} & set(bug.sizes):
            loaded = versions if versions else installed_versions((bug.distribution,))
            if bug.affects(loaded):
                return bug
    return None


def expected(cell: Cell, compilable: bool, versions: Mapping[str, str] | None = None) -> tuple[Status, str] | None:
    """The status and reason a cell is known to end with; `versions` (default: the installed ones) decide
    whether a framework bug applies."""
    if not compilable and declared_compiles(cell):
        return Status.FAILED, "data-dependent Python control flow cannot be compiled"
    for key, (status, reason, *sizes) in EXPECTED.items():
        if _matches(key, cell) and all(where.covers(cell.size) for where in sizes):
            return status, reason
    bug = framework_bug(cell, versions)
    return (bug.status, bug.reason) if bug is not None else None


def _known(m: Measurement, problems) -> tuple[Status, str] | None:
    problem = problems.get(m.cell.problem)
    return expected(m.cell, problem.compilable, m.versions or None) if problem is not None else None


def expected_failure(m: Measurement, problems) -> str | None:
    """The reason `m` failed as expected, or None (also None when it did not fail the expected way)."""
    known = _known(m, problems)
    return known[1] if known is not None and m.status is known[0] else None


EXPECTED_KEY = "expected_failure"  # details key: the known limitation a failed cell matches
REPRODUCER_KEY = "framework_bug"  # details key: the reproducer of the framework bug it matches


def labelled(m: Measurement, problems) -> Measurement:
    """`m`, with `details["expected_failure"]` set when it failed as a known limitation (for the run's summary,
    the report and results.csv); results files written before the label get it when they are reported."""
    why = expected_failure(m, problems)
    if why is None or m.details.get(EXPECTED_KEY) == why:
        return m
    bug = framework_bug(m.cell, m.versions or None)
    extra = {REPRODUCER_KEY: bug.reproducer} if bug is not None and bug.reason == why else {}
    return replace(m, details={**m.details, EXPECTED_KEY: why, **extra})


def expected_reason(m: Measurement) -> str | None:
    """The known limitation a labelled measurement failed as (see `labelled`), or None."""
    return m.details.get(EXPECTED_KEY)


def expected_reproducer(m: Measurement) -> str | None:
    """The reproducer (docs/framework-bugs/…) of the framework bug a labelled measurement failed as, or None."""
    return m.details.get(REPRODUCER_KEY)


def unexpected(m: Measurement, problems) -> str | None:
    """None when `m` is as it should be — ok, unsupported with a reason, or failed exactly as expected — else why
    not, in one line (for tests and suites that hold the built-in adapters to this table strictly)."""
    known = _known(m, problems)
    if known is not None and m.status is not Status.UNSUPPORTED:
        if m.status is known[0] and m.message:
            return None
        return f"{m.cell.id}: expected {known[0].value} ({known[1]}), got {m.status.value}: {m.message}"
    if m.status is Status.UNSUPPORTED:
        return None if m.message else f"{m.cell.id}: unsupported without a reason"
    if m.status is Status.OK:
        return None
    c = m.check
    extra = (f" (error {c.error}, pairwise {c.pairwise_error}, adjoint {c.adjoint_error}, tol {c.tolerance})"
             if c else "")
    return f"{m.cell.id}: {m.status.value}: {m.message}{extra}"

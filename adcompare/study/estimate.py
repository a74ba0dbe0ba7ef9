"""Wall-time estimates for a plan: what a cell took before on this machine where known, a cost model otherwise.

History: each cell record carries `details.wall_seconds` (its own wall time, worker start-up excluded) and each
worker record `startup_seconds`; results files measured under the same machine fingerprint as this run give those
times back (the latest record wins). Cells timed elsewhere are never used: another machine's seconds say nothing
about this one.

The model (no history) follows what running a cell does: a fixed per-cell overhead (inputs, prepare, the round
trip to the worker), compilation for compiled variants (seconds per cell for the adapter's `slow_variants`), the
float64 reference (full derivatives by differencing up to reference.FULL_REFERENCE_BUDGET, once per worker and
(problem, size, operator): every variant shares it, and the run's other workers read it back), a first call, and
the timer's warm-up and blocks under the run's model/timing_policy.py (a slow call: its `slow_samples` calls). A
call's cost grows with the elements the operator materialises (operators.minimum_elements).
The constants are priors fitted on the project's 2-core machine (the quick suite, and the full suite's first
shard); a run's records replace them on the next plan.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from adcompare.model.cell import CURRENT, Cell, worker_group
from adcompare.model.operators import spec
from adcompare.model.problem import shapes_of
from adcompare.model.shapes import Shapes
from adcompare.model.support import Support
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.registry import Registry
from adcompare.store.results import Results
from adcompare.verify.reference import FULL_REFERENCE_BUDGET, SHARED_REFERENCE

# Worker start-up (interpreter, adcompare, the framework import and setup), seconds.
STARTUP = {"tensorflow": 7.0, "torch": 3.0, "jax": 2.0, "autograd": 1.0}
DEFAULT_STARTUP = 3.0
# Per cell: inputs, prepare (tracing, graph building), checking the result, the round trip to the worker.
CELL_OVERHEAD = {"tensorflow": 0.15, "torch": 0.04, "jax": 0.06, "autograd": 0.03}
DEFAULT_CELL_OVERHEAD = 0.1
# Dispatching one array operation eagerly, seconds; compiled code pays none.
DISPATCH = {"tensorflow": 6e-5, "torch": 1e-5, "jax": 3e-5, "autograd": 1e-5}
DEFAULT_DISPATCH = 3e-5
# JAX compiles every primitive on its first eager use at each shape, and each operator's transform brings its own:
# the first eager cell of each (problem, size, operator) in a worker pays (GMM's first grad call: 3.7–4.5 s).
EAGER_FIRST_USE = {"jax": 0.02}
# TensorFlow's eager Jacobians (tape.jacobian, vectorized_map) re-trace their pfor function on every call:
# seconds per traced operation and pass, fitted to TensorFlow 2.21 on this project's 2-core machine (BA: 1.6 s a
# jacfwd call, 3.8 s a vmap_jacfwd call whatever p), plus a fixed part per call.
RETRACE = {"tensorflow": {"jacfwd": 0.01, "jacrev": 0.003, "hessian": 0.008, "vmap_jacfwd": 0.03,
                          "vmap_jacrev": 0.007, "vmap_grad": 0.007}}
RETRACE_BASE = 0.05
SECONDS_PER_ELEMENT = 3e-9  # memory traffic per element an operator materialises
SECONDS_PER_FLOP = 2e-10  # one core's arithmetic
COMPILE = 0.15  # a compiled variant's first call (trace + compile) of a small function
COMPILE_PER_OPERATION = 0.005  # and per traced operation
SLOW_COMPILE = 2.0  # an adapter's slow variant (torch.compile): seconds per cell once its compiler is warm …
SLOW_COLD_START = 12.0  # … and once per worker for the compiler's own first use (torch.compile: 11.7–14 s measured)
EVALUATION = 5e-5  # one NumPy evaluation of a small problem for the reference, seconds
DEFAULT_OPERATIONS = 6
KIND_FAMILIES = 3  # an adapter's families run on a device whose median ratio corrects its families not yet run
SKIPPED_SECONDS = 0.01  # a cell skipped because a smaller size of its family timed out
DISTINCT_OPERATIONS = 400  # compilation caches repeated (operation, shape) pairs: a loop's body compiles once
# How many evaluations' worth of operations and arithmetic each operator costs (vectorised bases count once for
# operations, once per basis vector for arithmetic).
OPERATION_PASSES = {"value": 1, "jvp": 2, "vjp": 3, "grad": 3, "hvp": 6, "newton_dir": 6, "jacfwd": 2, "jacrev": 3,
                    "hessian": 6, "vmap_grad": 3, "vmap_jacfwd": 2, "vmap_jacrev": 3, "pmap_value": 1, "pmap_grad": 3,
                    # the nested operators evaluate once: their derivatives are inside the problem's operations
                    **{f"nested_{order}": 1 for order in ("ff", "fr", "rf", "rr")}}


@dataclass(frozen=True)
class History:
    """Measured seconds on one machine: per cell key, and per worker group's start-up (by `Cell.worker_group`)."""

    machine: str = ""
    cells: Mapping[str, float] = field(default_factory=dict)
    startups: Mapping[tuple[str, ...], float] = field(default_factory=dict)
    # cell key → (calls timed, their median) where a slow cell (rule 7 of run/timing.py) took all its policy gave it:
    # a run under another policy times it with another number of calls (a --max-time run's three, seven otherwise)
    slow_calls: Mapping[str, tuple[int, float]] = field(default_factory=dict)

    @classmethod
    def from_results(cls, results: Results, machine: str) -> "History":
        here = [m for m in results.measurements
                if m.machine == machine and isinstance(m.details.get("wall_seconds"), (int, float))]
        cells = {m.cell.key: float(m.details["wall_seconds"]) for m in here}
        slow_calls = {m.cell.key: (len(m.timing.samples), m.timing.median) for m in here
                      if m.timing is not None and m.timing.samples and m.timing.median is not None
                      and m.timing.number == 1 and m.timing.warmup_calls == 0 and not m.timing.stopped}
        # Worker records name no machine: trust their start-ups only when every file came from this machine.
        own = all(p.machine.id == machine for p in results.provenance)
        startups = {}
        if own:
            for w in results.workers:
                if isinstance(w.get("startup_seconds"), (int, float)):
                    # A worker record names its environment when it is not `current` (runner.py), as a cell does.
                    group = worker_group(w["adapter"], w["dtype"], w["device"], w.get("environment") or CURRENT,
                                         int(w.get("devices") or 1))
                    startups[group] = float(w["startup_seconds"])
        return cls(machine, cells, startups, slow_calls)

    def seconds(self, key: str, policy: TimingPolicy, timeout: float) -> float:
        """A measured cell's seconds under `policy`: a slow cell's with the calls `policy` times it with, no longer
        than `timeout` unless it was measured longer."""
        measured = seconds = self.cells[key]
        if key in self.slow_calls:
            calls, median = self.slow_calls[key]
            seconds = min(measured + (policy.slow_samples - calls) * median, max(measured, timeout))
        return max(seconds, 0.0)


@dataclass(frozen=True)
class Estimate:
    """Seconds per cell (by key) and per worker start-up (by the worker that runs the cells, `worker`); `measured`
    cells came from history."""

    cells: Mapping[str, float]
    startups: Mapping[tuple[str, ...], float]
    measured: frozenset[str] = frozenset()
    # Each cell's model alone (history, the timeout's cap and the skips after a modelled timeout left out): what
    # orders a family's sizes by cost, which the suites' size lists do not (ADBench's GMM: d64-K10 before d2-K100).
    modelled: Mapping[str, float] = field(default_factory=dict)
    # cell key → the worker that runs it, where that is not its Cell.worker_group's (Registry.worker_key: torch's
    # D-device CPU cells run in its 1-device cells' worker)
    workers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def worker(self, cell: Cell) -> tuple[str, ...]:
        """The worker that runs `cell`, whose start-up `startups` holds: cells of one worker share one start-up."""
        return self.workers.get(cell.key, cell.worker_group)

    def dearer(self, cell: Cell, than: Cell) -> bool:
        """Whether `cell` is modelled to cost at least what `than` does (True where either is not modelled)."""
        if cell.key not in self.modelled or than.key not in self.modelled:
            return True
        return self.modelled[cell.key] >= self.modelled[than.key]

    @property
    def total(self) -> float:
        return sum(self.cells.values()) + sum(self.startups.values())

    def group_seconds(self, cells: Iterable[Cell]) -> float:
        """What running these cells costs, each worker they need started once."""
        cells = list(cells)
        workers = {self.worker(c) for c in cells}
        return sum(self.cells[c.key] for c in cells) + sum(self.startups.get(w, DEFAULT_STARTUP) for w in workers)


def timed_seconds(per_call: float, policy: TimingPolicy = TimingPolicy()) -> float:
    """Seconds `timing.measure` spends on a cell whose call takes `per_call`: the first call, then warm-up and
    blocks, or, for a call over the policy's block allotment, `slow_samples` more calls and no warm-up (rule 7 of
    run/timing.py; the cell's timeout caps it in `estimate`)."""
    if per_call > policy.block_allotment:
        return per_call * (1 + policy.slow_samples)
    warmup = per_call if per_call > policy.max_time / 8 else min(max(2 * per_call, policy.warmup_time),
                                                                 policy.max_time / 4 + per_call)  # rule 2
    blocks = min(max(policy.min_time, policy.min_samples * per_call), policy.max_time + per_call)
    return per_call + warmup + blocks


def arithmetic_passes(operator: str, shapes: Shapes) -> int:
    """Evaluations' worth of arithmetic: full Jacobians and Hessians cost one pass per basis vector."""
    return OPERATION_PASSES[operator] * {
        "jacfwd": shapes.n_in, "jacrev": shapes.n_out, "hessian": shapes.n_in, "vmap_jacfwd": shapes.n_in,
        "vmap_jacrev": shapes.n_example_out}.get(operator, 1)


def evaluation_seconds(shapes: Shapes) -> float:
    """One evaluation's arithmetic and memory traffic (operations dispatched are counted apart)."""
    flops = shapes.flops if shapes.flops is not None else 5 * (shapes.n_in + shapes.n_out)
    return max(SECONDS_PER_FLOP * flops, SECONDS_PER_ELEMENT * (shapes.n_in + shapes.n_out))


def reference_seconds(operator: str, shapes: Shapes, closed_form: bool = False) -> float:
    """The float64 reference through NumPy: value needs one evaluation, directional forms a few, full derivatives
    one central difference per basis vector up to the differencing budget (then directional checks). Per-example
    operators difference the whole batch at once (`shapes` is the whole batch's evaluation), not each example.
    A problem's closed form of the operator (`@<problem>.analytic`) is priced as one evaluation: GMM's gradient at
    d64-K200-n10000 takes 2.5 s where the objective through NumPy takes 8.6-10 s, det's are microseconds."""
    s = spec(operator)
    ops = shapes.operations or DEFAULT_OPERATIONS
    evaluation = EVALUATION + ops * DISPATCH["autograd"] + evaluation_seconds(shapes)
    if s.order == 0 or closed_form:
        return evaluation
    if s.takes is not None:
        return 6 * evaluation * (2 if s.order == 2 else 1)
    full = 2 * shapes.n_in * evaluation * (shapes.n_in if s.order == 2 else 1)
    return min(full, FULL_REFERENCE_BUDGET + 12 * evaluation)


@dataclass(frozen=True)
class ModelledCell:
    """A cell's model: `fixed` seconds (overhead, compilation, reference) and its call's `per_call` seconds."""

    fixed: float
    per_call: float

    def seconds(self, policy: TimingPolicy) -> float:
        """Its wall time (worker start-up excluded) when timed under `policy`."""
        return self.fixed + timed_seconds(self.per_call, policy)

    def times_out(self, timeout: float) -> bool:
        """Whether the runner would find it timed out and skip its family's larger sizes: its fixed part, first
        call and a second call do not fit in `timeout` (the second is a slow cell's first sample; where it does not
        fit the cell is a timeout or "first call only"). A slow cell stopped by its deadline after that is
        measured, and its family goes on (runner._recorded)."""
        return self.fixed + 2 * self.per_call >= timeout


def model_cell(registry: Registry, cell: Cell, shapes: Shapes, *, with_reference: bool, first_use: bool = True,
               cold: bool = False) -> ModelledCell:
    """One cell's model; `first_use`: the first cell of its (problem, size, operator) in its worker, which pays
    JAX's per-primitive compilation in eager mode."""
    adapter = registry.adapters[cell.adapter]
    slow = cell.variant in adapter.slow_variants
    eager = not adapter.compiled_from(cell.variant)
    capability = adapter.capability(cell.operator, cell.variant)
    ops = (shapes.operations or DEFAULT_OPERATIONS) * OPERATION_PASSES[cell.operator]
    if capability.support is Support.EMULATED:  # built from a Python loop: operations once per basis vector
        ops *= max(1, arithmetic_passes(cell.operator, shapes) // OPERATION_PASSES[cell.operator])
    elements = adapter.materialised_elements(cell.operator, cell.variant, shapes)
    retrace = RETRACE.get(cell.adapter, {}).get(cell.operator)
    per_call = (ops * DISPATCH.get(cell.adapter, DEFAULT_DISPATCH) if eager else 0.0) \
        + arithmetic_passes(cell.operator, shapes) * evaluation_seconds(shapes) + SECONDS_PER_ELEMENT * elements \
        + (RETRACE_BASE + retrace * ops if eager and retrace else 0.0)
    if slow:
        first = SLOW_COMPILE + ops * COMPILE_PER_OPERATION * 10 + (SLOW_COLD_START if cold else 0.0)
    elif eager:
        first = min(ops, DISTINCT_OPERATIONS) * EAGER_FIRST_USE.get(cell.adapter, 0.0) if first_use else 0.0
    else:  # a loop written as adcompare.fold compiles its step once (JAX, TensorFlow): distinct operations count
        first = COMPILE + min(ops, DISTINCT_OPERATIONS) * COMPILE_PER_OPERATION
    closed_form = cell.operator in dict(registry.problem(cell.problem).analytic)
    reference = reference_seconds(cell.operator, shapes, closed_form) if with_reference else 0.0
    return ModelledCell(CELL_OVERHEAD.get(cell.adapter, DEFAULT_CELL_OVERHEAD) + first + reference, per_call)


def estimate(registry: Registry, cells: Sequence[Cell], history: History = History(), *,
             timeout: float = 300.0, policy: TimingPolicy = TimingPolicy()) -> Estimate:
    """Seconds for each cell and each worker group's start-up, measured where `history` knows them, modelled
    under the run's timing `policy` where not.

    A modelled cell is capped at the cell `timeout`, and once a size is expected to time out the runner skips the
    family's larger sizes, so they cost next to nothing."""
    out: dict[str, float] = {}
    modelled: dict[str, float] = {}
    measured = set()
    referenced: set[tuple] = set()
    timing_out: set[tuple] = set()
    eager_seen: set[tuple] = set()  # (worker group, problem, size, operator) already run eagerly
    warm: set[tuple] = set()  # worker groups whose slow compiler has already started
    shapes: dict[tuple[str, str], Shapes] = {}  # a size's label is looked up once, not once per cell
    for c in cells:
        # jacfwd and jacrev check against one Jacobian (reference.py caches and shares it), as do the per-example pair.
        shared = SHARED_REFERENCE.get(c.operator, c.operator)
        group = registry.worker_key(c)
        key, ref_key = c.key, (*group, c.problem, c.size, shared)  # the reference is cached per worker
        adapter = registry.adapters[c.adapter]
        slow = c.variant in adapter.slow_variants
        if (c.problem, c.size) not in shapes:
            problem = registry.problems[c.problem]
            shapes[(c.problem, c.size)] = shapes_of(problem, problem.size(c.size))
        model = model_cell(registry, c, shapes[(c.problem, c.size)], with_reference=ref_key not in referenced,
                           first_use=ref_key not in eager_seen, cold=slow and group not in warm)
        seconds = model.seconds(policy)
        modelled[key] = seconds
        if key in history.cells:
            out[key] = history.seconds(key, policy, timeout)
            measured.add(key)
        else:
            family = c.family
            out[key] = SKIPPED_SECONDS if family in timing_out else min(seconds, timeout)
            if model.times_out(timeout):
                timing_out.add(family)
        referenced.add(ref_key)
        if slow:
            warm.add(group)
        if not adapter.compiled_from(c.variant):
            eager_seen.add(ref_key)
    startups: dict[tuple[str, ...], float] = {}
    workers: dict[str, tuple[str, ...]] = {}
    for c in cells:
        worker = registry.worker_key(c)
        if worker != c.worker_group:
            workers[c.key] = worker
        if worker not in startups:  # measured by the group it started for: its key, or a D-device group's alone
            startups[worker] = history.startups.get(worker, history.startups.get(
                c.worker_group, STARTUP.get(c.adapter, DEFAULT_STARTUP)))
    return Estimate(out, startups, frozenset(measured), modelled, workers)


class LiveEstimate:
    """An estimate corrected while a run goes (`run --max-time`): each finished cell's wall time against its
    modelled seconds gives a ratio that corrects its family's larger sizes (the model's scaling kept, its constant
    measured), and cells of no family measured yet take the median ratio of the cells run on the same device by
    the same adapter once cells of KIND_FAMILIES families have run normally (a refusal or a crash in milliseconds
    says nothing of the others' cost) — so a GPU's cells are estimated from GPU cells, whatever the CPU-fitted
    priors said, and no single cell or family speaks for every family (on an H100, JAX's first cell, a
    per-example BA Jacobian whose first eager call compiled for 8 s, ran at 31× its model, and that one ratio put
    all 471 other JAX cells behind every torch cell of an 8-minute budget, and none of them ran). Cells
    measured on this machine before (history) keep their measured seconds until a cell of their family measured
    before runs again: its wall time against its history corrects them (a history written by older code, or a
    timeout's lower bound, can be far off: the per-example BA cells that timed out at 60 s before issue 39 took
    2-13 s on the code that fixed their reference, and waited behind cells that were really slow)."""

    def __init__(self, estimate: Estimate):
        self.base = estimate
        self._family: dict[tuple[str, ...], float] = {}
        self._kind: dict[tuple[str, str], dict[tuple[str, ...], float]] = {}  # each family's latest ratio
        self._against_history: dict[tuple[str, ...], float] = {}

    def seconds(self, cell: Cell) -> float:
        base = self.base.cells.get(cell.key)
        if base is None:
            return 0.0
        if cell.key in self.base.measured:
            return base * self._against_history.get(cell.family, 1.0)
        ratio = self._family.get(cell.family)
        if ratio is None and len(kind := self._kind.get((cell.device, cell.adapter), {})) >= KIND_FAMILIES:
            ratio = sorted(kind.values())[len(kind) // 2]
        return base * ratio if ratio is not None else base

    def learn(self, cell: Cell, wall_seconds: float, *, ran: bool = True) -> None:
        """A cell of this run finished in `wall_seconds` (its worker's start-up excluded); `ran`: it ran as cells
        of its kind do (measured, or measured wrong), not refused, failed or stopped, so it may speak for its
        adapter's other families."""
        base = self.base.cells.get(cell.key)
        if base is None or base <= 0:
            return
        if cell.key in self.base.measured:  # corrects its family's other measured sizes only: a history's
            self._against_history[cell.family] = wall_seconds / base  # ratio is no model's constant
            return
        ratio = wall_seconds / base
        self._family[cell.family] = ratio
        if ran:
            self._kind.setdefault((cell.device, cell.adapter), {})[cell.family] = ratio


"""Planning: which cells a selection asks for, and which are decided without running any framework.

`Selection` is what the user asked for; `plan` turns it into a `Plan`: the cells to run in workers, in the order the
runner takes them (one worker per (adapter, dtype, device, environment) group, sizes ascending), and the cells
decided here — `unsupported` (the adapter's declared capability) or `too_large` (the memory pre-flight). The quick
suite's limits are in suites.py, the pre-flight in preflight.py, the operators' applicability in operators.py.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from adcompare.model.cell import CURRENT, Cell
from adcompare.model.errors import RequiredFrameworkMissing, UsageError, unknown
from adcompare.model.measurement import Measurement
from adcompare.model.operators import OPERATORS, applicable, data_parallel, devices_unfit
from adcompare.model.problem import DTYPES, Problem, shapes_of
from adcompare.model.status import Status
from adcompare.plugin.adapter import STANDARD_VARIANTS
from adcompare.plugin.registry import Registry
from adcompare.study.environment_specs import EnvironmentSpec, in_environments
from adcompare.study.preflight import too_large
from adcompare.study.suites import SUITE_DTYPES, SUITES, allows, entry_timeout, suite_devices

__all__ = ["DEVICES", "STANDARD_VARIANTS", "Plan", "Selection", "gpu_present", "plan", "required_frameworks",
           "usable_adapters"]

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Selection:
    """What to run; an empty tuple means "all". `suite` limits sizes and slow variants (see suites.py)."""

    problems: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()
    adapters: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    suite: str = "quick"
    environments: tuple[str, ...] = ()  # names from `--env` (or "current"), see environments.py
    # Device counts (`--devices 1,2,4`) for the data-parallel operators; other operators run at 1 only, and only
    # when 1 is asked for. Empty: the suite's counts (the quick suite's pmap entry at 1, 2 and 4; else 1).
    device_counts: tuple[int, ...] = ()
    suite_chosen: str = ""  # why `suite` is not the quick suite when --suite was not given (suites.suite_for)


@dataclass(frozen=True)
class Plan:
    cells: tuple[Cell, ...]  # to run in workers
    decided: tuple[Measurement, ...]  # unsupported / too_large, decided without running
    notes: tuple[str, ...] = ()
    # Cell key → its suite entry's own timeout (suites.entry_timeout: the nested evals'), used unless --timeout
    # is given; other cells take the run's timeout.
    timeouts: Mapping[str, float] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.cells) + len(self.decided)


def gpu_present() -> bool:
    """A CUDA GPU is visible to this machine (without importing any framework)."""
    return Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi") is not None


def required_frameworks() -> tuple[str, ...]:
    return tuple(x.strip() for x in os.environ.get("ADCOMPARE_REQUIRE", "").split(",") if x.strip())


def _check_names(kind: str, asked: Iterable[str], valid: Iterable[str]) -> None:
    valid = list(valid)
    for name in asked:
        if name not in valid:
            raise unknown(kind, name, valid)


def usable_adapters(registry: Registry, asked: Sequence[str],
                    elsewhere: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Adapters to run and notes on those left out; raises when a required or named one is unusable. Adapters in
    `elsewhere` run in an environment of their own (`--env`), so need not be installed here."""
    _check_names("adapter", asked, registry.adapters)
    required = required_frameworks()
    _check_names("framework in ADCOMPARE_REQUIRE", required, registry.adapters)
    names, notes = [], []
    for name in asked or sorted(registry.adapters):
        avail = registry.adapters[name].available()
        if avail.installed or name in elsewhere:
            names.append(name)
        elif name in required:
            raise RequiredFrameworkMissing(f"ADCOMPARE_REQUIRE names {name!r} but {avail.reason}")
        elif asked:
            raise UsageError(f"adapter {name!r} is not usable: {avail.reason}")
        else:
            notes.append(f"adapter {name!r} left out: {avail.reason}")
    return names, notes


def _problems(registry: Registry, sel: Selection) -> list[Problem]:
    _check_names("problem", sel.problems, registry.problems)
    chosen = [registry.problems[n] for n in sel.problems] if sel.problems else list(registry.problems.values())
    if sel.tags:
        known = {t for p in registry.problems.values() for t in p.tags}
        _check_names("tag", sel.tags, known)
        chosen = [p for p in chosen if set(sel.tags) & set(p.tags)]
    return chosen


def _size_order(problem: Problem) -> dict[str, int]:
    return {s.label: i for i, s in enumerate(problem.sizes_ascending)}


def plan(registry: Registry, sel: Selection, *, memory_limit: int | None = None,
         environments: Sequence[EnvironmentSpec] = ()) -> Plan:
    """The cells to run, and those decided without running (unsupported, or too large for `memory_limit` bytes,
    default half the machine's memory); each once per environment that runs its adapter (environments.py)."""
    if sel.suite not in SUITES:
        raise unknown("suite", sel.suite, SUITES)
    _check_names("operator", sel.operators, OPERATORS)
    _check_names("dtype", sel.dtypes, DTYPES)
    _check_names("device", sel.devices, DEVICES)
    elsewhere = frozenset(n for n, a in registry.adapters.items()
                          if any(s.pins(a) for s in environments if s.name != CURRENT))
    adapters, notes = usable_adapters(registry, sel.adapters, elsewhere)
    all_variants = set(STANDARD_VARIANTS).union(*(registry.adapters[a].variants for a in registry.adapters))
    _check_names("variant", sel.variants, all_variants)
    problems = _problems(registry, sel)
    all_sizes = {s.label for p in problems for s in p.sizes}
    for label in sel.sizes:
        if label not in all_sizes:  # a problem whose labels it looks like may say how to run it (e.g. --inputs)
            hints = [f"problem {p.name!r}: {p.more_sizes}" for p in problems
                     if p.more_sizes and label.startswith(p.sizes[0].dims[0][0])]
            raise unknown("size", label, all_sizes, "; ".join(hints))
    devices = sel.devices or (("cpu", "cuda") if gpu_present() else ("cpu",))
    dtypes = sel.dtypes or SUITE_DTYPES.get(sel.suite, DTYPES)
    bad_counts = [d for d in sel.device_counts if d < 1]
    if bad_counts:
        raise UsageError(f"--devices {bad_counts[0]}: a device count is a whole number of at least 1, e.g. "
                         f"--devices 1,2,4")
    counts = sel.device_counts or suite_devices(sel.suite)

    cells: list[Cell] = []
    decided: list[Measurement] = []
    for problem in problems:
        smallest = problem.smallest_size.label
        builtin = problem.source.startswith("adcompare.problems.")
        sizes = [s for s in problem.sizes if not sel.sizes or s.label in sel.sizes]
        if sel.sizes and not sizes:
            continue
        try:
            first = shapes_of(problem, problem.smallest_size)
            out_shape, ex_shape = first.output, (first.example_output if problem.batch else None)
        except Exception as exc:
            raise UsageError(f"problem {problem.name!r} fails when evaluated through NumPy (the reference "
                             f"namespace): {type(exc).__name__}: {exc}; fix the problem or its inputs") from exc
        operators = sel.operators or problem.operators or tuple(OPERATORS)
        for op in operators:
            why = applicable(op, out_shape=out_shape, example_out_shape=ex_shape, has_batch=problem.batch is not None,
                             declared=problem.operators)
            if why is None and problem.operators is not None and op not in problem.operators:
                why = f"problem {problem.name!r} restricts its operators to {', '.join(problem.operators)}"
            if why:
                if sel.operators and sel.problems:  # asked for by name: say what was left out, run the rest
                    notes.append(f"left out problem {problem.name!r} with operator {op!r}: {why}")
                continue
            op_counts = counts if data_parallel(op) else tuple(d for d in counts if d == 1)
            fitting = {}  # (size, count) → whether the batch splits evenly; said once, not once per adapter
            for size in sizes:
                for count in op_counts:
                    why = devices_unfit(op, count, shapes_of(problem, size).batch if data_parallel(op) else None)
                    fitting[size.label, count] = why is None
                    if why and sel.device_counts and (sel.sizes or sel.problems):
                        notes.append(f"left out problem {problem.name!r} at {size.label}: {why}")
            for adapter_name in adapters:
                adapter = registry.adapters[adapter_name]
                variants = sel.variants or adapter.planned_variants()
                for variant, device, dtype, count, size in (
                        (v, dv, dt, n, sz) for v in variants for dv in devices for dt in dtypes
                        for n in op_counts for sz in sizes):
                    if not fitting[size.label, count]:
                        continue
                    cell = Cell(problem.name, size.label, op, adapter_name, variant, device, dtype,
                                devices=count)
                    slow = variant in adapter.slow_variants
                    if not sel.sizes and not allows(sel.suite, cell, size, smallest_size=smallest,
                                                    slow=slow, builtin=builtin,
                                                    devices_chosen=bool(sel.device_counts)):
                        continue
                    cap = adapter.capability(op, variant)
                    compiles = adapter.compiled_from(variant)
                    if not cap.supported:
                        decided.append(Measurement(cell, Status.UNSUPPORTED, cap.reason,
                                                   support=cap.support, compiles=compiles))
                        continue
                    big = too_large(problem, size, op, dtype, memory_limit, adapter, variant)
                    if big:
                        decided.append(Measurement(cell, Status.TOO_LARGE, big, support=cap.support,
                                                   algorithm=cap.algorithm, compiles=compiles))
                        continue
                    cells.append(cell)

    if environments or sel.environments:
        cells = in_environments(cells, registry.adapters, environments, sel.environments)
        decided = [replace(m, cell=c) for m in decided
                   for c in in_environments([m.cell], registry.adapters, environments, sel.environments)]

    orders = {p.name: _size_order(p) for p in problems}  # once per problem: the sort key runs once per cell

    # A worker runs its cells in this order: a problem's sizes ascending (a family's smallest first, which a timeout
    # needs to skip its larger sizes) and, at each size, every operator and variant, so the worker builds that
    # size's inputs once for them all (verify/cell_inputs.py, `reuse`). Family by family, a worker rebuilt them at
    # every cell: BA's value at p = 28,987,644, 3.9 GB, twice in each worker, 3-9 s each.
    def order_key(c: Cell):
        return (c.adapter, c.dtype, c.device, c.environment, c.devices, c.problem, orders[c.problem][c.size],
                c.operator, c.variant)

    timeouts = {c.key: t for c in cells if (t := entry_timeout(sel.suite, c)) is not None}
    return Plan(tuple(sorted(cells, key=order_key)), tuple(decided), tuple(notes), timeouts)

"""Findings in words: each seed article's claim (package data, seed_claims.json) against what was measured here.

A claim says one side is faster than others ("exp_dot_loss:jacrev" beats "exp_dot_loss:jacfwd"). For every
context the results hold both sides in — one machine, device, dtype, adapter and (unless the sides name one)
variant — the two are compared at the largest size both were timed at, with significance.py's test; contexts that
did not reach the largest size any context reached are left out (the claims are about large sizes). The claim's
comparisons are one family for Holm's correction. A `grows` claim compares instead the ratio at the smallest and
the largest common size (growth counts when the two bootstrap intervals do not overlap).

Verdict: **confirmed** when at least half the comparisons significantly agree and none significantly disagrees;
**contradicted** when none agrees, or more disagree than agree; **mixed** otherwise; **not measured** when the
results hold no context with both sides.

A `control_flow` claim (seed 001's loop whose trip count is read off the data) names the loop as the article writes it
and its twin written with `adcompare.while_loop`, one operator each: per adapter · variant, at the largest size
each ran, what the loop as written gave (a time, or its failure with the reason) beside what the staged twin gave.
The article runs the loop without a compiler, so the verdict counts the eager variants of the loop as written: one
whose derivative passed its check agrees, one that failed disagrees (same rule); what the compilers do with either
form is shown, not counted — a compiled failure of the loop as written is the seed's point.

A `parallel` claim (seed 004's pmap) names one data-parallel operator: each cell followed across device counts
(across_devices.py) at its largest size agrees when its speed-up T(1) ÷ T(D) at the largest D has an interval above
1, disagrees when below, with the same verdict rule — counting only real devices. Emulated host devices share one
machine's cores, so where every series ran on them the verdict is **not measurable here**, with the figures shown.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from adcompare.analysis import across_devices
from adcompare.analysis.bootstrap import Bootstrap, Ratio
from adcompare.analysis.significance import Difference, judge
from adcompare.analysis.sizes import sort_key
from adcompare.analysis.summary import entry, sample_key, timed
from adcompare.model.cell import CURRENT
from adcompare.model.measurement import Measurement
from adcompare.model.status import NOT_RUN, Status
from adcompare.model.units import seconds
from adcompare.verify.expectations import expected_reason

CONFIRMED, CONTRADICTED, MIXED, NOT_MEASURED = "confirmed", "contradicted", "mixed", "not measured"
NOT_MEASURABLE = "not measurable here"
RULE = ("confirmed: at least half of the comparisons significantly agree and none disagrees; contradicted: none "
        "agrees, or more disagree than agree; mixed: otherwise; not measured: no context has both sides timed; "
        "not measurable here: a claim about parallel devices timed on emulated devices only")


@dataclass(frozen=True)
class Claim:
    seed: str
    article: str
    quote: str
    article_number: str
    faster: str = ""
    slower: tuple[str, ...] = ()
    grows: bool = False
    first_call: bool = False
    parallel: str = ""  # "problem:operator" of a data-parallel operator: runs in parallel across devices
    control_flow: tuple[str, ...] = ()  # ("problem:operator" as the article writes it, its while_loop twin)

    @staticmethod
    def side(spec: str) -> tuple[str, str, str | None]:
        parts = spec.split(":")
        return parts[0], parts[1], parts[2] if len(parts) > 2 else None

    def label(self, spec: str) -> str:
        """How a side is named in the sentence: the operator, with what differs from the other side."""
        problem, operator, variant = self.side(spec)
        problems = {self.side(s)[0] for s in (self.faster, *self.slower)}
        return " ".join(p for p in ((problem + ":") if len(problems) > 1 else "", operator, variant or "") if p)


def claims() -> list[Claim]:
    data = json.loads(resources.files("adcompare.analysis").joinpath("seed_claims.json").read_text(encoding="utf-8"))
    return [Claim(**{**c, "slower": tuple(c.get("slower", ())), "control_flow": tuple(c.get("control_flow", ()))})
            for c in data["claims"]]


@dataclass(frozen=True)
class Comparison:
    context: str  # "jax · compiled", plus device/dtype/machine where the results hold several
    slower: str  # side spec
    size: str  # the size compared (for grows: "smallest → largest")
    ratio: float  # slower ÷ faster median (for grows: the ratio at the largest size)
    difference: Difference  # for grows: the largest size's test
    first_call_ratio: float | None = None
    small_ratio: float | None = None  # grows: ratio at the smallest size
    grew: int = 0  # grows: +1 grew beyond both intervals, -1 shrank, 0 neither

    @property
    def agrees(self) -> int:
        """+1 significantly as claimed, -1 significantly opposite, 0 not significant."""
        if self.small_ratio is not None:
            return self.grew
        if not self.difference.significant:
            return 0
        return 1 if self.ratio > 1 else -1


@dataclass(frozen=True)
class Finding:
    claim: Claim
    comparisons: tuple[Comparison, ...]

    @property
    def verdict(self) -> str:
        if not self.comparisons:
            return NOT_MEASURED
        agree = sum(c.agrees > 0 for c in self.comparisons)
        disagree = sum(c.agrees < 0 for c in self.comparisons)
        if agree == 0 or disagree > agree:
            return CONTRADICTED
        if disagree == 0 and 2 * agree >= len(self.comparisons):
            return CONFIRMED
        return MIXED

    @property
    def measured(self) -> str:
        """What was measured, in words with numbers."""
        c = self.claim
        if not self.comparisons:
            sides = ", ".join((c.faster, *c.slower))
            return f"no context has both sides timed ({sides}); e.g. adcompare run " \
                   f"--problem {Claim.side(c.faster)[0]}"
        parts = []
        for spec in c.slower:
            mine = [x for x in self.comparisons if x.slower == spec]
            if not mine:
                continue
            if c.grows:
                items = [f"{_times(x.small_ratio)} → {_times(x.ratio)} ({x.context}{_mark(x)})" for x in mine]
                parts.append(f"{c.label(spec)} ÷ {c.label(c.faster)} from {mine[0].size}: " + ", ".join(items))
                continue
            by_size: dict[str, list[Comparison]] = defaultdict(list)
            for x in mine:
                by_size[x.size].append(x)
            for size, xs in by_size.items():
                items = []
                for x in xs:
                    first = f", first calls {_times(x.first_call_ratio)}" if x.first_call_ratio else ""
                    items.append(f"{_times(x.ratio)} ({x.context}{first}{_mark(x)})")
                verb = "beats" if all(x.agrees > 0 for x in xs) else "vs"
                parts.append(f"{c.label(c.faster)} {verb} {c.label(spec)} at {size} by " + ", ".join(items))
        return "; ".join(parts)

    @property
    def text(self) -> str:
        return f"seed {self.claim.seed}: {self.measured}"


COMPACT_ABOVE = 1e6  # ratios from here on in three significant digits and a power of ten, not in hundreds of digits


def _times(r: float | None) -> str:
    if r is None or math.isnan(r):
        return "–"
    return f"{r:,.0f}×" if 100 <= r < COMPACT_ABOVE else f"{r:.3g}×"


def _mark(x: Comparison) -> str:
    return {1: "", 0: ", not significant", -1: ", opposite"}[x.agrees]


Index = dict[tuple[str, str], Measurement]  # by Measurement.merge_key: a twin is looked up by `twin_key`


def timed_index(measurements: Sequence[Measurement]) -> Index:
    return {m.merge_key: m for m in measurements if timed(m)}


def evaluate(index: Index, claim: Claim, boot: Bootstrap) -> Finding:
    fast_problem, fast_op, fast_variant = Claim.side(claim.faster)
    several = {(m.machine, m.cell.device, m.cell.dtype) for m in index.values()}  # several: labels name them
    fast_cells = [m for m in index.values() if m.cell.problem == fast_problem and m.cell.operator == fast_op
                  and (not fast_variant or m.cell.variant == fast_variant)]
    found: list[tuple[dict, Ratio | None, Sequence[float], Sequence[float]]] = []  # Comparison fields, bootstrap ratio
    for spec in claim.slower:
        slow_problem, slow_op, slow_variant = Claim.side(spec)
        contexts: dict[tuple, dict[str, tuple[Measurement, Measurement]]] = defaultdict(dict)
        for fast in fast_cells:
            c = fast.cell
            slow = index.get(fast.twin_key(problem=slow_problem, operator=slow_op, variant=slow_variant or c.variant))
            if slow is not None:  # a context: one series of sizes, but for the claim's sides
                ctx = (fast.machine, c.device, c.dtype, c.adapter, None if fast_variant else c.variant, c.environment)
                contexts[ctx][c.size] = (fast, slow)
        # The claim is about the largest size measured: contexts timed only at smaller sizes are left out.
        largest = {ctx: max(by_size, key=sort_key) for ctx, by_size in contexts.items()}
        top_size = max(largest.values(), key=sort_key, default=None)
        for ctx, by_size in sorted(contexts.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
            if largest[ctx] != top_size:
                continue
            machine, device, dtype, adapter, variant, environment = ctx
            label = " · ".join(p for p in (adapter, variant, "" if environment == CURRENT else environment) if p)
            if len(several) > 1:
                shared = len({s[:2] for s in several}) > len({s[1] for s in several})  # a device on 2 machines
                label += f", {device} {dtype}" + (f" on machine {machine}" if shared else "")
            ordered = sorted(by_size, key=sort_key)
            if claim.grows and len(ordered) < 2:
                continue
            fast, slow = by_size[ordered[-1]]
            ratio = boot.ratio(sample_key(fast), fast.measured, sample_key(slow), slow.measured)
            point = slow.measured.median / fast.measured.median
            if claim.grows:
                f0, s0 = by_size[ordered[0]]
                r0 = boot.ratio(sample_key(f0), f0.measured, sample_key(s0), s0.measured)
                grew = 0
                if ratio is not None and r0 is not None:
                    grew = 1 if ratio.low > r0.high else -1 if ratio.high < r0.low else 0
                fields: dict[str, Any] = dict(size=f"{ordered[0]} to {ordered[-1]}", grew=grew,
                                              small_ratio=s0.measured.median / f0.measured.median)
            else:
                first = slow.measured.first_call / fast.measured.first_call if claim.first_call and \
                    fast.measured.first_call else None
                fields = dict(size=ordered[-1], first_call_ratio=first)
            found.append((dict(context=label, slower=spec, ratio=point, **fields), ratio, fast.measured.samples,
                          slow.measured.samples))
    tests = judge([(r, a, b) for _, r, a, b in found])
    comparisons = tuple(Comparison(difference=d, **fields) for (fields, *_), d in zip(found, tests))
    return Finding(claim, comparisons)


@dataclass(frozen=True)
class ParallelFinding:
    """A `parallel` claim against the data-parallel series measured here (see the module doc)."""

    claim: Claim
    series: tuple[across_devices.DeviceSeries, ...]  # at the largest size of each, with an efficiency at its most D

    @staticmethod
    def speedup(s: across_devices.DeviceSeries) -> Ratio:
        """The speed-up at the series' most devices, which every series kept here has (`evaluate_parallel`)."""
        speedup = s.most.speedup
        assert speedup is not None, "ParallelFinding keeps only series with a speed-up at their most devices"
        return speedup

    @staticmethod
    def agrees(s: across_devices.DeviceSeries) -> int:
        speedup = ParallelFinding.speedup(s)
        return 1 if speedup.low > 1 else -1 if speedup.high < 1 else 0

    @property
    def verdict(self) -> str:
        if not self.series:
            return NOT_MEASURED
        real = [self.agrees(s) for s in self.series if not s.emulated]
        if not real:
            return NOT_MEASURABLE
        agree, disagree = sum(a > 0 for a in real), sum(a < 0 for a in real)
        if agree == 0 or disagree > agree:
            return CONTRADICTED
        return CONFIRMED if disagree == 0 and 2 * agree >= len(real) else MIXED

    @property
    def measured(self) -> str:
        problem, operator, _ = Claim.side(self.claim.parallel)
        if not self.series:
            return f"no {problem} {operator} cell was timed at D = 1 and D > 1; e.g. adcompare run --problem " \
                   f"{problem} --operator {operator} --devices 1,2,4"
        items = []
        for s in self.series:
            bounds = s.most.efficiency
            assert bounds is not None, "ParallelFinding keeps only series with an efficiency at their most devices"
            efficiency, low, high = bounds
            mark = {1: "", 0: ", not significant", -1: ", slower than 1 device"}[self.agrees(s)]
            device = f"{s.most.devices} emulated {s.first.cell.device}" if s.emulated \
                else f"{s.most.devices} {s.first.cell.device}"
            items.append(f"{_times(self.speedup(s).ratio)} on {device} devices, efficiency {efficiency:.2f} "
                         f"[{low:.2f}–{high:.2f}] ({entry(s.first)} {s.first.cell.dtype} {s.first.cell.size}{mark})")
        text = f"{operator} speed-up T(1) ÷ T(D): " + ", ".join(items)
        emulated = list(dict.fromkeys(s.caveat for s in self.series if s.emulated))
        if emulated:
            text += "; " + "; ".join(emulated)
        checked = [st.measurement for s in self.series for st in s.steps]
        within = sum(m.check is not None and m.check.error is not None and m.check.error <= m.check.tolerance
                     for m in checked)
        return text + f"; within tolerance of the whole batch's float64 reference: {within} of {len(checked)} cells"

    @property
    def text(self) -> str:
        return f"seed {self.claim.seed}: {self.measured}"


def evaluate_parallel(measurements: Sequence[Measurement], claim: Claim, boot: Bootstrap,
                      cores: dict[str, int] | None = None) -> ParallelFinding:
    problem, operator, _ = Claim.side(claim.parallel)
    found = across_devices.series([m for m in measurements if m.cell.problem == problem
                                   and m.cell.operator == operator], cores, boot)
    found = [s for s in found if s.most.efficiency is not None]
    largest: dict[tuple, str] = {}
    for s in found:  # the claim is about the largest size each series of sizes reached
        key = s.first.family
        if key not in largest or sort_key(s.first.cell.size) > sort_key(largest[key]):
            largest[key] = s.first.cell.size
    return ParallelFinding(claim, tuple(s for s in found if s.first.cell.size == largest[s.first.family]))


@dataclass(frozen=True)
class ControlFlowRow:
    """One adapter · variant: the loop as the article writes it and its staged twin, each at its largest size."""

    context: str  # "jax · compiled", plus device/dtype/machine where the results hold several
    compiled: bool  # the variant runs compiled code (as its adapter declares)
    written: Measurement | None
    staged: Measurement | None

    @property
    def written_text(self) -> str:
        return outcome(self.written)

    @property
    def staged_text(self) -> str:
        return outcome(self.staged)

    @property
    def agrees(self) -> int:
        """+1 the loop as written was differentiated and checked eagerly, -1 it failed eagerly, 0 not counted."""
        m = self.written
        if self.compiled or m is None or m.status in NOT_RUN or m.status is Status.UNSUPPORTED:
            return 0
        return 1 if m.status is Status.OK else -1


def outcome(m: Measurement | None) -> str:
    """A cell's outcome in words: its median (and sample count when few), or its status and the reason."""
    if m is None:
        return "not run"
    if timed(m) and m.timing is not None:
        few = f", {len(m.timing.samples)} sample{'s' * (len(m.timing.samples) > 1)}" if m.timing.few_samples else ""
        return f"{seconds(m.timing.median)} ({m.cell.size}{few})"
    reason = expected_reason(m) or m.message.split("\n")[0]
    reason = reason if len(reason) <= 160 else reason[:157] + "…"
    return f"{m.status.value} ({m.cell.size}{': ' + reason if reason else ''})"


@dataclass(frozen=True)
class ControlFlowFinding:
    """A `control_flow` claim against what each adapter · variant did with both forms (see the module doc)."""

    claim: Claim
    rows: tuple[ControlFlowRow, ...]

    @property
    def sides(self) -> tuple[str, str]:
        written, staged = self.claim.control_flow
        return Claim.side(written)[0], Claim.side(staged)[0]

    @property
    def verdict(self) -> str:
        votes = [r.agrees for r in self.rows if r.agrees]
        if not votes:
            return NOT_MEASURED
        agree, disagree = votes.count(1), votes.count(-1)
        if agree == 0 or disagree > agree:
            return CONTRADICTED
        return CONFIRMED if disagree == 0 and 2 * agree >= len(votes) else MIXED

    @property
    def measured(self) -> str:
        written, staged = self.sides
        operator = Claim.side(self.claim.control_flow[0])[1]
        if not self.rows:
            return f"no {written} or {staged} {operator} cell was run; e.g. adcompare run --problem " \
                   f"{written},{staged} --operator {operator}"
        eager = [r for r in self.rows if not r.compiled and r.written is not None]
        differentiated = [r.context for r in eager if r.agrees > 0]
        failed = [f"{r.context}: {outcome(r.written)}" for r in eager if r.agrees < 0]
        parts = [f"{written} {operator} differentiated eagerly by {', '.join(differentiated) or 'none'}"]
        if failed:
            parts.append("failed eagerly in " + "; ".join(failed))
        staged_ok = [f"{r.context} {outcome(r.staged)}" for r in self.rows if r.compiled and r.staged is not None
                     and timed(r.staged)]
        staged_not = [f"{r.context} {outcome(r.staged)}" for r in self.rows if r.compiled and r.staged is not None
                      and not timed(r.staged)]
        written_compiled = [r for r in self.rows if r.compiled and r.written is not None]
        if written_compiled:
            parts.append(f"compiled, {sum(not timed(r.written) for r in written_compiled if r.written)} of "
                         f"{len(written_compiled)} variants fail on the loop as written")
        if staged_ok or staged_not:
            parts.append(f"staged as {staged} (adcompare.while_loop): " + ", ".join(staged_ok + staged_not))
        return "; ".join(parts)

    @property
    def text(self) -> str:
        return f"seed {self.claim.seed}: {self.measured}"


def evaluate_control_flow(measurements: Sequence[Measurement], claim: Claim) -> ControlFlowFinding:
    """Per adapter · variant (and device, dtype where the results hold several), the loop as written and its
    twin, each at the largest size it ran at (a skipped or too-large cell is left out, an unsupported one kept)."""
    (written_problem, written_op, _), (staged_problem, staged_op, _) = (Claim.side(s) for s in claim.control_flow)
    sides = {(written_problem, written_op): 0, (staged_problem, staged_op): 1}
    # unsupported is kept (torch.compile's refusal of the staged loop is part of the story); skipped cells are not
    ms = [m for m in measurements if (m.cell.problem, m.cell.operator) in sides
          and (m.status not in NOT_RUN or m.status is Status.UNSUPPORTED)]
    several = len({(m.machine, m.cell.device, m.cell.dtype) for m in ms}) > 1
    found: dict[tuple, list[Measurement | None]] = defaultdict(lambda: [None, None])
    compiled: dict[tuple, bool] = {}
    for m in ms:
        c = m.cell
        ctx = (c.adapter, c.variant, c.environment, c.device, c.dtype, m.machine)
        side = sides[(c.problem, c.operator)]
        held = found[ctx][side]
        if held is None or sort_key(c.size) > sort_key(held.cell.size):
            found[ctx][side] = m
        compiled[ctx] = m.compiled
    rows = []
    for ctx in sorted(found, key=lambda k: tuple(str(x) for x in k)):
        adapter, variant, environment, device, dtype, machine = ctx
        label = " · ".join(p for p in (adapter, variant, "" if environment == CURRENT else environment) if p)
        if several:
            label += f", {device} {dtype}"
        written, staged = found[ctx]
        if all(m is None or m.status is Status.UNSUPPORTED for m in (written, staged)):
            continue  # a variant that runs neither form (autograd has no compiler) says nothing of control flow
        rows.append(ControlFlowRow(label, compiled[ctx], written, staged))
    return ControlFlowFinding(claim, tuple(rows))


AnyFinding = Finding | ParallelFinding | ControlFlowFinding


def findings(measurements: Sequence[Measurement], boot: Bootstrap | None = None,
             cores: dict[str, int] | None = None) -> list[AnyFinding]:
    """Every claim's finding; `cores`: CPU cores per machine fingerprint (named where devices are emulated)."""
    boot = boot or Bootstrap()
    wanted = {Claim.side(spec)[0] for c in claims() for spec in (c.faster, *c.slower) if spec}
    index = timed_index([m for m in measurements if m.cell.problem in wanted])  # the claims' problems only
    return [evaluate_parallel(measurements, c, boot, cores) if c.parallel
            else evaluate_control_flow(measurements, c) if c.control_flow else evaluate(index, c, boot)
            for c in claims()]


def top(found: Sequence[AnyFinding]) -> list[AnyFinding]:
    """The findings worth a line in the terminal: every measured one, contradicted first."""
    order = {CONTRADICTED: 0, MIXED: 1, CONFIRMED: 2, NOT_MEASURABLE: 3}
    return sorted((f for f in found if f.verdict != NOT_MEASURED), key=lambda f: (order[f.verdict], f.claim.seed))

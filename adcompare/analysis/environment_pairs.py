"""The same cell across the environments of one run (`run --env A --env B`, the A/B gate): each cell of the
baseline environment paired with the same cell in every other environment, its timing decided on paired rounds
(comparison.differences, `paired=True`: the runner timed each cell's environments in lockstep, so round r of
both sides saw the same moments of the machine's load) and its derivative values compared by their seeded projections.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adcompare.analysis.comparison import ComparisonRow, differences, medians
from adcompare.analysis.significance import NOISE
from adcompare.model.cell import CURRENT, Cell
from adcompare.model.errors import UsageError
from adcompare.model.measurement import Measurement
from adcompare.model.status import NOT_RUN
from adcompare.store.results import Results
from adcompare.verify.check import scaled_error


@dataclass(frozen=True)
class EnvironmentPair:
    """One cell run in the baseline environment and in another: timing ratio and derivative agreement."""

    baseline: Measurement
    candidate: Measurement
    timing: ComparisonRow | None  # None when a side was not timed (failed, unsupported, check only)

    @property
    def cell(self) -> Cell:
        """The cell both sides ran, named without an environment."""
        return replace(self.baseline.cell, environment=CURRENT)

    @property
    def projection_error(self) -> float | None:
        """Scaled difference of the two cells' seeded projections (check.py); None when a side has none, or when
        they weigh the result differently (a per-example cell recorded before schema 4 beside a later one)."""
        a, b = self.baseline.check, self.candidate.check
        if a is None or b is None or a.projection is None or b.projection is None \
                or a.projection_weights != b.projection_weights:
            return None
        return scaled_error(a.projection, b.projection)

    @property
    def values_agree(self) -> bool | None:
        a, b, error = self.baseline.check, self.candidate.check, self.projection_error
        if a is None or b is None or error is None:  # a projection error means both sides have a check
            return None
        return error <= max(a.tolerance, b.tolerance)

    @property
    def verdict(self) -> str:
        return self.timing.verdict if self.timing else "not timed in both"

    @property
    def changed_versions(self) -> tuple[dict[str, str], dict[str, str]]:
        """The framework versions that differ between the two sides (what the comparison is about)."""
        b, c = self.baseline.versions, self.candidate.versions
        names = sorted(n for n in {*b, *c} if b.get(n) != c.get(n))
        return {n: b.get(n, "absent") for n in names}, {n: c.get(n, "absent") for n in names}

    def to_json(self) -> dict:
        b, c = self.baseline, self.candidate
        timing = self.timing.to_json() if self.timing else {}
        timing.pop("cell", None)
        timing.pop("key", None)
        return {"cell": self.cell.to_json(), "baseline_environment": b.cell.environment,
                "candidate_environment": c.cell.environment, "baseline_versions": b.versions,
                "candidate_versions": c.versions, "baseline_status": b.status.value,
                "candidate_status": c.status.value, **timing, "verdict": self.verdict,
                "projection_error": self.projection_error, "values_agree": self.values_agree}


def environment_order(results: Results, named: Sequence[str] = ()) -> list[str]:
    """Environments in the order the run named them (`--env`: `named`, or the files' headers), then any others in
    order of appearance."""
    named = [*named, *(n for prov in results.provenance for n in prov.environments)]
    return list(dict.fromkeys([*named, *(m.cell.environment for m in results.measurements)]))


def pair_environments(results: Results, baseline: str | None = None, threshold: float = NOISE,
                      named: Sequence[str] = ()) -> list[EnvironmentPair]:
    """Every cell of the baseline environment (default: the first, in the order `named` or the headers give)
    paired with the same cell — same problem, size, operator, adapter, variant, device and dtype — in each other
    environment, on one results set."""
    order = environment_order(results, named)
    if baseline is not None and baseline not in order:
        raise UsageError(f"--baseline-environment {baseline!r} is not in the results; environments: "
                         f"{', '.join(order)}")
    if not order:  # no measurements
        return []
    baseline = baseline or order[0]
    groups: dict[tuple, dict[str, Measurement]] = defaultdict(dict)
    for m in results.measurements:
        groups[m.cell.across_environments][m.cell.environment] = m
    matched = []
    for group in groups.values():
        base = group.get(baseline)
        for name, other in group.items():
            if base is None or name == baseline or {base.status, other.status} <= NOT_RUN:
                continue
            matched.append((base, other))
    matched.sort(key=lambda p: (order.index(p[1].cell.environment), p[1].cell))
    # The timed pairs are decided round by round where both have rounds (the runner timed each cell's
    # environments in lockstep), else within run as a two-file compare (one Holm family); never against a run-wide
    # shift: both environments ran under one load, so a shift is the release's.
    timed = [(a, b) for a, b in matched if a.timing and a.timing.samples and b.timing and b.timing.samples]
    rows = {id(b): ComparisonRow(b.cell, *medians(a, b), d)
            for (a, b), d in zip(timed, differences(timed, threshold, against_shift=False, paired=True))}
    return [EnvironmentPair(a, b, rows.get(id(b))) for a, b in matched]


@dataclass(frozen=True)
class Confirmation:
    """`run --confirm PCT`: given every cell's record after the last round, the keys of the cells that
    `compare RUN --fail-above PCT` would flag (either direction, each environment against the first), in every
    environment — to be timed in as many rounds again. Decided on the run's own cells (with --resume: those it
    runs), as compare of them alone would."""

    threshold: float  # a fraction: 0.1 for --confirm 10
    environments: tuple[str, ...]  # as --env named them; the first is the baseline

    @classmethod
    def asked(cls, percent: float | None, rounds: int, environments: Sequence[str]) -> Confirmation | None:
        """The confirmation `--confirm percent` asks for, None without it; refused where it cannot decide."""
        if percent is None:
            return None
        if rounds < 2 or len(environments) < 2:
            raise UsageError("--confirm decides between the environments of an A/B run: add --rounds 3 and two "
                             "--env (e.g. --env base=@OLD_PYTHON --env current), or drop --confirm")
        return cls(percent / 100, tuple(environments))

    def __call__(self, measurements: Sequence[Measurement]) -> set[str]:
        pairs = pair_environments(Results((), tuple(measurements)), threshold=self.threshold,
                                  named=self.environments)
        cells = {p.cell.across_environments for p in pairs if p.timing and p.timing.difference.significant}
        return {m.cell.key for m in measurements if m.cell.across_environments in cells}  # in every environment

"""Measurements finished once: cross-checked across cells (pairwise agreement, the adjoint identity; check.py),
then labelled where they failed as a known limitation (expectations.py).

Applied where measurements are made — the end of a run session (run/session.py) — and where a results file is
loaded (store/results.load); nothing downstream re-checks or relabels. Both steps are derived from what the
records hold (the projections, the versions), so finishing a finished set changes nothing. Labels come after the
cross-check because a cell it turns into a mismatch may be a known one (torch.compile's ht jacrev).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from adcompare.model.measurement import Measurement
from adcompare.model.problem import Problem
from adcompare.verify.check import cross_check
from adcompare.verify.expectations import labelled


def finished(measurements: Sequence[Measurement], problems: Mapping[str, Problem]) -> list[Measurement]:
    return [labelled(m, problems) for m in cross_check(measurements)]

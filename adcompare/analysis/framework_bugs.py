"""The report's "Framework bugs found": each bug of `expectations.FRAMEWORK_BUGS` (what goes wrong, the versions
verified to have it, the workaround, the reproducer, the upstream issue) with how many of this run's cells met
it, and the link from a failure row to the reproducer.

Finding real framework bugs is part of what a harness like this is for, so they are listed even when no cell of
this run met them (a fixed release, or the cell not run): the count says which. A cell counts when it is labelled
with the bug (`expectations.labelled`, applied by `adcompare report`), i.e. it failed as the bug predicts on a
version listed as affected.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from adcompare.model.measurement import Measurement
from adcompare.verify.expectations import FRAMEWORK_BUGS, FrameworkBug, expected_reason, expected_reproducer

REPOSITORY = Path(__file__).resolve().parents[2]  # a source checkout holds docs/framework-bugs/ here


@dataclass(frozen=True)
class FoundBug:
    bug: FrameworkBug
    framework: str  # the adapter whose cells meet it
    where: str  # the cells it is recorded for: problem · operator · variant · device · dtypes · sizes
    cells: int  # cells of these results labelled with it
    reproducer: Path | None  # the reproducer's file in the source checkout; None when the docs are not beside it

    @property
    def versions(self) -> str:
        return f"{self.bug.distribution} {', '.join(self.bug.affected_versions)}"


def reproducer_file(path: str) -> Path | None:
    """A reproducer's file in the source checkout (the report links to it, relative to its folder), or None (an
    installed wheel ships no docs/: the page then shows the repository path as text)."""
    target = REPOSITORY / path
    return target if target.is_file() else None


def found(measurements: Iterable[Measurement]) -> list[FoundBug]:
    """Every recorded framework bug, with the count of measured cells labelled with it."""
    labels = [(expected_reason(m), expected_reproducer(m)) for m in measurements]
    out = []
    for (adapter, problem, operator, variant, device), bug in FRAMEWORK_BUGS.items():
        where = " · ".join([problem, operator, variant, device, "/".join(bug.dtypes), "/".join(bug.sizes)])
        cells = sum(1 for reason, path in labels if reason == bug.reason and path == bug.reproducer)
        out.append(FoundBug(bug, adapter, where.replace("*", "any"), cells, reproducer_file(bug.reproducer)))
    return out

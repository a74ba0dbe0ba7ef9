"""Named suites. `quick` is an explicit list of small cells covering every operator family and adapter; `full`
is every size of every problem.

The quick suite keeps slow variants (an adapter's `slow_variants`, e.g. torch.compile at ~16 s per cold compile)
to the few cells listed with them explicitly. A problem the quick suite does not list (a plugin's, say) runs at its
smallest size.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cell import Cell


@dataclass(frozen=True)
class SuiteEntry:
    problem: str
    sizes: tuple[str, ...]
    operators: tuple[str, ...] | None = None  # None: every applicable operator
    slow_variants: tuple[str, ...] = ()  # operators for which slow variants run too

    def allows(self, cell: Cell, slow: bool) -> bool:
        if cell.problem != self.problem or cell.size not in self.sizes:
            return False
        if self.operators is not None and cell.operator not in self.operators:
            return False
        return not slow or cell.operator in self.slow_variants


QUICK: tuple[SuiteEntry, ...] = (
    SuiteEntry("f_r2_r3", ("n2",)),
    SuiteEntry("exp_dot_loss", ("n100",), slow_variants=("grad", "jacrev")),
    SuiteEntry("linear_layer", ("n5-p8-o2",)),
)

SUITES = ("quick", "full")


def quick_allows(cell: Cell, *, smallest_size: str, slow: bool) -> bool:
    entries = [e for e in QUICK if e.problem == cell.problem]
    if not entries:
        return cell.size == smallest_size and not slow
    return any(e.allows(cell, slow) for e in entries)

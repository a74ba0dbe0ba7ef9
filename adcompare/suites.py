"""Named suites. `quick` is an explicit list of small cells covering every operator family and adapter; `full`
is every size of every problem.

The quick suite runs float32 unless dtypes are asked for, keeps slow variants (an adapter's `slow_variants`, e.g.
torch.compile at ~7–16 s per cold compile) to the operators listed with them, and leaves out built-in problems it
does not list. A problem from a plugin that the suite does not list runs at its smallest size.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cell import Cell

QUICK_DTYPES = ("float32",)


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
    SuiteEntry("f_xy", ("n2",), ("hessian",)),
    SuiteEntry("f_r2_r3", ("n2",), ("jacfwd", "jacrev")),
    SuiteEntry("exp_dot_loss", ("n100",), ("value", "grad", "jvp", "vjp", "jacfwd", "jacrev", "hvp"),
               slow_variants=("grad", "jacrev")),
    SuiteEntry("linear_layer", ("n5-p8-o2",), ("jacrev", "vmap_jacrev")),
    SuiteEntry("linear_layer_rowsum", ("n5-p8-o2",), ("vmap_grad",)),
    SuiteEntry("tanh", ("n100",), ("jvp", "vjp")),
    SuiteEntry("control_loop", ("n100",), ("grad",), slow_variants=("grad",)),
    SuiteEntry("control_loop_static", ("n100",), ("grad",)),
    SuiteEntry("rbf_kernel_map", ("n100",), ("vmap_jacfwd",)),
    SuiteEntry("selu", ("n100",), ("value",)),
    SuiteEntry("gmm", ("d2-K5-n1000",), ("grad",)),
)

SUITES = ("quick", "full")


def quick_allows(cell: Cell, *, smallest_size: str, slow: bool, builtin: bool) -> bool:
    entries = [e for e in QUICK if e.problem == cell.problem]
    if not entries:
        return not builtin and cell.size == smallest_size and not slow
    return any(e.allows(cell, slow) for e in entries)

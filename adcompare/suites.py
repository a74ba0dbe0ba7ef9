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
SCALING_N = ("n10", "n100", "n1000", "n10000")
P_SWEEP = ("n5-p8-o2", "n5-p64-o2", "n5-p512-o2")
RBF_N = ("n10", "n100", "n1000")
SWEEP = ("jax:compiled", "tensorflow:compiled", "torch:eager", "autograd:eager")  # the pairs timed at every size


@dataclass(frozen=True)
class SuiteEntry:
    problem: str
    sizes: tuple[str, ...]
    operators: tuple[str, ...] | None = None  # None: every applicable operator
    slow_variants: tuple[str, ...] = ()  # operators for which slow variants run too
    slow_sizes: tuple[str, ...] | None = None  # sizes at which they run (None: every size of the entry)
    sweep: tuple[str, ...] | None = None  # "adapter:variant" pairs that run every size (None: every pair) …
    others_at: tuple[str, ...] = ()  # … and the sizes at which the other pairs run

    def allows(self, cell: Cell, slow: bool) -> bool:
        if cell.problem != self.problem or cell.size not in self.sizes:
            return False
        if self.operators is not None and cell.operator not in self.operators:
            return False
        if slow and self.slow_sizes is not None and cell.size not in self.slow_sizes:
            return False
        if self.sweep is not None and f"{cell.adapter}:{cell.variant}" not in self.sweep \
                and cell.size not in self.others_at:
            return False
        return not slow or cell.operator in self.slow_variants


QUICK: tuple[SuiteEntry, ...] = (
    SuiteEntry("f_xy", ("n2",), ("hessian",)),
    SuiteEntry("f_r2_r3", ("n2",), ("jacfwd", "jacrev")),
    SuiteEntry("exp_dot_loss", ("n100",), ("value", "grad", "jvp", "vjp", "hvp"), slow_variants=("grad",)),
    # Scaling: seed 001's forward vs reverse over n = 10 … 10⁴ in the compiled variants, torch.func and autograd;
    # torch.compile (7–16 s a cold compile) and the eager tracers of JAX and TensorFlow at one size.
    SuiteEntry("exp_dot_loss", SCALING_N, ("jacfwd", "jacrev"), slow_variants=("jacrev",), slow_sizes=("n100",),
               sweep=SWEEP, others_at=("n100",)),
    # Seed 000's linear layer over a p sweep, every operator the article timed.
    SuiteEntry("linear_layer", P_SWEEP, ("jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev"), sweep=SWEEP,
               others_at=P_SWEEP[:1]),
    SuiteEntry("linear_layer_rowsum", P_SWEEP, ("vmap_grad",), sweep=SWEEP, others_at=P_SWEEP[:1]),
    # Seed 002's RBF kernel: the Jacobian at one point and mapped over all points, forward vs reverse. Reverse
    # over the map needs n² VJPs: too large at n = 1000, and a Python loop of them (autograd) only at n = 10.
    SuiteEntry("rbf_kernel_point", RBF_N, ("jacfwd", "jacrev"), sweep=SWEEP, others_at=("n100",)),
    SuiteEntry("rbf_kernel_map", RBF_N, ("vmap_jacfwd",), sweep=SWEEP, others_at=("n100",)),
    SuiteEntry("rbf_kernel_map", RBF_N[:2], ("vmap_jacrev",), sweep=SWEEP[:-1], others_at=("n10",)),
    SuiteEntry("tanh", ("n100",), ("jvp", "vjp")),
    SuiteEntry("control_loop", ("n100",), ("grad",), slow_variants=("grad",)),
    SuiteEntry("control_loop_static", ("n100",), ("grad",)),
    SuiteEntry("selu", ("n100",), ("value",)),
    SuiteEntry("gmm", ("d2-K5-n1000",), ("grad",)),
)

SUITES = ("quick", "full")


def quick_allows(cell: Cell, *, smallest_size: str, slow: bool, builtin: bool) -> bool:
    entries = [e for e in QUICK if e.problem == cell.problem]
    if not entries:
        return not builtin and cell.size == smallest_size and not slow
    return any(e.allows(cell, slow) for e in entries)

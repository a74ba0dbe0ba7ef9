"""Named suites. `quick` is an explicit list of small cells covering every operator family and adapter; `full`
is every size of every problem; `adbench` is ADBench's published benchmarks (GMM, BA, LSTM, HT at the sizes and with
the operators of ADBench's plots, float64, every variant), whose cells compare with ADBench's and GradBench's;
`gradbench` is GradBench's evals at its eval scripts' default sizes with the functions they ask for, float64.

The quick suite runs float32 unless dtypes are asked for, keeps slow variants (an adapter's `slow_variants`, e.g.
torch.compile at ~7–16 s per cold compile) to the operators listed with them, and leaves out built-in problems it
does not list. A problem from a plugin that the suite does not list runs at its smallest size (quick) or not at
all (adbench). Sizes are matched on their dimensions, so `--seed` keeps a suite's cells. A size read from an input
file (`--inputs`) was chosen explicitly, like `--size`: every suite runs it with every operator and variant, except
`adbench` and `gradbench`, which keep to their operators.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from adcompare.model.cell import Cell
from adcompare.model.operators import OPERATORS
from adcompare.model.problem import Size, grid

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
    slow_dtypes: tuple[str, ...] | None = None  # dtypes in which they run (None: every dtype)
    float64_at: tuple[str, ...] | None = None  # sizes at which float64 runs (None: every size)
    sweep: tuple[str, ...] | None = None  # "adapter:variant" pairs that run every size (None: every pair) …
    others_at: tuple[str, ...] = ()  # … and the sizes at which the other pairs run
    devices: tuple[int, ...] = (1,)  # device counts of its data-parallel cells unless --devices names them
    host_devices: tuple[int, ...] | None = None  # … on the CPU, where D > 1 are emulated (None: `devices`)
    timeout: float | None = None  # seconds per cell where its calls take minutes (None: --timeout's default)

    def allows(self, cell: Cell, size: Size, slow: bool, devices_chosen: bool = False) -> bool:
        label = size.dims_label  # a seeded size matches its dimensions; a file-fed one (size.source) every entry size
        if cell.problem != self.problem or not (size.source or label in self.sizes):
            return False
        counts = self.host_devices if cell.device == "cpu" and self.host_devices is not None else self.devices
        if not devices_chosen and cell.devices not in counts:
            return False
        if self.operators is not None and cell.operator not in self.operators:
            return False
        if slow and self.slow_sizes is not None and label not in self.slow_sizes:
            return False
        if slow and self.slow_dtypes is not None and cell.dtype not in self.slow_dtypes:
            return False
        if cell.dtype == "float64" and self.float64_at is not None and label not in self.float64_at:
            return False
        if self.sweep is not None and f"{cell.adapter}:{cell.variant}" not in self.sweep \
                and label not in self.others_at:
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
    # seed 001's loop staged (adcompare.while_loop): what each compiler does with it, torch.compile's refusal too
    SuiteEntry("control_loop_while", ("n100",), ("grad",), slow_variants=("grad",)),
    SuiteEntry("selu", ("n100",), ("value",)),
    SuiteEntry("gmm", ("d2-K5-n1000",), ("grad",)),
    # Seed 004's pmap: the MLP's mean-loss gradient with its batch of 16 split across 1, 2 and 4 devices; on the
    # CPU across 1 and 4, where both 2 and 4 are emulated devices sharing its cores (overhead and correctness, not
    # speed-up) and the finding reads the largest D: D = 2 cost `adcompare report` three worker starts and 11 s.
    SuiteEntry("mlp_loss", ("B16-h16",), ("pmap_grad",), devices=(1, 2, 4), host_devices=(1, 4)),
    # GradBench's cmpad-derived evals at their smallest default size: its `gradient`, a few ms each.
    SuiteEntry("lse", ("n2500",), ("grad",)),
    SuiteEntry("llsq", ("n16-m128",), ("grad",)),
    SuiteEntry("det", ("ell5",), ("grad",)),
    SuiteEntry("ode", ("n1000-s1",), ("grad",)),
    SuiteEntry("kmeans", ("k10-n1000-d8",), ("newton_dir",)),  # GradBench's `dir`: forward over reverse
)

# The full suite: every built-in problem at three or more sizes spanning two decades or more (every size where it
# declares fewer), every applicable operator, every adapter and variant, float32 and float64, sized to run end to
# end in under an hour on a 2-core CPU (benchmarks/results/full/). Operators whose cost grows with a dimension
# (a full Jacobian by forward mode of a wide function, a Hessian, reverse mode over many outputs) keep to the
# sizes where they take seconds, while their family (jacobian, second-order, per-example) reaches the larger ones
# through the cheap member; slow variants (torch.compile) run every operator at the smallest size in float32;
# compilers that unroll LSTM's loop over c stop below the largest c. Scaling is timed in float32; float64 runs each
# entry at one size (the middle one), every adapter and variant, which says what the dtype costs without doubling
# the hour.
# ADBench's own grids are the `adbench` suite.
SCALAR = ("value", "grad", "jvp", "vjp", "hvp", "jacrev")  # a scalar-output problem's cheap operators
WIDE = ("hessian", "jacfwd")  # n tangents or n HVPs on a scalar-output problem
ELEMENTWISE = ("value", "jvp", "vjp")
VECTORISED = ("jax:eager", "jax:compiled", "tensorflow:eager", "tensorflow:graph", "tensorflow:compiled",
              "torch:eager", "torch:compiled")  # pairs whose per-example operators are vectorised (not a loop)
CHEAP_LSTM = ("torch:eager", "torch:eager-autograd", "autograd:eager", "jax:compiled", "tensorflow:graph",
              "tensorflow:compiled")  # ~10 µs an operation eagerly, or a loop compiled once


def _full(problem: str, sizes: tuple[str, ...], operators: tuple[str, ...] | None = None, **rules) -> SuiteEntry:
    """An entry of the full suite: slow variants at the smallest size in float32, float64 at the middle size."""
    middle = sizes[(len(sizes) - 1) // 2]
    return SuiteEntry(problem, sizes, operators, slow_variants=operators or tuple(OPERATORS), slow_sizes=sizes[:1],
                      slow_dtypes=("float32",), float64_at=(middle,), **rules)


SMALL = ("n2",)
HT_FULL = ("hand1-c100-corners1-v544", "hand3-c200-corners3-v544", "hand6-c1600-corners3-v544")
SEED_N = ("n10", "n100", "n1000", "n10000")
FULL: tuple[SuiteEntry, ...] = (
    _full("f_xy", SMALL), _full("g_xy", SMALL), _full("f_r2_r3", SMALL),
    # Seed 001's forward against reverse mode to n = 10⁴; the other operators to n = 1000.
    _full("exp_dot_loss", SEED_N, ("jacfwd", "jacrev")), _full("exp_dot_loss", SEED_N[:3], SCALAR[:-1]),
    _full("exp_dot_loss", SEED_N[:2], ("hessian",)),
    _full("control_loop", SEED_N[:3], SCALAR), _full("control_loop", SEED_N[:2], WIDE),
    _full("control_loop_static", SEED_N[:3], SCALAR), _full("control_loop_static", SEED_N[:2], WIDE),
    _full("control_loop_while", SEED_N[:3], SCALAR), _full("control_loop_while", SEED_N[:2], WIDE),
    _full("rbf_kernel_point", SEED_N, ("jacfwd",)), _full("rbf_kernel_point", SEED_N[:3], ("value", "jvp", "vjp")),
    _full("rbf_kernel_point", SEED_N[:3], ("jacrev",)),
    _full("rbf_kernel_map", SEED_N[:3], ("value", "jvp", "vjp", "jacfwd", "vmap_jacfwd")),
    _full("rbf_kernel_map", SEED_N[:2], ("vmap_jacrev",)), _full("rbf_kernel_map", SEED_N[:1], ("jacrev",)),  # n² VJPs
    _full("linear_layer", ("n5-p8-o2", "n5-p64-o2", "n5-p512-o5")),
    _full("linear_layer_rowsum", ("n5-p8-o2", "n5-p64-o2", "n5-p512-o5")),
    # A dense n × n Jacobian at n = 10⁴ is 10⁸ elements (20–40 s a cell eagerly): Jacobians stop at n = 1000.
    _full("tanh", ("n100", "n10000", "n1000000"), ELEMENTWISE),
    _full("tanh", ("n10", "n100", "n1000"), ("jacfwd", "jacrev")),
    _full("selu", ("n100", "n10000", "n1000000"), ELEMENTWISE),
    _full("selu", ("n10", "n100", "n1000"), ("jacfwd", "jacrev")),
    _full("mlp_predict", ("B16-h4", "B16-h16", "B16-h64", "B16-h256"),
          ("value", "jvp", "vjp", "vmap_jacfwd", "vmap_jacrev")),
    _full("mlp_predict", ("B16-h4", "B16-h16", "B16-h64"), ("jacfwd", "jacrev")),
    _full("mlp_loss", ("B16-h4", "B16-h16", "B16-h64", "B16-h256"), ("value", "jvp", "vjp", "vmap_grad")),
    _full("mlp_loss", ("B16-h4", "B16-h16", "B16-h64"), ("jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev")),
    # Seed 004's pmap: the data-parallel gradient over 1, 2 and 4 devices, the per-example values on one.
    _full("mlp_loss", ("B16-h4", "B16-h16", "B16-h64", "B16-h256"), ("pmap_grad",), devices=(1, 2, 4)),
    _full("mlp_loss", ("B16-h4", "B16-h16", "B16-h64", "B16-h256"), ("pmap_value",)),
    _full("mlp_predict", ("B16-h4", "B16-h16", "B16-h64", "B16-h256"), ("pmap_value",)),
    _full("gmm", ("d2-K5-n1000", "d10-K5-n1000", "d10-K50-n1000"), SCALAR),
    _full("gmm", ("d2-K5-n1000", "d10-K5-n1000"), WIDE),
    _full("gmm_posterior", ("d2-K5-n1000", "d10-K5-n1000", "d10-K50-n1000"), SCALAR),
    _full("gmm_posterior", ("d2-K5-n1000", "d10-K5-n1000"), WIDE),
    _full("bundle_adjustment", ("n3-m10-p30", "n5-m50-p300", "n10-m200-p3000"), ("value", "jvp", "vjp")),
    # TensorFlow's eager Jacobians re-trace pfor on every call: 1–5 s a call whatever p; at the smallest p only.
    _full("bundle_adjustment", ("n3-m10-p30", "n5-m50-p300", "n10-m200-p3000"), ("jacfwd",),
          sweep=tuple(p for p in VECTORISED + ("autograd:eager", "torch:eager-autograd") if p != "tensorflow:eager"),
          others_at=("n3-m10-p30",)),
    # autograd has no vmap: its per-example Jacobians are a Python loop, 5.4 s a call at p = 300 (p = 3000: ~1 min).
    _full("bundle_adjustment", ("n3-m10-p30", "n5-m50-p300", "n10-m200-p3000"), ("vmap_jacfwd", "vmap_jacrev"),
          sweep=tuple(p for p in VECTORISED if p != "tensorflow:eager"), others_at=("n3-m10-p30",)),
    _full("bundle_adjustment", ("n3-m10-p30", "n5-m50-p300"), ("jacrev",)),  # 3p reverse passes
    # JAX's eager grad at c = 800 takes 15 s a call, and torch.compile unrolls the loop over c (adcompare.fold is a
    # lax.scan or tf.while_loop for the other compilers): c = 800 runs where that costs little, the rest stop at 80.
    _full("lstm", ("l1-c8-b14", "l1-c80-b14", "l1-c800-b14"), ("value", "grad"), sweep=CHEAP_LSTM,
          others_at=("l1-c8-b14", "l1-c80-b14")),
    _full("lstm", ("l1-c8-b14",), ("jvp", "vjp")),  # JAX eager: 3–10 s a call at c = 80
    # GradBench's cmpad-derived evals at its own default sizes, primal and gradient as GradBench times them.
    _full("lse", ("n2500", "n40000", "n320000")),
    _full("llsq", ("n16-m128", "n256-m128", "n4096-m128")),
    # det's recursion is ~e·ℓ! scalar operations (ℓ = 8: 1.1·10⁵), each dispatched eagerly and traced by every
    # compiler: ℓ = 8 only where one operation costs ~10 µs and nothing is traced, the others stop at ℓ = 6.
    _full("det", ("ell5", "ell6", "ell8"), sweep=("torch:eager", "autograd:eager"), others_at=("ell5", "ell6")),
    _full("ode", ("n1000-s1", "n1000-s10", "n100000-s10")),
    # k·d from 80 to 16,000 centroid coordinates, n·k·d from 8·10⁴ to 1.6·10⁸ distance terms.
    _full("kmeans", ("k10-n1000-d8", "k100-n1000-d16", "k1000-n10000-d16")),
    # ht's dense Jacobian from R^26 → R^300 (simple) to R^3226 → R^4800 (complicated, c = 1,600: 2 decades of
    # inputs), on the small model (544 vertices): the big model's 10,000 are --suite adbench's and gradbench's.
    # TensorFlow's eager Jacobians re-trace pfor on every call (9–12 s a call at c = 100) and autograd's are a
    # Python loop of 2c + 26 passes (~2 s at c = 100): at c = 1,600 the vectorised pairs only.
    _full("ht", HT_FULL, ("value",)),
    _full("ht", HT_FULL, ("jacfwd", "jacrev"), others_at=HT_FULL[:2],
          sweep=tuple(p for p in VECTORISED + ("torch:eager-autograd",) if p != "tensorflow:eager")),
)

# ADBench's published sizes (its data/ folder: gmm/1k and gmm/10k, ba/ba1-ba20, lstm/lstm_l{2,4}_c{1024,4096}) and
# the operators its tools time: objective and gradient; for BA the objective and the p dense 3 × 15 Jacobian
# blocks. gmm_posterior is GradBench's gmm at GradBench's default grid (d and K as ADBench's but K ≤ 100, n = 1000).
def _labels(**axes) -> tuple[str, ...]:
    return tuple("-".join(f"{k}{v}" for k, v in dims.items()) for dims in grid(**axes))


ADBENCH_BA = ((49, 7776, 31843), (21, 11315, 36455), (161, 48126, 182072), (372, 47423, 204472),
              (257, 65132, 225911), (539, 65220, 277273), (93, 61203, 287451), (88, 64298, 383937),
              (810, 88814, 393775), (1197, 126327, 563734), (1723, 156502, 678718), (253, 163691, 899155),
              (245, 198739, 1091386), (356, 226730, 1255268), (1102, 780462, 4052340), (1544, 942409, 4750193),
              (1778, 993923, 5001946), (1936, 649673, 5213733), (4585, 1324582, 9125125),
              (13682, 4456117, 28987644))  # ba1 … ba20 as (n, m, p), from each file's header (not its name)
HT_SHIPPED = tuple(f"hand{h}-c{c}-corners{corners}-v{v}" for corners in (1, 3) for v in (544, 10_000)
                   for h, c in ((1, 100), (2, 192), (3, 200), (4, 400), (5, 800), (6, 1600)))
ADBENCH: tuple[SuiteEntry, ...] = (
    SuiteEntry("gmm", _labels(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100, 200], n=[1_000, 10_000]),
               ("value", "grad"), slow_variants=("value", "grad")),
    SuiteEntry("gmm_posterior", _labels(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100], n=[1_000]),
               ("value", "grad"), slow_variants=("value", "grad")),
    SuiteEntry("bundle_adjustment", tuple(f"n{n}-m{m}-p{p}" for n, m, p in ADBENCH_BA),
               ("value", "vmap_jacfwd", "vmap_jacrev"), slow_variants=("value", "vmap_jacfwd", "vmap_jacrev")),
    SuiteEntry("lstm", _labels(l=[2, 4], c=[1024, 4096], b=[14]), ("value", "grad"),
               slow_variants=("value", "grad")),
    # hand tracking, simple and complicated on the small and big models (ADBench's four data/hand folders), its
    # objective and dense Jacobian, at the hand files adcompare ships (hand1–hand6); hand7–12 with --inputs
    SuiteEntry("ht", HT_SHIPPED, ("value", "jacfwd", "jacrev"), slow_variants=("value", "jacfwd", "jacrev")),
)

# GradBench (gradbench/gradbench at f26651a, python/gradbench/gradbench/evals/<eval>/run.py): each eval script's
# default sizes and the functions it asks a tool for — the objective (`value`) and its `gradient`/`jacobian`. An
# eval here is the problem that reproduces it; a size GradBench runs that the problem does not declare (lstm's l = 6
# and c = 8192) is not planned, and an eval whose problem is not registered plans nothing.
# Sizes are matched on their dimensions in any order, so a problem may name its axes in its own order.
# The nested evals' cells' timeout (when --timeout is not given): a call takes 0.1 ms to 0.2 s staged, 10–100 s in
# autograd and torch eager on this 2-core machine (saddle rr: autograd 11–17 s, torch 42 s a call under load 4;
# torch ff ~100 s), and minutes in JAX and TensorFlow eager. A slow cell is timed one call per sample after its
# checked first call until its deadline (run/timing.py rule 7), so 600 s gives a call of up to ~140 s the three
# samples an interval needs (FEW_SAMPLES) and one of up to ~75 s all seven; a longer call keeps the calls that fit
# (a few-sample measurement, marked) or is a timeout with its lower bound. The default 300 s gave torch's ff one
# sample at most and its rr one or two.
NESTED_TIMEOUT = 600.0
GRADBENCH_LSTM = _labels(l=[2, 4, 6], c=[1024, 4096, 8192], b=[14])  # b: ADBench's 14-bit characters
GRADBENCH: tuple[SuiteEntry, ...] = (
    SuiteEntry("gmm_posterior", _labels(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100], n=[1_000]),
               ("value", "grad"), slow_variants=("value", "grad")),  # objective, jacobian (-d, -k, -n defaults)
    # --min 1 --max 14: ba1 … ba14; its jacobian is the sparse one: a dense 3 × 15 block per observation
    SuiteEntry("bundle_adjustment", tuple(f"n{n}-m{m}-p{p}" for n, m, p in ADBENCH_BA[:14]),
               ("value", "vmap_jacfwd", "vmap_jacrev"), slow_variants=("value", "vmap_jacfwd", "vmap_jacrev")),
    SuiteEntry("lstm", GRADBENCH_LSTM, ("value", "grad"), slow_variants=("value", "grad")),
    SuiteEntry("lse", _labels(n=[2_500 * 2 ** k for k in range(10)]), ("value", "grad"),
               slow_variants=("value", "grad")),  # primal, gradient
    SuiteEntry("llsq", _labels(n=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392], m=[128]),
               ("value", "grad"), slow_variants=("value", "grad")),  # 8196, 16392 as GradBench writes them
    SuiteEntry("det", _labels(ell=range(5, 12)), ("value", "grad"), slow_variants=("value", "grad")),
    SuiteEntry("ode", _labels(n=[1_000, 10_000, 100_000], s=[1, 10, 100]), ("value", "grad"),
               slow_variants=("value", "grad")),
    # cost and dir: every operator the problem declares, whichever its name for GradBench's dir (J·H⁻¹)
    SuiteEntry("kmeans", _labels(k=[10, 100, 1000], n=[1_000, 10_000], d=[8, 16]), None,
               slow_variants=tuple(OPERATORS)),
    # complicated, big model, hand1 … hand12 (run.py's defaults): the six that ship; objective and jacobian
    SuiteEntry("ht", tuple(label for label in HT_SHIPPED if label.endswith("-corners3-v10000")),
               ("value", "jacfwd", "jacrev"), slow_variants=("value", "jacfwd", "jacrev")),
    # GradBench's four functions ff, fr, rf, rr as the nested_* operators, at its one input each
    SuiteEntry("saddle", ("d2",), None, slow_variants=tuple(OPERATORS), timeout=NESTED_TIMEOUT),
    SuiteEntry("particle", ("d1",), None, slow_variants=tuple(OPERATORS), timeout=NESTED_TIMEOUT),
)
GRADBENCH_EVALS = {entry.problem: entry for entry in GRADBENCH}  # problem → its GradBench eval's entry
# Built-in problems `full` leaves out, with why: each call is minutes of op-by-op scalar work at the one input
# GradBench defines (no size to shrink), so their cells would time out and add hours; `gradbench` runs them.
FULL_LEAVES_OUT = {
    "saddle": "GradBench's nested saddle eval: minutes a call in eager frameworks (24,335 inner gradients), one input",
    "particle": "GradBench's nested particle eval: minutes a call in eager frameworks (353 Euler steps × 168 "
                "integrations), one input",
}
GRADBENCH_NAMES = {"gmm_posterior": "gmm", "bundle_adjustment": "ba"}  # problem → eval name, where they differ


def gradbench_eval(problem: str) -> str | None:
    """GradBench's name for the eval `problem` reproduces (`gmm` for gmm_posterior), or None when it is none."""
    return GRADBENCH_NAMES.get(problem, problem) if problem in GRADBENCH_EVALS else None

SUITE_SUMMARIES = {
    "quick": "small explicit cells covering every operator family, float32 (the default)",
    "full": "every problem at ≥ 3 sizes over ≥ 2 decades, every operator family, adapter and variant, both dtypes "
            "(~1 h on 2 CPU cores)",
    "adbench": "ADBench's published benchmarks: GMM (1k, 10k), BA (ba1-ba20), LSTM, hand tracking at ADBench's sizes "
               "and GradBench's gmm log posterior; objective and gradient/Jacobian, float64",
    "gradbench": "GradBench's evals at its default sizes (gmm, ba, lstm, lse, llsq, det, ode, kmeans, ht, saddle, "
                 "particle): objective and gradient/Jacobian (saddle, particle: the four nesting orders), every "
                 "adapter and variant, float64",
}
SUITES = tuple(SUITE_SUMMARIES)
# default dtypes; `full`: every dtype
SUITE_DTYPES = {"quick": ("float32",), "adbench": ("float64",), "gradbench": ("float64",)}


def entry_timeout(suite: str, cell: Cell) -> float | None:
    """The timeout `suite`'s entry for `cell` sets (its problem's entry, listing its operator), or None."""
    entries = {"full": FULL, "adbench": ADBENCH, "gradbench": GRADBENCH}.get(suite, QUICK)
    return next((e.timeout for e in entries if e.problem == cell.problem and e.timeout is not None
                 and (e.operators is None or cell.operator in e.operators)), None)


def suites_planning(problem: str) -> tuple[str, ...]:
    """The suites that list the built-in `problem` (for the message when another suite plans none of its cells)."""
    entries = {"quick": QUICK, "full": FULL, "adbench": ADBENCH, "gradbench": GRADBENCH}
    return tuple(name for name, listed in entries.items() if any(e.problem == problem for e in listed))


def suite_for(problems: Sequence[str]) -> tuple[str, str]:
    """The suite to plan when --suite is not given, and a note saying why where it is not the quick suite: the
    quick suite, unless the problems named are not all in it and another suite (the first in SUITES) lists every
    one of them — `check --problem particle` then checks GradBench's particle rather than refusing (a problem
    unknown to every suite, e.g. a plugin's, is planned by the quick suite as before)."""
    held = [suites_planning(name) for name in problems]
    if not problems or any(not suites or "quick" in suites for suites in held):
        return "quick", ""
    common = [s for s in SUITES if all(s in suites for suites in held)]
    if not common:
        return "quick", ""
    also = common[1:]
    return common[0], (f"{', '.join(problems)}: not in the quick suite; planned from --suite {common[0]}"
                       + (f" (also in {', '.join(f'--suite {s}' for s in also)})" if also else ""))


def suite_devices(suite: str) -> tuple[int, ...]:
    """Every device count some entry of `suite` runs (the counts planned when --devices is not given)."""
    entries = {"full": FULL, "adbench": ADBENCH, "gradbench": GRADBENCH}.get(suite, QUICK)
    return tuple(sorted({d for e in entries for d in (*e.devices, *(e.host_devices or ()))}))


def allows(suite: str, cell: Cell, size: Size, *, smallest_size: str, slow: bool, builtin: bool,
           devices_chosen: bool = False) -> bool:
    """Whether `suite` runs `cell` at `size` (`slow`: in one of its adapter's slow variants; `devices_chosen`:
    --devices named the device counts, which then hold for every entry)."""
    if size.source and suite not in ("adbench", "gradbench"):
        return devices_chosen or cell.devices == 1
    if suite == "adbench":
        return any(e.allows(cell, size, slow, devices_chosen) for e in ADBENCH)
    if suite == "gradbench":
        gradbench = GRADBENCH_EVALS.get(cell.problem)
        return gradbench is not None and gradbench.allows(cell, _in_order_of(size, gradbench), slow, devices_chosen)
    entries = [e for e in (FULL if suite == "full" else QUICK) if e.problem == cell.problem]
    if not entries:  # a plugin's problem: every size in `full`, the smallest in `quick`
        return not builtin and (suite == "full" or size.label == smallest_size and not slow) \
            and (devices_chosen or cell.devices == 1)
    return any(e.allows(cell, size, slow, devices_chosen) for e in entries)


def _in_order_of(size: Size, entry: SuiteEntry) -> Size:
    """`size` with its dimensions in the order of `entry`'s labels, when they are the same dimensions (GradBench's
    axis order need not be the problem's: kmeans is k, n, d there)."""
    mine = dict(size.dims)
    for label in entry.sizes:
        names = [part.rstrip("0123456789") for part in label.split("-")]
        if sorted(names) == sorted(mine):
            return replace(size, dims=tuple((name, mine[name]) for name in names))
    return size

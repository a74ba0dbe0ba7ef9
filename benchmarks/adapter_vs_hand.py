"""Is an adapter as fast as the code a user writes by hand? The shared engine of benchmarks/handwritten_<framework>.py.

For each case (`CASES`: grad of exp_dot_loss at n = 10,000 and seed 001's R²→R³ jacrev) in each of the framework's
variants, three callables are timed:
- `adapter`: the adapter's prepared cell (`Adapter.prepare(...).run`), what `adcompare run` times;
- `hand, xp`: the same expression written by hand through the same `xp` namespace the adapter hands problems,
  under the framework's own transform written as its documentation shows (jax.jit(jax.grad(f)), a GradientTape,
  …). This is the gate: namespace shims cost both sides alike, so adapter ÷ hand is the adapter's own cost;
- `hand, native`: the expression in the framework's native ops under the same transform; hand-xp ÷ native is
  what the namespace's shims cost against native ops, reported beside the gate, not hidden in it.
Each is timed in blocks of calls (calls per block calibrated so a block lasts about `BLOCK_SECONDS`, the sync
inside every call, as in adcompare.run.timing) and the three are interleaved block by block, their order rotating,
for `--pairs` rounds: load on a shared machine then hits all three alike within a round. A round's ratio is
adapter ÷ hand-xp in that round; the report gives the median per-call times, the median ratio over rounds with
the interquartile range and the full range of the rounds' ratios, and marks a median above `GATE`.

Two clocks per block: the process's CPU time (time.process_time, all its threads) and wall time. The gate reads
CPU time: on a machine shared with other jobs a block's wall time includes whatever ran while this process waited
for a core, which swamps a few per cent; CPU time counts only this process's work (frameworks' own worker threads
included). The wall-time ratios are printed beside it, ungated, with their spread; on an idle machine the two
agree.

A framework module supplies its name, variants, native ops (`NativeOps`) and `transform(operator, variant, f, x)`:
the hand-written derivative of f at x as a zero-argument callable, compiled (and called once) before timing.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

GATE = 1.05
CASES = (("exp_dot_loss", "n10000", "grad"), ("f_r2_r3", "n2", "jacrev"))
BLOCK_SECONDS = 0.01


@dataclass(frozen=True)
class NativeOps:
    """The few ops the cases' expressions use, as the framework spells them natively."""

    sin: Callable[..., Any]
    exp: Callable[..., Any]
    vecdot: Callable[[Any, Any], Any]
    stack: Callable[[Sequence[Any]], Any]


def expression(problem: str, ops: Any, constants: dict[str, Any]) -> Callable[[Any], Any]:
    """The case's function written by hand through `ops` (the adapter's xp, or NativeOps)."""
    if problem == "exp_dot_loss":
        x_star = constants["x_star"]

        def exp_dot_loss(x):
            return ops.sin(ops.exp(ops.vecdot(x_star, x) / math.sqrt(x.shape[-1])))

        return exp_dot_loss
    if problem == "f_r2_r3":
        def f_r2_r3(x):
            x0, x1 = x[0], x[1]
            return ops.stack([ops.sin(x0 / x1) + x1**2, x0**2 - x1**2, x0**3])

        return f_r2_r3
    raise ValueError(f"no hand-written expression for {problem!r}")


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


@dataclass
class Row:
    case: str
    variant: str
    seconds: dict[str, dict[str, list[float]]]  # clock -> form -> seconds per call, one block per round
    compile_seconds: float | None

    def ratios(self, clock: str, a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(self.seconds[clock][a], self.seconds[clock][b])]


def calls_per_block(run: Callable[[], Any], sync: Callable[[Any], None]) -> int:
    """Calls per block so a block lasts about BLOCK_SECONDS, from the median of a few single calls (after warm-up)."""
    single = [block(run, sync, 1)["wall"] for _ in range(7)]
    return max(1, math.ceil(BLOCK_SECONDS / max(statistics.median(single[2:]), 1e-9)))


def block(run: Callable[[], Any], sync: Callable[[Any], None], number: int) -> dict[str, float]:
    """Seconds per call over one block of `number` calls, each synced: process CPU time and wall time."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(number):
        sync(run())
    return {"cpu": (time.process_time() - cpu) / number, "wall": (time.perf_counter() - wall) / number}


def compare(framework: ModuleType, args: argparse.Namespace) -> list[Row]:
    from adcompare.plugin import registry as plugins
    from adcompare.plugin.adapter import Request
    from adcompare.verify.cell_inputs import cell_inputs

    registry = plugins.load()
    adapter = registry.adapter(framework.NAME)
    adapter.setup(dtype=args.dtype, device="cpu", threads=args.threads)
    xp, native = adapter.namespace(), framework.native_ops()
    print(f"{adapter.versions()}, {args.dtype}, {args.threads} thread(s), {args.pairs} interleaved rounds; "
          f"machine shared with other jobs: read the ranges", flush=True)
    rows = []
    for problem, size, operator in CASES:
        prob = registry.problem(problem)
        inputs = cell_inputs(prob, prob.size(size), operator, args.dtype)
        x = adapter.place(inputs.wrt, "cpu")
        constants = {k: adapter.place(v, "cpu") for k, v in inputs.constants.items()}
        for variant in framework.VARIANTS:
            if variant not in args.variants.split(","):
                continue
            prepared = adapter.prepare(Request(prob, operator, variant, "cpu", args.dtype, inputs))
            adapter.sync(prepared.run())
            if prepared.after_first_call is not None:
                prepared.after_first_call()
            forms = {"adapter": prepared.run,
                     "hand, xp": framework.transform(operator, variant, expression(problem, xp, constants), x),
                     "hand, native": framework.transform(operator, variant,
                                                         expression(problem, native, constants), x)}
            for run in forms.values():  # compile, warm
                adapter.sync(run())
            row = Row(f"{problem} {size} {operator}", variant,
                      {clock: {label: [] for label in forms} for clock in CLOCKS}, prepared.compile_seconds)
            labels = list(forms)
            numbers = {label: calls_per_block(run, adapter.sync) for label, run in forms.items()}
            for r in range(args.pairs):
                for label in labels[r % 3:] + labels[:r % 3]:
                    for clock, seconds in block(forms[label], adapter.sync, numbers[label]).items():
                        row.seconds[clock][label].append(seconds)
            rows.append(row)
            print_row(row, flush=True)
    return rows


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} (IQR {q[0]:.3f}–{q[2]:.3f}, range {min(values):.3f}–{max(values):.3f})"


def print_row(row: Row, flush: bool = False) -> None:
    compile_s = f"; AOT compile {row.compile_seconds:.3f} s" if row.compile_seconds is not None else ""
    print(f"{row.case} | {row.variant}{compile_s}", flush=flush)
    for clock in CLOCKS:
        med = {label: statistics.median(v) for label, v in row.seconds[clock].items()}
        gate = statistics.median(row.ratios(clock, "adapter", "hand, xp"))
        verdict = ("ok" if gate <= GATE else f"ABOVE {GATE}") if clock == "cpu" else "(not gated)"
        print(f"  {clock:>4}: adapter {us(med['adapter'])}, hand-xp {us(med['hand, xp'])}, native "
              f"{us(med['hand, native'])}\n"
              f"        adapter÷hand-xp {spread(row.ratios(clock, 'adapter', 'hand, xp'))} {verdict}\n"
              f"        hand-xp÷native  {spread(row.ratios(clock, 'hand, xp', 'hand, native'))}", flush=flush)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs"


def main(framework: ModuleType, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(framework.__doc__ or "").splitlines()[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=300, help="interleaved rounds of one block per form")
    parser.add_argument("--variants", default=",".join(framework.VARIANTS))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = compare(framework, args)
    above = [f"{r.case} {r.variant}" for r in rows
             if statistics.median(r.ratios("cpu", "adapter", "hand, xp")) > GATE]
    print(f"{len(rows)} rows in {time.perf_counter() - started:.0f} s; median adapter÷hand above {GATE}: "
          f"{', '.join(above) or 'none'}")
    return 0

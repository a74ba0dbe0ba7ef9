"""What the float64 reference of a per-example cell costs at the corpus's sizes, and that it is still right.

Issue 39: the per-example reference differenced each of the p examples through its own Python closure; at
GradBench's and ADBench's bundle_adjustment n161-m48126-p182072, `adcompare run ... --operator vmap_jacfwd
--adapter jax --variant compiled` spent 323 s of its wall outside the framework's calls. It now differences the
whole batch at once. This prints, per (problem, size, operator): the reference's seconds (a fresh cache, this
process), its method, and the largest scaled gap between it and each of --examples seeded examples differenced
on their own, as the reference did before (along the reference's own directions where it is directional).
Goal: a few seconds at p = 182,072; gaps at rounding (far below the reference's error bound).
Measured here (2 shared cores, issue 39): the reference before took 301 s for vmap_jacfwd at p = 182,072 (three
directional J·v, every example through its own closure); now 1.5-2.3 s, and with the same budget its three J·v
are bit for bit the old ones (scaled gap 0.0); with a 10 s budget it computes the full (p, 3, 15) Jacobian in 5 s.
At p = 1,255,268 (n356-m226730) the J·v that prices the differencing is now its first direction, kept: 2.12 s and
1.88 s (d383cf9) against 1.47 s and 1.30 s, interleaved, the same one direction (scaled gap 0.0).
Run: python benchmarks/reference_per_example.py [--size n161-m48126-p182072] [--examples 8]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from adcompare.plugin.registry import load
from adcompare.verify import differencing
from adcompare.verify import reference as ref_module
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.tolerance import scaled_error


def gap_to_examples(problem, inputs, ref, count: int) -> float:
    """Largest scaled gap between the reference and seeded examples differenced one at a time (the old way)."""
    fn = problem.bind(np, {k: np.asarray(v, dtype=np.float64) for k, v in inputs.constants.items()})
    x, batch = inputs.wrt.astype(np.float64), inputs.batch.astype(np.float64)
    rows = np.random.default_rng(39).choice(len(batch), size=min(count, len(batch)), replace=False)
    worst = 0.0
    for i in rows:
        g = (lambda b: lambda w: fn(w, b))(batch[i])
        differ, _ = differencing.choose(problem, g, x)
        if ref.value is not None:
            jac, _ = differencing.jacobian(g, x, differ, estimate=False)
            worst = max(worst, scaled_error(ref.value[i], jac))
        for d in ref.directional:
            if d.right is not None and d.left is None:
                jv, _ = differ.along(g, x, d.right, estimate=False)
                worst = max(worst, scaled_error(d.expected[i], jv))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="bundle_adjustment")
    parser.add_argument("--size", action="append", help="size label (repeatable; default BA's p = 3000, 31843, "
                                                        "182072)")
    parser.add_argument("--operator", action="append", help="default vmap_jacfwd and vmap_jacrev")
    parser.add_argument("--examples", type=int, default=8, help="seeded examples differenced one at a time")
    args = parser.parse_args()
    problem = load().problem(args.problem)
    sizes = args.size or ["n10-m200-p3000", "n49-m7776-p31843", "n161-m48126-p182072"]
    for label in sizes:
        for operator in args.operator or ["vmap_jacfwd", "vmap_jacrev"]:
            inputs = cell_inputs(problem, problem.size(label), operator, "float64")
            ref_module.clear_cache()
            started = time.perf_counter()
            ref = ref_module.reference(problem, label, operator, inputs)
            seconds = time.perf_counter() - started
            gap = gap_to_examples(problem, inputs, ref, args.examples)
            print(f"{problem.name} {label} {operator}: {seconds:.2f} s (estimated differencing {ref.cost:.2f} s); "
                  f"gap to {args.examples} examples differenced alone {gap:.1e} (error bound "
                  f"{ref.error_bound:.1e}); {ref.method}", flush=True)


if __name__ == "__main__":
    main()

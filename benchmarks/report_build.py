"""How long `adcompare report` takes to build, and how big index.html gets, for a synthetic 10,000-record file.

Goal (issue 8): ≤ 5 s and ≤ 5 MB. The synthetic results look like a large real run: 8 problems × 4–6 sizes ×
11 operators × 4 adapters × 2 variants × 2 dtypes (≈ 10,000 cells, 11 per-block samples each), with a few
percent failed, unsupported and emulated cells. Run: python benchmarks/report_build.py [--records N] [--keep DIR]
"""
from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from adcompare import report
from adcompare.model.cell import Cell
from adcompare.model.measurement import Check, Measurement, Timing
from adcompare.model.operators import OPERATORS
from adcompare.model.status import Status
from adcompare.store import results
from adcompare.store.results import ResultsWriter

ADAPTERS = {"jax": 1.0, "torch": 1.3, "tensorflow": 1.8, "autograd": 4.0}
SIZES = {
    "dense_mlp": [f"n{n}" for n in (10, 100, 1000, 10000, 100000)],
    "rosenbrock": [f"n{n}" for n in (10, 100, 1000, 10000)],
    "exp_dot_loss": [f"n{n}" for n in (10, 100, 1000, 10000)],
    "softmax_xent": [f"n{n}-c{c}" for n in (32, 256) for c in (10, 100, 1000)],
    "linear_layer": [f"n10-p{p}-o5" for p in (8, 16, 64, 256, 512)],
    "conv1d": [f"n{n}-k5" for n in (64, 256, 1024, 4096)],
    "ode_rk4": [f"steps{s}" for s in (10, 100, 1000)],
    "logsumexp": [f"n{n}" for n in (10, 100, 1000, 10000, 100000)],
}


def synthetic(path: Path, records: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    prov = {"adcompare": "0.1.0", "host": "bench", "cpu": "synthetic", "cpu_count": 2, "threads": 1,
            "date": "2025-01-01T00:00:00+00:00", "python": "3.11", "numpy": np.__version__}
    written = 0
    with ResultsWriter(path, prov) as out:
        for rep in itertools.count():  # a second pass renames the problems: more problems, not more sizes
            for base, labels in SIZES.items():
                problem = base if rep == 0 else f"{base}_{rep + 1}"
                for i, label in enumerate(labels):
                    work = 10.0 ** (i + 1)
                    for op in OPERATORS:
                        for adapter, slow in ADAPTERS.items():
                            for variant in ("eager", "compiled"):
                                for dtype in ("float32", "float64"):
                                    if written >= records:
                                        return written
                                    cell = Cell(problem, label, op, adapter, variant, "cpu", dtype)
                                    out.add(_measurement(rng, cell, work, slow))
                                    written += 1
    raise AssertionError("unreachable")


def _measurement(rng: np.random.Generator, cell: Cell, work: float, slow: float) -> Measurement:
    roll = rng.random()
    if cell.adapter == "autograd" and cell.variant == "compiled":
        return Measurement(cell, Status.UNSUPPORTED, "autograd has no compiler; use --variant eager", "unsupported")
    if roll < 0.02:
        return Measurement(cell, Status.FAILED, "first call: RuntimeError: synthetic failure", "native",
                           "reverse mode")
    seconds = (5e-6 + 1e-9 * work * (3 if cell.operator != "value" else 1)) * slow
    seconds *= 0.6 if cell.variant == "compiled" else 1.0
    samples = tuple(float(v) for v in seconds * np.exp(rng.normal(0, 0.04, 11)))
    compile_time = 0.05 + rng.random() if cell.variant == "compiled" else None
    timing = Timing(samples, max(1, int(0.01 / seconds)), seconds * 2 + (compile_time or 0), compile_time,
                    "ahead of time" if compile_time else "", 5, 0.2)
    tol = 1e-4 if cell.dtype == "float32" else 1e-10
    check = Check(float(tol * 10 ** rng.uniform(-4, -1)), tol, "central differences",
                  pairwise_error=float(tol * 10 ** rng.uniform(-4, -1)))
    support = "emulated" if roll > 0.97 else "native"
    return Measurement(cell, Status.OK, "", support, "reverse mode: loop of VJPs over output rows", timing, check,
                       details={"wrt_size": int(work), "out_size": 1 if cell.operator != "jacfwd" else int(work)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="write the report here instead of a temporary folder")
    parser.add_argument("--profile", action="store_true", help="print the 25 most expensive calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n = synthetic(tmp / "synthetic.jsonl", args.records)
        t0 = time.perf_counter()
        loaded = results.load([tmp / "synthetic.jsonl"])
        t1 = time.perf_counter()
        out = args.keep or tmp / "report"
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        index = report.build(loaded, out)
        t2 = time.perf_counter()
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        size = index.stat().st_size
        csv = (index.parent / "results.csv").stat().st_size
        print(f"{n} records: load {t1 - t0:.2f} s, build {t2 - t1:.2f} s, total {t2 - t0:.2f} s; "
              f"index.html {size / 1e6:.2f} MB, results.csv {csv / 1e6:.2f} MB "
              f"(goal ≤ 5 s and ≤ 5 MB: {'met' if t2 - t0 <= 5 and size <= 5e6 else 'NOT met'})")


if __name__ == "__main__":
    main()

"""How good is adcompare's timer? Four self-measurements (issue 7), printed as a table. Run on demand:

    python benchmarks/harness_accuracy.py            # all four; (3) runs the quick suite (~2 min)
    python benchmarks/harness_accuracy.py --skip-suite

(1) adcompare's median vs a bare timeit loop on the same prepared jax.jit callable (tiny and medium problem);
    goal ratio ≤ 1.03 or ≤ 1 µs apart. (2) adcompare vs torch.utils.benchmark.Timer.blocked_autorange on the same
    torch callable; goal within 5%. Both are medians over ≥ 10 interleaved pairs: this machine is noisy.
(3) wall time of `adcompare run` on the quick default suite, imports included; goal ≤ 120 s.
(4) measuring time until a µs-scale cell's median has a ±2% 95% bootstrap interval; goal ≤ 0.5 s.
Each framework runs in its own subprocess, as in real runs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time

PAIRS = 10

JAX_PAIRS = textwrap.dedent("""
    import json, statistics, timeit, sys
    from adcompare.run import timing
    from adcompare.plugin import registry as plugins
    from adcompare.plugin.adapter import Request
    from adcompare.verify.cell_inputs import cell_inputs
    r = plugins.load(); a = r.adapter("jax"); a.setup(dtype="float32", device="cpu", threads=1)
    rows = {}
    for label, prob, size in (("tiny: f_r2_r3 jacrev", "f_r2_r3", "n2"),
                              ("medium: exp_dot_loss n10000 grad", "exp_dot_loss", "n10000")):
        p = r.problem(prob); s = p.size(size); op = "jacrev" if prob == "f_r2_r3" else "grad"
        prep = a.prepare(Request(p, op, "compiled", "cpu", "float32", cell_inputs(p, s, op, "float32")))
        out, first = timing.first_call(prep, a.sync)
        ours, bare = [], []
        for _ in range(PAIRS):
            ours.append(timing.measure(prep, a.sync, first, compiled=True).median)
            t = timeit.Timer(lambda: a.sync(prep.run()))
            n, _ = t.autorange()
            bare.append(statistics.median(t.repeat(7, n)) / n)
        rows[label] = [statistics.median(ours), statistics.median(bare)]
    print(json.dumps(rows))
""").replace("PAIRS", str(PAIRS))

TORCH_PAIRS = textwrap.dedent("""
    import json, statistics
    import torch.utils.benchmark as tb
    from adcompare.run import timing
    from adcompare.plugin import registry as plugins
    from adcompare.plugin.adapter import Request
    from adcompare.verify.cell_inputs import cell_inputs
    r = plugins.load(); a = r.adapter("torch"); a.setup(dtype="float32", device="cpu", threads=1)
    p = r.problem("exp_dot_loss"); s = p.size("n10000")
    prep = a.prepare(Request(p, "grad", "eager-autograd", "cpu", "float32", cell_inputs(p, s, "grad", "float32")))
    out, first = timing.first_call(prep, a.sync)
    ours, theirs = [], []
    for _ in range(PAIRS):
        ours.append(timing.measure(prep, a.sync, first, compiled=False).median)
        timer = tb.Timer(stmt="run()", globals={"run": prep.run}, num_threads=1)
        theirs.append(timer.blocked_autorange(min_run_time=0.2).median)
    label = "torch exp_dot_loss n10000 grad (eager-autograd)"
    print(json.dumps({label: [statistics.median(ours), statistics.median(theirs)]}))
""").replace("PAIRS", str(PAIRS))

CI_TIME = textwrap.dedent("""
    import json, time
    import numpy as np
    from adcompare.run import timing
    from adcompare.plugin import registry as plugins
    from adcompare.plugin.adapter import Request
    from adcompare.verify.cell_inputs import cell_inputs
    r = plugins.load(); a = r.adapter("jax"); a.setup(dtype="float32", device="cpu", threads=1)
    p = r.problem("exp_dot_loss"); s = p.size("n100")
    prep = a.prepare(Request(p, "grad", "compiled", "cpu", "float32", cell_inputs(p, s, "grad", "float32")))
    out, first = timing.first_call(prep, a.sync)
    t = timing.measure(prep, a.sync, first, compiled=True)
    x = np.asarray(t.samples); rng = np.random.default_rng(0)
    boot = np.median(x[rng.integers(0, len(x), (2000, len(x)))], axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    print(json.dumps({"seconds": t.total_seconds, "median": t.median, "samples": len(t.samples),
                      "half_width": (high - low) / 2 / t.median}))
""")


def _py(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-suite", action="store_true", help="skip (3), the quick-suite wall time")
    args = parser.parse_args()
    rows = []
    for label, (ours, other) in {**_py(JAX_PAIRS), **_py(TORCH_PAIRS)}.items():
        rows.append((label, f"{ours * 1e6:.2f} µs", f"{other * 1e6:.2f} µs", f"{ours / other:.3f}",
                     f"{(ours - other) * 1e6:+.2f} µs"))
    print(f"{'(1)/(2) cell':<48} {'adcompare':>12} {'reference':>12} {'ratio':>7} {'diff':>10}")
    for r in rows:
        print(f"{r[0]:<48} {r[1]:>12} {r[2]:>12} {r[3]:>7} {r[4]:>10}")
    ci = _py(CI_TIME)
    print(f"(4) µs cell exp_dot_loss n100 grad jax: median {ci['median'] * 1e6:.2f} µs from {ci['samples']} blocks "
          f"in {ci['seconds']:.3f} s; 95% interval half-width ±{ci['half_width'] * 100:.2f}% (goal ±2% in ≤ 0.5 s)")
    if not args.skip_suite:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "adcompare", "run", "--no-progress", "-o", f"{tmp}/q.jsonl"],
                           check=False, stdout=subprocess.DEVNULL)
            print(f"(3) quick default suite wall time: {time.perf_counter() - start:.1f} s (goal ≤ 120 s)")


if __name__ == "__main__":
    main()

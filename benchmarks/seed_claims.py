"""Re-measure the seed articles' headline claims with `adcompare run` and print them (on demand, ~5–10 min).

    python benchmarks/seed_claims.py [-o DIR] [--adapter jax,torch,...]

Seed 001: jacrev beats jacfwd on exp_dot_loss (Rⁿ → R) at n = 10,000, by roughly n/…; the ratio per framework.
Seed 000: which linear-layer mode (jacfwd, jacrev, vmap over rows) is fastest for X @ W at the largest grid point.
Seed 002/004: per-example (vmap) Jacobians vs full Jacobians on the RBF kernel map and the MLP.
Seed 001: the data-dependent control loop runs eagerly and fails under compilers; the static-k variant compiles.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from adcompare.store.results import load

SLICES = {
    "exp_dot_loss": ["--problem", "exp_dot_loss", "--size", "n10000", "--operator", "grad,jacfwd,jacrev"],
    "linear_layer": ["--problem", "linear_layer", "--size", "n10-p512-o5",
                     "--operator", "jacfwd,jacrev,vmap_jacfwd,vmap_jacrev"],
    "linear_layer_rowsum": ["--problem", "linear_layer_rowsum", "--size", "n10-p512-o5", "--operator", "vmap_grad"],
    "rbf_point": ["--problem", "rbf_kernel_point", "--size", "n1000", "--operator", "jacfwd,jacrev"],
    "rbf_map": ["--problem", "rbf_kernel_map", "--size", "n1000", "--operator", "vmap_jacfwd,vmap_jacrev"],
    "control": ["--problem", "control_loop,control_loop_static", "--size", "n1000", "--operator", "grad"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", default="reports/seed-claims")
    parser.add_argument("--adapter", default="")
    parser.add_argument("--only", default="", help="comma-separated slice names to (re)run: " + ", ".join(SLICES))
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, selection in SLICES.items():
        path = out / f"{name}.jsonl"
        if args.only and name not in args.only.split(","):
            files.append(path)
            continue
        cmd = [sys.executable, "-m", "adcompare", "run", *selection, "--dtype", "float32", "--suite", "full",
               "--timeout", "300", "--no-progress", "-o", str(path)]
        if args.adapter:
            cmd += ["--adapter", args.adapter]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
        files.append(path)
    results = load([f for f in files if f.exists()])  # a slice whose selection was refused has no file
    table = defaultdict(dict)
    for m in results.measurements:
        c = m.cell
        value = f"{m.timing.median * 1e3:.3f} ms" if m.timing and m.status.value in ("ok", "mismatch") \
            else m.status.value
        table[(c.problem, c.size, c.adapter, c.variant)][c.operator] = (value, m.timing.median if m.timing else None)
    print("problem/size/adapter/variant: operator median (float32, 1 thread)")
    for key in sorted(table):
        row = table[key]
        cells = ", ".join(f"{op} {v[0]}" for op, v in sorted(row.items()))
        extra = ""
        if key[0] == "exp_dot_loss" and row.get("jacfwd", (0, None))[1] and row.get("jacrev", (0, None))[1]:
            extra = f"  → jacfwd/jacrev = {row['jacfwd'][1] / row['jacrev'][1]:.0f}×"
        print(f"{'/'.join(key)}: {cells}{extra}")
    print(f"results in {out}/; `adcompare report {out}/*.jsonl` draws them")


if __name__ == "__main__":
    main()

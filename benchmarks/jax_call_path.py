"""Why the JAX adapter's compiled cell calls jax.jit with positional constants: its former call path (the AOT
`Compiled` object, constants as a dict pytree) against the current adapter and hand-written jax.jit, interleaved
on the engine of adapter_vs_hand.py (process CPU time, blocks of ~10 ms, order rotating).

Run:  python benchmarks/jax_call_path.py [rounds]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter_vs_hand as e  # noqa: E402
import jax  # noqa: E402

from adcompare.plugin import registry as plugins  # noqa: E402
from adcompare.plugin.adapter import Request  # noqa: E402
from adcompare.verify.cell_inputs import cell_inputs  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200

reg = plugins.load()
ad = reg.adapter("jax")
ad.setup(dtype="float32", device="cpu", threads=1)
xp = ad.namespace()
for name, size, op in e.CASES:
    prob = reg.problem(name)
    inputs = cell_inputs(prob, prob.size(size), op, "float32")
    x = ad.place(inputs.wrt, "cpu")
    consts = {k: ad.place(v, "cpu") for k, v in inputs.constants.items()}
    new = ad.prepare(Request(prob, op, "compiled", "cpu", "float32", inputs)).run

    def f_old(w, c, prob=prob):
        return prob.bind(xp, c)(w)

    g = {"grad": jax.grad, "jacrev": jax.jacrev}[op](f_old)
    compiled = jax.jit(g).lower(x, consts).compile()
    old = (lambda c, x, k: lambda: c(x, k))(compiled, x, consts)
    hand_d = jax.jit({"grad": jax.grad, "jacrev": jax.jacrev}[op](e.expression(name, xp, consts)))
    hand = (lambda h, x: lambda: h(x))(hand_d, x)
    forms = {"old adapter (AOT Compiled, dict)": old, "new adapter": new, "hand": hand}
    for f in forms.values():
        ad.sync(f())
    nums = {k: e.calls_per_block(f, ad.sync) for k, f in forms.items()}
    cpu, labels = {k: [] for k in forms}, list(forms)
    for r in range(ROUNDS):
        for k in labels[r % 3:] + labels[:r % 3]:
            cpu[k].append(e.block(forms[k], ad.sync, nums[k])["cpu"])
    print(f"{name} {size} {op} compiled (CPU time, {ROUNDS} interleaved rounds):")
    for k in labels[:2]:
        ratios = [a / b for a, b in zip(cpu[k], cpu["hand"])]
        print(f"  {k:<34} {statistics.median(cpu[k])*1e6:8.2f} µs  ÷hand {e.spread(ratios)}")
    print(f"  {'hand jax.jit(jax.' + op + '(f))':<34} {statistics.median(cpu['hand'])*1e6:8.2f} µs")

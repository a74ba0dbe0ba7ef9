"""A `--plugin` for the gate benchmarks only (benchmarks/gate_false_alarms.py, benchmarks/gate_ab.py): slows cells
down by a known fraction, so the gate's power can be measured on real runs. Nothing happens unless
ADCOMPARE_GATE_SLOWDOWN is set (the benchmarks set it for the runs, or the environment's interpreter, they mean to
slow down); shipped adapters are untouched, the wrapping happens here, in the worker that loads this plugin.

ADCOMPARE_GATE_SLOWDOWN=0.2 and ADCOMPARE_GATE_CELL=problem/operator/adapter/variant/n (n: the size of the
argument differentiated, e.g. exp_dot_loss/jacrev/jax/compiled/10000; several separated by commas): each call of
such a cell runs, syncs, then spins for 0.2 × the process CPU time the call took, so the cell costs 20 % more CPU
time — the clock `compare` decides CPU cells on — whatever the machine's load. (Spinning for a fraction of the
call's wall time, as this plugin first did, injects more than the fraction in CPU time when the machine is busy.)
That holds where the call runs on the calling thread (torch eager: measured ×1.22 for 0.2). A JAX jit call runs
on XLA's threads, and a gap between calls changes how they wait for the next one: 0.2 measured ×1.6–2.6 in CPU
time on exp_dot_loss/jacrev/jax/compiled/10000 (`adcompare run … --env base=@base.sh --env new=@slow.sh`; the
cell's `timing.round_cpu` on both sides), so such a target tests a larger slowdown than it names.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

from adcompare.plugin.adapter import Adapter

FRACTION = float(os.environ.get("ADCOMPARE_GATE_SLOWDOWN") or 0)
TARGETS = frozenset(t for t in os.environ.get("ADCOMPARE_GATE_CELL", "").split(",") if t)

if FRACTION > 0 and not getattr(Adapter.prepare, "gate_slowdown", False):
    shipped_prepare = Adapter.prepare

    def prepare(self, request):
        prepared = shipped_prepare(self, request)
        name = (f"{request.problem.name}/{request.operator}/{self.name}/{request.variant}/"
                f"{request.inputs.wrt.size}")
        if name not in TARGETS:
            return prepared
        run, sync = prepared.run, self.sync

        def slower():
            start = time.process_time()
            out = run()
            sync(out)
            until = time.process_time() + FRACTION * (time.process_time() - start)
            while time.process_time() < until:
                pass
            return out

        return replace(prepared, run=slower)

    prepare.gate_slowdown = True
    Adapter.prepare = prepare

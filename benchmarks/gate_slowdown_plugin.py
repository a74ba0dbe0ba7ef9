"""A `--plugin` for benchmarks/gate_false_alarms.py only: slows one cell down by a known fraction, so the gate's
power can be measured on real runs. Nothing happens unless ADCOMPARE_GATE_SLOWDOWN is set (the benchmark sets it
for the runs it means to slow down); shipped adapters are untouched, the wrapping happens here, in the worker
that loads this plugin.

ADCOMPARE_GATE_SLOWDOWN=0.2 and ADCOMPARE_GATE_CELL=problem/operator/adapter/variant/n (n: the size of the
argument differentiated, e.g. exp_dot_loss/jacrev/jax/compiled/10000): each call of that cell runs, syncs, then
spins for 0.2 × the time it took, so the cell is 20 % slower whatever the machine's load.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

from adcompare.plugin.adapter import Adapter

FRACTION = float(os.environ.get("ADCOMPARE_GATE_SLOWDOWN") or 0)
TARGET = os.environ.get("ADCOMPARE_GATE_CELL", "")

if FRACTION > 0 and not getattr(Adapter.prepare, "gate_slowdown", False):
    shipped_prepare = Adapter.prepare

    def prepare(self, request):
        prepared = shipped_prepare(self, request)
        name = (f"{request.problem.name}/{request.operator}/{self.name}/{request.variant}/"
                f"{request.inputs.wrt.size}")
        if name != TARGET:
            return prepared
        run, sync = prepared.run, self.sync

        def slower():
            start = time.perf_counter()
            out = run()
            sync(out)
            until = time.perf_counter() + FRACTION * (time.perf_counter() - start)
            while time.perf_counter() < until:
                pass
            return out

        return replace(prepared, run=slower)

    prepare.gate_slowdown = True
    Adapter.prepare = prepare

"""The per-cell peak reset (run/memory.py): it waits for a release in progress only where the previous cell left
memory resident; test_worker.py's big-then-small cells check the peaks a worker records."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adcompare.run import memory

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status (Linux)")


def test_the_peak_reset_waits_only_after_growth_worth_waiting_for(monkeypatch):
    settled = []
    real = memory._settle
    monkeypatch.setattr(memory, "_settle", lambda: settled.append(1) or real())
    monkeypatch.setattr(memory, "_resident_at_reset", None)
    memory.reset_host_peak()
    assert settled == [1]  # a process's first reset: nothing is known of what came before
    memory.reset_host_peak()
    assert settled == [1]  # nothing left resident since: no wait
    kept = np.ones(4 * memory.SETTLE_ABOVE // 8)  # resident: four times what is worth a wait
    memory.reset_host_peak()
    assert settled == [1, 1]
    peak = memory.host_peak_bytes()
    assert peak is not None and peak >= kept.nbytes
    del kept
    memory.reset_host_peak()  # the resident size fell: nothing of the last cell's can still be released
    assert settled == [1, 1] and memory.host_peak_bytes() < peak

"""The per-cell peak reset (run/memory.py): it waits for a release in progress only where the previous cell held
memory above its own reset's resident size; test_worker.py's big-then-small cells check the peaks a worker
records."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adcompare.run import memory

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status (Linux)")


def test_the_peak_reset_waits_only_after_a_peak_worth_waiting_for(monkeypatch):
    settled = []
    real = memory._settle
    monkeypatch.setattr(memory, "_settle", lambda: settled.append(1) or real())
    monkeypatch.setattr(memory, "_resident_at_reset", None)
    memory.reset_host_peak()
    assert settled == [1]  # a process's first reset: nothing is known of what came before
    memory.reset_host_peak()
    assert settled == [1]  # nothing held since: no wait
    inputs = np.ones(4 * memory.SETTLE_ABOVE // 8)  # four times what is worth a wait, resident
    memory.reset_host_peak()
    assert settled == [1, 1]
    memory.reset_host_peak()
    assert settled == [1, 1]  # held at the last reset, and nothing more since
    buffers = np.ones(4 * memory.SETTLE_ABOVE // 8)  # the cell's own memory...
    del inputs  # ...while memory held at its reset is freed: the resident size is back where it was
    memory.reset_host_peak()
    assert settled == [1, 1, 1]  # its peak still says what it held
    peak = memory.host_peak_bytes()
    del buffers
    memory.reset_host_peak()  # the resident size fell below the last reset's: nothing more can be released
    assert settled == [1, 1, 1] and memory.host_peak_bytes() < peak

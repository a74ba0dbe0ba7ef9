"""Host peak memory per cell: Linux lets a process reset its peak RSS (VmHWM) via /proc/self/clear_refs."""
from __future__ import annotations

import time
from pathlib import Path

SETTLE_POLL = 0.005  # seconds between reads of the resident size while it is still falling
SETTLE_READS = 2  # settled: this many reads in a row without a fall (a busy machine may start the release late)
SETTLE_LIMIT = 2.0  # at most this long: a safety net, far above the ~0.1 s a 1 GB release takes here
# What the previous cell can still be releasing is at most what it held above the resident size at its own reset:
# below SETTLE_ABOVE over it at its peak (VmHWM, read before this reset), there is nothing worth waiting for; a few
# MiB are noise in peaks of hundreds. Most cells of the quick suite stay below it, and waited SETTLE_READS polls
# for nothing: 10 ms a cell, 3.7 s of `adcompare report`. Its peak, not its resident size now: a synchronous free
# of memory held at its reset (the previous size's inputs, dropped before this reset) would hide a release still
# under way from a comparison of resident sizes.
SETTLE_ABOVE = 8 * 2**20

_resident_at_reset: int | None = None  # bytes resident at this process's last peak reset


def _status_kib(field: str) -> int | None:
    """A size in KiB from /proc/self/status (VmRSS: resident now, VmHWM: peak since the last reset)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _settle() -> None:
    """Wait while the resident size is still falling: frameworks free large buffers on their own threads (JAX
    on the CPU unmaps a previous cell's 1 GB temporary ~0.1 s after the last reference goes), and a peak reset
    before that would count the previous cell's memory in the next one's peak."""
    before, deadline, steady = _status_kib("VmRSS"), time.monotonic() + SETTLE_LIMIT, 0
    while before is not None and steady < SETTLE_READS and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL)
        now = _status_kib("VmRSS")
        if now is None:
            return
        steady = steady + 1 if now >= before else 0
        before = now


def reset_host_peak() -> bool:
    """Reset the peak-RSS counter once the resident size has settled — where the previous cell held enough above
    its own reset's resident size to matter (SETTLE_ABOVE); False where the OS does not allow it (then peaks are
    per worker, not per cell)."""
    global _resident_at_reset
    peak = host_peak_bytes()
    if peak is None or _resident_at_reset is None or peak - _resident_at_reset >= SETTLE_ABOVE:
        _settle()
    resident = _status_kib("VmRSS")
    _resident_at_reset = None if resident is None else resident * 1024
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def host_peak_bytes() -> int | None:
    peak = _status_kib("VmHWM")
    return None if peak is None else peak * 1024

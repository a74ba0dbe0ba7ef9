"""Host peak memory per cell: Linux lets a process reset its peak RSS (VmHWM) via /proc/self/clear_refs."""
from __future__ import annotations

from pathlib import Path


def reset_host_peak() -> bool:
    """Reset the peak-RSS counter; False where the OS does not allow it (then peaks are per worker, not per cell)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def host_peak_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None

"""Where and how a run happened: versions, CPU/GPU, thread policy, commit, date. Written in the results header."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from adcompare import __version__
from adcompare.model.fingerprint import Machine


def git_commit() -> str | None:
    """The commit of the adcompare source tree, when it is a git checkout."""
    here = Path(__file__).resolve().parents[2]  # the checkout: adcompare/store/ → repository root
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def collect(threads: int, machine: Machine) -> dict[str, Any]:
    """The results header's provenance; `machine` is the fingerprint every record of this run carries."""
    return {
        "adcompare": __version__,
        "git_commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": machine.host,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "cpu": machine.cpu,
        "gpu": machine.gpu,
        "machine": machine.to_json(),
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "thread_policy": f"{threads} thread(s) per framework: OMP/MKL/OpenBLAS env vars at worker start, "
                         f"plus each framework's own setting",
    }

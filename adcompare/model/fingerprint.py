"""The machine fingerprint: which hardware and which framework releases timed a cell.

Two cells are ranked against each other only when their fingerprints are equal, and the same cell measured under
two fingerprints is two records, never one replacing the other. The fingerprint is read without importing a
framework: versions come from the installed distributions' metadata, the GPU model from the NVIDIA driver.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_models() -> str:
    """The NVIDIA GPUs' model names, comma-separated ("" when there is none)."""
    names = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    names.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    if not names and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20)
            names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return ", ".join(names)


def installed_versions(distributions: Iterable[str]) -> dict[str, str]:
    out = {}
    for dist in distributions:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


@dataclass(frozen=True)
class Machine:
    """Host, CPU, GPU and framework versions; `id` is a short stable hash of all four."""

    host: str
    cpu: str
    gpu: str = ""
    frameworks: tuple[tuple[str, str], ...] = ()  # (distribution, version), sorted

    @property
    def id(self) -> str:
        canonical = json.dumps([self.host, self.cpu, self.gpu, [list(f) for f in self.frameworks]])
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        return " · ".join(part for part in (self.host, self.cpu, self.gpu) if part)

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.id, "host": self.host, "cpu": self.cpu, "gpu": self.gpu,
                "frameworks": dict(self.frameworks)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Machine":
        return cls(host=str(data.get("host") or ""), cpu=str(data.get("cpu") or ""), gpu=str(data.get("gpu") or ""),
                   frameworks=tuple(sorted((str(k), str(v)) for k, v in (data.get("frameworks") or {}).items())))


def this_machine(distributions: Iterable[str]) -> Machine:
    """The machine this process runs on, with the versions of the given framework distributions."""
    return Machine(host=socket.gethostname(), cpu=cpu_model(), gpu=gpu_models(),
                   frameworks=tuple(sorted(installed_versions(distributions).items())))

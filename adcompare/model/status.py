"""The one vocabulary of cell outcomes used by the worker, runner, checker, CLI and report."""
from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OK = "ok"
    MISMATCH = "mismatch"
    NAN = "nan"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    SKIPPED = "skipped"

    @property
    def meaning(self) -> str:
        return MEANINGS[self]

    @property
    def is_failure(self) -> bool:
        """Outcomes that make `adcompare check` exit 1: something ran and went wrong."""
        return self in FAILURES

    def __str__(self) -> str:
        return self.value


MEANINGS = {
    Status.OK: "ran, derivative agrees with the reference within tolerance, timed",
    Status.MISMATCH: "ran, but the derivative disagrees with the reference or another framework beyond tolerance",
    Status.NAN: "ran, but produced NaN or Inf",
    Status.UNSUPPORTED: "the adapter declares this operator/variant/device unsupported (reason recorded)",
    Status.FAILED: "the framework raised an error while preparing or running the cell (message recorded)",
    Status.CRASHED: "the worker process died while running the cell (signal recorded)",
    Status.TIMEOUT: "the cell ran past its time limit and its worker was stopped",
    Status.TOO_LARGE: "a pre-flight estimate says the cell cannot fit in memory; not run",
    Status.SKIPPED: "not run, for the reason recorded (e.g. a smaller size of the same problem timed out)",
}

FAILURES = frozenset({Status.MISMATCH, Status.NAN, Status.FAILED, Status.CRASHED, Status.TIMEOUT})
NOT_RUN = frozenset({Status.UNSUPPORTED, Status.TOO_LARGE, Status.SKIPPED})  # decided without running the cell

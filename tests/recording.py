"""A run observer that keeps what a run tells it (tests that drive run/runner.run directly)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement
from adcompare.model.observer import RunObserver


class Recording(RunObserver):
    """Each cell's record and each worker's start as the runner reported them; `progress` is called on each
    progress event (a test's way to press Ctrl-C at a chosen moment)."""

    def __init__(self, progress: Callable[[Cell | None, Measurement | None], None] | None = None):
        self.cells: list[Measurement] = []
        self.workers: list[dict[str, Any]] = []
        self.progress = progress

    def on_cell(self, measurement: Measurement) -> None:
        self.cells.append(measurement)

    def on_worker(self, info: Mapping[str, Any]) -> None:
        self.workers.append(dict(info))

    def on_progress(self, cell: Cell | None, measurement: Measurement | None) -> None:
        if self.progress is not None:
            self.progress(cell, measurement)

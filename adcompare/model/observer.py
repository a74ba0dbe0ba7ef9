"""What a run tells as it goes: one observer with a hook per event, each a no-op here.

A run session (run/session.py) calls every observer it was given; the results writer, the round journal and the
CLI's progress bar each override the hooks they listen to. The base lives in model/ so that store/ (the writer and
the journal) can implement it without importing run/. Hooks are called in the run's own thread, in order.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement


class RunObserver:
    def on_cell(self, measurement: Measurement) -> None:
        """A cell's record, as the results file keeps it (stamped with its machine, labelled when it failed as
        expected): written once per cell, as the cell finishes (with rounds, after its last round)."""

    def on_round(self, measurement: Measurement, planned: int, confirmation: bool) -> None:
        """One round of a cell timed in rounds (`run --rounds`), stamped with its machine: the rounds planned for
        the cell so far, and whether it is a confirmation round (`--confirm`)."""

    def on_confirm(self, keys: Collection[str]) -> None:
        """The cells `--confirm` chose to time in as many rounds again, before those rounds start."""

    def on_worker(self, info: Mapping[str, Any]) -> None:
        """A worker process started: its adapter, versions, devices and start-up seconds."""

    def on_progress(self, cell: Cell | None, measurement: Measurement | None) -> None:
        """A cell starts (`measurement` None) or ends (one call per cell and round; `cell` None for a cell decided
        without running)."""

    def on_note(self, text: str) -> None:
        """A line for the person watching (an environment being built, a wait on another run's lock)."""

"""The rounds of a `run --rounds N` kept beside its results file until their cells are written.

A cell timed in rounds is written once, after its last round (run/rounds.py), so for the hours of a long run its
finished rounds live only in the driver's memory: Ctrl-C and SIGTERM write them, but a driver killed outright
(SIGKILL, the OOM killer, a lost machine) would lose them. So every round's measurement is also appended here —
`<results file>.rounds`, one JSON line per round, flushed — and the journal is removed once every cell it names
is in the results file. One that is left behind is read back by `run --resume` on the same file
(run/rounds.recovered): each of its cells not yet in the file is written from the rounds it finished, as Ctrl-C
would have written it, and is not run again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcompare.model.measurement import Measurement
from adcompare.store.results import jsonable


@dataclass(frozen=True)
class JournalledRound:
    measurement: Measurement  # one round of one cell, as its worker returned it
    planned: int  # the rounds the cell was to have, confirmation rounds included once chosen
    confirmation: bool  # a confirmation round (run --confirm)


def journal_path(results: str | Path) -> Path:
    return Path(f"{results}.rounds")


class RoundJournal:
    """Appends rounds to `<results>.rounds`; `close(written)` removes it when every cell it names was written."""

    def __init__(self, results: str | Path):
        self.path = journal_path(results)
        self.keys: set[str] = set()
        self._file = self.path.open("w")

    def add(self, measurement: Measurement, planned: int, confirmation: bool = False) -> None:
        record: dict[str, Any] = {"planned": planned, "confirmation": confirmation,
                                  "measurement": measurement.to_json()}
        self._file.write(json.dumps(record, default=jsonable) + "\n")
        self._file.flush()
        self.keys.add(measurement.cell.key)

    def close(self, written: set[str]) -> None:
        """Closed; removed when every cell it names is among the keys `written` to the results file."""
        self._file.close()
        if self.keys <= written:
            self.path.unlink(missing_ok=True)


def read_journal(results: str | Path) -> list[JournalledRound]:
    """The rounds a killed run left beside `results`, in order (a truncated last line, the kill's, is dropped);
    none where there is no journal."""
    path = journal_path(results)
    if not path.exists():
        return []
    rounds = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        rounds.append(JournalledRound(Measurement.from_json(record["measurement"]), int(record["planned"]),
                                      bool(record["confirmation"])))
    return rounds

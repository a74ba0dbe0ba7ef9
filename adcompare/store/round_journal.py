"""The rounds of a `run --rounds N` kept beside its results file until their cells are written.

A cell timed in rounds is written once, after its last round (run/rounds.py), so for the hours of a long run its
finished rounds live only in the driver's memory: Ctrl-C and SIGTERM write them, but a driver killed outright
(SIGKILL, the OOM killer, a lost machine) would lose them. So every round's measurement is also appended here —
`<results file>.rounds`, one JSON line per round, flushed, stamped with the machine that timed it — with the
cells `--confirm` chose to time again, and the journal is removed once every cell it names is in the results
file. One that is left behind is read back by `run --resume` on the same file (run/rounds.recovered): each of
its cells not yet in the file is written from the rounds it finished, as Ctrl-C would have written it, and is
not run again. The journal names the results file it belongs to (its header's date and machine), so one left
beside a file that was since replaced (`--overwrite`) is ignored.
"""
from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adcompare.model.measurement import Measurement
from adcompare.model.observer import RunObserver
from adcompare.store.provenance import Provenance
from adcompare.store.results import jsonable


@dataclass(frozen=True)
class JournalledRound:
    measurement: Measurement  # one round of one cell, as its worker returned it, stamped with its machine
    planned: int  # the rounds the cell was to have, confirmation rounds included once chosen
    confirmation: bool  # a confirmation round (run --confirm)


@dataclass(frozen=True)
class Journal:
    rounds: tuple[JournalledRound, ...] = ()
    confirming: frozenset[str] = field(default_factory=frozenset)  # the cells --confirm chose to time again


def journal_path(results: str | Path) -> Path:
    return Path(f"{results}.rounds")


def owner(results: str | Path) -> str:
    """What names a results file for its journal: its header's date and machine ("" where it has none)."""
    try:
        with Path(results).open() as f:
            head = json.loads(f.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return ""
    if not isinstance(head.get("provenance"), dict):
        return ""
    provenance = Provenance.from_json(head["provenance"])
    return f"{provenance.date} {provenance.machine.id}".strip()


class RoundJournal(RunObserver):
    """Appends rounds to `<results>.rounds`; `close(written)` removes it when every cell it names was written.
    As a run's observer (model/observer.py): each round, and --confirm's choice."""

    def __init__(self, results: str | Path):
        self.path = journal_path(results)
        self.keys: set[str] = set()
        self._file = self.path.open("w")
        self._write({"owner": owner(results)})

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, default=jsonable) + "\n")
        self._file.flush()

    def add(self, measurement: Measurement, planned: int, confirmation: bool = False) -> None:
        self._write({"planned": planned, "confirmation": confirmation, "measurement": measurement.to_json()})
        self.keys.add(measurement.cell.key)

    def choose(self, keys: Collection[str]) -> None:
        """The cells --confirm will time again (so that a kill before their first confirmation round still says
        the rounds they were to have)."""
        self._write({"confirming": sorted(keys)})

    def on_round(self, measurement: Measurement, planned: int, confirmation: bool) -> None:
        self.add(measurement, planned, confirmation)

    def on_confirm(self, keys: Collection[str]) -> None:
        self.choose(keys)

    def close(self, written: set[str]) -> None:
        """Closed; removed when every cell it names is among the keys `written` to the results file."""
        self._file.close()
        if self.keys <= written:
            self.path.unlink(missing_ok=True)


def read_journal(results: str | Path) -> Journal:
    """The rounds a killed run left beside `results`, in order (a truncated last line, the kill's, is dropped);
    empty where there is no journal, or where it belongs to another file that had this name."""
    path = journal_path(results)
    if not path.exists():
        return Journal()
    lines = path.read_text().splitlines()
    try:
        head = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        head = {}
    if head.get("owner") != owner(results):
        return Journal()
    rounds, confirming = [], set()
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "confirming" in record:
            confirming.update(record["confirming"])
        else:
            rounds.append(JournalledRound(Measurement.from_json(record["measurement"]), int(record["planned"]),
                                          bool(record["confirmation"])))
    return Journal(tuple(rounds), frozenset(confirming))

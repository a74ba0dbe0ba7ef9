"""The parent↔worker protocol: every message between runner.py's parent and a worker process, in one place.

One JSON object per line. The parent writes a `Request` per cell on the worker's stdin; the worker writes on its
result pipe (`--result-fd`) first a `WorkerInfo`, then one `CellRecord` per request. A `paced` request (the same
cell in several environments, lockstep.py) has the worker ask before each timed block: it writes a `Turn` and
waits for a `Go` line on stdin, so the parent can alternate the blocks of the cell's environments.
worker.py is the worker's side, worker_handle.py the parent's. A worker in another environment (environments.py)
runs that environment's adcompare, so each side reads what it knows and keeps the rest: a request carries only the
timing settings that differ from `TimingPolicy()`, and a worker record's unknown fields travel on in
`WorkerInfo.extra`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TextIO

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement
from adcompare.model.timing_policy import TimingPolicy

WORKER = "worker"  # the "record" field of the first record
CELL = "cell"  # the "record" field of each measurement
TURN = "turn"  # the "record" field of a paced worker's question before a timed block
# A cell's details key: why its worker exited after it (see Adapter.unusable_after_failure).
RESTART = "worker_restarted"
_DEFAULT_POLICY = TimingPolicy()


@dataclass(frozen=True)
class Request:
    """Parent → worker: run one cell, timed or checked only, under a timing policy; `paced`: ask (`Turn`) before
    each timed block. A worker that does not know `paced` (an older adcompare in another environment) ignores it
    and times the cell unpaced, which the parent accepts."""

    cell: Cell
    time: bool = True
    policy: TimingPolicy = _DEFAULT_POLICY
    paced: bool = False

    def to_json(self) -> dict[str, Any]:
        changed = {k: v for k, v in asdict(self.policy).items() if v != getattr(_DEFAULT_POLICY, k)}
        paced = {"paced": True} if self.paced else {}  # unpaced requests read as they did before
        return {"cell": self.cell.to_json(), "time": self.time, "policy": changed, **paced}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Request":
        return cls(Cell.from_json(data["cell"]), data.get("time", True), TimingPolicy(**data.get("policy", {})),
                   bool(data.get("paced", False)))


@dataclass(frozen=True)
class Turn:
    """Worker → parent, before each timed block of a paced request: `done` when the worker's own timing rule
    (timing.py) would stop here; the last block's seconds per call, wall and process CPU (None before the first
    block), and the seconds its blocks took so far. The parent answers with a `Go`."""

    done: bool
    wall: float | None = None
    cpu: float | None = None
    spent: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"record": TURN, "done": self.done, "wall": self.wall, "cpu": self.cpu, "spent": self.spent}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Turn":
        return cls(bool(data["done"]), data.get("wall"), data.get("cpu"), float(data.get("spent") or 0.0))


@dataclass(frozen=True)
class Go:
    """Parent → worker, the answer to a `Turn`: time one more block (`go`), or stop timing and send the record."""

    go: bool

    def to_json(self) -> dict[str, Any]:
        return {"go": self.go}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Go":
        return cls(bool(data.get("go", False)))


@dataclass(frozen=True)
class WorkerInfo:
    """Worker → parent, once, before any cell: what started (the results file keeps it as a "worker" record).
    `unavailable` says why no cell can run in it (its cells are then recorded unsupported)."""

    adapter: str
    dtype: str
    device: str
    device_name: str = ""
    threads: int = 1
    pid: int = 0
    startup_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    unavailable: str | None = None
    devices: int = 1  # the device count its cells split across (Cell.devices); part of its worker group
    device_setup: str = ""  # what the worker set up for them, e.g. "4 emulated host devices share … 2 cores"
    extra: dict[str, Any] = field(default_factory=dict)  # fields from another adcompare version, kept as sent

    def to_json(self) -> dict[str, Any]:
        data = {"record": WORKER, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}}
        if self.devices == 1 and not self.device_setup:  # single-device worker records read as they did before
            del data["devices"], data["device_setup"]
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "WorkerInfo":
        known = {f.name for f in fields(cls)} - {"extra"}
        given = {k: v for k, v in data.items() if k in known}
        given.update(startup_seconds=float(data.get("startup_seconds") or 0.0),
                     versions=dict(data.get("versions") or {}))
        return cls(**given, extra={k: v for k, v in data.items() if k not in known and k != "record"})


@dataclass(frozen=True)
class CellRecord:
    """Worker → parent, once per request: the cell's measurement, and `restart` (why) when the worker exits after
    it; the reason stays in the measurement's details under `RESTART`, so the results file says it too."""

    measurement: Measurement
    restart: str | None = None

    def to_json(self) -> dict[str, Any]:
        m = self.measurement
        if self.restart:
            m = replace(m, details={**m.details, RESTART: self.restart})
        return {"record": CELL, **m.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CellRecord":
        measurement = Measurement.from_json(data)
        return cls(measurement, measurement.details.get(RESTART))


Message = Request | WorkerInfo | CellRecord | Turn | Go


def line(message: Message) -> str:
    """One message as the protocol's line of JSON."""
    return json.dumps(message.to_json()) + "\n"


def send(stream: TextIO, message: Message) -> None:
    stream.write(line(message))
    stream.flush()

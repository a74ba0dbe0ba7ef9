"""The parent↔worker protocol: every message between runner.py's parent and a worker process, in one place.

One JSON object per line. The parent writes a `Request` per cell on the worker's stdin; the worker writes on its
result pipe (`--result-fd`) first a `WorkerInfo`, then one `CellRecord` per request, preceded, where the request
asks, by `Progress` records as the cell goes (so a cell its timeout stops keeps the calls it finished). A `paced`
request (the same cell in several environments, lockstep.py) has the worker ask before each timed block: it
writes a `Turn` and waits for a `Go` line on stdin, so the parent can alternate the blocks of the cell's
environments.
worker.py is the worker's side, worker_handle.py the parent's. A worker in another environment (environments.py)
runs that environment's adcompare, so each side reads what it knows and keeps the rest: a request carries only the
timing settings that differ from `TimingPolicy()`, and a worker record's unknown fields travel on in
`WorkerInfo.extra`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, TextIO

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement
from adcompare.model.timing_policy import TimingPolicy

WORKER = "worker"  # the "record" field of the first record
CELL = "cell"  # the "record" field of each measurement
TURN = "turn"  # the "record" field of a paced worker's question before a timed block
PROGRESS = "progress"  # the "record" field of a worker's report on a cell still running
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
    timeout: float | None = None  # the cell's timeout, seconds from the request: a slow cell times what fits
    progress: bool = False  # send `Progress` records while the cell runs

    def to_json(self) -> dict[str, Any]:
        changed = {k: v for k, v in asdict(self.policy).items() if v != getattr(_DEFAULT_POLICY, k)}
        paced = {"paced": True} if self.paced else {}  # unpaced requests read as they did before
        extra = {"timeout": self.timeout} if self.timeout is not None else {}
        if self.progress:
            extra["progress"] = True
        return {"cell": self.cell.to_json(), "time": self.time, "policy": changed, **paced, **extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Request":
        known = {f.name for f in fields(TimingPolicy)}  # a newer parent's settings that this worker lacks: dropped
        policy = TimingPolicy(**{k: v for k, v in data.get("policy", {}).items() if k in known})
        return cls(Cell.from_json(data["cell"]), data.get("time", True), policy, bool(data.get("paced", False)),
                   data.get("timeout"), bool(data.get("progress", False)))


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
    startup_seconds: float = 0.0  # from launch to this record, as the parent waited (worker_handle.start)
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
class Progress:
    """Worker → parent, while a cell runs, so that a cell stopped by its timeout keeps what it finished
    (worker_handle.py): `stage` STARTED as prepare and the first call begin; CALLED with the first call's seconds
    once it returned; CHECKED with the measurement so far (status, check, details; no timing) once its result is
    checked, as the timing begins; CALL with one timed call's wall and CPU seconds (slow cells, timing.py rule 7).
    A worker sends them only when the request asks (`Request.progress`): an older parent would read one as the
    cell's record."""

    stage: str
    seconds: float | None = None
    cpu: float | None = None
    measurement: Measurement | None = None
    compile_seconds: float | None = None  # CHECKED: the adapter's compile time where it took it ahead of time
    compile_method: str = ""

    STARTED: ClassVar[str] = "started"
    CALLED: ClassVar[str] = "called"
    CHECKED: ClassVar[str] = "checked"
    CALL: ClassVar[str] = "call"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"record": PROGRESS, "stage": self.stage}
        if self.seconds is not None:
            data.update(seconds=self.seconds, cpu=self.cpu)
        if self.measurement is not None:
            data["measurement"] = self.measurement.to_json()
        if self.compile_seconds is not None:
            data.update(compile_seconds=self.compile_seconds, compile_method=self.compile_method)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Progress":
        m = data.get("measurement")
        return cls(str(data["stage"]), data.get("seconds"), data.get("cpu"),
                   Measurement.from_json(m) if m else None, data.get("compile_seconds"),
                   str(data.get("compile_method") or ""))


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


Message = Request | WorkerInfo | CellRecord | Turn | Go | Progress


def line(message: Message) -> str:
    """One message as the protocol's line of JSON."""
    return json.dumps(message.to_json()) + "\n"


def send(stream: TextIO, message: Message) -> None:
    stream.write(line(message))
    stream.flush()

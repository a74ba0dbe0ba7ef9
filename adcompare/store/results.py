"""The results file: versioned JSON Lines with a provenance header, one record per cell appended as it finishes.

Line 1: {"format": "adcompare-results", "schema": 4, "provenance": {..., "machine": {...}}}
Then one object per line: {"record": "cell", ...Measurement.to_json()}, {"record": "worker", ...start-up info},
{"record": "machine", ...Machine.to_json()} (the fingerprints that cell records name in "machine") or, where
`run --resume` appended a chunk, {"record": "resume", ...Resumption.to_json()} (its date, adcompare and commit;
additive: an adcompare that predates it skips the record, as every reader skips a kind it does not know).
A truncated last line (a killed run) is dropped with a warning; a file that is not adcompare results, or has a
newer schema, is refused with one clear line.

Schema history: 1 had no fingerprint (a cell's machine is derived from the file's header on load); 2 adds the
machine fingerprint to every cell record and to the merge key, and (additive) the framework versions its worker
loaded (`versions`) and, for a cell of a named environment (`run --env`), `cell.environment` and the header's
`environments` (requirements, interpreter, installed versions, fingerprint of each), and (additive, no bump) a
timed cell's `timing.rounds`, the median of each round of `run --rounds N` (rounds.py): files without it read as
before (empty, compared on the within-run rule), and an adcompare that predates it ignores it; 3 adds
`timing.stopped` (why a timing has fewer samples than its rule asks: a slow cell's deadline, or the calls kept from a
worker its cell timeout stopped, worker_handle.py), and a timed cell may now have 1 or 2 samples. The bump makes an
adcompare that predates it refuse such a file instead of ranking a 1-sample cell as a full one; files of schema 1
and 2 read as before (`stopped` empty: every timing in them ran its rule to the end); 4 adds
`check.projection_weights`: a per-example cell's projection weighs each example and each of its entries apart
(check.PER_EXAMPLE_WEIGHTS), no longer every entry with its own draw, and projections of different weights are not
compared. An adcompare that predates it would compare them and call right cells mismatches, so it refuses the file;
older files read as before (weights "": every entry its own draw), and resuming one upgrades its header.
"""
from __future__ import annotations

import fcntl
import gzip
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adcompare.model.errors import ResultsFileError, UsageError
from adcompare.model.fingerprint import Machine
from adcompare.model.measurement import Measurement
from adcompare.model.observer import RunObserver
from adcompare.model.problem import Problem
from adcompare.store.benchmark_import import load_benchmark_json
from adcompare.store.output_paths import ensure_folder, refuse_existing
from adcompare.store.provenance import Provenance, Resumption
from adcompare.store.record_validity import record_problem
from adcompare.verify.finish import finished

FORMAT = "adcompare-results"
SCHEMA = 4


@dataclass(frozen=True)
class Results:
    """Loaded results, possibly merged from several files. Later files win on an equal (machine, cell key); the
    same cell measured on two machines stays two measurements."""

    provenance: tuple[Provenance, ...]  # each file's header, in the order loaded
    measurements: tuple[Measurement, ...]
    workers: tuple[dict[str, Any], ...] = ()
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    machines: tuple[Machine, ...] = ()  # every fingerprint the measurements name, in order of first appearance
    resumptions: tuple[Resumption, ...] = ()  # each `run --resume` chunk of the files, in the order read

    def machine(self, fingerprint: str) -> Machine | None:
        return next((m for m in self.machines if m.id == fingerprint), None)


def header(provenance: Provenance) -> dict[str, Any]:
    return {"format": FORMAT, "schema": SCHEMA, "provenance": provenance.to_json()}


def _read_lines(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    head, numbered, notes = _read_numbered(path)
    return head, [record for _, record in numbered], notes


def _read_numbered(path: Path) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]], list[str]]:
    """The header, each record with its line number (1-based, for messages), and notes on dropped lines."""
    try:  # a published baseline is committed gzipped (benchmarks/results/full/)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    except OSError as exc:
        raise ResultsFileError(f"cannot read results file {str(path)!r}: {exc.strerror or exc}") from exc
    lines = text.splitlines()
    if not lines:
        raise ResultsFileError(f"{str(path)!r} is empty, not an adcompare results file")
    try:
        head = json.loads(lines[0])
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise ResultsFileError(
            f"{str(path)!r} is not an adcompare results file (its first line lacks \"format\": \"{FORMAT}\")"
        )
    if not isinstance(head.get("schema"), int) or head["schema"] > SCHEMA:
        raise ResultsFileError(
            f"{str(path)!r} has results schema {head.get('schema')!r}, newer than this adcompare reads "
            f"({SCHEMA}); upgrade adcompare"
        )
    records, notes = [], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError:
            last = number == len(lines)
            note = (f"{path}: dropped truncated last line {number} (a killed run)" if last
                    else f"{path}: skipped unreadable line {number}")
            notes.append(note)
            warnings.warn(note, stacklevel=3)
    return head, records, notes


def load(paths: Sequence[str | Path], problems: Mapping[str, Problem] | None = None) -> Results:
    """Read and merge results files (pytest-benchmark JSON is imported, see benchmark_import), finished once
    (verify/finish.py): cross-checked across the merged cells, and labelled where they failed as a known
    limitation of `problems` (the registry's; without them, the labels the records carry are kept — the run
    wrote each cell's as it finished — and only files from before the label lack one)."""
    provenance: list[Provenance] = []
    resumptions: list[Resumption] = []
    workers, sources, notes = [], [], []
    machines: dict[str, Machine] = {}
    by_key: dict[tuple[str, str], Measurement] = {}
    for p in map(Path, paths):
        if p.suffix == ".json":
            prov, measurements = load_benchmark_json(p)
            own = prov.machine
            machines.setdefault(own.id, own)
            provenance.append(prov)
            by_key.update((m.merge_key, m) for m in (replace(m, machine=own.id) for m in measurements))
            sources.append(str(p))
            continue
        head, numbered, file_notes = _read_numbered(p)
        notes += file_notes
        records = [r for _, r in numbered]
        file_workers = [r for r in records if r.get("record") == "worker"]
        header_read = Provenance.from_json(head["provenance"], file_workers)
        own = header_read.machine
        machines.setdefault(own.id, own)
        provenance.append(header_read)
        sources.append(str(p))
        workers += file_workers
        for number, rec in numbered:
            kind = rec.get("record")
            if kind == "cell":
                m = _read_measurement(p, number, rec)
                if not m.machine:
                    m = replace(m, machine=own.id)
                by_key[m.merge_key] = m
            elif kind == "machine":
                other = Machine.from_json(rec)
                machines.setdefault(other.id, other)
            elif kind == "resume":
                resumptions.append(Resumption.from_json(rec, str(p)))
    named = dict.fromkeys(m.machine for m in by_key.values())
    merged = finished(list(by_key.values()), problems or {})  # pairwise/adjoint agreement: derived, never stored
    return Results(tuple(provenance), tuple(merged), tuple(workers), tuple(sources), tuple(notes),
                   tuple(machines[i] for i in named if i in machines), tuple(resumptions))


def _read_measurement(path: Path, number: int, rec: dict[str, Any]) -> Measurement:
    """The record's measurement, or one line naming the file, line and field when the record cannot be one: an
    impossible time (timing_validity) or a missing or unknown field (record_validity)."""
    why = record_problem(rec)
    if not why:
        try:
            return Measurement.from_json(rec)
        except (KeyError, TypeError, ValueError) as exc:  # a shape record_problem does not know yet
            why = f"{type(exc).__name__}: {exc}"
    raise ResultsFileError(f"{path}:{number}: cell {rec.get('key', '?')!r} ({rec.get('status', '?')}): {why}; "
                           f"the record cannot be a measurement — fix or delete that line")


def finished_keys(path: str | Path) -> set[str]:
    """Keys of cells already recorded in `path` (for --resume); a cell skipped as `resumable` (left out by
    --max-time) counts as not finished unless a later record finished it."""
    path = Path(path)
    if not path.exists():
        return set()
    _, records, _ = _read_lines(path)
    done = {}
    for r in records:
        if r.get("record") == "cell":
            done[r["key"]] = not (r.get("details") or {}).get("resumable")
    return {key for key, finished in done.items() if finished}


def cells_in(path: str | Path) -> int:
    """How many cell records `path` holds (0 where it cannot be read): a progress count, not a load."""
    try:
        with Path(path).open() as f:
            return sum(1 for line in f if line.startswith('{"record": "cell"'))
    except OSError:
        return 0


def merge_files(paths: Sequence[str | Path], out: str | Path) -> None:
    """One results file from several (a study's shards): the first file's header, then each file's machine,
    worker and cell records, every cell stamped with its own file's machine. Written beside `out` and renamed into
    place, so an interrupted merge leaves the old file whole."""
    out = Path(out)
    tmp = out.with_name(out.name + ".merging")
    with tmp.open("w") as f:
        for i, path in enumerate(map(Path, paths)):
            head, records, _ = _read_lines(path)
            own = Provenance.from_json(head["provenance"], [r for r in records if r.get("record") == "worker"]).machine
            if i == 0:  # this schema, as a resume upgrades: an older shard's records read unchanged under it, and
                # a shard left at an older schema must not label a newer shard's records with its own
                f.write(json.dumps({**head, "schema": SCHEMA}) + "\n")
            f.write(json.dumps({"record": "machine", **own.to_json()}) + "\n")
            for rec in records:
                if rec.get("record") == "cell" and not rec.get("machine"):
                    rec = {**rec, "machine": own.id}
                f.write(json.dumps(rec, default=jsonable) + "\n")
    tmp.replace(out)


class ResultsWriter(RunObserver):
    """Appends records as cells finish, flushing each line so a killed run loses nothing finished; as a run's
    observer (model/observer.py), each cell's record and each worker's start.

    An existing file is refused unless `resume` (append) or `overwrite` (replace); `fresh` names a file this run
    itself just created empty. The writer holds an exclusive lock on the file, so a second run writing the same
    file is refused instead of interleaving its lines."""

    def __init__(self, path: str | Path, provenance: Provenance | Mapping[str, Any], *, resume: bool = False,
                 overwrite: bool = False, fresh: bool = False):
        self.path = Path(path)
        ensure_folder(self.path.parent)
        if not fresh:
            refuse_existing(self.path, resume=resume, overwrite=overwrite)
        if not isinstance(provenance, Provenance):  # a header as JSON (a test's, a benchmark's fixture)
            provenance = Provenance.from_json(provenance)
        self.machine = provenance.machine
        self.cells = 0  # cells this writer added: what an interrupted run kept
        self.keys: set[str] = set()  # and their keys
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot write results file {str(self.path)!r}: {exc.strerror}; choose another -o") \
                from exc
        self._file = os.fdopen(fd, "r+")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise UsageError(f"results file {str(self.path)!r} is being written by another adcompare run; wait for "
                             f"it to finish or choose another -o") from None
        resumed = resume and self.path.stat().st_size > 0
        if resumed:
            head, _, _ = _read_lines(self.path)  # refuse foreign files before appending
            data = self.path.read_bytes()
            keep = len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1  # a killed run's partial line
            if head["schema"] < SCHEMA:  # upgrade: its records read unchanged under this schema, ours would not
                self._upgrade_header(data, head)  # under its own (a schema-2 reader would rank 1-sample cells)
            self._file.truncate(keep)
            self._file.seek(keep)
        else:
            self._file.truncate(0)
            self._write(header(provenance))
        self.add_machine(self.machine)  # a resume may run on another machine than the one that started the file
        if resumed:  # the header names the first chunk's commit and date; this names this chunk's
            self._write({"record": "resume", **Resumption.of(provenance).to_json()})

    def _upgrade_header(self, data: bytes, head: dict[str, Any]) -> None:
        """The header line rewritten with this schema, in place and byte for byte the same length (the schema is one
        digit), so that no moment of the rewrite leaves the file without its records; a header that would change
        length (edited by hand) is refused rather than risked."""
        old = data.split(b"\n", 1)[0]
        new = json.dumps({**head, "schema": SCHEMA}).encode()
        if len(new) != len(old):
            new = old.replace(f'"schema": {head["schema"]}'.encode(), f'"schema": {SCHEMA}'.encode(), 1)
        if len(new) != len(old) or json.loads(new).get("schema") != SCHEMA:
            self._file.close()
            raise UsageError(f"cannot upgrade {str(self.path)!r} from results schema {head['schema']} to {SCHEMA} "
                             f"in place; resume into a new file (-o NEW.jsonl) and report both")
        self._file.seek(0)
        self._file.write(new.decode())
        self._file.flush()

    def add_machine(self, machine: Machine) -> None:
        self._write({"record": "machine", **machine.to_json()})

    def _write(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, default=jsonable) + "\n")
        self._file.flush()

    def add(self, measurement: Measurement) -> None:
        """Append one cell, stamped with this run's machine unless it names its own (merged from a shard)."""
        if not measurement.machine:
            measurement = replace(measurement, machine=self.machine.id)
        self._write({"record": "cell", **measurement.to_json()})
        self.cells += 1
        self.keys.add(measurement.cell.key)

    def add_worker(self, info: Mapping[str, Any]) -> None:
        self._write({"record": "worker", **info})

    def on_cell(self, measurement: Measurement) -> None:
        self.add(measurement)

    def on_worker(self, info: Mapping[str, Any]) -> None:
        self.add_worker(info)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def jsonable(value: Any) -> Any:
    """NaN/inf floats are valid in Python's json; NumPy scalars are not JSON types."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Iterable):
        return list(value)
    return str(value)

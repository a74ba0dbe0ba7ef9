"""A run session: the one entry point from a plan to finished measurements, which the commands only call.

`run`, `check` and `report`'s quick-suite run hand `run_session` typed values — the registry, the plan, the
`RunOptions`, where to write (an `Output`: a results file and its provenance header), the `--env` environments —
and observers (the CLI's progress bar; model/observer.py). The session then does what a run is:
- holds the environments for as long as workers start from them (study/environments.in_use), named with their
  fingerprints in the header it writes;
- writes each cell's record as it finishes — stamped with the machine that timed it, labelled when it failed as
  expected — with `--rounds`, each round to the round journal beside the file, and `--confirm`'s choice;
- ends on Ctrl-C or SIGTERM with `Interrupted`/`Terminated`, saying what the file kept and how to go on;
- returns the measurements finished once (verify/finish.py): cross-checked across cells and labelled.
The CLI parses, calls this, and prints. Models: benchopt's `run_benchmark` → `_run_benchmark`, asv's
`run_benchmarks(..., results=)`.
"""
from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.errors import Interrupted, SigtermReceived, Terminated
from adcompare.model.fingerprint import Machine, this_machine
from adcompare.model.measurement import Measurement
from adcompare.model.observer import RunObserver
from adcompare.plugin.registry import Registry
from adcompare.run import runner
from adcompare.store.provenance import EnvironmentRecord, Provenance
from adcompare.store.results import ResultsWriter
from adcompare.store.round_journal import RoundJournal
from adcompare.study import environments
from adcompare.study.environment_specs import EnvironmentSpec
from adcompare.study.plan import Plan
from adcompare.verify.expectations import labelled
from adcompare.verify.finish import finished


@dataclass(frozen=True)
class Output:
    """Where a session writes: a results file, its header's provenance, and what to do with a file that exists
    (`resume`: append; `overwrite`: replace; `fresh`: this run itself just created it empty)."""

    path: Path
    provenance: Provenance
    resume: bool = False
    overwrite: bool = False
    fresh: bool = False
    then: str = ""  # after an interruption: how to go on from the cells the file kept


def distributions(registry: Registry) -> list[str]:
    """Every framework distribution an adapter names (a machine fingerprint lists their versions)."""
    return [d for a in registry.adapters.values() for d in (a.distribution, *a.runtime_distributions)]


def run_session(registry: Registry, plan: Plan, options: runner.RunOptions, *, output: Output | None = None,
                environments_named: Sequence[EnvironmentSpec] = (), observers: Sequence[RunObserver] = (),
                left_out: Sequence[Measurement] = (), recovered: Sequence[Measurement] = ()) -> list[Measurement]:
    """Run `plan` and return its measurements finished, `recovered` (cells a killed run left in its round
    journal) and `left_out` (cells --max-time did not schedule) written first and returned with them."""
    writer_of: list[ResultsWriter] = []
    try:
        with sigterm_as_interrupt():
            return _run(registry, plan, options, output, environments_named, observers, left_out, recovered,
                        writer_of)
    except KeyboardInterrupt as stop:
        if output is None:
            raise
        kept = writer_of[0].cells - len(left_out) if writer_of else 0  # left_out: recorded as planned, not run
        raise interrupted(output.path, kept, output.then, terminated=isinstance(stop, SigtermReceived)) from None


def _run(registry: Registry, plan: Plan, options: runner.RunOptions, output: Output | None,
         specs: Sequence[EnvironmentSpec], observers: Sequence[RunObserver], left_out: Sequence[Measurement],
         recovered: Sequence[Measurement], writer_of: list[ResultsWriter]) -> list[Measurement]:
    everyone = _Everyone(observers)
    with ExitStack() as stack:
        built = stack.enter_context(environments_in_use(registry, specs, everyone)) if specs else {}
        isolated = {n: e for n, e in built.items() if n != environments.CURRENT}
        options = dataclasses.replace(options, interpreters={n: e.python for n, e in isolated.items()})
        machines: dict[str, Machine] = {}
        own_machine = ""
        if output is not None:
            provenance = dataclasses.replace(output.provenance, environments=environments_header(registry, specs,
                                                                                                   built))
            writer = stack.enter_context(ResultsWriter(output.path, provenance, resume=output.resume,
                                                       overwrite=output.overwrite, fresh=output.fresh))
            writer_of.append(writer)
            machines = {n: e.machine(writer.machine, distributions(registry)) for n, e in isolated.items()}
            for other in machines.values():
                writer.add_machine(other)
            own_machine = writer.machine.id
            everyone.add(writer)
            if options.rounds > 1:
                journal = RoundJournal(writer.path)
                stack.callback(journal.close, writer.keys)  # removed once every cell it names is written
                everyone.add(journal)
        for m in left_out:
            everyone.on_cell(m)
        finishing = _Stamping(everyone, machines, own_machine, registry.problems)
        for m in recovered:
            finishing.on_cell(m)
        measured = runner.run(registry, plan, options, observer=finishing)
        return finished([*recovered, *measured, *left_out], registry.problems)


def environments_header(registry: Registry, specs: Sequence[EnvironmentSpec],
                        built: Mapping[str, environments.Environment]) -> dict[str, EnvironmentRecord]:
    """The header's `environments`: each --env's requirements, interpreter and installed versions, with the
    fingerprint of the machine its cells carry."""
    if not specs:
        return {}
    host = this_machine(())
    return {s.name: EnvironmentRecord(requirements=tuple(built[s.name].requirements), python=built[s.name].python,
                                      path=built[s.name].path, installed=dict(built[s.name].installed),
                                      machine=built[s.name].machine(host, distributions(registry)))
            for s in specs}


@contextmanager
def environments_in_use(registry: Registry, specs: Sequence[EnvironmentSpec],
                        observer: RunObserver = RunObserver()) -> Iterator[dict[str, environments.Environment]]:
    """The `--env` environments, built or taken from the cache and locked against other runs' reinstalls until the
    block ends (the run's workers start from them throughout); what building them says goes to `observer`."""
    with environments.in_use(specs, say=observer.on_note) as built:
        yield built


class _Everyone(RunObserver):
    """Every observer of a session, each told every event in turn."""

    def __init__(self, observers: Sequence[RunObserver]):
        self.observers = list(observers)

    def add(self, observer: RunObserver) -> None:
        self.observers.insert(0, observer)  # the files first: a progress bar that raises must not lose a record

    def on_cell(self, measurement: Measurement) -> None:
        for o in self.observers:
            o.on_cell(measurement)

    def on_round(self, measurement: Measurement, planned: int, confirmation: bool) -> None:
        for o in self.observers:
            o.on_round(measurement, planned, confirmation)

    def on_confirm(self, keys: Collection[str]) -> None:
        for o in self.observers:
            o.on_confirm(keys)

    def on_worker(self, info: Mapping[str, Any]) -> None:
        for o in self.observers:
            o.on_worker(info)

    def on_progress(self, cell: Cell | None, measurement: Measurement | None) -> None:
        for o in self.observers:
            o.on_progress(cell, measurement)

    def on_note(self, text: str) -> None:
        for o in self.observers:
            o.on_note(text)


class _Stamping(_Everyone):
    """The runner's observer: each record stamped with the machine that timed it (a named environment's own
    fingerprint) and labelled when it failed as expected, before the session's observers see it."""

    def __init__(self, everyone: _Everyone, machines: Mapping[str, Machine], own_machine: str, problems):
        self.observers = everyone.observers  # the same list, not a copy: the session's observers, whenever added
        self.machines, self.own_machine, self.problems = dict(machines), own_machine, problems

    def _stamped(self, m: Measurement) -> Measurement:
        m = environments.stamp(m, self.machines)
        return m if m.machine or not self.own_machine else dataclasses.replace(m, machine=self.own_machine)

    def on_cell(self, measurement: Measurement) -> None:
        super().on_cell(labelled(environments.stamp(measurement, self.machines), self.problems))

    def on_round(self, measurement: Measurement, planned: int, confirmation: bool) -> None:
        super().on_round(self._stamped(measurement), planned, confirmation)


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a scheduler's end of job, `kill`) ends the session as Ctrl-C does, so the file says what it kept."""
    def terminate(signum, frame):
        raise SigtermReceived

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(path: str | Path, kept: int, then: str, terminated: bool = False) -> Interrupted:
    """What Ctrl-C (or SIGTERM: `terminated`) left of a run writing `path`: its `kept` cells, each flushed as it
    finished; `then` says how to go on from them."""
    how, error = ("terminated (SIGTERM)", Terminated) if terminated else ("interrupted", Interrupted)
    if kept == 0:
        return error(f"{how} before any cell finished; {str(path)!r} holds none of this run's cells")
    return error(f"{how}; the {kept} cell(s) that finished are in {str(path)!r}: {then}")

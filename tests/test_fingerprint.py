"""Machine fingerprints: every record names the machine that timed it; the merge key includes it."""
from __future__ import annotations

import json
import socket

from adcompare.model.cell import Cell
from adcompare.model.fingerprint import Machine, this_machine
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.status import Status
from adcompare.report.page import _provenance
from adcompare.store.results import ResultsWriter, load

CELL = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float32")
BOX_A = Machine("box-a", "AMD EPYC 7B13", "", (("jax", "0.10.2"),))
BOX_B = Machine("box-b", "AMD EPYC 7B13", "", (("jax", "0.10.2"),))


def _write(path, machine: Machine, median: float) -> None:
    with ResultsWriter(path, {"host": machine.host, "machine": machine.to_json()}) as w:
        w.add(Measurement(CELL, Status.OK, timing=Timing((median,) * 3, 10, 1e-3)))


def test_the_id_changes_with_any_part_and_is_stable():
    ids = {m.id for m in (BOX_A, BOX_B, Machine("box-a", "AMD EPYC 7B13", "NVIDIA H100", BOX_A.frameworks),
                          Machine("box-a", "AMD EPYC 7B13", "", (("jax", "0.9.2"),)))}
    assert len(ids) == 4
    assert Machine.from_json(json.loads(json.dumps(BOX_A.to_json()))).id == BOX_A.id


def test_this_machine_reads_versions_without_importing_frameworks():
    here = this_machine(["numpy", "no-such-distribution"])
    assert here.host == socket.gethostname() and here.cpu
    assert dict(here.frameworks).keys() == {"numpy"}


def test_the_same_cell_on_two_machines_is_two_records(tmp_path):
    _write(tmp_path / "a.jsonl", BOX_A, 1e-5)
    _write(tmp_path / "b.jsonl", BOX_B, 2e-5)
    results = load([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert sorted(m.machine for m in results.measurements) == sorted([BOX_A.id, BOX_B.id])
    assert {m.id for m in results.machines} == {BOX_A.id, BOX_B.id}


def test_the_same_cell_on_one_machine_is_replaced_by_the_later_file(tmp_path):
    _write(tmp_path / "a1.jsonl", BOX_A, 1e-5)
    _write(tmp_path / "a2.jsonl", BOX_A, 3e-5)
    results = load([tmp_path / "a1.jsonl", tmp_path / "a2.jsonl"])
    assert [m.timing.median for m in results.measurements] == [3e-5]


def test_files_from_one_machine_are_one_machine_on_the_page(tmp_path):
    for name in ("1", "2", "3", "4"):
        _write(tmp_path / f"{name}.jsonl", BOX_A, 1e-5)
    _write(tmp_path / "b.jsonl", BOX_B, 1e-5)
    blocks = _provenance(load(sorted(tmp_path.glob("*.jsonl"))))
    assert len(blocks) == 2
    files = dict(blocks[0])["files"]
    assert all(f"{n}.jsonl" in files for n in "1234")


def test_schema_1_files_still_load_with_their_header_machine(tmp_path):
    path = tmp_path / "old.jsonl"
    lines = [{"format": "adcompare-results", "schema": 1, "provenance": {"host": "old-box", "cpu": "Xeon"}},
             {"record": "worker", "adapter": "jax", "versions": {"jax": "0.4.30"}},
             {"record": "cell", **Measurement(CELL, Status.OK, timing=Timing((1e-5,) * 3, 10, 1e-3)).to_json()}]
    lines[2].pop("machine")
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    results = load([path])
    expected = Machine("old-box", "Xeon", "", (("jax", "0.4.30"),))
    assert [m.machine for m in results.measurements] == [expected.id]
    assert results.machines == (expected,)

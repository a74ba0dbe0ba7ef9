"""A run's workers share their float64 references (verify/shared_references.py): one worker differences, the
others read its file; nothing is shared without the run's directory, across keys, or with another environment."""
from __future__ import annotations

import dataclasses
import weakref
from pathlib import Path

import numpy as np
import pytest

from adcompare.model.cell import Cell
from adcompare.model.status import Status
from adcompare.plugin import registry as plugins
from adcompare.run.worker_handle import WorkerProcess, worker_environment
from adcompare.verify import reference as ref_module
from adcompare.verify import shared_references
from adcompare.verify.cell_inputs import cell_inputs
from adcompare.verify.reference import clear_cache, reference


@pytest.fixture
def problem(registry):
    return registry.problems["exp_dot_loss"]


def _inputs(problem, dtype="float64"):
    return cell_inputs(problem, problem.size("n100"), "grad", dtype)


@pytest.fixture
def sharing(tmp_path, monkeypatch):
    """A run's shared directory, every reference worth a file whatever this machine's speed."""
    monkeypatch.setenv(shared_references.ENV, str(tmp_path))
    monkeypatch.setattr(shared_references, "SHARE_ABOVE", 0.0)
    monkeypatch.setattr(shared_references, "READ_RATE", float("inf"))  # a fast machine's µs references too
    clear_cache()
    yield tmp_path
    clear_cache()


def _no_differencing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("differenced again, not read from the run's shared reference")
    monkeypatch.setattr(ref_module, "_compute", refuse)


def test_a_reference_differenced_once_is_read_by_the_next_worker(problem, sharing, monkeypatch):
    tmp_path = sharing
    first = reference(problem, "n100", "grad", _inputs(problem))
    assert not first.shared and len(list(tmp_path.glob("*.pickle"))) == 1
    clear_cache()  # as in a fresh worker
    _no_differencing(monkeypatch)
    again = reference(problem, "n100", "grad", _inputs(problem))
    assert again.shared and again.method == first.method and again.error_bound == first.error_bound
    np.testing.assert_array_equal(again.value, first.value)
    clear_cache()


def test_other_keys_and_no_directory_are_differenced(problem, tmp_path, monkeypatch):
    monkeypatch.setattr(shared_references, "SHARE_ABOVE", 0.0)
    monkeypatch.delenv(shared_references.ENV, raising=False)
    clear_cache()
    reference(problem, "n100", "grad", _inputs(problem))  # no directory: nothing kept
    monkeypatch.setenv(shared_references.ENV, str(tmp_path))
    clear_cache()
    reference(problem, "n100", "grad", _inputs(problem))
    reference(problem, "n100", "grad", _inputs(problem, "float32"))  # another dtype, another point
    reference(problem, "n100", "grad", _inputs(problem), budget=0.5)  # another budget
    assert len(list(tmp_path.glob("*.pickle"))) == 3
    clear_cache()


def test_a_reference_read_back_is_a_read_only_mapping_of_its_file(registry, sharing, monkeypatch):
    """The arrays of a shared reference are views of its file, mapped: nothing copied until read (BA's value at
    p = 28,987,644: 700 MB unpickled in 2.3-2.6 s per worker), none writable, each at a 64-byte boundary; the
    directional ones as well as a full value, equal to what was differenced."""
    problem = registry.problems["mlp_loss"]  # per-example: directions with a right vector and an expected per example
    inputs = cell_inputs(problem, problem.size("B16-h4"), "vmap_jacfwd", "float64")
    first = reference(problem, "B16-h4", "vmap_jacfwd", inputs, budget=0.0)  # directional
    values = cell_inputs(problem, problem.size("B16-h4"), "value", "float64")
    full = reference(problem, "B16-h4", "value", values)
    clear_cache()
    _no_differencing(monkeypatch)
    for ours, theirs in ((reference(problem, "B16-h4", "vmap_jacfwd", inputs, budget=0.0), first),
                         (reference(problem, "B16-h4", "value", values), full)):
        assert ours.shared
        arrays = [a for a in (ours.value, *(x for d in ours.directional for x in (d.expected, d.right)))
                  if a is not None]
        theirs_arrays = [a for a in (theirs.value, *(x for d in theirs.directional for x in (d.expected, d.right)))
                         if a is not None]
        assert len(arrays) == len(theirs_arrays) > 0
        for a, b in zip(arrays, theirs_arrays):
            np.testing.assert_array_equal(a, b)
            assert not a.flags.writeable and a.ctypes.data % shared_references.ALIGN == 0
            assert not a.flags.owndata  # a view of the mapping, not a copy
    clear_cache()


def test_a_file_cut_short_in_its_arrays_is_differenced_again(problem, sharing):
    reference(problem, "n100", "grad", _inputs(problem))
    (kept,) = sharing.glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:-8])
    clear_cache()
    assert not reference(problem, "n100", "grad", _inputs(problem)).shared


def test_a_half_written_file_is_differenced_again(problem, sharing):
    tmp_path = sharing
    reference(problem, "n100", "grad", _inputs(problem))
    (kept,) = tmp_path.glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:20])
    clear_cache()
    assert not reference(problem, "n100", "grad", _inputs(problem)).shared
    clear_cache()


def test_only_workers_of_the_runs_own_environment_share(tmp_path, monkeypatch):
    monkeypatch.setenv(shared_references.ENV, "/somewhere/else")
    assert worker_environment(1, tmp_path, share_references=True)[shared_references.ENV] == \
        str(Path(tmp_path) / "references")
    assert shared_references.ENV not in worker_environment(1, tmp_path, share_references=False)
    assert shared_references.ENV not in worker_environment(1, None, share_references=True)


def test_a_second_worker_reads_the_reference_the_first_differenced(tmp_path):
    """Real workers, one after the other, as a --max-time run's rounds or a run's adapters start them: the
    second records that it read the first's reference instead of differencing it again."""
    plugin = str(Path(__file__).parent / "fixtures" / "plugins" / "slow_reference.py")
    problem = plugins.load((plugin,)).problems["slow_reference_sum"]
    cell = Cell(problem.name, problem.smallest_size.label, "grad", "autograd", "eager", "cpu", "float64")
    records = []
    for _ in range(2):
        with WorkerProcess("autograd", "float64", "cpu", 1, (plugin,), tmp_path) as worker:
            records.append(worker.run(cell, timeout=120, time_it=False))
    assert [m.status for m in records] == [Status.OK, Status.OK], [m.message for m in records]
    assert "reference_shared" not in records[0].details and records[1].details["reference_shared"] is True
    assert len(list((tmp_path / "references").glob("*.pickle"))) == 1


def test_a_reference_is_shared_when_reading_it_back_beats_computing_it():
    mb = 2**20
    assert shared_references.worth_sharing(7.0, 219 * mb)  # BA's largest value: 7-11 s of NumPy in each worker
    assert not shared_references.worth_sharing(0.05, 64 * mb)  # a cheap gradient: the round trip costs more
    assert shared_references.worth_sharing(0.05, 1 * mb)
    assert not shared_references.worth_sharing(0.01, 1)  # below SHARE_ABOVE, however small
    assert not shared_references.worth_sharing(60.0, 2 * 2**30)  # over LARGEST: the disk is not the run's to fill


def test_the_points_digest_covers_every_byte_and_hashes_a_large_array_once_while_it_lives(problem, monkeypatch):
    """Equal inputs give equal digests, one changed bit or another operator's vectors another; a worker's inputs
    (built from its size, kept read-only: cell_inputs' `reuse`) are keyed by their origin, their bytes never hashed
    (BA's largest hold 3.9 GB: 2.3-2.9 s a worker), and a fresh build of the same origin (another worker) gets the
    same digest; other read-only arrays are hashed once while that very array lives, and the memo keeps none
    alive."""
    clear_cache()
    point = ref_module._point(_inputs(problem))
    assert ref_module._point(_inputs(problem)).digest == point.digest
    other = ref_module._point(cell_inputs(problem, problem.size("n100"), "jvp", "float64"))
    assert other.digest != point.digest and other.where == point.where
    moved = _inputs(problem)
    moved.wrt[3] = np.nextafter(moved.wrt[3], np.inf)  # one bit of one input
    assert ref_module._point(moved).digest != point.digest
    monkeypatch.setattr(ref_module, "DIGEST_KEPT_ABOVE", 0)
    hashed = []
    real = ref_module.hashlib.sha256
    monkeypatch.setattr(ref_module.hashlib, "sha256",
                        lambda *a: hashed.append(1 if a and a[0].nbytes else 0) or real(*a))  # non-empty data
    clear_cache()
    kept = cell_inputs(problem, problem.size("n100"), "grad", "float64", reuse=True)  # a worker's: read-only
    keyed = ref_module._point(kept)
    assert kept.origin and sum(hashed) == 0  # no byte of its point hashed (grad: no tangent, no cotangent)
    cell_inputs(problem, problem.size("n100"), "grad", "float64")  # drops the kept arrays: the next are fresh
    fresh = cell_inputs(problem, problem.size("n100"), "grad", "float64", reuse=True)  # as another worker's
    assert fresh.wrt is not kept.wrt and ref_module._point(fresh).digest == keyed.digest and sum(hashed) == 0
    assert ref_module._point(cell_inputs(problem, problem.size("n100"), "grad", "float32", reuse=True)).digest \
        != keyed.digest  # another origin
    anonymous = dataclasses.replace(fresh, origin="")  # read-only arrays of no stated origin: their bytes
    before = sum(hashed)
    assert ref_module._point(anonymous).digest == point.digest
    arrays = sum(hashed) - before  # one sha256 per non-empty array
    assert arrays >= 2
    ref_module._point(anonymous)  # the check's: none again
    ref_module._point(dataclasses.replace(anonymous, tangent=None))  # another cell, the same arrays: none again
    assert sum(hashed) - before == arrays
    assert ref_module._point(dataclasses.replace(fresh, wrt=fresh.wrt.copy())).digest == point.digest  # writable
    dropped = weakref.ref(anonymous.wrt)
    del anonymous, fresh
    cell_inputs(problem, problem.size("n100"), "grad", "float64")  # drops the worker's kept inputs
    assert dropped() is None  # the memo held no array
    writable = _inputs(problem)
    before = ref_module._point(writable).digest
    writable.wrt[0] += 1.0  # a writable array may change in place: never memoised
    assert ref_module._point(writable).digest != before
    clear_cache()


def test_a_reference_found_cached_converts_no_input_to_float64(problem, monkeypatch):
    """The check asks for the reference the cell's first call was checked against: found by its digest, without
    the float64 copies of the inputs that differencing needs (BA's largest float32 inputs: 0.35 s to copy)."""
    clear_cache()
    built = []
    real = ref_module._point
    monkeypatch.setattr(ref_module, "_point", lambda *a: built.append(1) or real(*a))
    kept = cell_inputs(problem, problem.size("n100"), "grad", "float32", reuse=True)
    first = reference(problem, "n100", "grad", kept)
    assert reference(problem, "n100", "grad", kept) is first and len(built) == 1
    clear_cache()


def test_a_runs_shared_files_stop_at_their_total(problem, sharing, monkeypatch):
    tmp_path = sharing
    reference(problem, "n100", "grad", _inputs(problem))
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    monkeypatch.setattr(shared_references, "RUN_TOTAL", sum(f.stat().st_size for f in tmp_path.glob("*.pickle")))
    reference(problem, "n100", "grad", _inputs(problem, "float32"))  # would pass the run's total: not kept
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    clear_cache()


@pytest.mark.parametrize("first,second", [("jacfwd", "jacrev"), ("vmap_jacrev", "vmap_jacfwd")])
def test_a_jacobian_pair_reads_one_reference_whichever_worker_differenced_it(registry, sharing, monkeypatch, first,
                                                                             second):
    """A size's jacfwd and jacrev are checked against one Jacobian, as are vmap_jacfwd and vmap_jacrev: a --max-time
    run's rounds often put the two in different workers, and each differenced its own (1-2 s apiece for BA's
    per-example cells on an H100)."""
    problem = registry.problems["linear_layer"]
    size = problem.size("n5-p8-o2")
    before = reference(problem, size, first, cell_inputs(problem, size, first, "float64"))
    clear_cache()  # as in a fresh worker
    _no_differencing(monkeypatch)
    after = reference(problem, size, second, cell_inputs(problem, size, second, "float64"))
    assert after.shared and after.method == before.method
    np.testing.assert_array_equal(after.value, before.value)
    clear_cache()

"""Expectations keyed by framework versions: a framework bug excuses a cell only on the versions verified to have
it, is labelled `mismatch (expected)` with its reproducer, and its reproducer still fails where it is listed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.fingerprint import installed_versions
from adcompare.model.measurement import Check, Measurement
from adcompare.model.status import Status
from adcompare.run import runner
from adcompare.store import results
from adcompare.verify.expectations import (
    EXPECTED_KEY,
    FRAMEWORK_BUGS,
    REPRODUCER_KEY,
    expected,
    expected_reason,
    expected_reproducer,
    framework_bug,
    labelled,
    size_dims,
    unexpected,
)

ROOT = Path(__file__).resolve().parents[1]
BA = Cell("bundle_adjustment", "n5-m50-p300", "jacrev", "jax", "compiled", "cpu", "float32")
MESSAGE = "error 1.00e+00 (tolerance 1.0e-04; central differences, full Jacobian)"


def as_the_worker_writes(cell: Cell, status: Status, jaxlib: str) -> Measurement:
    """A measurement record as runner.run returns it: the check, its message, the versions its worker loaded."""
    error = 1.0 if status is Status.MISMATCH else 6.1e-7
    return Measurement(cell, status, MESSAGE if status is Status.MISMATCH else "", support="native",
                       algorithm="jacrev: vmap of VJPs",
                       check=Check(error=error, tolerance=1.000001e-4, reference_method="central differences"),
                       versions={"jax": jaxlib, "jaxlib": jaxlib})


def test_a_framework_bug_applies_only_on_the_versions_verified_to_have_it():
    bug = FRAMEWORK_BUGS[("jax", "bundle_adjustment", "jacrev", "compiled", "cpu")]
    assert framework_bug(BA, {"jaxlib": "0.10.2"}) is bug
    for fixed_or_unverified in ("0.10.1", "0.10.3", "0.11.0"):
        assert framework_bug(BA, {"jaxlib": fixed_or_unverified}) is None
    assert framework_bug(BA, {"jax": "0.10.2"}) is None  # the deciding distribution is jaxlib
    for other in (Cell("bundle_adjustment", "n5-m50-p300", "jacrev", "jax", "eager", "cpu", "float32"),
                  Cell("bundle_adjustment", "n5-m50-p300", "jacrev", "jax", "compiled", "cpu", "float64"),
                  Cell("bundle_adjustment", "n3-m10-p30", "jacrev", "jax", "compiled", "cpu", "float32")):
        assert framework_bug(other, {"jaxlib": "0.10.2"}) is None


def test_labelled_on_an_affected_version_is_an_expected_mismatch_with_its_reproducer(registry):
    m = labelled(as_the_worker_writes(BA, Status.MISMATCH, "0.10.2"), registry.problems)
    assert m.status is Status.MISMATCH and "YNNPACK" in expected_reason(m)
    assert expected_reproducer(m) == "docs/framework-bugs/jax_ynn_reduce_wrong.md"
    assert unexpected(m, registry.problems) is None
    # The label survives the results file (details are written and read back).
    again = Measurement.from_json(m.to_json())
    assert again.details[EXPECTED_KEY] == m.details[EXPECTED_KEY] and again.details[REPRODUCER_KEY]


def test_a_release_that_fixes_it_is_not_excused_and_a_stale_entry_flags_itself(registry):
    fixed = labelled(as_the_worker_writes(BA, Status.MISMATCH, "0.10.1"), registry.problems)
    assert expected_reason(fixed) is None and expected_reproducer(fixed) is None
    assert "mismatch" in unexpected(fixed, registry.problems)  # a mismatch on another version is unexplained
    passing = as_the_worker_writes(BA, Status.OK, "0.10.2")  # listed as affected, but right: the entry is stale
    assert "expected mismatch" in unexpected(passing, registry.problems)
    assert unexpected(as_the_worker_writes(BA, Status.OK, "0.10.1"), registry.problems) is None


@pytest.mark.parametrize("key", list(FRAMEWORK_BUGS), ids="/".join)
def test_every_framework_bug_has_its_reproducer_and_it_still_fails_where_listed(key):
    bug = FRAMEWORK_BUGS[key]
    page = ROOT / bug.reproducer
    script = page.with_suffix(".py")
    assert page.is_file() and script.is_file(), f"{key}: add {bug.reproducer} and its script"
    assert bug.status in (Status.MISMATCH, Status.NAN) and bug.title
    # an upstream issue, or a page saying none was found yet (and what was searched), until one is filed
    assert bug.upstream or "**upstream:** none found" in page.read_text().lower(), f"{key}: link its upstream issue"
    assert script.name in page.read_text() and "exits 1" in script.read_text().lower()
    installed = installed_versions((bug.distribution,)).get(bug.distribution)
    if installed is None:
        pytest.skip(f"{bug.distribution} is not installed")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    if installed in bug.affected_versions:
        assert run.returncode == 1, f"{script.name} passes on {bug.distribution} {installed}, listed as affected: " \
                                    f"drop the version from expectations.py\n{run.stdout}{run.stderr}"
    else:
        assert run.returncode == 0, f"{script.name} fails on {bug.distribution} {installed}, not listed: add it " \
                                    f"to affected_versions in expectations.py\n{run.stdout}{run.stderr}"


# --- expectations from a size on: torch.compile's unrolled LSTM ----------------------------------------------------

def lstm_cell(size: str, operator: str = "grad", variant: str = "compiled") -> Cell:
    return Cell("lstm", size, operator, "torch", variant, "cpu", "float64")


def timed_out(cell: Cell) -> Measurement:
    """A timeout as the parent writes it when it stops a worker (run/worker_handle.py)."""
    return Measurement(cell, Status.TIMEOUT, "ran past the 300 s cell timeout; worker stopped")


@pytest.mark.parametrize("label, dims", [
    ("l1-c80-b14", {"l": 1, "c": 80, "b": 14}),
    ("l2-c80-b7-l2_c80.input-0123456789ab", {"l": 2, "c": 80, "b": 7}),  # GradBench's file, its stem not read
    ("l1-c8-b14-seed7", {"l": 1, "c": 8, "b": 14, "seed": 7}),
    ("d2-K3-n1-test-0fabb0c23497", {"d": 2, "K": 3, "n": 1}),
    ("n10-c5-n10", {"n": 10, "c": 5}),  # a stem that looks like dimensions does not replace them
    ("file", {}),
])
def test_size_dims_reads_the_dimensions_a_label_begins_with(label, dims):
    assert size_dims(label) == dims


def test_torch_compiled_lstm_is_expected_to_time_out_from_c_80_grad_and_c_800_value():
    for size in ("l1-c80-b14", "l1-c800-b14", "l2-c80-b7-l2_c80.input-0123456789ab",
                 "l2-c1024-b14-lstm_l2_c1024-0123456789ab", "l4-c4096-b14"):
        for op in ("grad", "vjp"):
            status, reason = expected(lstm_cell(size, op), compilable=True)
            assert status is Status.TIMEOUT and "unrolls" in reason, (size, op)
    for not_covered in (lstm_cell("l1-c8-b14"), lstm_cell("l1-c79-b14"), lstm_cell("file"),  # below c = 80
                        lstm_cell("l1-c80-b14", variant="eager"),  # eager runs the loop op by op
                        Cell("lstm", "l1-c80-b14", "grad", "jax", "compiled", "cpu", "float64"),  # lax.scan
                        Cell("lstm", "l1-c80-b14", "grad", "torch", "compiled", "cuda", "float64")):  # unmeasured
        assert expected(not_covered, compilable=True) is None, not_covered
    # The objective alone compiles in 73 s at c = 80; at c = 800 it ran past the timeout.
    assert expected(lstm_cell("l1-c80-b14", "value"), compilable=True) is None
    for size in ("l1-c800-b14", "l2-c1024-b14-lstm_l2_c1024-0123456789ab"):
        assert expected(lstm_cell(size, "value"), compilable=True)[0] is Status.TIMEOUT
    # An entry without sizes still applies at every size (its meaning is unchanged).
    assert expected(lstm_cell("l1-c8-b14", "jvp"), compilable=True)[0] is Status.CRASHED
    assert expected(Cell("control_loop", "n10", "grad", "autograd", "eager", "cpu", "float64"), True)[0] \
        is Status.FAILED


def test_a_timeout_from_c_80_is_labelled_expected_and_still_recorded_as_timeout(registry):
    m = labelled(timed_out(lstm_cell("l2-c80-b7-l2_c80.input-0123456789ab")), registry.problems)
    assert m.status is Status.TIMEOUT and "unrolls" in expected_reason(m)
    assert unexpected(m, registry.problems) is None
    assert Measurement.from_json(m.to_json()).status is Status.TIMEOUT
    small = labelled(timed_out(lstm_cell("l1-c8-b14")), registry.problems)
    assert expected_reason(small) is None and "timeout" in unexpected(small, registry.problems)
    # With a longer --timeout the compile may finish: ok is no failure for check or run (only the strict table
    # test calls it stale).
    done = labelled(Measurement(lstm_cell("l1-c80-b14"), Status.OK, support="native"), registry.problems)
    assert expected_reason(done) is None and not done.status.is_failure


def _finished_as(status_of, monkeypatch):
    """Let `runner.run` end every planned cell as `status_of(cell)` says, as the parent records a stopped worker
    (the unrolled compile takes minutes; what is under test is the labelling and the exit code)."""
    def fake_run(registry, plan, options, *, observer, **_):
        out = [Measurement(c, status_of(c), "ran past the 300 s cell timeout; worker stopped"
                           if status_of(c) is Status.TIMEOUT else "", support="native") for c in plan.cells]
        for m in out:
            observer.on_cell(m)
        return out

    monkeypatch.setattr(runner, "run", fake_run)


LSTM_CHECK = ["--problem", "lstm", "--adapter", "torch", "--variant", "compiled", "--operator", "grad,vjp",
              "--dtype", "float64", "--no-progress"]


def test_check_and_run_exit_0_on_the_expected_lstm_timeouts(monkeypatch, tmp_path, capsys):
    _finished_as(lambda cell: Status.TIMEOUT, monkeypatch)
    assert main(["check", *LSTM_CHECK, "--size", "l1-c80-b14"]) == 0
    assert "2 cells failed as expected" in capsys.readouterr().err
    out = tmp_path / "lstm.jsonl"
    assert main(["run", *LSTM_CHECK, "--size", "l1-c80-b14", "-o", str(out)]) == 0
    records = results.load([out]).measurements  # as `adcompare report` reads them back
    assert sorted((m.cell.operator, m.status) for m in records) == [("grad", Status.TIMEOUT),
                                                                    ("vjp", Status.TIMEOUT)]
    assert all("unrolls" in expected_reason(m) for m in records)


def test_check_exits_1_on_a_timeout_below_c_80(monkeypatch, capsys):
    _finished_as(lambda cell: Status.TIMEOUT, monkeypatch)
    assert main(["check", *LSTM_CHECK, "--size", "l1-c8-b14"]) == 1
    assert "2 of 2 cells failed the check" in capsys.readouterr().err

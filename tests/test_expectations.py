"""Expectations keyed by framework versions: a framework bug excuses a cell only on the versions verified to have
it, is labelled `mismatch (expected)` with its reproducer, and its reproducer still fails where it is listed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.cell import Cell
from adcompare.expectations import (EXPECTED_KEY, FRAMEWORK_BUGS, REPRODUCER_KEY, expected_reason,
                                    expected_reproducer, framework_bug, labelled, unexpected)
from adcompare.fingerprint import installed_versions
from adcompare.measurement import Check, Measurement
from adcompare.status import Status

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
    assert bug.status in (Status.MISMATCH, Status.NAN) and bug.title and bug.upstream
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

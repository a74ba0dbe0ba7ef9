"""`adcompare check --json` on an input file whose body does not match its header: planning reads the header only,
so the cells are planned, fail in the worker with the reader's message naming the file, and the listing goes on —
`reference_value: null`, exit 1, one line on stderr, no traceback (it used to crash re-reading the file for the
reference value)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import FIXTURES

GMM_GOOD = FIXTURES / "adbench" / "gmm" / "test.txt"
ADBENCH_GMM_OBJECTIVE = 8.07380408004975791  # ADBench's published objective for data/gmm/test.txt


def _truncated_gmm(tmp_path):
    """ADBench's gmm/test.txt with K = 4 in its header, though the body holds the 3 components' rows."""
    lines = GMM_GOOD.read_text().splitlines()
    d, _, n = lines[0].split()
    path = tmp_path / "gmm_claims_more.txt"
    path.write_text("\n".join([f"{d} 4 {n}", *lines[1:]]) + "\n")
    return path


def _truncated_ba(tmp_path):
    """ADBench's ba/test.txt without its last row (the feature): the header's `n m p` still reads."""
    lines = [line for line in (FIXTURES / "adbench" / "ba" / "test.txt").read_text().splitlines() if line.strip()]
    path = tmp_path / "ba_claims_more.txt"
    path.write_text("\n".join(lines[:-1]) + "\n")
    return path


def _check(*argv):
    return subprocess.run([sys.executable, "-m", "adcompare", "check", "--adapter", "autograd", "--variant", "eager",
                           "--operator", "value", "--json", "--no-progress", *argv],
                          capture_output=True, text=True, timeout=600)  # ~5 s; a safety net only


@pytest.mark.parametrize("problem, make", [("gmm", _truncated_gmm), ("bundle_adjustment", _truncated_ba)])
def test_check_json_lists_a_failed_file_fed_cell_with_a_null_reference_value(tmp_path, problem, make):
    bad = make(tmp_path)
    done = _check("--problem", problem, "--inputs", str(bad))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == ["1 of 1 cells failed the check"]
    [record] = [json.loads(line) for line in done.stdout.splitlines()]
    assert record["status"] == "failed"
    assert record["reference_value"] is None
    assert str(bad) in record["message"] and "not ADBench's" in record["message"]  # the reader's reason
    assert "\n" not in record["message"]


def test_a_bad_file_beside_a_good_one_keeps_the_good_ones_reference_value(tmp_path):
    bad = _truncated_gmm(tmp_path)
    done = _check("--problem", "gmm", "--inputs", str(bad), "--inputs", str(GMM_GOOD))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    records = {r["size"].split("-")[3]: r for r in map(json.loads, done.stdout.splitlines())}
    assert set(records) == {"gmm_claims_more", "test"}
    assert records["gmm_claims_more"]["reference_value"] is None
    assert records["test"]["status"] == "ok"
    assert records["test"]["reference_value"] == pytest.approx(ADBENCH_GMM_OBJECTIVE, abs=1e-8)

"""tests/shared_results.py: a result several test modules assert on is computed once per run, also when
pytest-xdist spreads those modules over worker processes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from .per_adapter import ROOT

MODULE = """
import time
from pathlib import Path

from tests.shared_results import once_per_run

def compute():
    with open(Path(__file__).parent / "computed.txt", "a") as f:
        f.write("computed\\n")
    time.sleep(0.5)  # long enough for the other worker to ask while this one computes
    return {"answer": 42}

def test_reads_the_shared_result():
    assert once_per_run("answer", compute) == {"answer": 42}
"""


def test_two_workers_compute_a_shared_result_once(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import _run_folder  # noqa: F401\n")
    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(textwrap.dedent(MODULE))
    for xdist in (["-n", "2", "--dist", "loadscope"], ["-p", "no:xdist"]):
        (tmp_path / "computed.txt").unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                               str(tmp_path), "--basetemp", str(tmp_path / "base"), *xdist, str(tmp_path)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
        assert (tmp_path / "computed.txt").read_text() == "computed\n", xdist

"""`--executor slurm` against a real one-node SLURM cluster on localhost (tests/slurm_cluster.py), compared with
`--executor local` and the unsharded plan. Skips with the reason where SLURM or submitit cannot be had, unless
ADCOMPARE_REQUIRE_SLURM=1 (set by CI after .ci/install-slurm), where that is a failure."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from adcompare.store.results import load

from .slurm_cluster import Cluster, missing

SELECTION = ["--problem", "f_xy,f_r2_r3", "--adapter", "autograd", "--dtype", "float32", "--suite", "full"]


def _unavailable() -> str | None:
    why = missing()
    try:
        import submitit  # noqa: F401
    except ImportError:
        why = why or "submitit is not installed (pip install 'adcompare[slurm]')"
    return why


@pytest.fixture(scope="module")
def cluster():
    why = _unavailable()
    if why:
        if os.environ.get("ADCOMPARE_REQUIRE_SLURM") == "1":
            pytest.fail(f"ADCOMPARE_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    # Not pytest's tmp_path: its parents are mode 700, and munged refuses a socket other users cannot reach.
    c = Cluster(Path(tempfile.mkdtemp(prefix="adcompare-slurm-")))
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(c.root, ignore_errors=True)


def adcompare(*argv: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adcompare", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=900)


def planned_keys(tmp_path: Path) -> set[str]:
    done = adcompare("run", *SELECTION, "--dry-run", "--json", "-o", str(tmp_path / "plan.jsonl"))
    assert done.returncode == 0, done.stderr
    return {row["key"] for row in json.loads(done.stdout)["cells"]}


def test_slurm_job_array_gives_the_local_executors_cells(cluster, tmp_path):
    slurm_out, local_out = tmp_path / "slurm.jsonl", tmp_path / "local.jsonl"
    done = adcompare("run", *SELECTION, "--executor", "slurm", "--shards", "2", "--slurm-time", "10",
                     "-o", str(slurm_out), env=cluster.env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr + cluster.logs()
    assert "submitted 2 job(s)" in done.stderr and "cells recorded" in done.stderr
    done = adcompare("run", *SELECTION, "--executor", "local", "--shards", "2", "-o", str(local_out))
    assert done.returncode == 0, done.stdout + done.stderr

    slurm, local = load([slurm_out]), load([local_out])
    keys = [m.cell.key for m in slurm.measurements]
    assert len(keys) == len(set(keys))  # no cell twice
    assert set(keys) == {m.cell.key for m in local.measurements} == planned_keys(tmp_path)
    shard_files = sorted((tmp_path / "slurm.jsonl.shards").glob("shard-*-of-2.jsonl"))
    assert len(shard_files) == 2
    per_shard = [{m.cell.key for m in load([p]).measurements} for p in shard_files]
    assert per_shard[0] and per_shard[1] and not per_shard[0] & per_shard[1]
    # Every record names the machine (node + fingerprint) that timed it, and the node is this one (the cluster's).
    assert {m.machine for m in slurm.measurements} <= {m.id for m in slurm.machines}
    assert cluster.node in {m.host.split(".")[0] for m in slurm.machines}


def test_an_unreachable_scheduler_is_one_line_not_a_traceback(tmp_path):
    why = _unavailable()
    if why:
        pytest.skip(why)
    broken = tmp_path / "slurm.conf"
    broken.write_text("")  # sbatch refuses it at once (a missing file costs a minute of DNS lookups)
    env = {**os.environ, "SLURM_CONF": str(broken)}
    done = adcompare("run", *SELECTION, "--executor", "slurm", "-o", str(tmp_path / "x.jsonl"), env=env)
    assert done.returncode == 1
    assert "adcompare: --executor slurm: submitting the job array failed" in done.stderr
    assert "Traceback" not in done.stderr

"""`--executor local`: the shards run one after another as processes and merge into --output; a shard whose job
died keeps its finished cells and `--resume` runs only the rest; `adcompare report shard*.jsonl` merges shards.
A shard's command line repeats exactly the allow-listed options the driver was given."""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from adcompare.cli.arguments import SHARD_OPTIONS, add_run_arguments
from adcompare.cli.main import build_parser, main
from adcompare.cli.run import sharded_run
from adcompare.model.status import Status
from adcompare.run.executors import ShardedRun, SlurmOptions, shard_command, shard_paths
from adcompare.store.results import load

SELECTION = ["--problem", "f_xy,f_r2_r3", "--adapter", "autograd", "--dtype", "float32", "--suite", "full"]


def adcompare(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adcompare", *argv], capture_output=True, text=True, timeout=900)


def cell_records(path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()[1:]) if r.get("record") == "cell"]


def test_local_shards_merge_resume_and_report(tmp_path, capsys):
    out = tmp_path / "study.jsonl"
    plan = adcompare("run", *SELECTION, "--dry-run", "--json", "-o", str(out))
    planned = {row["key"] for row in json.loads(plan.stdout)["cells"]}

    done = adcompare("run", *SELECTION, "--executor", "local", "--shards", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    shards = sorted((tmp_path / "study.jsonl.shards").glob("shard-*-of-2.jsonl"))
    assert len(shards) == 2
    merged = load([out])
    assert {m.cell.key for m in merged.measurements} == planned
    assert all(m.machine in {x.id for x in merged.machines} for m in merged.measurements)

    # A job that died after two cells: its file keeps those; --resume reruns only the rest of that shard.
    lines = shards[0].read_text().splitlines()
    cells = [i for i, line in enumerate(lines) if line.startswith('{"record": "cell"')]
    kept = lines[: cells[1] + 1]
    lost = {json.loads(lines[i])["key"] for i in cells[2:]}
    assert lost, "the first shard has more than two cells"
    shards[0].write_text("\n".join(kept) + "\n")
    untouched = shards[1].read_text()
    done = adcompare("run", *SELECTION, "--executor", "local", "--shards", "2", "--resume", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert shards[1].read_text().startswith(untouched)
    counts = Counter(r["key"] for r in cell_records(shards[0]))
    assert all(n == 1 for n in counts.values()) and lost <= set(counts)
    assert {m.cell.key for m in load([out]).measurements} == planned

    # The report reads the shard files as one study.
    report = tmp_path / "report"
    assert main(["report", *map(str, shards), "-o", str(report)]) == 0
    assert (report / "index.html").exists()
    assert {m.cell.key for m in load(shards).measurements} == planned


DRIVER_OPTIONS = {"--output", "--resume", "--overwrite", "--dry-run", "--json", "--no-progress", "--confirm", "--shard",
                  "--executor", "--shards", "--shard-dir", "--slurm-partition", "--slurm-gpus-per-job",
                  "--slurm-cpus-per-job", "--slurm-time", "--slurm-exclusive", "--help"}


def test_every_run_option_is_either_repeated_by_the_shards_or_the_drivers_own():
    """A new `run` option must be placed: on the allow-list, or here (otherwise shards would silently drop it)."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    flags = {flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")}
    assert set(SHARD_OPTIONS) | DRIVER_OPTIONS == flags
    assert not set(SHARD_OPTIONS) & DRIVER_OPTIONS


def test_a_shards_command_line_carries_exactly_the_allow_listed_options_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "extra.py").write_text("")
    given = ["--problem", "f_xy,f_r2_r3", "--adapter", "autograd", "--adapter", "jax", "--suite", "full",
             "--timeout", "60", "--threads", "2", "--rounds", "3", "--env", "old=jax==0.9.2 jaxlib==0.9.2",
             "--max-time", "15m", "--plugin", "extra.py"]
    driver = ["-o", "study.jsonl", "--executor", "slurm", "--shards", "3", "--shard-dir", "jobs", "--resume",
              "--no-progress", "--slurm-time", "5", "--slurm-exclusive", "--slurm-partition", "gpu"]
    args = build_parser().parse_args(["run", *driver, *given])
    request = sharded_run(args, args.output)
    assert request == ShardedRun(output=Path("study.jsonl"), shard_options=request.shard_options, executor="slurm",
                                 shards=3, shard_dir=Path("jobs"), resume=True,
                                 slurm=SlurmOptions(partition="gpu", time_minutes=5, exclusive=True))
    # In allow-list order, values as parsed, files made absolute; options left at their defaults are not repeated.
    assert shard_command(request, 2, Path("jobs/shard-2-of-3.jsonl")) == [
        sys.executable, "-m", "adcompare", "run",
        "--problem", "f_xy,f_r2_r3", "--adapter", "autograd", "--adapter", "jax", "--suite", "full",
        "--timeout", "60.0", "--threads", "2", "--rounds", "3", "--env", "old=jax==0.9.2 jaxlib==0.9.2",
        "--max-time", "15m", "--plugin", str(tmp_path / "extra.py"),
        "--shard", "2/3", "-o", "jobs/shard-2-of-3.jsonl", "--no-progress", "--resume"]
    assert shard_paths(request)[2] == Path("jobs/shard-3-of-3.jsonl")
    # Nothing given but the driver's options: a shard runs `adcompare run` with its own defaults.
    bare = sharded_run(build_parser().parse_args(["run", "--executor", "local", "-o", "x.jsonl"]), "x.jsonl")
    assert shard_command(bare, 1, Path("x.jsonl.shards/shard-1-of-2.jsonl"))[4:] == [
        "--shard", "1/2", "-o", "x.jsonl.shards/shard-1-of-2.jsonl", "--no-progress"]
    assert shard_paths(bare)[0] == Path("x.jsonl.shards/shard-1-of-2.jsonl")


def test_sigterm_to_the_driver_stops_the_shard_gracefully_and_merges_what_finished(tmp_path):
    """A scheduler ending the driver's own job: SIGTERM is passed on to the running shard, which writes its
    finished cells as on Ctrl-C; the driver merges what the shards hold and exits 143, saying how to go on."""
    pytest.importorskip("autograd")
    out = tmp_path / "study.jsonl"
    argv = [sys.executable, "-m", "adcompare", "run", "--adapter", "autograd", "--problem", "exp_dot_loss",
            "--size", "n10", "--operator", "value,grad", "--variant", "eager", "--dtype", "float64", "--rounds",
            "100", "--executor", "local", "--shards", "2", "-o", str(out)]
    driver = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    journal = tmp_path / "study.jsonl.shards" / "shard-1-of-2.jsonl.rounds"
    deadline = time.monotonic() + 300  # a safety net: the first round of shard 1 takes seconds
    # the journal's owner line, then two rounds
    while time.monotonic() < deadline and (not journal.exists() or journal.read_text().count("\n") < 3):
        time.sleep(0.1)
    driver.send_signal(signal.SIGTERM)
    said = " ".join(driver.communicate(timeout=600)[0].split())
    assert driver.returncode == 143, said
    assert f"terminated (SIGTERM); the 1 cell(s) that finished are in '{out}': rerun the same command with " \
           f"--resume" in said
    (m,) = load([out]).measurements  # shard 1's cell, from the rounds it finished; shard 2 never started
    assert m.status is Status.OK and 2 <= m.details["rounds"] < 100 and m.details["rounds_planned"] == 100
    assert not journal.exists()  # the shard wrote its cell itself: nothing left for --resume to recover

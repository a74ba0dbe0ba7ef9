"""Executors: run a study's N shards as jobs and merge their results files into `--output`; what to run comes as a
`ShardedRun` request (the CLI builds it from `adcompare run --executor ...`).

Each job is the ordinary command for one shard, `adcompare run <the same selection> --shard K/N -o DIR/shard-K-of-N
.jsonl`, so a job writes (and flushes) its cells as they finish, stamps them with the fingerprint of the node that
timed them, and a job that fails or is preempted loses only its unfinished cells: `--resume` resubmits every shard
with `--resume`, and finished cells are kept. Shards are split from the cost model alone (not from measured history,
which differs per node), so every job computes the same split.

- `local`: the shards run one after another as local processes (one at a time, so timings stay fair).
- `slurm`: one job per shard as a SLURM job array through submitit's `AutoExecutor` (`pip install
  'adcompare[slurm]'`); the jobs run this same interpreter (`sys.executable`), and DIR must be on a filesystem the
  nodes share. `--slurm-exclusive` gives each job a whole node.
"""
from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rich.console import Console

from adcompare.model.errors import SchedulerError, SigtermReceived, UsageError
from adcompare.store.output_paths import ensure_folder
from adcompare.store.results import cells_in, merge_files

err = Console(stderr=True)


@dataclass(frozen=True)
class SlurmOptions:
    """How each job of the array is submitted (submitit's parameters)."""
    partition: str | None = None  # None: the cluster's default
    gpus_per_job: int = 0  # --gres gpu:G
    cpus_per_job: int | None = None  # None: SLURM's default
    time_minutes: int = 60  # time limit per job
    exclusive: bool = False  # one job per node, nothing else beside it: the fair setting for timings


@dataclass(frozen=True)
class ShardedRun:
    """A study run as `shards` jobs whose results files are merged into `output`.

    `shard_options` are the command-line words every shard's `adcompare run` repeats (its selection, run options,
    plugins, as the CLI's allow-list picks them); each job adds its own `--shard K/N -o FILE --no-progress`."""
    output: Path
    shard_options: tuple[str, ...] = ()
    executor: Literal["local", "slurm"] = "local"
    shards: int = 2
    shard_dir: Path | None = None  # None: OUTPUT.shards/
    resume: bool = False  # keep the shard files' finished cells and run the rest
    overwrite: bool = False  # replace shard files an earlier study left
    slurm: SlurmOptions = field(default_factory=SlurmOptions)


def shard_paths(request: ShardedRun) -> list[Path]:
    folder = request.shard_dir or Path(f"{request.output}.shards")
    return [folder / f"shard-{k}-of-{request.shards}.jsonl" for k in range(1, request.shards + 1)]


def shard_command(request: ShardedRun, k: int, output: Path) -> list[str]:
    """The `adcompare run` command line of shard k: the shared options, then one shard, its own file."""
    argv = [sys.executable, "-m", "adcompare", "run", *request.shard_options]
    argv += ["--shard", f"{k}/{request.shards}", "-o", str(output), "--no-progress"]
    return argv + (["--resume"] if request.resume else [])


def run_shard_job(argv: Sequence[str]) -> int:
    """A job's body (pickled by submitit, run on the node): the shard's command; its exit status. Interrupted,
    it waits for the shard to write its finished cells before going on up: Ctrl-C at a terminal reached the shard
    too (one process group), while SIGTERM (as `run` raises it) was this process's alone and is passed on, the
    shard's `run` handling it as Ctrl-C."""
    shard = subprocess.Popen(list(argv))
    try:
        return shard.wait()
    except KeyboardInterrupt as stop:
        if isinstance(stop, SigtermReceived):
            shard.terminate()
        try:
            shard.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:  # what it flushed stays (with --rounds, the round journal too)
            shard.kill()
            shard.wait()
        raise


STOP_GRACE_SECONDS = 600  # a shard writes what finished within seconds of SIGTERM; this is a safety net


def run_study(request: ShardedRun) -> int:
    """Run every shard with the request's executor, merge the shard files into its output; exit 1 when a cell
    failed or a shard did not finish."""
    if request.shards < 1:
        raise UsageError(f"--shards {request.shards} must be at least 1")
    paths = shard_paths(request)
    ensure_folder(paths[0].parent)
    earlier = [p for p in paths if p.exists()]
    if earlier and not request.resume:
        if not request.overwrite:  # another study's shards: never deleted unasked
            raise UsageError(f"{str(paths[0].parent)!r} already holds {len(earlier)} shard file(s); add --resume to "
                             f"complete them, --overwrite to replace them, or choose another --shard-dir")
        for p in earlier:
            p.unlink()
    commands = [shard_command(request, k, p) for k, p in enumerate(paths, start=1)]
    try:
        codes = run_local(commands, paths) if request.executor == "local" else \
            run_slurm(request.slurm, commands, paths)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as `run` raises it: what the shards finished is merged first
        _merge_present(paths, request.output)
        raise
    present = _merge_present(paths, request.output)
    failed = [k for k, code in enumerate(codes, start=1) if code not in (0, 1)]  # 1: a cell failed, recorded
    for k in failed:
        err.print(f"[red]shard {k}/{request.shards} did not finish (exit {codes[k - 1]}); its finished cells are "
                  f"kept: rerun the same command with --resume[/]", highlight=False)
    err.print(f"merged {len(present)} shard file(s) from {paths[0].parent} into {request.output}", highlight=False)
    return 1 if failed or any(codes) else 0


def _merge_present(paths: Sequence[Path], output: Path) -> list[Path]:
    present = [p for p in paths if p.exists()]
    if present:
        merge_files(present, output)
    return present


def run_local(commands: Sequence[Sequence[str]], paths: Sequence[Path]) -> list[int]:
    codes = []
    for k, argv in enumerate(commands, start=1):
        err.print(f"shard {k}/{len(commands)}: {paths[k - 1]}", highlight=False)
        began = time.perf_counter()
        codes.append(run_shard_job(argv))
        err.print(f"shard {k}/{len(commands)}: {cells_in(paths[k - 1])} cells in {time.perf_counter() - began:.0f} s "
                  f"(exit {codes[-1]})", highlight=False)
    return codes


def _slurm_executor(options: SlurmOptions, jobs: int, folder: Path):
    try:
        import submitit  # the optional extra: imported only when --executor slurm is asked for
    except ImportError:
        raise UsageError("--executor slurm needs submitit; pip install 'adcompare[slurm]'") from None
    try:
        executor = submitit.AutoExecutor(folder=folder / "slurm" / "%j", cluster="slurm")
    except RuntimeError as exc:  # no srun/sbatch here
        raise UsageError(f"--executor slurm: {exc}; run it where SLURM's commands work, or use --executor local") \
            from None
    params: dict[str, object] = {"timeout_min": options.time_minutes, "slurm_array_parallelism": jobs,
                                 "name": "adcompare"}
    if options.partition:
        params["slurm_partition"] = options.partition
    if options.gpus_per_job:
        params["gpus_per_node"] = options.gpus_per_job
    if options.cpus_per_job:
        params["cpus_per_task"] = options.cpus_per_job
    if options.exclusive:
        params["slurm_exclusive"] = True
    executor.update_parameters(**params)
    return executor


def run_slurm(options: SlurmOptions, commands: Sequence[Sequence[str]], paths: Sequence[Path]) -> list[int]:
    executor = _slurm_executor(options, len(commands), paths[0].parent)
    try:
        jobs = executor.map_array(run_shard_job, commands)
    except RuntimeError as exc:  # submitit's FailedJobError: sbatch's own message is the useful part
        why = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
        raise SchedulerError(f"--executor slurm: submitting the job array failed: {why[0]}; check that sbatch "
                             f"works here (sinfo, SLURM_CONF), or use --executor local") from None
    err.print(f"submitted {len(jobs)} job(s) as array {jobs[0].job_id.split('_')[0]}; results in "
              f"{paths[0].parent}", highlight=False)
    last = ""
    while True:
        with warnings.catch_warnings():  # submitit warns that sacct is missing without accounting storage
            warnings.simplefilter("ignore")
            states = [job.state for job in jobs]
            finished = [job.done() for job in jobs]
        cells = sum(cells_in(p) for p in paths)
        counts = ", ".join(f"{states.count(s)} {s.lower()}" for s in sorted(set(states)))
        line = f"jobs: {counts}; {cells} cells recorded"
        if line != last:
            err.print(line, highlight=False)
            last = line
        if all(finished):
            break
        time.sleep(2)
    codes = []
    for job in jobs:
        try:
            codes.append(int(job.result()))
        except Exception as exc:  # the job failed, was cancelled or preempted: its shard file keeps what finished
            err.print(f"[red]job {job.job_id}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}[/]",
                      highlight=False)
            codes.append(-1)
    return codes



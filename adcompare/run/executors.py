"""Executors: run a study's N shards as jobs and merge their results files into `--output`.

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

import argparse
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from adcompare.model.errors import SchedulerError, UsageError
from adcompare.store.output_paths import ensure_folder
from adcompare.store.results import merge_files

err = Console(stderr=True)

# Options of the driver that a shard's own command must not repeat; every other option is passed on as given.
DRIVER_ONLY = {"command", "executor", "shards", "shard_dir", "shard", "output", "overwrite", "dry_run", "json",
               "no_progress", "resume"}


def shard_paths(args: argparse.Namespace) -> list[Path]:
    folder = Path(args.shard_dir or f"{args.output}.shards")
    return [folder / f"shard-{k}-of-{args.shards}.jsonl" for k in range(1, args.shards + 1)]


def shard_command(args: argparse.Namespace, k: int, output: Path) -> list[str]:
    """The `adcompare run` command line of shard k: every option of this command (selection, run options, plugins
    — also those added later) but the driver's own, then one shard, its own file."""
    argv = [sys.executable, "-m", "adcompare", "run"]
    for name, value in sorted(vars(args).items()):
        if name in DRIVER_ONLY or name.startswith("slurm_") or value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        values = value if isinstance(value, list) else [value]
        if value is True:
            argv.append(flag)
            continue
        for v in values:  # files named relatively must resolve the same from the job's working directory
            argv += [flag, str(Path(v).resolve()) if isinstance(v, str) and Path(v).exists() else str(v)]
    argv += ["--shard", f"{k}/{args.shards}", "-o", str(output), "--no-progress"]
    return argv + (["--resume"] if args.resume else [])


def run_shard_job(argv: Sequence[str]) -> int:
    """A job's body (pickled by submitit, run on the node): the shard's command; its exit status."""
    return subprocess.run(list(argv), check=False).returncode


def run_study(args: argparse.Namespace) -> int:
    if args.shards < 1:
        raise UsageError(f"--shards {args.shards} must be at least 1")
    if args.shard or args.dry_run:
        raise UsageError("--executor runs every shard; drop --shard/--dry-run (or drop --executor to run one shard)")
    paths = shard_paths(args)
    ensure_folder(paths[0].parent)
    earlier = [p for p in paths if p.exists()]
    if earlier and not args.resume:
        if not args.overwrite:  # another study's shards: never deleted unasked
            raise UsageError(f"{str(paths[0].parent)!r} already holds {len(earlier)} shard file(s); add --resume to "
                             f"complete them, --overwrite to replace them, or choose another --shard-dir")
        for p in earlier:
            p.unlink()
    commands = [shard_command(args, k, p) for k, p in enumerate(paths, start=1)]
    codes = (run_local if args.executor == "local" else run_slurm)(args, commands, paths)
    present = [p for p in paths if p.exists()]
    if present:
        merge_files(present, args.output)
    failed = [k for k, code in enumerate(codes, start=1) if code not in (0, 1)]  # 1: a cell failed, recorded
    for k in failed:
        err.print(f"[red]shard {k}/{args.shards} did not finish (exit {codes[k - 1]}); its finished cells are "
                  f"kept: rerun the same command with --resume[/]", highlight=False)
    err.print(f"merged {len(present)} shard file(s) from {paths[0].parent} into {args.output}", highlight=False)
    return 1 if failed or any(codes) else 0


def run_local(args: argparse.Namespace, commands: list[list[str]], paths: list[Path]) -> list[int]:
    codes = []
    for k, argv in enumerate(commands, start=1):
        err.print(f"shard {k}/{len(commands)}: {paths[k - 1]}", highlight=False)
        began = time.perf_counter()
        codes.append(run_shard_job(argv))
        err.print(f"shard {k}/{len(commands)}: {_cells_in(paths[k - 1])} cells in {time.perf_counter() - began:.0f} s "
                  f"(exit {codes[-1]})", highlight=False)
    return codes


def _slurm_executor(args: argparse.Namespace, folder: Path):
    try:
        import submitit  # the optional extra: imported only when --executor slurm is asked for
    except ImportError:
        raise UsageError("--executor slurm needs submitit; pip install 'adcompare[slurm]'") from None
    try:
        executor = submitit.AutoExecutor(folder=folder / "slurm" / "%j", cluster="slurm")
    except RuntimeError as exc:  # no srun/sbatch here
        raise UsageError(f"--executor slurm: {exc}; run it where SLURM's commands work, or use --executor local") \
            from None
    params = {"timeout_min": args.slurm_time, "slurm_array_parallelism": args.shards, "name": "adcompare"}
    if args.slurm_partition:
        params["slurm_partition"] = args.slurm_partition
    if args.slurm_gpus_per_job:
        params["gpus_per_node"] = args.slurm_gpus_per_job
    if args.slurm_cpus_per_job:
        params["cpus_per_task"] = args.slurm_cpus_per_job
    if args.slurm_exclusive:
        params["slurm_exclusive"] = True
    executor.update_parameters(**params)
    return executor


def run_slurm(args: argparse.Namespace, commands: list[list[str]], paths: list[Path]) -> list[int]:
    executor = _slurm_executor(args, paths[0].parent)
    try:
        jobs = executor.map_array(run_shard_job, commands)
    except RuntimeError as exc:  # submitit's FailedJobError: sbatch's own message is the useful part
        last = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
        raise SchedulerError(f"--executor slurm: submitting the job array failed: {last[0]}; check that sbatch "
                             f"works here (sinfo, SLURM_CONF), or use --executor local") from None
    err.print(f"submitted {len(jobs)} job(s) as array {jobs[0].job_id.split('_')[0]}; results in "
              f"{paths[0].parent}", highlight=False)
    last = ""
    while True:
        with warnings.catch_warnings():  # submitit warns that sacct is missing without accounting storage
            warnings.simplefilter("ignore")
            states = [job.state for job in jobs]
            finished = [job.done() for job in jobs]
        cells = sum(_cells_in(p) for p in paths)
        line = f"jobs: {', '.join(f'{states.count(s)} {s.lower()}' for s in sorted(set(states)))}; {cells} cells recorded"
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


def _cells_in(path: Path) -> int:
    try:
        with path.open() as f:
            return sum(1 for line in f if line.startswith('{"record": "cell"'))
    except OSError:
        return 0

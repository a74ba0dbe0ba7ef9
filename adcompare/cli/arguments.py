"""Every option of every command, in the option groups the commands share (selection, run options, environments,
budget and scale-out, plugins), and the allow-list of options a shard's own `adcompare run` repeats.

Imports nothing heavy: `adcompare --help` builds the whole parser from here (tests/test_import.py).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from adcompare.study.plan import Plan
from adcompare.study.suites import NESTED_TIMEOUT, SUITE_SUMMARIES, SUITES

DEFAULT_TIMEOUT = 300.0  # seconds per cell without --timeout, but for the suite entries that set their own

# The options of `adcompare run` that each shard's own `adcompare run` takes, as the driver was given them: what to
# run and how. The driver keeps the rest (--output, --resume, --executor, --shards, --slurm-*, ...): a shard gets its
# own --shard, -o and --resume, and a new `run` option reaches the shards only once it is named here
# (tests/test_executors.py checks that every `run` option is either here or the driver's).
SHARD_OPTIONS = ("--problem", "--size", "--operator", "--adapter", "--variant", "--device", "--dtype", "--tag",
                 "--environment", "--devices", "--suite", "--inputs", "--seed", "--timeout", "--threads",
                 "--memory-limit", "--rounds", "--env", "--max-time", "--history", "--plugin")


def positive(kind: type) -> Callable[[str], Any]:
    """An argparse type: a number above zero, else one line naming the value."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="PATH_OR_MODULE",
                   help="load problems and hook implementations from a .py file or module (repeatable)")


def add_selectors(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (each repeatable or comma-separated; default: all)")
    for name, meta in (("problem", "NAME"), ("size", "LABEL"), ("operator", "OP"), ("adapter", "NAME"),
                       ("variant", "NAME"), ("device", "cpu|cuda"), ("dtype", "float32|float64"),
                       ("tag", "TAG"), ("environment", "NAME")):
        g.add_argument(f"--{name}", action="append", metavar=meta)
    g.add_argument("--devices", action="append", metavar="D",
                   help="device counts for the data-parallel operators (pmap_value, pmap_grad), e.g. 1,2,4: the "
                        "batch is split across D devices (D emulated host devices on the CPU); other operators run "
                        "at D = 1 only (default: the suite's counts, 1 but for the quick suite's pmap entry)")
    g.add_argument("--suite", choices=SUITES,
                   help="; ".join(f"{name}: {text}" for name, text in SUITE_SUMMARIES.items())
                   + " (default: quick, or the suite that holds every --problem named when quick does not)")
    g = p.add_argument_group("inputs (default: generated with seed 0)")
    g.add_argument("--inputs", action="append", default=[], metavar="PATH",
                   help="read a problem's inputs from this file (repeatable): ADBench's gmm_d*_K*.txt, "
                        "ba*_n*_m*_p*.txt, lstm_l*_c*.txt, or GradBench's gmm/lstm input as JSON; its problems "
                        "then run on the files only, in float64 unless --dtype says otherwise")
    g.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (labels sizes …-seedN)")


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=positive(float), default=None,
                   help=f"seconds per cell before its worker is stopped (default {DEFAULT_TIMEOUT:.0f}, or a suite "
                        f"entry's own where its calls take minutes: gradbench's saddle and particle "
                        f"{NESTED_TIMEOUT:.0f}); given, it holds for every cell")
    p.add_argument("--threads", type=positive(int), default=1,
                   help="threads per framework, the same for all (default 1, as torch.utils.benchmark: "
                        "reproducible on a shared machine; raise it to measure parallel speed-up)")
    p.add_argument("--memory-limit", type=positive(float), metavar="GIB",
                   help="cells whose pre-flight memory estimate exceeds this are too_large (default: half the RAM)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_environment_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", action="append", metavar="NAME=REQUIREMENTS",
                   help="run the adapters whose frameworks REQUIREMENTS pin (pip requirements, space-separated) in "
                        "an isolated environment NAME, built once and cached (repeatable; `--env current` adds "
                        "this interpreter; `--env NAME=@PYTHON` takes an existing interpreter as it is and runs every "
                        "adapter there: the A/B gate); select with --environment NAME")


def add_study_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("budget and scale-out (README: Full studies)")
    g.add_argument("--max-time", metavar="DURATION",
                   help="stop when this is spent (90s, 15m, 1h30m): cheap cells first, each family's smaller sizes "
                        "first; the rest is recorded skipped, and --resume continues")
    g.add_argument("--history", action="append", metavar="RESULTS",
                   help="earlier results whose measured times (same machine fingerprint) replace the model's "
                        "estimates; --output is always read (repeatable)")
    g.add_argument("--shard", metavar="K/N", help="run only shard K of N: deterministic, balanced by estimated cost")
    g.add_argument("--executor", choices=["local", "slurm"],
                   help="run --shards N shards: one after another as local processes, or as a SLURM job array "
                        "(pip install 'adcompare[slurm]'); shard results are merged into --output")
    g.add_argument("--shards", type=positive(int), default=2, metavar="N",
                   help="number of shards for --executor (default 2)")
    g.add_argument("--shard-dir", metavar="DIR",
                   help="where jobs write their results files, shared with the nodes (default: OUTPUT.shards/)")
    g.add_argument("--slurm-partition", metavar="P", help="SLURM partition (default: the cluster's default)")
    g.add_argument("--slurm-gpus-per-job", type=int, default=0, metavar="G", help="GPUs per job (--gres gpu:G)")
    g.add_argument("--slurm-cpus-per-job", type=int, metavar="C", help="CPUs per job (default: SLURM's)")
    g.add_argument("--slurm-time", type=int, default=60, metavar="MIN", help="time limit per job, minutes (60)")
    g.add_argument("--slurm-exclusive", action="store_true",
                   help="one job per node, nothing else beside it: the fair setting for timings")


def add_list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--tag", action="append", help="only problems with this tag")
    p.add_argument("--suites", action="store_true",
                   help="each suite's cell count, modelled cost, the cost measured on this machine (results/ and "
                        "--history) and the project's last published run")
    p.add_argument("--history", action="append", metavar="RESULTS",
                   help="with --suites: results files whose times (this machine's fingerprint) are summed")
    add_plugin_option(p)


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    add_selectors(p)
    add_run_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per cell instead of the matrix")
    add_environment_option(p)
    add_plugin_option(p)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    add_selectors(p)
    add_run_options(p)
    p.add_argument("-o", "--output", help="results file (JSON Lines; default: a new results/<date-time>.jsonl, so no "
                                          "run replaces another)")
    p.add_argument("--resume", action="store_true", help="keep finished cells of --output and run the rest")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument("--rounds", type=positive(int), default=1, metavar="N",
                   help="time every cell in N rounds, each in fresh worker processes interleaved with the other "
                        "cells (about N times the timing cost); `compare` then takes its noise from the spread "
                        "between rounds: use --rounds 3 or more for a CI gate on a shared machine (default 1)")
    p.add_argument("--confirm", type=positive(float), metavar="PCT",
                   help="A/B runs (--env twice, --rounds 2 or more): after the last round, time the cells that "
                        "`compare RUN --fail-above PCT` would flag (slower or faster) in as many rounds again; "
                        "compare then counts a cell changed only when those fresh rounds, decided alone, say so "
                        "too (fewer false alarms on a busy machine, for a few cells' more time)")
    p.add_argument("--dry-run", action="store_true", help="print the cell count and an estimated time, run nothing")
    p.add_argument("--json", action="store_true", help="with --dry-run: the planned cells with estimates, as JSON")
    add_environment_option(p)
    add_study_options(p)
    add_plugin_option(p)


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="*", help="results files (.jsonl) or pytest-benchmark JSON (.json)")
    p.add_argument("-o", "--output", help="report folder (default reports/<date-time>/)")
    p.add_argument("--figures", metavar="DIR",
                   help="also write every figure as PDF and PNG (matplotlib, paper style) into DIR; "
                        "needs the extra: pip install 'adcompare[plot]'")
    p.add_argument("--latest", action="store_true",
                   help="report the newest results file in results/ (what `adcompare run` wrote with no -o)")
    add_run_options(p)
    add_plugin_option(p)


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline")
    p.add_argument("candidate", nargs="?",
                   help="omit it to compare the environments of one run (--env) with each other")
    p.add_argument("--baseline-environment", metavar="NAME",
                   help="with one file: the environment the others are compared with (default: the first --env)")
    p.add_argument("--json", action="store_true", help="one JSON object per cell, offending cells first")
    p.add_argument("--fail-above", type=float, metavar="PCT",
                   help="CI gate: exit 1 when any matching cell is significantly slower by more than PCT percent "
                        "(bootstrap interval, Holm-corrected rank test, effect > PCT; between rounds, for files "
                        "timed with run --rounds: against the candidate run's shift as a whole)")
    p.add_argument("--fail-on-shift", type=float, metavar="PCT",
                   help="also exit 1 when the candidate run as a whole is slower than the baseline by more than "
                        "PCT percent (the run-wide shift, its interval clear of PCT; off by default, because on a "
                        "shared machine a whole-run shift is mostly load)")


def run_defaults() -> Mapping[str, Any]:
    """What `adcompare run` takes when an option is not given."""
    p = argparse.ArgumentParser(add_help=False)
    add_run_arguments(p)
    return vars(p.parse_args([]))


def timeouts(args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
    """RunOptions' timeout and per-cell timeouts: --timeout for every cell when given, else DEFAULT_TIMEOUT and the
    plan's cells' own (Plan.timeouts)."""
    if args.timeout is not None:
        return {"timeout": args.timeout, "timeouts": {}}
    return {"timeout": DEFAULT_TIMEOUT, "timeouts": dict(plan.timeouts)}


def shard_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The SHARD_OPTIONS the driver was given, as command-line words in allow-list order; an option left at its
    default is left to the shard's own parser. Paths that exist are made absolute, so that a job started in another
    working directory reads the same files."""
    defaults, given = run_defaults(), vars(args)
    words: list[str] = []
    for flag in SHARD_OPTIONS:
        value = given[flag[2:].replace("-", "_")]
        if value == defaults[flag[2:].replace("-", "_")]:
            continue
        if value is True:  # a switch
            words.append(flag)
            continue
        for v in value if isinstance(value, list) else [value]:
            words += [flag, str(Path(v).resolve()) if isinstance(v, str) and Path(v).exists() else str(v)]
    return tuple(words)


def add_gradbench_tool_arguments(parser: argparse.ArgumentParser) -> None:
    """`gradbench-tool`: one adapter · variant · device served to GradBench's evals (cli/gradbench_tool.py)."""
    parser.add_argument("--adapter", required=True, help="the adapter to serve (see `adcompare list`)")
    parser.add_argument("--variant", help="the adapter's variant, e.g. eager or compiled (default: its first)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or the adapter's GPU device, e.g. cuda")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for the framework and BLAS (default: the CPUs this process may use)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                        help="load adapters and problems from a plugin too (repeatable)")

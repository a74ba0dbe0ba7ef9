"""`adcompare list | check | run | report | compare`. Exit codes: 0 ok, 1 a cell failed or differs, 2 usage error."""
from __future__ import annotations

import argparse

from rich.console import Console

from adcompare import __version__
from adcompare.model.errors import AdcompareError
from adcompare.study.suites import SUITE_SUMMARIES, SUITES

EPILOG = """\
examples:
  adcompare list                                   adapters, problems, support matrix
  adcompare list --json > inventory.json
  adcompare check                                  derivatives of the quick suite vs the float64 reference
  adcompare check --adapter torch --problem exp_dot_loss --dtype float32
  adcompare check --problem gmm --inputs ADBench/data/gmm/test.txt --json   (reference_value: the objective)
  adcompare run                                    quick suite, timed, into a new results/<date-time>.jsonl
  adcompare run -o results.jsonl                   your file (refused if it exists: --resume or --overwrite)
  adcompare report --latest                        the report of the newest results/ file
  adcompare run --suite full --resume -o full.jsonl
  adcompare run --suite adbench -o adbench.jsonl  ADBench's published sizes, float64
  adcompare run --problem exp_dot_loss --operator jacfwd,jacrev --dry-run
  adcompare run --suite full --dry-run --json     planned cells with estimated seconds and bytes
  adcompare run --suite full --max-time 30m -o full.jsonl   then --resume to continue
  adcompare run --suite full --shard 2/4 -o shard2.jsonl
  adcompare run --suite full --executor slurm --shards 8 --slurm-exclusive -o full.jsonl
  adcompare report                                 run the quick suite and write reports/<date>/index.html
  adcompare report cpu.jsonl gpu.jsonl -o reports/both/
  adcompare report results.jsonl --figures paper/   the same figures as PDF and PNG for a paper
  adcompare compare before.jsonl after.jsonl       ratio of medians per cell, with confidence intervals
  adcompare run --rounds 3 -o main.jsonl          each cell timed in 3 rounds, fresh workers each (for the gate)
  adcompare compare main.jsonl pr.jsonl --fail-above 10   CI gate: exit 1 on a significant slowdown > 10 %
  adcompare run --adapter jax --env old="jax==0.9.2 jaxlib==0.9.2" --env new="jax==0.10.2 jaxlib==0.10.2" -o rel.jsonl
  adcompare compare rel.jsonl                      each cell under new vs old: ratio, interval, values agree?
"""


def positive(kind: type):
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


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (the thing and the fix) and exit 2, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _add_plugin_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="PATH_OR_MODULE",
                   help="load problems and hook implementations from a .py file or module (repeatable)")


def _add_selectors(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (each repeatable or comma-separated; default: all)")
    for name, meta in (("problem", "NAME"), ("size", "LABEL"), ("operator", "OP"), ("adapter", "NAME"),
                       ("variant", "NAME"), ("device", "cpu|cuda"), ("dtype", "float32|float64"),
                       ("tag", "TAG"), ("environment", "NAME")):
        g.add_argument(f"--{name}", action="append", metavar=meta)
    g.add_argument("--devices", action="append", metavar="D",
                   help="device counts for the data-parallel operators (pmap_value, pmap_grad), e.g. 1,2,4: the "
                        "batch is split across D devices (D emulated host devices on the CPU); other operators run "
                        "at D = 1 only (default: the suite's counts, 1 but for the quick suite's pmap entry)")
    g.add_argument("--suite", default="quick", choices=SUITES,
                   help="; ".join(f"{name}: {text}" for name, text in SUITE_SUMMARIES.items()))
    g = p.add_argument_group("inputs (default: generated with seed 0)")
    g.add_argument("--inputs", action="append", default=[], metavar="PATH",
                   help="read a problem's inputs from this file (repeatable): ADBench's gmm_d*_K*.txt, "
                        "ba*_n*_m*_p*.txt, lstm_l*_c*.txt, or GradBench's gmm/lstm input as JSON; its problems "
                        "then run on the files only, in float64 unless --dtype says otherwise")
    g.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (labels sizes …-seedN)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=positive(float), default=300.0,
                   help="seconds per cell before its worker is stopped")
    p.add_argument("--threads", type=positive(int), default=1,
                   help="threads per framework, the same for all (default 1, as torch.utils.benchmark: "
                        "reproducible on a shared machine; raise it to measure parallel speed-up)")
    p.add_argument("--memory-limit", type=positive(float), metavar="GIB",
                   help="cells whose pre-flight memory estimate exceeds this are too_large (default: half the RAM)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_environment_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", action="append", metavar="NAME=REQUIREMENTS",
                   help="run the adapters whose frameworks REQUIREMENTS pin (pip requirements, space-separated) in "
                        "an isolated environment NAME, built once and cached (repeatable; `--env current` adds "
                        "this interpreter); select with --environment NAME")


def _add_study_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("budget and scale-out (README: Full studies)")
    g.add_argument("--max-time", metavar="DURATION",
                   help="stop when this is spent (90s, 15m, 1h30m): every family's smaller sizes first; the rest is "
                        "recorded skipped, and --resume continues")
    g.add_argument("--history", action="append", metavar="RESULTS",
                   help="earlier results whose measured times (same machine fingerprint) replace the model's "
                        "estimates; --output is always read (repeatable)")
    g.add_argument("--shard", metavar="K/N", help="run only shard K of N: deterministic, balanced by estimated cost")
    g.add_argument("--executor", choices=["local", "slurm"],
                   help="run --shards N shards: one after another as local processes, or as a SLURM job array "
                        "(pip install 'adcompare[slurm]'); shard results are merged into --output")
    g.add_argument("--shards", type=positive(int), default=2, metavar="N", help="number of shards for --executor (default 2)")
    g.add_argument("--shard-dir", metavar="DIR",
                   help="where jobs write their results files, shared with the nodes (default: OUTPUT.shards/)")
    g.add_argument("--slurm-partition", metavar="P", help="SLURM partition (default: the cluster's default)")
    g.add_argument("--slurm-gpus-per-job", type=int, default=0, metavar="G", help="GPUs per job (--gres gpu:G)")
    g.add_argument("--slurm-cpus-per-job", type=int, metavar="C", help="CPUs per job (default: SLURM's)")
    g.add_argument("--slurm-time", type=int, default=60, metavar="MIN", help="time limit per job, minutes (60)")
    g.add_argument("--slurm-exclusive", action="store_true",
                   help="one job per node, nothing else beside it: the fair setting for timings")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="adcompare", description="Compare automatic-differentiation frameworks "
                                     "on problems written once: checked derivatives, careful timings, HTML report.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"adcompare {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("list", help="adapters, problems and the support matrix")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--tag", action="append", help="only problems with this tag")
    p.add_argument("--suites", action="store_true",
                   help="each suite's cell count, modelled cost, the cost measured on this machine (results/ and "
                        "--history) and the project's last published run")
    p.add_argument("--history", action="append", metavar="RESULTS",
                   help="with --suites: results files whose times (this machine's fingerprint) are summed")
    _add_plugin_option(p)

    p = sub.add_parser("check", help="check derivatives against the float64 reference (no timing)",
                       epilog="exit 0: every cell ok or unsupported; 1: any mismatch, nan, failed, crashed, timeout")
    _add_selectors(p)
    _add_run_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per cell instead of the matrix")
    _add_environment_option(p)
    _add_plugin_option(p)

    p = sub.add_parser("run", help="check and time a selection of cells into a results file")
    _add_selectors(p)
    _add_run_options(p)
    p.add_argument("-o", "--output", help="results file (JSON Lines; default: a new results/<date-time>.jsonl, so no "
                                          "run replaces another)")
    p.add_argument("--resume", action="store_true", help="keep finished cells of --output and run the rest")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument("--rounds", type=positive(int), default=1, metavar="N",
                   help="time every cell in N rounds, each in fresh worker processes interleaved with the other "
                        "cells (about N times the timing cost); `compare` then takes its noise from the spread "
                        "between rounds: use --rounds 3 or more for a CI gate on a shared machine (default 1)")
    p.add_argument("--dry-run", action="store_true", help="print the cell count and an estimated time, run nothing")
    p.add_argument("--json", action="store_true", help="with --dry-run: the planned cells with estimates, as JSON")
    _add_environment_option(p)
    _add_study_options(p)
    _add_plugin_option(p)

    p = sub.add_parser("report", help="build the HTML report (runs the quick suite when given no results)")
    p.add_argument("results", nargs="*", help="results files (.jsonl) or pytest-benchmark JSON (.json)")
    p.add_argument("-o", "--output", help="report folder (default reports/<date-time>/)")
    p.add_argument("--figures", metavar="DIR",
                   help="also write every figure as PDF and PNG (matplotlib, paper style) into DIR; "
                        "needs the extra: pip install 'adcompare[plot]'")
    p.add_argument("--latest", action="store_true",
                   help="report the newest results file in results/ (what `adcompare run` wrote with no -o)")
    _add_run_options(p)
    _add_plugin_option(p)

    p = sub.add_parser("compare", help="per matching cell, the ratio of medians B/A with a 95%% interval",
                       epilog="exit 0: no regression; 1: with --fail-above, a cell is significantly slower by more "
                              "than PCT, or with --fail-on-shift, the whole run is; 2: unusable input (missing file, no timed cell in common)")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        from adcompare.cli import commands

        return getattr(commands, f"cmd_{args.command}")(args)
    except AdcompareError as exc:
        from rich.markup import escape

        console.print(f"[bold red]adcompare:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        console.print("adcompare: interrupted; finished cells are in the results file (use --resume)")
        return 130

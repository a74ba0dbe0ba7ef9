"""`adcompare list | check | run | report | compare | gradbench-tool`: the parser and the dispatch to the command's
module.

Exit codes: 0 ok, 1 a cell failed or differs, 2 usage error. A command's module is imported only when that command
runs, so that `adcompare --help` loads nothing heavy (tests/test_import.py).
"""
from __future__ import annotations

import argparse

from rich.console import Console

from adcompare import __version__
from adcompare.cli import arguments
from adcompare.model.errors import AdcompareError

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
  adcompare run --rounds 3 --confirm 10 --env base=@../base/venv/bin/python --env current -o ab.jsonl
  adcompare compare ab.jsonl --fail-above 10      the A/B gate: both sides in one run, flagged cells confirmed
  adcompare run --adapter jax --env old="jax==0.9.2 jaxlib==0.9.2" --env new="jax==0.10.2 jaxlib==0.10.2" -o rel.jsonl
  adcompare compare rel.jsonl                      each cell under new vs old: ratio, interval, values agree?
  adcompare gradbench-tool --adapter jax --variant compiled   GradBench's evals drive an adapter (stdin/stdout)
"""


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (the thing and the fix) and exit 2, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="adcompare", description="Compare automatic-differentiation frameworks "
                                     "on problems written once: checked derivatives, careful timings, HTML report.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"adcompare {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    arguments.add_list_arguments(sub.add_parser("list", help="adapters, problems and the support matrix"))
    arguments.add_check_arguments(sub.add_parser(
        "check", help="check derivatives against the float64 reference (no timing)",
        epilog="exit 0: every cell ok or unsupported; 1: any mismatch, nan, failed, crashed, timeout"))
    arguments.add_run_arguments(sub.add_parser("run", help="check and time a selection of cells into a results file"))
    arguments.add_report_arguments(sub.add_parser(
        "report", help="build the HTML report (runs the quick suite when given no results)"))
    arguments.add_compare_arguments(sub.add_parser(
        "compare", help="per matching cell, the ratio of medians B/A with a 95%% interval",
        epilog="exit 0: no regression; 1: with --fail-above, a cell is significantly slower by more than PCT, or "
               "with --fail-on-shift, the whole run is; 2: unusable input (missing file, no timed cell in common)"))
    arguments.add_gradbench_tool_arguments(sub.add_parser(
        "gradbench-tool", help="serve one adapter to GradBench's evals over its JSON-lines protocol (stdin/stdout)",
        description="Answer GradBench's start, define, evaluate and end messages on stdin/stdout with one adapter, "
                    "variant and device (docs/gradbench-tool.md)"))
    return parser


def run_command(args: argparse.Namespace) -> int:
    """The command's module, imported here and only for the command asked for."""
    if args.command == "list":
        from adcompare.cli.inventory import command
    elif args.command == "check":
        from adcompare.cli.check import command
    elif args.command == "run":
        from adcompare.cli.run import command
    elif args.command == "report":
        from adcompare.cli.report import command
    elif args.command == "gradbench-tool":
        from adcompare.cli.gradbench_tool import command
    else:
        from adcompare.cli.compare import command
    return command(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        return run_command(args)
    except AdcompareError as exc:
        from rich.markup import escape

        console.print(f"[bold red]adcompare:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        console.print("adcompare: interrupted")  # a command writing results says what it kept (Interrupted)
        return 130

"""`adcompare report`: the HTML report (and with --figures the paper figures) of results files, of the newest one
(--latest), or of the quick suite run for it when given none."""
from __future__ import annotations

import argparse
import datetime
import importlib.util
from pathlib import Path

from adcompare.cli.arguments import timeouts
from adcompare.cli.pipeline import load_registry, plan_cells, print_findings, run_provenance, watching
from adcompare.cli.tables import out
from adcompare.model.errors import UsageError
from adcompare.model.timing_policy import report_policy
from adcompare.plugin.registry import Registry
from adcompare.report import build
from adcompare.report.page import hook_sections
from adcompare.run.runner import RunOptions
from adcompare.run.session import Output, run_session
from adcompare.store.output_paths import ensure_folder, latest_results
from adcompare.store.results import Results, load
from adcompare.study.plan import Selection


def _run_quick_suite(registry: Registry, args: argparse.Namespace, out_dir: Path) -> Results:
    """The quick suite, timed into OUT_DIR/results.jsonl beside the report, which never replaces an earlier one."""
    path = out_dir / "results.jsonl"
    if path.exists():  # report has no --resume/--overwrite: it never replaces an earlier run's results
        raise UsageError(f"{str(out_dir)!r} already holds the results of an earlier report; choose another -o, "
                         f"or report them: adcompare report {path}")
    plan = plan_cells(registry, Selection(suite="quick"), memory_limit_gib=args.memory_limit)
    policy = report_policy()
    target = Output(path, run_provenance(registry, args.threads, policy),
                    then=f"report them with: adcompare report {path}")
    with watching(plan, 1, show_progress=not args.no_progress) as observers:
        run_session(registry, plan, RunOptions(**timeouts(args, plan), threads=args.threads, policy=policy),
                    output=target, observers=observers)
    return load([path], registry.problems)


def command(args: argparse.Namespace) -> int:
    if args.figures and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--figures needs matplotlib, which is not installed; pip install 'adcompare[plot]'")
    registry = load_registry(args.plugin)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.output or f"reports/{stamp}")
    ensure_folder(out_dir)
    if args.latest and args.results:
        raise UsageError("--latest reports the newest results file; drop it or the files named")
    paths = args.results
    if args.latest:
        paths = [str(latest_results())]
        out.print(f"reporting {paths[0]}", highlight=False)
    results = load(paths, registry.problems) if paths else _run_quick_suite(registry, args, out_dir)
    index = build(results, out_dir, sections=hook_sections(registry, results),
                  figures_dir=Path(args.figures) if args.figures else None)
    print_findings(results.measurements)
    if args.figures:
        out.print(f"figures (PDF, PNG): {args.figures}")
    out.print(f"report: {index}")
    return 0

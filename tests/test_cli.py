"""The CLI in-process: exit codes scripts can trust, one-line errors, --help with examples, check/run/compare."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.analysis.harness_cost import harness_cost
from adcompare.cli.main import main
from adcompare.model.units import seconds
from adcompare.store.results import load
from tests.conftest import FAULTS


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_help_imports_no_command_module():
    """main() imports a command's module only to run it: `adcompare --help` builds the parser from cli/arguments.py."""
    code = ("import sys\nfrom adcompare.cli.main import main\ntry:\n    main(['run', '--help'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.startswith('adcompare.cli.')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "['adcompare.cli.arguments', 'adcompare.cli.main']"


@pytest.mark.parametrize("argv, message", [
    (["run", "--problem", "exp_dot_los", "--dry-run"], "unknown problem 'exp_dot_los' (did you mean 'exp_dot_loss'?)"),
    (["check", "--adapter", "jaxx"], "unknown adapter 'jaxx' (did you mean 'jax'?)"),
    (["run", "--operator", "jacfw", "--dry-run"], "unknown operator 'jacfw' (did you mean 'jacfwd'?)"),
    (["run", "--problem", "f_r2_r3", "--operator", "grad", "--dry-run"],
     "nothing applies: left out problem 'f_r2_r3' with operator 'grad': grad needs a scalar-valued function, "
     "f(x) has shape (3,)"),
    (["run", "--problem", "saddle,particle", "--suite", "quick", "--dry-run"],
     "suite quick plans no cell of the selection: saddle is in --suite gradbench; particle is in --suite gradbench"),
    (["check", "--problem", "particle", "--suite", "full"],
     "suite full plans no cell of the selection: particle is in --suite gradbench"),
    (["report", "no-such-file.jsonl"], "cannot read results file 'no-such-file.jsonl'"),
    (["list", "--plugin", "nowhere.py"], "--plugin 'nowhere.py': no such file"),
])
def test_usage_errors_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split())
    assert "Traceback" not in err


def test_a_problem_named_is_planned_in_the_suite_that_holds_it(capsys):
    """Without --suite, a problem only another suite lists is planned there, and the output says which suite; a
    problem of the quick suite keeps it, and so does a mix no one suite holds."""
    assert main(["run", "--problem", "particle", "--adapter", "jax", "--dry-run", "--json"]) == 0
    captured = capsys.readouterr()
    assert "particle: not in the quick suite; planned from --suite gradbench" in " ".join(captured.err.split())
    planned = json.loads(captured.out)["cells"]
    assert planned and {c["cell"]["problem"] for c in planned} == {"particle"}
    assert {c["cell"]["dtype"] for c in planned} == {"float64"}  # the GradBench suite's dtype
    assert main(["run", "--problem", "ht", "--adapter", "jax", "--dry-run"]) == 0
    assert "planned from --suite full (also in --suite adbench, --suite gradbench)" in \
        " ".join(capsys.readouterr().err.split())
    assert main(["run", "--problem", "gmm,particle", "--adapter", "jax", "--dry-run"]) == 0
    assert "planned from" not in capsys.readouterr().err


def test_dry_run_counts_cells(capsys):
    assert main(["run", "--adapter", "jax", "--problem", "exp_dot_loss", "--size", "n10,n100", "--operator",
                 "grad,jacfwd", "--variant", "eager", "--dtype", "float32", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 cells: 4 to run" in out and "estimated" in out
    assert main(["run", "--adapter", "jax", "--problem", "tanh", "--rounds", "3", "--dry-run"]) == 0
    assert "--rounds 3: each timed cell runs 3 times, so about 3× the estimate" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # a positive count, as every count option
        main(["run", "--rounds", "0", "--dry-run"])
    assert exc.value.code == 2


def test_check_exit_codes_and_json(capsys):
    ok = ["check", "--adapter", "jax", "--problem", "f_r2_r3", "--operator", "jacrev", "--variant", "eager",
          "--dtype", "float64", "--no-progress"]
    assert main(ok + ["--json"]) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert record["status"] == "ok" and record["worst_error"] <= record["tolerance"]
    assert record["reference_method"] and record["algorithm"].startswith("reverse mode")
    # A run in which every cell crashes must not exit 0.
    crash = ["check", "--plugin", FAULTS, "--adapter", "jax", "--problem", "segfaults", "--variant", "eager",
             "--dtype", "float64", "--no-progress"]
    assert main(crash) == 1
    assert "crashed" in capsys.readouterr().out


def test_run_then_compare(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    base = ["run", "--adapter", "jax", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
            "--variant", "compiled", "--dtype", "float32", "--no-progress", "--threads", "1"]
    assert main(base + ["-o", str(a)]) == 0
    assert main(base + ["-o", str(b)]) == 0
    printed = capsys.readouterr().out
    assert "findings: none of the 9 seed claims was measured" in printed  # grad alone tests no seed claim
    assert printed.index("findings") < printed.index(f"results: {b}")
    # The harness's own cost, from the record the run wrote: its worker's start-up on the one cell it ran.
    (m,) = load([b]).measurements
    assert m.details["worker_start_seconds"] > 0 and set(m.details["overhead_seconds"]) >= {"inputs", "check"}
    own = harness_cost([m]).own
    assert own == pytest.approx(m.details["wall_seconds"] + m.details["worker_start_seconds"]
                                - m.details.get("prepare_seconds", 0) - m.timing.first_call - m.timing.call_seconds)
    assert f"harness: {seconds(own)} of the cells'" in " ".join(printed.split())
    assert main(["compare", str(a), str(b), "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert row["low"] <= row["ratio"] <= row["high"] and row["verdict"]
    header = json.loads(a.read_text().splitlines()[0])
    assert header["provenance"]["threads"] == 1 and header["provenance"]["numpy"]


def test_expected_failures_are_labelled_and_do_not_fail_the_check(capsys):
    """Seed 001's data-dependent loop must fail under jit — as data (adcompare/verify/expectations.py), not an error."""
    argv = ["check", "--adapter", "jax", "--problem", "control_loop", "--operator", "grad", "--variant", "compiled",
            "--dtype", "float32", "--no-progress", "--json"]
    assert main(argv) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert record["status"] == "failed" and "ConcretizationTypeError" in record["message"]
    assert record["expected_failure"] == "data-dependent Python control flow cannot be compiled"


def test_memory_limit_marks_cells_too_large_before_running(capsys):
    argv = ["check", "--adapter", "jax", "--problem", "exp_dot_loss", "--size", "n10000", "--operator", "jacfwd",
            "--variant", "eager", "--dtype", "float32", "--memory-limit", "0.1", "--no-progress", "--json"]
    assert main(argv) == 1  # nothing ran, so nothing was checked
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert record["status"] == "too_large" and "exceeds the 0.1 GiB limit" in record["message"]


COMPARE = Path(__file__).parent / "fixtures" / "compare"


def test_fail_above_fails_on_the_synthetic_slowdown_and_names_it_first(capsys):
    assert main(["compare", str(COMPARE / "honest_a.jsonl"), str(COMPARE / "slowdown.jsonl"),
                 "--fail-above", "100"]) == 1
    out = capsys.readouterr().out
    assert out.index("significantly slower") < out.index("exp_dot_loss-n100-grad-autograd") < out.index("┏")
    assert main(["compare", str(COMPARE / "honest_a.jsonl"), str(COMPARE / "slowdown.jsonl"),
                 "--fail-above", "100", "--json"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["regression"] and rows[0]["key"] == "exp_dot_loss/n100/grad/autograd/eager/cpu/float32"
    assert rows[0]["significant"] and rows[0]["low"] > 2 and not any(r["regression"] for r in rows[1:])


def test_fail_above_passes_two_honest_runs_of_the_same_cells(capsys):
    """Two real runs one after the other on a shared machine differ by up to ~1.6× in a cell: the gate's
    threshold must be above that run-to-run spread (README: use a quiet runner and a threshold to match)."""
    assert main(["compare", str(COMPARE / "honest_a.jsonl"), str(COMPARE / "honest_b.jsonl"),
                 "--fail-above", "100"]) == 0
    captured = capsys.readouterr()
    assert "no cell is significantly slower" in captured.out
    # These files predate `run --rounds`: compared on the within-run rule, and the gate says it is the weaker one.
    assert "within-run noise only" in " ".join(captured.err.split()) and "--rounds 3" in captured.err
    assert main(["compare", str(COMPARE / "honest_a.jsonl"), str(COMPARE / "honest_b.jsonl")]) == 0


def test_compare_on_unusable_input_exits_2(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "missing.jsonl"), str(COMPARE / "honest_b.jsonl"),
                 "--fail-above", "10"]) == 2
    empty = tmp_path / "other.jsonl"
    empty.write_text((COMPARE / "honest_a.jsonl").read_text().splitlines()[0] + "\n")
    assert main(["compare", str(empty), str(COMPARE / "honest_b.jsonl"), "--fail-above", "10"]) == 2
    assert main(["compare", str(COMPARE / "honest_a.jsonl"), str(COMPARE / "honest_b.jsonl"),
                 "--fail-above", "-5"]) == 2


def test_run_labels_expected_failures_and_keeps_wide_tables_in_a_pipe(tmp_path):
    """Through a pipe, as a script would read it: the summary says 'expected', columns are not squeezed."""
    import subprocess
    import sys

    out = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "adcompare", "run", "--problem", "control_loop", "--operator", "grad",
                           "--adapter", "jax", "--variant", "compiled", "--no-progress", "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "failed (expected)" in done.stdout and "1 failed as expected" in done.stdout
    assert any("control_loop" in line and "compiled" in line for line in done.stdout.splitlines())  # one row a line
    from adcompare.store.results import load

    assert "data-dependent" in load([out]).measurements[0].details["expected_failure"]


def test_an_interrupted_run_says_what_it_kept_and_how_to_go_on(tmp_path, capsys, monkeypatch):
    """Ctrl-C after a run's first cell: exit 130, the message counts the cell the file holds and names --resume,
    which then finds nothing left to run; Ctrl-C in a command that writes no results claims none."""
    pytest.importorskip("autograd")
    from adcompare.cli import run as run_command
    from adcompare.model.observer import RunObserver
    from adcompare.store.results import load

    class CtrlC(RunObserver):  # the person at the terminal, pressing Ctrl-C once a cell is written, or at the start
        def __init__(self, at_start: bool):
            self.at_start = at_start

        def on_cell(self, measurement):
            raise KeyboardInterrupt

        def on_progress(self, cell, measurement):
            if self.at_start:
                raise KeyboardInterrupt

    def pressing(at_start: bool):
        @contextlib.contextmanager
        def watching(plan, rounds, show_progress):
            yield [CtrlC(at_start)]
        return watching

    run_command_watching = run_command.watching
    monkeypatch.setattr(run_command, "watching", pressing(at_start=False))
    path = tmp_path / "r.jsonl"
    argv = ["run", "--adapter", "autograd", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
            "--variant", "eager", "--dtype", "float64", "--no-progress", "-o", str(path)]
    assert main(argv) == 130
    said = " ".join(capsys.readouterr().err.split())
    assert f"interrupted; the 1 cell(s) that finished are in '{path}': add --resume -o {path}" in said
    assert [m.cell.key for m in load([path]).measurements] == ["exp_dot_loss/n10/grad/autograd/eager/cpu/float64"]
    monkeypatch.setattr(run_command, "watching", run_command_watching)
    assert main([*argv, "--resume"]) == 0 and len(load([path]).measurements) == 1

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "watching", pressing(at_start=True))
    assert main([*argv[:-1], str(tmp_path / "none.jsonl")]) == 130
    assert "interrupted before any cell finished" in capsys.readouterr().err
    monkeypatch.setattr("adcompare.cli.inventory.command", ctrl_c)
    assert main(["list"]) == 130
    assert capsys.readouterr().err.strip() == "adcompare: interrupted"


def test_a_run_refused_for_its_selection_leaves_no_results_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--problem", "no_such_problem", "--no-progress"]) == 2
    assert "unknown problem 'no_such_problem'" in capsys.readouterr().err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())

"""Bad input gets one line naming the thing and the fix, and exit 2 — through the real CLI."""
from __future__ import annotations

import pytest

from adcompare.cli.main import main


@pytest.mark.parametrize("args, says", [
    (["run", "--threads", "-3", "--dry-run"], "--threads: must be above 0, got -3"),
    (["run", "--threads", "two", "--dry-run"], "--threads: 'two' is not an integer"),
    (["run", "--timeout", "0", "--dry-run"], "--timeout: must be above 0, got 0"),
    (["check", "--memory-limit", "-1"], "--memory-limit: must be above 0, got -1"),
    (["run", "--shards", "0", "--executor", "local"], "--shards: must be above 0"),
])
def test_non_positive_numbers_are_refused_in_one_line(args, says, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("output", ["/proc/adcompare/x.jsonl", "/proc/x.jsonl"])
def test_output_paths_that_cannot_be_written_are_refused_in_one_line(output, capsys):
    assert main(["run", "--problem", "f_xy", "--adapter", "autograd", "--no-progress", "-o", output]) == 2
    err = capsys.readouterr().err
    assert "/proc" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_missing_folders_that_can_be_created_are(tmp_path):
    out = tmp_path / "a" / "b" / "r.jsonl"
    assert main(["run", "--problem", "f_xy", "--operator", "hessian", "--adapter", "autograd", "--no-progress",
                 "-o", str(out)]) == 0
    assert out.exists()


def test_inapplicable_pairs_are_left_out_with_a_note_and_the_rest_runs(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["run", "--problem", "exp_dot_loss,tanh", "--operator", "grad,jvp", "--size", "n100",
                 "--adapter", "autograd", "--no-progress", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "left out problem 'tanh' with operator 'grad'" in err
    assert main(["run", "--problem", "tanh", "--operator", "grad", "--adapter", "autograd", "--dry-run"]) == 2
    assert "nothing applies: left out problem 'tanh' with operator 'grad'" in capsys.readouterr().err

"""No run destroys earlier results: new timestamped files by default, an existing -o refused unless --resume or
--overwrite, one writer per file at a time, `report --latest`. Driven through the real CLI."""
from __future__ import annotations

import subprocess
import sys

import pytest

from adcompare.cli.main import main
from adcompare.model.errors import UsageError
from adcompare.store.results import ResultsWriter, load

CELL = ["--problem", "f_xy", "--operator", "hessian", "--adapter", "autograd", "--no-progress"]


def test_runs_without_o_each_write_a_new_file_and_report_latest_takes_the_newest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", *CELL]) == 0
    assert main(["run", *CELL]) == 0
    files = sorted((tmp_path / "results").glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)  # newest last
    assert len(files) == 2 and all(load([f]).measurements for f in files)
    printed = capsys.readouterr().out
    assert all(f"results: results/{f.name}" in printed for f in files)
    assert main(["report", "--latest", "-o", "rep"]) == 0
    assert f"reporting results/{files[-1].name}" in capsys.readouterr().out
    assert (tmp_path / "rep" / "index.html").exists()


def test_an_existing_output_is_refused_unless_resume_or_overwrite(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    assert main(["run", *CELL, "-o", str(path)]) == 0
    before = path.read_text()
    capsys.readouterr()
    assert main(["run", *CELL, "-o", str(path)]) == 2
    message = capsys.readouterr().err
    assert "already exists" in message and "--resume" in message and "--overwrite" in message
    assert path.read_text() == before
    assert main(["run", *CELL, "-o", str(path), "--resume"]) == 0  # nothing missing: the file keeps its cell
    resumed = load([path])
    kept = [m.cell.key for m in resumed.measurements]
    assert len(kept) == len(set(kept)) and kept
    header = resumed.provenance[0]  # the resume names its own chunk beside the header's first one
    assert [(r.adcompare, r.git_commit, r.machine) for r in resumed.resumptions] == \
        [(header.adcompare, header.git_commit, header.machine.id)] and resumed.resumptions[0].date >= header.date
    assert main(["run", *CELL, "-o", str(path), "--overwrite"]) == 0
    replaced = load([path])
    assert path.read_text() != before  # a new header and new timings
    assert sorted(m.cell.key for m in replaced.measurements) == sorted(kept)


def test_a_file_being_written_is_refused_to_a_second_writer(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {"host": "h"}):
        code = ("from adcompare.store.results import ResultsWriter\n"
                f"ResultsWriter({str(path)!r}, {{'host': 'h'}}, resume=True)\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert "is being written by another adcompare run" in done.stderr
        with pytest.raises(UsageError, match="already exists"):
            ResultsWriter(path, {"host": "h"})
    ResultsWriter(path, {"host": "h"}, resume=True).close()  # free again once the first writer is done


def test_report_latest_without_results_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--latest"]) == 2
    assert "run `adcompare run` first" in capsys.readouterr().err


def test_report_never_replaces_the_results_of_an_earlier_report(tmp_path, capsys):
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "results.jsonl").write_text("an earlier report's results\n")
    assert main(["report", "-o", str(folder), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "already holds the results of an earlier report" in err and "adcompare report" in err
    assert (folder / "results.jsonl").read_text() == "an earlier report's results\n"

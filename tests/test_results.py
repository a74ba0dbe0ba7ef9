"""The results file: appended per cell, resumable, refuses foreign or newer files, survives a truncated line."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from adcompare.analysis.bootstrap import Bootstrap
from adcompare.analysis.summary import entry, summarize
from adcompare.model.cell import Cell
from adcompare.model.errors import ResultsFileError
from adcompare.model.measurement import Check, Measurement, Timing
from adcompare.model.status import Status
from adcompare.store.results import SCHEMA, ResultsWriter, finished_keys, load, merge_files
from adcompare.verify.check import PER_EXAMPLE_WEIGHTS

ROOT = Path(__file__).resolve().parent.parent


def _m(size="n10", status=Status.OK):
    cell = Cell("exp_dot_loss", size, "grad", "jax", "eager", "cpu", "float32")
    return Measurement(cell, status, timing=Timing((1e-5, 2e-5, 3e-5), 10, 1e-3),
                       check=Check(1e-7, 1e-4, "central differences"))


def test_roundtrip_and_resume(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(_m("n10"))
    with ResultsWriter(path, {"host": "h"}, resume=True) as w:
        w.add(_m("n100"))
    with ResultsWriter(path, {"host": "h", "git_commit": "c0ffee", "date": "2026-11-28T00:00:00",
                              "adcompare": "9.9"}, resume=True):
        pass
    results = load([path])
    assert [m.cell.size for m in results.measurements] == ["n10", "n100"]
    assert results.measurements[0].timing.median == pytest.approx(2e-5)
    assert finished_keys(path) == {m.cell.key for m in results.measurements}
    assert results.provenance[0].git_commit is None  # the header keeps the first chunk's; each resume its own
    assert [(r.git_commit, r.date, r.adcompare, r.source) for r in results.resumptions] == \
        [(None, "", "", str(path)), ("c0ffee", "2026-11-28T00:00:00", "9.9", str(path))]
    assert results.resumptions[1].describe() == "2026-11-28T00:00:00 on commit c0ffee (adcompare 9.9)"


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {}) as w:
        w.add(_m("n10"))
        w.add(_m("n100"))
    data = path.read_text()
    path.write_text(data[: len(data) - 40])
    with pytest.warns(UserWarning, match="dropped truncated last line"):
        results = load([path])
    assert [m.cell.size for m in results.measurements] == ["n10"]
    with ResultsWriter(path, {}, resume=True) as w:  # resuming repairs the tail before appending
        w.add(_m("n100"))
    assert len(load([path]).measurements) == 2


def test_foreign_and_newer_files_are_refused(tmp_path):
    foreign = tmp_path / "f.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(ResultsFileError, match="is not an adcompare results file"):
        load([foreign])
    newer = tmp_path / "n.jsonl"
    newer.write_text(json.dumps({"format": "adcompare-results", "schema": SCHEMA + 1, "provenance": {}}) + "\n")
    with pytest.raises(ResultsFileError, match="newer than this adcompare reads"):
        load([newer])


def test_timing_statistics_are_numpys_median_and_percentiles():
    """Timing computes its statistics without NumPy (the report reads them for 10⁴ cells); same values."""
    import numpy as np

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 7, 10, 51):
        samples = tuple(rng.random(n))
        t = Timing(samples, 1, 0.1)
        q1, q3 = np.percentile(samples, [25, 75])
        assert (t.median, t.iqr, t.min) == (float(np.median(samples)), float(q3 - q1), min(samples))
        huge = tuple(x * 1e308 for x in samples)  # up to 1e308: np.median's sum of the middle two is inf
        assert Timing(huge, 1, 0.1).median == float(np.median(np.asarray(huge) / 2) * 2) < math.inf


def test_a_gzipped_results_file_reads_like_the_plain_one(tmp_path):
    """Published baselines are committed gzipped (benchmarks/results/full/); report, compare and --history read them."""
    import gzip

    plain = tmp_path / "r.jsonl"
    with ResultsWriter(plain, {"host": "test"}) as w:
        w.add(Measurement(Cell("f_xy", "n2", "grad", "jax", "eager", "cpu", "float64"), Status.OK))
    packed = tmp_path / "r.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load([packed]).measurements == load([plain]).measurements
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ResultsFileError, match="cannot read results file"):
        load([tmp_path / "bad.jsonl.gz"])


def _ok_record_line(path, **timing):
    """Write a one-cell results file whose ok cell's timing fields are overridden; return the cell's line number."""
    m = _m()
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(m)
    lines = path.read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["timing"].update(timing)
    lines[-1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


@pytest.mark.parametrize("timing, field", [
    ({"samples": [1e-5, -2e-5, 3e-5]}, r"timing\.samples\[1\] is -2e-05, a negative time"),
    ({"samples": [1e-5, float("nan")]}, r"timing\.samples\[1\] is nan, not a finite time"),
    ({"samples": [float("inf")]}, r"timing\.samples\[0\] is inf"),
    ({"samples": []}, r"timing\.samples is empty"),
    ({"median": float("nan")}, r"timing\.median is nan"),
    ({"first_call": -1.0}, r"timing\.first_call is -1\.0, a negative time"),
])
def test_loading_refuses_a_timing_that_cannot_be_a_measurement(tmp_path, timing, field):
    path = tmp_path / "r.jsonl"
    line = _ok_record_line(path, **timing)
    with pytest.raises(ResultsFileError, match=rf"^{path}:{line}: cell .*\(ok\): {field}") as err:
        load([path])
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


def _edit(rec: dict, path: str, value=None) -> None:
    """Set (or, with value None, delete) the field at a dotted path of a record."""
    *parents, last = path.split(".")
    for name in parents:
        rec = rec[name]
    rec.pop(last) if value is None else rec.__setitem__(last, value)


@pytest.mark.parametrize("field, value, why", [
    ("timing.samples", None, r"timing\.samples is missing"),
    ("timing.number", None, r"timing\.number is missing"),
    ("timing.number", 0, r"timing\.number is 0, not a count"),
    ("status", None, r"field 'status' is missing; one of 'ok', 'mismatch'"),
    ("status", "passed", r"status 'passed' is unknown; one of 'ok', 'mismatch'"),
    ("support", "magic", r"support 'magic' is unknown; one of 'native'"),
    ("cell", None, r"field 'cell' is missing"),
    ("cell.size", None, r"cell\.size is missing"),
    ("cell.adapter", 3, r"cell\.adapter is 3, not a name"),
    ("check.tolerance", None, r"check\.tolerance is missing"),
    ("check", [1], r"check is \[1\], not an object"),
])
def test_loading_refuses_a_malformed_record_in_one_line(tmp_path, field, value, why):
    """A record with a missing or unknown field stopped report and compare with a KeyError/ValueError traceback;
    now one line naming the file, line and field, exit 2 (through the CLI: the test below)."""
    path, line = _malformed(tmp_path, field, value)
    with pytest.raises(ResultsFileError, match=rf"^{path}:{line}: cell .*: {why}") as err:
        load([path])
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


def _malformed(tmp_path, field: str, value) -> tuple[Path, int]:
    """A results file whose one cell record has `field` set to `value` (None: deleted); (path, its line)."""
    path = tmp_path / "r.jsonl"
    line = _ok_record_line(path)
    lines = path.read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["check"] = {"error": 1e-9, "tolerance": 1e-4, "reference_method": "exact"}
    _edit(rec, field, value)
    lines[-1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    return path, line


def test_a_malformed_record_is_one_line_exit_2_through_the_cli(tmp_path):
    """The CLI says load's one line as it is, without a traceback. One malformed field is enough: every field's
    message comes from the same `load`, held above (a Python start per field cost ~0.6 s each for nothing more)."""
    path, _ = _malformed(tmp_path, "cell.size", None)
    with pytest.raises(ResultsFileError) as err:
        load([path])
    run = subprocess.run([sys.executable, "-m", "adcompare", "report", str(path), "-o", str(tmp_path / "rep")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert [ln for ln in run.stderr.splitlines() if ln.strip()] == [f"adcompare: {err.value}"]


def test_loading_keeps_zero_times_and_untimed_cells(tmp_path):
    path = tmp_path / "r.jsonl"
    _ok_record_line(path, samples=[0.0, 0.0, 0.0])
    assert load([path]).measurements[0].timing.median == 0.0
    with ResultsWriter(tmp_path / "u.jsonl", {}) as w:
        w.add(Measurement(_m().cell, Status.FAILED, message="boom"))
    assert load([tmp_path / "u.jsonl"]).measurements[0].timing is None


def test_every_committed_baseline_and_fixture_loads():
    """No legitimate record is refused: the baselines `adcompare run` wrote, and the test fixtures."""
    root = Path(__file__).resolve().parent.parent
    files = [*sorted((root / "benchmarks" / "results").rglob("*.jsonl*")),
             *sorted((root / "tests" / "fixtures").rglob("*.jsonl"))]
    assert len(files) >= 8
    for f in files:
        assert load([f]).measurements, f


def test_a_real_pytest_benchmark_run_at_default_rounds_reports_the_speed_up_of_its_raw_rounds(tmp_path):
    """The README's headline flow on real output (hundreds to thousands of rounds, which overflowed the rank test):
    `adcompare report` builds, and the summary's speed-up equals the ratio of medians of the JSON's raw rounds."""
    bench = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_matrix.py"), "--benchmark-only", "-q",
         "-p", "no:cacheprovider", "--adcompare-adapters", "jax,torch", "--adcompare-problems", "f_r2_r3",
         "--adcompare-operators", "jacrev", f"--benchmark-json={bench}"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    benchmarks = json.loads(bench.read_text())["benchmarks"]
    cells = [(b["extra_info"]["adcompare_cell"], b["stats"]["data"]) for b in benchmarks]
    raw = {f"{cell['adapter']} · {cell['variant']}": data for cell, data in cells}
    assert max(len(d) for d in raw.values()) >= 100  # default rounds: far more than adcompare run's 7 blocks
    shown = subprocess.run([sys.executable, "-m", "adcompare", "report", str(bench), "-o", str(tmp_path / "rep")],
                           capture_output=True, text=True, timeout=600)
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert (tmp_path / "rep" / "index.html").exists()
    (verdict,) = [v for s in summarize(load([bench]).measurements, Bootstrap()) for v in s.every_size]
    fastest = np.median(raw[entry(verdict.fastest)])
    assert fastest == min(np.median(d) for d in raw.values())
    for rival in verdict.rivals:
        assert rival.ratio.ratio == pytest.approx(np.median(raw[entry(rival.measurement)]) / fastest, rel=1e-12)
        assert rival.difference.p_value == pytest.approx(
            mannwhitneyu(raw[entry(verdict.fastest)], raw[entry(rival.measurement)]).pvalue, rel=1e-9, abs=1e-300)


def test_a_loaded_file_is_finished_once_labelled_by_the_problems_given(tmp_path):
    """A file written before the labels (a compiled control_loop cell failed, no `expected_failure`) is labelled
    on load by the registry's problems — the data-dependent loop's reason, from the problem's declaration — and
    kept as written without them; finishing a finished set changes nothing."""
    from adcompare.plugin.registry import load as load_registry
    from adcompare.verify.expectations import expected_reason
    from adcompare.verify.finish import finished

    problems = load_registry(()).problems
    cell = Cell("control_loop", "n10", "grad", "jax", "compiled", "cpu", "float32")
    path = tmp_path / "old.jsonl"
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(Measurement(cell, Status.FAILED, "ConcretizationTypeError: a tracer turned into a bool"))
    assert expected_reason(load([path]).measurements[0]) is None
    (labelled_once,) = load([path], problems).measurements
    assert "data-dependent" in expected_reason(labelled_once)
    assert finished([labelled_once], problems) == [labelled_once]


def _git(folder, *args):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}  # never this repo's
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True, env=clean).stdout.strip()


def _checkout(folder, files=("a.py",)):
    """A throwaway git checkout of `files` at one commit (those that do not exist yet hold `x = 1`)."""
    folder.mkdir(exist_ok=True)
    _git(folder, "init", "-q")
    for name in files:
        if not (folder / name).exists():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("x = 1\n")
    _git(folder, "add", *files)
    _git(folder, "commit", "-q", "-m", "one")
    return folder.resolve(), _git(folder, "rev-parse", "--short", "HEAD")


def test_the_headers_commit_marks_a_changed_tree_and_problems_and_adapters_from_another_checkout(tmp_path,
                                                                                                monkeypatch):
    """git_commit names the code a run imports: its commit, "+dirty" where tracked files changed or an untracked
    module lies in the problems folder (which imports every module it holds; an untracked file elsewhere is no
    change), "+unknown" where git cannot say; and the mapped packages an editable install imports from another
    checkout (one inside this one too), with that checkout's commit, or from a folder no checkout tracks; no
    commit where nothing is a checkout. GIT_DIR (a git hook's) does not redirect it."""
    from adcompare.store.provenance import PackageSource, describe_code, git_commit, tree_commit

    monkeypatch.setenv("GIT_DIR", str(ROOT / ".git"))
    ours, ours_commit = _checkout(tmp_path / "ours", ("a.py", "adcompare/__init__.py", "problems/__init__.py"))
    theirs, theirs_commit = _checkout(tmp_path / "theirs", ("problems/__init__.py", "adapters/__init__.py"))
    (ours / "new.py").write_text("untracked\n")
    assert tree_commit(ours, ours / "problems") == ours_commit and tree_commit(tmp_path) is None
    (ours / "problems" / "mine.py").write_text("untracked, but imported\n")
    assert tree_commit(ours, ours / "problems") == f"{ours_commit}+dirty" and tree_commit(ours) == ours_commit
    (ours / "problems" / "mine.py").unlink()
    (ours / "a.py").write_text("x = 2\n")
    assert tree_commit(ours) == f"{ours_commit}+dirty"
    package = ours / "adcompare"
    own = {"adcompare.problems": PackageSource(ours / "problems", ours), "adcompare.adapters": None}
    assert describe_code(package, ours, own) == f"{ours_commit}+dirty"
    mixed = describe_code(package, ours, {"adcompare.problems": PackageSource(theirs / "problems", theirs),
                                          "adcompare.adapters": PackageSource(theirs / "adapters", theirs)})
    assert mixed == f"{ours_commit}+dirty; adcompare.problems and adcompare.adapters from {theirs} at {theirs_commit}"
    nested, nested_commit = _checkout(ours / "pinned", ("problems/__init__.py",))  # a clone inside this one
    assert describe_code(package, ours, {"adcompare.problems": PackageSource(nested / "problems", nested)}) == \
        f"{ours_commit}+dirty; adcompare.problems from {nested} at {nested_commit}"
    copy = tmp_path / "home" / "adcompare"  # adcompare copied into no checkout, its problems from one beside it
    assert describe_code(copy, None, {"adcompare.problems": PackageSource(theirs / "problems", theirs)}) == \
        f"no commit; adcompare.problems from {theirs} at {theirs_commit}"
    plain = tmp_path / "plain" / "adapters"
    assert describe_code(package, ours, {"adcompare.adapters": PackageSource(plain, None)}) == \
        f"{ours_commit}+dirty; adcompare.adapters from {plain} (not a git checkout)"
    release = tmp_path / "site-packages" / "adcompare"  # an installed release: everything inside its package
    assert describe_code(release, None, {"adcompare.problems": PackageSource(release / "problems", None)}) is None
    (ours / ".git" / "index").write_bytes(b"not an index")  # git status fails where rev-parse still works
    assert tree_commit(ours) == f"{ours_commit}+unknown"
    if (ROOT / ".git").exists():  # this checkout: its own commit first, whatever its state
        assert (git_commit() or "").startswith(_git(ROOT, "rev-parse", "--short", "HEAD"))


def test_a_copy_of_adcompare_on_pythonpath_names_the_checkout_its_problems_come_from(tmp_path):
    """The case that made git_commit name two checkouts: another checkout's adcompare on PYTHONPATH, whose
    problems and adapters an editable install still maps to this one. Run as a user runs it, in a fresh
    interpreter; where this checkout is no editable install of adcompare there is nothing to map."""
    spec = importlib.util.find_spec("adcompare.problems")
    if not (ROOT / ".git").exists() or spec is None or \
            Path(list(spec.submodule_search_locations or [""])[0]).resolve().parent != ROOT:
        pytest.skip("needs this git checkout installed editable (pip install -e .), as the README installs it")
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "adcompare", copy / "adcompare", ignore=shutil.ignore_patterns("__pycache__"))
    copy, copy_commit = _checkout(copy, ("adcompare",))
    said = subprocess.run([sys.executable, "-c", "from adcompare.store import provenance as p; print(p.__file__);"
                           "print(p.git_commit())"], capture_output=True, text=True, check=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(copy)}).stdout.splitlines()
    assert said[0] == str(copy / "adcompare" / "store" / "provenance.py")
    assert said[1].startswith(f"{copy_commit}; adcompare.problems and adcompare.adapters from {ROOT} at ")


def test_provenance_is_typed_and_round_trips_the_header_it_was_read_from(tmp_path):
    """A run's header, written by the writer and loaded back, is the same `Provenance`; its JSON keeps the keys in
    the order adcompare has always written them; keys it does not know (another producer's, a newer writer's)
    survive the round trip, and a schema-1 header (no machine) gets one from its host and workers."""
    from adcompare.model.fingerprint import this_machine
    from adcompare.store.provenance import EnvironmentRecord, Provenance, collect

    made = collect(2, this_machine(["numpy"]))
    assert list(made.to_json()) == ["adcompare", "git_commit", "date", "host", "platform", "python", "numpy", "cpu",
                                    "gpu", "machine", "cpu_count", "threads", "thread_policy"]
    with_env = Provenance.from_json({**made.to_json(), "environments": {"old": {"requirements": ["autograd==1.8.0"],
                                                                                 "python": "/x/python"}},
                                     "newer_key": [1, 2]})
    assert with_env.environments == {"old": EnvironmentRecord(requirements=("autograd==1.8.0",), python="/x/python")}
    assert with_env.extra == {"newer_key": [1, 2]}
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, with_env) as w:
        w.add(_m())
    (loaded,) = load([path]).provenance
    assert loaded == with_env and loaded.machine.id == made.machine.id
    assert json.loads(path.read_text().splitlines()[0])["provenance"] == with_env.to_json()
    old = Provenance.from_json({"host": "h", "cpu": "c"}, [{"versions": {"jax": "0.4.30"}}])
    assert (old.machine.host, old.machine.frameworks) == ("h", (("jax", "0.4.30"),))


def test_a_timing_cut_short_round_trips_and_older_files_read_and_resume_under_schema_3(tmp_path):
    """Issue 39: `timing.stopped` and 1-sample timings are schema 3; a schema-2 file reads as before (`stopped`
    empty) and resuming it upgrades its header, so an older adcompare refuses the mix instead of ranking it."""
    cell = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float32")
    few = Measurement(cell, Status.OK, timing=Timing((2.5,), 1, 2.6, stopped="cell timeout"),
                      check=Check(1e-7, 1e-4, "central differences"))
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(few)
    assert json.loads(path.read_text().splitlines()[0])["schema"] == SCHEMA
    got = load([path]).measurements[0].timing
    assert got.stopped == "cell timeout" and got.few_samples and got.spread is None and got.median == 2.5

    old = tmp_path / "old.jsonl"
    with ResultsWriter(old, {"host": "h"}) as w:
        w.add(_m("n10"))
    lines = old.read_text().splitlines()
    record = json.loads(lines[-1])
    del record["timing"]["stopped"]  # as schema 2 wrote it
    old.write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema": 2}), *lines[1:-1], json.dumps(record)])
                   + "\n")
    before = load([old]).measurements[0].timing
    assert before.stopped == "" and not before.few_samples and before.spread == before.iqr
    with ResultsWriter(old, {"host": "h"}, resume=True) as w:
        w.add(replace(few, cell=replace(cell, size="n100")))
    assert json.loads(old.read_text().splitlines()[0])["schema"] == SCHEMA
    assert [m.timing.stopped for m in load([old]).measurements] == ["", "cell timeout"]


def test_a_schema_3_file_keeps_its_per_example_projections_apart_from_schema_4_ones_when_resumed(tmp_path):
    """Schema 4 weighs a per-example result per example and per entry; a schema-3 record (no projection_weights:
    every entry its own draw) reads with weights "", so after a resume the two never meet in the pairwise vote
    (their projections differ though both results are right), and the header is upgraded so an older adcompare
    refuses the mix."""
    cell = Cell("linear_layer", "n5-p8-o2", "vmap_jacfwd", "jax", "eager", "cpu", "float64")
    old_check = Check(1e-12, 1e-9, "central differences", projection=1.5)
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(Measurement(cell, Status.OK, timing=Timing((1e-5,) * 7, 10, 1e-3), check=old_check))
    lines = path.read_text().splitlines()
    record = json.loads(lines[-1])
    del record["check"]["projection_weights"]  # as schema 3 wrote it
    path.write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema": 3}), *lines[1:-1],
                               json.dumps(record)]) + "\n")
    new_check = replace(old_check, projection=-0.25, projection_weights=PER_EXAMPLE_WEIGHTS)
    with ResultsWriter(path, {"host": "h"}, resume=True) as w:
        w.add(Measurement(replace(cell, adapter="torch"), Status.OK, timing=Timing((1e-5,) * 7, 10, 1e-3),
                          check=new_check))
    assert json.loads(path.read_text().splitlines()[0])["schema"] == SCHEMA == 4
    got = load([path]).measurements
    assert [(m.check.projection_weights, m.status, m.check.pairwise_error) for m in got] == \
        [("", Status.OK, None), (PER_EXAMPLE_WEIGHTS, Status.OK, None)]


def test_a_cell_with_one_or_two_samples_has_a_median_and_no_interval_or_ranking():
    """Issue 39: a 1–2-sample timing (a slow cell's few calls) gets no IQR, no bootstrap interval, no verdict."""
    from adcompare.analysis.cell_rows import COLUMNS, rows

    cell = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float64")
    few = Measurement(cell, Status.OK, timing=Timing((2.0, 2.2), 1, 2.5, stopped="deadline"))
    full = Measurement(replace(cell, adapter="torch"), Status.OK, timing=Timing((1.0,) * 7, 1, 1.5))
    assert Bootstrap().ratio("a", few.measured, "b", full.measured) is None
    names = [c.name for c in COLUMNS]
    row = dict(zip(names, rows([few], {}, COLUMNS)[0]))
    assert row["iqr_s"] == "" and row["samples"] == "2" and row["stopped"] == "deadline"
    assert row["median_s"] == "2.1"
    (verdict,) = summarize([few, full], Bootstrap())[0].every_size
    assert verdict.fastest is full and verdict.rivals[0].ratio is None and not verdict.clear  # 2.1× but untested


def test_merged_shards_are_written_under_this_schema(tmp_path):
    """A shard left at schema 3 (its --resume never opened the writer) must not label a schema-4 shard's records
    with its header when it comes first: an older adcompare would then compare unlike projections."""
    old, new, out = tmp_path / "1.jsonl", tmp_path / "2.jsonl", tmp_path / "all.jsonl"
    for path, size in ((old, "n10"), (new, "n100")):
        with ResultsWriter(path, {"host": "h"}) as w:
            w.add(_m(size))
    lines = old.read_text().splitlines()
    old.write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema": 3}), *lines[1:]]) + "\n")
    merge_files([old, new], out)
    assert json.loads(out.read_text().splitlines()[0])["schema"] == SCHEMA
    assert sorted(m.cell.size for m in load([out]).measurements) == ["n10", "n100"]

"""The gate's noise model: cells timed in rounds are compared on the spread between rounds (comparison.py), files
without rounds on the within-run test, and the rounds of a run are merged into one record per cell (rounds.py)."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcompare.analysis.comparison import (
    BETWEEN_ROUNDS,
    CPU_CLOCK,
    MIN_SHIFT_CELLS,
    WALL_CLOCK,
    WITHIN_RUN,
    between_rounds,
    compare,
    regressions,
    run_shifts,
)
from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.measurement import Check, Measurement, Timing
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.adapter import Prepared
from adcompare.run.rounds import merge_rounds, recovered
from adcompare.run.timing import measure, median_interval
from adcompare.store.results import Results, ResultsWriter, load
from adcompare.store.round_journal import RoundJournal, read_journal

from .recording import Recording

CELL = Cell("exp_dot_loss", "n10000", "jacrev", "jax", "compiled", "cpu", "float32")


def _timing(samples, minima=(), medians=None, cpu=()) -> Timing:
    """Samples, and per round the fastest block (`minima`), the median and the median CPU time (`cpu`)."""
    minima = tuple(float(r) for r in minima)
    return Timing(tuple(float(s) for s in samples), 10, 1e-3, rounds=minima if medians is None else tuple(medians),
                  round_minima=minima, round_cpu=tuple(cpu))


def _results(*timings: Timing) -> Results:
    cells = [Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "jacrev", "jax", "compiled", "cpu", "float32")
             for k in range(len(timings))]
    return Results((), tuple(Measurement(c, Status.OK, timing=t) for c, t in zip(cells, timings)))


def _blocks(median: float, n: int = 9, spread: float = 0.002) -> list[float]:
    """Tight per-block samples around `median`, as one quiet process gives them."""
    return [median * (1 + spread * (k - n // 2) / n) for k in range(n)]


def test_between_rounds_against_a_direct_recomputation():
    base, cand = [1.0, 1.1, 0.95], [1.3, 1.25, 1.4]
    d = between_rounds(_timing(base, base), _timing(cand, cand), 0.10)
    assert d.ratio.ratio == pytest.approx(1.3 / 1.0)
    assert (d.ratio.low, d.ratio.high) == pytest.approx((1.25 / 1.1, 1.4 / 0.95))  # three rounds: their range
    assert d.significant and d.rounds == (3, 3) and d.noise_model == BETWEEN_ROUNDS
    # The same rounds with a threshold the worst pairing does not clear: not a regression.
    assert not between_rounds(_timing(base, base), _timing(cand, cand), 0.15).significant


def test_blocks_that_separate_but_rounds_that_overlap_are_no_regression():
    """Issue 23's false alarm in small: each run's blocks are tight, so the within-run test calls ×1.15 a slowdown;
    the rounds of each run spread as wide as the difference, so between rounds it is noise."""
    base_rounds, cand_rounds = [1.0, 1.2, 1.1], [1.15, 1.05, 1.3]
    base = _timing(_blocks(1.0) + _blocks(1.2) + _blocks(1.1), base_rounds)
    cand = _timing(_blocks(1.15) + _blocks(1.05) + _blocks(1.3), cand_rounds)
    (row,) = compare(_results(base), _results(cand), 0.10)
    assert row.noise_model == BETWEEN_ROUNDS and not row.difference.significant
    assert row.change == pytest.approx(statistics.median(cand_rounds) / statistics.median(base_rounds))
    assert row.verdict == "same (rounds overlap)"
    # One process per side, tight blocks 15 % apart: the within-run rule (what files without rounds get) fires.
    (old,) = compare(_results(_timing(_blocks(1.0))), _results(_timing(_blocks(1.15))), 0.10)
    assert old.noise_model == WITHIN_RUN and regressions([old]) == [old]


def test_rounds_are_judged_by_their_fastest_block_not_their_median():
    """A candidate whose rounds ran while other jobs loaded the machine: medians ×1.5, fastest blocks as before.
    Time is only ever added by other jobs, so that is no regression; a slowdown of the code moves the minima."""
    base = _timing([1.0] * 9, [1.0, 1.02, 0.99])
    loaded = _timing([1.5] * 9, [1.01, 0.98, 1.03], medians=[1.5, 1.6, 1.45])
    (row,) = compare(_results(base), _results(loaded), 0.10)
    assert not row.difference.significant and row.change == pytest.approx(1.01 / 1.0)
    slower = _timing([1.3] * 9, [1.3, 1.28, 1.33], medians=[1.3, 1.29, 1.35])
    (row,) = compare(_results(base), _results(slower), 0.10)
    assert regressions([row]) == [row] and row.ratio.low == pytest.approx(1.28 / 1.02)


def test_cpu_cells_are_judged_on_cpu_time_per_round_and_gpu_cells_on_the_wall_clock():
    """Wall-clock rounds 40 % apart (the candidate's process waited for the CPU), CPU time per call the same:
    no regression on the CPU; on a GPU, where CPU time says nothing of the device's work, the wall clock decides."""
    base = _timing([1.0] * 9, [1.0, 1.01, 0.99], cpu=[0.9, 0.91, 0.9])
    cand = _timing([1.4] * 9, [1.4, 1.42, 1.45], cpu=[0.9, 0.92, 0.89])
    (row,) = compare(_results(base), _results(cand), 0.10)
    assert row.difference.clock == CPU_CLOCK and not row.difference.significant
    assert (row.baseline, row.candidate) == (0.9, 0.9) and row.to_json()["clock"] == CPU_CLOCK
    gpu = Cell("exp_dot_loss", "n10", "jacrev", "jax", "compiled", "cuda", "float32")
    on_gpu = [Results((), (Measurement(gpu, Status.OK, timing=t),)) for t in (base, cand)]
    (row,) = compare(*on_gpu, 0.10)
    assert row.difference.clock == WALL_CLOCK and row.ratio.low == pytest.approx(1.4 / 1.01)
    assert regressions([row]) == [row]


def test_blocks_record_process_cpu_time_beside_wall_time():
    """A call that sleeps 2 ms takes wall time and almost no CPU time; one that computes until it has used 2 ms of
    CPU takes at least that. Asserted on CPU time alone, which another job on the machine cannot lengthen (wall
    time can: a busy machine once gave the spinning call a CPU share of 0.31)."""
    def sleeps():
        time.sleep(0.002)

    def spins():
        until = time.process_time() + 0.002
        while time.process_time() < until:
            pass

    policy = TimingPolicy(min_time=0.05, max_time=0.5, min_samples=7)
    slept, spun = (measure(Prepared(work), lambda out: None, 0.002, compiled=False, policy=policy)
                   for work in (sleeps, spins))
    for t in (slept, spun):
        assert len(t.cpu_samples) == len(t.samples) >= 7
    assert statistics.median(slept.cpu_samples) < 0.001 <= 0.002 <= slept.median
    assert statistics.median(spun.cpu_samples) >= 0.002


def test_a_side_without_rounds_falls_back_to_the_within_run_rule_and_says_so():
    with_rounds = _timing(_blocks(1.0) * 3, [1.0, 1.0, 1.0])
    (row,) = compare(_results(_timing(_blocks(1.0))), _results(with_rounds), 0.10)
    assert row.noise_model == WITHIN_RUN and row.to_json()["rounds"] is None
    assert row.to_json()["noise_model"] == WITHIN_RUN


round_lists = st.lists(st.floats(1e-7, 1.0, allow_nan=False), min_size=2, max_size=5)


@settings(max_examples=300, deadline=None)
@given(round_lists, round_lists, st.sampled_from([0.0, 0.05, 0.10, 0.25, 1.0]))
def test_verdict_is_every_round_beyond_every_other_by_the_threshold(base, cand, threshold):
    """With up to five rounds a side the rule reads: a slowdown when every candidate round is slower than every
    baseline round by more than the threshold (a speed-up the other way round); recomputed pair by pair."""
    d = between_rounds(_timing(base, base), _timing(cand, cand), threshold)
    slower = all(c > (1 + threshold) * b for c in cand for b in base)
    faster = all(c * (1 + threshold) < b for c in cand for b in base)
    assert d.significant == (slower or faster)
    assert d.ratio.low <= d.ratio.ratio <= d.ratio.high
    assert d.ratio.ratio == pytest.approx(statistics.median(cand) / statistics.median(base))


def _measurement(samples, status=Status.OK, wall=1.0, message="") -> Measurement:
    timing = dataclasses.replace(_timing(samples), cpu_samples=tuple(s / 2 for s in samples)) \
        if status is Status.OK else None
    return Measurement(CELL, status, message, timing=timing, check=Check(1e-7, 1e-4, "central differences"),
                       details={"wall_seconds": wall})


def test_merge_rounds_keeps_every_block_and_each_round_median():
    rounds = [_measurement([3.0, 1.0, 2.0], wall=1.0), _measurement([5.0, 4.0, 6.0, 7.0], wall=2.0),
              _measurement([0.5, 0.7, 0.6], wall=1.5)]
    merged = merge_rounds(rounds)
    assert merged.timing.samples == (3.0, 1.0, 2.0, 5.0, 4.0, 6.0, 7.0, 0.5, 0.7, 0.6)
    assert merged.timing.rounds == (2.0, 5.5, 0.6) and merged.timing.round_minima == (1.0, 4.0, 0.5)
    assert merged.timing.round_cpu == (1.0, 2.75, 0.3) and len(merged.timing.cpu_samples) == 10
    assert merged.timing.round_blocks == (3, 4, 3)
    assert merged.timing.first_call == rounds[0].timing.first_call and merged.check == rounds[0].check
    assert merged.details["rounds"] == 3 and merged.details["wall_seconds"] == 1.0
    assert merged.details["wall_seconds_all_rounds"] == pytest.approx(4.5)
    back = Timing.from_json(json.loads(json.dumps(merged.timing.to_json())))
    assert back == merged.timing
    old = merged.timing.to_json()
    del old["rounds"], old["round_minima"], old["round_cpu"], old["cpu_samples"]  # written before rounds existed
    del old["round_blocks"]
    assert Timing.from_json(old).rounds == () and Timing.from_json(old).round_minima == ()
    assert Timing.from_json(old).round_blocks == ()


def test_a_round_that_fails_makes_the_record_that_failure():
    crashed = _measurement([], Status.CRASHED, message="worker died (SIGSEGV)")
    merged = merge_rounds([_measurement([1.0, 1.0, 1.0]), crashed, _measurement([1.0, 1.0, 1.0])])
    assert merged.status is Status.CRASHED and merged.message == "round 2 of 3: worker died (SIGSEGV)"
    failed_first = _measurement([], Status.FAILED, message="boom")
    assert merge_rounds([failed_first]) is failed_first


def test_run_in_rounds_uses_fresh_workers_and_compare_decides_between_rounds(tmp_path, capsys):
    """A real run: each round starts its own worker, the record holds each round's median of its own blocks, and
    `compare` of two such files decides on the rounds; files without rounds are compared with the caveat said."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    base = ["run", "--adapter", "jax", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
            "--variant", "compiled", "--dtype", "float32", "--no-progress", "--rounds", "2"]
    assert main(base + ["-o", str(a)]) == 0
    assert main(base + ["-o", str(b)]) == 0
    capsys.readouterr()
    results = load([a])
    (m,) = results.measurements
    assert len(m.timing.rounds) == len(m.timing.round_minima) == 2 and m.details["rounds"] == 2
    assert len({w["pid"] for w in results.workers}) == 2  # two rounds, two worker processes
    assert not Path(f"{a}.rounds").exists()  # every round's cell written: the round journal is gone
    assert all(min(m.timing.samples) <= r <= max(m.timing.samples) for r in m.timing.rounds)
    assert min(m.timing.round_minima) == min(m.timing.samples)  # every block is some round's
    assert len(m.timing.round_cpu) == 2 and len(m.timing.cpu_samples) == len(m.timing.samples)
    assert main(["compare", str(a), str(b), "--fail-above", "10", "--json"]) in (0, 1)
    captured = capsys.readouterr()
    (row,) = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    assert row["noise_model"] == BETWEEN_ROUNDS and row["rounds"] == [2, 2] and row["clock"] == CPU_CLOCK
    ra, rb = m.timing.round_cpu, load([b]).measurements[0].timing.round_cpu  # a CPU cell: decided on CPU time
    assert row["ratio"] == pytest.approx(statistics.median(rb) / statistics.median(ra))
    assert row["low"] == pytest.approx(min(rb) / max(ra)) and row["high"] == pytest.approx(max(rb) / min(ra))
    assert row["regression"] == (min(rb) / max(ra) > 1.10)
    assert "spread between rounds" in captured.err


def test_ctrl_c_in_a_later_round_keeps_every_cell_from_the_rounds_it_finished():
    """The records of a run in rounds are written after the last round, so Ctrl-C there used to lose every
    measurement of a long run: each timed cell is now recorded from the rounds it finished, and says so."""
    pytest.importorskip("autograd")
    from adcompare.plugin import registry as plugins
    from adcompare.run import runner
    from adcompare.study.plan import Plan

    cells = [Cell("exp_dot_loss", "n10", op, "autograd", "eager", "cpu", "float64") for op in ("value", "grad")]
    starts: list[Cell] = []

    def ctrl_c_in_round_2(cell, measurement):
        if measurement is None:
            starts.append(cell)
            if len(starts) == len(cells) + 1:  # the first cell of round 2
                raise KeyboardInterrupt

    seen = Recording(progress=ctrl_c_in_round_2)
    recorded = seen.cells
    options = runner.RunOptions(timeout=600, threads=1, rounds=3,
                                policy=TimingPolicy(min_time=0.01, max_time=0.05, warmup_time=0.0, min_samples=3))
    with pytest.raises(KeyboardInterrupt):
        runner.run(plugins.load(), Plan(tuple(cells), ()), options, observer=seen)
    assert sorted(m.cell.operator for m in recorded) == ["grad", "value"]
    for m in recorded:
        assert m.status is Status.OK and (m.details["rounds"], m.details["rounds_planned"]) == (1, 3)
        assert len(m.timing.rounds) == 1 and m.timing.samples


def test_sigterm_in_a_run_with_rounds_records_what_finished_and_exits_143(tmp_path):
    """A scheduler's time limit (SIGTERM) is handled as Ctrl-C: the cell is written from its finished rounds."""
    pytest.importorskip("autograd")
    path = tmp_path / "r.jsonl"
    run = subprocess.Popen([sys.executable, "-m", "adcompare", "run", "--adapter", "autograd", "--problem",
                            "exp_dot_loss", "--size", "n10", "--operator", "grad", "--variant", "eager", "--dtype",
                            "float64", "--no-progress", "--rounds", "200", "-o", str(path)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300  # a safety net: two worker starts take about a second here
    while time.monotonic() < deadline and (not path.exists() or path.read_text().count('"record": "worker"') < 3):
        time.sleep(0.1)
    run.send_signal(signal.SIGTERM)
    said = " ".join(run.communicate(timeout=300)[0].split())
    assert run.returncode == 143, said
    assert f"terminated (SIGTERM); the 1 cell(s) that finished are in '{path}'" in said
    (m,) = load([path]).measurements
    assert m.status is Status.OK and 2 <= m.details["rounds"] < 200 and m.details["rounds_planned"] == 200


# ---------------------------------------------------------------------------------------------------------------
# The run-wide shift: a candidate run made under heavier load is slower in every cell; cells are judged against it


def _cells(n: int) -> list[Cell]:
    return [Cell("exp_dot_loss", f"n{k + 1}", "grad", "jax", "eager", "cpu", "float32") for k in range(n)]


def _round_results(per_cell_rounds: list[list[float]]) -> Results:
    """One CPU cell per entry, timed in rounds whose median CPU times are the given values."""
    return Results((), tuple(Measurement(c, Status.OK, timing=_timing(r, r, cpu=r))
                             for c, r in zip(_cells(len(per_cell_rounds)), per_cell_rounds)))


def test_the_run_shift_against_a_direct_recomputation_and_a_slowed_cell_on_top():
    """20 cells, the candidate run 20 % slower in all of them (load), one cell 2× slower on top of that: the shift
    is the median over cells of each cell's ratio of median rounds, with the rank interval over cells; only the
    2× cell is flagged, where judged against the baseline alone every innocent cell would be."""
    base = [[1e-3 * (k + 1) * f for f in (1.0, 1.03, 0.98)] for k in range(20)]
    wobble = [1 + 0.01 * ((7 * k) % 5 - 2) for k in range(20)]  # ±2 % per cell, as honest runs differ
    cand = [[v * 1.2 * wobble[k] * (2.0 if k == 7 else 1.0) for v in rounds] for k, rounds in enumerate(base)]
    rows = compare(_round_results(base), _round_results(cand), 0.10)
    (shift,) = run_shifts(rows)
    ratios = [statistics.median(c) / statistics.median(b) for b, c in zip(base, cand)]
    assert shift.ratio == pytest.approx(statistics.median(ratios)) and shift.cells == 20 and shift.applied
    assert (shift.low, shift.high) == pytest.approx(median_interval(ratios))
    assert shift.clock == CPU_CLOCK and shift.low <= 1.2 <= shift.high
    assert [r.cell.size for r in regressions(rows)] == ["n8"]
    (slowed,) = regressions(rows)
    assert slowed.relative_change == pytest.approx(slowed.change / shift.ratio)
    assert slowed.to_json()["ratio_to_shift"] == pytest.approx(2.0 * 1.2 * wobble[7] / statistics.median(
        [1.2 * w for w in wobble]))
    innocent = [r for r in rows if r.cell.size != "n8"]
    assert all(r.verdict.startswith("same") for r in innocent)
    assert len(regressions(compare(_round_results(base), _round_results(cand), 0.10, against_shift=False))) == 20


def test_too_few_cells_estimate_no_shift_and_are_judged_against_the_baseline_alone():
    """With one cell the shift would be that cell's own ratio and would excuse it: below MIN_SHIFT_CELLS the
    shift is reported as not estimated and nothing is excused."""
    base = [[1.0, 1.02, 0.99]] * (MIN_SHIFT_CELLS - 1)
    cand = [[1.3, 1.31, 1.29]] * (MIN_SHIFT_CELLS - 1)
    rows = compare(_round_results(base), _round_results(cand), 0.10)
    (shift,) = run_shifts(rows)
    assert not shift.applied and "not estimated" in shift.describe()
    assert len(regressions(rows)) == MIN_SHIFT_CELLS - 1 and all(r.against == 1.0 for r in rows)


cell_rounds = st.lists(st.floats(1.0, 1.08), min_size=3, max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 1.0), cell_rounds, cell_rounds), min_size=MIN_SHIFT_CELLS, max_size=40),
       st.floats(0.5, 2.0), st.sampled_from([0.05, 0.10, 0.25]), st.data())
def test_scaling_every_candidate_cell_changes_the_shift_never_a_verdict(cells, c, threshold, data):
    """Multiplying every candidate round of every cell by one constant c (a whole run under other load) scales
    the reported shift by c and changes no cell's verdict; a cell then slowed 2× on top is flagged."""
    base = [[scale * f for f in fb] for scale, fb, _ in cells]
    cand = [[scale * f for f in fc] for scale, _, fc in cells]
    rows = compare(_round_results(base), _round_results(cand), threshold)
    scaled = compare(_round_results(base), _round_results([[v * c for v in r] for r in cand]), threshold)
    (shift,), (shifted,) = run_shifts(rows), run_shifts(scaled)
    assert shifted.ratio == pytest.approx(c * shift.ratio) and shifted.low == pytest.approx(c * shift.low)
    for r, s in zip(rows, scaled):
        margin = min(abs(r.ratio.low / r.against - (1 + threshold)),
                     abs(r.ratio.high / r.against * (1 + threshold) - 1))
        if margin > 1e-9:  # exactly on the bar, rounding may tip it either way
            assert r.verdict.split()[0] == s.verdict.split()[0]  # same / slower / faster
    victim = data.draw(st.integers(0, len(cells) - 1))
    slowed = [[v * c * (2.0 if k == victim else 1.0) for v in r] for k, r in enumerate(cand)]
    flagged = regressions(compare(_round_results(base), _round_results(slowed), threshold))
    assert victim in [int(r.cell.size[1:]) - 1 for r in flagged]


def _write(path, per_cell_rounds) -> None:
    with ResultsWriter(path, {}) as writer:
        for m in _round_results(per_cell_rounds).measurements:
            writer.add(m)


def test_compare_reports_the_shift_and_fail_on_shift_gates_a_uniform_slowdown(tmp_path, capsys):
    """A change that slows every cell by 30 % passes --fail-above (each cell is as slow as the run), but the shift
    is printed on its own line and in every --json row, and --fail-on-shift catches it; the shift's figures
    are recomputed here from the rounds."""
    base = [[1e-3 * (k + 1) * f for f in (1.0, 1.02, 0.99)] for k in range(12)]
    cand = [[v * 1.3 for v in r] for r in base]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, base)
    _write(b, cand)
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--fail-above", "10", "--json"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert len(rows) == 12 and not any(r["regression"] for r in rows)
    for r in rows:
        assert r["shift"]["ratio"] == pytest.approx(1.3) and r["shift"]["cells"] == 12 and r["shift"]["applied"]
        assert r["ratio_to_shift"] == pytest.approx(1.0) and r["ratio"] == pytest.approx(1.3)
    assert "the candidate run as a whole is ×1.300 [1.300–1.300] the baseline over 12 cells" in captured.err
    assert "--fail-on-shift" in captured.err  # the uniform slowdown is named, not silently excused
    assert main(["compare", str(a), str(b), "--fail-above", "10", "--fail-on-shift", "20"]) == 1
    assert "slower than --fail-on-shift 20 % allows" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--fail-above", "10", "--fail-on-shift", "40"]) == 0
    assert main(["compare", str(a), str(b), "--fail-on-shift", "-1"]) == 2


def test_confirmation_rounds_time_the_chosen_cells_again_and_ctrl_c_keeps_them():
    """run --confirm: after the last round the runner asks which cells to time again (given every timed cell's
    merged record), runs them in as many rounds more, and says in the record how many rounds came after; Ctrl-C
    in a confirmation round keeps the rounds that finished."""
    pytest.importorskip("autograd")
    from adcompare.plugin import registry as plugins
    from adcompare.run import runner
    from adcompare.study.plan import Plan

    cells = [Cell("exp_dot_loss", "n10", op, "autograd", "eager", "cpu", "float64") for op in ("value", "grad")]
    asked: list[list[str]] = []

    def confirm(records):
        asked.append(sorted(m.cell.operator for m in records))
        assert all(m.details["rounds"] == 2 for m in records)
        return {m.cell.key for m in records if m.cell.operator == "grad"}

    policy = TimingPolicy(min_time=0.01, max_time=0.05, warmup_time=0.0, min_samples=3)
    options = runner.RunOptions(timeout=600, threads=1, rounds=2, policy=policy, confirm=confirm)
    seen = Recording()
    recorded = seen.cells
    runner.run(plugins.load(), Plan(tuple(cells), ()), options, observer=seen)
    assert asked == [["grad", "value"]]
    by_op = {m.cell.operator: m for m in recorded}
    assert (by_op["grad"].details["rounds"], by_op["grad"].details["confirmation_rounds"]) == (4, 2)
    assert len(by_op["grad"].timing.round_blocks) == 4 and by_op["grad"].details["rounds_planned"] == 4
    assert by_op["value"].details["rounds"] == 2 and "confirmation_rounds" not in by_op["value"].details

    starts: list[Cell] = []

    def ctrl_c_in_confirmation_round_2(cell, measurement):
        if measurement is None:
            starts.append(cell)
            if len(starts) == 2 * len(cells) + 2:  # round 2 of the confirmation: grad's second start there
                raise KeyboardInterrupt

    recorded.clear()
    seen.progress = ctrl_c_in_confirmation_round_2
    with pytest.raises(KeyboardInterrupt):
        runner.run(plugins.load(), Plan(tuple(cells), ()), options, observer=seen)
    by_op = {m.cell.operator: m for m in recorded}
    grad = by_op["grad"].details
    assert (grad["rounds"], grad["rounds_planned"], grad["confirmation_rounds"]) == (3, 4, 1)
    assert by_op["value"].details["rounds"] == 2


def test_merge_rounds_counts_the_confirmation_rounds_that_timed_the_cell():
    skipped = Measurement(CELL, Status.SKIPPED, "skipped: the time budget was spent")
    merged = merge_rounds([_measurement([1.0, 2.0]), _measurement([1.0, 2.0]), _measurement([1.0, 2.0]), skipped],
                          confirmation=2)
    assert merged.details["confirmation_rounds"] == 1 and merged.details["rounds"] == 3
    assert "confirmation_rounds" not in merge_rounds([_measurement([1.0]), skipped], confirmation=1).details


def test_a_run_killed_outright_leaves_its_rounds_and_resume_writes_them(tmp_path):
    """SIGKILL gives the driver no chance to write the cells it holds: every round is journalled beside the
    results file as it finishes, and `--resume` writes each journalled cell from the rounds it finished, as
    Ctrl-C would have, before it runs the rest. A run that ends normally leaves no journal."""
    pytest.importorskip("autograd")
    path = tmp_path / "r.jsonl"
    argv = [sys.executable, "-m", "adcompare", "run", "--adapter", "autograd", "--problem", "exp_dot_loss",
            "--size", "n10", "--operator", "value,grad", "--variant", "eager", "--dtype", "float64",
            "--no-progress", "--rounds", "50", "-o", str(path)]
    run = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal = Path(f"{path}.rounds")
    deadline = time.monotonic() + 300  # a safety net: a round of two autograd cells takes about a second here
    while time.monotonic() < deadline and (not journal.exists() or journal.read_text().count("\n") < 5):
        time.sleep(0.1)
    os.killpg(run.pid, signal.SIGKILL)  # the driver and its worker, as a lost machine or the OOM killer would
    run.wait(timeout=300)
    assert load([path]).measurements == ()  # nothing was written: every cell waits for its 50th round
    left = journal.read_text().count("\n") - 1  # the rounds: every line but the owner line
    assert left >= 4
    resumed = subprocess.run(argv + ["--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "recovered 2 cell(s) from the rounds a killed run left in" in " ".join(resumed.stdout.split())
    by_op = {m.cell.operator: m for m in load([path]).measurements}
    assert set(by_op) == {"value", "grad"}
    rounds = [by_op[op].details["rounds"] for op in ("value", "grad")]
    assert 2 <= sum(rounds) <= left and all(r < 50 for r in rounds)
    assert all(by_op[op].details["rounds_planned"] == 50 and by_op[op].status is Status.OK for op in by_op)
    assert not journal.exists()  # the resumed run wrote every cell it journalled (none: nothing was left to run)


def test_a_journal_names_its_results_file_and_recovery_says_the_rounds_planned(tmp_path):
    """A journal left beside a file that was since replaced (`--overwrite`: a new header) is not recovered into
    it; a cell --confirm had chosen is recovered as planned for twice its first rounds, as Ctrl-C writes it."""
    results = tmp_path / "r.jsonl"
    header = {"format": "adcompare-results", "schema": 2, "provenance": {"date": "2026-11-24T10:00:00",
                                                                          "machine": {"fingerprint": "abc"}}}
    results.write_text(json.dumps(header) + "\n")
    journal = RoundJournal(results)
    chosen, other = _measurement([1.0, 2.0]), dataclasses.replace(_measurement([1.0, 2.0]),
                                                                 cell=dataclasses.replace(CELL, size="n99"))
    for m in (chosen, other):
        journal.add(m, 3)
    journal.choose({chosen.cell.key})
    journal.add(chosen, 6, confirmation=True)
    journal._file.close()  # killed: never closed by the run
    found = {m.cell.key: m for m in recovered(read_journal(results), done=set())}
    assert found[chosen.cell.key].details["rounds_planned"] == 6
    assert found[chosen.cell.key].details["confirmation_rounds"] == 1
    assert found[other.cell.key].details["rounds_planned"] == 3
    assert recovered(read_journal(results), done={other.cell.key})[0].cell.key == chosen.cell.key
    header["provenance"]["date"] = "2026-11-24T11:00:00"  # the file replaced by another run
    results.write_text(json.dumps(header) + "\n")
    assert read_journal(results).rounds == ()

"""The A/B gate: a baseline and a candidate interpreter (`run --env base=@PY --env new=@PY --rounds N`) timed in
turn, cell by cell, in one run, and `compare RUN` deciding each cell on its paired rounds (comparison.py)."""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcompare.analysis.comparison import (
    BETWEEN_ROUNDS,
    CPU_CLOCK,
    PAIRED_ROUNDS,
    PairedDifference,
    between_rounds,
    paired_noises,
    paired_rounds,
    regressions,
    rounds_between,
)
from adcompare.analysis.environment_pairs import pair_environments
from adcompare.analysis.paired_noise import MIN_POOLED_CELLS, pooled, spread
from adcompare.cli.main import main
from adcompare.cli.run import confirmation
from adcompare.model.cell import Cell
from adcompare.model.errors import EnvironmentSetupError, UsageError
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.status import Status
from adcompare.store.provenance import Provenance
from adcompare.store.results import Results, load
from adcompare.study import environments
from adcompare.study.environment_specs import EnvironmentSpec

PLUGIN = Path(__file__).resolve().parents[1] / "benchmarks" / "gate_slowdown_plugin.py"

BASE_NEW = Provenance.from_json({"environments": {"base": {}, "new": {}}})  # a header naming two --env


def _rounds(cpu) -> Timing:
    """A CPU cell timed in rounds whose median CPU times per call are `cpu`."""
    cpu = tuple(float(c) for c in cpu)
    return Timing(cpu, 10, 1e-3, rounds=cpu, round_minima=cpu, round_cpu=cpu)


def test_paired_rounds_against_a_direct_recomputation_and_the_load_cancels():
    """Each round's load (×1, ×2, ×3) falls on both sides alike: paired, the candidate is 20–25 % slower in every
    round; unpaired, its rounds overlap the baseline's and nothing can be said."""
    base, cand = [1.0, 2.0, 3.0], [1.25, 2.5, 3.6]
    d = paired_rounds(_rounds(base), _rounds(cand), 0.10)
    ratios = [c / b for b, c in zip(base, cand)]
    assert isinstance(d, PairedDifference) and d.noise_model == PAIRED_ROUNDS and d.clock == CPU_CLOCK
    assert (d.ratio.ratio, d.ratio.low, d.ratio.high) == pytest.approx((statistics.median(ratios), 1.2, 1.25))
    assert d.significant and d.rounds == (3, 3) and d.against == 1.0
    assert not paired_rounds(_rounds(base), _rounds(cand), 0.25).significant  # one round is only 20 % slower
    unpaired = between_rounds(_rounds(base), _rounds(cand), 0.10)
    assert unpaired.noise_model == BETWEEN_ROUNDS and not unpaired.significant


def _blocks(cpu_rounds: list[list[float]]) -> Timing:
    """A CPU cell timed in rounds of blocks (timed in lockstep with its partner): `cpu_rounds[r]` its blocks."""
    flat = tuple(c for blocks in cpu_rounds for c in blocks)
    medians = tuple(statistics.median(blocks) for blocks in cpu_rounds)
    return Timing(flat, 10, 1e-3, rounds=medians, round_minima=tuple(min(b) for b in cpu_rounds),
                  round_cpu=medians, cpu_samples=flat, round_blocks=tuple(len(b) for b in cpu_rounds))


def test_blocks_timed_in_lockstep_are_paired_block_by_block():
    """A load that comes and goes within a round (×1 to ×5 from one block to the next) falls on block i of both
    sides alike, and a block slowed on one side only (round 2: the baseline's second, the candidate's third) is
    one ratio of five: the round's value is the median of the block ratios, 1.2 in each round, where the ratio of
    the round medians says 1.6 in round 2."""
    base = [[1.0, 3.0, 1.0, 3.0, 3.0], [1.0, 0.5, 3.0, 4.0, 5.0], [1.0, 1.0, 3.0, 3.0, 3.0]]
    cand = [[1.2, 3.6, 1.2, 3.6, 3.6], [1.2, 2.4, 10.0, 4.8, 6.0], [1.2, 1.2, 3.6, 3.6, 3.6]]
    assert statistics.median(cand[1]) / statistics.median(base[1]) == pytest.approx(1.6)
    d = paired_rounds(_blocks(base), _blocks(cand), 0.10)
    assert isinstance(d, PairedDifference)
    assert [math.exp(r) for r in d.log_ratios] == pytest.approx([1.2, 1.2, 1.2]) and d.significant
    # Rounds whose block counts differ (timed unpaced, e.g. by an older worker) fall back to the round medians.
    cand[1] = cand[1][:2]
    fallback = paired_rounds(_blocks(base), _blocks(cand), 0.10)
    medians = [statistics.median(c) / statistics.median(b) for b, c in zip(base, cand)]
    assert [math.exp(r) for r in fallback.log_ratios] == pytest.approx(medians) and medians[1] != pytest.approx(1.2)


def test_one_paired_round_within_the_threshold_is_no_regression():
    d = paired_rounds(_rounds([1.0, 1.0, 1.0]), _rounds([1.5, 1.5, 1.05]), 0.10)
    assert not d.significant and d.reason == "a paired round within 10%"
    d = paired_rounds(_rounds([1.0, 1.0, 1.0]), _rounds([1.5, 0.9, 1.5]), 0.10)
    assert not d.significant and d.reason == "paired rounds disagree in direction"


def test_sides_with_different_round_counts_are_decided_unpaired():
    d = paired_rounds(_rounds([1.0, 1.1, 1.2]), _rounds([1.5, 1.6]), 0.10)
    assert d.noise_model == BETWEEN_ROUNDS and not isinstance(d, PairedDifference)


@settings(max_examples=200, deadline=None, derandomize=True)  # the same examples every run: nothing flakes in CI
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(
    st.lists(st.floats(1e-7, 1.0), min_size=n, max_size=n), st.lists(st.floats(0.2, 5.0), min_size=n, max_size=n))),
    st.sampled_from([0.05, 0.10, 0.25]))
def test_fewer_than_6_rounds_flag_only_when_every_paired_round_clears_the_threshold(sides, threshold):
    base, factors = sides
    cand = [b * f for b, f in zip(base, factors)]
    d = paired_rounds(_rounds(base), _rounds(cand), threshold)
    ratios = [c / b for b, c in zip(base, cand)]
    slower = all(r > 1 + threshold for r in ratios)
    faster = all(r < 1 / (1 + threshold) for r in ratios)
    assert d.significant == (slower or faster)


def _environment_results(base: list[list[float]], cand: list[list[float]]) -> Results:
    cells = [Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "grad", "torch", "eager", "cpu", "float32")
             for k in range(len(base))]
    ms = [Measurement(replace(c, environment=env), Status.OK, timing=_rounds(r))
          for env, side in (("base", base), ("new", cand)) for c, r in zip(cells, side)]
    return Results((BASE_NEW,), tuple(ms))


def test_environments_of_one_run_are_decided_on_paired_rounds_and_nothing_is_excused():
    """Twelve cells all 20 % slower in every paired round: two separate runs would call that the run's shift and
    pass it; the environments of one run ran under one load, so every cell is a regression."""
    base = [[1.0 + k / 10, 2.0, 1.5] for k in range(12)]
    cand = [[1.2 * v for v in rounds] for rounds in base]
    pairs = pair_environments(_environment_results(base, cand), threshold=0.10)
    rows = [p.timing for p in pairs]
    assert len(rows) == 12 and all(r.noise_model == PAIRED_ROUNDS for r in rows)
    assert len(regressions(rows)) == 12 and all(r.against == 1.0 for r in rows)
    assert all(r.change == pytest.approx(1.2) for r in rows)


def test_env_at_python_takes_an_existing_interpreter_as_it_is():
    spec = EnvironmentSpec.parse(f"base=@{sys.executable}")
    assert spec == EnvironmentSpec("base", python=sys.executable) and spec.requirements == ()
    env = environments.build(spec)  # nothing built: the interpreter's own packages
    assert env.python == sys.executable and "numpy" in {k.lower() for k in env.installed}
    assert "existing interpreter" in environments.describe(spec)
    with pytest.raises(EnvironmentSetupError, match="name the interpreter after @"):
        EnvironmentSpec.parse("base=@")
    with pytest.raises(EnvironmentSetupError, match="cannot run /nonexistent/python"):
        environments.build(EnvironmentSpec.parse("base=@/nonexistent/python"))


def _interpreter(path: Path, env: dict[str, str]) -> str:
    """This Python behind a wrapper that sets `env` (what a base checkout's venv is to a CI job)."""
    sets = " ".join(f"{k}={v}" for k, v in env.items()) or "-u ADCOMPARE_GATE_SLOWDOWN"
    path.write_text(f"#!/bin/sh\nexec env {sets} {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def test_a_real_ab_run_times_environments_in_turn_and_catches_the_slowed_cell(tmp_path, capsys, monkeypatch):
    """A real run: base and a candidate whose autograd grad at n = 100 costs 4× the CPU time (the slowdown
    plugin, in the candidate's interpreter only; autograd because its workers start in 0.1 s, not torch's 3 s, and
    nothing here depends on the framework). The cells of both environments are timed in lockstep (round 2
    in reverse: the workers' order shows it), `--confirm 10` times the cells a first decision flags in 2 rounds
    more, and `compare RUN` flags the slowed cell on paired rounds, confirmed."""
    monkeypatch.delenv("ADCOMPARE_GATE_SLOWDOWN", raising=False)
    base = _interpreter(tmp_path / "base.sh", {})
    slow = _interpreter(tmp_path / "slow.sh", {"ADCOMPARE_GATE_SLOWDOWN": "3",
                                                "ADCOMPARE_GATE_CELL": "exp_dot_loss/grad/autograd/eager/100"})
    out = tmp_path / "ab.jsonl"
    assert main(["run", "--adapter", "autograd", "--problem", "exp_dot_loss", "--size", "n10,n100", "--operator",
                 "grad", "--variant", "eager", "--dtype", "float32", "--no-progress", "--rounds", "2",
                 "--confirm", "10", "--plugin", str(PLUGIN), "--env", f"base=@{base}", "--env", f"new=@{slow}",
                 "-o", str(out)]) == 0
    results = load([out])
    order = [(m.cell.size, m.cell.environment) for m in results.measurements]
    # Records are written after the confirmation, in round 1's order; round 2 went through the groups in reverse
    # (new's worker first), and the confirmation's two rounds take turns alike.
    assert order == [("n10", "base"), ("n10", "new"), ("n100", "base"), ("n100", "new")]
    assert [w["environment"] for w in results.workers] == ["base", "new", "new", "base"] * 2
    for size in ("n10", "n100"):  # each cell's sides timed block for block (lockstep.py): as many blocks a side
        sides = [m for m in results.measurements if m.cell.size == size]
        assert len({len(m.measured.samples) for m in sides}) == 1 and sides[0].details["lockstep_blocks"] >= 7
    # Exactly the cells the first two rounds flag were confirmed (n100 surely; n10 if the load made it look so).
    first = Results(results.provenance, tuple(
        replace(m, timing=rounds_between(m.measured, 0, 2), details={}) for m in results.measurements))
    flagged = {p.cell.size for p in pair_environments(first, threshold=0.10) if p.timing.difference.significant}
    assert "n100" in flagged
    for m in results.measurements:
        assert m.details.get("confirmation_rounds", 0) == (2 if m.cell.size in flagged else 0)
        assert len(m.measured.rounds) == (4 if m.cell.size in flagged else 2)
    capsys.readouterr()
    assert main(["compare", str(out), "--fail-above", "10", "--json"]) == 1
    captured = capsys.readouterr()
    rows = {r["cell"]["size"]: r for r in map(json.loads, captured.out.splitlines())}
    slowed = rows["n100"]
    assert slowed["noise_model"] == PAIRED_ROUNDS and slowed["regression"] and slowed["rounds"] == [2, 2]
    assert slowed["confirmation"]["flagged"] and slowed["confirmation"]["rounds"] == 2
    # Each round's value: the median over its blocks of new ÷ base in CPU time, the blocks timed in lockstep.
    by_env = {m.cell.environment: rounds_between(m.measured, 0, 2) for m in results.measurements
              if m.cell.size == "n100"}
    counts = by_env["base"].round_blocks
    assert len(counts) == 2 and counts == by_env["new"].round_blocks
    ends = [sum(counts[:r + 1]) for r in range(len(counts))]
    paired = sorted(statistics.median(c / b for b, c in zip(by_env["base"].cpu_samples[end - n:end],
                                                             by_env["new"].cpu_samples[end - n:end]))
                    for n, end in zip(counts, ends))
    assert (slowed["low"], slowed["high"]) == pytest.approx((paired[0], paired[-1]))
    # The ratio printed is the one decided on (CPU time, paired), inside its own interval — not the wall medians'.
    assert slowed["ratio"] == pytest.approx(statistics.median(paired)) and slowed["low"] <= slowed["ratio"]
    assert paired[0] > 2  # 4× the CPU time, whatever the load
    assert "paired rounds" in captured.err
    said = " ".join(captured.err.split())
    assert f"confirmation: {len(flagged)} cell(s) flagged by the first rounds were timed again" in said
    assert main(["compare", str(out)]) == 0  # no --fail-above: no gate, the table says what its interval is
    assert "interval on paired rounds" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------
# The pooled paired noise (paired_noise.py): the run's cells say how much one paired round wanders


def _paired_results(log_ratios: list[list[float]], base: float = 1e-4) -> Results:
    """Cells whose candidate_r ÷ baseline_r is exp(log_ratios[cell][r]); the baseline's rounds vary by ×1–×3 (a
    load that falls on both sides alike)."""
    base_rounds = [[base * (1 + (r % 3)) for r in range(len(ls))] for ls in log_ratios]
    cand_rounds = [[b * math.exp(x) for b, x in zip(bs, ls)] for bs, ls in zip(base_rounds, log_ratios)]
    return _environment_results(base_rounds, cand_rounds)


def test_pooled_noise_against_a_direct_recomputation():
    log_ratios = [[0.1 * k, -0.05 * k, 0.02] for k in range(12)]
    noise = pooled(log_ratios, CPU_CLOCK)
    residuals = []
    for ls in log_ratios:
        mean = sum(ls) / 3
        residuals += [abs(x - mean) * math.sqrt(3 / 2) for x in ls]
    assert noise.sigma == pytest.approx(1.4826 * statistics.median(residuals))
    assert noise.z == pytest.approx(statistics.NormalDist().inv_cdf(1 - 0.05 / 24)) and noise.cells == 12
    assert noise.rounds == 3 and noise.half_width(3) == pytest.approx(noise.z * noise.sigma / math.sqrt(3))
    # Flagged from the larger of the threshold and z standard errors of the mean.
    assert noise.resolution(0.10) == pytest.approx(max(1.1, math.exp(noise.half_width(3))) - 1)
    assert noise.resolution(10.0) == pytest.approx(10.0)
    assert pooled(log_ratios[:MIN_POOLED_CELLS - 1], CPU_CLOCK) is None
    classes = ["a"] * 6 + ["b"] * 5 + ["c"]  # a class of one cell is judged with the run's spread alone
    by_class = pooled(log_ratios, CPU_CLOCK, classes)
    assert set(by_class.classes) == {"a", "b"} and by_class.sigma == pytest.approx(noise.sigma)
    assert by_class.classes["a"] == pytest.approx(spread(log_ratios[:6]))
    for cls in ("a", "b", "c"):
        assert by_class.sigma_of(cls) == max(noise.sigma, by_class.classes.get(cls, 0.0))


def test_a_noisy_run_flags_only_beyond_its_noise_and_says_what_it_could_catch():
    """30 honest cells whose paired rounds wander by σ = 0.2 (load 5–6 here), one cell ×1.2, one ×3 and one ×1.05
    in every round: the ×3 is flagged, the ×1.2 is within the noise (and the row says from what slowdown it would
    be caught); in a quiet run (σ = 0.01) the same ×1.2 is flagged, and the ×1.05 is a change within 10 %."""
    rng = random.Random(7)
    for sigma, caught_20 in ((0.2, False), (0.01, True)):
        honest = [[rng.gauss(0, sigma) for _ in range(3)] for _ in range(30)]
        slowed = [[math.log(1.2) + rng.gauss(0, sigma) / 10 for _ in range(3)], [math.log(3.0)] * 3,
                  [math.log(1.05)] * 3]
        rows = [p.timing for p in pair_environments(_paired_results(honest + slowed), threshold=0.10)]
        (noise,) = paired_noises(rows)
        assert noise.sigma == pytest.approx(sigma, rel=0.5)
        flagged = {r.cell.size for r in regressions(rows)}
        twenty, triple, five = f"n{10 ** 31}", f"n{10 ** 32}", f"n{10 ** 33}"  # the cells after the honest ones
        assert flagged == ({twenty, triple} if caught_20 else {triple})  # no honest cell, nor the 5 % one
        if caught_20:  # a real change, but smaller than the threshold: not a regression, and the row says why
            (row,) = [r for r in rows if r.cell.size == five]
            assert row.verdict == "same (a change within 10%)"
        if not caught_20:
            (row,) = [r for r in rows if r.cell.size == twenty]
            assert row.verdict == f"same (within the run's paired noise (from {noise.resolution(0.1):.0%} caught))"


# A log ratio is 0 or at least 1e-6 from it: below, exp() rounds the candidate's time onto the baseline's (a
# generated 1.3e-176 is "slower" in log space and the same time in the file) and the recomputation would disagree.
LOG_RATIOS = st.floats(-1.0, 1.0).map(lambda x: 0.0 if abs(x) < 1e-6 else x)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.lists(LOG_RATIOS, min_size=3, max_size=3), min_size=MIN_POOLED_CELLS, max_size=25),
       st.sampled_from([0.05, 0.10, 0.25]))
def test_a_cell_is_slower_exactly_when_its_interval_clears_1_and_its_ratio_the_threshold(log_ratios, threshold):
    """asv's rule for `--factor`: the noise interval says whether the cell changed, its ratio whether by more than
    the threshold."""
    rows = [p.timing for p in pair_environments(_paired_results(log_ratios), threshold=threshold)]
    noise = pooled(log_ratios, CPU_CLOCK)
    by_cell = {r.cell.size: r for r in rows}
    for k, ls in enumerate(log_ratios):
        row = by_cell[f"n{10 ** (k + 1)}"]
        mean = statistics.fmean(ls)
        low, high = mean - noise.half_width(3), mean + noise.half_width(3)
        slower = all(x > 0 for x in ls) and low > 0 and mean > math.log(1 + threshold)
        faster = all(x < 0 for x in ls) and high < 0 and mean < -math.log(1 + threshold)
        assert row.difference.significant == (slower or faster), (ls, noise)


def test_a_noisy_class_is_judged_by_its_own_spread_not_by_the_quiet_cells():
    """20 quiet torch eager cells (σ = 0.02) and 10 noisy JAX jit cells (σ = 0.3): a jit cell ×1.6 in every round
    is within its class's noise (the run's overall spread, dominated by the quiet cells, would have flagged it);
    a torch eager cell ×1.3 is flagged."""
    rng = random.Random(3)
    specs = [("torch", "eager", [rng.gauss(0, 0.02) for _ in range(3)]) for _ in range(20)]
    specs += [("jax", "compiled", [rng.gauss(0, 0.3) for _ in range(3)]) for _ in range(10)]
    specs += [("jax", "compiled", [math.log(1.6) + x for x in (0.05, 0.0, -0.05)]),
              ("torch", "eager", [math.log(1.3)] * 3)]
    ms = []
    for k, (adapter, variant, ls) in enumerate(specs):
        cell = Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "grad", adapter, variant, "cpu", "float32")
        base = [1e-4 * (1 + r) for r in range(3)]
        ms += [Measurement(replace(cell, environment="base"), Status.OK, timing=_rounds(base)),
               Measurement(replace(cell, environment="new"), Status.OK,
                           timing=_rounds([b * math.exp(x) for b, x in zip(base, ls)]))]
    rows = [p.timing for p in pair_environments(Results((BASE_NEW,), tuple(ms)),
                                                threshold=0.10)]
    (noise,) = paired_noises(rows)
    assert noise.classes["jax compiled"] > 5 * noise.classes["torch eager"]
    by_size = {r.cell.size: r for r in rows}
    jit, eager = by_size[f"n{10 ** 31}"], by_size[f"n{10 ** 32}"]
    assert not jit.difference.significant and jit.difference.noise_class == "jax compiled"
    half = noise.z * noise.sigma / math.sqrt(3)  # what the run's overall spread alone would have asked
    assert math.exp(statistics.fmean([math.log(1.6) + x for x in (0.05, 0.0, -0.05)]) - half) > 1.1
    assert {r.cell.size for r in regressions(rows)} == {eager.cell.size}


def _lockstep(round_logs: list[float], wander: float, blocks: int = 9) -> tuple[Timing, Timing]:
    """Baseline and candidate timed in lockstep: round r's paired blocks are exp(round_logs[r] + e) with the
    offsets e spread evenly over ±2·wander (so the round's median block ratio is exactly exp(round_logs[r]))."""
    offsets = [wander * (4 * i / (blocks - 1) - 2) for i in range(blocks)]
    base = [[1e-4 * (1 + (i % 3)) for i in range(blocks)] for _ in round_logs]
    cand = [[b * math.exp(lr + e) for b, e in zip(bs, offsets)] for bs, lr in zip(base, round_logs)]
    return _blocks(base), _blocks(cand)


def test_a_cell_whose_blocks_wander_more_than_its_class_is_judged_with_that_much_more_noise():
    """The quick suite's false alarms were cells whose CPU time wandered far more than their class's, within a
    round and so between rounds: each cell's σ is its class's times its block spread ÷ the class's median block
    spread, where above 1. Two cells 25 % slower in every round: the one whose blocks wander like its class's is
    flagged; the one whose blocks wander 8× more is not, and its row says from what slowdown it would be."""
    rng = random.Random(11)
    specs = [([rng.gauss(0, 0.02) for _ in range(3)], 0.02) for _ in range(20)]
    specs += [([math.log(1.25)] * 3, 0.02), ([math.log(1.25)] * 3, 0.16)]
    ms = []
    for k, (logs, wander) in enumerate(specs):
        cell = Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "grad", "torch", "eager", "cpu", "float32")
        base, cand = _lockstep(logs, wander)
        ms += [Measurement(replace(cell, environment="base"), Status.OK, timing=base),
               Measurement(replace(cell, environment="new"), Status.OK, timing=cand)]
    rows = [p.timing for p in pair_environments(Results((BASE_NEW,), tuple(ms)),
                                                threshold=0.10)]
    (noise,) = paired_noises(rows)
    by_size = {r.cell.size: r for r in rows}
    quiet, wandering = by_size[f"n{10 ** 21}"], by_size[f"n{10 ** 22}"]
    offsets = [abs(0.02 * (4 * i / 8 - 2)) for i in range(9)]  # one cell's |block log ratio − round median|
    typical = 1.4826 * statistics.median(offsets)
    assert noise.block_spreads["torch eager"] == pytest.approx(typical)
    assert wandering.difference.block_spread == pytest.approx(8 * typical)
    assert noise.factor("torch eager", wandering.difference.block_spread) == pytest.approx(8)
    assert noise.factor("torch eager", quiet.difference.block_spread) == pytest.approx(1)
    half = noise.z * noise.sigma_of("torch eager") * 8 / math.sqrt(3)
    assert wandering.ratio.low == pytest.approx(math.exp(math.log(1.25) - half))
    assert {r.cell.size for r in regressions(rows)} == {quiet.cell.size}
    caught = noise.resolution(0.10, "torch eager", 8 * typical)
    assert caught > 0.25 and wandering.verdict == f"same (within the run's paired noise (from {caught:.0%} caught))"
    assert noise.to_json()["block_spreads"] == {"torch eager": pytest.approx(typical)}


def test_the_readme_form_plans_every_cell_in_base_and_current(capsys):
    """`--env base=@PYTHON --env current` (README's CI example): every cell once under base, once under current,
    base first (the baseline `compare RUN` takes)."""
    assert main(["run", "--adapter", "torch,jax", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
                 "--variant", "eager", "--rounds", "3", "--confirm", "10", "--env", f"base=@{sys.executable}", "--env",
                 "current", "--dry-run", "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [f"environment base: the existing interpreter {sys.executable} (used as it is)",
                       f"environment current: this interpreter, {sys.executable}"]
    by_env: dict[str, set[str]] = {}
    for c in json.loads(out[0])["cells"]:
        cell = c["cell"]
        by_env.setdefault(cell.get("environment", "current"), set()).add(f"{cell['adapter']}/{cell['variant']}")
    assert list(by_env) == ["base", "current"] and by_env["base"] == by_env["current"] == {"torch/eager",
                                                                                             "jax/eager"}


# ---------------------------------------------------------------------------------------------------------------
# Confirmation (run --confirm PCT): the cells a first decision flags, timed again and decided on those rounds alone


def _confirmed_results(specs: list[tuple[list[float], list[float]]], wander: float = 0.02) -> Results:
    """torch eager cells timed in lockstep: (screening log ratios, confirmation log ratios) per cell, the record
    holding both sets of rounds and, where confirmation ratios are given, their count in its details."""
    ms = []
    for k, (screening, confirming) in enumerate(specs):
        cell = Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "grad", "torch", "eager", "cpu", "float32")
        base, cand = _lockstep([*screening, *confirming], wander)
        details = {"confirmation_rounds": len(confirming)} if confirming else {}
        ms += [Measurement(replace(cell, environment="base"), Status.OK, timing=base, details=details),
               Measurement(replace(cell, environment="new"), Status.OK, timing=cand, details=details)]
    return Results((BASE_NEW,), tuple(ms))


def test_a_flagged_cell_counts_only_when_its_confirmation_rounds_alone_flag_it_too():
    """20 quiet cells and three flagged by their first 3 paired rounds (×1.5): one whose 3 confirmation rounds
    are ×1.5 again (a regression), one whose are ×1.0 (not confirmed: the first rounds were an accident) and one
    whose are ×0.6 (confirmed the other way: no). The first decision is the one without the confirmation rounds,
    on the same pooled noise; the confirmation's bar is Bonferroni over the 3 cells confirmed."""
    rng = random.Random(5)
    slow = [math.log(1.5) + x for x in (0.01, -0.01, 0.0)]
    specs = [([rng.gauss(0, 0.02) for _ in range(3)], []) for _ in range(20)]
    specs += [(slow, slow), (slow, [0.01, -0.01, 0.0]), (slow, [math.log(0.6)] * 3)]
    rows = [p.timing for p in pair_environments(_confirmed_results(specs), threshold=0.10)]
    by_size = {r.cell.size: r for r in rows}
    again, accident, reversed_ = (by_size[f"n{10 ** k}"] for k in (21, 22, 23))
    (noise,) = paired_noises(rows)
    # The pooled noise is the screening rounds' alone: the confirmation rounds take no part in it.
    assert noise.sigma == pytest.approx(spread([s for s, _ in specs])) and noise.rounds == 3
    for row in (again, accident, reversed_):
        d = row.difference
        assert d.flagged and d.rounds == (3, 3) and len(d.confirmation.log_ratios) == 3
        assert d.confirmation.noise.z == pytest.approx(statistics.NormalDist().inv_cdf(1 - 0.05 / 6))
        mean = statistics.fmean(d.confirmation.log_ratios)
        half = d.confirmation.noise.z * noise.sigma_of("torch eager", d.block_spread) / math.sqrt(3)  # the first
        # rounds' block spread: the confirmation's workers time a cell or two each, and their blocks wander more
        assert (d.confirmation.ratio.low, d.confirmation.ratio.high) == pytest.approx(
            (math.exp(mean - half), math.exp(mean + half)))
    assert {r.cell.size for r in regressions(rows)} == {again.cell.size}
    assert accident.verdict.startswith("same (not confirmed: 3 more paired rounds gave ×1.000")
    assert reversed_.verdict.startswith("same (not confirmed: 3 more paired rounds gave ×0.600")
    assert again.to_json()["confirmation"]["flagged"] and not accident.to_json()["confirmation"]["flagged"]
    # Without the confirmation rounds in the record, all three are regressions: what the run decided on.
    first = _confirmed_results([(s, []) for s, _ in specs])
    assert len(regressions([p.timing for p in pair_environments(first, threshold=0.10)])) == 3


def test_rounds_between_slices_a_timing_round_by_round():
    base, _ = _lockstep([0.0, 0.1, 0.2, 0.3], 0.02, blocks=5)
    tail = rounds_between(base, -2, None)
    assert tail.round_blocks == (5, 5) and tail.samples == base.samples[10:] and tail.rounds == base.rounds[2:]
    assert rounds_between(base, 0, -2).cpu_samples == base.cpu_samples[:10]


def test_confirm_needs_an_ab_run_with_rounds(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["run", "--adapter", "torch", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
                 "--rounds", "3", "--confirm", "10", "-o", str(out)]) == 2
    assert "--confirm decides between the environments of an A/B run" in capsys.readouterr().err
    assert not out.exists()  # refused before the results file was created
    assert main(["run", "--adapter", "torch", "--problem", "exp_dot_loss", "--confirm", "10", "--dry-run"]) == 2
    assert main(["run", "--adapter", "torch", "--problem", "exp_dot_loss", "--confirm", "10", "--executor", "local",
                 "-o", str(out), "--rounds", "3", "--env", f"base=@{sys.executable}", "--env", "current"]) == 2
    assert "--executor splits them between shards" in " ".join(capsys.readouterr().err.split()) and not out.exists()


def test_sides_confirmed_unequally_are_decided_on_their_first_rounds_paired():
    """A confirmation interrupted on one side, or one environment of three confirmed: the pair is still decided
    on paired rounds, its first ones, never unpaired on rounds that do not line up."""
    specs = [([0.01 * k, -0.01 * k, 0.0], [0.0, 0.0, 0.0]) for k in range(12)]
    results = _confirmed_results(specs)
    ms = tuple(replace(m, details={}, timing=rounds_between(m.measured, 0, 3))
               if m.cell.environment == "new" else m for m in results.measurements)
    rows = [p.timing for p in pair_environments(replace(results, measurements=ms), threshold=0.10)]
    assert all(r.noise_model == PAIRED_ROUNDS and r.difference.rounds == (3, 3) for r in rows)
    assert all(r.difference.confirmation is None for r in rows)


def test_confirm_chooses_a_flagged_cell_in_every_environment():
    """base, a (×1.5 in every round) and b (the same as base): the cell is flagged against a, and it is timed again
    in all three environments, so that base–b stays paired round for round too."""
    cell = Cell("exp_dot_loss", "n10", "grad", "torch", "eager", "cpu", "float32")
    base, slow = _lockstep([math.log(1.5)] * 3, 0.01)
    _, same = _lockstep([0.0] * 3, 0.01)
    ms = [Measurement(replace(cell, environment=env), Status.OK, timing=t)
          for env, t in (("base", base), ("a", slow), ("b", same))]
    args = argparse.Namespace(confirm=10.0, rounds=3, env=["base=@x", "a=@y", "b=@z"])
    chosen = confirmation(args)(ms)
    assert chosen == {m.cell.key for m in ms}
    assert confirmation(args)(ms[::2]) == set()  # base and b alone: nothing to confirm
    with pytest.raises(UsageError, match="add --rounds 3 and two --env"):
        confirmation(argparse.Namespace(confirm=10.0, rounds=1, env=["base=@x", "a=@y"]))


def _then(a: Timing, b: Timing) -> Timing:
    """a's rounds followed by b's, as one record."""
    fields = ("samples", "cpu_samples", "rounds", "round_minima", "round_cpu", "round_blocks")
    return replace(a, **{f: getattr(a, f) + getattr(b, f) for f in fields})


def test_a_confirmation_is_judged_with_the_first_rounds_block_spread():
    """The confirmation's workers time one or two cells each, and their blocks wander more than in the first
    rounds (1.6–2.4× in issue 23's quick-suite measurement): a cell ×1.2 in all six rounds, its confirmation
    blocks wandering 8× its class's, is confirmed; judged by that spread it would not have been."""
    rng = random.Random(9)
    ms = []
    specs = [([rng.gauss(0, 0.04) for _ in range(3)], None) for _ in range(20)]
    specs.append(([math.log(1.2)] * 3, [math.log(1.2)] * 3))
    for k, (screening, confirming) in enumerate(specs):
        cell = Cell("exp_dot_loss", f"n{10 ** (k + 1)}", "grad", "torch", "eager", "cpu", "float32")
        base, cand = _lockstep(screening, 0.02)
        details = {}
        if confirming:
            more_base, more_cand = _lockstep(confirming, 0.16)
            base, cand = _then(base, more_base), _then(cand, more_cand)
            details = {"confirmation_rounds": 3}
        ms += [Measurement(replace(cell, environment="base"), Status.OK, timing=base, details=details),
               Measurement(replace(cell, environment="new"), Status.OK, timing=cand, details=details)]
    rows = [p.timing for p in pair_environments(Results((BASE_NEW,), tuple(ms)),
                                                threshold=0.10)]
    (row,) = [r for r in rows if r.difference.confirmation is not None]
    (noise,) = paired_noises(rows)
    assert row.difference.significant and row.verdict == "slower"
    own = rounds_between(ms[-1].measured, 3, None), rounds_between(ms[-2].measured, 3, None)
    wandering = paired_rounds(own[1], own[0], 0.10)
    assert noise.factor("torch eager", wandering.block_spread) > 5  # judged so, ×1.2 would be within the noise
    assert not wandering.with_noise(noise.for_cells(1), "torch eager").significant


def test_an_unfinished_confirmation_takes_no_part_and_the_first_rounds_decide():
    """Ctrl-C after 2 of 3 confirmation rounds on both sides: the counts agree, but the confirmation did not
    finish (details.rounds < rounds_planned), so the pair is decided on its first 3 rounds, as if unconfirmed."""
    rng = random.Random(4)
    slow = [math.log(1.5)] * 3
    specs = [([rng.gauss(0, 0.02) for _ in range(3)], []) for _ in range(20)] + [(slow, [0.0, 0.0])]
    results = _confirmed_results(specs)
    ms = tuple(replace(m, details={**m.details, "rounds": 5, "rounds_planned": 6}) if m.details else m
               for m in results.measurements)
    (row,) = [p.timing for p in pair_environments(replace(results, measurements=ms), threshold=0.10)
              if p.cell.size == f"n{10 ** 21}"]
    assert row.difference.confirmation is None and row.difference.rounds == (3, 3) and row.verdict == "slower"

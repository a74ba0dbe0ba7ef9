"""Properties of the analysis over generated results, each figure checked against a direct recomputation.

Generated: 1 to 10⁴ samples per cell (lognormal noise, ties from a coarse timer, zero, all-zero and sub-ns times,
separated and overlapping rivals), two machines, two environments, eager/compiled variants, missing twins (a cell
on one machine only), failed / unsupported / mismatch cells. The recomputation below is written from the
definitions in significance.py and bootstrap.py with NumPy and SciPy, not by calling them. Hypothesis is
derandomized: the same examples every run, so nothing flakes in CI.
"""
from __future__ import annotations

import math
import zlib
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu

from adcompare import report
from adcompare.analysis.bootstrap import LEVEL, MIN_SAMPLES, RESAMPLES, SEED, Bootstrap
from adcompare.analysis.findings import claims, evaluate, timed_index
from adcompare.analysis.significance import ALPHA, NOISE, rank_p
from adcompare.analysis.summary import summarize
from adcompare.model.cell import Cell
from adcompare.model.measurement import Check, Measurement, Timing
from adcompare.model.status import Status
from adcompare.report.svgchart import _range, _Scale, ticks
from adcompare.store.results import ResultsWriter, load

SETTINGS = dict(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SHAPES = ("lognormal", "ties", "zeros", "all_zero", "sub_ns", "constant", "huge")


def samples(n: int, shape: str, scale: float, seed: int) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    noisy = scale * rng.lognormal(0, 0.05, n)
    if shape == "ties":  # a timer with 1 µs resolution: many equal blocks
        noisy = np.round(noisy * 1e6 / scale) * scale / 1e6 + scale
    elif shape == "zeros":  # a quarter of the blocks (at least one) below the timer's resolution
        noisy[rng.permutation(n)[:max(1, n // 4)]] = 0.0
    elif shape == "all_zero":  # a coarse timer on a sub-µs cell
        noisy = np.zeros(n)
    elif shape == "sub_ns":
        noisy = noisy * 1e-12
    elif shape == "constant":
        noisy = np.full(n, scale)
    elif shape == "huge":
        noisy = noisy * 1e290
    elif shape == "near_max":  # an edited file's times ×1e300: the sum of two middle samples overflows
        noisy = noisy / noisy.max() * 1.7e308
    return tuple(float(x) for x in noisy)


sample_counts = st.one_of(st.integers(1, 12), st.sampled_from([2, 3, 7, 9, 40, 300, 1000, 5000, 10_000]))
timed_cell = st.tuples(sample_counts, st.sampled_from(SHAPES), st.floats(1e-6, 1e-2), st.integers(0, 2**32 - 1))
status = st.sampled_from([Status.OK] * 5 + [Status.MISMATCH, Status.FAILED, Status.UNSUPPORTED])


@st.composite
def measurements(draw, max_cells: int = 16, shapes: tuple[str, ...] = SHAPES) -> list[Measurement]:
    """Cells competing in a few groups: the same problem/size/operator on two machines and environments (each
    environment has its own fingerprint, as its framework versions give it in a real run)."""
    out = []
    seen = set()
    for _ in range(draw(st.integers(1, max_cells))):
        # group axes weighted towards one value, so that most groups hold rivals; adapter · variant are the rivals
        cell = Cell(draw(st.sampled_from(["exp_dot_loss"] * 3 + ["tanh"])),
                    draw(st.sampled_from(["n100"] * 2 + ["n10"])), draw(st.sampled_from(["jacfwd", "jacrev"])),
                    draw(st.sampled_from(["jax", "torch", "autograd"])), draw(st.sampled_from(["eager", "compiled"])),
                    "cpu", "float32", draw(st.sampled_from(["current"] * 3 + ["new"])))
        machine = draw(st.sampled_from(["m1"] * 3 + ["m2"])) + ("" if cell.environment == "current" else "-new")
        if (machine, cell.key) in seen:
            continue
        seen.add((machine, cell.key))
        s = draw(status)
        timing = None
        if s in (Status.OK, Status.MISMATCH):
            n, shape, scale, seed = draw(timed_cell.filter(lambda t: t[1] in shapes))
            timing = Timing(samples(n, shape, scale, seed), 1, scale * 10, compile=scale * 100)
        out.append(Measurement(cell, s, support="native", timing=timing, machine=machine,
                               check=Check(1e-7, 1e-4, "central differences", projection=1.0),
                               message="" if s is Status.OK else "generated"))
    return out


def crafted(*cells: tuple[str, str, int, str, float]) -> list[Measurement]:
    """Rivals of one group, for both operators of the first seed claim: (adapter, variant, samples, shape, scale)."""
    return [Measurement(Cell("exp_dot_loss", "n100", op, adapter, variant, "cpu", "float32"), Status.OK,
                        timing=Timing(samples(n, shape, scale * (2 if op == "jacfwd" else 1), i), 1, scale),
                        machine="m1")
            for i, (adapter, variant, n, shape, scale) in enumerate(cells) for op in ("jacrev", "jacfwd")]


# Always run, whatever Hypothesis draws: the README flow's crash (thousands of separated rounds), a fastest cell with
# a zero-time block (no ratio), an all-zero cell (not ranked), and 10⁴ overlapping samples (chunked resampling).
EXAMPLES = [
    crafted(("jax", "compiled", 12529, "lognormal", 1e-5), ("torch", "eager", 888, "lognormal", 1e-4)),
    crafted(("jax", "compiled", 11, "zeros", 1e-6), ("torch", "eager", 11, "lognormal", 1e-3)),
    crafted(("jax", "compiled", 7, "all_zero", 1e-6), ("torch", "eager", 7, "lognormal", 1e-3),
            ("autograd", "eager", 7, "ties", 1e-3)),
    crafted(("jax", "compiled", 10_000, "lognormal", 1e-5), ("torch", "eager", 10_000, "lognormal", 1.001e-5)),
]


def with_examples(test):
    for ms in EXAMPLES:
        test = example(ms)(test)
    return test


# ---- the recomputation, from the definitions ---------------------------------------------------------------------

def median(samples) -> float:
    """np.median, of halves and doubled (exact for normal floats): two middle samples near 1.7e308 sum to inf."""
    return float(np.median(np.asarray(samples) / 2) * 2)


def rankable(m: Measurement) -> bool:
    return m.status is Status.OK and m.timing is not None and median(m.timing.samples) > 0


def holm(p: list[float]) -> list[float]:
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * np.asarray(p)[order]))
    out = np.empty(len(p))
    out[order] = adjusted
    return list(out)


def expected_interval(fast: np.ndarray, slow: np.ndarray, fast_key: str, slow_key: str) -> tuple[float, float]:
    if fast.max() < slow.min():
        return slow.min() / fast.max(), slow.max() / fast.min()

    def boot(data, key):
        rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
        return np.median(data[rng.integers(0, data.size, size=(RESAMPLES, data.size))] / 2, axis=1) * 2

    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(boot(slow, slow_key) / boot(fast, fast_key), [tail, 100 - tail])
    return low, high


def check_summary(ms: list[Measurement]) -> int:
    """Asserts every verdict of the summary; returns how many rival ratios were checked."""
    groups = defaultdict(list)
    for m in ms:
        c = m.cell
        groups[(c.problem, c.size, c.operator, c.device, c.dtype, m.machine)].append(m)
    verdicts = {(v.problem, v.size, v.operator, v.device, v.dtype, v.machine): v
                for s in summarize(ms, Bootstrap()) for v in s.every_size}
    checked = 0
    for key, members in groups.items():
        ranked = sorted((m for m in members if rankable(m)), key=lambda m: float(median(m.timing.samples)))
        if not ranked:
            assert key not in verdicts
            continue
        v = verdicts[key]
        assert float(median(v.fastest.timing.samples)) == float(median(ranked[0].timing.samples))
        assert {id(m) for m in v.not_ranked} == {id(m) for m in members if not rankable(m)}
        fast = np.asarray(v.fastest.timing.samples)
        tested, raw = [], []
        for rival in v.rivals:
            checked += 1
            slow = np.asarray(rival.measurement.timing.samples)
            if len(fast) < MIN_SAMPLES or len(slow) < MIN_SAMPLES or fast.min() <= 0:
                assert rival.ratio is None and not rival.significant
                assert rival.difference.reason == "too few samples"
                continue
            r = rival.ratio
            assert r.ratio == pytest.approx(median(slow) / median(fast), rel=1e-12)
            assert math.isfinite(r.low) and math.isfinite(r.high) and r.low <= r.high
            # a bootstrap median lies between a sample's extremes, so every bootstrap ratio lies between these
            assert slow.min() / fast.max() * (1 - 1e-12) <= r.low and r.high <= slow.max() / fast.min() * (1 + 1e-12)
            if len(fast) * RESAMPLES <= 2_000_000 and len(slow) * RESAMPLES <= 2_000_000:  # resampled in one draw
                low, high = expected_interval(fast, slow, f"{v.fastest.machine}:{v.fastest.cell.key}",
                                              f"{rival.measurement.machine}:{rival.measurement.cell.key}")
                assert (r.low, r.high) == pytest.approx((low, high), rel=1e-12)
            p = float(mannwhitneyu(fast, slow, alternative="two-sided").pvalue)
            assert rival.difference.p_value == pytest.approx(p, rel=1e-9, abs=1e-300)
            tested.append(rival)
            raw.append(p)
        for rival, p_holm in zip(tested, holm(raw)):
            d = rival.difference
            assert d.p_holm == pytest.approx(p_holm, rel=1e-9, abs=1e-300)
            r = d.ratio
            expected = (not (r.low <= 1 <= r.high) and p_holm < ALPHA
                        and (r.ratio > 1 + NOISE or r.ratio < 1 / (1 + NOISE)))
            assert d.significant == expected
        tied = [r for r in v.rivals if not r.significant]
        assert v.clear == (bool(v.rivals) and not tied)
    return checked


def check_findings(ms: list[Measurement]) -> None:
    """The first seed claim (exp_dot_loss: jacrev beats jacfwd), recomputed context by context."""
    claim = claims()[0]
    assert (claim.faster, claim.slower) == ("exp_dot_loss:jacrev", ("exp_dot_loss:jacfwd",))
    finding = evaluate(timed_index(ms), claim, Bootstrap())
    by_context = defaultdict(dict)
    for m in ms:
        c = m.cell
        if c.problem == "exp_dot_loss" and rankable(m):
            by_context[(m.machine, c.adapter, c.variant, c.size)][c.operator] = m
    pairs = {ctx: (ops["jacrev"], ops["jacfwd"]) for ctx, ops in by_context.items() if len(ops) == 2}
    sizes = {ctx[:3]: max((s for (*k, s) in pairs if tuple(k) == ctx[:3]), key=lambda s: int(s[1:])) for ctx in pairs}
    top = max(sizes.values(), key=lambda s: int(s[1:]), default=None)
    wanted = sorted(float(median(pairs[(*k, s)][1].timing.samples) / median(pairs[(*k, s)][0].timing.samples))
                    for k, s in sizes.items() if s == top)
    got = sorted(c.ratio for c in finding.comparisons)
    assert got == pytest.approx(wanted, rel=1e-12)
    agree = sum(c.agrees > 0 for c in finding.comparisons)
    disagree = sum(c.agrees < 0 for c in finding.comparisons)
    for c in finding.comparisons:
        assert c.agrees == (0 if not c.difference.significant else 1 if c.ratio > 1 else -1)
    if not finding.comparisons:
        assert finding.verdict == "not measured"
    elif agree == 0 or disagree > agree:
        assert finding.verdict == "contradicted"
    elif disagree == 0 and 2 * agree >= len(finding.comparisons):
        assert finding.verdict == "confirmed"
    else:
        assert finding.verdict == "mixed"


# ---- the properties ----------------------------------------------------------------------------------------------

@settings(max_examples=60, **SETTINGS)
@given(measurements())
@with_examples
def test_summary_ratios_intervals_and_verdicts_equal_a_recomputation(ms):
    check_summary(ms)


def test_the_crafted_examples_reach_every_branch():
    """The examples above are not vacuous: the zero-block fastest forms no ratio, the all-zero cell is not ranked."""
    assert all(check_summary(ms) > 0 for ms in EXAMPLES)
    zero_fastest, all_zero = summarize(EXAMPLES[1], Bootstrap()), summarize(EXAMPLES[2], Bootstrap())
    assert all(r.ratio is None for s in zero_fastest for v in s.every_size for r in v.rivals)
    assert all(v.not_ranked[0].cell.adapter == "jax" for s in all_zero for v in s.every_size)


@settings(max_examples=60, **SETTINGS)
@given(measurements())
@with_examples
def test_findings_ratios_and_verdicts_equal_a_recomputation(ms):
    check_findings(ms)


@settings(max_examples=12, **SETTINGS)
@given(measurements(max_cells=6))
# times ×1e300 (an edited file): the page's log axes reach the float range's end, and two middle samples sum to inf
@example(ms=crafted(("jax", "compiled", 2, "near_max", 1.0), ("torch", "eager", 40, "near_max", 1.0)))
def test_the_report_builds_from_what_was_written_and_loaded(tmp_path_factory, ms):
    folder = tmp_path_factory.mktemp("report")
    path = folder / "results.jsonl"
    with ResultsWriter(path, {"host": "generated"}) as writer:
        for m in ms:
            writer.add(m)
    loaded = load([path])
    assert sorted(m.cell.key for m in loaded.measurements) == sorted(m.cell.key for m in ms)
    index = report.build(loaded, folder / "out")
    assert "<html" in index.read_text()
    check_summary(list(loaded.measurements))


@settings(max_examples=200, **SETTINGS)
@given(st.lists(st.floats(0, 1e-3), min_size=1, max_size=60), st.lists(st.floats(0, 1e-3), min_size=1, max_size=60),
       st.booleans())
def test_rank_p_is_scipys_value_for_any_samples(a, b, separate):
    if separate:
        b = [x + 2e-3 for x in b]
    expected = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert rank_p(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.floats(min_value=5e-324, max_value=1.7976931348623157e308), min_size=1, max_size=8),
       st.booleans())
@example(values=[1e-323], log=True)  # a subnormal span whose tick step 10^-324 underflowed to 0 (StopIteration)
def test_an_axis_holds_any_positive_finite_values(values, log):
    """A chart axis of times or ratios anywhere in the float range: the range holds every value, its ticks are
    finite and inside it, and every value lands on the panel (a log axis padded by multiplying overflowed)."""
    lo, hi = _range(values, log)
    assert 0 < lo < hi < math.inf if log else -math.inf < lo < hi < math.inf
    scale = _Scale(lo, hi, log, 0.0, 100.0)
    for t in ticks(lo, hi, log):
        assert lo <= t <= hi and 0 <= scale(t) <= 100
    for v in values:
        assert -1e-9 <= scale(v) <= 100 + 1e-9


def test_an_axis_pads_ordinary_times_as_before():
    """The log-space padding is the multiplicative one it replaced: 6 % of the span each side, at least ×1.5."""
    assert _range([1e-5, 2e-5], True) == pytest.approx((1e-5 / 2 ** 0.06, 2e-5 * 2 ** 0.06), rel=1e-12)
    assert _range([1e-5, 1.2e-5], True) == pytest.approx((1e-5 / 1.5 / 2.7 ** 0.06, 1.8e-5 * 2.7 ** 0.06), rel=1e-12)
    assert _range([3.0], False) == pytest.approx((1.88, 4.12))

"""significance.py: the rank test against SciPy, Holm's correction, and the three-way rule on samples that flip it."""
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from adcompare.analysis.bootstrap import Bootstrap
from adcompare.analysis.significance import ALPHA, NOISE, best_p, holm, judge, rank_p
from adcompare.model.measurement import Timing


def _timing(samples) -> Timing:
    return Timing(tuple(float(s) for s in samples), 1, 0.0)


def test_separated_samples_use_the_exact_p_that_scipy_computes():
    a, b = [1.0, 1.1, 1.2, 1.05, 1.15, 1.12, 1.08], [2.0, 2.1, 2.2, 2.05, 2.15, 2.12, 2.08]
    assert rank_p(a, b) == pytest.approx(mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)
    assert rank_p(a, b) == pytest.approx(2 / math.comb(14, 7))


def test_overlapping_samples_give_scipys_p_by_either_method():
    """The exact distribution (one side ≤ 8 samples, no ties) and the normal approximation with its tie and
    continuity corrections, on overlapping, tied and lopsided samples: SciPy's own p each time."""
    rng = np.random.default_rng(1)
    cases = [(rng.normal(10, 1, n1), rng.normal(10 + shift, 1, n2))
             for n1, n2 in ((2, 2), (3, 5), (5, 7), (7, 7), (8, 8), (8, 40), (1, 9), (9, 9), (15, 15), (40, 300))
             for shift in (0.0, 0.5, 2.0)]
    cases += [(np.round(a, 0), np.round(b, 0)) for a, b in cases[:15]]  # ties: the normal approximation
    cases += [([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), ([5.0] * 4, [5.0] * 6), ([1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0])]
    for a, b in cases:
        expected = mannwhitneyu(a, b, alternative="two-sided").pvalue
        assert rank_p(list(a), list(b)) == pytest.approx(expected, rel=1e-9, abs=1e-300), (list(a), list(b))


def test_the_rank_test_does_not_import_scipy_stats():
    """scipy.stats takes ~1 s to import; the report's page and every compare rank overlapping cells."""
    code = ("import sys; from adcompare.analysis.significance import rank_p; "
            "p = rank_p([1.0, 2.5, 3.0, 4.0], [2.0, 3.5, 5.0]); "
            "assert 0 < p <= 1 and 'scipy.stats' not in sys.modules, sorted(m for m in sys.modules if 'scipy' in m)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_holm_is_step_down_and_monotone():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []


def _pair(boot, fast, slow, name):
    return (boot.ratio(name + "a", _timing(fast), name + "b", _timing(slow)), fast, slow)


def test_each_of_the_three_tests_can_veto():
    rng = np.random.default_rng(0)
    boot = Bootstrap()
    base = 1.0 + rng.normal(0, 0.001, 11)
    clear = _pair(boot, base, base * 1.5, "clear")
    tiny = _pair(boot, base, base * 1.02, "tiny")  # real but below the noise threshold
    few = _pair(boot, base[:2], base[:2] * 3, "few")  # too few samples for an interval
    noisy = rng.lognormal(0, 0.5, 11)
    overlap = _pair(boot, noisy, noisy[::-1] * 1.1, "overlap")
    d_clear, d_tiny, d_few, d_overlap = judge([clear, tiny, few, overlap])
    assert d_clear.significant and d_clear.reason == ""
    assert d_tiny.ratio.clear and d_tiny.p_holm < ALPHA and not d_tiny.significant
    assert d_tiny.reason == f"effect below {NOISE:.0%}"
    assert not d_few.significant and d_few.reason == "too few samples"
    assert not d_overlap.significant


def test_holm_can_turn_a_lone_significant_result_into_noise():
    """7 vs 7 separated blocks: p = 0.0006 decides alone, but not among 100 comparisons."""
    boot = Bootstrap()
    fast = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06]
    slow = [s * 1.5 for s in fast]
    (alone,) = judge([_pair(boot, fast, slow, "x")])
    assert alone.significant
    many = judge([_pair(boot, fast, slow, "x")] + [_pair(boot, fast, fast, f"same{i}") for i in range(99)])
    assert many[0].p_value == alone.p_value and not many[0].significant
    assert many[0].reason.startswith("rank test p")


def test_thousands_of_separated_rounds_give_scipys_p_without_overflow():
    """pytest-benchmark keeps thousands of rounds: 2 / C(n₁+n₂, n₁) is far beyond a float (the README's crash)."""
    rng = np.random.default_rng(2)
    for n1, n2, ties in ((12529, 888, False), (7, 5000, False), (3000, 3000, True), (5, 8, False)):
        a = rng.lognormal(0, 0.05, n1)
        b = rng.lognormal(0, 0.05, n2) + 10
        if ties:
            a, b = np.round(a, 2), np.round(b, 2)
        expected = mannwhitneyu(a, b, alternative="two-sided").pvalue
        assert rank_p(list(a), list(b)) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_bootstrap_forms_no_ratio_over_a_zero_block_and_caps_extreme_ratios():
    boot = Bootstrap()
    assert boot.ratio("z", _timing([0.0, 1e-6, 1e-6]), "b", _timing([1e-3] * 3)) is None
    r = boot.ratio("tiny", _timing([1e-12, 2e-12, 3e-12]), "huge", _timing([1e300, 2e300, 3e300]))
    assert r.ratio == r.high == np.finfo(float).max and r.clear


def test_three_calls_a_side_are_too_few_to_rank_and_say_so():
    """A --max-time run times a slow cell with 3 calls: even 3 vs 3 separated samples, 3× apart, give p = 0.1,
    which no family can bring under 0.05; the reason says so rather than quoting a p as if it measured sameness.
    3 against 7 can decide alone."""
    boot = Bootstrap()
    fast = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06]
    slow = [3 * s for s in fast]
    (three,) = judge([_pair(boot, fast[:3], slow[:3], "three")])
    assert best_p(3, 3) == pytest.approx(rank_p(fast[:3], slow[:3])) == pytest.approx(0.1)
    assert not three.significant and three.reason == "too few samples to rank (3 vs 3: p ≥ 0.1 at best)"
    (mixed,) = judge([_pair(boot, fast[:3], slow, "mixed")])
    assert mixed.significant and best_p(3, 7) == pytest.approx(2 / 120)
    assert best_p(2000, 2000) == 0.0  # thousands of rounds: no overflow

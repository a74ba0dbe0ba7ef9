"""When may the page say "A is faster than B"? Three tests must agree, and many comparisons are corrected for.

1. the bootstrap 95 % interval of the ratio of medians excludes 1 (bootstrap.py);
2. a two-sided Mann–Whitney U rank test on the raw per-block samples of the two cells rejects "same distribution"
   at ALPHA after Holm's step-down correction over the comparisons asked together (one family: the rivals of one
   summary row, the cells of one `adcompare compare`, the cells behind one finding);
3. the effect is above a stated noise threshold: the ratio of medians is beyond 1 ± NOISE (or ± the threshold the
   caller states, e.g. `compare --fail-above PCT`).

The rank test gives SciPy's `mannwhitneyu` p-value with its own method selection, for any sample count, computed
here without importing scipy.stats (1.1 s, on the path of every report and compare): the exact distribution when
one cell has at most 8 samples and no value is tied, else the normal approximation with the tie correction and the
continuity correction (tests/test_significance.py compares the two on random, tied and separated samples). The
exact tail is counted in integers (the Gaussian binomial coefficient's terms, up to the observed U only), so it
is exact at any count. When every sample of one cell is below every sample of the other (U = 0, the common case
between frameworks) the p is a closed form: 2 / C(n₁ + n₂, n₁), taken in log space (math.comb of thousands of
rounds is far beyond a float), or the normal tail through math.erfc, which underflows to 0 and never overflows.
With 7 blocks per cell the exact p is 0.0006, so a single comparison can be decided; a large family (hundreds of
cells in one compare) needs more blocks per cell before Holm lets it reject.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from adcompare.analysis.bootstrap import Ratio

ALPHA = 0.05
NOISE = 0.05  # a 5 % difference of medians is within run-to-run variation on a shared machine
MIN_BLOCKS = 7
METHOD = (f"\"A is faster than B\" needs all three: the bootstrap 95 % interval of the ratio of medians excludes 1; "
          f"a two-sided Mann–Whitney U test on the raw per-block samples gives p < {ALPHA} after Holm's correction "
          f"over the comparisons made together (the rivals in one summary row, the cells of one compare); and the "
          f"ratio of medians is beyond 1 ± {NOISE:.0%} (the noise threshold). Otherwise: no clear winner")


def rank_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann–Whitney U p-value for the per-block samples of two cells (SciPy's value, method "auto")."""
    if max(a) < min(b) or max(b) < min(a):
        return _separated_p(a, b)
    n1, n2 = len(a), len(b)
    counts = Counter((*a, *b))
    u1 = _rank_sum(a, counts) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)  # the larger U: the two-sided p is twice its upper tail
    tie_counts = [t for t in counts.values() if t > 1]
    if min(n1, n2) <= EXACT_MAX and not tie_counts:
        return min(1.0, 2 * _exact_lower_tail(n1, n2, n1 * n2 - round(u)))
    return _normal_p(u, n1, n2, tie_counts)


EXACT_MAX = 8  # SciPy's "auto": exact when a sample has at most 8 values and none is tied


def _rank_sum(a: Sequence[float], counts: Counter) -> float:
    """The sum of `a`'s midranks in the pooled sample whose values are counted in `counts`."""
    below, midrank = 0, {}
    for value in sorted(counts):
        midrank[value] = below + (counts[value] + 1) / 2
        below += counts[value]
    return sum(midrank[value] for value in a)


def _exact_lower_tail(n1: int, n2: int, k: int) -> float:
    """P(U ≤ k) for samples of n₁ and n₂ distinct values under the null: the share of the C(n₁ + n₂, n₁)
    orderings whose U is at most k. They are the coefficients of the Gaussian binomial coefficient, the product of
    (1 − q^(large + i)) ÷ (1 − q^i) for i = 1 … small, kept in integers and only up to q^k."""
    small, large = min(n1, n2), max(n1, n2)
    ways = [1] + [0] * k
    for i in range(1, small + 1):
        for j in range(k, large + i - 1, -1):  # × (1 − q^(large + i)), highest power first
            ways[j] -= ways[j - large - i]
        for j in range(i, k + 1):  # ÷ (1 − q^i): a running sum with stride i
            ways[j] += ways[j - i]
    return sum(ways) / math.comb(n1 + n2, small)  # int ÷ int: exact, rounded once


def _normal_p(u: float, n1: int, n2: int, tie_counts: Sequence[int]) -> float:
    """Two-sided p of the larger U by the normal approximation, with the tie and continuity corrections."""
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in tie_counts)
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of a difference
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(variance)  # U − μ with the continuity correction
    return min(1.0, math.erfc(z / math.sqrt(2)))  # 2·Φ(−z)


def _separated_p(a: Sequence[float], b: Sequence[float]) -> float:
    """p for samples that do not overlap (U = 0), as SciPy's method selection would compute it."""
    n1, n2 = len(a), len(b)
    tie_counts = [t for t in (*Counter(a).values(), *Counter(b).values()) if t > 1]  # no tie crosses the gap
    if min(n1, n2) <= EXACT_MAX and not tie_counts:
        # 2 / C(n₁+n₂, n₁) through log-gamma: C(2000, 1000) alone is ~10⁶⁰⁰, past any float
        log_comb = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
        return min(1.0, 2.0 * math.exp(-log_comb))
    return _normal_p(n1 * n2, n1, n2, tie_counts)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class Difference:
    """One comparison `other ÷ reference` after all three tests."""

    ratio: Ratio | None  # None: a side has too few samples for an interval
    p_value: float | None  # raw rank-test p
    p_holm: float | None  # adjusted within its family
    threshold: float  # the effect a ratio must exceed, as a fraction (0.05 = 5 %)
    samples: tuple[int, int] = (0, 0)  # per side, for saying when no outcome of the rank test could decide

    @property
    def significant(self) -> bool:
        r = self.ratio
        if r is None or self.p_holm is None or not r.clear or self.p_holm >= ALPHA:
            return False
        return r.ratio > 1 + self.threshold or r.ratio < 1 / (1 + self.threshold)

    @property
    def reason(self) -> str:
        """Why a difference is not called significant (empty when it is)."""
        if self.ratio is None or self.p_holm is None:
            return "too few samples"
        if not self.ratio.clear:
            return "interval contains 1"
        if self.p_holm >= ALPHA:
            best = best_p(*self.samples) if all(self.samples) else 0.0
            if best >= ALPHA:  # 3 calls a side (a --max-time run's slow cells): even separated samples give 0.1
                return f"too few samples to rank ({self.samples[0]} vs {self.samples[1]}: p ≥ {best:.2g} at best)"
            return f"rank test p = {self.p_holm:.2g} after Holm"
        if not self.significant:
            return f"effect below {self.threshold:.0%}"
        return ""


def judge(pairs: Sequence[tuple[Ratio | None, Sequence[float], Sequence[float]]],
          threshold: float = NOISE) -> list[Difference]:
    """Differences for one family of comparisons (ratio, reference samples, other samples), Holm-corrected together."""
    raw: list[float | None] = [rank_p(a, b) if r is not None and len(a) >= 2 and len(b) >= 2 else None
                               for r, a, b in pairs]
    tested = {i: p for i, p in enumerate(raw) if p is not None}
    adjusted = dict(zip(tested, holm(list(tested.values()))))
    return [Difference(r, raw[i], adjusted.get(i), threshold, (len(a), len(b))) for i, (r, a, b) in enumerate(pairs)]


def best_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact rank test can give n₁ against n₂ samples: 2 / C(n₁ + n₂, n₁)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))  # int ÷ int: no float overflow for thousands of rounds

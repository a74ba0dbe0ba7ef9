"""When may the page say "A is faster than B"? Three tests must agree, and many comparisons are corrected for.

1. the bootstrap 95 % interval of the ratio of medians excludes 1 (bootstrap.py);
2. a two-sided Mann–Whitney U rank test on the raw per-block samples of the two cells rejects "same distribution"
   at ALPHA after Holm's step-down correction over the comparisons asked together (one family: the rivals of one
   summary row, the cells of one `adcompare compare`, the cells behind one finding);
3. the effect is above a stated noise threshold: the ratio of medians is beyond 1 ± NOISE (or ± the threshold the
   caller states, e.g. `compare --fail-above PCT`).

The rank test is SciPy's `mannwhitneyu` with its own method selection, for any sample count: the exact
distribution when one cell has at most 8 samples and no value is tied, else the normal approximation with the tie
correction and the continuity correction. When every sample of one cell is below every sample of the other (U = 0,
the common case between frameworks) the same p is computed here without SciPy, which keeps a 10,000-cell report
fast: exact, 2 / C(n₁ + n₂, n₁), taken in log space (math.comb of thousands of rounds is far beyond a float), or
the normal tail through math.erfc, which underflows to 0 and never overflows. With 7 blocks per cell the exact p
is 0.0006, so a single comparison can be decided; a large family (hundreds of cells in one compare) needs more
blocks per cell before Holm lets it reject.
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
    from scipy.stats import mannwhitneyu  # ~1 s to import: loaded when a rank test runs, not by every command

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


EXACT_MAX = 8  # SciPy's "auto": exact when a sample has at most 8 values and none is tied


def _separated_p(a: Sequence[float], b: Sequence[float]) -> float:
    """p for samples that do not overlap (U = 0), as SciPy's method selection would compute it."""
    n1, n2 = len(a), len(b)
    tie_counts = [t for t in (*Counter(a).values(), *Counter(b).values()) if t > 1]  # no tie crosses the gap
    if min(n1, n2) <= EXACT_MAX and not tie_counts:
        # 2 / C(n₁+n₂, n₁) through log-gamma: C(2000, 1000) alone is ~10⁶⁰⁰, past any float
        log_comb = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
        return min(1.0, 2.0 * math.exp(-log_comb))
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in tie_counts)
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of a difference
        return 1.0
    z = (n1 * n2 / 2 - 0.5) / math.sqrt(variance)  # |U − μ| with the continuity correction
    return min(1.0, math.erfc(z / math.sqrt(2)))  # 2·Φ(−z)


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

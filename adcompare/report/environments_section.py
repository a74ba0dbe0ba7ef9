"""The report's "Environments side by side" section: each cell under two framework releases (`run --env`).

Shown only when the results hold cells of more than one environment. One row per pair that
`environment_pairs.pair_environments` makes (the baseline is the first `--env`): the framework versions that differ,
both medians, the ratio with its bootstrap interval, and whether the two derivatives' seeded projections agree.
"""
from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup

from adcompare.analysis.environment_pairs import EnvironmentPair, pair_environments
from adcompare.store.results import Results

TITLE = "Environments side by side"


def _versions(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in sorted(versions.items())) or "same versions"


def _row(pair: EnvironmentPair, seconds: Callable[[float | None], str]) -> Markup:
    b, c, t = pair.baseline, pair.candidate, pair.timing
    before, after = pair.changed_versions
    ratio = f"{t.candidate / t.baseline:.3g}" if t else "–"
    interval = f"{t.ratio.low:.3g}–{t.ratio.high:.3g}" if t and t.ratio else "–"
    agree = pair.values_agree
    values = ("not checked in both" if agree is None else "agree" if agree
              else f"differ (scaled error {pair.projection_error:.1e})")
    cells = [pair.cell.id, f"{b.cell.environment} ({_versions(before)})",
             f"{c.cell.environment} ({_versions(after)})", seconds(t.baseline) if t else b.status.value,
             seconds(t.candidate) if t else c.status.value, ratio, interval, pair.verdict, values]
    styles = {7: {"faster": "grade-good", "slower": "grade-bad"}.get(pair.verdict, ""),
              8: "" if agree is None else {True: "grade-good", False: "grade-bad"}[agree]}
    return Markup("<tr>{}</tr>").format(Markup("").join(
        Markup('<td class="{}">{}</td>').format(styles.get(i, ""), v) for i, v in enumerate(cells)))


def sections(results: Results, seconds: Callable[[float | None], str]) -> list[tuple[str, Markup]]:
    """The section as the report's extra sections take it ((title, body)); none for a single environment."""
    if len({m.cell.environment for m in results.measurements}) < 2:
        return []
    pairs = pair_environments(results)
    head = ("cell", "baseline", "candidate", "baseline median", "candidate median", "ratio", "95% interval",
            "verdict", "derivative values")
    intro = Markup("<p>The same cell (problem, size, operator, adapter, variant, device, dtype) run in two "
                   "environments; each is compared with <b>{}</b>. Ratio: candidate ÷ baseline median, with the "
                   "bootstrap interval the rankings use. Derivative values: the two cells' seeded projections "
                   "agree within the cell's tolerance. Rerun one with <code>adcompare compare "
                   "results.jsonl</code>.</p>").format(pairs[0].baseline.cell.environment if pairs else "–")
    defined = {name: env for prov in results.provenance for name, env in prov.environments.items()}
    if defined:
        intro += Markup("<ul>{}</ul>").format(Markup("").join(
            Markup("<li><b>{}</b>: <code>{}</code> ({})</li>").format(name, " ".join(env.requirements), env.python)
            for name, env in defined.items()))
    table = Markup('<table class="data"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>').format(
        Markup("").join(Markup("<th>{}</th>").format(h) for h in head),
        Markup("").join(_row(p, seconds) for p in pairs))
    return [(TITLE, intro + (table if pairs else Markup("<p>No cell ran in two environments.</p>")))]

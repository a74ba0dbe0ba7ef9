"""The report's "Framework bugs found" list and the failure row's link to the reproducer, built from the real
records of the committed full baseline (JAX compiled jacrev of bundle_adjustment, jaxlib 0.10.2: error 1.0)."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from adcompare.plugin import registry as plugins
from adcompare.report import build
from adcompare.store import results
from adcompare.verify.expectations import FRAMEWORK_BUGS, expected_reproducer, labelled

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "benchmarks" / "results" / "full" / "full.jsonl.gz"
BUG = FRAMEWORK_BUGS[("jax", "bundle_adjustment", "jacrev", "compiled", "cpu")]


@pytest.fixture(scope="module")
def baseline_ba() -> results.Results:
    """The full baseline's bundle_adjustment cells at n5-m50-p300 (every adapter), labelled as `report` does."""
    loaded = results.load([FULL])
    problems = plugins.load().problems
    ms = tuple(labelled(m, problems) for m in loaded.measurements
               if m.cell.problem == "bundle_adjustment" and m.cell.size == "n5-m50-p300")
    return dataclasses.replace(loaded, measurements=ms)


def _section(html: str) -> str:
    return html[html.index('<section id="framework-bugs"'):html.index('<section id="failures"')]


def test_the_baseline_cell_is_listed_and_its_failure_row_links_the_reproducer(baseline_ba, tmp_path):
    hit = [m for m in baseline_ba.measurements if expected_reproducer(m)]
    assert [m.cell.id for m in hit] == ["bundle_adjustment-n5-m50-p300-jacrev-jax-compiled-float32"]
    assert hit[0].check.error == 1.0 and hit[0].versions["jaxlib"] == "0.10.2"

    out = tmp_path / "reports" / "run"
    html = build(baseline_ba, out).read_text(encoding="utf-8")
    section = _section(html)
    assert "Framework bugs found" in section and 'href="#framework-bugs"' in html
    assert "jaxlib 0.10.2" in section and "1 cell of this run met it." in section
    assert BUG.upstream in section and "LIBRARY_FUSION_TYPE_REDUCE" in section  # the workaround is stated

    failures = html[html.index('<section id="failures"'):html.index('<section id="cells"')]
    row = next(r for r in re.findall(r"<tr>.*?</tr>", failures, flags=re.S) if "jacrev" in r and "compiled" in r)
    href = re.search(r'<a class="reproducer" href="([^"]+)">docs/framework-bugs/jax_ynn_reduce_wrong.md</a>', row)
    assert href, row
    assert (out / href.group(1)).resolve() == ROOT / BUG.reproducer  # the relative link reaches the doc


def test_on_a_version_not_verified_affected_the_bug_is_listed_but_no_cell_met_it(baseline_ba, tmp_path):
    problems = plugins.load().problems
    fixed = tuple(labelled(dataclasses.replace(m, details={}, versions={**m.versions, "jaxlib": "0.10.1"}), problems)
                  if m.cell.adapter == "jax" else m for m in baseline_ba.measurements)
    html = build(dataclasses.replace(baseline_ba, measurements=fixed), tmp_path).read_text(encoding="utf-8")
    assert "No cell of this run met it." in _section(html)
    assert 'class="reproducer"' not in html[html.index('<section id="failures"'):]  # an unexplained failure

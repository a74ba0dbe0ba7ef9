"""Report sections as units (plugin/report_section.py): the built-in sections come through the same hook as a
plugin's, drawn by `order` with their nav links; the committed baselines render the sections and figures they
rendered before sections were units (outlines recorded in tests/fixtures/report_baselines/)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from adcompare import Section
from adcompare.model.errors import PluginError
from adcompare.plugin import registry
from adcompare.report import build
from adcompare.store.results import load
from adcompare.verify.expectations import labelled
from tests.conftest import FIXTURES
from tests.report_outline import outline

ROOT = Path(__file__).resolve().parent.parent
BASELINES = {  # committed baseline → its outline, recorded from the report as it was built before this change
    "h100_gpu": ROOT / "benchmarks/results/h100/gpu.jsonl",  # a GPU run: heatmaps, framework bugs, failures
    "gate_ab_slow20_honest1": ROOT / "benchmarks/results/gate/ab/slow20/honest1.jsonl.gz",  # `run --env`, gzipped
}


def _reported(path: Path):
    """The results as `adcompare report` reports them: loaded, failures labelled."""
    results = load([path])
    problems = registry.load().problems
    return dataclasses.replace(results, measurements=tuple(labelled(m, problems) for m in results.measurements))


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_committed_baseline_renders_the_same_sections_and_figures(name, tmp_path):
    html = build(_reported(BASELINES[name]), tmp_path).read_text()
    want = json.loads((FIXTURES / "report_baselines" / f"{name}.json").read_text())
    got = outline(html)
    assert got["nav"] == want["nav"]
    assert got["sections"] == want["sections"]
    assert got["figures"] == want["figures"]


def test_the_built_in_sections_come_through_the_plugin_hook():
    results = load([FIXTURES / "report" / "cpu.jsonl"])
    returned = [s for group in registry.load().manager.hook.adcompare_report_sections(results=results)
                for s in group]
    assert [s.anchor for s in returned if isinstance(s, Section)][:3] == ["overview", "findings", "summary"]
    assert all(isinstance(s, Section) and s.template for s in returned)


def test_a_plugin_section_is_drawn_at_its_order_with_its_template_and_a_nav_link(tmp_path):
    plugins = registry.load((str(FIXTURES / "plugins" / "report_section.py"),))
    results = load([FIXTURES / "report" / "cpu.jsonl"])
    sections = [s for group in plugins.manager.hook.adcompare_report_sections(results=results) for s in group]
    html = build(results, tmp_path, sections=sections).read_text()
    got = outline(html)
    anchors = [anchor for anchor, _ in got["sections"]]
    assert anchors.index("summary") < anchors.index("slowest") < anchors.index("scaling")  # order 35
    assert ["slowest", "Slowest cells"] in got["nav"] and ["extra-1", "Plain note"] in got["nav"]
    assert anchors[-3:] == ["cells", "extra-1", "method"]  # the (title, body) pair: after the built-ins
    # The template drew the plugin's data: the slowest cell of each adapter, recomputed here from the file.
    slowest = {}
    for m in results.measurements:
        if m.timing is not None and m.timing.median > slowest.get(m.cell.adapter, (None, -1.0))[1]:
            slowest[m.cell.adapter] = (m.cell.id, m.timing.median)
    section = html[html.index('<section id="slowest">'):]
    section = section[:section.index("</section>")]
    for adapter, (cell, _) in slowest.items():
        assert f"<td>{adapter}</td><td><code>{cell}</code></td>" in section


def test_two_sections_with_one_anchor_are_refused_with_the_fix(tmp_path):
    results = load([FIXTURES / "report" / "cpu.jsonl"])
    built_in = [s for group in registry.load().manager.hook.adcompare_report_sections(results=results) for s in group]
    clash = [Section("Mine", "summary", 5, body="x")]
    with pytest.raises(PluginError, match="'summary'.*its own anchor"):
        build(results, tmp_path, sections=[*built_in, *clash])


def test_the_guides_section_example_is_the_plugin_these_tests_run():
    from tests.test_third_party import guide_example

    plugin = (FIXTURES / "plugins" / "report_section.py").read_text().splitlines()
    lines = iter(plugin)
    missing = [line for line in guide_example("slowest_section.py").splitlines() if line not in lines]
    assert missing == []  # every line of the guide's example, in order, in the plugin


def test_a_report_without_its_built_in_sections_is_refused_in_one_line(tmp_path, monkeypatch):
    """An editable install made before the built-in sections' entry point reads an older entry-point list: the
    page would come out empty, so the report says what to reinstall instead."""
    from adcompare.model.errors import PluginError
    from adcompare.plugin import registry
    from adcompare.report.page import hook_sections
    from adcompare.store.results import Results

    plugins = registry.load.__wrapped__()  # a registry of its own: load() is cached for the whole process
    plugins.manager.unregister(name=next(name for name, plugin in plugins.manager.list_name_plugin()
                                         if getattr(plugin, "__name__", "") == "adcompare.analysis.report_sections"))
    with pytest.raises(PluginError, match="reinstall adcompare"):
        hook_sections(plugins, Results((), ()))
    assert hook_sections(registry.load(), Results((), ()))  # the shared one untouched

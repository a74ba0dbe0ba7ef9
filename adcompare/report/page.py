"""Assembling the report: results → sections → one self-contained index.html (plus results.csv beside it).

Everything the page needs is inline — CSS, the table script, SVG figures, the cell data — so it opens from a
file:// URL or an e-mail attachment with no network. Strings from problems, adapters and error messages reach the
page only through jinja2 autoescaping, the SVG writer, or the JSON block (whose '<' is escaped); the script that
draws the table sets textContent, never innerHTML.
"""
from __future__ import annotations

import datetime
import math
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from adcompare.analysis.ratio_grid import Grid
from adcompare.analysis.report_sections import CellTable
from adcompare.model.errors import PluginError
from adcompare.model.units import seconds
from adcompare.plugin import registry
from adcompare.plugin.report_section import Section, from_pair
from adcompare.report import cells_table, figures, heatmap
from adcompare.report.heatmap import Heatmap
from adcompare.report.svgchart import Chart, Palette
from adcompare.store.provenance import Provenance
from adcompare.store.results import Results

PROVENANCE_ORDER = ("host", "date", "cpu", "cpu_count", "gpu", "threads", "thread_policy", "timing_policy",
                    "platform", "python", "numpy", "adcompare", "git_commit", "resumed")


def number(value: float | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return "∞" if math.isinf(value) else "NaN"
    return f"{value:.2g}" if isinstance(value, float) else str(value)


def calls(value: float | None) -> str:
    if value is None:
        return "no eager twin"
    if math.isinf(value):
        return "never"
    return f"{math.ceil(value):,}"


@dataclass(frozen=True)
class Figure:
    title: str
    chart: Chart

    @property
    def svg(self) -> str:
        return self.chart.svg


@dataclass
class Timings:
    """Where the build spends its time; printed at the bottom of the page and by benchmarks/report_build.py."""

    steps: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.perf_counter)

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.steps[step] = now - self._last
        self._last = now


def _provenance(results: Results) -> list[list[tuple[str, str]]]:
    """One block per machine fingerprint (four files from one host are one machine), naming its files."""
    by_machine: dict[str, list[tuple[Provenance, str]]] = defaultdict(list)
    for provenance, source in zip(results.provenance, results.sources):
        by_machine[provenance.machine.id].append((provenance, source))
    machines = []
    for fingerprint, members in by_machine.items():
        first = members[0][0]
        prov = {k: v for k, v in first.to_json().items() if k != "machine"}  # every field, shown by name
        prov["fingerprint"] = fingerprint
        prov["frameworks"] = dict(first.machine.frameworks) or None
        prov["files"] = ", ".join(source for _, source in members)
        sources = {source for _, source in members}
        prov["resumed"] = "; ".join(r.describe() for r in results.resumptions if r.source in sources) or None
        keys = [k for k in PROVENANCE_ORDER if k in prov] + sorted(k for k in prov if k not in PROVENANCE_ORDER)
        machines.append([(k, _flat(prov[k])) for k in keys if prov[k] not in (None, "")])
    return machines


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_flat(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def _environment():
    env = jinja2.Environment(loader=jinja2.PackageLoader("adcompare", "report"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(seconds=seconds, number=number, calls=calls)
    return env


def _asset(name: str) -> str:
    return resources.files("adcompare.report").joinpath(name).read_text(encoding="utf-8")


def _link_from(out_dir: Path) -> Callable[[Path], str]:
    """A file of the source checkout as a link relative to the report's folder."""
    return lambda target: Path(os.path.relpath(target, Path(out_dir).resolve())).as_posix()


def hook_sections(plugins: registry.Registry, results: Results) -> list[Section | tuple[str, str]]:
    """What the `adcompare_report_sections` hook returns for `results`, built-in sections among them; refused in
    one line where the built-in ones are not registered (an editable install made before their entry point
    existed reads an older entry-point list: the page would come out empty)."""
    found = [s for group in plugins.manager.hook.adcompare_report_sections(results=results) for s in group]
    if not any(isinstance(s, Section) and s.anchor == "overview" for s in found):
        raise PluginError("the report's built-in sections are not registered (no 'builtin-report-sections' entry "
                          "point in the adcompare group: adcompare's install predates it); reinstall adcompare, "
                          "e.g. pip install -e .")
    return found


def _sections(results: Results, sections: Iterable[Section | tuple[str, str]] | None,
              extra_sections: Sequence[tuple[str, str]]) -> list[Section]:
    """Every section to draw, by order: those given (by default, what the registered plugins' hook returns —
    the built-in sections among them), then `extra_sections`; (title, body) pairs become `extra-N` sections."""
    if sections is None:
        sections = hook_sections(registry.load(), results)
    out, pairs = [], 0
    for item in [*sections, *extra_sections]:
        if not isinstance(item, Section):
            pairs += 1
            item = from_pair(*item, pairs)
        out.append(item)
    anchors = Counter(s.anchor for s in out)
    if clash := sorted(a for a, n in anchors.items() if n > 1):
        raise PluginError(f"report sections share the anchor {clash[0]!r}; give each section its own anchor")
    return sorted(out, key=lambda s: s.order)


def _figure_svg(palette: Palette) -> Callable[[Any], Markup]:
    """The page's `svg` filter: a figure's data drawn in the page's colours."""
    def svg(item: Any) -> Markup:
        return Markup(_drawn(palette, item).svg)
    return svg


def _drawn(palette: Palette, item: Any) -> Chart | Heatmap:
    return heatmap.drawn(item) if isinstance(item, Grid) else figures.chart(palette, item)


def build(results: Results, out_dir: Path, extra_sections: Sequence[tuple[str, str]] = (),
          figures_dir: Path | None = None, sections: Iterable[Section | tuple[str, str]] | None = None) -> Path:
    """Write `out_dir/index.html` and `out_dir/results.csv` from `results`; return the index.html path.

    `sections`: what the `adcompare_report_sections` hook returned (built-in and plugins' sections); by default
    the hook of the registry of installed plugins is called. `extra_sections` are (title, body) pairs appended to
    the page (e.g. a run log); bodies are text and are escaped — pass a `markupsafe.Markup` for trusted HTML.
    `figures_dir`: also write every figure there as PDF and PNG through matplotlib (paper.py).
    """
    return build_with_timings(results, out_dir, extra_sections, figures_dir, sections)[0]


def build_with_timings(results: Results, out_dir: Path, extra_sections: Sequence[tuple[str, str]] = (),
                       figures_dir: Path | None = None, sections: Iterable[Section | tuple[str, str]] | None = None
                       ) -> tuple[Path, dict[str, float]]:
    """`build`, also returning seconds per step (sections, table, render) for benchmarks/report_build.py."""
    clock = Timings()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = _sections(results, sections, extra_sections)
    clock.mark("sections")

    palette = Palette()
    adapters = sorted({m.cell.adapter for m in results.measurements})
    for adapter in adapters:  # every adapter gets its colour up front, in name order
        palette.colour(adapter)
    if figures_dir is not None:
        from adcompare.report import paper  # matplotlib is an optional extra: imported only when figures are asked for

        paper.write([(anchor, _drawn(palette, item)) for s in drawn for anchor, item in getattr(s.data, "figures", ())],
                    figures_dir)
        clock.mark("paper figures")

    payload, csv_bytes = "", 0
    for s in drawn:
        if isinstance(s.data, CellTable):  # the one section with a file of its own: results.csv
            table = [list(row) for row in s.data.rows]
            csv_text = cells_table.to_csv(table, s.data.columns)
            (out_dir / "results.csv").write_text(csv_text, encoding="utf-8")
            payload, csv_bytes = cells_table.payload(table, s.data.columns), len(csv_text.encode())
    clock.mark("table")

    env = _environment()
    env.filters.update(svg=_figure_svg(palette), report_link=_link_from(out_dir))
    page = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machines": _provenance(results),
        "workers": [
            {**w, "versions": _flat(w.get("versions") or {})} for w in results.workers
        ],
        "sources": results.sources,
        "warnings": results.warnings,
        "colour": palette.colour,
        "adapter_index": {a: i for i, a in enumerate(adapters)},
        "payload": payload,
        "csv_bytes": csv_bytes,
    }
    html = env.get_template("index.html.j2").render(
        **page, problems=sorted({m.cell.problem for m in results.measurements}),
        links=[link for s in drawn for link in s.links],
        sections=[Markup(_template(env, s).render(**page, section=s, data=s.data)) for s in drawn],
        css=_asset("report.css"), script=_asset("report.js"))
    clock.mark("render")
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    clock.mark("write")
    return path, clock.steps


def _template(env: jinja2.Environment, section: Section) -> jinja2.Template:
    """The section's template: its own (adcompare's report package, then the plugin's folder), or a body's."""
    if section.template is None:
        return env.get_template("sections/body.html.j2")
    if section.templates is not None:
        loader = jinja2.ChoiceLoader([env.loader, jinja2.FileSystemLoader(section.templates)])  # type: ignore[list-item]
        return env.overlay(loader=loader).get_template(section.template)
    return env.get_template(section.template)

"""The HTML report, built from the checked-in fixture (tests/fixtures/report, written by its make_fixture.py)."""
from __future__ import annotations

import csv
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from adcompare import report
from adcompare.analysis import compile_cost, sizes
from adcompare.model.measurement import Timing
from adcompare.model.timing_policy import report_policy
from adcompare.store import results
from adcompare.store.provenance import Provenance

FIXTURE = Path(__file__).parent / "fixtures" / "report"
XSS = "<script>alert(1)</script>"
SECTIONS = ("overview", "findings", "summary", "scaling", "forward-reverse", "relative-cost", "compilation",
            "across-devices", "correctness", "failures", "cells", "method")
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


class Page(HTMLParser):
    """What the tests look at: section ids, script elements, text per summary article and per table cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self.articles: dict[str, str] = {}
        self.cells: list[str] = []
        self.text: list[str] = []
        self._stack: list[str] = []
        self._script: dict | None = None
        self._article: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "script":
            self._script, self._text = attrs, []
        elif tag == "article":
            self._article, self._name = [], None
        elif tag == "h3" and self._article is not None:
            self._name = []
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._text)))
            self._script = None
        elif tag == "h3" and self._article is not None:
            self._name = "".join(self._name)
        elif tag == "article" and self._article is not None:
            self.articles[self._name] = " ".join(" ".join(self._article).split())
            self._article = None
        elif tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._script is not None:
            self._text.append(data)
            return
        self.text.append(data)
        if self._article is not None:
            self._article.append(data)
            if isinstance(self._name, list):
                self._name.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str, Page]:
    loaded = results.load(sorted(FIXTURE.glob("*.jsonl")))
    index = report.build(loaded, tmp_path_factory.mktemp("report"), extra_sections=[("Run log", f"ran {XSS}")])
    html = index.read_text(encoding="utf-8")
    page = Page()
    page.feed(html)
    page.close()
    return index, html, page


def test_page_parses_and_has_every_section(built):
    index, html, page = built
    assert index.name == "index.html" and html.startswith("<!DOCTYPE html>")
    for section in SECTIONS:
        assert section in page.ids, f"section #{section} missing"
    assert "extra-1" in page.ids
    for host in ("cpu-box", "gpu-box", "NVIDIA H100 80GB HBM3"):
        assert host in html  # provenance of both machines
    with open(index.parent / "results.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:8] == ["problem", "size", "operator", "adapter", "variant", "device", "dtype", "status"]
    assert len(rows) == 1 + 336 + 48  # every cell of both files (cpu.jsonl has 336, gpu.jsonl 48)


def test_inline_figures_are_valid_svg(built):
    _, html, _ = built
    figures = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    assert len(figures) >= 8
    for svg in figures:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [ET.fromstring(svg).find("{http://www.w3.org/2000/svg}text").text for svg in figures]
    assert "exp_dot_loss · cpu · float32" in titles
    assert "linear_layer · cpu · float32 (slice n=10, o=5)" in titles
    for section in ("scaling", "forward-reverse", "relative-cost", "compilation"):
        body = html[html.index(f'<section id="{section}"'):]
        assert "<svg" in body[:body.index("</section>")], f"no figure in #{section}"


def test_overlapping_times_read_no_clear_winner(built):
    _, _, page = built
    text = page.articles["overlap_pair"]
    assert "no clear winner: jax · compiled ≈ torch · compiled" in text


def test_times_twice_apart_name_the_winner(built):
    _, _, page = built
    text = page.articles["twofold_pair"]
    assert "jax · compiled is fastest" in text and "no clear winner" not in text
    assert "×2.00" in text


def test_markup_from_problem_names_and_errors_renders_as_text(built):
    _, html, page = built
    assert XSS not in html  # never raw: not in the HTML, the SVG, nor the JSON block
    for attrs, code in page.scripts:
        assert "alert(1)" not in code or attrs.get("type") == "application/json", "markup became a script"
    assert sum(1 for attrs, _ in page.scripts if attrs.get("type") != "application/json") == 1  # ours only
    assert XSS in page.cells  # the problem name, as a table cell's text
    assert any(XSS in c and "first call: ValueError" in c for c in page.cells)  # the error message
    drawn = [svg for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
             if "alert" in svg and "heatmap" not in svg]  # the overview heatmap names it in a row: see below
    assert drawn and all(ET.fromstring(svg).find("{http://www.w3.org/2000/svg}text").text.startswith(XSS)
                         for svg in drawn)
    assert f"ran {XSS}" in "".join(page.text)  # the CLI's extra sections are escaped too


def test_emulated_cells_are_labelled(built):
    _, html, page = built
    hessian = page.articles["exp_dot_loss"]
    assert "tensorflow · compiled emulated" in hessian
    assert "(emulated)" in html  # figure legends


def test_failures_table_lists_each_failed_cell(built):
    _, html, _ = built
    body = html[html.index('<section id="failures"'):]
    body = body[:body.index("</section>")]
    for status in ("failed", "mismatch", "nan", "crashed", "timeout"):
        assert f'class="chip s-{status}"' in body
    assert "autograd has no compiler; use --variant eager" in body  # not-run reasons, folded


def test_size_labels_sort_numerically_and_grids_slice():
    assert sizes.ordered(["n1000", "n10", "n100"]) == ["n10", "n100", "n1000"]
    axis = sizes.axis(["n10-p8-o5", "n10-p64-o5", "n10-p512-o5", "n5-p64-o5"])
    assert axis.name == "p" and axis.fixed == (("n", 10), ("o", 5))
    assert axis.x == {"n10-p8-o5": 8.0, "n10-p64-o5": 64.0, "n10-p512-o5": 512.0}
    assert sizes.axis(["small", "large"]).name == "size #"


def test_break_even_counts_calls_until_compiling_pays_off():
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement
    from adcompare.model.status import Status

    def cell(variant, median, first):
        c = Cell("p", "n10", "grad", "jax", variant, "cpu", "float32")
        return Measurement(c, Status.OK, timing=Timing((median,) * 5, 1, first))

    # compiled: first call 1.0 s then 1 ms; eager: first 0.01 s then 3 ms → 1 + 0.99 / 0.002 = 496 calls
    cost = compile_cost.CompileCost(cell("compiled", 1e-3, 1.0), cell("eager", 3e-3, 0.01))
    assert cost.break_even == pytest.approx(496)
    assert compile_cost.CompileCost(cell("compiled", 4e-3, 1.0), cell("eager", 3e-3, 0.01)).break_even == float("inf")


def _chromium(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--window-size=1400,2000", *extra, url]
    return subprocess.run([CHROMIUM, *flags], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package `chromium`); CI installs it")
def test_renders_in_headless_chromium_without_console_errors(built, tmp_path):
    index, _, _ = built
    url = index.resolve().as_uri()
    dom = _chromium(tmp_path, url, "--dump-dom")
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert dom.returncode == 0 and not console, "\n".join(console) or dom.stderr[-2000:]
    # the script ran: the table has rows, and the download link carries the same CSV as results.csv
    assert re.search(r'id="cells-count"[^>]*>\d+ of \d+ cells<', dom.stdout)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom.stdout  # drawn as text by the table script
    href = re.search(r'id="cells-csv"[^>]*href="([^"]+)"', dom.stdout) or \
        re.search(r'href="([^"]+)"[^>]*id="cells-csv"', dom.stdout)
    assert href and href.group(1).startswith("data:text/csv;charset=utf-8,")
    downloaded = urllib.parse.unquote(href.group(1).split(",", 1)[1].replace("&amp;", "&"))
    assert downloaded == (index.parent / "results.csv").read_text(encoding="utf-8")

    shot = tmp_path / "report.png"
    run = _chromium(tmp_path, url, f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank 1400×2000 page is a few kB


def test_overview_heatmap_per_machine_device_dtype_with_linked_tiles(built):
    _, html, _ = built
    overview = html[html.index('<section id="overview"'):html.index('<section id="findings"')]
    maps = re.findall(r'<svg[^>]*class="chart heatmap".*?</svg>', overview, flags=re.S)
    titles = [ET.fromstring(svg).find("{http://www.w3.org/2000/svg}text").text for svg in maps]
    assert len(titles) == 3 and any("cuda · float32" in t for t in titles)  # cpu f32, cpu f64, cuda f32
    links = re.findall(r'<a href="(#filter=[^"]+)"', maps[0])
    assert links and all("device=" in link and "dtype=" in link for link in links)
    assert "&lt;script&gt;" in maps[0] and "<script>alert" not in overview  # names are escaped in tiles


def test_findings_section_states_each_seed_claim_with_a_verdict(built):
    _, html, _ = built
    findings = html[html.index('<section id="findings"'):html.index('<section id="summary"')]
    for seed in ("000", "001", "002", "004"):
        assert f"<b>seed {seed}</b>" in findings
    assert re.search(r'class="finding confirmed"><span class="mark">confirmed</span>\s*<b>seed 001</b>', findings)
    assert "jacrev beats jacfwd at n1000 by" in findings and "not-measured" in findings
    assert "Mann–Whitney U" in html and "Holm" in html  # the significance method is printed on the page


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package `chromium`); CI installs it")
def test_heatmap_tile_opens_its_row_in_the_cell_table(built, tmp_path):
    index, html, _ = built
    overview = html[html.index('<section id="overview"'):html.index('<section id="findings"')]
    link = re.search(r'<a href="(#filter=problem=exp_dot_loss[^"]+operator=jacrev[^"]+)"', overview).group(1)
    url = index.resolve().as_uri() + link.replace("&amp;", "&")
    dom = _chromium(tmp_path, url, "--dump-dom")
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert dom.returncode == 0 and not console, "\n".join(console) or dom.stderr[-2000:]
    assert re.search(r'id="cells-count"[^>]*>1 of \d+ cells<', dom.stdout)
    body = dom.stdout[dom.stdout.index('id="cells-table"'):]
    rows = re.findall(r'<tr class="linked">(.*?)</tr>', body, flags=re.S)
    assert len(rows) == 1 and "jacrev" in rows[0] and "exp_dot_loss" in rows[0]
    shot = tmp_path / "overview.png"
    assert _chromium(tmp_path, index.resolve().as_uri(), f"--screenshot={shot}").returncode == 0
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_device_peak_memory_is_shown_when_gpu_cells_have_it():
    import json as _json

    from adcompare.analysis import cell_rows
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement
    from adcompare.model.status import Status
    from adcompare.report import cells_table

    def shown(ms):
        data = _json.loads(cells_table.payload(cell_rows.rows(ms, {})))
        return next(c["shown"] for c in data["columns"] if c["name"] == "device_peak_bytes")

    cpu = Measurement(Cell("p", "n1", "grad", "jax", "eager", "cpu", "float32"), Status.OK)
    gpu = Measurement(Cell("p", "n1", "grad", "jax", "eager", "cuda", "float32"), Status.OK, device_peak_bytes=4096)
    assert not shown([cpu])
    assert shown([cpu, gpu])


def test_expected_failures_are_labelled_in_the_failures_table_the_matrix_and_the_csv(tmp_path):
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement
    from adcompare.model.status import Status
    from adcompare.plugin import registry as plugins
    from adcompare.report import build
    from adcompare.store.results import Results
    from adcompare.verify.expectations import labelled

    problems = plugins.load().problems
    known = Measurement(Cell("control_loop", "n100", "grad", "jax", "compiled", "cpu", "float32"), Status.FAILED,
                        "ConcretizationTypeError")
    surprise = Measurement(Cell("exp_dot_loss", "n100", "grad", "jax", "compiled", "cpu", "float32"), Status.FAILED,
                           "a new bug")
    ms = tuple(labelled(m, problems) for m in (known, surprise))
    assert "data-dependent" in ms[0].details["expected_failure"] and "expected_failure" not in ms[1].details
    html = build(Results((Provenance.from_json({"host": "h"}),), ms, sources=("x",)), tmp_path).read_text()
    assert html.count('class="chip expected"') == 1 and "failed (expected) ×1" in html
    csv_rows = (tmp_path / "results.csv").read_text().splitlines()
    assert "expected" in csv_rows[0].split(",") and "data-dependent" in next(r for r in csv_rows if "control_loop" in r)


def test_the_compilation_table_shows_the_eager_first_call_the_rule_charges(tmp_path):
    """JAX's eager first call compiles each primitive (0.98 s for bundle_adjustment's value in the full baseline),
    which is why break-even is 1 call against a 200 ms compile: the table shows that figure beside the others."""
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement
    from adcompare.model.status import Status

    def cell(variant, median, first, **compile):
        c = Cell("f_r2_r3", "n10", "jacrev", "jax", variant, "cpu", "float32")
        return Measurement(c, Status.OK, timing=Timing((median,) * 7, 1, first, **compile), support="native")

    path = tmp_path / "r.jsonl"
    with results.ResultsWriter(path, {"host": "h"}) as w:
        w.add(cell("compiled", 277e-6, 2.35e-3, compile=0.2, compile_method="ahead of time: jax.jit lower+compile"))
        w.add(cell("eager", 4.26e-3, 0.977))
    page = Page()
    page.feed(report.build(results.load([path]), tmp_path / "out").read_text())
    text = " ".join(page.text)
    assert "against the eager variant of the same cell" not in text and "as its adapter declares" in text
    row = page.cells[page.cells.index("f_r2_r3"):][:12]
    # compile, first call, steady, eager first call, eager steady, speed-up, break-even: 1 + ⌈(0.2 + 0.00235 − 0.977)
    # ÷ (0.00426 − 0.000277)⌉ ≤ 1 → 1 call
    assert row[5:12] == ["200 ms", "2.35 ms", "277 µs", "977 ms", "4.26 ms", "×15.38", "1"]


def test_sigterm_while_report_runs_the_quick_suite_keeps_its_cells_and_says_so(tmp_path):
    """`adcompare report` with no files runs the quick suite; a scheduler's SIGTERM there is handled as Ctrl-C:
    exit 143 and where the finished cells are, each flushed as it finished."""
    out = tmp_path / "r"
    report_run = subprocess.Popen([sys.executable, "-m", "adcompare", "report", "-o", str(out), "--no-progress"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = out / "results.jsonl"
    deadline = time.monotonic() + 300  # a safety net: the planned-unsupported cells are written within seconds
    while time.monotonic() < deadline and (not path.exists() or '"record": "cell"' not in path.read_text()):
        time.sleep(0.1)
    report_run.send_signal(signal.SIGTERM)
    said = " ".join(report_run.communicate(timeout=300)[0].split())
    assert report_run.returncode == 143, said
    kept = results.cells_in(path)
    assert results.load([path]).provenance[0].timing_policy == report_policy().describe()  # 0.1 s of blocks
    assert kept >= 1 and f"terminated (SIGTERM); the {kept} cell(s) that finished are in '{path}': report them " \
                         f"with: adcompare report {path}" in said

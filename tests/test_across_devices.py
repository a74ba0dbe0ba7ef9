"""The report's "Across devices" section (report/across_devices.py) on what `adcompare run --devices 1,2,4` really
writes (tests/fixtures/devices, its command in the README there): efficiencies against a recomputation from the
raw samples, the emulated-devices statement, the page."""
from __future__ import annotations

import json
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcompare.analysis.across_devices import cores_by_machine, series
from adcompare.analysis.bootstrap import MIN_SAMPLES, Bootstrap
from adcompare.analysis.findings import CONFIRMED, CONTRADICTED, NOT_MEASURABLE, NOT_MEASURED, claims, findings, top
from adcompare.analysis.report_sections import device_blocks
from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.status import Status
from adcompare.report import build, figures
from adcompare.report.svgchart import Palette
from adcompare.store import results

FIXTURE = Path(__file__).parent / "fixtures" / "devices" / "jax_pmap_grad.jsonl"


def raw_samples() -> dict[str, list[float]]:
    """Per-block samples by cell key, read straight from the file (not through Measurement)."""
    out = {}
    for line in FIXTURE.read_text().splitlines():
        record = json.loads(line)
        if record.get("record") == "cell":
            out[record["key"]] = record["timing"]["samples"]
    return out


@pytest.fixture(scope="module")
def loaded():
    return results.load([FIXTURE])


def test_efficiency_is_one_device_time_over_d_times_d_device_time_from_the_raw_samples(loaded):
    raw = raw_samples()
    found = series(loaded.measurements, cores_by_machine(loaded.provenance), Bootstrap())
    assert [(s.first.cell.variant, [st.devices for st in s.steps]) for s in found] == \
        [("compiled", [1, 2, 4]), ("eager", [1, 2, 4])]
    checked = 0
    for s in found:
        one = raw[s.first.cell.key]
        assert s.steps[0].efficiency is None  # the reference
        for step in s.steps[1:]:
            d_samples = raw[step.measurement.cell.key]
            d = step.devices
            expected = np.median(one) / (d * np.median(d_samples))
            point, low, high = step.efficiency
            assert point == pytest.approx(expected, rel=1e-12)
            # every bootstrap ratio of medians lies between the extreme samples' ratios
            assert min(one) / max(d_samples) / d <= low <= point <= high <= max(one) / min(d_samples) / d
            assert low < high
            checked += 1
    assert checked == 4


def test_emulated_host_devices_are_stated_with_the_cores_and_the_workers_record(loaded):
    found = series(loaded.measurements, cores_by_machine(loaded.provenance))
    assert all(s.emulated and s.cores == 2 for s in found)
    assert found[0].caveat == ("4 emulated CPU devices share this machine's 2 cores: these figures are overhead and "
                               "correctness, not speed-up")
    assert "--xla_force_host_platform_device_count=4" in found[0].setup
    # the same cells on a GPU are real devices: no such statement
    gpu = [replace(m, cell=replace(m.cell, device="cuda")) for m in loaded.measurements]
    assert not any(s.emulated or s.caveat for s in series(gpu))


def test_series_group_by_key_and_leave_out_single_device_counts(loaded):
    only_one = [m for m in loaded.measurements if m.cell.devices == 1]
    assert series(only_one) == []
    two_machines = [*loaded.measurements, *(replace(m, machine="other") for m in loaded.measurements)]
    assert len(series(two_machines)) == 4  # a machine's cells are never paired with another's
    missing_one = [m for m in loaded.measurements if m.cell.devices != 1]
    assert all(st.efficiency is None for s in series(missing_one) for st in s.steps)  # no T(1): no efficiency


def test_one_chart_per_problem_device_dtype_with_a_point_per_device_count(loaded):
    found = series(loaded.measurements)
    made = device_blocks(found, lambda m: "")
    assert [b.title for b in made] == ["mlp_loss · cpu · float32"]
    chart = figures.chart(Palette(), made[0].plot)
    assert [p.title for p in chart.panels] == ["pmap_grad B16-h16"]
    assert sorted(len(s.points) for s in chart.panels[0].series) == [3, 3]
    assert "<svg" in chart.svg and "D = 4" in chart.svg


class Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.section = [], {}

    def handle_starttag(self, tag, attrs):
        self.stack.append(dict(attrs).get("id") if tag == "section" else None)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for sid in filter(None, self.stack):
            self.section[sid] = self.section.get(sid, "") + data


def test_the_page_shows_the_section_with_the_statement_and_the_efficiencies(loaded, tmp_path):
    html = build(loaded, tmp_path).read_text()
    page = Text()
    page.feed(html)
    text = " ".join(page.section["across-devices"].split())
    assert "4 emulated CPU devices share this machine's 2 cores: these figures are overhead and correctness, " \
           "not speed-up" in text
    assert html.count("Emulated devices:") == 1  # said once for the section, not per chart
    raw = raw_samples()
    for key, d in (("mlp_loss/B16-h16/pmap_grad/jax/eager/cpu/float32/4dev", 4),
                   ("mlp_loss/B16-h16/pmap_grad/jax/compiled/cpu/float32/2dev", 2)):
        one = raw[key.rsplit("/", 1)[0]]
        assert f"{np.median(one) / (d * np.median(raw[key])):.2f} [" in text


# --- seed 004's claim: "pmap … executes functions across multiple GPUs in parallel" ------------------------------

def _pmap_finding(measurements, cores=None):
    return next(f for f in findings(measurements, Bootstrap(), cores) if f.claim.parallel)


def test_the_pmap_claim_quotes_seed_004():
    claim = next(c for c in claims() if c.parallel)
    assert claim.seed == "004" and claim.parallel == "mlp_loss:pmap_grad"
    assert claim.quote == "pmap is a higher-order map function that executes functions across multiple GPUs in " \
                          "parallel."


def test_emulated_devices_make_the_claim_not_measurable_here_with_the_figures(loaded):
    f = _pmap_finding(loaded.measurements, cores_by_machine(loaded.provenance))
    assert f.verdict == NOT_MEASURABLE
    raw = raw_samples()
    for variant in ("eager", "compiled"):
        key = f"mlp_loss/B16-h16/pmap_grad/jax/{variant}/cpu/float32"
        efficiency = np.median(raw[key]) / (4 * np.median(raw[key + "/4dev"]))
        assert f"efficiency {efficiency:.2f} [" in f.measured
    assert "4 emulated CPU devices share this machine's 2 cores" in f.measured
    assert "within tolerance of the whole batch's float64 reference: 6 of 6 cells" in f.measured
    assert f in top([f])


def _on_gpu(measurements, scale_at_most_devices: float):
    """The fixture's cells as if on real devices, the D = 4 cells' samples scaled (a computed, not typed, verdict)."""
    out = []
    for m in measurements:
        m = replace(m, cell=replace(m.cell, device="cuda"))
        if m.cell.devices == 4:
            m = replace(m, timing=replace(m.timing, samples=tuple(v * scale_at_most_devices
                                                                   for v in m.timing.samples)))
        out.append(m)
    return out


@pytest.mark.parametrize("scale, verdict", [(1e-3, CONFIRMED), (1e3, CONTRADICTED)])
def test_real_devices_decide_the_claim_by_the_speedup_interval(loaded, scale, verdict):
    f = _pmap_finding(_on_gpu(loaded.measurements, scale))
    assert f.verdict == verdict
    assert "emulated" not in f.measured


def test_no_device_counts_is_not_measured_and_names_the_command(loaded):
    f = _pmap_finding([m for m in loaded.measurements if m.cell.devices == 1])
    assert f.verdict == NOT_MEASURED and "--devices 1,2,4" in f.measured


# --- any samples: ties, few, many ---------------------------------------------------------------------------------

SAMPLES = st.lists(st.sampled_from([1e-4, 2e-4, 3e-4, 5e-4, 1e-3]), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(one=SAMPLES, many=SAMPLES, devices=st.sampled_from([2, 4, 8]))
def test_efficiency_for_any_samples(one, many, devices):
    def cell(d, samples):
        c = Cell("mlp_loss", "B16-h4", "pmap_grad", "jax", "eager", "cuda", "float32", devices=d)
        return Measurement(c, Status.OK, timing=Timing(tuple(samples), 1, samples[0]), machine="m")

    [s] = series([cell(1, one), cell(devices, many)])
    step = s.most
    if min(len(one), len(many)) < MIN_SAMPLES:
        assert step.efficiency is None
        return
    point, low, high = step.efficiency
    assert point == pytest.approx(np.median(one) / (devices * np.median(many)), rel=1e-12)
    assert min(one) / max(many) / devices * (1 - 1e-12) <= low <= point <= high \
        <= max(one) / min(many) / devices * (1 + 1e-12)
    assert not s.emulated and s.caveat == ""

"""Real producers into real consumers: a sharded run merged, and a run over two `--env` environments, each read by
`adcompare report` and `adcompare compare`. Every figure asserted is recomputed here from the raw records the
producer wrote (the per-block samples), not taken from the analysis code under test."""
from __future__ import annotations

import csv
import html
import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from adcompare.cli.main import main
from adcompare.plugin import registry as plugins
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan

from .test_environments import NEW, OLD, _index_reachable

SHARDED = ["--adapter", "jax", "--problem", "exp_dot_loss,f_r2_r3", "--size", "n10,n2",
           "--operator", "value,grad,jacfwd,jacrev", "--variant", "eager,compiled", "--dtype", "float32",
           "--no-progress"]
RELEASES = ["--adapter", "autograd", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "value,grad",
            "--variant", "eager", "--dtype", "float64", "--no-progress",
            "--env", f"old=autograd=={OLD}", "--env", f"new=autograd=={NEW}"]  # test_environments' (cached) pair


def cell_records(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("record") == "cell"]


def median(record: dict) -> float:
    """Seconds per call of one raw record: the median of its per-block samples."""
    return statistics.median(record["timing"]["samples"])


def by_key(records: list[dict]) -> dict[str, dict]:
    return {r["key"]: r for r in records}


def key(problem: str, size: str, operator: str, adapter: str, variant: str, dtype: str, environment: str = "") -> str:
    return f"{problem}/{size}/{operator}/{adapter}/{variant}/cpu/{dtype}" + (f"@{environment}" if environment else "")


def shown_ratio(text: str) -> float:
    return float(text.replace(",", "").lstrip("×"))


def assert_shown(shown: str, recomputed: float) -> None:
    """A figure printed with d decimals (or significant digits) equals the recomputation to its last digit."""
    digits = shown.replace(",", "").lstrip("×").split("e")[0]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    scale = 10 ** -decimals if "e" not in shown else abs(recomputed) * 10 ** -(len(digits.replace(".", "")) - 1)
    assert abs(shown_ratio(shown) - recomputed) <= 0.51 * scale + 1e-12, (shown, recomputed)


def page_text(path: Path) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


# --- a sharded run, merged --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sharded") / "merged.jsonl"
    assert main(["run", *SHARDED, "--executor", "local", "--shards", "2", "-o", str(out)]) == 0
    return out


def test_a_sharded_run_merges_every_planned_cell_exactly_once(sharded):
    planned = make_plan(plugins.load(), Selection(
        problems=("exp_dot_loss", "f_r2_r3"), sizes=("n10", "n2"), operators=("value", "grad", "jacfwd", "jacrev"),
        adapters=("jax",), variants=("eager", "compiled"), dtypes=("float32",), devices=("cpu",)))
    want = {c.key for c in planned.cells} | {m.cell.key for m in planned.decided}
    merged = Counter(r["key"] for r in cell_records(sharded))
    assert set(merged) == want and set(merged.values()) == {1}, merged
    shards = sorted((sharded.parent / f"{sharded.name}.shards").glob("shard-*-of-2.jsonl"))
    assert len(shards) == 2
    first, second = ({r["key"] for r in cell_records(s)} for s in shards)
    assert first and second and not first & second and first | second == want
    # The merge copies records, it does not re-measure: each merged record is its shard's, samples included.
    from_shards = {r["key"]: r for s in shards for r in cell_records(s)}
    assert all(r == from_shards[r["key"]] for r in cell_records(sharded))


def test_the_report_of_a_sharded_run_states_figures_recomputed_from_its_samples(sharded, tmp_path):
    assert main(["report", str(sharded), "-o", str(tmp_path / "report")]) == 0
    raw = by_key(cell_records(sharded))
    assert all(r["status"] == "ok" for r in raw.values()), [(k, r["message"]) for k, r in raw.items()]
    rows = {(r["problem"], r["size"], r["operator"], r["variant"]): r
            for r in csv.DictReader((tmp_path / "report" / "results.csv").open())}
    assert len(rows) == len(raw)
    for variant in ("eager", "compiled"):
        grad, value = (raw[key("exp_dot_loss", "n10", op, "jax", variant, "float32")] for op in ("grad", "value"))
        row = rows[("exp_dot_loss", "n10", "grad", variant)]
        assert_shown(row["median_s"], median(grad))
        assert_shown(row["j_over_o"], median(grad) / median(value))  # J/O: derivative ÷ value, same variant
    # Compilation: the speed-up is the eager twin's median ÷ the compiled median (jax has one eager variant).
    text = page_text(tmp_path / "report" / "index.html")
    compilation = text[text.index("Compilation: what it costs"):]
    for problem, size, operator in (("exp_dot_loss", "n10", "grad"), ("f_r2_r3", "n2", "jacrev")):
        shown = re.search(rf"{problem} {size} {operator} jax · compiled cpu · float32 .*?(×[\d.,]+)",
                          compilation).group(1)
        eager, compiled = (raw[key(problem, size, operator, "jax", v, "float32")] for v in ("eager", "compiled"))
        assert_shown(shown, median(eager) / median(compiled))


def test_compare_on_a_sharded_run_finds_an_injected_slowdown_and_nothing_else(sharded, tmp_path, capsys):
    """The merged file against itself with one cell's samples tripled (as a 3× slower build would time it)."""
    records = [json.loads(line) for line in sharded.read_text().splitlines()]
    cells = [r for r in records if r.get("record") == "cell" and r.get("timing")]
    slowed = max(cells, key=lambda r: len(r["timing"]["samples"]))  # the most blocks: the test has power
    assert len(slowed["timing"]["samples"]) >= 7
    slowed["timing"]["samples"] = [3 * s for s in slowed["timing"]["samples"]]
    for name in ("median", "iqr", "min"):
        slowed["timing"][name] *= 3
    candidate = tmp_path / "candidate.jsonl"
    candidate.write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    assert main(["compare", str(sharded), str(candidate), "--fail-above", "10", "--json"]) == 1
    rows = {r["key"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    base, cand = by_key(cell_records(sharded)), by_key(cell_records(candidate))
    assert set(rows) == {r["key"] for r in cells}
    for k, row in rows.items():
        ratio = median(cand[k]) / median(base[k])
        assert row["ratio"] == pytest.approx(ratio, rel=1e-12)
        assert row["baseline_median"] == pytest.approx(median(base[k]), rel=1e-12)
        assert row["regression"] is (k == slowed["key"]), row
    assert rows[slowed["key"]]["ratio"] == pytest.approx(3.0) and rows[slowed["key"]]["verdict"] == "slower"
    assert rows[slowed["key"]]["low"] <= 3.0 <= rows[slowed["key"]]["high"]


# --- a run over two --env environments --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> Path:
    """autograd 1.8.0 and 1.9.1, the environments tests/test_environments.py builds (cached: built once)."""
    if not _index_reachable():
        pytest.skip("PyPI is not reachable: environments need pip")
    out = tmp_path_factory.mktemp("releases") / "releases.jsonl"
    assert main(["run", *RELEASES, "-o", str(out)]) == 0
    return out


def test_compare_across_environments_states_ratios_recomputed_from_the_samples(releases, capsys):
    raw = by_key(cell_records(releases))
    capsys.readouterr()
    assert main(["compare", str(releases), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert sorted(r["cell"]["operator"] for r in rows) == ["grad", "value"]
    for row in rows:
        op = row["cell"]["operator"]
        old, new = (raw[key("exp_dot_loss", "n10", op, "autograd", "eager", "float64", env)] for env in ("old", "new"))
        assert (row["baseline_environment"], row["candidate_environment"]) == ("old", "new")
        assert row["ratio"] == pytest.approx(median(new) / median(old), rel=1e-12)
        assert row["low"] <= row["ratio"] <= row["high"]


def test_the_report_keeps_each_environments_j_over_o_apart(releases, tmp_path):
    """J/O divides by the value time of the same environment, never the other release's."""
    assert main(["report", str(releases), "-o", str(tmp_path / "report")]) == 0
    raw = by_key(cell_records(releases))
    rows = {(r["operator"], r["environment"]): r for r in csv.DictReader((tmp_path / "report" / "results.csv").open())}
    for env in ("old", "new"):
        grad, value = (raw[key("exp_dot_loss", "n10", op, "autograd", "eager", "float64", env)]
                       for op in ("grad", "value"))
        assert_shown(rows[("grad", env)]["j_over_o"], median(grad) / median(value))

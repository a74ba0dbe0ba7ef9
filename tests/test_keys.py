"""Keys as data, variant meaning as the adapter declares it, one compile-cost rule (issue 23, items 1–4).

The committed full baseline is the producer's real output: the compile-cost figures on it are recomputed here from
the raw JSON records, with the rule written out again, not through Measurement or compile_cost.
"""
from __future__ import annotations

import gzip
import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from adcompare.analysis import compile_cost, relative_cost
from adcompare.analysis.bootstrap import Bootstrap
from adcompare.analysis.findings import claims, evaluate, timed_index
from adcompare.analysis.summary import summarize
from adcompare.cli.tables import check_record
from adcompare.model.cell import CURRENT, Cell, worker_group
from adcompare.model.measurement import BUILTIN_COMPILES, Check, Measurement, Timing, declared_compiles
from adcompare.model.status import Status
from adcompare.model.support import Support
from adcompare.plugin.adapter import Adapter
from adcompare.report.figures import style
from adcompare.report.svgchart import Palette
from adcompare.store.provenance import Provenance
from adcompare.store.results import Results, load
from adcompare.study.budget import choose
from adcompare.study.estimate import Estimate, History
from adcompare.verify.check import cross_check

ROOT = Path(__file__).resolve().parent.parent
FULL = ROOT / "benchmarks" / "results" / "full" / "full.jsonl.gz"


def cell(variant="eager", *, operator="grad", adapter="torch", size="n10", environment=CURRENT) -> Cell:
    return Cell("p", size, operator, adapter, variant, "cpu", "float32", environment)


def timed(c: Cell, median: float, first: float, *, compile: float | None = None, method: str = "",
          machine: str = "m1", compiles: str | None = None) -> Measurement:
    return Measurement(c, Status.OK, support="native", machine=machine, compiles=compiles,
                       timing=Timing((median,) * 7, 1, first, compile, method))


# --- keys -------------------------------------------------------------------------------------------------------

def test_keys_name_every_field_that_separates_cells():
    c = cell("compiled", environment="old")
    assert c.family == ("p", "grad", "torch", "compiled", "cpu", "float32", "old")
    assert c.family == cell("compiled", size="n100", environment="old").family
    assert c.family != cell("compiled").family  # another environment is another series
    assert c.worker_group == ("torch", "float32", "cpu", "old") == worker_group("torch", "float32", "cpu", "old")
    assert cell().worker_group == ("torch", "float32", "cpu")  # as results and --dry-run wrote it before --env
    assert c.comparable == cell("eager", adapter="jax").comparable  # the same derivative, whoever computes it
    assert c.twin(variant="eager") == cell("eager", environment="old")
    assert c.twin(operator="value").environment == "old"
    with pytest.raises(TypeError, match="no field machine"):
        c.twin(machine="x")


def test_measurement_twins_stay_on_their_machine():
    m = timed(cell("compiled"), 1.0, 1.0, machine="gpu-box")
    assert m.twin_key(variant="eager") == ("gpu-box", cell("eager").key)
    assert m.family == ("gpu-box", *cell("compiled").family)


def test_budget_rounds_are_per_environment():
    """A budget gives each environment's family its smallest size before either's larger sizes (the family used
    to leave the environment out, so the second environment's smallest size came after the first's largest)."""
    cells = [cell(size=s, environment=e) for e in ("old", "new") for s in ("n10", "n100", "n1000")]
    est = Estimate({c.key: 1.0 for c in cells}, {c.worker_group: 0.0 for c in cells})
    chosen, _ = choose(cells, est, 2.0)
    assert {(c.environment, c.size) for c in chosen} == {("old", "n10"), ("new", "n10")}


def test_history_keys_start_ups_by_worker_group_with_environment():
    header = Provenance.from_json({"host": "h", "cpu": "c"})
    results = Results(provenance=(header,), measurements=(), workers=(
        {"adapter": "jax", "dtype": "float32", "device": "cpu", "startup_seconds": 2.5},
        {"adapter": "jax", "dtype": "float32", "device": "cpu", "startup_seconds": 9.0, "environment": "old"}))
    assert History.from_results(results, header.machine.id).startups == {("jax", "float32", "cpu"): 2.5,
                                                           ("jax", "float32", "cpu", "old"): 9.0}


def test_adjoint_pairs_need_the_same_machine():
    def checked(operator, projection, machine):
        return Measurement(cell("eager", operator=operator), Status.OK, machine=machine,
                           check=Check(error=0.0, tolerance=1e-4, reference_method="x", projection=projection))

    out = cross_check([checked("jvp", 1.0, "a"), checked("vjp", 1.0, "a"), checked("vjp", 2.0, "b")])
    assert out[0].check.adjoint_error == 0.0 and out[2].check.adjoint_error is None


# --- variant meaning ----------------------------------------------------------------------------------------------

def test_builtin_declarations_are_the_upgrade_table(registry):
    """Old files read with the built-in adapters' declarations: the table must say what the adapters say."""
    for name, compiles in BUILTIN_COMPILES.items():
        assert dict(registry.adapters[name].compiles) == compiles, name
    torch = registry.adapters["torch"]
    assert torch.compiled_from("compiled") == "eager" and torch.compiled_from("eager-autograd") == ""
    assert registry.adapters["tensorflow"].compiled_from("graph") == "eager"


def test_third_party_adapters_get_the_standard_meaning():
    class Minimal(Adapter):
        name = "minimal"
        variants = {"eager": "e", "jit": "j"}

        def namespace(self):
            raise NotImplementedError

        def to_numpy(self, out):
            raise NotImplementedError

    assert Minimal().compiled_from("compiled") == "eager" and Minimal().compiled_from("jit") == ""


def test_the_meaning_is_recorded_and_old_records_are_upgraded():
    m = timed(cell("graph", adapter="tensorflow"), 1.0, 1.0, compiles="eager")
    data = m.to_json()
    assert data["compiles"] == "eager" and data["support"] == "native"
    assert Measurement.from_json(data) == m and Measurement.from_json(data).support is Support.NATIVE
    del data["compiles"]  # a file written before the field: the built-in declaration
    assert Measurement.from_json(data).compiles == "eager"
    assert declared_compiles(cell("eager-autograd")) == ""
    assert declared_compiles(cell("jit", adapter="someone")) == "eager"  # unknown adapter: the old name rule
    assert declared_compiles(cell("eager-fast", adapter="someone")) == ""
    # A recorded declaration wins over the names: a third party's "jit" that it declared eager stays eager.
    declared = Measurement.from_json({**data, "cell": cell("jit", adapter="someone").to_json(), "compiles": ""})
    assert declared.compiles == ""
    assert Measurement(cell(), Status.CRASHED, support="").support is None


# --- compile cost -------------------------------------------------------------------------------------------------

AOT = "ahead of time: jit.lower().compile()"


def test_break_even_charges_the_compile_wherever_it_was_paid():
    """The same costs, paid ahead of time or inside the first call, give the same break-even."""
    eager = timed(cell("eager"), 3e-3, 0.01)
    lazy = timed(cell("compiled"), 1e-3, 1.0 + 1e-3, compile=1.0, method="first call minus steady state")
    ahead = timed(cell("compiled"), 1e-3, 1e-3, compile=1.0, method=AOT)
    # N calls: 1.0 + N·1e-3 compiled, 0.01 + (N−1)·3e-3 eager → N − 1 ≥ 0.991 ÷ 0.002 = 495.5 → N = 497
    assert compile_cost.CompileCost(lazy, eager).break_even == 497
    assert compile_cost.CompileCost(ahead, eager).break_even == 497
    slower = timed(cell("compiled"), 4e-3, 1e-3, compile=1.0, method=AOT)
    assert compile_cost.CompileCost(slower, eager).break_even == math.inf
    assert compile_cost.CompileCost(timed(cell("compiled"), 1e-3, 1e-3), eager).break_even == 1  # nothing up front


def test_the_eager_twin_is_the_declared_variant_on_the_same_machine_and_environment():
    ms = [timed(cell("eager"), 3e-3, 0.01), timed(cell("eager-autograd"), 9e-3, 0.01),
          timed(cell("compiled"), 1e-3, 1.0), timed(cell("compiled", environment="new"), 1e-3, 1.0),
          timed(cell("eager"), 1e-3, 0.01, machine="m2")]
    pairs = {(k.compiled.cell.environment, k.eager.cell.variant if k.eager else None) for k in compile_cost.costs(ms)}
    assert pairs == {(CURRENT, "eager"), ("new", None)}


def test_j_over_o_pairs_within_the_environment():
    ms = [timed(cell(operator="value"), 1.0, 1.0), timed(cell(operator="value", environment="new"), 2.0, 1.0),
          timed(cell(), 4.0, 1.0), timed(cell(environment="new"), 4.0, 1.0)]
    ratios = relative_cost.ratios(ms)
    assert ratios[ms[2].merge_key] == 4.0 and ratios[ms[3].merge_key] == 2.0


def _raw_records() -> dict[tuple[str, str], dict]:
    with gzip.open(FULL, "rt") as f:
        records = [json.loads(line) for line in f]
    return {(r["machine"], r["key"]): r for r in records if r.get("record") == "cell"}


def test_committed_baseline_compile_cost_recomputed_from_raw_records():
    raw = _raw_records()
    items = compile_cost.costs(load([FULL]).measurements)
    torch_items = [k for k in items if k.compiled.cell.adapter == "torch"]
    assert len(torch_items) == 86  # as committed; then 60 of them were paired with eager-autograd
    assert all(k.eager is not None and k.eager.cell.variant == "eager" for k in torch_items)
    assert {k.eager.cell.variant for k in items if k.eager} == {"eager"}  # graph too: TensorFlow's twin is eager

    def median(r):
        return statistics.median(r["timing"]["samples"])

    def recomputed(k):
        c = raw[(k.compiled.machine, k.compiled.cell.key)]
        c_cell = c["cell"]
        e = raw.get((c["machine"], "/".join([*(c_cell[f] for f in ("problem", "size", "operator", "adapter")),
                                              "eager", c_cell["device"], c_cell["dtype"]])))
        tc, te = c["timing"], e["timing"]
        ahead = tc["compile"] if tc["compile_method"].startswith("ahead of time") else 0.0
        gap = tc["first_call"] + ahead - te["first_call"]
        saving = median(e) - median(c)
        calls = 1 if gap <= 0 else math.inf if saving <= 0 else 1 + math.ceil(gap / saving)
        return median(e) / median(c), calls

    chosen = [k for k in items if k.eager and (k.compiled.cell.adapter == "torch" or k.compiled.cell.problem
                                               in ("bundle_adjustment", "exp_dot_loss"))]
    assert len(chosen) > 100
    for k in chosen:
        speedup, calls = recomputed(k)
        assert k.speedup == pytest.approx(speedup, rel=1e-12), k.compiled.cell.id
        assert k.break_even == calls, k.compiled.cell.id

    # The example, by hand: BA value, torch compiled at n3-m10-p30 pays its compile in the first call.
    ba = next(k for k in torch_items if k.compiled.cell.key == "bundle_adjustment/n3-m10-p30/value/torch/compiled/"
                                                                 "cpu/float32")
    assert ba.eager.cell.variant == "eager" and ba.break_even == 14_982
    # JAX pays its compile ahead of time and is charged it now; at BA's largest value size its eager first call
    # (JAX compiles each primitive on first eager use: 0.98 s) still costs more than jit's 0.20 s + first call.
    jax = next(k for k in items if k.compiled.cell.key == "bundle_adjustment/n10-m200-p3000/value/jax/compiled/"
                                                          "cpu/float32")
    assert jax.compiled.timing.up_front > 0.2 and jax.break_even == 1
    assert jax.eager.timing.first_call > jax.compiled.timing.up_front


def test_an_ahead_of_time_compile_changes_break_even_on_the_baseline():
    """Before, JAX's and TensorFlow's compile (paid in prepare) never entered the break-even: on the committed
    baseline charging it changes the figure for most TensorFlow cells and many JAX cells."""
    items = [k for k in compile_cost.costs(load([FULL]).measurements) if k.eager]
    changed = 0
    for k in items:
        without = compile_cost.CompileCost(replace(k.compiled, timing=replace(k.compiled.timing, compile=None)),
                                           k.eager).break_even
        assert without <= k.break_even
        changed += without != k.break_even
    assert changed > 400


def test_two_environments_on_one_machine_are_ranked_and_claimed_apart():
    """Two `--env` environments whose fingerprints coincide (same machine id) and that ran the same cells: the
    summary grouped rankings and the findings indexed cells without the environment, so one environment's jax
    was ranked against the other's (summary) or overwritten by it (findings). Now each is ranked and claimed on
    its own, with figures equal to the ratio of its own medians."""
    def cell(op: str, adapter: str, env: str, scale: float) -> Measurement:
        samples = tuple(scale * (1 + 0.01 * i) for i in range(7))
        return Measurement(Cell("exp_dot_loss", "n100", op, adapter, "eager", "cpu", "float32", env), Status.OK,
                           timing=Timing(samples, 1, scale), machine="m1")

    # jacfwd/jacrev: 3× in `current`, 5× in `old`; torch twice as slow as jax in each environment
    ms = [cell(op, adapter, env, base * (3 if op == "jacfwd" and env == CURRENT else 5 if op == "jacfwd" else 1)
               * (2 if adapter == "torch" else 1))
          for op in ("jacrev", "jacfwd") for adapter in ("jax", "torch")
          for env, base in ((CURRENT, 1e-5), ("old", 1e-3))]
    verdicts = [v for s in summarize(ms, Bootstrap()) for v in s.every_size]
    assert len(verdicts) == 4  # 2 operators × 2 environments, not 2 groups of four rivals
    for v in verdicts:
        assert {v.fastest.cell.environment} | {r.measurement.cell.environment for r in v.rivals} == {v.environment}
        assert v.fastest.cell.adapter == "jax" and [r.ratio.ratio for r in v.rivals] == [pytest.approx(2.0)]
    finding = evaluate(timed_index(ms), claims()[0], Bootstrap())  # exp_dot_loss: jacrev beats jacfwd
    ratios = {c.context: c.ratio for c in finding.comparisons}
    assert ratios == {"jax · eager": pytest.approx(3.0), "torch · eager": pytest.approx(3.0),
                      "jax · eager · old": pytest.approx(5.0), "torch · eager · old": pytest.approx(5.0)}


def test_figure_lines_read_compiled_from_the_record_and_json_support_stays_a_string():
    """TensorFlow's `graph` is compiled (its adapter says so): drawn as compiled code, not with an eager dash; and
    a check record with no known support prints "" in JSON, not null."""
    def m(adapter: str, variant: str, **kw) -> Measurement:
        return Measurement(Cell("tanh", "n10", "grad", adapter, variant, "cpu", "float32"), Status.OK, **kw)

    dashes = {v: style(Palette(), m("tensorflow", v)).dash for v in ("eager", "graph", "compiled")}
    assert m("tensorflow", "graph").compiled and dashes == {"eager": "5 3", "graph": "10 1.5", "compiled": ""}
    assert style(Palette(), m("torch", "eager-autograd")).dash == "8 3 2 3"
    assert check_record(m("jax", "eager"))["support"] == ""
    assert check_record(m("jax", "eager", support="emulated"))["support"] == "emulated"
    assert json.loads(json.dumps(check_record(m("jax", "eager", support=Support.NATIVE))))["support"] == "native"

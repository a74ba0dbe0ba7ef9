"""`--inputs` and `--seed`: upstream files and seeds become sizes with their own labels; refusals are one line,
exit 2; `check --json` reports the float64 objective; the published generators' recipes; the `adbench` suite."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.problem import Size, read_input_file
from adcompare.plugin import registry as plugins
from adcompare.problems import gmm as gmm_module
from adcompare.problems import lstm as lstm_module
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.suites import ADBENCH, allows
from adcompare.verify.input_sources import with_inputs
from adcompare.verify.reference import reference_value

from .conftest import FIXTURES

GMM_FILE = FIXTURES / "adbench" / "gmm" / "test.txt"
BA1_FILE = FIXTURES / "adbench" / "ba" / "ba1_n49_m7776_p31843.txt"
GMM_OBJECTIVE = 8.07380408004975791  # ADBench's test/python/modules/common/gmm_tests.py


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# --- CLI ---------------------------------------------------------------------------------------------------------

def test_check_json_reports_the_reference_value_of_file_fed_cells(capsys):
    argv = ["check", "--problem", "gmm", "--inputs", str(GMM_FILE), "--adapter", "autograd", "--variant", "eager",
            "--operator", "value,grad", "--json", "--no-progress"]
    assert main(argv) == 0
    records = _json_lines(capsys.readouterr().out)
    assert {r["operator"] for r in records} == {"value", "grad"}
    for r in records:
        assert r["status"] == "ok" and r["dtype"] == "float64"  # file-fed cells default to float64
        assert r["size"].startswith("d2-K3-n1-test-")
        assert r["reference_value"] == pytest.approx(GMM_OBJECTIVE, abs=1e-12)


def test_reference_value_is_none_for_non_scalar_outputs():
    registry = plugins.load()
    ba = registry.problem("bundle_adjustment")
    assert reference_value(ba, ba.smallest_size) is None


def test_run_records_the_file_and_its_sha256_and_keeps_keys_apart(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    base = ["run", "--problem", "gmm", "--adapter", "autograd", "--variant", "eager", "--operator", "grad",
            "--dtype", "float64", "--no-progress", "-o", str(out)]
    assert main(base + ["--size", "d2-K5-n1000"]) == 0
    assert main(base + ["--inputs", str(GMM_FILE), "--resume"]) == 0  # not skipped as "finished": another key
    capsys.readouterr()
    cells = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    cells = [c for c in cells if c.get("record", "cell") == "cell" and "cell" in c]
    assert [c["cell"]["size"].split("-test-")[0] for c in cells] == ["d2-K5-n1000", "d2-K3-n1"]
    generated, fed = cells
    assert generated["details"]["inputs_seed"] == 0 and "inputs_file" not in generated["details"]
    assert fed["details"]["inputs_file"] == str(GMM_FILE.resolve())
    sha = fed["details"]["inputs_sha256"]
    assert len(sha) == 64 and fed["cell"]["size"].endswith("-" + sha[:12])


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.txt", "no such file"),
    (lambda d: d, "no such file"),  # a folder
    (lambda d: _write(d / "notes.txt", "hello world\n"), "no problem reads this file"),
])
def test_unreadable_or_mismatched_files_are_refused_in_one_line(tmp_path, capsys, make, message):
    path = make(tmp_path)
    assert main(["check", "--inputs", str(path), "--adapter", "autograd", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3  # one message (rich may wrap it)


def test_a_file_of_another_problem_is_refused(capsys):
    assert main(["run", "--problem", "lstm", "--inputs", str(GMM_FILE), "--dry-run"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "not an input of lstm" in err and "gmm" in err


def _write(path, text):
    path.write_text(text)
    return path


def test_a_file_changed_after_planning_is_refused(tmp_path):
    path = tmp_path / "gmm.txt"
    shutil.copy(GMM_FILE, path)
    registry = with_inputs(plugins.load(), [str(path)])
    (size,) = registry.problem("gmm").sizes
    path.write_text(path.read_text().replace("-0.649014", "-0.649015"))
    with pytest.raises(ValueError, match="changed since it was planned"):
        read_input_file(registry.problem("gmm"), size.source, size.sha256)


def test_seed_relabels_generated_sizes_and_keeps_the_suites(capsys):
    registry = with_inputs(plugins.load(), seed=7)
    gmm = registry.problem("gmm")
    assert all(s.label.endswith("-seed7") for s in gmm.sizes)
    size = gmm.size("d2-K5-n1000-seed7")
    base = plugins.load().problem("gmm")
    assert not np.array_equal(gmm.inputs(size, "float64")["params"],
                              base.inputs(base.size("d2-K5-n1000"), "float64")["params"])
    assert size.provenance() == {"inputs_seed": 7}
    plan = make_plan(registry, Selection(problems=("gmm",), adapters=("autograd",)))
    assert {c.size for c in plan.cells} == {"d2-K5-n1000-seed7"}  # the quick suite's gmm cell, seeded
    assert main(["run", "--problem", "gmm", "--seed", "7", "--adapter", "autograd", "--dry-run"]) == 0
    assert "2 cells: 1 to run" in capsys.readouterr().out  # autograd: eager runs, compiled is unsupported


# --- readers and recipes -----------------------------------------------------------------------------------------

def test_gradbench_gmm_json_and_generator_give_gradbench_inputs(tmp_path):
    """GradBench's evals/gmm/run.py `generate` draws x, alpha, mu, q, l row by row from default_rng(seed); the
    same draws, written as its JSON input, read back as gmm_posterior's generated inputs at seed 31337."""
    d, k, n, seed = 2, 5, 1000, 31337
    rng = np.random.default_rng(seed)
    data = {"d": d, "k": k, "n": n, "x": [list(rng.normal(size=d)) for _ in range(n)], "m": 0, "gamma": 1.0,
            "alpha": list(rng.normal(size=k)), "mu": [list(rng.uniform(size=d)) for _ in range(k)],
            "q": [list(rng.normal(size=d)) for _ in range(k)],
            "l": [list(rng.normal(size=d * (d - 1) // 2)) for _ in range(k)]}
    path = tmp_path / "gmm_input.json"
    path.write_text(json.dumps(data))
    registry = with_inputs(plugins.load(), [str(path)])
    problem = registry.problem("gmm_posterior")
    (fed,) = problem.sizes
    assert fed.dims == (("d", 2), ("K", 5), ("n", 1000))
    generated = plugins.load().problem("gmm_posterior")
    ours = generated.inputs(Size((("d", 2), ("K", 5), ("n", 1000)), seed=seed), "float64")
    theirs = problem.inputs(fed, "float64")
    for name in ("params", "x"):
        np.testing.assert_array_equal(ours[name], theirs[name])


def naive_log_posterior(alphas, means, icf, x, gamma=1.0, m=0):
    """GradBench's definition (evals/gmm/README.md), densities multiplied out, logarithm last."""
    K, d = means.shape
    phi = np.exp(alphas) / np.exp(alphas).sum()
    precisions = []
    for k in range(K):
        Q = np.diag(np.exp(icf[k, :d]))
        rest = iter(icf[k, d:])  # the strictly lower part, column by column
        for j in range(d):
            for i in range(j + 1, d):
                Q[i, j] = next(rest)
        precisions.append(Q.T @ Q)
    likelihood = 1.0
    for xi in x:
        likelihood *= sum(phi[k] * math.exp(-0.5 * (xi - means[k]) @ precisions[k] @ (xi - means[k]))
                          / math.sqrt((2 * math.pi) ** d / np.linalg.det(precisions[k])) for k in range(K))
    n_dof = d + m + 1
    log_gamma_d = 0.25 * d * (d - 1) * math.log(math.pi) + sum(math.lgamma(n_dof / 2 + (1 - j) / 2)
                                                                for j in range(1, d + 1))
    prior = 1.0
    for P in precisions:  # Wishart(V = I/γ², n′) density of the precision matrix
        prior *= (np.linalg.det(P) ** ((n_dof - d - 1) / 2) * math.exp(-0.5 * gamma**2 * np.trace(P))
                  / (2 ** (n_dof * d / 2) * gamma ** (-n_dof * d) * math.exp(log_gamma_d)))
    return math.log(likelihood * prior)


def test_gmm_posterior_is_gradbenchs_log_posterior_and_gmm_adbenchs_objective():
    registry = with_inputs(plugins.load(), [str(GMM_FILE)])
    (size,) = registry.problem("gmm").sizes
    inputs = registry.problem("gmm").inputs(size, "float64")
    params, x = inputs["params"], inputs["x"]
    d = x.shape[1]
    expected = naive_log_posterior(params[:, 0], params[:, 1:1 + d], params[:, 1 + d:], x)
    assert gmm_module.gmm_posterior(params, x=x, xp=np) == pytest.approx(expected, rel=1e-10)
    assert gmm_module.gmm(params, x=x, xp=np) == pytest.approx(GMM_OBJECTIVE, abs=1e-12)
    wishart = gmm_module.adbench_wishart_term(params, d, np)
    assert gmm_module.gmm(params, x=x, xp=np) - gmm_module.gmm_posterior(params, x=x, xp=np) == \
        pytest.approx(2 * wishart, rel=1e-12)


def test_lstm_generator_follows_adbench_recipe_and_matches_its_file_text():
    """ADBench's text is the sonnets as 14-digit binary code points (not one-hot); parameters and state U[0, 1)."""
    registry = with_inputs(plugins.load(), [str(FIXTURES / "adbench" / "lstm" / "lstm_l2_c1024.txt")])
    (fed,) = registry.problem("lstm").sizes
    from_file = registry.problem("lstm").inputs(fed, "float64")
    generated_problem = plugins.load().problem("lstm")
    generated = generated_problem.inputs(generated_problem.size("l2-c1024-b14"), "float64")
    np.testing.assert_array_equal(generated["sequence"], from_file["sequence"])
    assert set(np.unique(generated["sequence"])) == {0.0, 1.0} and generated["sequence"].sum(axis=1).max() > 1
    for name in ("params", "state"):
        assert generated[name].min() >= 0.0 and generated[name].max() < 1.0
    assert lstm_module.encode("’", 14).tolist() == [[1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1]]  # 8217 = U+2019


def test_lstm_reads_gradbench_json(tmp_path):
    registry = with_inputs(plugins.load(), [str(FIXTURES / "adbench" / "lstm" / "lstm_l2_c1024.txt")])
    (fed,) = registry.problem("lstm").sizes
    inputs = registry.problem("lstm").inputs(fed, "float64")
    main_params = inputs["params"][:16].reshape(4, 56)
    path = tmp_path / "lstm.json"
    path.write_text(json.dumps({"main_params": main_params.tolist(), "extra_params": inputs["params"][16:].tolist(),
                                "state": inputs["state"].tolist(), "sequence": inputs["sequence"].tolist()}))
    as_json = with_inputs(plugins.load(), [str(path)]).problem("lstm")
    (size,) = as_json.sizes
    assert size.dims_label == "l2-c1024-b14"
    assert reference_value(as_json, size) == pytest.approx(0.66666518, abs=1e-8)


def test_ba_generator_is_adbenchs_file_replicated():
    registry = with_inputs(plugins.load(), [str(BA1_FILE)])
    (fed,) = registry.problem("bundle_adjustment").sizes
    generated_problem = plugins.load().problem("bundle_adjustment")
    generated = generated_problem.inputs(generated_problem.size(fed.dims_label), "float64")
    np.testing.assert_array_equal(generated["observations"],
                                  registry.problem("bundle_adjustment").inputs(fed, "float64")["observations"])


# --- the adbench suite -------------------------------------------------------------------------------------------

def test_adbench_suite_keeps_to_published_sizes_operators_and_float64(capsys):
    registry = plugins.load()
    by_problem = {e.problem: e for e in ADBENCH}
    assert set(by_problem) == {"gmm", "gmm_posterior", "bundle_adjustment", "lstm", "ht"}
    assert len(by_problem["gmm"].sizes) == 60 and len(by_problem["bundle_adjustment"].sizes) == 20
    assert len(by_problem["ht"].sizes) == 24  # 2 variants × 2 models × the shipped hand1–hand6
    for entry in ADBENCH:
        sizes = {s.label: s for s in registry.problem(entry.problem).sizes}
        assert set(entry.sizes) <= set(sizes), entry.problem
        for label, size in sizes.items():
            for op in ("value", "grad", "vmap_jacrev", "hvp"):
                cell = Cell(entry.problem, label, op, "torch", "compiled", "cpu", "float64")
                expected = label in entry.sizes and op in entry.operators
                assert allows("adbench", cell, size, smallest_size="", slow=True, builtin=True) == expected
    other = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float64")
    assert not allows("adbench", other, Size((("n", 10),)), smallest_size="n10", slow=False, builtin=False)
    plan = make_plan(registry, Selection(suite="adbench", problems=("lstm",), adapters=("autograd",)))
    assert {c.dtype for c in plan.cells} == {"float64"}
    assert sorted({c.size for c in plan.cells}) == sorted(by_problem["lstm"].sizes)
    assert {c.operator for c in plan.cells} == {"value", "grad"}
    assert main(["run", "--suite", "adbench", "--problem", "lstm", "--adapter", "autograd", "--dry-run"]) == 0
    assert "16 cells: 8 to run, 8 decided" in capsys.readouterr().out  # 4 sizes × (value, grad) × 2 variants


def test_adbench_suite_runs_file_fed_sizes():
    registry = with_inputs(plugins.load(), [str(GMM_FILE)])
    plan = make_plan(registry, Selection(suite="adbench", problems=("gmm",), adapters=("autograd",)))
    assert {(c.size.split("-test-")[0], c.operator) for c in plan.cells} == {("d2-K3-n1", "value"),
                                                                             ("d2-K3-n1", "grad")}

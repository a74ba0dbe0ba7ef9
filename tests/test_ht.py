"""GradBench's ht (hand tracking, issue 25) against GradBench's own numbers, and its files as `--inputs`.

tests/fixtures/gradbench/ht.json was written by make_goldens.py from GradBench's code at commit f26651a7: its
generator (evals/ht/run.py reading evals/ht/data) and its golden tool (tools/manual/ht.cpp), at hand1 of every
variant and model and hand2 of complicated/big. Held here, at GradBench's measure |x − y| / max(1, |x| + |y|):
- the shipped files give GradBench's θ (and us count, points) bit for bit, and NumPy's objective equals the
  manual tool's (1e-12);
- every built-in adapter and variant, float64, in its own worker (tests/test_goldens.py's), reproduces the objective
  and GradBench's `jacobian` from its dense jacfwd and jacrev (1e-10). For complicated, GradBench's Jacobian is
  compressed: per point the 3 × 2 block of its own us, then the 26 θ columns; the test takes those entries of the
  dense (3c) × (2c + 26) matrix and holds every other us entry to zero. torch.compile (slow) runs under `-m slow`;
  its jacrev is left out there: torch 2.13 miscompiles it
  (docs/framework-bugs/torch_compile_jacrev_index_select.md). The big model's Jacobians also run under `-m slow`:
  the small model's take the same code path (the model is data: vertices, weights and bones read from its folder,
  not code), and the big model's objective, which reads all of that data, is checked in the normal run through
  every adapter and variant.
GradBench's files through `--inputs`: its hand files beside model/, and the JSON input its eval sends a tool (hand1,
written by GradBench's generator: fixtures/gradbench/make_ht_inputs.py), held to the text file's arrays and the
registered size's bit for bit, so that the goldens above are its values: no framework runs it a second time.
"""
from __future__ import annotations

import json
import lzma
import shutil

import numpy as np
import pytest

from adcompare.cli.main import main
from adcompare.model.errors import UnknownNameError
from adcompare.plugin import registry as plugins
from adcompare.problems import ht_files
from adcompare.verify.input_sources import file_size, with_inputs

from .conftest import FIXTURES
from .per_adapter import one_class_per_adapter, skip_unless_installed
from .test_gradbench import in_worker, scaled_error

TIGHT_VALUE = 1e-12
TIGHT_JACOBIAN = 1e-10  # derivatives by another algorithm than the manual tool's: rounding differs more
KNOWN_BUGS = {("torch", "jacrev", "compiled")}  # docs/framework-bugs/torch_compile_jacrev_index_select.md
# The big model (10,000 vertices) makes every Jacobian slower, not different: TensorFlow's jacfwd re-traces pfor
# at each call (15–38 s a case here); the small model's cases cover each (adapter, variant, operator) path.
SLOW_MODELS = {"big"}


def goldens() -> dict:
    return json.loads((FIXTURES / "gradbench" / "ht.json").read_text())


def size_label(case: dict) -> str:
    c, corners = ht_files.HAND_POINTS[case["hand"]], ht_files.CORNERS[case["variant"]]
    return f"hand{case['hand']}-c{c}-corners{corners}-v{ht_files.MODEL_VERTICES[case['model']]}"


def compressed(dense: np.ndarray, c: int, complicated: bool) -> np.ndarray:
    """GradBench's `jacobian` from the dense one: for complicated, each row's own 2 us columns, then θ's 26;
    asserts that the other us entries are zero (each point's residual depends on its own us alone)."""
    if not complicated:
        return dense
    us = dense[:, :2 * c].reshape(c, 3, c, 2)
    own = us[np.arange(c), :, np.arange(c), :]  # (c, 3, 2)
    others = us.copy()
    others[np.arange(c), :, np.arange(c), :] = 0
    assert not np.any(others), "a residual depends on another point's us"
    return np.concatenate([own.reshape(3 * c, 2), dense[:, 2 * c:]], axis=1)


def test_goldens_name_gradbenchs_commit_and_cover_both_variants():
    record = goldens()
    assert record["gradbench_commit"] == "f26651a7bcc120654fa895adecaf371b8cc059c5"
    assert "tools/manual/ht.cpp" in record["files"]
    sizes = {(c["variant"], size_label(c)) for c in record["cases"]}
    for variant in ("simple", "complicated"):
        assert len([s for v, s in sizes if v == variant]) >= 2


@pytest.mark.parametrize("index", range(5))
def test_shipped_inputs_and_numpy_objective_are_gradbenchs(index):
    case = goldens()["cases"][index]
    problem = plugins.load().problem("ht")
    size = problem.size(size_label(case))
    inputs = problem.inputs(size, "float64")
    c, complicated = case["input"]["points"], case["variant"] == "complicated"
    assert case["input"]["us_count"] == (c if complicated else 0)
    params = inputs.pop("params")
    assert params.shape == ((2 * c if complicated else 0) + 26,)
    assert params[-26:].tolist() == case["input"]["theta"]  # bit for bit: both parse the same text
    value = problem.function(params, **inputs, xp=np)
    assert scaled_error(value, case["objective"]["manual"]) <= TIGHT_VALUE
    assert np.asarray(case["jacobian"]["manual"]).shape == (3 * c, 28 if complicated else 26)


def is_slow(adapter, case: dict, operator: str, variant: str) -> bool:
    """The adapter's slow variants (torch.compile), and the big model's Jacobians (`SLOW_MODELS`)."""
    return variant in adapter.slow_variants or (operator != "value" and case["model"] in SLOW_MODELS)


def adapter_cases(adapter_name: str, slow: bool) -> list[tuple[str, str, str, str]]:
    adapter = plugins.load().adapter(adapter_name)
    return [("ht", size_label(case), operator, variant) for case in goldens()["cases"]
            for operator in ("value", "jacfwd", "jacrev") for variant in adapter.variants
            if is_slow(adapter, case, operator, variant) == slow
            and (adapter_name, operator, variant) not in KNOWN_BUGS]


def assert_goldens(results: dict[str, object]) -> None:
    assert results, "no case ran"
    by_label = {size_label(c): c for c in goldens()["cases"]}
    for key, result in results.items():
        _, label, operator, variant = key.split("/")
        if isinstance(result, dict) and "unsupported" in result:
            continue  # declared by the adapter (torch's eager-autograd has no `value` of its own)
        assert not isinstance(result, dict), f"{key}: {result}"
        case = by_label[label]
        if operator == "value":
            assert scaled_error(result, case["objective"]["manual"]) <= TIGHT_VALUE, key
        else:
            c = case["input"]["points"]
            got = compressed(np.asarray(result), c, case["variant"] == "complicated")
            assert scaled_error(got, case["jacobian"]["manual"]) <= TIGHT_JACOBIAN, key


class AdapterHtGoldens:
    """The slow cases through one adapter's worker (the normal run's are tests/test_goldens.py's; one class per
    adapter: `--dist loadscope`)."""

    adapter_name = ""

    @pytest.mark.slow
    def test_every_adapter_reproduces_gradbench_ht_goldens_slow_cases(self):
        """torch.compile (7–16 s a cold compile, per operator and size) and the big model's Jacobians."""
        skip_unless_installed(self.adapter_name)
        cases = adapter_cases(self.adapter_name, slow=True)
        if not cases:
            pytest.skip(f"adapter {self.adapter_name!r} has no slow case")
        assert_goldens(in_worker(self.adapter_name, cases))


globals().update(one_class_per_adapter(AdapterHtGoldens))


# --------------------------------------------------------------------------------------------------------------
# GradBench's files through --inputs: a hand file beside its model/ folder, as in GradBench's evals/ht/data


def _gradbench_folder(tmp_path, variant: str, model: str, hand: int):
    """A GradBench-style folder (<variant>_<model>/hand<i>_….txt beside model/) from the shipped copies."""
    folder = tmp_path / f"{variant}_{model}"
    (folder / "model").mkdir(parents=True)
    for source in ht_files.model_folder(model).iterdir():
        (folder / "model" / source.name.removesuffix(".xz")).write_bytes(lzma.decompress(source.read_bytes()))
    shipped = ht_files.shipped_hand(variant, model, hand)
    target = folder / shipped.name
    target.write_bytes(lzma.decompress(shipped.with_name(shipped.name + ".xz").read_bytes()))
    return target


@pytest.mark.parametrize("variant, model", [("simple", "small"), ("complicated", "big")])
def test_a_gradbench_hand_file_is_read_as_its_shipped_size(tmp_path, variant, model):
    path = _gradbench_folder(tmp_path, variant, model, 2)
    problem = plugins.load().problem("ht")
    size = file_size(problem, str(path))  # planning: the header and line counts only
    corners, vertices = ht_files.CORNERS[variant], ht_files.MODEL_VERTICES[model]
    assert size.as_dict() == {"hand": 2, "c": 192, "corners": corners, "v": vertices}
    shipped = problem.inputs(problem.size(size.dims_label), "float64")
    read = problem.inputs(size, "float64")
    assert shipped.keys() == read.keys()
    for name in shipped:
        np.testing.assert_array_equal(read[name], shipped[name], err_msg=name)


def test_no_other_problem_reads_a_hand_file_and_ht_reads_no_other_file(tmp_path):
    path = _gradbench_folder(tmp_path, "simple", "small", 1)
    registry = with_inputs(plugins.load(), [str(path)])
    fed = {name for name, p in registry.problems.items() if any(s.source for s in p.sizes)}
    assert fed == {"ht"}
    other = tmp_path / "gmm.txt"
    other.write_text("2 5 10\n" + "0.1 0.2\n" * 30)
    with pytest.raises(ValueError, match="first line `c 26`"):
        file_size(plugins.load().problem("ht"), str(other))


def test_a_cut_hand_file_or_a_missing_model_is_refused_with_the_reason(tmp_path):
    path = _gradbench_folder(tmp_path, "complicated", "small", 1)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n")
    problem = plugins.load().problem("ht")
    with pytest.raises(ValueError, match="cut or not a hand file"):
        file_size(problem, str(path))
    path.write_text("\n".join(lines) + "\n")
    shutil.rmtree(path.parent / "model")
    with pytest.raises(ValueError, match="model folder"):
        file_size(problem, str(path))


def test_every_declared_size_is_its_shipped_files_header():
    """Sizes come from the files (c from the first line, the variant from the line count, v from the model), not
    from their names: each declared size equals what planning reads from its shipped file."""
    problem = plugins.load().problem("ht")
    assert len(problem.sizes) == 24
    for size in problem.sizes:
        dims = size.as_dict()
        variant = next(v for v, corners in ht_files.CORNERS.items() if corners == dims["corners"])
        model = next(m for m, v in ht_files.MODEL_VERTICES.items() if v == dims["v"])
        path = ht_files.shipped_hand(variant, model, dims["hand"])
        assert _shipped_header(path, model) == dims, size.label


# GradBench's JSON, the input its ht eval sends a tool, of hand1 (small model), written by GradBench's own code:
# tests/fixtures/gradbench/make_ht_inputs.py (its generator evals/ht/run.py, commit f26651a7)
JSON_HANDS = {variant: FIXTURES / "gradbench" / f"ht_{variant}_small_hand1.json.xz" for variant in ht_files.CORNERS}


def _gradbench_json(tmp_path, variant: str):
    path = tmp_path / f"hand1_{variant}_small.json"
    path.write_bytes(lzma.decompress(JSON_HANDS[variant].read_bytes()))
    return path


@pytest.mark.parametrize("variant", ["simple", "complicated"])
def test_gradbench_json_input_is_read_as_its_hand_file(tmp_path, variant):
    """What GradBench's eval sends a tool, given to --inputs: the hand file's size and arrays, bit for bit, and so
    the registered ht size's (hand1, small model) that tests/test_goldens.py holds every adapter to GradBench's
    manual tool on: the JSON's objective and Jacobian are those goldens' inputs, not a second case to run."""
    path = _gradbench_json(tmp_path, variant)
    text = _gradbench_folder(tmp_path, variant, "small", 1)
    registry = with_inputs(plugins.load(), [str(path)])
    assert {name for name, p in registry.problems.items() if any(s.source for s in p.sizes)} == {"ht"}
    problem = registry.problem("ht")
    (size,) = problem.sizes
    assert size.as_dict() == file_size(problem, str(text)).as_dict()
    from_json, from_text = problem.inputs(size, "float64"), problem.inputs(file_size(problem, str(text)), "float64")
    assert from_json.keys() == from_text.keys()
    for name in from_text:
        np.testing.assert_array_equal(from_json[name], from_text[name], err_msg=name)
    registered = plugins.load().problem("ht")
    (own,) = [s for s in registered.sizes if s.as_dict() == size.as_dict()]
    from_registered = registered.inputs(own, "float64")
    assert from_registered.keys() == from_json.keys()
    for name in from_json:
        np.testing.assert_array_equal(from_json[name], from_registered[name], err_msg=name)


def test_a_json_that_is_not_gradbenchs_ht_input_is_refused_with_what_it_needs(tmp_path):
    problem = plugins.load().problem("ht")
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"theta": [0.0] * 26, "us": []}))
    with pytest.raises(ValueError, match="not GradBench's ht input .*correspondences; points"):
        file_size(problem, str(path))
    data = json.loads(lzma.decompress(JSON_HANDS["simple"].read_bytes()))
    data["data"]["model"]["is_mirrored"] = True
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="mirrored"):
        file_size(problem, str(path))


@pytest.mark.parametrize("command", ["check", "run"])
def test_an_unshipped_hand_asked_by_size_is_told_to_come_through_inputs(command, capsys):
    """hand7–hand12 are not declared sizes: the one-line error names the fix, --inputs FILE with its model/."""
    dry = ["--dry-run"] if command == "run" else []  # check stops at planning anyway
    assert main([command, "--problem", "ht", "--size", "hand7-c3200-corners3-v10000", "--adapter", "jax", *dry]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    hint = err.split("; valid:")[0]  # before the list of declared sizes
    assert "hand7–hand12" in hint and "--inputs FILE" in hint and "model/" in hint, err
    assert main([command, "--size", "n99", "--adapter", "jax", *dry]) == 2  # not a hand's label: no ht hint
    assert "--inputs" not in capsys.readouterr().err
    with pytest.raises(UnknownNameError, match="hand7–hand12 .*--inputs FILE"):
        plugins.load().problem("ht").size("hand7-c3200-corners3-v10000")


def _shipped_header(path, model: str) -> dict[str, int]:
    """hand, c, corners and v of a shipped hand file, counted here (its model folder is model_<model>/, not a
    sibling, so read_header is held to the same figures on GradBench's layout above)."""
    with lzma.open(path.with_name(path.name + ".xz"), "rt") as f:
        lines = [line.split() for line in f if line.strip()]
    c = int(lines[0][0])
    corners = 3 if len(lines) == 1 + 2 * c + 26 else 1
    assert len(lines) == 1 + c * (2 if corners == 3 else 1) + 26
    with lzma.open(ht_files.model_folder(model) / "vertices.txt.xz", "rt") as f:
        vertices = sum(1 for line in f if line.strip())
    return {"hand": int(path.name.split("_")[0].removeprefix("hand")), "c": c, "corners": corners, "v": vertices}

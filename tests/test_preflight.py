"""The memory pre-flight: shapes once per (problem, size), the adapter's declared materialised size, and the
conformance check that catches an adapter under-reporting it."""
from __future__ import annotations

import json

import numpy as np

from adcompare import Adapter, Capability, Prepared, Shapes
from adcompare.plugin import registry as plugins
from adcompare.study.preflight import estimate_bytes, too_large
from adcompare.testing import LARGE_SHAPES, materialised_failures

REGISTRY = plugins.load()


class DenseVjp(Adapter):
    """A vjp computed through the dense Jacobian, declared so."""

    name = "dense-vjp"
    distribution = "numpy"
    module = "numpy"
    variants = {"eager": "NumPy"}

    def namespace(self):
        return np

    def capability(self, operator, variant):
        if operator == "vjp":
            return Capability.emulated("uᵀ·J with J dense")
        return Capability.unsupported("vjp only")

    def prepare(self, request):
        return Prepared(lambda: None)

    def to_numpy(self, out):
        return np.asarray(out)

    def materialised_elements(self, operator, variant, shapes):
        return shapes.n_out * shapes.n_in


class UnderReports(DenseVjp):
    def materialised_elements(self, operator, variant, shapes):
        return 1


def test_the_adapters_declared_algorithm_marks_a_cell_too_large():
    tanh = REGISTRY.problem("tanh")
    size = tanh.size("n1000000")  # vjp itself needs 2·10⁶ elements; a dense Jacobian 10¹²
    assert too_large(tanh, size, "vjp", "float32", limit=2**30) is None
    why = too_large(tanh, size, "vjp", "float32", limit=2**30, adapter=DenseVjp())
    assert why is not None and "vjp at n1000000" in why
    assert estimate_bytes(tanh, size, "vjp", "float32", DenseVjp()) == 4 * 4 * 10**12


def test_a_declaration_below_the_operators_own_need_does_not_lower_the_estimate():
    tanh = REGISTRY.problem("tanh")
    size = tanh.size("n100")
    assert estimate_bytes(tanh, size, "vjp", "float64", UnderReports()) == estimate_bytes(tanh, size, "vjp", "float64")


def test_conformance_catches_an_adapter_that_under_reports():
    assert materialised_failures(DenseVjp(), "eager", [LARGE_SHAPES]) == []
    (failure,) = materialised_failures(UnderReports(), "eager", [LARGE_SHAPES])
    assert "vjp" in failure and "below the operator's own need" in failure


def test_the_built_in_adapters_declare_at_least_the_operators_need():
    small = Shapes(wrt=(3,), output=())
    for adapter in REGISTRY.adapters.values():
        for variant in ("eager", "compiled", *adapter.variants):
            assert materialised_failures(adapter, variant, [small, LARGE_SHAPES]) == [], adapter.name


def test_the_guides_dense_vjp_adapter_is_planned_too_large_instead_of_killed(capsys):
    from pathlib import Path

    from adcompare.cli.main import main

    plugin = Path(__file__).parent / "fixtures" / "thirdparty" / "numpy_fd" / "adcompare_numpy_fd.py"
    argv = ["run", "--plugin", str(plugin), "--adapter", "numpy-fd", "--problem", "tanh", "--operator", "vjp",
            "--variant", "eager", "--suite", "full", "--dtype", "float32", "--dry-run", "--json",
            "-o", "/nonexistent/none.jsonl"]
    assert main(argv) == 0
    rows = {row["cell"]["size"]: row for row in json.loads(capsys.readouterr().out)["cells"]}
    assert rows["n1000000"]["status"] == "too_large"  # a 10⁶ × 10⁶ Jacobian: 4 TB in float32
    assert rows["n100"]["status"] == "planned" and rows["n100"]["bytes"] >= 4 * 4 * 100 * 100

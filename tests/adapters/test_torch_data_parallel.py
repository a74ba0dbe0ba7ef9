"""torch's data-parallel operators (issue 26) are `unsupported` with the reason, at every device count and variant,
through `adcompare run`'s workers: no Python loop over slices is passed off as multi-device."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from adcompare.cli import main  # noqa: E402


def test_torch_refuses_data_parallel_cells_and_says_why(tmp_path, registry):
    adapter = registry.adapter("torch")
    for variant in adapter.variants:
        for operator in ("pmap_grad", "pmap_value"):
            capability = adapter.capability(operator, variant)
            assert not capability.supported
            assert "no in-process data-parallel map" in capability.reason and "gloo" in capability.reason
    out = tmp_path / "pmap.jsonl"
    code = main(["run", "--problem", "mlp_loss", "--size", "B16-h4", "--operator", "pmap_grad",
                 "--adapter", "torch", "--variant", "eager", "--devices", "1,2", "--dtype", "float32",
                 "--no-progress", "-o", str(out)])
    assert code == 0
    cells = [r for r in map(json.loads, out.read_text().splitlines()) if r.get("record") == "cell"]
    assert sorted(r["cell"].get("devices", 1) for r in cells) == [1, 2]
    for r in cells:
        assert r["status"] == "unsupported" and "torch.distributed needs D processes" in r["message"]
        assert r.get("timing") is None

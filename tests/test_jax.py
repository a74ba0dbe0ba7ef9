"""The JAX adapter through the worker: seed 001's Jacobian, every operator's shape, unsupported reasons."""
from __future__ import annotations

import numpy as np
import pytest

from adcompare.model.cell import Cell
from adcompare.model.status import Status
from adcompare.run import runner
from adcompare.run.session import run_session
from adcompare.study.plan import Plan, gpu_present

SEED_001_JACOBIAN = [[-0.8322937, 2.6645875], [2.0, -1.0], [3.0, 0.0]]


def test_seed_001_jacobian_in_both_modes_and_variants(tmp_path):
    """Runs in a worker (x64 off) and compares with the article's printed values."""
    code = (
        "import numpy as np, json\n"
        "from adcompare.plugin import registry as plugins\nfrom adcompare.plugin.adapter import Request, CellInputs\n"
        "r = plugins.load(); a = r.adapter('jax'); a.setup(dtype='float32', device='cpu', threads=1)\n"
        "p = r.problem('f_r2_r3'); x = np.array([1.0, 0.5], dtype='float32'); out = {}\n"
        "for op in ('jacfwd', 'jacrev'):\n"
        "  for v in ('eager', 'compiled'):\n"
        "    ci = CellInputs(wrt=x, constants={}, batch=None, tangent=None, cotangent=None)\n"
        "    res = a.prepare(Request(p, op, v, 'cpu', 'float32', ci)).run()\n"
        "    out[op + '/' + v] = [str(a.to_numpy(res).dtype), a.to_numpy(res).tolist()]\n"
        "print(json.dumps(out))\n"
    )
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 4
    for key, (dtype, jac) in results.items():
        assert dtype == "float32", key
        np.testing.assert_allclose(jac, SEED_001_JACOBIAN, rtol=1e-6, atol=1e-6, err_msg=key)


def test_unknown_variant_is_unsupported_with_reason(registry):
    cap = registry.adapter("jax").capability("grad", "graph")
    assert not cap.supported and "no variant 'graph'" in cap.reason


def test_cuda_device_reports_why_when_absent(registry):
    if gpu_present():
        pytest.skip("a GPU is present: the unavailable path cannot be exercised here")
    p = Plan((Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cuda", "float32"),), ())
    (m,) = run_session(registry, p, runner.RunOptions(threads=1))
    assert m.status is Status.UNSUPPORTED and "no GPU backend" in m.message


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU on this machine")
def test_jax_on_cuda_agrees_with_reference(registry):
    cells = tuple(Cell("exp_dot_loss", "n1000", op, "jax", v, "cuda", "float32")
                  for op in ("grad", "jacrev", "hvp") for v in ("eager", "compiled"))
    out = run_session(registry, Plan(cells, ()), runner.RunOptions(threads=1))
    for m in out:
        assert m.status is Status.OK, (m.cell.id, m.message)
        assert m.device_name and m.device_name != "cuda"


def test_float32_matmuls_run_in_float32_on_every_device():
    """JAX's GPU default is TF32 for float32 matmuls (error 2e-4 on linear_layer's Jacobian on an H100, over the
    1e-4 tolerance); the adapter asks for full precision so float32 cells compare AD, not matmul precision."""
    import subprocess
    import sys

    code = ("from adcompare.plugin import registry as plugins\nimport jax\n"
            "a = plugins.load().adapter('jax'); a.setup(dtype='float32', device='cpu', threads=1)\n"
            "print(jax.config.jax_default_matmul_precision)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "highest", out.stderr[-2000:]

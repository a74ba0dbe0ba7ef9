"""`pytest --benchmark-only` at the repository root runs the quick matrix through pytest-benchmark (in-process;
see adcompare/pytest_plugin.py); a plain `pytest` skips it (`--benchmark-skip` in the ini's addopts).

    pytest --benchmark-only --benchmark-json bench.json && adcompare report bench.json
    pytest --benchmark-only --adcompare-adapters jax,torch --adcompare-problems exp_dot_loss
"""
from adcompare.pytest_plugin import test_adcompare_cell  # noqa: F401  (the one line a user's project needs too)

"""`pytest --benchmark-only` runs the quick matrix through pytest-benchmark (in-process; see pytest_plugin.py).

    pytest --benchmark-only --adcompare-adapters jax,torch --benchmark-json bench.json
    adcompare report bench.json
"""


def test_cell(adcompare_cell, adcompare_measure, benchmark):
    adcompare_measure(adcompare_cell, benchmark)
